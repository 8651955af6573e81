"""Contacts of a new alignment (``bioattn predict msa``): fit what the contact head reads, write its probabilities."""
from __future__ import annotations

import dataclasses
import json
import os
import time
from pathlib import Path
from typing import Any

from bioattn.data.contacts import ContactTarget
from bioattn.errors import UserInputError
from bioattn.models.base import CONFIG_NAME
from bioattn.models.ensemble import ENSEMBLE_TYPE
from bioattn.report import format_table
from bioattn.io import save_tensors, write_json
from bioattn.tasks.msa.train import (
    PRECISION_NAMES, RR_MIN_SEPARATION, evaluate_family, member_dirs, prepare_members, score_family, score_members,
    with_schema, write_contact_outputs,
)
from bioattn.tasks.msa.features import FEATURES_FILE, MSAOptions, coevolution_maps, prepare_family, training_pool
from bioattn.tasks.msa.esm import WEIGHTS_HELP, esm_msa_prediction, load_msa_transformer
from bioattn.tasks.msa.head import ESM_MSA_MAP, HEAD_FILE_NAME, ContactHead, describe_features, shipped_head
from bioattn.training import TrainConfig, check_run_dir, prepare_run_dir
from bioattn.distributed import resolve_device

#: ``bioattn predict msa``'s ``--contact-method`` when no head is given.
DEFAULT_METHOD = "potts"
MSA_MODEL_TYPE = "MSAContactModel"
#: Cheap baselines computed beside the head's maps when a structure allows evaluating them.
EVALUATION_BASELINES = ("mi_apc", "gaussian_dca_apc")
#: The ``bioattn predict`` target of each other model type, for the error naming a wrong ``--run`` / ``--model``.
PREDICT_TARGET = {"PromoterClassifier": "promoter", "HybridCT3D": "ct"}


