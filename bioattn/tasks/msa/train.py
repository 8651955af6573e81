"""Contact prediction from a protein alignment: one family (:func:`train_family`) or every family of a data root
(:func:`train_families`): coevolution maps, the per-family axial model, a contact head fitted on other families."""
from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import torch

from bioattn.data.contacts import ContactTarget, discover_families, load_target, published_predictions, write_rr
from bioattn.errors import UserInputError
from bioattn.io import save_tensors, write_json, write_text
from bioattn.metrics import PRECISION_NAMES, mean_std, precision_at
from bioattn.models.msa_contact import MSAContactModel, logistic_contact_probabilities
from bioattn.report import MISSING, format_mean_sd, format_table
from bioattn.tasks.driver import (
    METRICS_KEYS, Member, RunProtocol, check_metrics, member_dir_name, metrics_document, save_ensemble, seed_members,
    train_members,
)
from bioattn.tasks.msa.figures import plot_contact_map
from bioattn.tasks.msa.features import (
    DEFAULTS, FEATURES_FILE, QUICK, MSAOptions, coevolution_maps, load_features, prepare_family, quick_config, training_pool,
)
from bioattn.tasks.msa.head import (
    COEVOLUTION_MAPS, ESM_MSA_MAP, FACTORED_ATTENTION_MAP, HEAD_FILE_NAME, ContactHead, attention_feature_names, default_head,
    describe_features, fit_head, leave_one_out_heads,
)
from bioattn.training import TrainConfig, prepare_run_dir, seed_everything
from bioattn.distributed import is_main_process

__all__ = [
    "DEFAULTS", "QUICK", "MSAOptions", "quick_config", "prepare_family", "contact_scores", "write_contact_outputs",
    "evaluate_family", "score_family", "score_ensemble", "train_family", "train_families", "results_table", "seeds_table",
]

PREPARE_FILE = "prepare.json"
COEVOLUTION_HEAD_FILE_NAME = "coevolution_head.json"
#: The options that shape the coevolution maps (recorded in ``coevolution_head.json``).
COEVOLUTION_SETTINGS = ("coevolution", "max_seqs", "potts_iterations", "potts_seqs", "potts_minutes", "seed")
#: The CASP RR file lists the top ``RR_TOP_PER_RESIDUE × L`` pairs with ``|i - j| ≥ RR_MIN_SEPARATION``.
RR_MIN_SEPARATION = 6
RR_TOP_PER_RESIDUE = 2
UNCALIBRATED_REMARK = "scores are NOT calibrated probabilities: a rank-preserving logistic squashing of z-scores"
#: How tables name the coevolution baselines.
BASELINE_LABELS = {"potts_apc": "Potts+APC", "gaussian_dca_apc": "GaussDCA+APC", "mi_apc": "MI+APC"}
SEEDS_COLUMN = "seeds: P@L/5 mean ± sd"


def contact_scores(features: Mapping[str, torch.Tensor], head: ContactHead | None,
                   fallback: Sequence[str] = ()) -> tuple[np.ndarray, str, bool]:
    """``(probabilities (L, L), method, calibrated)`` of the head, else a logistic of a map's z-scores."""
    if head is not None:
        fitted = f"fitted on {', '.join(head.fit_on)}" if head.fit_on else "fit families not recorded"
        method = f"logistic regression contact head on {describe_features(head.features)} ({fitted})"
        return head.probabilities(features).numpy(), method, True
    if fallback:
        raw, what = features[fallback[0]], fallback[0]
    else:
        raw = torch.stack([v for n, v in features.items() if n not in (*COEVOLUTION_MAPS, FACTORED_ATTENTION_MAP, ESM_MSA_MAP)]).mean(0)
        what = "mean APC'd tied attention"
    squashed = logistic_contact_probabilities(raw[..., None], torch.ones(1), 0.0)
    return squashed.numpy(), f"{what}, no contact head (uncalibrated)", False


