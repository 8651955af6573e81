"""``bioattn train variants``: fit a variant-effect head on a release of measured variant effects (the CAGI5
supervised protocol) and cross-validate it against same-run baselines.

Folds are grouped by blocks of ``block`` positions within each element; each fitted path (:data:`FITTED`) is an
``ElasticNetCV`` without intercept on standardised features and element-centred effects, compared with the raw
deltas (:data:`RAW`). The best fitted path is refitted on the whole release and saved as the head. The hooks of the
shared driver (``TASK.run``) are :func:`prepare`, :func:`protocol`, :func:`members`, :func:`fit`,
:func:`held_out`, :func:`report` and :func:`write_out_of_fold`; cell types: :mod:`bioattn.tasks.variants.cell_types`.
"""
from __future__ import annotations

import os
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from bioattn.errors import UserInputError
from bioattn.tasks.base import FittedMember, TaskData
from bioattn.tasks.variants.cell_types import (MATCHED, describe_matches, matched_features, matched_outputs,
                                               read_cell_types_file, summary_lines, training_cell_types)
from bioattn.tasks.variants.evaluate import CONFIDENT, header_fields, per_element, summarise
from bioattn.tasks.variants.head import NEARBY, model_features, nearby_features
from bioattn.tasks.variants.kmer import KmerRidge
from bioattn.tasks.variants.predict import open_reference
from bioattn.tasks.variants.records import read_variants
from bioattn.tasks.variants.score import allele_scores, as_dna_model, how_scored

FITTED = ("head", "activity_only", "delta_only", "no_model", "kmer_head")
RAW = ("activity_delta", "kmer_delta")


@dataclass
class VariantTrainOptions:
    """What ``bioattn train variants`` takes (see its ``--help``)."""

    activity_model: str
    reference: Path
    input: Path
    out: Path
    activity_name: str | None = None
    kmer_train: Sequence[Path] = ()
    folds: int = 5
    block: int = 16
    bandwidth: float = 6.0
    radius: int = 24
    ism_radius: int = 4
    offsets: Sequence[int] | None = None
    strands: str = "auto"
    gene_orientation: bool = True
    cell_types: Path | None = None
    seed: int = 0
    overwrite: bool = False
    device: str = "cpu"
    paths: Sequence[str] = field(default_factory=lambda: FITTED)

    def __post_init__(self) -> None:
        if self.folds < 2:
            raise UserInputError(f"--folds must be >= 2, got {self.folds}")
        unknown = [p for p in self.paths if p not in FITTED]
        if unknown:
            raise UserInputError(f"unknown path {unknown[0]!r}; known: {', '.join(FITTED)}")


def _fit(x: np.ndarray, y: np.ndarray, groups: np.ndarray, seed: int) -> Any:
    """ElasticNetCV without intercept on standardised features ``x`` and element-centred effects ``y``."""
    from sklearn.linear_model import ElasticNetCV
    from sklearn.model_selection import GroupKFold
    inner = list(GroupKFold(n_splits=min(5, len(np.unique(groups))), shuffle=True, random_state=seed).split(x, y, groups))
    return ElasticNetCV(l1_ratio=[0.1, 0.5, 0.9, 1.0], alphas=30, cv=inner, max_iter=20000, fit_intercept=False,
                        random_state=seed).fit(x, y)


def _stats(values: np.ndarray) -> tuple[float, float]:
    sd = float(np.std(values))
    return float(np.mean(values)), sd if sd > 0 else 1.0


def _standardised(columns: dict[str, np.ndarray]) -> tuple[dict[str, np.ndarray], dict[str, tuple[float, float]]]:
    """Each column standardised over all rows, and the ``(mean, sd)`` of each."""
    stats = {name: _stats(values) for name, values in columns.items()}
    return {name: (values - stats[name][0]) / stats[name][1] for name, values in columns.items()}, stats


def _centred(y: np.ndarray, elements: np.ndarray) -> np.ndarray:
    """``y`` minus its mean within each element (the head predicts effects relative to the element's mean)."""
    out = y.astype(np.float64).copy()
    for name in np.unique(elements):
        rows = elements == name
        out[rows] -= out[rows].mean()
    return out


