"""``bioattn train ct``'s hooks of the shared driver, :func:`prepare` and :func:`report`."""
from __future__ import annotations

import dataclasses
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bioattn.data import resolve_data_root
from bioattn.data.ct import VolumePreprocessing
from bioattn.errors import UserInputError
from bioattn.metrics import order_binary_classes
from bioattn.tasks.ct.data import (
    CTData, LabelledVolumes, hounsfield_window, load_manifest, load_medmnist, write_split_table,
)
from bioattn.tasks.ct.fit import _class_names, build_models
from bioattn.tasks.ct.options import (
    DEFAULT_DATASET, PROTOCOLS, PUBLISHED, CTOptions, Protocol, protocol_train_config, resolve_protocol,
)
from bioattn.tasks.ct.preprocessing import SavedPreprocessing
from bioattn.tasks.base import FittedMember, TaskData
from bioattn.tasks.ct.protocols import _pool_records, ensemble_results, mean_mask_depth
from bioattn.tasks.driver import MembersRun, RunProtocol, metrics_document
from bioattn.tasks.ct.report import (
    comparison_table, construction_line, ensemble_table, not_learned_hints, trust_sections,
)
from bioattn.tasks.ct.selection import ModelChoice, choose_model, save_kept_model
from bioattn.training import TrainConfig, check_run_dir, prepare_run_dir
from bioattn.distributed import is_main_process

__all__ = ["PreparedCT", "prepare", "prepare_ct", "report", "task_data_of", "unified_scores", "with_default_window"]


def _load_data(options: CTOptions, config: TrainConfig, stride: int) -> CTData:
    if options.manifest is None:
        return load_medmnist(resolve_data_root(options.data_root), options.dataset_name or DEFAULT_DATASET,
                             options.input_size[0], divisible_by=stride)
    return load_manifest(options.manifest, options.preprocessing(), seed=config.seed,
                         positive_class=options.positive_class)


def _options_record(options: CTOptions) -> dict[str, Any]:
    """JSON-ready options for ``run_config.json``."""
    record = {f.name: getattr(options, f.name) for f in dataclasses.fields(options) if f.name != "train_config"}
    return {k: str(v) if isinstance(v, Path) else list(v) if isinstance(v, tuple) else v for k, v in record.items()}


def with_default_window(options: CTOptions, seed: int) -> CTOptions:
    """``options`` with :func:`~bioattn.tasks.ct.data.hounsfield_window` for a manifest without a window."""
    if options.manifest is None or options.window is not None:
        return options
    window = hounsfield_window(options.manifest, seed=seed)
    if window is None:
        return options
    if is_main_process():
        print(f"note: the volumes are CT in Hounsfield units; intensities {window[0]:g}..{window[1]:g} HU (soft "
              "tissue) are mapped onto 0..1 (--intensity-window LOW HIGH sets another window)", file=sys.stderr)
    return dataclasses.replace(options, window=window)


@dataclass
class PreparedCT:
    """What a CT run knows before it trains (:func:`prepare_ct`), ``options`` as they ran."""
    options: CTOptions
    data: CTData
    config: TrainConfig
    protocol: Protocol
    saved: SavedPreprocessing
    model_config: dict[str, Any]
    run_info: dict[str, Any]


def prepare_ct(options: CTOptions) -> PreparedCT:
    """Read the data of ``options`` and settle the window and distance channel; writes nothing."""
    protocol = resolve_protocol(options)
    config = options.train_config or protocol_train_config(options.protocol, quick=options.quick)
    options = with_default_window(options, config.seed)
    data = _load_data(options, config, options.stride)
    saved = SavedPreprocessing(source=data.source, preprocessing=data.preprocessing or VolumePreprocessing(),
                               flip_tta=protocol.flip_tta, profile=data.training_profile())
    if options.distance_channel is None:
        options = dataclasses.replace(options, distance_channel=bool(saved.profile["binary"]))
        if options.distance_channel and is_main_process():
            print("the training volumes are binary masks: the attention model also sees each voxel's depth inside "
                  "the mask (--no-distance-channel turns this off)", file=sys.stderr)
    model_config = build_models(dataclasses.replace(options, baseline="none"), max(data.num_classes, 2), data.in_channels,
                                _class_names(options, data))[0].config
    run_info = {**_options_record(options), "data_file": str(data.path.resolve()), "model": model_config}
    return PreparedCT(options, data, config, protocol, saved, model_config, run_info)


def prepare(options: CTOptions, config: TrainConfig | None = None) -> tuple[CTOptions, TaskData]:
    """Everything before the first member trains: checks, :func:`prepare_ct` and the run directory."""
    if config is not None:
        options = dataclasses.replace(options, train_config=config)
    check_run_dir(options.out, resume=options.resume, overwrite=options.overwrite)
    if options.manifest is not None and options.positive_class is not None:
        from bioattn.data.ct_manifest import class_names_of, read_manifest
        manifest = read_manifest(options.manifest, require_labels=True)
        try:
            order_binary_classes(class_names_of([row.label for row in manifest.rows]), options.positive_class)
        except UserInputError as exc:
            raise UserInputError(f"{manifest.path}: {exc}") from None
    ready = prepare_ct(options)
    data, run_dir = ready.data, prepare_run_dir(options.out, resume=options.resume, overwrite=options.overwrite)
    ready = dataclasses.replace(ready, options=dataclasses.replace(ready.options, out=run_dir))
    print(f"{data.path}: " + ", ".join(f"{s} {n}" for s, n in data.split_sizes.items()), file=sys.stderr)
    if data.source == "manifest" and is_main_process():
        write_split_table(run_dir / "splits.csv", data)
    task_data = task_data_of(ready)
    task_data.extra["depth"] = mean_mask_depth(task_data.pool.volumes) \
        if ready.options.cv is not None and task_data.train.binary and is_main_process() else None
    return ready.options, task_data


