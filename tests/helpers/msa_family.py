"""A tiny planted alignment and the structure it folds into, written on the fly: 30 columns in which the columns of
each :data:`PLANTED` pair coevolve, a hairpin structure of its query in which those columns touch, and a data root
of three such families. Shared by the MSA tests and the session fixture ``family`` (conftest.py)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
from Bio.Data.IUPACData import protein_letters_1to3

AMINO = "ACDEFHIKLMNPQRSTVWY"  # no glycine: every residue of the toy structure has a real Cβ
COLUMNS = 30
PLANTED = ((1, 28), (2, 27))  # 0-based columns; in the hairpin residue k touches residue 29 - k


def write_alignment(path: Path, rows: int = 60, seed: int = 0) -> Path:
    """``rows`` random sequences of ``COLUMNS`` residues (A3M) in which column j of each :data:`PLANTED` pair follows column i."""
    generator = np.random.default_rng(seed)
    tokens = generator.integers(0, len(AMINO), (rows, COLUMNS))
    for i, j in PLANTED:
        tokens[:, j] = (tokens[:, i] + 7) % len(AMINO)
    path.write_text("".join(f">seq{k}\n{''.join(AMINO[t] for t in row)}\n" for k, row in enumerate(tokens)))
    return path


def query_of(alignment: Path) -> str:
    return alignment.read_text().splitlines()[1]


def write_hairpin_pdb(path: Path, sequence: str) -> Path:
    """Two antiparallel strands 5 Å apart: residue k faces residue len-1-k (Cβ 5 Å apart)."""
    half, lines, serial = len(sequence) // 2, [], 1
    for k, letter in enumerate(sequence):
        x, y = 3.8 * (k if k < half else len(sequence) - 1 - k), 0.0 if k < half else 5.0
        atoms = {"N": (x - 1.2, y, 0.4), "CA": (x, y, 0.0), "C": (x + 1.2, y, 0.4), "CB": (x, y, 1.5)}
        for name, (ax, ay, az) in atoms.items():
            lines.append(f"ATOM  {serial:5d}  {name:<3s} {protein_letters_1to3[letter].upper()} A{k + 1:4d}    "
                         f"{ax:8.3f}{ay:8.3f}{az:8.3f}  1.00  0.00           {name[0]}")
            serial += 1
    path.write_text("\n".join(lines) + "\nEND\n")
    return path


def contact_lines(rr: Path) -> list[tuple[int, int, float]]:
    lines = rr.read_text().splitlines()
    first = lines.index("MODEL  1") + 1 + -(-COLUMNS // 50)  # after the sequence lines
    return [(int(i), int(j), float(p)) for i, j, _, _, p in (line.split() for line in lines[first:-1])]


def write_family_data_root(root: Path) -> None:
    """Three families under msa/coev, each an alignment with its hairpin structure."""
    for seed, name in enumerate(["famA", "famB", "famC"]):
        folder = root / "msa" / "coev" / name
        folder.mkdir(parents=True)
        alignment = write_alignment(folder / f"{name}.aln", rows=50, seed=seed)
        alignment.write_text("".join(line + "\n" for line in alignment.read_text().splitlines()[1::2]))  # PSICOV: rows only
        write_hairpin_pdb(folder / f"{name}.pdb", alignment.read_text().splitlines()[0])
