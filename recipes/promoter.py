"""Train the DNA promoter classifier (GUE human promoters or E. coli promoters) beside trivial baselines.

    python recipes/promoter.py --data-root DIR --task prom_core_all --out RUN_DIR [--max-minutes M] [--quick]

Tasks: ``prom_core_all``, ``prom_core_notata``, ``prom_core_tata``, ``prom_300_tata`` (GUE; trained on
``train.csv``, early-stopped on ``dev.csv`` MCC, also scored on ``test.csv`` when the task folder has one)
and ``ecoli_sigma70`` (iPromoter-2L promoters vs non-promoters, 5-fold stratified cross-validation after
upper-casing every sequence and ignoring the FASTA headers, which both leak the label; each fold
early-stops on 10 % of its training part; the model saved for prediction is then trained on all
sequences the same way).

In the same run and on the same split the recipe fits two baselines with scikit-learn: a GC-content
threshold (logistic regression on the GC fraction) and logistic regression on k-mer counts (k = 1..6,
C chosen by 3-fold CV on the training part), and prints them beside the model and the published MCC×100 of
fine-tuned DNABERT / Nucleotide Transformer / DNABERT-2 (data_cards/gue_promoters.md).

Writes into RUN_DIR: ``config.json`` + ``model.safetensors`` (for ``bioattn predict promoter``),
``metrics.json``, ``training_curve.png``, ``train_log.csv``, ``checkpoint/`` (``--resume`` continues an
interrupted run; cross-validation folds live in ``RUN_DIR/fold<k>/``). Runs under ``torchrun`` unchanged
(only rank 0 evaluates and writes).
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch
import torch.nn.functional as F
from sklearn.feature_extraction.text import CountVectorizer, TfidfTransformer
from sklearn.linear_model import LogisticRegression, LogisticRegressionCV
from sklearn.metrics import accuracy_score, f1_score, matthews_corrcoef, roc_auc_score
from sklearn.model_selection import StratifiedKFold, train_test_split
from sklearn.pipeline import make_pipeline
from torch import nn
from torch.utils.data import Dataset
from tqdm.auto import tqdm

from bioattn.cli import run_user_main
from bioattn.data import resolve_data_root
from bioattn.data.dna import collate_tokens, gc_content, read_records, reverse_complement_ids
from bioattn.errors import UserInputError
from bioattn.io import write_json
from bioattn.models.promoter import PromoterClassifier
from bioattn.training import TrainConfig, Trainer, add_training_args, config_from_args, plot_curves, prepare_run_dir, seed_everything
from bioattn.training.distributed import is_main_process

GUE_TASKS = ("prom_core_all", "prom_core_notata", "prom_core_tata", "prom_300_tata")
ECOLI_TASK = "ecoli_sigma70"
TASKS = (*GUE_TASKS, ECOLI_TASK)
CV_FOLDS = 5
KMER_MAX = 6
DEFAULTS = TrainConfig(
    max_epochs=12, batch_size=64, lr=3e-3, weight_decay=0.01, schedule="warmup_cosine", warmup_steps=100,
    grad_clip=1.0, patience=8, monitor="dev_mcc", monitor_mode="max",
)
# Published MCC×100 on the official GUE test split (fine-tuned pretrained models; DNABERT-2 paper, results
# table). See data_cards/gue_promoters.md.
PUBLISHED_GUE = {
    "DNABERT (3-mer)": {"prom_core_all": 70.92, "prom_core_notata": 69.82, "prom_core_tata": 78.15, "prom_300_tata": 69.83},
    "DNABERT (6-mer)": {"prom_core_all": 68.90, "prom_core_notata": 70.47, "prom_core_tata": 76.06, "prom_300_tata": 61.56},
    "NT-500M-human": {"prom_core_all": 63.45, "prom_core_notata": 64.82, "prom_core_tata": 71.34, "prom_300_tata": 78.07},
    "NT-2500M-multi": {"prom_core_all": 70.33, "prom_core_notata": 71.58, "prom_core_tata": 72.97, "prom_300_tata": 79.43},
    "DNABERT-2 (117M)": {"prom_core_all": 69.37, "prom_core_notata": 68.04, "prom_core_tata": 74.17, "prom_300_tata": 71.59},
}


@dataclass
class Split:
    """Sequences (upper-case strings, for the baselines), their token arrays and 0/1 labels ``(N,)``."""

    sequences: list[str]
    tokens: list[np.ndarray]
    labels: np.ndarray

    def subset(self, index: Sequence[int] | np.ndarray) -> "Split":
        return Split([self.sequences[i] for i in index], [self.tokens[i] for i in index], self.labels[np.asarray(index)])

    def __len__(self) -> int:
        return len(self.sequences)


class TokenDataset(Dataset):
    """``(tokens (L,), label)`` pairs of a :class:`Split`."""

    def __init__(self, split: Split) -> None:
        self.split = split

    def __len__(self) -> int:
        return len(self.split)

    def __getitem__(self, index: int) -> tuple[np.ndarray, int]:
        return self.split.tokens[index], int(self.split.labels[index])


def collate(items: list[tuple[np.ndarray, int]]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``ids (B, L)``, ``padding_mask (B, L)`` (True = PAD), ``labels (B,)`` float."""
    ids, padding_mask = collate_tokens([tokens for tokens, _ in items])
    return ids, padding_mask, torch.tensor([label for _, label in items], dtype=torch.float32)


