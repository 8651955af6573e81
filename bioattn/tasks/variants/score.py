"""Score variants with any bioattn DNA model: reference vs alternative allele in windows of the model's length taken
from the reference genome. SNVs, substitutions of several bases, and deletions and insertions of up to
:data:`~bioattn.tasks.variants.records.MAX_INDEL` nt are scored.

A *DNA model* here is anything with ``predict(sequences: list[str]) -> (N,) or (N, T)``, ``target_names`` (one name
per output) and ``input_length`` (the window it reads), optionally ``embed(sequences) -> (N, D)``; the activity
models are such models. A promoter classifier is wrapped by :func:`as_dna_model` so that its probability of the
positive class is one output, ``p_promoter``.

Windows (:func:`window_starts`): for each variant, one window per *placement*: the variant at 0-based offset ``o``
of the window for every ``o`` of ``offsets`` (default :func:`default_offsets`: the centre and a quarter window
either side). A window that would run past an end of the contig is shifted to fit inside it (so the variant
lands elsewhere in it; repeated windows count once); a contig shorter than the model's window is read whole.
A deletion's, insertion's or multi-base substitution's window has POS (its first REF base) at the offset; its
alternative window keeps the window's length and the reference window's bases before the variant, and reads the
3′ flank (after REF: to the right on a forward contig) further by a deletion's length or shorter by an
insertion's (:func:`bioattn.tasks.variants.windows.changed_windows`; on a ``reverse`` contig, the left flank,
3′ in its scored orientation).
Strands: ``forward``, or ``both`` (each window and its reverse complement, averaged); ``auto`` is ``both`` for a
classifier trained with strand averaging and ``forward`` otherwise (an activity model's own ``predict`` applies the
strand handling of its run). ``reverse`` contigs (e.g. minus-strand promoters, for an oriented assay) are scored
in their reverse complement (gene orientation).

Windows are cut per contig with array operations (:mod:`bioattn.tasks.variants.windows`). Activity models and
promoter classifiers are scored on token batches through the scans' device feed
(:func:`bioattn.tasks.device_feed.feed`: the alternative windows of a variant and the reference windows it is
the first to use in one forward pass, each distinct reference window of a contig's block scored once; their flank
stripping, padding and strand averaging done at the token level, with the numbers of their ``predict``); any
other DNA model gets the windows of a chunk of variants as strings in one ``predict`` call, where
identical windows (the reference windows shared by the three alleles of a position) are scored once.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from bioattn.errors import UserInputError
from bioattn.progress import progress_bar
from bioattn.tasks.variants.records import Variant

STRANDS = ("auto", "forward", "both")
#: Variants per ``predict`` call.
CHUNK = 256

_COMPLEMENT = np.arange(256, dtype=np.uint8)
for _a, _b in zip(b"ACGTNacgtn", b"TGCANtgcan"):
    _COMPLEMENT[_a] = _b


class ClassifierOutputs:
    """A promoter classifier seen as a DNA model: output ``p_promoter`` (two classes named ``0``/``1``),
    ``p_<class 1>`` (two classes with names) or ``p_<class>`` per class."""

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
    """An :class:`~bioattn.models.ensemble.Ensemble` of activity models (a ``--cv`` or ``--seeds`` run of ``bioattn
    train activity``) seen as a DNA model whose ``predict`` returns every member's predictions side by side,
    ``(N, M × T)`` member-major: :func:`allele_scores` reports their mean and keeps each member's, so that a table
    gives the members' spread beside the mean. ``target_names``, ``input_length`` and the strand handling are the
    members' (which must agree)."""

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
    """Whether ``model`` is an Ensemble of DNA models with values (activity regressors), not of classifiers."""
    from bioattn.models.ensemble import Ensemble

    if not isinstance(model, Ensemble):
        return False
    first = model.members[0]
    return all(hasattr(first, a) for a in ("input_length", "target_names", "predict")) and not hasattr(first, "max_len")


