"""Contact targets and files: alignments with native structures, CASP RR files, published predictions (0-based)."""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from bioattn.data.msa import GAP, MSA, read_msa, read_text
from bioattn.data.structure import native_distances, read_chain, read_struct_dat
from bioattn.errors import UserInputError
from bioattn.io import atomic_write

_FORMAT_SUFFIXES = {"gz", "rr", "mat", "con", "txt"}
RR_LINE_WIDTH = 50
_PROBABILITY_TOLERANCE = 1e-6


def write_rr(path: str | os.PathLike, probabilities: np.ndarray, sequence: str, *, target: str = "query",
             method: str | Sequence[str] = "bioattn", remarks: Sequence[str] = (), min_separation: int = 1,
             top: int | None = None) -> None:
    """Write a CASP RR file of symmetric ``(L, L)`` contact ``probabilities`` (a NaN or value outside [0, 1]: error)."""
    length = probabilities.shape[0]
    if probabilities.shape != (length, length):
        raise ValueError(f"probabilities must be (L, L), got {probabilities.shape}")
    if len(sequence) != length:
        raise ValueError(f"sequence has {len(sequence)} residues but probabilities are {length}×{length}")
    if top is not None and top < 1:
        raise ValueError(f"top must be >= 1, got {top}")
    i, j = np.triu_indices(length, k=max(min_separation, 1))
    values = np.asarray(probabilities, dtype=np.float64)[i, j]
    outside = ~((values >= -_PROBABILITY_TOLERANCE) & (values <= 1 + _PROBABILITY_TOLERANCE))
    if outside.any():
        first = int(np.argmax(outside))
        raise ValueError(f"pair ({i[first] + 1}, {j[first] + 1}) has probability {values[first]}, outside [0, 1]")
    values = np.clip(values, 0.0, 1.0)
    order = np.argsort(-values, kind="stable")[:top]
    methods = [method] if isinstance(method, str) else list(method)
    with atomic_write(path) as handle:
        handle.write(f"PFRMAT RR\nTARGET {target}\nAUTHOR bioattn\n")
        handle.writelines(f"REMARK {remark}\n" for remark in remarks)
        handle.writelines(f"METHOD {line}\n" for line in methods)
        handle.write("MODEL  1\n")
        for start in range(0, length, RR_LINE_WIDTH):
            handle.write(sequence[start:start + RR_LINE_WIDTH] + "\n")
        for index in order:
            handle.write(f"{i[index] + 1} {j[index] + 1} 0 8 {values[index]:.6f}\n")
        handle.write("END\n")



def read_contact_scores(path: str | os.PathLike, length: int) -> np.ndarray:
    """Symmetric ``(length, length)`` scores from a CASP RR, L×L matrix or EVfold file; pairs not listed are NaN."""
    path = Path(path)
    lines = read_text(path, "contact file", encoding=None).splitlines()
    name = path.name.lower().removesuffix(".gz")
    scores = np.full((length, length), np.nan)
    if name.endswith((".mat", ".ccmpred")):
        try:
            matrix = np.array([[float(v) for v in line.split()] for line in lines if line.strip() and not line.startswith("#")])
        except ValueError as exc:
            raise UserInputError(f"{path}: not a numeric L×L matrix ({exc})") from exc
        if matrix.shape != (length, length):
            raise UserInputError(f"{path}: matrix is {matrix.shape}, expected {length}×{length} for this query")
        return np.maximum(matrix, matrix.T)
    evfold = name.endswith(".evfold")
    for number, line in enumerate(lines, start=1):
        fields = line.split()
        try:
            if evfold:
                i, j, value = int(fields[0]), int(fields[2]), float(fields[5])
            elif len(fields) in (3, 5):
                i, j, value = int(float(fields[0])), int(float(fields[1])), float(fields[-1])
            else:
                continue
        except (ValueError, IndexError):
            continue  # header, sequence or END lines
        if not (1 <= i <= length and 1 <= j <= length):
            raise UserInputError(f"{path}, line {number}: pair ({i}, {j}) outside the query's {length} residues")
        scores[i - 1, j - 1] = scores[j - 1, i - 1] = value
    if np.isnan(scores).all():
        raise UserInputError(f"{path}: no contact lines (i j ... score) found")
    return scores


