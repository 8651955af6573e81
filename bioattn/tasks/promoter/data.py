"""Data of the promoter task: labelled splits, the GUE / E. coli / own-file loaders and the dev split."""
from __future__ import annotations

import warnings
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping, Sequence

import numpy as np
import torch
from sklearn.model_selection import StratifiedGroupKFold
from torch.utils.data import Dataset

from bioattn.data.dna import DNARecord, collate_tokens, encode, read_records
from bioattn.errors import UserInputError

DEV_FRACTION = 0.1
ECOLI_FILES = (("positive2860.txt", 1), ("negative2860.txt", 0))
BINARY_CLASSES = ("0", "1")


@dataclass
class Split:
    """Labelled sequences: upper-case ``sequences``, ``tokens`` ``(L_i,)``, ``labels (N,)``, ``where`` (for errors)."""

    sequences: list[str]
    tokens: list[np.ndarray]
    labels: np.ndarray
    where: list[str]

    def subset(self, index: Sequence[int] | np.ndarray) -> "Split":
        index = np.asarray(index, dtype=np.int64)
        return Split([self.sequences[i] for i in index], [self.tokens[i] for i in index], self.labels[index],
                     [self.where[i] for i in index])

    def lengths(self) -> np.ndarray:
        """Sequence lengths ``(N,)`` int64."""
        return np.array([len(t) for t in self.tokens], dtype=np.int64)

    def __len__(self) -> int:
        return len(self.sequences)


class TokenDataset(Dataset):
    """``(tokens (L,), class index)`` pairs of a :class:`Split`."""

    def __init__(self, split: Split) -> None:
        self.split = split

    def __len__(self) -> int:
        return len(self.split)

    def __getitem__(self, index: int) -> tuple[np.ndarray, int]:
        return self.split.tokens[index], int(self.split.labels[index])


