"""Cross-family masked-token pretraining of the axial MSA model (``bioattn pretrain msa``) on every alignment under
``msa/unlabeled``, ``msa/coev`` and ``msa/pfam`` not excluded (excluded files are never read)."""
from __future__ import annotations

import dataclasses
import math
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import torch
import torch.nn.functional as F
from torch.utils.data import Dataset

from bioattn.data.contacts import discover_families
from bioattn.data.msa import MSATokenizer, read_msa, sequence_weights, subsample
from bioattn.data.root import resolve_data_root
from bioattn.errors import UserInputError
from bioattn.io import write_json
from bioattn.models.msa_contact import POSITIONAL_ENCODINGS, MSAContactModel, mask_tokens, masked_lm_loss
from bioattn.tasks.common import Recipe, TaskOptions, check_model_options, fit_timed
from bioattn.tasks.msa.features import RUN_FIELDS, RowBlocks, check_no_cv
from bioattn.training import TrainConfig, Trainer, plot_curves, prepare_run_dir, seed_everything

__all__ = [
    "PRETRAIN_DEFAULTS", "PretrainOptions", "Source", "Alignment", "pretraining_sources", "load_alignment",
    "CroppedBlocks", "masked_token_metrics", "pretrain", "quick_pretrain_config",
]

UNLABELED = Path("msa") / "unlabeled"
#: File name endings read as alignments under ``msa/unlabeled`` (``.gz`` allowed after each).
ALIGNMENT_SUFFIXES = (".a2m", ".a3m", ".fasta", ".fa", ".afa", ".aln", ".sto")
#: ``--exclude`` values: every family with a structure (the default), or nothing.
EXCLUDE_STRUCTURES, EXCLUDE_NONE = "structures", "none"
HELD_OUT_ROWS, MIN_ROWS_FOR_HELD_OUT = 64, 20
MASK_PROBABILITY = 0.15
_ACCESSION = re.compile(r"(PF\d{5})")

#: Cross-family pretraining's :class:`~bioattn.tasks.common.Recipe` (``bioattn pretrain msa``).
PRETRAIN_RECIPE = Recipe(TrainConfig(
    max_epochs=20, batch_size=1, lr=1e-3, weight_decay=0.01, schedule="warmup_cosine", warmup_steps=200,
    max_minutes=30.0, monitor="val_loss", monitor_mode="min", eval_every_steps=250, max_steps_per_epoch=250,
), "one axial model over unlabeled alignments, masked-residue loss, 30 wall-minutes")
PRETRAIN_DEFAULTS = PRETRAIN_RECIPE.train_config
#: ``--quick``: tiny sizes for a smoke test (seconds).
QUICK = dict(embed_dim=16, heads=2, layers=1, rows=8, max_columns=32, max_seqs=64)


@dataclass(frozen=True, kw_only=True)
class PretrainOptions(TaskOptions):
    """Options of ``bioattn pretrain msa`` (keyword-only; the flags of the same names); ``seeds`` and ``cv`` unset."""

    out: Path | None = None  # type: ignore[assignment]
    embed_dim: int = 64
    heads: int = 4
    layers: int = 4
    dropout: float = 0.1
    positional: str = "sinusoidal"
    rows: int = 32
    max_columns: int = 128
    max_seqs: int = 2048

    def __post_init__(self) -> None:
        check_no_cv(self, "pretrain msa")
        if self.seeds is not None:
            raise UserInputError("pretrain msa trains one model: --seeds does not apply")
        check_model_options(self, ("embed_dim", "heads", "layers", "rows", "max_columns", "max_seqs"))
        if self.positional not in POSITIONAL_ENCODINGS:
            raise UserInputError(f"--positional must be one of {', '.join(POSITIONAL_ENCODINGS)}, got {self.positional!r}")
        if self.positional == "sinusoidal" and self.embed_dim % 2:
            raise UserInputError(f"--embed-dim ({self.embed_dim}) must be even for sinusoidal positions")

    def quick_sizes(self) -> "PretrainOptions":
        """These options with the ``--quick`` sizes (:data:`QUICK`)."""
        return dataclasses.replace(self, **QUICK, quick=True)

    def settings(self) -> dict[str, Any]:
        """The options that determine the model (recorded in the run): all but the run fields and ``seeds``."""
        return {k: v for k, v in dataclasses.asdict(self).items() if k not in (*RUN_FIELDS, "seeds")}


def quick_pretrain_config(config: TrainConfig) -> TrainConfig:
    """``config`` with ``--quick`` training: one epoch of 6 steps, evaluated at step 3 and 6, 0.2 minutes at most."""
    return dataclasses.replace(config, max_epochs=1, max_steps_per_epoch=6, eval_every_steps=3, warmup_steps=1,
                               max_minutes=min(config.max_minutes or 0.2, 0.2))


@dataclass(frozen=True)
class Source:
    """One alignment file: ``name`` (its path under ``msa/``), ``family`` (what ``--exclude`` matches), ``path``."""

    name: str
    family: str
    path: Path


