"""Known-motif marginalisation: how much planting a known site (vs its shuffles) changes a model's prediction."""
from __future__ import annotations

import re
import warnings
from typing import Any, Mapping, Sequence

import numpy as np
import torch

from bioattn.errors import UserInputError

#: JASPAR CORE base ids (latest version used) of core-promoter factor families, plus CTCF as a GC-rich control.
CORE_PROMOTER_MOTIFS = {
    "TBP": "MA0108", "SP1": "MA0079", "NFYA": "MA0060", "ELK1": "MA0028", "GABPA": "MA0062", "NRF1": "MA0506",
    "YY1": "MA0095", "CREB1": "MA1849", "ZNF143": "MA0088", "E2F1": "MA0024", "CTCF": "MA0139",
}
#: Motif centres (nt relative to the TSS) :func:`marginalize_known_motifs` plants at by default.
DEFAULT_POSITIONS = (-30, -20, -10, 0, 10, 20)
DEFAULT_SHUFFLES = 3
_ALPHABET = "ACGT"


def jaspar_consensus(matrix_ids: Mapping[str, str] | None = None) -> dict[str, tuple[str, str]]:
    """``{label: (versioned matrix id, consensus)}`` for ``{label: JASPAR id}`` (:data:`CORE_PROMOTER_MOTIFS`)."""
    from pyjaspar import jaspardb
    from bioattn.explain.motif_db import JASPAR_RELEASE
    database = jaspardb(release=JASPAR_RELEASE)
    found = {}
    for label, matrix_id in (matrix_ids or CORE_PROMOTER_MOTIFS).items():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # pyjaspar warns before returning None for an unknown id
            motif = database.fetch_motif_by_id(matrix_id)
        if motif is None:
            raise UserInputError(f"known motifs: {JASPAR_RELEASE} has no matrix {matrix_id!r} ({label})")
        found[label] = (motif.matrix_id, str(motif.consensus).upper())
    return found


def motif_shuffles(motif: str, count: int, seed: int = 0) -> list[str]:
    """``count`` permutations of ``motif``'s letters, each unlike ``motif`` where possible; fixed by ``seed``."""
    rng = np.random.default_rng(seed)
    letters = list(motif)
    shuffles = []
    for _ in range(count):
        for _ in range(100):
            candidate = "".join(rng.permutation(letters))
            if candidate != motif:
                break
        shuffles.append(candidate)
    return shuffles


class _LogOdds(torch.nn.Module):
    """One-hot ``(B, 4, L)`` → ``(B, 1)`` log-odds of the positive class, scored like the model predicts."""

    def __init__(self, model: torch.nn.Module, rc_average: bool | None) -> None:
        super().__init__()
        self.model = model
        self.rc_average = rc_average

    def forward(self, one_hot: torch.Tensor) -> torch.Tensor:
        from bioattn.data.dna import A_ID, N_ID
        present = one_hot.sum(1) > 0
        ids = torch.where(present, one_hot.argmax(1) + A_ID, torch.full_like(present, N_ID, dtype=torch.long))
        logits = self.model.predict_logits(ids, None, rc_average=self.rc_average).float()
        if logits.dim() != 1:
            raise UserInputError("known-motif marginalisation needs a two-class promoter model (one logit)")
        return logits[:, None]


def marginalize_known_motifs(model: torch.nn.Module, motifs: Mapping[str, str], sequences: Sequence[str],
                             positions: Sequence[int] = DEFAULT_POSITIONS, *, tss_index: int = 0,
                             shuffles: int = DEFAULT_SHUFFLES, seed: int = 0, rc_average: bool | None = None,
                             batch_size: int = 256, progress: bool = True) -> list[dict[str, Any]]:
    """Change of the positive-class log-odds when each motif (label → consensus) is planted at each position.

    Returns one row per (motif, position): ``motif``, ``consensus``, ``position``, ``start``, ``covers_tss``,
    ``sequences``, ``effect_*``, ``control_*``, ``control_shuffle_sd``, ``difference_*`` and ``fraction_up``."""
    from tangermeme.ersatz import substitute
    from tangermeme.predict import predict
    from bioattn.progress import progress_bar
    if not motifs:
        raise UserInputError("known-motif marginalisation needs at least one motif")
    one_hot = _encode(sequences)
    length = one_hot.shape[-1]
    if not 0 <= tss_index < length:
        raise UserInputError(f"known-motif marginalisation: TSS index {tss_index} is outside sequences of length {length}")
    if shuffles < 0:
        raise UserInputError(f"known-motif marginalisation: shuffles must be >= 0, got {shuffles}")
    for label, motif in motifs.items():
        if not motif or set(motif.upper()) - set(_ALPHABET + "N"):
            raise UserInputError(f"known motif {label!r}: {motif!r} is not a consensus of A C G T N letters")
    scorer = _LogOdds(model, rc_average).eval()
    device = next(model.parameters()).device
    def score(x: torch.Tensor) -> np.ndarray:
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")
            return predict(scorer, x, batch_size=batch_size, device=device).float().numpy()[:, 0]
    def planted(motif: str, start: int) -> np.ndarray:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return score(substitute(one_hot, motif.upper(), start=start)) - before
    before = score(one_hot)
    jobs = [(k, label, motif.upper(), position) for k, (label, motif) in enumerate(motifs.items()) for position in positions]
    rows = []
    for k, label, motif, position in progress_bar(jobs, desc="known motifs", unit="placement", disable=not progress):
        start = tss_index + position - len(motif) // 2
        if start < 0 or start + len(motif) > length:
            continue
        effect = planted(motif, start)
        controls = [planted(s, start) for s in motif_shuffles(motif, shuffles, seed=seed + k)]
        control = np.mean(controls, axis=0) if controls else np.zeros_like(effect)
        difference = effect - control
        rows.append({
            "motif": label, "consensus": motif, "position": int(position), "start": int(start),
            "covers_tss": bool(start <= tss_index < start + len(motif)),
            "sequences": len(sequences), "effect_mean": float(effect.mean()), "effect_sd": float(effect.std()),
            "control_mean": float(control.mean()), "control_sd": float(control.std()),
            "control_shuffle_sd": float(np.std([c.mean() for c in controls])) if controls else 0.0,
            "difference_mean": float(difference.mean()), "difference_sd": float(difference.std()),
            "difference_se": float(difference.std() / np.sqrt(len(difference))),
            "fraction_up": float((difference > 0).mean())})
    return rows


def shuffled_backgrounds(sequences: Sequence[str], *, seed: int = 0) -> list[str]:
    """One dinucleotide-preserving shuffle of each sequence (N shuffled like a fifth letter), fixed by ``seed``."""
    from tangermeme.ersatz import dinucleotide_shuffle
    from tangermeme.utils import characters
    one_hot = _encode(sequences)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        shuffled = dinucleotide_shuffle(one_hot, n=1, random_state=seed, allow_N=True)[:, 0]
    return [characters(row, allow_N=True) for row in shuffled]


def _encode(sequences: Sequence[str]) -> torch.Tensor:
    """``(N, 4, L)`` float one-hot of N sequences of one length; any letter but A C G T is an N (all zeros)."""
    from tangermeme.utils import one_hot_encode
    if not sequences:
        raise UserInputError("known-motif marginalisation needs at least one background sequence")
    lengths = {len(s) for s in sequences}
    if len(lengths) != 1:
        raise UserInputError(f"known-motif marginalisation needs sequences of one length, got lengths {sorted(lengths)[:5]}")
    return torch.stack([one_hot_encode(re.sub("[^ACGT]", "N", s.upper()), ignore=["N"]) for s in sequences]).float()