def as_dna_model(model: Any) -> Any:
    """``model`` itself when it has ``predict``, ``target_names`` and ``input_length``; an ensemble of activity
    models wrapped in :class:`MemberOutputs`; a classifier (``max_len``, ``class_names``, also an ensemble of
    classifiers: their mean probability) wrapped in :class:`ClassifierOutputs`; anything else is an error."""
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
    """The variant's offsets in the window: the centre and a quarter window either side (distinct, in range)."""
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
    """``(N, P)`` window starts for 0-based positions ``pos0`` (N,) on a contig of ``length`` nt: the variant at
    each offset, shifted to lie within ``[0, length)``; ``width`` = min(model window, contig length)."""
    from bioattn.tasks.variants.windows import window_starts as starts

    return starts(pos0, offsets, length, width)


@dataclass
class AlleleScores:
    """Per-placement, per-strand predictions of N variants: ``ref``, ``alt`` ``(N, P, S, T)``; ``weights`` ``(N, P)``
    (0 for a placement repeating an earlier one of the same variant); ``offsets`` ``(N, P)`` where the variant lies
    in each window; ``ref_embed``, ``alt_embed`` ``(N, P, S, D)`` when embeddings were asked for. For an ensemble
    (:class:`MemberOutputs`) ``ref`` and ``alt`` are the members' mean and ``ref_members``, ``alt_members``
    ``(N, P, S, M, T)`` each member's."""

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
        """``values (N, P, S, ...)`` averaged over strands and the distinct placements → ``(N, ...)``."""
        per_placement = values.mean(axis=2)
        w = self.weights.reshape(self.weights.shape + (1,) * (per_placement.ndim - 2))
        return (per_placement * w).sum(axis=1) / w.sum(axis=1)


def _fetch(reference: Any, chrom: str, lo: int, hi: int) -> np.ndarray:
    return np.frombuffer(str(reference[chrom][lo:hi]).upper().encode("ascii"), dtype=np.uint8)


def variant_windows(reference: Any, variants: Sequence[Variant], offsets: Sequence[int], window: int,
                    reverse: Callable[[str], bool] | None = None) -> tuple[list[np.ndarray], list[np.ndarray], np.ndarray, np.ndarray]:
    """Reference and alternative windows (uint8 letters, ``(P, width)`` per variant), ``(N, P)`` placement weights
    and ``(N, P)`` offsets of the variant in each window (in the forward orientation of the contig); built per
    contig with array operations (:func:`bioattn.tasks.variants.windows.build_windows`)."""
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


def _strings(rows: np.ndarray) -> list[str]:
    return [row.tobytes().decode("ascii") for row in rows]


def _as_matrix(values: Any, n: int) -> np.ndarray:
    values = np.asarray(values, dtype=np.float64)
    return values.reshape(n, -1)


def predict_and_embed(model: Any, sequences: list[str], batch_size: int = 256) -> tuple[np.ndarray, np.ndarray]:
    """``(values (N, T), embeddings (N, D))``: one forward pass per batch when the model has the activity models'
    tensor API (``tokenize`` and ``forward(tokens) -> {"values", "embedding"}``) and scores one strand, else
    ``predict`` and ``embed``."""
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
    """``ref_score alt_score delta`` (one output) or ``ref_score_<name> alt_score_<name> delta_<name>`` per output;
    for an ensemble (``members`` > 1) each output's ``delta`` is followed by ``delta_sd`` (``delta_sd_<name>``):
    the sample sd of the members' deltas."""
    kinds = ("ref_score", "alt_score", "delta") + (("delta_sd",) if members > 1 else ())
    if len(target_names) == 1:
        return list(kinds)
    return [f"{kind}_{name}" for name in target_names for kind in kinds]


def score_table(variants: Sequence[Variant], scores: AlleleScores, target_names: Sequence[str],
                output: str | None = None) -> Any:
    """The output table: ``chrom pos id ref alt`` (``id``: the VCF's ID, else ``chrom:pos:ref:alt``) and the score
    columns of :func:`score_columns`. ``ref_score`` is the reference allele's score in this variant's own windows
    (the same placements as ``alt_score``), so it differs between variants of one element. ``output`` (one of
    ``target_names``, ``--output-name``): that output's columns alone, named as a one-output model's
    (``ref_score alt_score delta [delta_sd]``)."""
    import pandas as pd

    from bioattn.tasks.outputs import output_index

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