def _read_kmer_training(paths: Sequence[Path]) -> tuple[list[str], np.ndarray]:
    """Sequences and values of activity files (a ``seq``/``sequence`` column and a numeric one), shared constant
    flanks removed."""
    import pandas as pd
    sequences, values = [], []
    for path in paths:
        if not Path(path).is_file():
            raise UserInputError(f"{path}: k-mer baseline training file not found")
        table = pd.read_csv(path, sep="\t" if str(path).endswith((".tsv", ".tsv.gz")) else ",")
        column = next((c for c in table.columns if c.lower() in ("seq", "sequence")), None)
        numeric = [c for c in table.columns if c != column and pd.api.types.is_numeric_dtype(table[c])]
        if column is None or not numeric:
            raise UserInputError(f"{path}: needs a seq/sequence column and a numeric value column")
        sequences += [s.upper() for s in table[column].astype(str)]
        values += list(table[numeric[0]].astype(float))
    prefix = os.path.commonprefix(sequences)
    suffix = os.path.commonprefix([s[::-1] for s in sequences])[::-1]
    if len(prefix) >= 10 or len(suffix) >= 10:
        sequences = [s[len(prefix) if len(prefix) >= 10 else 0 : len(s) - (len(suffix) if len(suffix) >= 10 else 0)]
                     for s in sequences]
    return sequences, np.asarray(values)


def _feature_sets(names: list[str], outputs: Sequence[str] = ()) -> dict[str, list[str]]:
    """The features of each fitted path (delta_only: every output's delta and ``delta_matched`` when matched)."""
    delta = [names[0]]
    if "delta" + MATCHED in names:
        delta = [f"delta_{o}" for o in outputs] + ["delta" + MATCHED]
    return {"head": names + list(NEARBY), "activity_only": list(names), "delta_only": delta, "no_model": list(NEARBY),
            "kmer_head": ["kmer_delta", *NEARBY]}