def _family_of(path: Path) -> str:
    """The Pfam accession in an unlabeled file's name (``PF13354_seed_...fasta`` → ``PF13354``), else its stem."""
    stem = path.name.split(".")[0]
    found = _ACCESSION.match(stem)
    return found.group(1) if found else stem


def _is_alignment(path: Path) -> bool:
    name = path.name.lower().removesuffix(".gz")
    return path.is_file() and name.endswith(ALIGNMENT_SUFFIXES)


def _all_sources(data_root: Path) -> list[Source]:
    """Every unlabeled alignment and every ``msa/coev`` / ``msa/pfam`` family alignment of ``data_root`` (none read)."""
    msa_root = data_root / "msa"
    unlabeled = sorted(p for p in (data_root / UNLABELED).rglob("*") if _is_alignment(p))
    sources = [Source(str(p.relative_to(msa_root)).split(".")[0], _family_of(p), p) for p in unlabeled]
    for name, found in discover_families(data_root).items():
        path = Path(found["msa_path"])
        sources.append(Source(str(path.relative_to(msa_root).parent / name), name, path))
    return sources


def pretraining_sources(data_root: Path, exclude: str | Sequence[str] = EXCLUDE_STRUCTURES) -> tuple[list[Source], list[str]]:
    """``(sources to read, excluded family names)``; ``exclude``: ``"structures"``, ``"none"`` or family names."""
    sources = _all_sources(data_root)
    if not sources:
        raise UserInputError(f"{data_root}: no alignments under msa/unlabeled, msa/coev or msa/pfam")
    structures = sorted(discover_families(data_root))
    if exclude == EXCLUDE_STRUCTURES:
        excluded = structures
    elif exclude == EXCLUDE_NONE:
        excluded = []
    else:
        excluded = list(dict.fromkeys(exclude))
        known = sorted({source.family for source in sources})
        unknown = [name for name in excluded if name not in known]
        if unknown:
            raise UserInputError(f"--exclude: unknown family {', '.join(unknown)} under {data_root}; known: "
                                 f"{', '.join(known)} (or '{EXCLUDE_STRUCTURES}', '{EXCLUDE_NONE}')")
    kept = [source for source in sources if source.family not in excluded]
    if not kept:
        raise UserInputError(f"{data_root}: every alignment is excluded ({', '.join(excluded)}); nothing to pretrain on")
    return kept, excluded


@dataclass(frozen=True)
class Alignment:
    """A source read for pretraining: ``train (n, L)`` and ``held_out (m, L)`` tokens, ``weights (n,)``, ``depth``."""

    source: Source
    train: torch.Tensor
    weights: torch.Tensor
    held_out: torch.Tensor
    depth: int

    @property
    def neff(self) -> float:
        """Effective number of training rows (sum of the 80 %-identity weights)."""
        return float(self.weights.sum())


def load_alignment(source: Source, max_seqs: int, seed: int) -> Alignment:
    """Read ``source``, keep ≤ ``max_seqs`` random rows, hold out up to 64 of them (a tenth; none below 20 rows)."""
    msa = read_msa(source.path)
    tokens = MSATokenizer().encode(msa)
    pool = tokens[subsample(tokens, max_seqs, "random", seed=seed, keep_first=False)]
    order = torch.randperm(len(pool), generator=torch.Generator().manual_seed(seed))
    count = min(HELD_OUT_ROWS, len(pool) // 10) if len(pool) >= MIN_ROWS_FOR_HELD_OUT else 0
    train = pool[order[count:]]
    return Alignment(source, train, sequence_weights(train), pool[order[:count]], msa.depth)


class CroppedBlocks(Dataset):
    """Item i: ``(rows, ≤ max_columns)`` tokens, a window of a row block of an alignment drawn by ``probabilities``."""

    def __init__(self, alignments: Sequence[Alignment], probabilities: torch.Tensor, rows: int, max_columns: int,
                 size: int, seed: int) -> None:
        self.blocks = [RowBlocks(a.train, a.weights, rows, size=size, seed=seed + k) for k, a in enumerate(alignments)]
        self.probabilities, self.max_columns, self.size, self.seed = probabilities, max_columns, size, seed

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, index: int) -> torch.Tensor:
        generator = torch.Generator().manual_seed(self.seed * 1_000_033 + index)
        block = self.blocks[int(torch.multinomial(self.probabilities, 1, generator=generator))][index]
        extra = block.shape[1] - self.max_columns
        start = int(torch.randint(extra + 1, (1,), generator=generator)) if extra > 0 else 0
        return block[:, start:start + self.max_columns]


def sampling_probabilities(alignments: Sequence[Alignment]) -> torch.Tensor:
    """``(S,)``: each alignment's chance per step, ∝ √Neff."""
    roots = torch.tensor([math.sqrt(a.neff) for a in alignments])
    return roots / roots.sum()


