"""Known motif databases, offline: JASPAR (``pyjaspar``) or a MEME-format file, as PPMs and log-odds matrices."""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from bioattn.errors import UserInputError

JASPAR_RELEASE = "JASPAR2026"
DEFAULT_DB = "jaspar"
DEFAULT_Q = 0.05
DEFAULT_SITES = 20.0


@dataclass
class MotifDatabase:
    """PPMs ``matrices[i]: (4, W_i)`` (A C G T) with ids, names, families, classes and ``sites`` (may be empty)."""
    label: str
    ids: list[str]
    names: list[str]
    families: list[str]
    matrices: list[np.ndarray]
    classes: list[str] = field(default_factory=list)
    sites: list[float] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.ids)


def _ppm(counts: np.ndarray) -> np.ndarray:
    counts = np.asarray(counts, dtype=float) + 1e-3
    return counts / counts.sum(0, keepdims=True)


def load_motif_database(spec: str | os.PathLike | None = DEFAULT_DB) -> MotifDatabase | None:
    """The database named by ``spec`` (see the module docstring); ``None`` for ``none``."""
    spec = DEFAULT_DB if spec is None else str(spec)
    if spec.lower() == "none":
        return None
    if spec.lower() == "jaspar" or spec.lower().startswith("jaspar:"):
        parts = spec.split(":")
        collection = parts[1].upper() if len(parts) > 1 and parts[1] else "CORE"
        tax_group = parts[2].lower() if len(parts) > 2 and parts[2] else "vertebrates"
        if len(parts) > 3:
            raise UserInputError(f"--motif-db {spec!r}: expected jaspar[:COLLECTION[:TAX_GROUP]], e.g. jaspar:CORE:insects")
        from pyjaspar import jaspardb
        query = {"collection": collection}
        if tax_group != "all":
            query["tax_group"] = [tax_group]
        motifs = jaspardb(release=JASPAR_RELEASE).fetch_motifs(**query)
        if not motifs:
            raise UserInputError(f"--motif-db {spec!r}: {JASPAR_RELEASE} has no {collection} matrices for tax group "
                                 f"{tax_group!r} (e.g. vertebrates, plants, insects, nematodes, fungi, urochordates, all)")
        return MotifDatabase(label=f"{JASPAR_RELEASE} {collection} {tax_group}", ids=[m.matrix_id for m in motifs],
                             names=[m.name for m in motifs], families=["; ".join(m.tf_family or []) for m in motifs],
                             matrices=[_ppm([m.counts[b] for b in "ACGT"]) for m in motifs],
                             classes=["; ".join(m.tf_class or []) for m in motifs],
                             sites=[float(sum(m.counts[b][0] for b in "ACGT")) for m in motifs])
    path = Path(spec)
    if not path.is_file():
        raise UserInputError(f"--motif-db {spec}: no such file (expected jaspar, jaspar:COLLECTION:TAX_GROUP, none "
                             "or a MEME-format motif file)")
    from memelite.io import read_meme
    try:
        motifs = read_meme(str(path))
    except Exception as exc:  # the reader raises bare errors on malformed files
        raise UserInputError(f"{path}: not a readable MEME-format motif file ({type(exc).__name__}: {exc})") from exc
    if not motifs:
        raise UserInputError(f"{path}: no motifs found (expected MEME format: 'MOTIF <id> [name]' + letter-probability matrix)")
    ids, names, matrices = [], [], []
    for key, matrix in motifs.items():
        matrix = np.asarray(matrix, dtype=float)
        if matrix.ndim != 2 or matrix.shape[0] != 4 or not np.isfinite(matrix).all():
            raise UserInputError(f"{path}: motif {key!r}: expected a DNA letter-probability matrix (A C G T)")
        ident, _, name = key.partition(" ")
        ids.append(ident)
        names.append(name or ident)
        matrices.append(_ppm(matrix))
    return MotifDatabase(label=path.name, ids=ids, names=names, families=[""] * len(ids), matrices=matrices)


def log_odds_matrices(database: MotifDatabase, *, pseudocount: float = 1.0) -> list[np.ndarray]:
    """Log2-odds matrices ``(4, W_i)`` against a uniform background: probabilities × sites + ``pseudocount``."""
    sites = [database.sites[i] if i < len(database.sites) else DEFAULT_SITES for i in range(len(database.matrices))]
    counts = [np.asarray(m, dtype=np.float64) * s + pseudocount for m, s in zip(database.matrices, sites)]
    return [np.log2(c / c.sum(0, keepdims=True) / 0.25) for c in counts]
