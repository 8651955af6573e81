"""Contact prediction from a protein alignment: coevolution maps, the per-family axial model, the contact head.

For one family (:func:`train_family`), :func:`~bioattn.tasks.msa_features.prepare_family` computes (1) a
random subsample of at most ``max_seqs`` rows and their 80 %-identity weights; (2) coevolution maps: mutual
information + APC and Gaussian DCA + APC on that subsample and, with ``coevolution="potts"``, a
pseudo-likelihood Potts model + APC on every row; (3) :class:`~bioattn.models.MSAContactModel` trained from
scratch by masked-token prediction on blocks of ``rows`` rows drawn by weight, early-stopped on the
masked-token loss of held-out rows (never on contacts); (4) its tied row-attention maps (symmetrised, APC,
sorted over heads) as pair features beside the coevolution maps (saved in ``features.safetensors``). Then
(5) a :class:`~bioattn.tasks.msa_head.ContactHead` fitted on *other* families turns them into contact
probabilities (:func:`score_family`). :func:`train_families` runs every family of the data root, fits the heads
leave-one-family-out and writes the results table. Predicting a new alignment lives in
:mod:`bioattn.tasks.msa_predict`.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import torch

from bioattn.data.contacts import ContactTarget, discover_families, load_target, published_predictions, write_rr
from bioattn.errors import UserInputError
from bioattn.explain.figures import plot_contact_map
from bioattn.io import save_tensors, write_json, write_text
from bioattn.explain.msa import PRECISION_NAMES
from bioattn.metrics import precision_at
from bioattn.models.msa_contact import MSAContactModel, logistic_contact_probabilities
from bioattn.report import MISSING, format_table
from bioattn.tasks.msa_features import (
    DEFAULTS, FEATURES_FILE, QUICK, MSAOptions, coevolution_maps, load_features, prepare_family, quick_config, training_pool,
)
from bioattn.tasks.msa_head import (
    COEVOLUTION_MAPS, FACTORED_ATTENTION_MAP, HEAD_FILE_NAME, ContactHead, attention_feature_names, default_head,
    describe_features, fit_head, leave_one_out_heads,
)
from bioattn.training import TrainConfig, prepare_run_dir, seed_everything
from bioattn.training.distributed import is_main_process

__all__ = [
    "DEFAULTS", "QUICK", "MSAOptions", "quick_config", "prepare_family", "contact_scores", "write_contact_outputs",
    "evaluate_family", "score_family", "train_family", "train_families", "results_table",
]

PREPARE_FILE = "prepare.json"
COEVOLUTION_HEAD_FILE_NAME = "coevolution_head.json"
#: The options that shape the coevolution maps (recorded in ``coevolution_head.json``).
COEVOLUTION_SETTINGS = ("coevolution", "max_seqs", "potts_iterations", "potts_seqs", "potts_minutes", "seed")
#: The CASP RR file lists the top ``RR_TOP_PER_RESIDUE × L`` pairs with ``|i - j| ≥ RR_MIN_SEPARATION``.
RR_MIN_SEPARATION = 6
RR_TOP_PER_RESIDUE = 2
UNCALIBRATED_REMARK = "scores are NOT calibrated probabilities: a rank-preserving logistic squashing of z-scores"


def contact_scores(
    features: Mapping[str, torch.Tensor], head: ContactHead | None, fallback: Sequence[str] = (),
) -> tuple[np.ndarray, str, bool]:
    """``(probabilities (L, L), method, calibrated)``: the head's logistic regression on the named ``features``.

    Without a head: the map ``fallback[0]`` (else the mean of the attention features) squashed by a logistic of
    its z-scores: rank-preserving and in [0, 1], but **not** calibrated probabilities.
    """
    if head is not None:
        fitted = f"fitted on {', '.join(head.fit_on)}" if head.fit_on else "fit families not recorded"
        method = f"logistic regression contact head on {describe_features(head.features)} ({fitted})"
        return head.probabilities(features).numpy(), method, True
    if fallback:
        raw, what = features[fallback[0]], fallback[0]
    else:
        raw = torch.stack([v for n, v in features.items() if n not in (*COEVOLUTION_MAPS, FACTORED_ATTENTION_MAP)]).mean(0)
        what = "mean APC'd tied attention"
    squashed = logistic_contact_probabilities(raw[..., None], torch.ones(1), 0.0)
    return squashed.numpy(), f"{what}, no contact head (uncalibrated)", False


def write_contact_outputs(
    out: Path, target: ContactTarget, probabilities: np.ndarray, method: str, calibrated: bool, *,
    top: int | None = None, min_separation: int = RR_MIN_SEPARATION,
) -> None:
    """``contacts.npy`` (L×L), ``contacts.rr`` (CASP RR, top ``top`` pairs, default 2L) and ``contact_map.png``."""
    length = probabilities.shape[0]
    np.save(out / "contacts.npy", probabilities.astype(np.float32))
    write_rr(out / "contacts.rr", probabilities, target.sequence.replace("-", "X"), target=target.name,
             method=["bioattn contact prediction", method], remarks=() if calibrated else (UNCALIBRATED_REMARK,),
             min_separation=min_separation, top=top or RR_TOP_PER_RESIDUE * length)
    title = f"{target.name}: top-L contacts (|i-j| ≥ 6)" + (" over native" if target.distances is not None else "")
    plot_contact_map(out / "contact_map.png", probabilities, target.distances, title=title)


def evaluate_family(
    target: ContactTarget, probabilities: np.ndarray, features: Mapping[str, torch.Tensor], variants: Mapping[str, np.ndarray],
) -> dict[str, Any]:
    """Long-range P@L/5, P@L/2, P@L of the prediction, the coevolution baselines, ``variants`` and published predictions."""
    distances = target.distances
    metrics: dict[str, Any] = {
        "model": precision_at(probabilities, distances),
        "baselines": {name: precision_at(features[name].numpy(), distances)
                      for name in (FACTORED_ATTENTION_MAP, *COEVOLUTION_MAPS) if name in features},
        "variants": {name: precision_at(scores, distances) for name, scores in variants.items()},
    }
    if target.predictions_dir is not None:
        metrics["published"] = {
            tool: precision_at(pred, distances)
            for tool, pred in published_predictions(target.predictions_dir, len(target.sequence)).items()
        }
    return metrics


def score_family(
    target: ContactTarget, run_dir: Path, info: dict[str, Any], options: MSAOptions, head: ContactHead | None,
    variants: Mapping[str, np.ndarray], *, top: int | None = None, min_separation: int = RR_MIN_SEPARATION,
) -> dict[str, Any]:
    """Contact probabilities of a prepared family with ``head``: outputs (:func:`write_contact_outputs`) and ``metrics.json``
    (the family's facts, the method and, with a structure, :func:`evaluate_family`). The head goes into the saved model."""
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
    write_json(run_dir / "metrics.json", metrics)
    return metrics


def single_family_head(options: MSAOptions, head: ContactHead | None, source: str | Path = "contact head") -> ContactHead | None:
    """The head of a one-family run: ``head`` (checked against the model's features), else the shipped default
    head when the run computes its features, else None (uncalibrated scores)."""
    if head is not None:
        head.require(options.model_features, source, f"this model's {len(options.model_features)}")
        return head
    shipped = default_head()
    return shipped if set(shipped.features) <= set(options.model_features) and not shipped.attention_features else None


def train_family(
    target: ContactTarget, out: Path, options: MSAOptions, config: TrainConfig, *, head: ContactHead | None = None,
    head_source: str | Path = "contact head",
) -> dict[str, Any]:
    """Train and score one family into ``out`` (see the module docstring); returns its metrics ({} off rank 0).

    ``head`` (from ``head_source``) must read features this run computes; without one the shipped default
    head is used when it applies. The head used is saved as ``out/contact_head.json``.
    """
    head = single_family_head(options, head, head_source)
    if head is None:
        print(f"warning: no contact head reads --coevolution {options.coevolution} features; contacts.rr and "
              "contacts.npy hold uncalibrated scores (give --contact-head FILE)", file=sys.stderr)
    out = prepare_run_dir(out, resume=options.resume, overwrite=options.overwrite)
    info = prepare_family(target, options, config, out, maps=options.baseline_maps)
    if not is_main_process():
        return {}
    metrics = score_family(target, out, info, options, head, {})
    if head is not None:
        head.save(out / HEAD_FILE_NAME)
    print(results_table([metrics]))
    return metrics


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
    """The prepared run directory ``out`` and the contact target of every selected family (:func:`select_families`)."""
    found = select_families(data_root, families)
    out = prepare_run_dir(out, resume=options.resume, overwrite=options.overwrite)
    return out, {name: load_target(**kwargs) for name, kwargs in found.items()}


def finished_family(run_dir: Path, options: MSAOptions) -> dict[str, Any] | None:
    """The saved ``prepare.json`` of a family already prepared in ``run_dir`` when ``options.resume``, else ``None``."""
    if options.resume and (run_dir / PREPARE_FILE).is_file() and (run_dir / FEATURES_FILE).is_file():
        return json.loads((run_dir / PREPARE_FILE).read_text())
    return None


def add_missing_maps(target: ContactTarget, run_dir: Path, info: dict[str, Any], options: MSAOptions, seed: int) -> None:
    """Compute the coevolution maps of ``options`` that a resumed family's features file lacks (no retraining)."""
    saved = load_features(run_dir)
    missing = tuple(name for name in options.baseline_maps if name not in saved)
    if not missing:
        return
    pool, weights = training_pool(target, options, seed)
    timings: dict[str, float] = {}
    save_tensors(run_dir / FEATURES_FILE, {**saved, **coevolution_maps(target, pool, weights, missing, options, seed, timings)})
    info["cpu_seconds"] = {**info["cpu_seconds"], **{k: round(v, 1) for k, v in timings.items()}}
    info["cpu_seconds"]["total"] = round(info["cpu_seconds"]["total"] + sum(timings.values()), 1)


def train_families(
    data_root: Path, out: Path, options: MSAOptions, config: TrainConfig, families: Sequence[str] | None = None,
) -> list[dict[str, Any]]:
    """Every family of the data root (or ``families``): prepare each, fit heads leave-one-family-out, score, tabulate.

    Writes one sub-folder per family, ``summary.json`` / ``summary.md``, ``contact_head.json`` (attention +
    coevolution features) and, when ``coevolution`` is not ``none``, ``coevolution_head.json`` (coevolution
    maps only: needs no model), both fitted on every family with a structure. With ``resume`` finished
    families are reused (only the coevolution maps a richer ``coevolution`` adds are computed).
    Returns the per-family metrics ([] off rank 0).
    """
    out, targets = family_targets(data_root, out, options, families)
    infos: dict[str, dict] = {}
    for name, target in targets.items():
        run_dir = out / name
        print(f"== {name}: {target.msa.depth} sequences × {target.msa.length} columns", flush=True)
        if (done := finished_family(run_dir, options)) is not None:
            infos[name] = done
            if is_main_process():
                add_missing_maps(target, run_dir, infos[name], options, config.seed)
                write_json(run_dir / PREPARE_FILE, infos[name])
            continue
        run_dir.mkdir(parents=True, exist_ok=True)
        seed_everything(config.seed)
        infos[name] = prepare_family(target, options, config, run_dir, maps=options.baseline_maps)
        if is_main_process():
            write_json(run_dir / PREPARE_FILE, infos[name])
    if not is_main_process():
        return []
    features = {name: load_features(out / name) for name in targets}
    labelled = [name for name, target in targets.items() if target.distances is not None]
    distances = {name: targets[name].distances for name in labelled}
    attention = attention_feature_names(options.layers, options.heads)
    heads, attention_heads = {}, {}
    if len(labelled) > 1:
        heads = leave_one_out_heads({n: features[n] for n in labelled}, distances, options.model_features)
        attention_heads = leave_one_out_heads({n: features[n] for n in labelled}, distances, attention)
    rows = []
    for name, target in targets.items():
        variants = {"attention_only": attention_heads[name].probabilities(features[name]).numpy()} if name in attention_heads else {}
        rows.append(score_family(target, out / name, infos[name], options, heads.get(name), variants))
    if labelled:
        settings = {**options.settings(), "max_minutes": config.max_minutes, "seed": config.seed}
        fit_head({n: features[n] for n in labelled}, distances, options.model_features, settings).save(out / HEAD_FILE_NAME)
        if options.extra_features:
            coevolution_settings = {k: v for k, v in settings.items() if k in COEVOLUTION_SETTINGS}
            fit_head({n: features[n] for n in labelled}, distances, options.extra_features,
                     coevolution_settings).save(out / COEVOLUTION_HEAD_FILE_NAME)
    table = results_table(rows, note="contact heads fitted leave-one-family-out")
    print(table)
    write_json(out / "summary.json", {"families": rows, "data_root": str(data_root), "options": options.settings(),
                                      "train": config.to_dict()})
    write_text(out / "summary.md", table + "\n")
    return rows


def _cell(values: Mapping[str, float] | None) -> str:
    """``"0.80/0.57/0.40"`` (P@L/5 / P@L/2 / P@L) or ``—``."""
    return "/".join(f"{values[k]:.2f}" for k in PRECISION_NAMES) if values else MISSING


def results_table(rows: Sequence[Mapping[str, Any]], note: str = "") -> str:
    """Markdown table of long-range P@L/5 / P@L/2 / P@L per family, with the mean P@L/5 of each column."""
    columns = {
        "model": lambda m: m.get("model"),
        "attention only": lambda m: m.get("variants", {}).get("attention_only"),
        "Potts+APC": lambda m: m.get("baselines", {}).get("potts_apc"),
        "GaussDCA+APC": lambda m: m.get("baselines", {}).get("gaussian_dca_apc"),
        "MI+APC": lambda m: m.get("baselines", {}).get("mi_apc"),
    }
    body, sums = [], {column: [] for column in [*columns, "published (best tool)"]}
    for m in rows:
        cells = []
        for column, pick in columns.items():
            values = pick(m)
            if values:
                sums[column].append(values["P@L/5"])
            cells.append(_cell(values))
        best = max((m.get("published") or {}).items(), key=lambda kv: kv[1]["P@L/5"], default=None)
        if best:
            sums["published (best tool)"].append(best[1]["P@L/5"])
        cells.append(f"{best[0]} {_cell(best[1])}" if best else MISSING)
        body.append([m["family"], m["length"], m["depth"], *cells])
    means = [f"{np.mean(values):.3f} (P@L/5, {len(values)} fam.)" if values else MISSING for values in sums.values()]
    body.append(["**mean**", "", "", *means])
    title = "Long-range (|i-j| ≥ 24) contact precision P@L/5 / P@L/2 / P@L" + (f"; {note}" if note else "")
    return format_table(["family", "L", "N", *sums], body, title=title)