def write_contact_outputs(out: Path, target: ContactTarget, probabilities: np.ndarray, method: str, calibrated: bool, *,
                          top: int | None = None, min_separation: int = RR_MIN_SEPARATION) -> None:
    """``contacts.npy`` (L×L), ``contacts.rr`` (CASP RR, top ``top`` pairs, default 2L) and ``contact_map.png``."""
    length = probabilities.shape[0]
    np.save(out / "contacts.npy", probabilities.astype(np.float32))
    write_rr(out / "contacts.rr", probabilities, target.sequence.replace("-", "X"), target=target.name,
             method=["bioattn contact prediction", method], remarks=() if calibrated else (UNCALIBRATED_REMARK,),
             min_separation=min_separation, top=top or RR_TOP_PER_RESIDUE * length)
    title = f"{target.name}: top-L contacts (|i-j| ≥ 6)" + (" over native" if target.distances is not None else "")
    plot_contact_map(out / "contact_map.png", probabilities, target.distances, title=title)


def evaluate_family(target: ContactTarget, probabilities: np.ndarray, features: Mapping[str, torch.Tensor],
                    variants: Mapping[str, np.ndarray]) -> dict[str, Any]:
    """Long-range P@L/5, P@L/2, P@L of the prediction, the coevolution baselines, ``variants`` and published predictions."""
    distances = target.distances
    metrics: dict[str, Any] = {
        "model": precision_at(probabilities, distances),
        "baselines": {name: precision_at(features[name].numpy(), distances)
                      for name in (ESM_MSA_MAP, FACTORED_ATTENTION_MAP, *COEVOLUTION_MAPS) if name in features},
        "variants": {name: precision_at(scores, distances) for name, scores in variants.items()},
    }
    if target.predictions_dir is not None:
        metrics["published"] = {
            tool: precision_at(pred, distances)
            for tool, pred in published_predictions(target.predictions_dir, len(target.sequence)).items()
        }
    return metrics


def score_family(target: ContactTarget, run_dir: Path, info: dict[str, Any], options: MSAOptions,
                 head: ContactHead | None, variants: Mapping[str, np.ndarray], *, top: int | None = None,
                 min_separation: int = RR_MIN_SEPARATION) -> dict[str, Any]:
    """Score a prepared family with ``head``: its outputs and ``metrics.json``; the head goes into the saved model."""
    features = load_features(run_dir)
    if head is not None and (run_dir / "config.json").is_file():
        model = MSAContactModel.from_pretrained(run_dir)
        if tuple(model.config["extra_contact_features"]) != options.extra_features:  # a resumed run with another --coevolution
            model.set_extra_contact_features(options.extra_features)
        model.set_contact_head(head.weights_for(options.model_features), head.bias)
        model.save_pretrained(run_dir)
    probabilities, method, calibrated = contact_scores(features, head, options.extra_features)
    write_contact_outputs(run_dir, target, probabilities, method, calibrated, top=top, min_separation=min_separation)
    metrics = {**info, "method": method, "calibrated": calibrated}
    if target.distances is not None:
        metrics.update(evaluate_family(target, probabilities, features, variants))
    metrics = with_schema(metrics)
    write_json(run_dir / "metrics.json", metrics)
    return metrics


def with_schema(metrics: dict[str, Any], seeds: Sequence[int] | None = None) -> dict[str, Any]:
    """A family's ``metrics`` in the checked ``metrics.json`` schema (:func:`bioattn.tasks.driver.metrics_document`)."""
    metrics = {key: value for key, value in metrics.items() if key not in METRICS_KEYS}  # idempotent
    scored = {name: {"structure": values} for name, values in [
        ("model", metrics.get("model")), *metrics.get("baselines", {}).items(),
        *((f"published {tool}", values) for tool, values in metrics.get("published", {}).items())] if values}
    description = ("contacts of one family from its alignment; long-range (|i-j| >= 24) precision against its "
                   "structure" if scored else "contacts of one family from its alignment (no structure: nothing scored)")
    document = metrics_document(
        "msa", dataset=metrics.get("family"), protocol=RunProtocol(seeds=tuple(seeds) if seeds else None,
                                                                  description=description).to_dict(),
        splits={"sequences": metrics.get("depth", 0), "columns": metrics.get("length", 0)}, scores=scored,
        headline_split="structure", **metrics)
    check_metrics(document)
    return document