# ------------------------------------------------------------------------------------------------ data
def _records_to_split(records: Sequence[Any], path: Path) -> Split:
    sequences = [r.sequence.upper() for r in records]
    tokens = [r.tokens(path) for r in records]
    return Split(sequences, tokens, np.array([r.label for r in records], dtype=np.int64))


def _cap_rows(split: Split, max_rows: int | None, seed: int) -> Split:
    if max_rows is None or len(split) <= max_rows:
        return split
    keep = np.sort(np.random.default_rng(seed).choice(len(split), max_rows, replace=False))
    return split.subset(keep)


def load_gue(task_dir: Path, max_rows: int | None, seed: int) -> dict[str, Split]:
    """``train``, ``dev`` and, when present, ``test`` splits of a GUE task folder (CSV ``sequence,label``)."""
    if not task_dir.is_dir():
        raise UserInputError(f"{task_dir}: task folder not found; see data_cards/gue_promoters.md to obtain it")
    splits = {}
    for name in ("train", "dev", "test"):
        path = task_dir / f"{name}.csv"
        if name == "test" and not path.exists():
            continue
        if not path.exists():
            raise UserInputError(f"{path}: not found; a GUE task folder needs train.csv and dev.csv")
        splits[name] = _cap_rows(_records_to_split(list(read_records(path, labels=True)), path), max_rows, seed)
    return splits


def load_ecoli(folder: Path, max_rows: int | None, seed: int) -> Split:
    """All iPromoter-2L sequences (label 1: ``positive2860.txt``, 0: ``negative2860.txt``), leaks removed.

    Sequences are upper-cased (positives are lower-case except the TSS), headers are ignored (they name the
    class) and exact duplicates are kept once (first occurrence).
    """
    sequences: list[str] = []
    tokens: list[np.ndarray] = []
    labels: list[int] = []
    seen: set[str] = set()
    for name, label in (("positive2860.txt", 1), ("negative2860.txt", 0)):
        path = folder / name
        if not path.exists():
            raise UserInputError(f"{path}: not found; see data_cards/ecoli_sigma70.md to obtain it")
        for record in read_records(path):
            sequence = record.sequence.upper()
            if sequence not in seen:
                seen.add(sequence)
                sequences.append(sequence)
                tokens.append(record.tokens(path))
                labels.append(label)
    return _cap_rows(Split(sequences, tokens, np.array(labels, dtype=np.int64)), max_rows, seed)


# -------------------------------------------------------------------------------------------- metrics
def binary_metrics(labels: np.ndarray, probs: np.ndarray) -> dict[str, float]:
    """MCC, accuracy, F1 (threshold 0.5), AUROC and mean binary cross-entropy (scikit-learn / torch)."""
    predicted = (probs >= 0.5).astype(np.int64)
    metrics = {
        "mcc": float(matthews_corrcoef(labels, predicted)),
        "accuracy": float(accuracy_score(labels, predicted)),
        "f1": float(f1_score(labels, predicted, zero_division=0)),
        "loss": float(F.binary_cross_entropy(torch.from_numpy(np.clip(probs, 1e-7, 1 - 1e-7)),
                                             torch.from_numpy(labels.astype(np.float64)))),
    }
    if len(np.unique(labels)) == 2:
        metrics["auroc"] = float(roc_auc_score(labels, probs))
    return metrics


