"""Residue–residue contact prediction tools: targets, coevolution baselines, precision@L/k and CASP RR files.

- :func:`load_target` / :func:`discover_families`: an alignment with its query first, native distances from a
  PDB/mmCIF chain (mapped by sequence alignment) or an arDCA ``*_struct.dat``, and the ``pred/`` folder.
- Baselines: :func:`mi_apc` (mutual information), :func:`gaussian_dca` (inverse covariance, Baldassi et al.
  2014), :func:`potts_couplings` (pseudo-likelihood Potts model, the CCMpred/plmDCA objective
  :func:`pseudo_likelihood`); :func:`apc`.
- :func:`precision_at`, :func:`write_rr`, :func:`read_contact_scores`, :func:`published_predictions`,
  :func:`plot_contact_map`.

Conventions (CASP): a contact is a Cβ–Cβ distance below 8 Å; long range means sequence separation ≥ 24;
precision at top-L/k ranks every long-range pair of residues that have coordinates by predicted score and
counts true contacts among the top ``floor(L/k)``, L = the number of residues with coordinates.

Score matrices are ``(L, L)`` numpy arrays or tensors indexed by alignment column (0-based); files use 1-based indices.
"""
from __future__ import annotations

import gzip
import os
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from tqdm import tqdm

from bioattn.data.msa import GAP, MSA, one_hot, read_msa
from bioattn.data.structure import native_distances, read_chain, read_struct_dat
from bioattn.errors import UserInputError
from bioattn.io import atomic_write

CONTACT_CUTOFF = 8.0
LONG_RANGE = 24
TOP_FRACTIONS = (5, 2, 1)
#: Suffixes of the files in a family's ``pred/`` folder that are formats, not tool names.
_FORMAT_SUFFIXES = {"gz", "rr", "mat", "con", "txt"}


def symmetrize(scores: torch.Tensor) -> torch.Tensor:
    """``(..., L, L)`` → ``S + Sᵀ``."""
    return scores + scores.transpose(-1, -2)


def apc(scores: torch.Tensor) -> torch.Tensor:
    """Average-product correction of symmetric ``(..., L, L)`` scores (Dunn et al. 2008), diagonal excluded.

    ``S_ij - S_i· S_·j / S_··`` with means over off-diagonal entries; the returned diagonal is 0.
    """
    length = scores.shape[-1]
    eye = torch.eye(length, dtype=torch.bool, device=scores.device)
    off = scores.masked_fill(eye, 0.0)
    row = off.sum(-1, keepdim=True) / (length - 1)
    col = off.sum(-2, keepdim=True) / (length - 1)
    total = off.sum((-1, -2), keepdim=True) / (length * (length - 1))
    corrected = off - row * col / total.clamp_min(torch.finfo(scores.dtype).tiny)
    return corrected.masked_fill(eye, 0.0)


def pair_frequencies(
    tokens: torch.Tensor, weights: torch.Tensor, num_states: int = 21, chunk_size: int = 4096
) -> tuple[torch.Tensor, torch.Tensor]:
    """Weighted single ``(L, q)`` and pair ``(L, L, q, q)`` frequencies of tokens ``(N, L)`` (ids ≥ q-1 folded into state q-1).

    With the bioattn tokenizer and ``q=21`` the states are the 20 amino acids and gap (unknown counted as gap).
    """
    tokens = tokens.clamp(max=num_states - 1)
    n, length = tokens.shape
    weights = weights.float() / weights.sum()
    pair = torch.zeros(length * num_states, length * num_states)
    for rows, w in zip(tokens.split(chunk_size), weights.split(chunk_size)):
        x = one_hot(rows, num_states)
        pair += (x * w[:, None]).T @ x
    pair = pair.reshape(length, num_states, length, num_states).permute(0, 2, 1, 3)
    single = torch.diagonal(pair, dim1=0, dim2=1).diagonal(dim1=0, dim2=1)  # (L, q)
    return single, pair


def mutual_information(tokens: torch.Tensor, weights: torch.Tensor, num_states: int = 21) -> torch.Tensor:
    """Mutual information ``(L, L)`` between alignment columns from weighted frequencies (0·log 0 = 0; diagonal 0)."""
    single, pair = pair_frequencies(tokens, weights, num_states)
    expected = single[:, None, :, None] * single[None, :, None, :]
    ratio = torch.where(pair > 0, pair / expected.clamp_min(1e-30), torch.ones_like(pair))
    mi = (pair * ratio.log()).sum((-1, -2))
    return mi.fill_diagonal_(0.0)