def validation_blocks(alignments: Sequence[Alignment], rows: int, max_columns: int) -> dict[str, torch.Tensor]:
    """``(1, n, l)``: the first ``rows`` held-out rows and ``max_columns`` columns of each alignment that has some."""
    return {a.source.name: a.held_out[:rows, :max_columns][None] for a in alignments if len(a.held_out)}


@torch.no_grad()
def masked_token_metrics(model: MSAContactModel, tokens: torch.Tensor, seed: int = 1) -> tuple[float, float]:
    """``(cross-entropy, accuracy)`` of the masked cells of ``tokens (1, N, L)`` (BERT masking, fixed ``seed``)."""
    masked, chosen = mask_tokens(tokens, MASK_PROBABILITY, torch.Generator().manual_seed(seed))
    if not chosen.any():
        return float("nan"), float("nan")
    logits, _ = model(masked.to(next(model.parameters()).device))
    picked, truth = logits[chosen.to(logits.device)], tokens.to(logits.device)[chosen.to(logits.device)]
    return float(F.cross_entropy(picked, truth)), float((picked.argmax(-1) == truth).float().mean())


def held_out_metrics(model: MSAContactModel, blocks: dict[str, torch.Tensor]) -> dict[str, dict[str, float]]:
    """Masked-token ``loss`` and ``accuracy`` of ``model`` on each held-out block."""
    model.eval()
    return {name: dict(zip(("loss", "accuracy"), (round(v, 4) for v in masked_token_metrics(model, block))))
            for name, block in blocks.items()}


def build_model(options: PretrainOptions) -> MSAContactModel:
    """A fresh :class:`MSAContactModel` of ``options``' size, its contact head frozen."""
    model = MSAContactModel(embed_dim=options.embed_dim, num_heads=options.heads, num_layers=options.layers,
                            dropout=options.dropout, positional=options.positional)
    model.contact_head.requires_grad_(False)
    return model


def pretrain(data_root: str | Path | None, out: Path, options: PretrainOptions, config: TrainConfig,
             exclude: str | Sequence[str] = EXCLUDE_STRUCTURES) -> dict[str, Any]:
    """Pretrain one model on the sources of ``data_root`` (None: the default) into ``out``; returns ``metrics.json``."""
    sources, excluded = pretraining_sources(resolve_data_root(data_root), exclude)
    out = prepare_run_dir(out, resume=options.resume, overwrite=options.overwrite)
    seed_everything(config.seed)
    tick = time.process_time()
    alignments = [load_alignment(source, options.max_seqs, config.seed) for source in sources]
    reading_cpu_s = time.process_time() - tick
    probabilities = sampling_probabilities(alignments)
    blocks = validation_blocks(alignments, options.rows, options.max_columns)
    model = build_model(options)
    size = (config.max_steps_per_epoch or 250) * config.batch_size
    dataset = CroppedBlocks(alignments, probabilities, options.rows, options.max_columns, size, config.seed)

    def evaluate(module: MSAContactModel) -> dict[str, float]:
        losses = [masked_token_metrics(module, block)[0] for block in blocks.values()]
        return {"val_loss": sum(losses) / len(losses)} if losses else {"val_loss": float("nan")}

    run_info = {**options.settings(), "excluded": excluded, "sources": [s.name for s in sources]}
    trainer = Trainer(model, dataset, config, out, loss_fn=lambda m, batch: masked_lm_loss(m, batch, MASK_PROBABILITY),
                      evaluate=evaluate if blocks else None, collate_fn=torch.stack, resume=options.resume,
                      run_info=run_info)
    _, training = fit_timed(trainer)
    model.save_pretrained(out)
    plot_curves(out)
    held_out = held_out_metrics(model, blocks)
    metrics = {
        "excluded": excluded,
        "trained_on": [
            {"name": a.source.name, "family": a.source.family, "depth": a.depth, "length": a.train.shape[1],
             "rows_used": len(a.train), "held_out_rows": len(a.held_out), "neff": round(a.neff, 1),
             "sampling_probability": round(float(p), 4), "held_out": held_out.get(a.source.name)}
            for a, p in zip(alignments, probabilities)
        ],
        "held_out_mean": {key: round(sum(v[key] for v in held_out.values()) / len(held_out), 4)
                          for key in ("loss", "accuracy")} if held_out else None,
        "options": options.settings(), "train": config.to_dict(),
        "training": {**training, "reading_cpu_minutes": round(reading_cpu_s / 60, 2)},
    }
    write_json(out / "metrics.json", metrics)
    return metrics


def pretrain_report(metrics: dict[str, Any], out: str | Path) -> str:
    """One line for the terminal: how many alignments, the held-out masked-token loss and accuracy, what was excluded."""
    mean = metrics["held_out_mean"]
    held = f"held-out masked-token loss {mean['loss']:.3f}, accuracy {mean['accuracy']:.3f}; " if mean else ""
    return (f"pretrained on {len(metrics['trained_on'])} alignments ({held}excluded: {', '.join(metrics['excluded']) or 'none'}); "
            f"wrote {out}/model.safetensors, metrics.json")