def collate(items: list[tuple[np.ndarray, int]]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``ids (B, L_max)`` long, ``padding_mask (B, L_max)`` bool (True = PAD), ``labels (B,)`` long class indices."""
    ids, padding_mask = collate_tokens([tokens for tokens, _ in items])
    return ids, padding_mask, torch.tensor([label for _, label in items], dtype=torch.long)


def class_names_of(labels: Iterable[int | str]) -> list[str]:
    """Sorted distinct labels as text (numerically when all are integers); the position is the class index."""
    distinct = set(labels)
    if all(isinstance(label, int) for label in distinct):
        return [str(label) for label in sorted(distinct)]
    return sorted(str(label) for label in distinct)


def records_to_split(records: Sequence[DNARecord], path: Path, class_names: Sequence[str]) -> Split:
    """Tokenise upper-cased ``records`` of ``path``; labels become indices into ``class_names``."""
    index = {name: i for i, name in enumerate(class_names)}
    sequences, tokens, labels, where = [], [], [], []
    for record in records:
        name = str(record.label)
        if name not in index:
            raise UserInputError(f"{path}: {record.describe()}: label {name!r} does not occur in the training data "
                                 f"(classes: {', '.join(class_names)})")
        sequence = record.sequence.upper()
        sequences.append(sequence)
        tokens.append(encode(sequence, record=record.describe(), source=path))
        labels.append(index[name])
        where.append(f"{path}: {record.describe()}")
    return Split(sequences, tokens, np.array(labels, dtype=np.int64), where)


def cap_rows(split: Split, max_rows: int | None, seed: int) -> Split:
    """A seeded random subset of at most ``max_rows`` sequences, in file order."""
    if max_rows is None or len(split) <= max_rows:
        return split
    return split.subset(np.sort(np.random.default_rng(seed).choice(len(split), max_rows, replace=False)))


def load_labelled_files(files: Mapping[str, Path], max_rows: int | None, seed: int,
                        positive_class: str | None = None) -> tuple[dict[str, Split], list[str]]:
    """Read labelled FASTA/CSV files (``{"train": path, ...}``): the splits (capped at ``max_rows``) and the training
    file's class names, with two classes the positive one second (:func:`~bioattn.metrics.order_binary_classes`)."""
    from bioattn.metrics import order_binary_classes
    records = {name: list(read_records(path, labels=True)) for name, path in files.items()}
    class_names = class_names_of(record.label for record in records["train"])
    if len(class_names) < 2:
        raise UserInputError(f"{files['train']}: every record has the label {class_names[0]!r}; "
                             f"training needs at least two classes")
    try:
        ordered, reason = order_binary_classes(class_names, positive_class)
    except UserInputError as exc:
        raise UserInputError(f"{files['train']}: {exc}") from None
    if reason and (ordered != class_names or positive_class is not None):
        print(f"{files['train']}: {reason}", file=sys.stderr)
    class_names = ordered
    splits = {name: cap_rows(records_to_split(records[name], path, class_names), max_rows, seed)
              for name, path in files.items()}
    return splits, class_names


def load_gue(task_dir: Path, max_rows: int | None, seed: int) -> tuple[dict[str, Split], list[str]]:
    """``train``, ``dev`` and, when present, ``test`` splits of a GUE task folder (``.csv`` or ``.csv.gz``)."""
    if not task_dir.is_dir():
        raise UserInputError(f"{task_dir}: task folder not found; download it with 'bioattn data fetch gue' "
                             "(see data_cards/gue_promoters.md)")
    files = {}
    for name in ("train", "dev", "test"):
        path = task_dir / f"{name}.csv"
        gzipped = task_dir / f"{name}.csv.gz"
        if path.exists() or gzipped.exists():
            files[name] = path if path.exists() else gzipped
        elif name != "test":
            raise UserInputError(f"{path}: not found; a GUE task folder needs train.csv and dev.csv")
    return load_labelled_files(files, max_rows, seed)


def load_ecoli(folder: Path, max_rows: int | None, seed: int) -> Split:
    """All iPromoter-2L sequences, upper-cased, headers ignored, exact duplicates kept once (both leak the label)."""
    parts = []
    seen: set[str] = set()
    for name, label in ECOLI_FILES:
        path = folder / name
        if not path.exists():
            raise UserInputError(f"{path}: not found; see data_cards/ecoli_sigma70.md to obtain it")
        kept = []
        for record in read_records(path):
            if record.sequence.upper() not in seen:
                seen.add(record.sequence.upper())
                kept.append(DNARecord(record.id, record.sequence, label, record.where))
        parts.append(records_to_split(kept, path, BINARY_CLASSES))
    return cap_rows(concatenate(parts), max_rows, seed)


def concatenate(parts: Sequence[Split]) -> Split:
    """One split holding the sequences of ``parts`` in order."""
    return Split([s for p in parts for s in p.sequences], [t for p in parts for t in p.tokens],
                 np.concatenate([p.labels for p in parts]), [w for p in parts for w in p.where])


def stratified_group_folds(split: Split, folds: int, seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """``(train_index, held_out_index)`` of ``folds`` stratified folds grouped by sequence, shuffled by ``seed``."""
    with warnings.catch_warnings():  # a class with fewer members than folds: sklearn warns, the split is still valid
        warnings.simplefilter("ignore", UserWarning)
        splitter = StratifiedGroupKFold(n_splits=folds, shuffle=True, random_state=seed)
        return list(splitter.split(np.zeros(len(split)), split.labels, groups=split.sequences))


def dev_split(split: Split, seed: int, source: str | Path, class_names: Sequence[str],
              fraction: float = DEV_FRACTION) -> tuple[Split, Split]:
    """Seeded stratified ``(train, dev)`` split, identical sequences on one side."""
    folds = round(1 / fraction)
    distinct = len(set(split.sequences))
    if distinct < folds:
        raise UserInputError(f"{source}: {distinct} distinct sequences are too few for a "
                             f"{fraction:.0%} dev split; pass a dev file with --dev")
    train_index, dev_index = stratified_group_folds(split, folds, seed)[0]
    lost = sorted(set(split.labels.tolist()) - set(split.labels[train_index].tolist()))
    if lost:
        raise UserInputError(f"{source}: class {class_names[lost[0]]!r} has too few distinct sequences to keep some for training "
                             f"after a {fraction:.0%} dev split; pass a dev file with --dev")
    return split.subset(train_index), split.subset(dev_index)


def check_max_length(splits: Mapping[str, Split], max_len: int, limit: str) -> None:
    """Raise naming the first record longer than ``max_len``; ``limit`` says where the limit comes from."""
    for split in splits.values():
        too_long = np.flatnonzero(split.lengths() > max_len)
        if too_long.size:
            first = int(too_long[0])
            raise UserInputError(f"{split.where[first]}: sequence is {len(split.tokens[first])} nt long, "
                                 f"longer than {limit}")