def _model_type(run_dir: Path) -> tuple[str | None, Path | None]:
    """The model type saved in ``run_dir`` (an ensemble's member type) and its config.json, or ``(None, None)``."""
    for found in (run_dir / CONFIG_NAME, *sorted(run_dir.glob(f"*/{CONFIG_NAME}"))):
        if not found.is_file():
            continue
        try:
            config = json.loads(found.read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise UserInputError(f"{found}: not valid JSON ({exc})") from exc
        if not isinstance(config, dict):
            raise UserInputError(f"{found}: not a model config.json")
        model_type = config.get("member_type") if config.get("model_type") == ENSEMBLE_TYPE else config.get("model_type")
        return model_type, found
    return None, None


def run_head(run_dir: Path) -> tuple[ContactHead, dict[str, Any]]:
    """The contact head of a ``bioattn train msa`` run (or shipped model) and the :class:`MSAOptions` fields its
    model needs (``embed_dim``, ``dropout``, ``seeds``, and ``init_from`` / ``finetune`` of a pretrained one)."""
    model_type, found = _model_type(run_dir)
    if model_type is not None and model_type != MSA_MODEL_TYPE:
        target = PREDICT_TARGET.get(model_type)
        raise UserInputError(f"{run_dir}: this is a {model_type}, not an {MSA_MODEL_TYPE}"
                             + (f"; predict with it by 'bioattn predict {target}'" if target else ""))
    head_file = run_dir / HEAD_FILE_NAME
    if not head_file.is_file():
        if model_type == MSA_MODEL_TYPE:
            raise UserInputError(f"{run_dir}: an {MSA_MODEL_TYPE} without a {HEAD_FILE_NAME} (a 'bioattn pretrain msa' "
                                 "run): fit a head on its attention with 'bioattn train msa --all --init-from "
                                 f"{run_dir} --no-finetune --coevolution none --out RUN_DIR' and predict with --model RUN_DIR")
        raise UserInputError(f"{run_dir}: no {HEAD_FILE_NAME} (not a bioattn train msa run, or a one-family run "
                             "without a contact head); give --contact-head FILE instead")
    head = ContactHead.load(head_file)
    pretrained = {}
    if head.settings.get("init_from") is not None and head.attention_features:
        pretrained = {"init_from": str(head.settings["init_from"]), "finetune": bool(head.settings.get("finetune", True))}
    if found is None:
        return head, pretrained
    try:
        config = json.loads(found.read_text())
        seeds = None
        if config.get("model_type") == ENSEMBLE_TYPE:
            seeds = tuple(int(name.removeprefix("seed")) for name in config["members"])
            found = found.parent / config["members"][0] / CONFIG_NAME
            config = json.loads(found.read_text())
        return head, {"embed_dim": int(config["embed_dim"]), "dropout": float(config["dropout"]), "seeds": seeds,
                      **pretrained}
    except (OSError, json.JSONDecodeError, AttributeError, IndexError, KeyError, TypeError, ValueError) as exc:
        raise UserInputError(f"{found}: not the config.json of an MSAContactModel ({exc})") from exc


def head_options(head: ContactHead, options: MSAOptions) -> MSAOptions:
    """``options`` with the model size (layers × heads) and ``coevolution`` of the features ``head`` reads."""
    shape = head.attention_shape()
    changes: dict[str, Any] = {"coevolution": head.coevolution}
    if shape is not None:
        changes.update(layers=shape[0], heads=shape[1])
    return dataclasses.replace(options, **changes)


def predict_contacts(target: ContactTarget, out: Path, options: MSAOptions, config: TrainConfig, head: ContactHead, *,
                     top: int | None = None, min_separation: int = RR_MIN_SEPARATION) -> dict[str, Any]:
    """Fit what ``head`` reads on ``target``'s alignment and write its contacts into ``out`` (with ``options.seeds``
    and attention features: one run per seed and their ensemble). Returns the ``metrics.json`` content."""
    options = head_options(head, options)
    if options.seeds is not None and head.attention_features:
        return _predict_with_seeds(target, out, options, config, head, top=top, min_separation=min_separation)
    options = dataclasses.replace(options, seeds=None)
    maps = list(head.coevolution_features)
    if target.distances is not None and maps:
        maps += [name for name in EVALUATION_BASELINES if name not in maps]
    out = prepare_run_dir(out, resume=options.resume, overwrite=options.overwrite)
    info = prepare_family(target, options, config, out, maps=maps, with_model=bool(head.attention_features),
                          factored=head.reads_factored_attention, esm=head.reads_esm_msa)
    metrics = score_family(target, out, info, options, head, {}, top=top, min_separation=min_separation)
    head.save(out / HEAD_FILE_NAME)
    return metrics


def _predict_with_seeds(target: ContactTarget, out: Path, options: MSAOptions, config: TrainConfig,
                        head: ContactHead, *, top: int | None, min_separation: int) -> dict[str, Any]:
    out = prepare_run_dir(out, resume=options.resume, overwrite=options.overwrite)
    infos = prepare_members(target, out, options, config)
    runs = member_dirs(out, options, config)
    metrics = score_members(target, out, runs, infos, options, {seed: head for seed in runs}, {}, top=top,
                            min_separation=min_separation)
    metrics["cpu_seconds"] = {"total": round(sum(info["cpu_seconds"]["total"] for info in infos.values()), 1)}
    write_json(out / "metrics.json", metrics)
    for run_dir in (out, *runs.values()):
        head.save(run_dir / HEAD_FILE_NAME)
    return metrics


#: ``--contact-method`` of the MSA Transformer with the user's weights (its own contact regression).
ESM_METHOD = "esm-msa"


def predict_contacts_esm(target: ContactTarget, out: Path, options: MSAOptions, config: TrainConfig, *,
                         top: int | None = None, min_separation: int = RR_MIN_SEPARATION) -> dict[str, Any]:
    """``--contact-method esm-msa``: the MSA Transformer's own contact regression, written as :func:`predict_contacts`
    writes plus ``row_attention.safetensors``. Returns the ``metrics.json`` content."""
    if options.esm_weights is None:
        raise UserInputError(f"--contact-method {ESM_METHOD} needs --weights FILE_OR_DIR. {WEIGHTS_HELP}")
    started_wall, started_cpu = time.monotonic(), time.process_time()
    model = load_msa_transformer(options.esm_weights, resolve_device(config.device))
    out = prepare_run_dir(out, resume=options.resume, overwrite=options.overwrite)
    prediction = esm_msa_prediction(model, target, options.esm_max_rows)
    esm_seconds = time.process_time() - started_cpu
    features = {ESM_MSA_MAP: prediction.logits}
    timings: dict[str, float] = {"esm_msa_cpu_s": esm_seconds}
    info: dict[str, Any] = {"family": target.name, "length": target.msa.length, "depth": target.msa.depth,
                            "sequences_used": len(prediction.rows), "weights": str(options.esm_weights)}
    if target.distances is not None:
        pool, weights = training_pool(target, options, config.seed)
        features.update(coevolution_maps(target, pool, weights, EVALUATION_BASELINES, options, config.seed, timings))
        info["neff"] = round(float(weights.sum()), 1)
    save_tensors(out / FEATURES_FILE, features)
    save_tensors(out / "row_attention.safetensors", {"row_attention": prediction.row_attentions})
    method = (f"ESM MSA Transformer contact regression ({model.config['num_layers']} layers x {model.config['num_heads']} "
              f"heads, weights {Path(options.esm_weights).name}, {len(prediction.rows)} rows by max Hamming diversity)")
    write_contact_outputs(out, target, prediction.probabilities.numpy(), method, True, top=top, min_separation=min_separation)
    info["cpu_seconds"] = {**{k: round(v, 1) for k, v in timings.items()}, "total": round(time.process_time() - started_cpu, 1)}
    info["wall_seconds"] = round(time.monotonic() - started_wall, 1)
    metrics = {**info, "method": method, "calibrated": True}
    if target.distances is not None:
        metrics.update(evaluate_family(target, prediction.probabilities.numpy(), features, {}))
    metrics = with_schema(metrics)
    write_json(out / "metrics.json", metrics)
    return metrics


def choose_head(method: str | None, contact_head: str | Path | None, run_dir: str | Path | None,
                top: int | None = None, min_separation: int = RR_MIN_SEPARATION) -> tuple[ContactHead | None, dict[str, Any]]:
    """The contact head of ``run_dir``, ``contact_head`` or ``method`` and the model size it implies (``(None, {})``
    for :data:`ESM_METHOD`); ``top`` and ``min_separation`` are checked first."""
    if top is not None and top < 1:
        raise UserInputError(f"--top must be >= 1, got {top}")
    if min_separation < 1:
        raise UserInputError(f"--min-separation must be >= 1, got {min_separation}")
    if method == ESM_METHOD:
        if contact_head is not None or run_dir is not None:
            raise UserInputError(f"--contact-method {ESM_METHOD} uses the MSA Transformer's own contact regression; "
                                 "drop --contact-head / --model")
        return None, {}
    if run_dir is not None:
        return run_head(Path(run_dir))
    return (ContactHead.load(contact_head) if contact_head is not None else shipped_head(method or DEFAULT_METHOD)), {}


def predict_msa(target: ContactTarget, out: Path, options: MSAOptions, config: TrainConfig, head: ContactHead | None,
                *, top: int | None = None, min_separation: int = RR_MIN_SEPARATION) -> dict[str, Any]:
    """:func:`predict_contacts` with ``head``, or :func:`predict_contacts_esm` when ``head`` is None."""
    if head is None:
        return predict_contacts_esm(target, out, options, config, top=top, min_separation=min_separation)
    return predict_contacts(target, out, options, config, head, top=top, min_separation=min_separation)


def options_for_head(options: MSAOptions, model_size: dict[str, Any]) -> MSAOptions:
    """``options`` with the model size a contact head implies (:func:`choose_head`), sizes resolved again."""
    from bioattn.tasks.msa.features import resolve_sizes
    return resolve_sizes(dataclasses.replace(options, **model_size)) if model_size else options


def run_predict_msa(inputs: ContactTarget | str | os.PathLike, out: Path, options: MSAOptions, config: TrainConfig, *,
                    method: str | None = None, contact_head: str | os.PathLike | None = None,
                    model: str | os.PathLike | None = None, top: int | None = None,
                    min_separation: int = RR_MIN_SEPARATION, fmt: str | None = None, query: str | None = None,
                    pdb: str | None = None, chain: str | None = None,
                    struct_dat: str | None = None) -> tuple[dict[str, Any], ContactHead | None]:
    """``bioattn predict msa`` in one call: :func:`choose_head`, :func:`options_for_head`, the alignment ``inputs``
    (a file or a :class:`~bioattn.data.contacts.ContactTarget`) and :func:`predict_msa`; returns ``(metrics, head)``."""
    from bioattn.data.contacts import load_target
    from bioattn.models.registry import resolve_model_dir
    check_run_dir(out, resume=options.resume, overwrite=options.overwrite)  # an unusable --out before any fitting
    head, model_size = choose_head(method, contact_head, resolve_model_dir(model) if model is not None else None,
                                   top, min_separation)
    options = options_for_head(options, model_size)
    target = inputs if isinstance(inputs, ContactTarget) else load_target(
        inputs, fmt=fmt, query_fasta=query, pdb=pdb, chain=chain, struct_dat=struct_dat)
    return predict_msa(target, out, options, config, head, top=top, min_separation=min_separation), head


def prediction_report(metrics: dict[str, Any], head: ContactHead | None, out: Path | None = None) -> str:
    """What ``bioattn predict msa`` prints: what was fitted, with a structure the precision, with ``out`` the files."""
    minutes = metrics["cpu_seconds"]["total"] / 60
    if head is None:
        first = (f"{metrics['family']}: {metrics['length']} columns, {metrics['depth']} sequences "
                 f"({metrics['sequences_used']} fed to the MSA Transformer) in {minutes:.1f} CPU-min")
    else:
        first = (f"{metrics['family']}: {metrics['length']} columns, {metrics['depth']} sequences (Neff {metrics['neff']}); "
                 f"fitted {describe_features(head.features)} in {minutes:.1f} CPU-min")
    lines = [first, f"contact probabilities: {metrics['method']}"]
    if "model" in metrics:
        rows = [["prediction", *(metrics["model"][k] for k in PRECISION_NAMES)]]
        rows += [[name, *(values[k] for k in PRECISION_NAMES)] for name, values in metrics["baselines"].items()]
        lines += ["", format_table(["long-range", *PRECISION_NAMES], rows, digits=2)]
    if out is not None:
        extra = "" if head is not None else ", row_attention.safetensors"
        lines.append(f"wrote {out}/contacts.rr, contacts.npy, contact_map.png{extra}, metrics.json")
    return "\n".join(lines)
