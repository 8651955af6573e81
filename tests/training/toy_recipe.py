"""A toy recipe for the training tests: a tiny MLP on a synthetic two-class dataset.

Imported by ``test_trainer.py`` and run as a script (``python tests/training/toy_recipe.py --out DIR``,
also under ``torchrun``) the way a real recipe is: flags + ``--config``, ``prepare_run_dir``,
``Trainer.fit``, ``metrics.json`` and the final weights. Holds no tests itself.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch
from torch import nn
from torch.utils.data import TensorDataset

from bioattn.cli import run_user_main
from bioattn.io import save_tensors, write_json
from bioattn.commands.training_args import add_training_args, config_from_args
from bioattn.training import (
    TrainConfig,
    Trainer,
    prepare_run_dir,
    seed_everything,
)
from bioattn.distributed import is_main_process, rank

# On the CPU on every machine: the tests compare runs bit for bit (one process vs two gloo ranks, killed vs resumed).
DEFAULTS = TrainConfig(max_epochs=3, batch_size=8, lr=0.01, monitor="accuracy", warmup_steps=2, device="cpu")
FEATURES = 8


def make_dataset(n: int, seed: int) -> TensorDataset:
    """``n`` samples: x ``(n, 8)`` Gaussian, y = 1 when a fixed linear score is positive."""
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(n, FEATURES, generator=generator)
    w = torch.linspace(-1.0, 1.0, FEATURES)
    return TensorDataset(x, (x @ w > 0).long())


def make_model(dropout: float) -> nn.Module:
    return nn.Sequential(nn.Linear(FEATURES, 16), nn.ReLU(), nn.Dropout(dropout), nn.Linear(16, 2))


def loss_fn(model: nn.Module, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    x, y = batch
    return nn.functional.cross_entropy(model(x), y)


def make_evaluate(dataset: TensorDataset):
    x, y = dataset.tensors

    def evaluate(model: nn.Module) -> dict[str, float]:
        device = next(model.parameters()).device  # the Trainer's device (a GPU where one is seen)
        logits = model(x.to(device))
        return {
            "accuracy": (logits.argmax(1) == y.to(device)).float().mean().item(),
            "loss": nn.functional.cross_entropy(logits, y.to(device)).item(),
        }

    return evaluate


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--samples", type=int, default=96)
    parser.add_argument("--dropout", type=float, default=0.1)
    parser.add_argument("--checkpoint-every-steps", type=int, default=None)
    parser.add_argument("--hang-at-call", type=int, default=None,
                        help="at this loss_fn call write OUT/hang.flag and sleep (to be killed)")
    parser.add_argument("--dump-rank-params", action="store_true", help="every rank saves its final parameters")
    add_training_args(parser, DEFAULTS)
    args = parser.parse_args(argv)
    config = config_from_args(args, DEFAULTS)
    run_dir = prepare_run_dir(args.out, resume=args.resume, overwrite=args.overwrite)
    seed_everything(config.seed)
    model = make_model(args.dropout)
    calls = 0

    def counting_loss(model: nn.Module, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        nonlocal calls
        calls += 1
        if calls == args.hang_at_call:
            (run_dir / "hang.flag").write_text("hung\n")
            time.sleep(600)
        return loss_fn(model, batch)

    trainer = Trainer(
        model, make_dataset(args.samples, seed=1), config, run_dir,
        loss_fn=counting_loss, evaluate=make_evaluate(make_dataset(64, seed=2)),
        resume=args.resume, run_info=vars(args),
    )
    result = trainer.fit()
    if args.dump_rank_params:
        save_tensors(run_dir / f"params_rank{rank()}.safetensors", model.state_dict())
    if is_main_process():
        save_tensors(run_dir / "model.safetensors", model.state_dict())
        write_json(run_dir / "metrics.json", {
            "best_metrics": result.best_metrics, "best_epoch": result.best_epoch,
            "history": result.history, "global_step": result.global_step, "stop_reason": result.stop_reason,
        })
    return 0


if __name__ == "__main__":
    sys.exit(run_user_main(main))