# ------------------------------------------------------------------------------------------ baselines
def gc_threshold_baseline(train: Split, evals: dict[str, Split]) -> dict[str, dict[str, float]]:
    """Logistic regression on the GC fraction alone: a GC threshold with monotone probabilities."""
    model = LogisticRegression().fit(gc_content(train.sequences)[:, None], train.labels)
    return {name: binary_metrics(split.labels, model.predict_proba(gc_content(split.sequences)[:, None])[:, 1])
            for name, split in evals.items()}


def kmer_baseline(train: Split, evals: dict[str, Split], seed: int) -> dict[str, dict[str, float]]:
    """Logistic regression on k-mer counts (k = 1..6, sublinear, L2-normalised per sequence), C by 3-fold CV."""
    model = make_pipeline(
        CountVectorizer(analyzer="char", ngram_range=(1, KMER_MAX), lowercase=False),
        TfidfTransformer(use_idf=False, norm="l2", sublinear_tf=True),
        LogisticRegressionCV(Cs=[0.3, 1, 3, 10, 30], cv=StratifiedKFold(3, shuffle=True, random_state=seed),
                             scoring="matthews_corrcoef", max_iter=3000, l1_ratios=(0.0,), use_legacy_attributes=False),
    )
    model.fit(train.sequences, train.labels)
    return {name: binary_metrics(split.labels, model.predict_proba(split.sequences)[:, 1]) for name, split in evals.items()}


def run_baselines(train: Split, evals: dict[str, Split], seed: int) -> dict[str, dict[str, dict[str, float]]]:
    """``{baseline: {split: metrics}}`` for the GC threshold and the k-mer logistic regression."""
    return {"gc_threshold": gc_threshold_baseline(train, evals), "kmer_logreg": kmer_baseline(train, evals, seed)}


# ------------------------------------------------------------------------------------------- training
def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-root", default=None, help="data folder (default: $BIOATTN_DATA_ROOT, else ../shared/data)")
    parser.add_argument("--task", choices=TASKS, default="prom_core_all", help="benchmark task (default: %(default)s)")
    parser.add_argument("--out", type=Path, required=True, help="run directory to create")
    parser.add_argument("--quick", action="store_true", help="smoke test: tiny model and data slice, about a minute on 2 cores")
    parser.add_argument("--max-rows", type=int, default=None, help=argparse.SUPPRESS)  # cap per split (tests)
    model = parser.add_argument_group("model")
    model.add_argument("--d-model", type=int, default=64, help="token width (default: %(default)s)")
    model.add_argument("--heads", type=int, default=4, help="attention heads (default: %(default)s)")
    model.add_argument("--layers", type=int, default=2, help="transformer layers (default: %(default)s)")
    model.add_argument("--conv-kernel", type=int, default=15, help="odd kernel of the conv embedding, 0 = off (default: %(default)s)")
    model.add_argument("--conv-layers", type=int, default=1, help="residual conv embedding blocks (default: %(default)s)")
    model.add_argument("--dropout", type=float, default=0.1, help="dropout of the residual branches and the head (default: %(default)s)")
    model.add_argument("--no-rc-augment", action="store_true", help="do not train on random reverse complements")
    model.add_argument("--no-rc-average", action="store_true", help="predict from the given strand only")
    add_training_args(parser, DEFAULTS)
    return parser


def resolve_config(args: argparse.Namespace) -> TrainConfig:
    config = config_from_args(args, DEFAULTS)
    if args.quick:
        config = dataclasses.replace(config, max_epochs=min(config.max_epochs, 2), max_steps_per_epoch=15,
                                     batch_size=min(config.batch_size, 64), warmup_steps=5)
    return config


def build_model(args: argparse.Namespace, max_len: int) -> PromoterClassifier:
    try:
        return PromoterClassifier(
            max_len=max_len,
            d_model=32 if args.quick else args.d_model,
            num_heads=2 if args.quick else args.heads,
            num_layers=1 if args.quick else args.layers,
            conv_kernel=args.conv_kernel,
            conv_layers=args.conv_layers,
            dropout=args.dropout,
            rc_average=not args.no_rc_average,
        )
    except ValueError as exc:
        raise UserInputError(f"invalid model options: {exc}") from exc