def _mean_precision(values: Sequence[Mapping[str, float]]) -> dict[str, float]:
    return {name: summary["mean"] for name, summary in mean_std(values).items()}


def score_ensemble(target: ContactTarget, family_dir: Path, members: Mapping[int, Mapping[str, Any]], *,
                   top: int | None = None, min_separation: int = RR_MIN_SEPARATION) -> dict[str, Any]:
    """The ensemble of a family's seeds (``members``: each seed's :func:`score_family` metrics): the mean of their
    contacts, a ``config.json`` loading ``family_dir`` as an :class:`~bioattn.models.ensemble.Ensemble`, metrics."""
    names = [member_dir_name("seed", seed) for seed in members]
    probabilities = np.mean([np.load(family_dir / name / "contacts.npy") for name in names], axis=0)  # (L, L)
    first = next(iter(members.values()))
    method = f"mean of the contact probabilities of {len(names)} seeds ({', '.join(map(str, members))}), each: {first['method']}"
    calibrated = all(m["calibrated"] for m in members.values())
    write_contact_outputs(family_dir, target, probabilities, method, calibrated, top=top, min_separation=min_separation)
    save_ensemble(family_dir, MSAContactModel.__name__, names)
    metrics: dict[str, Any] = {**{key: first[key] for key in ("family", "length", "depth", "neff") if key in first}, "method": method,
                               "calibrated": calibrated, "members": names}
    if target.distances is not None:
        per_seed = {name: m["model"] for name, m in zip(names, members.values())}
        metrics.update(model=precision_at(probabilities, target.distances), seeds=per_seed,
                       seeds_mean_sd=mean_std(list(per_seed.values())))
        for key in ("baselines", "variants"):
            metrics[key] = {name: _mean_precision([m[key][name] for m in members.values()]) for name in first[key]}
        if "published" in first:
            metrics["published"] = first["published"]
    metrics = with_schema(metrics, list(members))
    write_json(family_dir / "metrics.json", metrics)
    return metrics


def score_members(target: ContactTarget, family_dir: Path, runs: Mapping[int, Path],
                  infos: Mapping[int, dict[str, Any]], options: MSAOptions, heads: Mapping[int, ContactHead | None],
                  variants: Mapping[int, Mapping[str, np.ndarray]], *, top: int | None = None,
                  min_separation: int = RR_MIN_SEPARATION) -> dict[str, Any]:
    """:func:`score_family` for the run of each seed and, with ``options.seeds``, :func:`score_ensemble`."""
    scored = {seed: score_family(target, run_dir, infos[seed], options, heads[seed], variants.get(seed, {}), top=top,
                                 min_separation=min_separation)
              for seed, run_dir in runs.items()}
    if options.seeds is None:
        return scored[next(iter(scored))]
    return score_ensemble(target, family_dir, scored, top=top, min_separation=min_separation)


def single_family_head(options: MSAOptions, head: ContactHead | None, source: str | Path = "contact head") -> ContactHead | None:
    """``head`` checked against the model's features, else the shipped default head if it applies, else None."""
    if head is not None:
        head.require(options.model_features, source, f"this model's {len(options.model_features)}")
        return head
    shipped = default_head()
    return shipped if set(shipped.features) <= set(options.model_features) and not shipped.attention_features else None


def train_family(target: ContactTarget, out: Path, options: MSAOptions, config: TrainConfig, *,
                 head: ContactHead | None = None, head_source: str | Path = "contact head") -> dict[str, Any]:
    """Train and score one family into ``out`` (with ``options.seeds``: a run per seed and their ensemble)."""
    head = single_family_head(options, head, head_source)
    if head is None and is_main_process():  # once, not once per torchrun process
        print(f"warning: no contact head reads --coevolution {options.coevolution} features; contacts.rr and "
              "contacts.npy hold uncalibrated scores (give --contact-head FILE)", file=sys.stderr)
    out = prepare_run_dir(out, resume=options.resume, overwrite=options.overwrite)
    infos = prepare_members(target, out, options, config)
    if not is_main_process():
        return {}
    runs = member_dirs(out, options, config)
    metrics = score_members(target, out, runs, infos, options, {seed: head for seed in runs}, {})
    if head is not None:
        for run_dir in {out, *runs.values()}:
            head.save(run_dir / HEAD_FILE_NAME)
    summary = seeds_table(metrics) if options.seeds is not None else results_table([metrics])
    write_text(out / "summary.md", summary + ("\n" + NO_STRUCTURE_NOTE if target.distances is None else "") + "\n")
    return metrics


