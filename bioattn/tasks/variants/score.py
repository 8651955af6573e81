"""Score variants with any bioattn DNA model: reference vs alternative allele in windows of the model's length cut
from the reference genome (SNVs, multi-base substitutions, and deletions and insertions of up to
:data:`~bioattn.tasks.variants.records.MAX_INDEL` nt).

A *DNA model* has ``predict(sequences) -> (N,) or (N, T)``, ``target_names`` and ``input_length``, optionally
``embed``; :func:`as_dna_model` wraps classifiers and ensembles. Each variant gets one window per placement
(:func:`default_offsets`), shifted to fit inside short contigs (:mod:`bioattn.tasks.variants.windows`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from bioattn.errors import UserInputError
from bioattn.progress import progress_bar
from bioattn.tasks.outputs import output_index
from bioattn.tasks.variants.records import Variant

STRANDS = ("auto", "forward", "both")
#: Variants per ``predict`` call.
CHUNK = 256


class ClassifierOutputs:
    """A promoter classifier as a DNA model: output ``p_promoter`` (classes ``0``/``1``), ``p_<class 1>`` (two named
    classes) or ``p_<class>`` per class."""

    def __init__(self, model: Any) -> None:
        self.model = model
        names = [str(c) for c in model.class_names]
        if len(names) == 2:
            self.target_names = ["p_promoter" if names == ["0", "1"] else f"p_{names[1]}"]
        else:
            self.target_names = [f"p_{c}" for c in names]
        self.input_length = int(model.max_len)
        self.both_strands = bool(getattr(model, "rc_average", False))

    def predict(self, sequences: Sequence[str]) -> np.ndarray:  # (N,) p(class 1) of two classes, else (N, C)
        probabilities = self.model.predict_proba(list(sequences), rc_average=False)
        return probabilities[:, 1] if probabilities.shape[1] == 2 else probabilities


class MemberOutputs:
    """An :class:`~bioattn.models.ensemble.Ensemble` of activity models as a DNA model whose ``predict`` gives every
    member's predictions side by side, ``(N, M × T)`` member-major; the members must agree on their windows."""

    def __init__(self, ensemble: Any) -> None:
        members = list(ensemble.members)
        first = members[0]
        for name in ("input_length", "target_names", "flanks", "strand"):
            values = {repr(getattr(m, name, None)) for m in members}
            if len(values) > 1:
                raise UserInputError(f"the ensemble's members differ in {name} ({', '.join(sorted(values))}); "
                                     "score variants with one member's folder")
        self.ensemble = ensemble
        self.members = len(members)
        self.target_names = list(first.target_names)
        self.input_length = int(first.input_length)

    def predict(self, sequences: Sequence[str]) -> np.ndarray:
        return np.concatenate([np.asarray(m.predict(list(sequences)), dtype=np.float64).reshape(len(sequences), -1)
                               for m in self.ensemble.members], axis=1)


def _is_value_ensemble(model: Any) -> bool:
    """Whether ``model`` is an Ensemble of activity regressors, not of classifiers."""
    from bioattn.models.ensemble import Ensemble
    if not isinstance(model, Ensemble):
        return False
    first = model.members[0]
    return all(hasattr(first, a) for a in ("input_length", "target_names", "predict")) and not hasattr(first, "max_len")


def as_dna_model(model: Any) -> Any:
    """``model`` itself when it is a DNA model, an activity ensemble as :class:`MemberOutputs`, a classifier (or an
    ensemble of them) as :class:`ClassifierOutputs`; anything else is an error."""
    if isinstance(model, (MemberOutputs, ClassifierOutputs)):
        return model
    if _is_value_ensemble(model):
        return MemberOutputs(model)
    if hasattr(model, "input_length") and hasattr(model, "target_names") and hasattr(model, "predict"):
        return model
    if hasattr(model, "max_len") and hasattr(model, "class_names") and hasattr(model, "predict"):
        return ClassifierOutputs(model)
    raise UserInputError(f"a {type(model).__name__} cannot score variants: it needs predict(sequences), "
                         "target_names and input_length (a DNA activity model or a promoter classifier)")