def train_model(
    train: Split, dev: Split, evals: dict[str, Split], run_dir: Path, config: TrainConfig,
    args: argparse.Namespace, max_len: int, resume: bool,
) -> tuple[PromoterClassifier, dict[str, Any]]:
    """Train on ``train`` (early stopping on ``dev`` MCC) into ``run_dir``; score the best weights on ``evals``."""
    rc_augment = not args.no_rc_augment
    seed_everything(config.seed)
    model = build_model(args, max_len)

    def loss_fn(module: nn.Module, batch: tuple[torch.Tensor, torch.Tensor, torch.Tensor]) -> torch.Tensor:
        ids, padding_mask, labels = batch
        if rc_augment:
            flip = torch.rand(ids.shape[0], device=ids.device) < 0.5
            ids = torch.where(flip[:, None], reverse_complement_ids(ids, padding_mask), ids)
        return F.binary_cross_entropy_with_logits(module(ids, padding_mask), labels)

    def evaluate(module: nn.Module) -> dict[str, float]:
        metrics = binary_metrics(dev.labels, module.predict_tokens(dev.tokens, batch_size=512))
        return {f"dev_{k}": v for k, v in metrics.items()}

    trainer = Trainer(model, TokenDataset(train), config, run_dir, loss_fn=loss_fn, evaluate=evaluate,
                      collate_fn=collate, resume=resume, run_info={k: v for k, v in vars(args).items() if k != "handler"})
    wall, cpu = time.monotonic(), time.process_time()
    result = trainer.fit()
    info: dict[str, Any] = {
        "parameters": sum(p.numel() for p in model.parameters()),
        "best_epoch": result.best_epoch,
        "optimizer_steps": result.global_step,
        "stop_reason": result.stop_reason,
        "train_wall_minutes_this_invocation": round((time.monotonic() - wall) / 60, 2),
        "train_cpu_minutes_this_invocation": round((time.process_time() - cpu) / 60, 2),
        "torch_threads": torch.get_num_threads(),
    }
    if is_main_process():
        info["scores"] = {name: binary_metrics(split.labels, model.predict_tokens(split.tokens, batch_size=512))
                          for name, split in evals.items()}
        model.save_pretrained(run_dir)
        plot_curves(run_dir)
    return model, info


def run_gue(args: argparse.Namespace, config: TrainConfig, data_root: Path) -> dict[str, Any]:
    splits = load_gue(data_root / "promoters" / "gue" / args.task, args.max_rows, config.seed)
    evals = {name: split for name, split in splits.items() if name != "train"}
    max_len = max(max(len(t) for t in split.tokens) for split in splits.values())
    print(f"{args.task}: " + ", ".join(f"{n} {len(s):,}" for n, s in splits.items()) + f" sequences, up to {max_len} nt",
          file=sys.stderr)
    _, info = train_model(splits["train"], splits["dev"], evals, args.out, config, args, max_len, args.resume)
    if not is_main_process():
        return {}
    print("fitting baselines (GC threshold, k-mer logistic regression) on the same split ...", file=sys.stderr)
    scores = {"PromoterClassifier (this run)": info.pop("scores"), **_named(run_baselines(splits["train"], evals, config.seed))}
    return {"protocol": "train on train.csv, early stopping on dev.csv MCC", "sizes": {n: len(s) for n, s in splits.items()},
            "scores": scores, "training": info}


def _named(baselines: dict[str, Any]) -> dict[str, Any]:
    names = {"gc_threshold": "GC-content threshold (this run)", "kmer_logreg": f"k-mer (k=1..{KMER_MAX}) logistic regression (this run)"}
    return {names[k]: v for k, v in baselines.items()}