#: What ``train msa`` prints under its table of ``—`` when no structure was given.
NO_STRUCTURE_NOTE = (
    "no structure given, so no precision (—): P@L/5, P@L/2 and P@L compare the predicted contacts with the native "
    "ones, which need the query's structure. Give it with --pdb FILE [--chain ID] (PDB or mmCIF) or its distances "
    "with --struct-dat FILE; contacts.rr, contacts.npy and contact_map.png hold the prediction either way.")


def select_families(data_root: Path, names: Sequence[str] | None) -> dict[str, dict]:
    """``load_target`` arguments of the families under ``data_root`` (all, or ``names`` in that order)."""
    found = discover_families(data_root)
    if not found:
        raise UserInputError(f"{data_root}: no families under msa/coev or msa/pfam")
    if not names:
        return found
    unknown = [n for n in names if n not in found]
    if unknown:
        raise UserInputError(f"--families: unknown {', '.join(unknown)}; available: {', '.join(found)}")
    return {name: found[name] for name in names}


def family_targets(data_root: Path, out: Path, options: MSAOptions, families: Sequence[str] | None
                   ) -> tuple[Path, dict[str, ContactTarget]]:
    """The prepared run directory ``out`` and the contact target of every selected family."""
    found = select_families(data_root, families)
    out = prepare_run_dir(out, resume=options.resume, overwrite=options.overwrite)
    return out, {name: load_target(**kwargs) for name, kwargs in found.items()}


def finished_family(run_dir: Path, options: MSAOptions) -> dict[str, Any] | None:
    """The saved ``prepare.json`` of a family already prepared in ``run_dir`` when ``options.resume``, else ``None``."""
    if options.resume and (run_dir / PREPARE_FILE).is_file() and (run_dir / FEATURES_FILE).is_file():
        return json.loads((run_dir / PREPARE_FILE).read_text())
    return None


def member_dirs(family_dir: Path, options: MSAOptions, config: TrainConfig) -> dict[int, Path]:
    """Run directory of each model of a family by seed: ``family_dir/seed<S>``, or ``family_dir`` for one model."""
    return {member.index: member.run_dir for member in seed_members(family_dir, options.seeds, config.seed)}


def seed_independent_maps(target: ContactTarget, options: MSAOptions) -> tuple[str, ...]:
    """The coevolution maps of ``options`` that every seed computes alike (fitted on every row)."""
    depth = target.msa.depth
    every_row = {"mi_apc": options.max_seqs >= depth, "gaussian_dca_apc": options.max_seqs >= depth,
                 "potts_apc": options.potts_seqs == 0 or options.potts_seqs >= depth}
    return tuple(name for name in options.baseline_maps if every_row[name])


def add_missing_maps(target: ContactTarget, run_dir: Path, info: dict[str, Any], options: MSAOptions, seed: int,
                     shared: dict[str, torch.Tensor]) -> None:
    """Add the coevolution maps a prepared run lacks (from ``shared``, another seed's, or computed); share its own."""
    saved = load_features(run_dir)
    missing = [name for name in options.baseline_maps if name not in saved]
    added = {name: shared[name] for name in missing if name in shared}
    if added:
        info["maps_from_another_seed"] = sorted({*info.get("maps_from_another_seed", ()), *added})
    computed = tuple(name for name in missing if name not in shared)
    if computed:
        pool, weights = training_pool(target, options, seed)
        timings: dict[str, float] = {}
        added.update(coevolution_maps(target, pool, weights, computed, options, seed, timings))
        info["cpu_seconds"] = {**info["cpu_seconds"], **{k: round(v, 1) for k, v in timings.items()}}
        info["cpu_seconds"]["total"] = round(info["cpu_seconds"]["total"] + sum(timings.values()), 1)
    features = {**saved, **added}
    if added:
        save_tensors(run_dir / FEATURES_FILE, features)
    shared.update({name: features[name] for name in seed_independent_maps(target, options)})