def prepare(options: VariantTrainOptions) -> tuple[VariantTrainOptions, Any]:
    """The driver's ``prepare``: the run directory checked, the release read and every measured variant's
    features (:func:`~bioattn.tasks.variants.head.model_features`, matched features, the k-mer ridge's delta)."""
    import pandas as pd

    from bioattn.distributed import resolve_device
    from bioattn.models.registry import load_pretrained, resolve_model_dir
    options.device = str(resolve_device(options.device))
    out = Path(options.out)
    if out.exists() and any(out.iterdir()) and not options.overwrite:
        raise UserInputError(f"{out}: exists and is not empty; choose another --out or pass --overwrite")
    activity_dir = resolve_model_dir(options.activity_model)
    activity = load_pretrained(options.activity_model, map_location=options.device)
    dna = as_dna_model(activity)
    outputs = [str(o) for o in dna.target_names]
    with open_reference(options.reference) as fasta:
        headers = header_fields(fasta)
        from_file = (read_cell_types_file(options.cell_types, list(fasta.keys()))
                     if options.cell_types is not None else {})
        found = read_variants(options.input, fasta, keep_duplicates=True)  # measured replicates are data
        cell_types = training_cell_types(found.variants, headers, from_file)  # checked before anything is scored
        keep = np.isfinite(np.array([v.effect for v in found.variants]))
        if not keep.any():
            raise UserInputError(f"{options.input}: no measured effects (an EFFECT INFO field or an effect column)")
        variants = [v for v, k in zip(found.variants, keep) if k]
        reversed_contigs = ([n for n, h in headers.items() if h.get("gene_strand") == "-"]
                            if options.gene_orientation else [])
        reverse = set(reversed_contigs).__contains__
        names, x_model, _, _ = model_features(activity, fasta, variants, offsets=options.offsets,
                                              strands=options.strands, reverse=reverse, ism_radius=options.ism_radius,
                                              progress=True)
        matched: dict[str, str | None] | None = None
        if len(outputs) > 1:
            matched = matched_outputs({e: c for e, (c, _) in cell_types.items()}, outputs)
            extra_names, extra_x = matched_features(names, x_model, outputs, [matched.get(v.chrom) for v in variants])
            names, x_model = names + extra_names, np.column_stack([x_model, extra_x])
        elif options.cell_types is not None:
            print(f"note: --cell-types {options.cell_types}: the activity model has one output "
                  f"({outputs[0]}); cell types are not used", file=sys.stderr)
        kmer_delta = None
        if options.kmer_train:
            sequences, values = _read_kmer_training(options.kmer_train)
            ridge = KmerRidge(dna.input_length).fit(sequences, values)
            k = allele_scores(ridge, fasta, variants, offsets=options.offsets, strands="forward", reverse=reverse,
                              progress=True)
            kmer_delta = (k.mean(k.alt) - k.mean(k.ref))[:, 0]
    table = pd.DataFrame({"chrom": [v.chrom for v in variants], "pos": [v.pos for v in variants],
                          "ref": [v.ref for v in variants], "alt": [v.alt for v in variants],
                          "effect": [v.effect for v in variants], "conf": [v.conf for v in variants]})
    table["group"] = table["chrom"] + ":" + ((table["pos"] - 1) // options.block).astype(str)
    features = dict(zip(names, x_model.T))
    paths = [p for p in options.paths if p != "kmer_head" or kmer_delta is not None]
    if kmer_delta is not None:
        features["kmer_delta"] = kmer_delta
    standard, _ = _standardised(features)  # label-free: standardised over every release variant
    data = TaskData(train=table, pool=table, seed=options.seed, target_names=["effect"],
                    source=Path(options.input).name)
    data.extra.update(activity=activity, activity_dir=activity_dir, headers=headers, names=names, features=features,
                      standard=standard, kmer_delta=kmer_delta, reversed_contigs=reversed_contigs, paths=paths,
                      sets=_feature_sets(names, outputs), outputs=outputs, cell_types=cell_types, matched=matched)
    return options, data


def protocol(options: VariantTrainOptions) -> Any:
    """The run's :class:`~bioattn.tasks.driver.RunProtocol`: ``options.folds``-fold cross-validation."""
    from bioattn.tasks.driver import RunProtocol
    return RunProtocol(cv=options.folds, description=(
        f"{options.folds}-fold cross-validation within the release, grouped by blocks of {options.block} "
        "positions within each element; Pearson per element, averaged over elements"))


def members(options: VariantTrainOptions, data: Any) -> list[Any]:
    """One fold member per split of a shuffled ``GroupKFold`` over the blocks (the fold heads are not saved)."""
    from sklearn.model_selection import GroupKFold

    from bioattn.tasks.driver import cv_members
    table = data.pool
    y = table["effect"].to_numpy()
    splitter = GroupKFold(n_splits=options.folds, shuffle=True, random_state=options.seed)
    return cv_members(None, list(splitter.split(y, y, table["group"].to_numpy())))


def fit(options: VariantTrainOptions, data: Any, member: Any) -> Any:
    """Each fitted path on the fold's training rows (nearby effects from the training variants): ``model``
    ``{path: ElasticNetCV}``, ``extra["held_out_x"]`` each path's held-out features."""
    table, train, test = data.pool, member.train_index, member.held_out_index
    y = table["effect"].to_numpy()
    groups = table["group"].to_numpy()
    nearby = nearby_features(table["chrom"].to_numpy(), table["pos"].to_numpy(), table["alt"].to_numpy(),
                             table.iloc[train], bandwidth=options.bandwidth, radius=options.radius, block=options.block)
    columns = dict(data.extra["standard"])
    columns.update(_standardised({name: nearby[:, k] for k, name in enumerate(NEARBY)})[0])
    target = _centred(y[train], table["chrom"].to_numpy()[train])
    nets, held_out_x = {}, {}
    for path in data.extra["paths"]:
        x = np.column_stack([columns[n] for n in data.extra["sets"][path]])
        nets[path] = _fit(x[train], target, groups[train], options.seed)
        held_out_x[path] = x[test]
    return FittedMember(model=nets, summary={}, extra={"held_out_x": held_out_x})


def held_out(fitted: Any) -> dict[str, np.ndarray]:
    """A fold's out-of-fold predictions, by path."""
    return {path: net.predict(fitted.extra["held_out_x"][path]) for path, net in fitted.model.items()}


def report(options: VariantTrainOptions, data: Any, run_protocol: Any, run: Any) -> tuple[dict[str, Any], str]:
    """Every path scored per element, the best fitted path refitted on the whole release and saved as the head in
    ``options.out``, and ``(metrics.json's document, summary.md's text)``."""
    from bioattn.models.variant_head import ACTIVITY_FOLDER, VariantEffectHead
    from bioattn.tasks.driver import metrics_document
    out = Path(options.out)
    table, extra = data.pool, data.extra
    names, features, kmer_delta, paths, sets = (extra["names"], extra["features"], extra["kmer_delta"],
                                                extra["paths"], extra["sets"])
    predictions = {path: run.out_of_fold.probabilities[path] for path in paths}
    predictions["activity_delta"] = features["delta" if "delta" in features else names[0]]
    matched = extra["matched"]
    if matched is not None:  # several outputs: the matched output's delta where an element has one
        has_match = np.array([matched.get(e) is not None for e in table["chrom"]])
        predictions["activity_delta"] = np.where(has_match, features["delta" + MATCHED], features[names[0]])
    if kmer_delta is not None:
        predictions["kmer_delta"] = kmer_delta
    extra["predictions"] = predictions
    elements = table["chrom"].to_numpy()
    types = {n: h.get("type", "other") for n, h in extra["headers"].items()}
    conf = table["conf"].fillna(1.0).to_numpy()
    results = {}
    for path, predicted in predictions.items():
        per = per_element(elements, predicted, table["effect"].to_numpy(), conf)
        results[path] = {"per_element": per, "mean": summarise(per, types)}
    best = max(paths, key=lambda p: results[p]["mean"]["all"]["pearson"])
    nearby_all = nearby_features(elements, table["pos"].to_numpy(), table["alt"].to_numpy(), table,
                                 bandwidth=options.bandwidth, radius=options.radius, block=options.block)
    raw = dict(features)
    raw.update({n: nearby_all[:, k] for k, n in enumerate(NEARBY)})
    columns, stats = _standardised(raw)
    if best == "kmer_head":  # a head needs an activity model's features; fall back to the best activity path
        best_head = max((p for p in paths if p != "kmer_head"), key=lambda p: results[p]["mean"]["all"]["pearson"])
    else:
        best_head = best
    chosen = sets[best_head]
    net = _fit(np.column_stack([columns[n] for n in chosen]), _centred(table["effect"].to_numpy(), elements),
               table["group"].to_numpy(), options.seed)
    reversed_contigs = extra["reversed_contigs"]
    head = VariantEffectHead(feature_names=chosen, activity_model=options.activity_name or str(options.activity_model),
                             activity_copy=True, offsets=options.offsets, strands=options.strands,
                             reversed_contigs=reversed_contigs, bandwidth=options.bandwidth, radius=options.radius,
                             block=options.block, path_name=best_head, ism_radius=options.ism_radius,
                             **({} if matched is None else {
                                 "cell_types": {e: c for e, (c, _) in extra["cell_types"].items()},
                                 "matched_outputs": matched}))
    head.set_linear(np.array([stats[n][0] for n in chosen]), np.array([stats[n][1] for n in chosen]), net.coef_, 0.0)
    head.release = table
    if out.exists() and options.overwrite:
        shutil.rmtree(out)
    out.mkdir(parents=True, exist_ok=True)
    head.save_pretrained(out)
    shutil.copytree(extra["activity_dir"], out / ACTIVITY_FOLDER,
                    ignore=shutil.ignore_patterns("*.png", "events.*", "checkpoint*"))
    how = how_scored(extra["activity"], options.offsets, options.strands, reversed_contigs)
    order = [best_head, *(p for p in paths if p != best_head)]  # the saved head first: the run's model
    scores = {path: {{"all": "cv"}.get(group, f"cv_{group}"): values for group, values in results[path]["mean"].items()}
              for path in order}
    metrics = metrics_document(
        "variants", dataset=data.source,
        protocol=run_protocol.to_dict(
            grouped_by=f"blocks of {options.block} positions within each element", confident=CONFIDENT, windows=how,
            seed=options.seed),
        splits={"variants": len(table), "elements": int(table["chrom"].nunique())}, scores=scores,
        target_names=data.target_names, headline_split="cv",
        activity_model=options.activity_name or str(options.activity_model), features=names, paths=results,
        best_path=best, saved_path=best_head, saved_coefficients=dict(zip(chosen, map(float, net.coef_))),
        alpha=float(net.alpha_), l1_ratio=float(net.l1_ratio_), variants=len(table),
        **({} if matched is None else {"cell_types": describe_matches(table["chrom"].tolist(), extra["cell_types"],
                                                                      extra["outputs"])}))
    return metrics, summary_markdown(metrics)


def write_out_of_fold(options: VariantTrainOptions, data: Any) -> None:
    """``out_of_fold.tsv`` (the release's rows, each path's out-of-fold prediction) and ``features.tsv`` (the
    release's rows, every label-free feature before standardisation)."""
    from bioattn.io import write_table
    for name, columns in (("out_of_fold.tsv", data.extra["predictions"]), ("features.tsv", data.extra["features"])):
        table = data.pool[["chrom", "pos", "ref", "alt", "effect", "conf", "group"]].copy()
        for column, values in columns.items():
            table[column] = values
        write_table(Path(options.out) / name, list(table.columns), table.itertuples(index=False, name=None))


def summary_markdown(metrics: dict[str, Any]) -> str:
    """The run's results as Markdown tables: mean over promoters / enhancers per path, then per element."""
    paths = metrics["paths"]
    lines = [f"# Variant-effect head: {metrics['variants']} variants, {metrics['protocol']['cv_folds']}-fold CV "
             f"({metrics['protocol']['grouped_by']})", "", f"Windows: {metrics['protocol']['windows']}.", "",
             f"Best cross-validated path: **{metrics['best_path']}**; saved head: {metrics['saved_path']}.", "",
             "| path | promoters r | promoters ρ | promoters r (conf) | enhancers r | enhancers ρ | enhancers r (conf) |",
             "|---|---|---|---|---|---|---|"]
    for path, result in paths.items():
        m = result["mean"]
        p, e = m.get("promoter", {}), m.get("enhancer", {})
        cells = [p.get("pearson"), p.get("spearman"), p.get("pearson_conf"), e.get("pearson"), e.get("spearman"),
                 e.get("pearson_conf")]
        lines.append(f"| {path} | " + " | ".join("—" if c is None else f"{c:.3f}" for c in cells) + " |")
    lines += ["", "Per element (Pearson r all / confident):", "", "| element | n | " + " | ".join(paths) + " |",
              "|---|---|" + "---|" * len(paths)]
    first = next(iter(paths.values()))["per_element"]
    for element, row in first.items():
        cells = [f"{paths[p]['per_element'][element]['pearson']:.3f} / {paths[p]['per_element'][element]['pearson_conf']:.3f}"
                 for p in paths]
        lines.append(f"| {element} | {row['n']} | " + " | ".join(cells) + " |")
    if "cell_types" in metrics:
        lines += summary_lines(metrics["cell_types"])
    return "\n".join(lines) + "\n"


def result_lines(metrics: dict[str, Any], out: Path) -> str:
    """What ``bioattn train variants`` prints after the run."""
    lines = []
    for path, result in metrics["paths"].items():
        m = result["mean"]
        cells = ", ".join(f"{group} r={m[group]['pearson']:.3f} (conf {m[group]['pearson_conf']:.3f})"
                          for group in ("promoter", "enhancer", "all") if group in m)
        lines.append(f"{path}: {cells}")
    lines.append(f"best path: {metrics['best_path']}; saved head ({metrics['saved_path']}) in {out}")
    return "\n".join(lines)
