"""Native Cβ–Cβ distances from a PDB/mmCIF chain, placed on a query sequence by global alignment (BLOSUM62)."""
from __future__ import annotations

import io
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from Bio.Align import PairwiseAligner, substitution_matrices
from Bio.Data.PDBData import protein_letters_3to1_extended
from Bio.PDB import MMCIFParser, PDBParser
from Bio.PDB.Polypeptide import is_aa

from bioattn.data.msa import read_text
from bioattn.errors import UserInputError

CONTACT_CUTOFF = 8.0
MIN_IDENTITY = 0.8


@dataclass(frozen=True)
class ChainResidues:
    """The amino-acid residues of one chain: one-letter ``sequence``, ``cb (n, 3)`` coordinates (NaN if unknown)."""
    sequence: str
    cb: np.ndarray
    residue_ids: tuple[str, ...]
    source: str
    chain: str


def virtual_cb(n: np.ndarray, ca: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Ideal Cβ position from backbone N, CA, C coordinates ``(..., 3)`` (the trRosetta / CASP formula)."""
    b = ca - n
    cc = c - ca
    a = np.cross(b, cc)
    return -0.58273431 * a + 0.56802827 * b - 0.54067466 * cc + ca


def read_chain(path: str | os.PathLike, chain: str | None = None) -> ChainResidues:
    """Amino-acid residues of ``chain`` (None: the first protein chain) in the first model of a PDB or mmCIF file."""
    path = Path(path)
    if not path.is_file():
        raise UserInputError(f"{path}: structure file not found")
    structure = _parse(path)
    models = list(structure)
    if not models:
        raise UserInputError(f"{path}: no atoms/models found; not a PDB or mmCIF structure")
    protein_chains = {ch.id: ch for ch in models[0] if any(is_aa(res, standard=False) for res in ch)}
    if not protein_chains:
        raise UserInputError(f"{path}: no amino-acid residues in the first model")
    if chain is None:
        chosen = next(iter(protein_chains.values()))
    elif chain in protein_chains:
        chosen = protein_chains[chain]
    else:
        listed = ", ".join(repr(c) for c in protein_chains)
        raise UserInputError(f"{path}: chain {chain!r} not found; protein chains in the file: {listed}")
    letters, coords, ids = [], [], []
    for residue in chosen:
        if not is_aa(residue, standard=False):
            continue
        letters.append(protein_letters_3to1_extended.get(residue.get_resname().upper(), "X"))
        coords.append(_cb_of(residue))
        _, number, icode = residue.id
        ids.append(f"{chosen.id}:{number}{icode.strip()}")
    return ChainResidues("".join(letters), np.array(coords, dtype=np.float64).reshape(-1, 3), tuple(ids), str(path), chosen.id)


def _parse(path: Path):
    text = read_text(path, "structure file", encoding=None)
    name = path.name.lower().removesuffix(".gz")
    parser = MMCIFParser(QUIET=True) if name.endswith((".cif", ".mmcif")) else PDBParser(QUIET=True)
    try:
        return parser.get_structure(name, io.StringIO(text))
    except Exception as exc:  # Bio.PDB raises assorted errors on malformed files
        raise UserInputError(f"{path}: cannot parse as {'mmCIF' if isinstance(parser, MMCIFParser) else 'PDB'} ({exc})") from exc


def _cb_of(residue) -> np.ndarray:
    if "CB" in residue:
        return residue["CB"].coord
    if all(atom in residue for atom in ("N", "CA", "C")):
        return virtual_cb(residue["N"].coord, residue["CA"].coord, residue["C"].coord)
    return np.full(3, np.nan)


def align_to_query(query: str, residues: ChainResidues) -> np.ndarray:
    """``(len(query),)`` int64: each query position's aligned chain residue, or -1; refuses a chain not the query's."""
    aligner = PairwiseAligner(mode="global")
    aligner.substitution_matrix = substitution_matrices.load("BLOSUM62")
    aligner.open_gap_score, aligner.extend_gap_score = -10.0, -0.5
    aligner.end_insertion_score = aligner.end_deletion_score = 0.0
    query = query.upper().replace("-", "")
    mapping = np.full(len(query), -1, dtype=np.int64)
    alignment = aligner.align(_blosum_letters(query), _blosum_letters(residues.sequence))[0]
    for (q0, q1), (s0, s1) in zip(*alignment.aligned):
        mapping[q0:q1] = np.arange(s0, s1)
    paired = np.flatnonzero(mapping >= 0)
    identical = sum(query[i] == residues.sequence[mapping[i]] for i in paired)
    shorter = min(len(query), len(residues.sequence))
    identity = identical / max(len(paired), 1)
    if identity < MIN_IDENTITY or identical < 0.5 * shorter:
        raise UserInputError(f"{residues.source} chain {residues.chain!r}: its sequence does not match the query "
                             f"({identical} identical of {len(paired)} aligned residues, {100 * identity:.0f}%; query "
                             f"{len(query)} aa, chain {len(residues.sequence)} aa); check --pdb/--chain")
    return mapping


def _blosum_letters(sequence: str) -> str:
    """Letters outside BLOSUM62 (J, U, O) as X."""
    return sequence.translate(str.maketrans("JUO", "XXX"))


def query_distances(query: str, residues: ChainResidues) -> np.ndarray:
    """Cβ–Cβ distances ``(Lq, Lq)`` in Å between query positions; NaN where a position has no coordinates."""
    mapping = align_to_query(query, residues)
    coords = np.full((len(mapping), 3), np.nan)
    coords[mapping >= 0] = residues.cb[mapping[mapping >= 0]]
    return np.linalg.norm(coords[:, None, :] - coords[None, :, :], axis=-1)


def native_distances(query: str, path: str | os.PathLike, chain: str | None = None) -> np.ndarray:
    """Cβ distances ``(Lq, Lq)`` of the query positions from ``chain`` of a PDB/mmCIF file."""
    return query_distances(query, read_chain(path, chain))


def read_struct_dat(path: str | os.PathLike, length: int) -> np.ndarray:
    """Column–column distances ``(L, L)`` from an arDCA ``*_struct.dat`` file (column 4, Å); unlisted pairs are NaN."""
    path = Path(path)
    try:
        table = np.loadtxt(path, ndmin=2)
    except (OSError, ValueError) as exc:
        raise UserInputError(f"{path}: not a numeric distance table ({exc})") from exc
    if table.shape[1] < 4:
        raise UserInputError(f"{path}: expected ≥ 4 columns (i j _ distance), found {table.shape[1]}")
    i, j = table[:, 0].astype(np.int64) - 1, table[:, 1].astype(np.int64) - 1
    bad = np.flatnonzero((i < 0) | (j < 0) | (i >= length) | (j >= length))
    if bad.size:
        row = int(bad[0])
        raise UserInputError(f"{path}, line {row + 1}: column pair ({i[row] + 1}, {j[row] + 1}) outside the "
                             f"alignment's {length} columns")
    distances = np.full((length, length), np.nan)
    distances[i, j] = distances[j, i] = table[:, 3]
    return distances