def mi_apc(tokens: torch.Tensor, weights: torch.Tensor) -> np.ndarray:
    """The mutual-information + APC contact baseline: ``(L, L)`` scores from tokens ``(N, L)`` and weights ``(N,)``."""
    return apc(mutual_information(tokens, weights)).numpy()


def pseudo_likelihood(
    fields: torch.Tensor,
    couplings: torch.Tensor,
    tokens: torch.Tensor,
    weights: torch.Tensor,
    *,
    lambda_single: float = 0.01,
    lambda_pair: float = 0.2,
    chunk_size: int = 2048,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """CCMpred's regularised negative pseudo-log-likelihood of a Potts model and its gradient.

    ``fields (L*q,)``, ``couplings (L*q, L*q)`` symmetric with zero ``q×q`` diagonal blocks (index ``i*q + a``:
    state a at column i), ``tokens (N, L)`` with ids < q, ``weights (N,)``. The value is
    ``-Σ_n w_n Σ_i log p(x_ni | x_n,-i) + λ_s Σ_i Σ_{a<q-1} h_ia² + λ_p (L-1) Σ_{i<j} ‖J_ij‖²``. Returns
    ``(value (float64), d/dfields (L*q,), d/dcouplings (L*q, L*q))``: the gradient over symmetric
    matrices (the mean of J_ij's and J_jiᵀ's partial derivatives), zero on the diagonal blocks and on the
    gap fields (held at 0). Costs two dense ``(N, L*q) × (L*q, L*q)`` products, in row chunks of ``chunk_size``.
    """
    length = tokens.shape[1]
    size = couplings.shape[0]
    num_states = size // length
    observed = tokens + torch.arange(length) * num_states  # (N, L): index of each observed state
    penalty_pair = lambda_pair * (length - 1)
    value = torch.zeros((), dtype=torch.float64)
    field_grad, pair_grad = torch.zeros(size), torch.zeros(size, size)
    for rows, states, w in zip(tokens.split(chunk_size), observed.split(chunk_size), weights.split(chunk_size)):
        x = one_hot(rows, num_states)  # (m, L*q)
        logits = torch.addmm(fields, x, couplings).view(len(rows), length, num_states)
        log_norm = logits.logsumexp(-1)  # (m, L)
        value += (w[:, None] * (log_norm - logits.view(len(rows), size).gather(1, states))).sum(dtype=torch.float64)
        residual = (logits - log_norm[..., None]).exp_().view(len(rows), size).sub_(x).mul_(w[:, None])  # w (p - x)
        field_grad += residual.sum(0)
        pair_grad.addmm_(x.T, residual)
    amino_fields = fields.view(length, num_states)[:, :-1]
    value += lambda_single * amino_fields.square().sum(dtype=torch.float64)
    value += 0.5 * penalty_pair * couplings.square().sum(dtype=torch.float64)  # each J_ij stored twice
    field_grad += 2 * lambda_single * fields
    field_grad.view(length, num_states)[:, -1] = 0.0
    pair_grad = 0.5 * (pair_grad + pair_grad.T) + penalty_pair * couplings
    index = torch.arange(length)
    pair_grad.view(length, num_states, length, num_states)[index, :, index, :] = 0.0
    return value, field_grad, pair_grad


def potts_couplings(
    tokens: torch.Tensor,
    weights: torch.Tensor,
    *,
    num_states: int = 21,
    lambda_single: float = 0.01,
    lambda_pair: float = 0.2,
    max_iterations: int = 50,
    max_cpu_seconds: float | None = None,
    tolerance: float = 1e-5,
    progress: bool = False,
) -> torch.Tensor:
    """Coupling strengths ``(L, L)`` of a Potts model fitted by pseudo-likelihood (the plmDCA / CCMpred objective).

    Minimises :func:`pseudo_likelihood` (CCMpred's regularisation: ``λ_s = 0.01``, ``λ_p = 0.2·(L-1)``) with
    CCMpred's conventions: amino-acid fields relative to a gap field fixed at 0, started from the column
    frequencies (one pseudocount); couplings between all 21 states, started at 0. L-BFGS stops after
    ``max_iterations`` iterations (CCMpred's default 50), when the objective changes by less than
    ``tolerance`` (relative) in one iteration, or after ``max_cpu_seconds`` of this process's CPU time. Returns the Frobenius
    norm of each zero-sum-gauged ``J_ij`` over the 20 amino acids (gap excluded), diagonal 0; apply
    :func:`apc` to get contact scores.

    ``tokens (N, L)``, ids ≥ q-1 folded into the gap state; ``weights (N,)``: give the whole alignment with
    its 80 %-identity weights (a subsample lowers precision). Identical rows are merged, their weights
    summed; an evaluation costs O(M·(L·q)²) for the M distinct rows.
    """
    if tokens.ndim != 2 or weights.shape != tokens.shape[:1]:
        raise ValueError(f"tokens must be (N, L) and weights (N,), got {tuple(tokens.shape)} and {tuple(weights.shape)}")
    tokens, inverse = torch.unique(tokens.clamp(max=num_states - 1), dim=0, return_inverse=True)
    weights = torch.zeros(len(tokens)).index_add_(0, inverse, weights.float())
    length = tokens.shape[1]
    counts = torch.ones(length, num_states).index_put_(
        (torch.arange(length).repeat(len(tokens)), tokens.reshape(-1)), torch.ones(tokens.numel()), accumulate=True
    )
    fields = (counts.log() - counts[:, -1:].log()).reshape(-1).requires_grad_(True)  # (L*q,)
    couplings = torch.zeros(length * num_states, length * num_states, requires_grad=True)
    optimizer = torch.optim.LBFGS([fields, couplings], lr=1.0, max_iter=1, history_size=10, line_search_fn="strong_wolfe")

    @torch.no_grad()
    def objective() -> torch.Tensor:
        value, fields.grad, couplings.grad = pseudo_likelihood(
            fields, couplings, tokens, weights, lambda_single=lambda_single, lambda_pair=lambda_pair
        )
        return value

    started, previous = time.process_time(), None
    for _ in tqdm(range(max_iterations), desc="pseudo-likelihood", unit="iter", disable=not progress, leave=False):
        value = float(optimizer.step(objective))
        if previous is not None and abs(previous - value) <= tolerance * abs(previous):
            break
        previous = value
        if max_cpu_seconds is not None and time.process_time() - started > max_cpu_seconds:
            break
    return coupling_norms(couplings.detach().view(length, num_states, length, num_states).permute(0, 2, 1, 3))


def coupling_norms(blocks: torch.Tensor) -> torch.Tensor:
    """Frobenius norms ``(L, L)`` of coupling blocks ``(L, L, q, q)`` in the zero-sum gauge, last (gap) state excluded; diagonal 0."""
    blocks = blocks - blocks.mean(-1, keepdim=True) - blocks.mean(-2, keepdim=True) + blocks.mean((-1, -2), keepdim=True)
    return blocks[..., :-1, :-1].square().sum((-1, -2)).sqrt().fill_diagonal_(0.0)


def gaussian_dca(tokens: torch.Tensor, weights: torch.Tensor, *, num_states: int = 21, pseudocount: float = 0.8) -> torch.Tensor:
    """Coupling strengths ``(L, L)`` of Gaussian DCA (Baldassi et al. 2014): the inverse covariance of one-hot columns.

    Frequencies are mixed with a uniform pseudocount (0.8, the paper's default); the covariance of the first
    q-1 states (gap left out) is inverted and each ``(q-1)×(q-1)`` block scored by :func:`coupling_norms`.
    Apply :func:`apc` to get contact scores. Cost: O(N (Lq)²) for the frequencies and O((Lq)³) for the inverse.
    """
    single, pair = pair_frequencies(tokens, weights, num_states)
    length, q = single.shape
    single = (1 - pseudocount) * single + pseudocount / q
    pair = (1 - pseudocount) * pair + pseudocount / q**2
    index = torch.arange(length)
    pair[index, index] = torch.diag_embed(single)
    covariance = (pair - single[:, None, :, None] * single[None, :, None, :])[..., : q - 1, : q - 1]
    covariance = covariance.permute(0, 2, 1, 3).reshape(length * (q - 1), length * (q - 1))
    inverse = torch.linalg.inv(covariance.double()).float().view(length, q - 1, length, q - 1).permute(0, 2, 1, 3)
    blocks = torch.zeros(length, length, q, q)
    blocks[..., : q - 1, : q - 1] = inverse
    return coupling_norms(blocks)


def residues_with_coordinates(distances: np.ndarray) -> np.ndarray:
    """Bool ``(L,)``: residue has a finite distance to some other residue."""
    finite = np.isfinite(distances)
    np.fill_diagonal(finite, False)
    return finite.any(axis=1)


def precision_at(
    scores: np.ndarray,
    distances: np.ndarray,
    *,
    min_separation: int = LONG_RANGE,
    fractions: tuple[int, ...] = TOP_FRACTIONS,
    cutoff: float = CONTACT_CUTOFF,
) -> dict[str, float]:
    """Precision of the top-L/k pairs with separation ≥ ``min_separation`` → ``{"P@L/5": .., "P@L/2": .., "P@L": ..}``.

    ``scores``, ``distances``: ``(L, L)``; pairs whose distance is NaN (no coordinates) are not ranked;
    L = number of residues with coordinates. Scores of NaN rank last.
    """
    if scores.shape != distances.shape or scores.ndim != 2:
        raise ValueError(f"scores {scores.shape} and distances {distances.shape} must be the same (L, L) shape")
    length = int(residues_with_coordinates(distances).sum())
    i, j = np.triu_indices(scores.shape[0], k=min_separation)
    known = np.isfinite(distances[i, j])
    i, j = i[known], j[known]
    pair_scores = np.nan_to_num(scores[i, j].astype(np.float64), nan=-np.inf)
    order = np.argsort(-pair_scores, kind="stable")
    is_contact = distances[i, j][order] < cutoff
    result = {}
    for k in fractions:
        top = max(length // k, 1)
        name = "P@L" if k == 1 else f"P@L/{k}"
        result[name] = float(is_contact[:top].mean()) if len(is_contact) else float("nan")
    return result


def write_rr(
    path: str | os.PathLike,
    scores: np.ndarray,
    sequence: str,
    *,
    target: str = "query",
    method: str = "bioattn",
    min_separation: int = 1,
    top: int | None = None,
) -> None:
    """Write a CASP RR file (``i j 0 8 score``, 1-based, best first) for pairs with ``j - i ≥ min_separation``."""
    length = scores.shape[0]
    if len(sequence) != length:
        raise ValueError(f"sequence has {len(sequence)} residues but scores are {length}×{length}")
    i, j = np.triu_indices(length, k=min_separation)
    order = np.argsort(-np.nan_to_num(scores[i, j], nan=-np.inf), kind="stable")[:top]
    with atomic_write(path) as handle:
        handle.write(f"PFRMAT RR\nTARGET {target}\nAUTHOR bioattn\nMETHOD {method}\nMODEL  1\n")
        for start in range(0, length, 50):
            handle.write(sequence[start:start + 50] + "\n")
        for index in order:
            handle.write(f"{i[index] + 1} {j[index] + 1} 0 8 {scores[i[index], j[index]]:.6f}\n")
        handle.write("END\n")


def _read_lines(path: Path) -> list[str]:
    with open(path, "rb") as raw:
        gzipped = raw.read(2) == b"\x1f\x8b"
    try:
        with (gzip.open(path, "rt") if gzipped else open(path)) as handle:
            return handle.read().splitlines()
    except (UnicodeDecodeError, OSError, EOFError) as exc:
        raise UserInputError(f"{path}: not a readable text contact file ({exc})") from exc


def read_contact_scores(path: str | os.PathLike, length: int) -> np.ndarray:
    """Symmetric ``(length, length)`` scores from a contact prediction file; pairs not listed are NaN.

    Formats: CASP RR (``i j [dmin dmax] score`` lines, header/sequence lines skipped), an L×L matrix
    (``.mat``, ``.ccmpred``), EVfold (``i aa_i j aa_j _ score``, score in column 6).
    """
    path = Path(path)
    lines = _read_lines(path)
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
    """Tool name from a prediction file name: ``5ptpA.ccmpred.gz`` → ``ccmpred``, ``x.metapsicov.stage1.gz`` → ``metapsicov.stage1``."""
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


def plot_contact_map(
    path: str | os.PathLike, scores: np.ndarray, distances: np.ndarray | None, *, title: str = "", top_fraction: int = 1
) -> None:
    """PNG of the top-L/``top_fraction`` predicted pairs (upper triangle) over the native contacts (grey).

    Correct predictions are blue, wrong ones red, pairs without native coordinates hollow; without
    ``distances`` the predictions are drawn alone.
    """
    from matplotlib.figure import Figure  # object-oriented API: never switches the user's backend

    length = scores.shape[0]
    i, j = np.triu_indices(length, k=6)
    order = np.argsort(-np.nan_to_num(scores[i, j], nan=-np.inf), kind="stable")[: max(length // top_fraction, 1)]
    fig = Figure(figsize=(5.5, 5.5))
    ax = fig.subplots()
    if distances is not None:
        native = np.argwhere(np.triu(np.nan_to_num(distances, nan=np.inf) < CONTACT_CUTOFF, k=6))
        ax.scatter(native[:, 1], native[:, 0], s=6, c="0.75", marker="s", label="native (Cβ < 8 Å)")
        ax.scatter(native[:, 0], native[:, 1], s=6, c="0.75", marker="s")
        predicted = distances[i[order], j[order]]
        known = np.isfinite(predicted)
        hit = known & (np.nan_to_num(predicted, nan=np.inf) < CONTACT_CUTOFF)
        ax.scatter(j[order][hit], i[order][hit], s=8, c="tab:blue", label="predicted, correct")
        ax.scatter(j[order][known & ~hit], i[order][known & ~hit], s=8, c="tab:red", label="predicted, wrong")
        if not known.all():
            ax.scatter(j[order][~known], i[order][~known], s=8, facecolors="none", edgecolors="0.4",
                       label="predicted, no native coordinates")
    else:
        ax.scatter(j[order], i[order], s=8, c="tab:blue", label="predicted")
    ax.set_xlim(-0.5, length - 0.5)
    ax.set_ylim(length - 0.5, -0.5)
    ax.set_aspect("equal")
    ax.set_xlabel("residue j")
    ax.set_ylabel("residue i")
    ax.set_title(title or f"top-L/{top_fraction} predicted contacts (|i-j| ≥ 6) over native")
    ax.legend(loc="lower left", fontsize=7, markerscale=2)
    fig.tight_layout()
    with atomic_write(path, "wb") as handle:
        fig.savefig(handle, format="png", dpi=120)


@dataclass(frozen=True)
class ContactTarget:
    """One family to predict: the alignment (query first), its query, native distances and published predictions.

    ``distances``: ``(L, L)`` Cβ distances on the alignment's columns (NaN where unknown), or None.
    ``sequence``: L letters naming the columns in output files (the query; ``-`` where it has a gap).
    """

    name: str
    msa: MSA
    sequence: str
    distances: np.ndarray | None
    predictions_dir: Path | None


def load_target(
    msa_path: str | os.PathLike,
    *,
    fmt: str | None = None,
    query_fasta: str | os.PathLike | None = None,
    pdb: str | os.PathLike | None = None,
    chain: str | None = None,
    struct_dat: str | os.PathLike | None = None,
    predictions_dir: str | os.PathLike | None = None,
    name: str | None = None,
) -> ContactTarget:
    """Read an alignment and, when given, its native structure; put the query row first.

    The query is the row equal to ``query_fasta``'s sequence, else the row equal to the structure chain's
    sequence, else row 0. With a PDB/mmCIF, the alignment keeps the query's non-gap columns and the chain is
    mapped onto them by sequence alignment. With an arDCA ``struct_dat`` (distances indexed by alignment
    column) every column is kept.
    """
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
    return ContactTarget(
        name=name or msa_path.name.split(".")[0],
        msa=msa,
        sequence=msa.sequences[0],
        distances=distances,
        predictions_dir=Path(predictions_dir) if predictions_dir is not None else None,
    )


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
        families[folder.name] = dict(
            msa_path=alignments[0], pdb=structures[0], query_fasta=fasta[0] if fasta else None,
            predictions_dir=folder / "pred" if (folder / "pred").is_dir() else None, name=folder.name,
        )
    for folder in sorted((root / "pfam").glob("*/")):
        alignments, distances = sorted(folder.glob("*.fasta*")), sorted(folder.glob("*_struct.dat"))
        if alignments and distances:
            families[folder.name] = dict(msa_path=alignments[0], struct_dat=distances[0], name=folder.name)
    return families