def run_ecoli(args: argparse.Namespace, config: TrainConfig, data_root: Path) -> dict[str, Any]:
    data = load_ecoli(data_root / "promoters" / "ecoli_sigma70", args.max_rows, config.seed)
    max_len = max(len(t) for t in data.tokens)
    print(f"{ECOLI_TASK}: {len(data):,} unique sequences ({int(data.labels.sum()):,} promoters), {CV_FOLDS}-fold CV",
          file=sys.stderr)
    per_run = dataclasses.replace(config, max_minutes=config.max_minutes / (CV_FOLDS + 1) if config.max_minutes else None)
    folds = StratifiedKFold(CV_FOLDS, shuffle=True, random_state=config.seed).split(np.zeros(len(data)), data.labels)
    fold_scores: list[dict[str, dict[str, float]]] = []
    fold_info = []
    for fold, (train_index, test_index) in enumerate(tqdm(list(folds), desc="cross-validation", unit="fold",
                                                          disable=not is_main_process()), start=1):
        fold_dir = args.out / f"fold{fold}"
        done = fold_dir / "fold_metrics.json"
        if args.resume and done.exists():
            saved = json.loads(done.read_text())
            fold_scores.append(saved["scores"])
            fold_info.append(saved["training"])
            continue
        inner_train, inner_dev = _inner_split(data.subset(train_index), config.seed)
        held_out = data.subset(test_index)
        _, info = train_model(inner_train, inner_dev, {"cv": held_out}, fold_dir, per_run, args, max_len,
                              args.resume and fold_dir.exists())
        if is_main_process():
            scores = {"PromoterClassifier (this run)": info.pop("scores"),
                      **_named(run_baselines(data.subset(train_index), {"cv": held_out}, config.seed))}
            write_json(done, {"scores": scores, "training": info})
            fold_scores.append(scores)
            fold_info.append(info)
    final_train, final_dev = _inner_split(data, config.seed)
    _, final_info = train_model(final_train, final_dev, {}, args.out, per_run, args, max_len, args.resume)
    if not is_main_process():
        return {}
    final_info.pop("scores", None)
    return {
        "protocol": f"{CV_FOLDS}-fold stratified CV (sequences upper-cased, headers ignored, duplicates removed); "
                    "each fold early-stops on 10% of its training part",
        "sizes": {"sequences": len(data), "promoters": int(data.labels.sum())},
        "scores": _mean_over_folds(fold_scores),
        "folds": fold_scores,
        "training": {"folds": fold_info, "final_model": final_info},
    }


def _inner_split(split: Split, seed: int) -> tuple[Split, Split]:
    train_index, dev_index = train_test_split(np.arange(len(split)), test_size=0.1, stratify=split.labels, random_state=seed)
    return split.subset(train_index), split.subset(dev_index)


def _mean_over_folds(fold_scores: list[dict[str, dict[str, dict[str, float]]]]) -> dict[str, dict[str, dict[str, float]]]:
    out: dict[str, dict[str, dict[str, float]]] = {}
    for method in fold_scores[0]:
        values = [fold[method]["cv"] for fold in fold_scores]
        mean = {k: float(np.mean([v[k] for v in values])) for k in values[0]}
        mean.update({f"{k}_std": float(np.std([v[k] for v in values])) for k in ("mcc", "accuracy")})
        out[method] = {"cv": mean}
    return out


# -------------------------------------------------------------------------------------------- report
def comparison_table(task: str, scores: dict[str, dict[str, dict[str, float]]]) -> str:
    """Text table: each method's MCC×100, accuracy, AUROC and F1 per evaluated split, then published MCC×100."""
    lines = []
    for split in next(iter(scores.values())):
        lines.append(f"{task} — {split} split{' (mean over folds)' if split == 'cv' else ''}")
        lines.append(f"  {'method':<52} {'MCC×100':>8} {'acc':>7} {'AUROC':>7} {'F1':>7}")
        for method, per_split in scores.items():
            m = per_split[split]
            lines.append(f"  {method:<52} {100 * m['mcc']:>8.2f} {m['accuracy']:>7.4f} {m.get('auroc', float('nan')):>7.4f} {m['f1']:>7.4f}")
    if task in GUE_TASKS:
        lines.append("published MCC×100 (official GUE test split, not this run):")
        lines.extend(f"  {name:<52} {values[task]:>8.2f}" for name, values in PUBLISHED_GUE.items())
    else:
        lines.append("published numbers for this benchmark use other protocols: see data_cards/ecoli_sigma70.md")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    config = resolve_config(args)
    if args.max_rows is None and args.quick:
        args.max_rows = 1500
    data_root = resolve_data_root(args.data_root)
    args.out = prepare_run_dir(args.out, resume=args.resume, overwrite=args.overwrite)
    results = (run_ecoli if args.task == ECOLI_TASK else run_gue)(args, config, data_root)
    if not is_main_process():
        return 0
    published = {name: values[args.task] for name, values in PUBLISHED_GUE.items() if args.task in values}
    write_json(args.out / "metrics.json", {"task": args.task, "quick": args.quick, **results, "published_mcc_x100": published})
    print(comparison_table(args.task, results["scores"]))
    print(f"model, metrics.json and training_curve.png written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(run_user_main(main))