def tool_name(path: str | os.PathLike) -> str:
    """Tool name from a prediction file name: ``5ptpA.ccmpred.gz`` → ``ccmpred``."""
    parts = Path(path).name.split(".")[1:]
    while parts and parts[-1].lower() in _FORMAT_SUFFIXES:
        parts.pop()
    return ".".join(parts) or Path(path).name


def published_predictions(folder: str | os.PathLike, length: int) -> dict[str, np.ndarray]:
    """Scores ``(L, L)`` of every prediction file in ``folder`` (a family's ``pred/``), keyed by tool name."""
    folder = Path(folder)
    if not folder.is_dir():
        return {}
    return {tool_name(p): read_contact_scores(p, length) for p in sorted(folder.iterdir()) if p.is_file()}


@dataclass(frozen=True)
class ContactTarget:
    """One family to predict: alignment (query first), ``sequence`` (the query), ``(L, L)`` Cβ ``distances`` or None."""
    name: str
    msa: MSA
    sequence: str
    distances: np.ndarray | None
    predictions_dir: Path | None


def load_target(msa_path: str | os.PathLike, *, fmt: str | None = None, query_fasta: str | os.PathLike | None = None,
                pdb: str | os.PathLike | None = None, chain: str | None = None,
                struct_dat: str | os.PathLike | None = None, predictions_dir: str | os.PathLike | None = None,
                name: str | None = None) -> ContactTarget:
    """Read an alignment (query row first) and, when given, its native structure (PDB/mmCIF or arDCA ``struct_dat``)."""
    msa_path = Path(msa_path)
    if pdb is not None and struct_dat is not None:
        raise UserInputError("give either a structure (--pdb) or a column distance file (--struct-dat), not both")
    msa = read_msa(msa_path, fmt)
    residues = read_chain(pdb, chain) if pdb is not None else None
    row = 0
    if query_fasta is not None:
        query = _read_query(Path(query_fasta))
        found = msa.find_row(query)
        if found is None:
            raise UserInputError(f"{query_fasta}: the query sequence is not a row of {msa_path} (gaps removed)")
        row = found
    elif residues is not None:
        row = msa.find_row(residues.sequence) or 0
    msa = msa.with_query_first(row)
    distances = None
    if struct_dat is not None:
        distances = read_struct_dat(struct_dat, msa.length)
    else:
        msa = msa.select_columns([c for c, letter in enumerate(msa.sequences[0]) if letter != GAP])
        if residues is not None:
            distances = native_distances(msa.sequences[0], pdb, chain)
    return ContactTarget(name=name or msa_path.name.split(".")[0], msa=msa, sequence=msa.sequences[0],
                         distances=distances,
                         predictions_dir=Path(predictions_dir) if predictions_dir is not None else None)


def _read_query(path: Path) -> str:
    from Bio import SeqIO
    try:
        return str(SeqIO.read(path, "fasta").seq).upper()
    except (ValueError, OSError) as exc:
        raise UserInputError(f"{path}: expected one FASTA record with the query sequence ({exc})") from exc


def discover_families(data_root: str | os.PathLike) -> dict[str, dict]:
    """``load_target`` keyword arguments for every family under ``msa/coev`` and ``msa/pfam`` of the data root."""
    root = Path(data_root) / "msa"
    families: dict[str, dict] = {}
    for folder in sorted((root / "coev").glob("*/")):
        alignments = sorted(p for p in folder.iterdir() if p.is_file() and (".aln" in p.name or ".a3m" in p.name))
        structures = sorted(folder.glob("*.pdb")) + sorted(folder.glob("*.cif"))
        if not alignments or not structures:
            continue
        fasta = sorted(folder.glob("*.fasta"))
        families[folder.name] = dict(msa_path=alignments[0], pdb=structures[0], query_fasta=fasta[0] if fasta else None,
                                     predictions_dir=folder / "pred" if (folder / "pred").is_dir() else None,
                                     name=folder.name)
    for folder in sorted((root / "pfam").glob("*/")):
        alignments, distances = sorted(folder.glob("*.fasta*")), sorted(folder.glob("*_struct.dat"))
        if alignments and distances:
            families[folder.name] = dict(msa_path=alignments[0], struct_dat=distances[0], name=folder.name)
    return families