def prepare_members(target: ContactTarget, family_dir: Path, options: MSAOptions, config: TrainConfig) -> dict[int, dict[str, Any]]:
    """Prepare the run of each seed of one family, seed-independent maps computed once; ``{seed: info}``."""
    infos: dict[int, dict[str, Any]] = {}
    shared: dict[str, torch.Tensor] = {}

    def prepare(member: Member) -> None:
        seed, run_dir = member.index, member.run_dir
        info = finished_family(run_dir, options)
        if info is None:
            run_dir.mkdir(parents=True, exist_ok=True)
            seed_everything(seed)
            maps = tuple(name for name in options.baseline_maps if name not in shared)
            info = prepare_family(target, options, dataclasses.replace(config, seed=seed), run_dir, maps=maps)
        if is_main_process():
            add_missing_maps(target, run_dir, info, options, seed, shared)
            write_json(run_dir / PREPARE_FILE, info)
            infos[seed] = info

    train_members(seed_members(family_dir, options.seeds, config.seed), prepare)
    return infos


def train_families(data_root: Path, out: Path, options: MSAOptions, config: TrainConfig,
                   families: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """Every family of the data root (or ``families``): prepare, fit heads leave-one-family-out, score, tabulate;
    ``contact_head.json`` and ``coevolution_head.json`` fitted on every family. Returns the rows ([] off rank 0)."""
    out, targets = family_targets(data_root, out, options, families)
    infos: dict[str, dict[int, dict]] = {}
    for name, target in targets.items():
        if is_main_process():  # once, not once per torchrun process
            print(f"== {name}: {target.msa.depth} sequences × {target.msa.length} columns", flush=True)
        infos[name] = prepare_members(target, out / name, options, config)
    if not is_main_process():
        return []
    runs = {name: member_dirs(out / name, options, config) for name in targets}
    seeds = options.seeds or (config.seed,)
    features = {name: {seed: load_features(run_dir) for seed, run_dir in runs[name].items()} for name in targets}
    labelled = [name for name, target in targets.items() if target.distances is not None]
    distances = {name: targets[name].distances for name in labelled}
    attention = attention_feature_names(options.layers, options.heads)
    heads: dict[int, dict[str, ContactHead]] = {seed: {} for seed in seeds}
    attention_heads: dict[int, dict[str, ContactHead]] = {seed: {} for seed in seeds}
    if len(labelled) > 1:
        for seed in seeds:  # each seed's models get heads fitted on the same seed's models of the other families
            heads[seed] = leave_one_out_heads({n: features[n][seed] for n in labelled}, distances, options.model_features)
            attention_heads[seed] = leave_one_out_heads({n: features[n][seed] for n in labelled}, distances, attention)
    rows = []
    for name, target in targets.items():
        variants = {seed: {"attention_only": attention_heads[seed][name].probabilities(features[name][seed]).numpy()}
                    for seed in seeds if name in attention_heads[seed]}
        rows.append(score_members(target, out / name, runs[name], infos[name], options,
                                  {seed: heads[seed].get(name) for seed in seeds}, variants))
    if labelled:
        keys = {(name, seed): name if options.seeds is None else f"{name}/{runs[name][seed].name}"
                for name in labelled for seed in seeds}
        fit_features = {key: features[name][seed] for (name, seed), key in keys.items()}
        fit_distances = {key: distances[name] for (name, _), key in keys.items()}
        settings = {**options.settings(), "max_minutes": config.max_minutes, "seed": config.seed}
        fit_head(fit_features, fit_distances, options.model_features, settings).save(out / HEAD_FILE_NAME)
        if options.extra_features:
            coevolution_settings = {k: v for k, v in settings.items() if k in COEVOLUTION_SETTINGS}
            fit_head(fit_features, fit_distances, options.extra_features, coevolution_settings).save(out / COEVOLUTION_HEAD_FILE_NAME)
    note = "contact heads fitted leave-one-family-out"
    if options.seeds is not None:
        note += f"; model: the ensemble of seeds {', '.join(map(str, seeds))} (mean probability)"
    table = results_table(rows, note=note)
    write_json(out / "summary.json", {"families": rows, "data_root": str(data_root), "options": options.settings(),
                                      "train": config.to_dict()})
    write_text(out / "summary.md", table + "\n")
    return rows


def _cell(values: Mapping[str, float] | None) -> str:
    """``"0.80/0.57/0.40"`` (P@L/5 / P@L/2 / P@L) or ``—``."""
    return "/".join(f"{values[k]:.2f}" for k in PRECISION_NAMES) if values else MISSING


def _best_published(metrics: Mapping[str, Any]) -> tuple[str, Mapping[str, float]] | None:
    """``(tool, its precision)`` of the published prediction with the best P@L/5, or None."""
    return max((metrics.get("published") or {}).items(), key=lambda kv: kv[1]["P@L/5"], default=None)


def results_table(rows: Sequence[Mapping[str, Any]], note: str = "") -> str:
    """Markdown table of long-range P@L/5 / P@L/2 / P@L per family, with the mean P@L/5 of each column."""
    columns = {
        "model": lambda m: m.get("model"), "attention only": lambda m: m.get("variants", {}).get("attention_only"),
        **{label: (lambda m, name=name: m.get("baselines", {}).get(name)) for name, label in BASELINE_LABELS.items()},
    }
    seeded = [SEEDS_COLUMN] if any("seeds_mean_sd" in m for m in rows) else []
    body, sums = [], {column: [] for column in ["model", *seeded, *list(columns)[1:], "published (best tool)"]}
    for m in rows:
        cells = {}
        for column, pick in columns.items():
            values = pick(m)
            if values:
                sums[column].append(values["P@L/5"])
            cells[column] = _cell(values)
        if seeded:
            spread = m.get("seeds_mean_sd", {}).get("P@L/5")
            if spread:
                sums[SEEDS_COLUMN].append(spread["mean"])
            cells[SEEDS_COLUMN] = format_mean_sd(spread, 2)
        best = _best_published(m)
        if best:
            sums["published (best tool)"].append(best[1]["P@L/5"])
        cells["published (best tool)"] = f"{best[0]} {_cell(best[1])}" if best else MISSING
        body.append([m["family"], m["length"], m["depth"], *(cells[column] for column in sums)])
    means = [f"{np.mean(values):.3f} (P@L/5, {len(values)} fam.)" if values else MISSING for values in sums.values()]
    body.append(["**mean**", "", "", *means])
    title = "Long-range (|i-j| ≥ 24) contact precision P@L/5 / P@L/2 / P@L" + (f"; {note}" if note else "")
    return format_table(["family", "L", "N", *sums], body, title=title)


def seeds_table(metrics: Mapping[str, Any]) -> str:
    """Markdown table of one family's ``--seeds`` run: each seed, their mean ± sd, the ensemble, the baselines."""
    def cells(values: Mapping[str, float] | None) -> list[Any]:
        return [values[k] if values else MISSING for k in PRECISION_NAMES]

    seeds, spread = metrics.get("seeds", {}), metrics.get("seeds_mean_sd", {})
    rows = [[name, *cells(seeds.get(name))] for name in metrics["members"]]
    rows.append(["mean ± sd over seeds", *(format_mean_sd(spread.get(k), 2) for k in PRECISION_NAMES)])
    rows.append([f"ensemble of {len(metrics['members'])} seeds", *cells(metrics.get("model"))])
    baselines = metrics.get("baselines", {})
    rows += [[label, *cells(baselines[name])] for name, label in BASELINE_LABELS.items() if name in baselines]
    best = _best_published(metrics)
    if best:
        rows.append([f"published: {best[0]}", *cells(best[1])])
    title = f"{metrics['family']} (L {metrics['length']}, N {metrics['depth']}): long-range (|i-j| ≥ 24) contact precision"
    return format_table(["model", *PRECISION_NAMES], rows, digits=2, title=title)
