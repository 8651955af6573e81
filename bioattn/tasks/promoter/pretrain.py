"""Masked-nucleotide pretraining of the promoter classifier's encoder on its own training sequences."""
from __future__ import annotations

import dataclasses
import math
import sys
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from bioattn.data.dna import A_ID, MASK_ID, T_ID
from bioattn.data.masking import bert_mask, masked_cross_entropy
from bioattn.models.promoter import PromoterClassifier
from bioattn.tasks.common import fit_timed
from bioattn.tasks.promoter.data import Split, TokenDataset, collate
from bioattn.training import TrainConfig, Trainer
from bioattn.distributed import is_main_process

__all__ = ["MASK_PROBABILITY", "PRETRAIN_DIR", "MaskedNucleotideModel", "mask_nucleotides", "masked_nucleotide_loss",
           "pretrain_config", "pretrain_encoder"]

MASK_PROBABILITY = 0.15
PRETRAIN_DIR = "pretrain"
PRETRAIN_BATCH_FACTOR = 2  # pretraining batch = 2 x the fine-tuning batch (divisible like it over processes)
PRETRAIN_WARMUP_STEPS = 200
PRETRAIN_LR = 3e-3
_NUCLEOTIDES = torch.arange(A_ID, T_ID + 1)  # A, C, G, T: the targets (N is never chosen)


class MaskedNucleotideModel(nn.Module):
    """A :class:`PromoterClassifier`'s encoder (shared) with a nucleotide head: ``(B, L)`` → logits ``(B, L, 4)``."""

    def __init__(self, classifier: PromoterClassifier) -> None:
        super().__init__()
        self.classifier = classifier
        width = classifier.config["embed_dim"]
        self.head = nn.Sequential(nn.Linear(width, width), nn.GELU(), nn.LayerNorm(width), nn.Linear(width, len(_NUCLEOTIDES)))

    def forward(self, ids: Tensor, padding_mask: Tensor) -> Tensor:
        hidden, _, _ = self.classifier.encode(ids, padding_mask)
        return self.head(hidden[:, 1:])


def mask_nucleotides(ids: Tensor, generator: torch.Generator | None = None, *,
                     probability: float = MASK_PROBABILITY) -> tuple[Tensor, Tensor]:
    """BERT masking of the A/C/G/T positions of ``ids (B, L)``: ``(masked ids, chosen (B, L) bool)``."""
    nucleotide = (ids >= A_ID) & (ids <= T_ID)
    return bert_mask(ids, nucleotide, probability, MASK_ID, _NUCLEOTIDES, generator)


def masked_nucleotide_loss(model: nn.Module, ids: Tensor, padding_mask: Tensor, generator: torch.Generator | None = None,
                           *, probability: float = MASK_PROBABILITY) -> Tensor:
    """Cross-entropy over A/C/G/T at the chosen positions of ``ids (B, L)`` (mean); ``model`` may be a DDP wrapper."""
    masked, chosen = mask_nucleotides(ids, generator, probability=probability)
    return masked_cross_entropy(model(masked, padding_mask), ids - A_ID, chosen)


def pretrain_config(config: TrainConfig, epochs: int, sequences: int, *, quick: bool = False) -> TrainConfig:
    """The pretraining schedule beside the fine-tuning ``config``, for ``sequences`` training sequences."""
    batch_size = config.batch_size if quick else PRETRAIN_BATCH_FACTOR * config.batch_size
    total_steps = epochs * math.ceil(sequences / batch_size)
    warmup = config.warmup_steps if quick else min(PRETRAIN_WARMUP_STEPS, total_steps // 4)
    return dataclasses.replace(
        config, max_epochs=epochs, lr=PRETRAIN_LR, max_minutes=None, patience=None, monitor="loss", monitor_mode="min",
        eval_every_steps=None, batch_size=batch_size, warmup_steps=warmup, find_unused_parameters=True, ema_decay=None,
        min_steps=0, min_batches_per_epoch=0)


def pretrain_encoder(classifier: PromoterClassifier, train: Split, run_dir: Path, config: TrainConfig, epochs: int,
                     resume: bool, *, quick: bool = False, mask_probability: float = MASK_PROBABILITY,
                     bucket_lengths: list[int] | None = None, run_info: dict[str, Any] | None = None) -> dict[str, Any]:
    """Pretrain ``classifier``'s encoder in place on ``train``; the fit summary with the last ``train_loss``."""
    model = MaskedNucleotideModel(classifier)
    if is_main_process():
        print(f"pretraining the encoder: masked nucleotides ({mask_probability:.0%}) of the {len(train):,} training "
              f"sequences, {epochs} epochs → {run_dir}", file=sys.stderr)

    def loss_fn(module: nn.Module, batch: tuple[Tensor, ...]) -> Tensor:
        return masked_nucleotide_loss(module, batch[0], batch[1], probability=mask_probability)

    trainer = Trainer(model, TokenDataset(train), pretrain_config(config, epochs, len(train), quick=quick), run_dir,
                      loss_fn=loss_fn, collate_fn=collate, resume=resume, run_info=run_info, bucket_lengths=bucket_lengths)
    result, info = fit_timed(trainer)
    del info["best_epoch"]
    info["train_loss"] = result.history[-1]["train_loss"] if result.history else None
    return info