def default_offsets(width: int) -> list[int]:
    """The centre and a quarter window either side (distinct, in range)."""
    centre = width // 2
    return sorted({max(0, min(width - 1, centre + shift)) for shift in (-(width // 4), 0, width // 4)})


def resolve_strands(model: Any, strands: str) -> bool:
    """Whether both strands are scored (``strands``: ``auto``, ``forward``, ``both``)."""
    if strands not in STRANDS:
        raise UserInputError(f"--strands must be one of {', '.join(STRANDS)}, got {strands!r}")
    if strands == "auto":
        return bool(getattr(model, "both_strands", False))
    return strands == "both"


def window_starts(pos0: np.ndarray, offsets: Sequence[int], length: int, width: int) -> np.ndarray:
    """:func:`bioattn.tasks.variants.windows.window_starts`."""
    from bioattn.tasks.variants.windows import window_starts as starts
    return starts(pos0, offsets, length, width)


@dataclass
class AlleleScores:
    """Predictions of N variants: ``ref``, ``alt`` ``(N, P, S, T)``; ``weights`` ``(N, P)`` (0 for a placement
    repeating an earlier one); ``offsets`` ``(N, P)``; ``ref_embed``, ``alt_embed`` ``(N, P, S, D)``; for an
    ensemble ``ref``/``alt`` are the members' mean and ``ref_members``, ``alt_members`` ``(N, P, S, M, T)``."""

    ref: np.ndarray
    alt: np.ndarray
    weights: np.ndarray
    offsets: np.ndarray
    ref_embed: np.ndarray | None = None
    alt_embed: np.ndarray | None = None
    ref_members: np.ndarray | None = None
    alt_members: np.ndarray | None = None

    def select(self, rows: np.ndarray) -> "AlleleScores":
        """The scores of the variants ``rows`` (an index array)."""
        pick = (lambda a: None if a is None else a[rows])
        return AlleleScores(self.ref[rows], self.alt[rows], self.weights[rows], self.offsets[rows],
                            pick(self.ref_embed), pick(self.alt_embed), pick(self.ref_members), pick(self.alt_members))

    def mean(self, values: np.ndarray) -> np.ndarray:
        """``(N, P, S, ...)`` → ``(N, ...)``: averaged over strands and the distinct placements."""
        per_placement = values.mean(axis=2)
        w = self.weights.reshape(self.weights.shape + (1,) * (per_placement.ndim - 2))
        return (per_placement * w).sum(axis=1) / w.sum(axis=1)


def variant_windows(reference: Any, variants: Sequence[Variant], offsets: Sequence[int], window: int,
                    reverse: Callable[[str], bool] | None = None) -> tuple[list[np.ndarray], list[np.ndarray], np.ndarray, np.ndarray]:
    """``(ref windows, alt windows, weights (N, P), offsets (N, P))``: uint8 letters ``(P, width)`` per variant,
    offsets in the contig's forward orientation (:func:`bioattn.tasks.variants.windows.build_windows`)."""
    from bioattn.tasks.variants.windows import build_windows
    refs: list[Any] = [None] * len(variants)
    alts: list[Any] = [None] * len(variants)
    weights = np.zeros((len(variants), len(offsets)))
    where = np.zeros((len(variants), len(offsets)), dtype=np.int64)
    for group in build_windows(reference, variants, offsets, window, reverse):
        weights[group.index], where[group.index] = group.weights, group.where
        for row, i in enumerate(group.index):
            refs[i], alts[i] = group.ref[row], group.alt[row]
    return refs, alts, weights, where


def predict_and_embed(model: Any, sequences: list[str], batch_size: int = 256) -> tuple[np.ndarray, np.ndarray]:
    """``(values (N, T), embeddings (N, D))``: one forward pass per batch for a one-strand model with ``tokenize``,
    else ``predict`` and ``embed``."""
    import torch
    if not (hasattr(model, "tokenize") and getattr(model, "strand", None) == "forward"):
        return np.asarray(model.predict(sequences), dtype=np.float64), np.asarray(model.embed(sequences), dtype=np.float64)
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    values, embeddings = [], []
    try:
        with torch.no_grad():
            for first in range(0, len(sequences), batch_size):
                out = model(model.tokenize(sequences[first : first + batch_size]).to(device))
                values.append(out["values"].double().cpu().numpy())
                embeddings.append(out["embedding"].double().cpu().numpy())
    finally:
        model.train(was_training)
    return np.concatenate(values), np.concatenate(embeddings)


def allele_scores(model: Any, reference: Any, variants: Sequence[Variant], *, offsets: Sequence[int] | None = None,
                  strands: str = "auto", reverse: Callable[[str], bool] | None = None, embed: bool = False,
                  chunk: int = CHUNK, progress: bool = True) -> AlleleScores:
    """Predictions of every placement and strand of each variant's reference and alternative windows."""
    model = as_dna_model(model)
    window = int(model.input_length)
    offsets = default_offsets(window) if offsets is None else [int(o) for o in offsets]
    if not offsets or min(offsets) < 0 or max(offsets) >= window:
        raise UserInputError(f"--offsets must lie within the model's window (0-{window - 1}), got {offsets}")
    both = resolve_strands(model, strands)
    if embed and not hasattr(model, "embed"):
        raise UserInputError(f"{type(model).__name__} has no embed(); embedding features need an activity model")
    members = getattr(model, "members", 1) if isinstance(model, MemberOutputs) else 1
    n, p, s, t = len(variants), len(offsets), 2 if both else 1, len(model.target_names) * members
    out: dict[str, Any] = {"ref": np.zeros((n, p, s, t)), "alt": np.zeros((n, p, s, t)), "weights": np.zeros((n, p)),
                           "where": np.zeros((n, p), dtype=np.int64), "ref_e": None, "alt_e": None}
    from bioattn.tasks.variants import windows as token_path
    scorer = token_path.token_model(model, embed)
    with progress_bar(total=n, desc="variants", unit="variant", leave=False, disable=not progress) as bar:
        try:
            if scorer is None:
                raise token_path._NotTokenisable
            token_path.score_tokens(scorer, reference, variants, offsets, window, both, reverse, out, bar.update)
        except token_path._NotTokenisable:  # a letter outside DNA (or another model): predict() on strings
            bar.reset()
            token_path.score_strings(model, reference, variants, offsets, window, both, reverse, embed, chunk, out,
                                     bar.update, predict_and_embed)
    if members == 1:
        return AlleleScores(out["ref"], out["alt"], out["weights"], out["where"], out["ref_e"], out["alt_e"])
    ref, alt = (out[k].reshape(n, p, s, members, -1) for k in ("ref", "alt"))
    return AlleleScores(ref.mean(axis=3), alt.mean(axis=3), out["weights"], out["where"], out["ref_e"], out["alt_e"],
                        ref, alt)


#: The columns naming a variant in every score table, before the scores (and ``kind``, where a table has it).
ID_COLUMNS = ("chrom", "pos", "id", "ref", "alt", "kind")


def score_columns(target_names: Sequence[str], members: int = 1) -> list[str]:
    """``ref_score alt_score delta`` (one output) or ``<kind>_<name>`` per output; an ensemble adds ``delta_sd``
    after each ``delta``."""
    kinds = ("ref_score", "alt_score", "delta") + (("delta_sd",) if members > 1 else ())
    if len(target_names) == 1:
        return list(kinds)
    return [f"{kind}_{name}" for name in target_names for kind in kinds]


def score_table(variants: Sequence[Variant], scores: AlleleScores, target_names: Sequence[str],
                output: str | None = None) -> Any:
    """The output table: ``chrom pos id ref alt`` and the :func:`score_columns`; ``output`` (``--output-name``):
    that output's columns alone, unsuffixed."""
    import pandas as pd
    ref, alt = scores.mean(scores.ref), scores.mean(scores.alt)
    members = 1 if scores.ref_members is None else scores.ref_members.shape[3]
    table = pd.DataFrame({"chrom": [v.chrom for v in variants], "pos": np.array([v.pos for v in variants], dtype=np.int64),
                          "id": [v.id for v in variants], "ref": [v.ref for v in variants],
                          "alt": [v.alt for v in variants]})
    chosen = range(len(target_names)) if output is None else [output_index(output, target_names)]
    columns = iter(score_columns([target_names[k] for k in chosen], members))
    spread = None
    if members > 1:  # (N, M, T): each member's delta over its distinct placements and strands
        spread = (scores.mean(scores.alt_members) - scores.mean(scores.ref_members)).std(axis=1, ddof=1)
    for k in chosen:
        table[next(columns)] = ref[:, k]
        table[next(columns)] = alt[:, k]
        table[next(columns)] = alt[:, k] - ref[:, k]
        if spread is not None:
            table[next(columns)] = spread[:, k]
    return table


#: How the alternative window of a deletion or insertion is cut (said after :func:`how_scored`'s sentence).
INDEL_WINDOWS = ("a deletion's or insertion's alternative window keeps the model's length and the reference window's "
                 "bases up to the variant, the flank after REF (3' of it in the orientation scored) read further by "
                 "the deletion's length or cut short by the insertion's")


def how_scored(model: Any, offsets: Sequence[int] | None, strands: str, reversed_contigs: Sequence[str] = ()) -> str:
    """One sentence saying how the windows were placed and averaged (for headers and summaries)."""
    model = as_dna_model(model)
    window = int(model.input_length)
    offsets = default_offsets(window) if offsets is None else list(offsets)
    side = ("both strands averaged" if resolve_strands(model, strands) else
            "forward strand (strand handling of the model's own predict)")
    text = (f"{window}-nt windows with the variant at offsets {','.join(map(str, offsets))} (0-based; shifted to fit "
            f"inside short contigs), averaged over the distinct placements, {side}; ref_score is the reference "
            "allele in each variant's own windows")
    if isinstance(model, MemberOutputs):
        text += f"; scores are the mean of the ensemble's {model.members} members, delta_sd the sd of their deltas"
    if reversed_contigs:
        text += f"; scored in reverse complement (gene orientation): {','.join(reversed_contigs)}"
    return text
