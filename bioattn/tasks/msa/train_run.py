"""``bioattn train msa``'s hooks of the shared driver (:func:`prepare`, :func:`fit`, :func:`report`)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bioattn.data.contacts import load_target
from bioattn.errors import UserInputError
from bioattn.tasks.msa.features import MSAOptions
from bioattn.tasks.msa.head import ContactHead
from bioattn.tasks.msa.train import train_families, train_family
from bioattn.tasks.base import FittedMember, TaskData
from bioattn.training import TrainConfig, check_run_dir

__all__ = ["fit", "prepare", "report"]


def prepare(options: MSAOptions, config: TrainConfig | None = None, *, msa: Path | None = None, fmt: str | None = None,
            query: Path | None = None, pdb: Path | None = None, chain: str | None = None,
            struct_dat: Path | None = None, pred: Path | None = None, all_families: bool = False, compare: bool = False,
            families: str | None = None, contact_head: Path | None = None) -> tuple[MSAOptions, TaskData]:
    """``bioattn train msa``'s inputs, checked before any alignment is trained on: one family (``msa`` and its
    structure) or every family under ``options.data_root`` (``all_families``, ``families``, ``compare``)."""
    from bioattn.data import resolve_data_root
    from bioattn.tasks.msa.features import DEFAULTS
    check_run_dir(options.out, resume=options.resume, overwrite=options.overwrite)
    if compare and options.seeds is not None:
        raise UserInputError("--seeds trains one axial model per seed; --compare-methods trains none (drop --seeds)")
    if options.seeds is not None and not options.finetune:
        raise UserInputError("--seeds trains one model per seed, but --no-finetune trains none: every seed would read the "
                             "same pretrained attention (drop --seeds, or fine-tune)")
    extra: dict = {"config": config or DEFAULTS}
    if all_families:
        if msa is not None:
            raise UserInputError("give either --input FILE (one family) or --all (every family under the data root)")
        extra.update(data_root=resolve_data_root(options.data_root), compare=compare,
                     families=[name.strip() for name in families.split(",") if name.strip()] if families else None)
        return options, TaskData(train=None, source=str(extra["data_root"]), extra=extra)
    if compare:
        raise UserInputError("--compare-methods needs --all")
    if msa is None:
        raise UserInputError("give --input FILE (one family) or --all (every family under the data root)")
    beside = Path(msa).parent / "pred"
    predictions = pred if pred is not None else (beside if beside.is_dir() else None)
    extra["target"] = load_target(msa, fmt=fmt, query_fasta=query, pdb=pdb, chain=chain, struct_dat=struct_dat,
                                  predictions_dir=predictions)
    extra["head"] = ContactHead.load(contact_head) if contact_head is not None else None
    extra["head_source"] = contact_head or "contact head"
    return options, TaskData(train=extra["target"], source=str(msa), extra=extra)


def fit(options: MSAOptions, data: TaskData) -> FittedMember:
    """The run's one member: :func:`train_family`, :func:`train_families` or the comparison of methods."""
    extra, out = data.extra, Path(options.out)
    if "target" in extra:
        train_family(extra["target"], out, options, extra["config"], head=extra["head"], head_source=extra["head_source"])
    else:
        from bioattn.tasks.msa.compare import compare_methods

        (compare_methods if extra["compare"] else train_families)(extra["data_root"], out, options, extra["config"],
                                                                 extra["families"])
    return FittedMember(model=None, summary={}, saved_to=out)  # type: ignore[arg-type]


def report(options: MSAOptions) -> tuple[dict[str, Any] | None, str]:
    """A one-family run's ``metrics.json`` (None for every family) and ``summary.md``."""
    out = Path(options.out)
    metrics = json.loads((out / "metrics.json").read_text()) if (out / "metrics.json").is_file() else None
    return metrics, _summary(out)


def _summary(out: Path) -> str:
    """``out/summary.md`` (``""`` off rank 0)."""
    from bioattn.distributed import is_main_process
    path = Path(out) / "summary.md"
    return path.read_text(encoding="utf-8") if is_main_process() and path.is_file() else ""
