"""Contacts of a new alignment, no structure needed: fit what the contact head reads, write its probabilities.

The head (shipped with bioattn for each ``--method``, a ``contact_head.json``, or the head of a ``bioattn train
msa`` run) decides what is fitted on the alignment: factored attention
(:class:`~bioattn.models.factored_attention.FactoredAttention`) when it reads ``factored_attention_apc``, the
Potts model (and/or Gaussian DCA, MI) when it reads those maps, and the per-family
:class:`~bioattn.models.MSAContactModel` (with the layers × heads of the head's attention features) when it reads
attention. A structure, when given, is used for evaluation only: the cheap MI and Gaussian DCA baselines are then
computed too, unless the head reads no coevolution map (``--method attention`` computes no coevolution statistic).
"""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from bioattn.data.contacts import ContactTarget
from bioattn.errors import UserInputError
from bioattn.models.base import CONFIG_NAME
from bioattn.models.ensemble import ENSEMBLE_TYPE
from bioattn.report import format_table
from bioattn.tasks.msa import PRECISION_NAMES, RR_MIN_SEPARATION, score_family
from bioattn.tasks.msa_features import MSAOptions, prepare_family
from bioattn.tasks.msa_head import HEAD_FILE_NAME, ContactHead, describe_features
from bioattn.training import TrainConfig, prepare_run_dir

#: ``bioattn predict msa``'s ``--method`` when no head is given. Measured on the bundled families (README): the
#: combined head, chosen leave-one-family-out, picked the Potts map alone, and factored attention alone ranked
#: below it, so ``potts`` is as precise as ``combined`` at half its CPU.
DEFAULT_METHOD = "potts"
#: Cheap baselines computed beside the head's maps when a structure allows evaluating them.
EVALUATION_BASELINES = ("mi_apc", "gaussian_dca_apc")


def run_head(run_dir: Path) -> tuple[ContactHead, dict[str, Any]]:
    """The contact head of a ``bioattn train msa`` run and the size (``embed_dim``, ``dropout``) of its model (of the
    first member of a ``--seeds`` ensemble: they share one size)."""
    head_file = run_dir / HEAD_FILE_NAME
    if not head_file.is_file():
        raise UserInputError(f"{run_dir}: no {HEAD_FILE_NAME} (not a bioattn train msa run, or a one-family run "
                             "without a contact head); give --contact-head FILE instead")
    head = ContactHead.load(head_file)
    configs = [run_dir / CONFIG_NAME, *sorted(run_dir.glob(f"*/{CONFIG_NAME}"))]
    found = next((path for path in configs if path.is_file()), None)
    if found is None:
        return head, {}
    try:
        config = json.loads(found.read_text())
        if config.get("model_type") == ENSEMBLE_TYPE:
            found = found.parent / config["members"][0] / CONFIG_NAME
            config = json.loads(found.read_text())
        return head, {"embed_dim": int(config["embed_dim"]), "dropout": float(config["dropout"])}
    except (OSError, json.JSONDecodeError, AttributeError, IndexError, KeyError, TypeError, ValueError) as exc:
        raise UserInputError(f"{found}: not the config.json of an MSAContactModel ({exc})") from exc


def head_options(head: ContactHead, options: MSAOptions) -> MSAOptions:
    """``options`` with the model size (layers × heads) and ``coevolution`` of the features ``head`` reads."""
    shape = head.attention_shape()
    changes: dict[str, Any] = {"coevolution": head.coevolution}
    if shape is not None:
        changes.update(layers=shape[0], heads=shape[1])
    return dataclasses.replace(options, **changes)


def predict_contacts(
    target: ContactTarget, out: Path, options: MSAOptions, config: TrainConfig, head: ContactHead, *,
    top: int | None = None, min_separation: int = RR_MIN_SEPARATION,
) -> dict[str, Any]:
    """Fit what ``head`` reads on ``target``'s alignment and write its contact probabilities into ``out``.

    Writes ``contacts.npy`` (L×L probabilities), ``contacts.rr`` (CASP RR: the top ``top`` pairs, default 2L, with
    ``|i-j| ≥ min_separation``), ``contact_map.png``, ``features.safetensors``, ``contact_head.json`` (the head
    used), ``metrics.json`` (the alignment's facts, CPU times and, when ``target`` has distances, long-range
    P@L/5, P@L/2, P@L of the prediction and of the maps computed) and, when the head reads
    attention, the trained model. Returns the ``metrics.json`` content.
    """
    options = head_options(head, options)
    maps = list(head.coevolution_features)
    if target.distances is not None and maps:
        maps += [name for name in EVALUATION_BASELINES if name not in maps]
    out = prepare_run_dir(out, resume=options.resume, overwrite=options.overwrite)
    info = prepare_family(target, options, config, out, maps=maps, with_model=bool(head.attention_features),
                          factored=head.reads_factored_attention)
    metrics = score_family(target, out, info, options, head, {}, top=top, min_separation=min_separation)
    head.save(out / HEAD_FILE_NAME)
    return metrics


def prediction_report(metrics: dict[str, Any], head: ContactHead) -> str:
    """What a prediction fitted and, with a structure, its precision beside the baselines, as text for the terminal."""
    lines = [
        f"{metrics['family']}: {metrics['length']} columns, {metrics['depth']} sequences (Neff {metrics['neff']}); "
        f"fitted {describe_features(head.features)} in {metrics['cpu_seconds']['total'] / 60:.1f} CPU-min",
        f"contact probabilities: {metrics['method']}",
    ]
    if "model" in metrics:
        rows = [["prediction", *(metrics["model"][k] for k in PRECISION_NAMES)]]
        rows += [[name, *(values[k] for k in PRECISION_NAMES)] for name, values in metrics["baselines"].items()]
        lines += ["", format_table(["long-range", *PRECISION_NAMES], rows, digits=2)]
    return "\n".join(lines)