def task_data_of(ready: PreparedCT) -> TaskData:
    """The hooks' view of a prepared run: ``train`` / ``dev`` and ``pool`` (both)."""
    data, flips, binary = ready.data, ready.protocol.flip_tta, bool(ready.saved.profile.get("binary"))
    train, dev = (LabelledVolumes(data.splits[s], data.labels[s], flips, binary) for s in ("train", "val"))
    class_names = ready.model_config["class_names"] or [str(k) for k in range(max(data.num_classes, 2))]
    return TaskData(train=train, dev=dev, pool=train.join(dev), class_names=class_names, records=_pool_records(data),
                    source=str(data.path), seed=ready.config.seed, extra={"prepared": ready})


def report(data: TaskData, run: MembersRun[FittedMember]) -> tuple[dict[str, Any], str]:
    """``metrics.json`` and ``summary.md`` of a CT run (a single run first saves its kept model)."""
    ready = data.extra["prepared"]
    options, data_ct, config, protocol, saved = ready.options, ready.data, ready.config, ready.protocol, ready.saved
    run_dir = options.out
    choice: ModelChoice | None = None
    if options.cv is not None or options.seeds is not None:
        results = ensemble_results(data, run)
    else:
        trained = run.results[0].extra["trained"]
        choice = choose_model(trained.results)
        save_kept_model(run_dir, choice, trained.hybrid, trained.baseline, saved,
                        {name: m.get("threshold", 0.5) for name, m in trained.results.items()})
        results = {"models": {name: trained.results[name]
                              for name in sorted(trained.results, key=lambda name: name != choice.kept)},
                   "kept_model": choice.to_dict(run_dir)}
    dataset = options.dataset_name
    class_names = ready.model_config["class_names"]
    extra = {
        "manifest": str(data_ct.path) if data_ct.source == "manifest" else None, "size": list(options.input_size),
        "file": str(data_ct.path), "positive_class": class_names[1] if len(class_names or []) == 2 else None,
        "test_split_present": "test" in data_ct.splits,
        "preprocessing": data_ct.preprocessing.to_dict() if data_ct.preprocessing else None,
        "recipe": {"name": options.protocol, "description": PROTOCOLS[options.protocol].description,
                   "label_smoothing": protocol.label_smoothing, "intensity_jitter": protocol.intensity_jitter,
                   "flip_tta": protocol.flip_tta, "mixup": protocol.mixup, "augment": options.augment,
                   "train": config.to_dict()},
        **results,
        "published_test_auroc_accuracy": {k: {"auroc": a, "accuracy": c}
                                          for k, (a, c) in PUBLISHED.get(dataset or "", {}).items()},
    }
    metrics = metrics_document(
        "ct", dataset=dataset or (data_ct.path.name if data_ct.source == "manifest" else None),
        protocol=RunProtocol.of(options, _protocol_description(options, data_ct)).to_dict(),
        splits=data_ct.split_sizes, scores=unified_scores(results), class_names=data.class_names, **extra)
    table = comparison_table(dataset, results["models"]) if "models" in results else ensemble_table(results)
    positive = order_binary_classes(data_ct.class_names, options.positive_class)[1] if data_ct.class_names else None
    trust = trust_sections(results, run_dir, choice=choice)  # before the hints: it adds the warnings they read
    hints = not_learned_hints(data_ct, saved, results["models"]) if "models" in results else []
    construction = construction_line(results["models"]) if "models" in results else None
    lead = [choice.statement(run_dir) if choice is not None else None, construction, "\n".join(hints), positive]
    return metrics, "\n\n".join([table, *filter(None, lead), *trust]) + "\n"


def _protocol_description(options: CTOptions, data: CTData) -> str:
    """One sentence for ``metrics.json`` ``protocol.description``."""
    if options.cv is not None:
        text = (f"{options.cv}-fold stratified CV over train + val ({sum(len(data.labels[s]) for s in ('train', 'val'))}"
                " volumes), each fold's final weights, out-of-fold metrics")
        return text + (f"; repeated {options.cv_repeats} times" if options.cv_repeats > 1 else "")
    text = "train on train, keep the best validation AUROC" + (", score test" if "test" in data.splits else "")
    return text + (f"; one run per seed ({', '.join(map(str, options.seeds))})" if options.seeds else "")


def unified_scores(results: dict[str, Any]) -> dict[str, dict[str, dict[str, Any]]]:
    """``{model: {split: {metric: value}}}`` of a CT run's results."""
    scores: dict[str, dict[str, dict[str, Any]]] = {}

    def add(name: str, flat: dict[str, Any], splits: tuple[str, ...], rename: dict[str, str] | None = None) -> None:
        for key, value in flat.items():
            split, _, metric = key.partition("_")
            if split in splits and metric and isinstance(value, (int, float, dict)):
                scores.setdefault(name, {}).setdefault((rename or {}).get(split, split), {})[metric] = value

    for name, flat in results.get("oof", {}).items():
        add(name, flat, ("oof",))
    for name, flat in results.get("cv", {}).items():
        add(name, flat, ("val",), {"val": "cv"})
    for name, flat in results.get("models", results.get("ensemble", {})).items():
        add(name, flat, ("val", "test"))
    return scores
