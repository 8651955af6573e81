"""Small input files the tests write: a tiny MedMNIST-style CT npz under a data root, and FASTA."""
from __future__ import annotations

from pathlib import Path

import numpy as np


def write_tiny_adrenalmnist3d(data_root: Path) -> Path:
    """``DATA_ROOT/ct/adrenalmnist3d/adrenalmnist3d_64_trainval.npz`` (the default size) with 16 train and 8 val
    random binary 64³ masks (labels alternate); returns the file."""
    rng = np.random.default_rng(0)
    folder = data_root / "ct" / "adrenalmnist3d"
    folder.mkdir(parents=True)
    arrays = {}
    for split, n in (("train", 16), ("val", 8)):
        arrays[f"{split}_images"] = (rng.random((n, 64, 64, 64)) > 0.5).astype(np.uint8) * 255
        arrays[f"{split}_labels"] = (np.arange(n) % 2)[:, None].astype(np.uint8)
    np.savez(folder / "adrenalmnist3d_64_trainval.npz", **arrays)
    return folder / "adrenalmnist3d_64_trainval.npz"


def write_fasta(path: Path, records: dict[str, str], width: int = 60) -> Path:
    """Write ``records`` (name -> sequence) as FASTA, ``width`` letters a line and a description after each name;
    returns ``path``."""
    lines = []
    for name, sequence in records.items():
        lines.append(f">{name} assembled test sequence")
        lines += [sequence[i : i + width] for i in range(0, len(sequence), width)]
    path.write_text("\n".join(lines) + "\n")
    return path
