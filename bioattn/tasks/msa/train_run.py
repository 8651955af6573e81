"""``bioattn train msa`` in one call: one family, every family of a data root, or the comparison of the contact
methods (:func:`train_msa`)."""
from __future__ import annotations

from pathlib import Path

from bioattn.data.contacts import load_target
from bioattn.errors import UserInputError
from bioattn.tasks.msa.features import MSAOptions
from bioattn.tasks.msa.head import ContactHead
from bioattn.tasks.msa.train import train_families, train_family
from bioattn.training import TrainConfig, check_run_dir

__all__ = ["train_msa"]


def train_msa(
    msa: Path | None, out: Path, options: MSAOptions, config: TrainConfig, *, fmt: str | None = None,
    query: Path | None = None, pdb: Path | None = None, chain: str | None = None, struct_dat: Path | None = None,
    pred: Path | None = None, all_families: bool = False, compare: bool = False, families: str | None = None,
    data_root: str | Path | None = None, contact_head: Path | None = None, resume: bool = False,
    overwrite: bool = False,
) -> str:
    """``bioattn train msa``: one family (``msa``, the alignment file, with its optional structure ``pdb`` / ``chain``
    or ``struct_dat``, ``query`` FASTA and published predictions ``pred``, default ``pred/`` beside the alignment)
    through :func:`train_family`, or every family under ``data_root`` (``all_families``; ``families``:
    comma-separated subset) through :func:`train_families`, or with ``compare`` the contact maps of
    :func:`~bioattn.tasks.msa.compare.compare_methods`. ``contact_head``: a ``contact_head.json`` for one family.
    ``resume`` / ``overwrite``: what to do with an existing ``out`` (checked before any alignment is read).
    Returns the run's ``summary.md`` (the tables the command prints; ``""`` off rank 0)."""
    from bioattn.data import resolve_data_root

    check_run_dir(out, resume=resume, overwrite=overwrite)
    if compare and options.seeds is not None:
        raise UserInputError("--seeds trains one axial model per seed; --compare-methods trains none (drop --seeds)")
    if options.seeds is not None and not options.finetune:
        raise UserInputError("--seeds trains one model per seed, but --no-finetune trains none: every seed would read the "
                             "same pretrained attention (drop --seeds, or fine-tune)")
    if all_families:
        if msa is not None:
            raise UserInputError("give either --input FILE (one family) or --all (every family under the data root)")
        from bioattn.tasks.msa.compare import compare_methods

        names = [name.strip() for name in families.split(",") if name.strip()] if families else None
        (compare_methods if compare else train_families)(resolve_data_root(data_root), out, options, config, names)
        return _summary(out)
    if compare:
        raise UserInputError("--compare-methods needs --all")
    if msa is None:
        raise UserInputError("give --input FILE (one family) or --all (every family under the data root)")
    beside = Path(msa).parent / "pred"
    predictions = pred if pred is not None else (beside if beside.is_dir() else None)
    target = load_target(msa, fmt=fmt, query_fasta=query, pdb=pdb, chain=chain, struct_dat=struct_dat,
                         predictions_dir=predictions)
    head = ContactHead.load(contact_head) if contact_head is not None else None
    train_family(target, out, options, config, head=head, head_source=contact_head or "contact head")
    return _summary(out)


def _summary(out: Path) -> str:
    """``out/summary.md`` as written by this run (``""`` off rank 0, where nothing is written)."""
    from bioattn.distributed import is_main_process

    path = Path(out) / "summary.md"
    return path.read_text(encoding="utf-8") if is_main_process() and path.is_file() else ""
