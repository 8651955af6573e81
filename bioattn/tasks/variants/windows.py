"""Variant windows built with array operations, and scored at the token level through the scans' device feed.

:func:`build_windows` cuts every window from a sliding-window view of each contig's span. The alternative window
of a multi-base substitution, deletion or insertion (:func:`changed_windows`) keeps the window's length; its 3′
flank after REF is read further by a deletion's length or cut short by an insertion's. Activity models and promoter
classifiers are scored on token ids (:func:`token_model`, :func:`score_tokens`), any other model through
``predict`` on strings (:func:`score_strings`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterator, Sequence

import numpy as np

from bioattn.data.dna import PAD_ID

#: Letter-level complement (upper and lower case A/C/G/T/N; any other byte unchanged).
COMPLEMENT = np.arange(256, dtype=np.uint8)
for _a, _b in zip(b"ACGTNacgtn", b"TGCANtgcan"):
    COMPLEMENT[_a] = _b
#: Half the rows of one forward pass (alternative windows plus the reference windows first used), by device type.
ROWS = {"cpu": 128, "cuda": 2048}
#: Variants whose windows are built at once.
BLOCK = 8192


def rows_per_allele(device: Any) -> int:
    """Half the rows of a forward pass on ``device`` (a ``torch.device``): see :data:`ROWS`."""
    return ROWS.get(getattr(device, "type", str(device)), ROWS["cpu"])


@dataclass
class WindowGroup:
    """Windows of the variants ``index``, all on one contig: ``ref``, ``alt`` ``(n, P, W)`` uint8 letters (oriented
    as scored), ``weights`` and ``where`` ``(n, P)``."""

    index: np.ndarray
    ref: np.ndarray
    alt: np.ndarray
    weights: np.ndarray
    where: np.ndarray


def first_occurrences(starts: np.ndarray) -> np.ndarray:
    """``(n, P)`` 1.0 where a placement's start does not repeat an earlier one of the same row, else 0."""
    p = starts.shape[1]
    earlier = np.tril(np.ones((p, p), dtype=bool), -1)  # [k, j]: j < k
    repeated = ((starts[:, :, None] == starts[:, None, :]) & earlier).any(axis=2)
    return (~repeated).astype(np.float64)


def window_starts(pos0: np.ndarray, offsets: Sequence[int], length: int, width: int) -> np.ndarray:
    """``(N,)`` 0-based positions → ``(N, P)`` window starts: the variant at each offset, shifted to lie within the
    contig; ``width`` = min(model window, contig length)."""
    starts = pos0[:, None] - np.asarray(offsets, dtype=np.int64)[None, :]
    return np.clip(starts, 0, max(length - width, 0))


def _letters(reference: Any, chrom: str, lo: int, hi: int) -> np.ndarray:
    return np.frombuffer(str(reference[chrom][lo:hi]).upper().encode("ascii"), dtype=np.uint8)


def changed_windows(span: np.ndarray, lo: int, length: int, starts: np.ndarray, pos0: np.ndarray, ref_len: np.ndarray,
                    alts: Sequence[str], width: int, reverse: bool) -> np.ndarray:
    """``(m, P, width)`` alternative windows of ``m`` substitutions, deletions or insertions whose reference windows
    start at ``starts`` ``(m, P)``; ``span``: the contig's letters from ``lo`` on, widened by the longest REF either
    side; ``reverse``: scored in reverse complement (the window's end is kept, not its start)."""
    alt_len = np.fromiter((len(a) for a in alts), dtype=np.int64, count=len(alts))
    letters = np.full((len(alts), max(int(alt_len.max()), 1)), ord("N"), dtype=np.uint8)
    for row, alt in enumerate(alts):
        letters[row, : len(alt)] = np.frombuffer(alt.encode("ascii"), dtype=np.uint8)
    shift = (alt_len - ref_len)[:, None]  # how much longer the alternative sequence is
    new_length = length + shift  # (m, 1)
    if reverse:  # keep the end (its base after REF, when REF runs past it)
        end = np.maximum(starts + width, (pos0 + ref_len)[:, None]) + shift
        first = np.minimum(np.maximum(end - width, 0), new_length - width)
    else:
        first = np.maximum(np.minimum(starts, new_length - width), 0)
    a = first[:, :, None] + np.arange(width)[None, None, :]  # (m, P, W) positions on the alternative sequence
    p0, la = pos0[:, None, None], alt_len[:, None, None]
    on_ref = np.where(a < p0, a, a - shift[:, :, None])  # the reference position of a flank letter
    flank = span[np.clip(on_ref - lo, 0, len(span) - 1)]
    inside = letters[np.arange(len(alts))[:, None, None], np.clip(a - p0, 0, letters.shape[1] - 1)]
    out = np.where((a >= p0) & (a < p0 + la), inside, flank)
    out[(a < 0) | (a >= new_length[:, :, None])] = ord("N")
    return out


def build_windows(reference: Any, variants: Sequence[Any], offsets: Sequence[int], window: int,
                  reverse: Callable[[str], bool] | None = None) -> list[WindowGroup]:
    """One :class:`WindowGroup` per contig of ``variants``, in order of first appearance."""
    if not len(variants):
        return []
    chroms = [v.chrom for v in variants]
    pos0 = np.fromiter((v.pos for v in variants), dtype=np.int64, count=len(variants)) - 1
    alts = "".join(v.alt for v in variants).upper()
    single = None  # None: every allele one base; else a mask of those that are
    if len(alts) != len(variants) or len("".join(v.ref for v in variants)) != len(variants):
        ref_len = np.fromiter((len(v.ref) for v in variants), dtype=np.int64, count=len(variants))
        single = (ref_len == 1) & np.fromiter((len(v.alt) == 1 for v in variants), dtype=bool, count=len(variants))
        alts = "".join(v.alt.upper() if one else "N" for v, one in zip(variants, single))
    alt_base = np.frombuffer(alts.encode("ascii"), dtype=np.uint8)
    names, contig = np.unique(np.array(chroms, dtype=object), return_inverse=True)
    order = np.argsort(contig, kind="stable")
    bounds = np.flatnonzero(np.diff(contig[order])) + 1
    groups = []
    for index in sorted(np.split(order, bounds), key=lambda rows: rows[0]):
        chrom = str(names[contig[index[0]]])
        length = len(reference[chrom])
        width = min(window, length)
        starts = window_starts(pos0[index], offsets, length, width)
        lo, hi = int(starts.min()), int(starts.max()) + width
        changed = None if single is None else np.flatnonzero(~single[index])
        if changed is not None and len(changed):  # room for the flanks deletions read further
            wider = int(ref_len[index[changed]].max())
            lo_span, hi_span = max(lo - wider, 0), min(hi + wider, length)
            span = _letters(reference, chrom, lo_span, hi_span)
            view = np.lib.stride_tricks.sliding_window_view(span[lo - lo_span : hi - lo_span], width)
        else:
            view = np.lib.stride_tricks.sliding_window_view(_letters(reference, chrom, lo, hi), width)
        ref = view[starts - lo]  # (n, P, W), a copy
        alt = ref.copy()
        where = pos0[index][:, None] - starts
        rows = np.arange(len(index))[:, None]
        alt[rows, np.arange(starts.shape[1])[None, :], where] = alt_base[index][:, None]
        if changed is not None and len(changed):
            pick = index[changed]
            alt[changed] = changed_windows(span, lo_span, length, starts[changed], pos0[pick], ref_len[pick],
                                           [variants[i].alt.upper() for i in pick], width,
                                           reverse is not None and reverse(chrom))
        if reverse is not None and reverse(chrom):
            ref, alt = COMPLEMENT[ref[..., ::-1]], COMPLEMENT[alt[..., ::-1]]
        groups.append(WindowGroup(index, ref, alt, first_occurrences(starts), where))
    return groups


def strand_rows(letters: np.ndarray, both: bool) -> np.ndarray:
    """``(n, P, W)`` → ``(n, P, S, W)``: the windows, and their reverse complements when ``both``."""
    if not both:
        return letters[:, :, None]
    return np.stack([letters, COMPLEMENT[letters[..., ::-1]]], axis=2)


class TokenModel:
    """``tokens((R, W) uint8 letters) -> (R, L) ids``; ``score(ref_ids, alt_ids) -> (ref (R, T), alt (R, T)[, ref
    embedding (R, D), alt embedding (R, D)])``."""

    def __init__(self, model: Any, embed: bool) -> None:
        import torch

        from bioattn.data.dna import _ENCODE_TABLE
        self.model, self.embed = model, embed
        self.table = np.where(_ENCODE_TABLE >= 0, _ENCODE_TABLE, 255).astype(np.uint8)
        self.device = next(model.parameters()).device
        self.torch = torch

    def tokens(self, letters: np.ndarray) -> np.ndarray:
        ids = self.table[letters]
        if (ids == 255).any():  # a letter that is not DNA: the string path names it
            raise _NotTokenisable
        return ids


class _NotTokenisable(Exception):
    pass


class ActivityTokens(TokenModel):
    """:class:`~bioattn.models.activity.ActivityRegressor`: padding, flank stripping and strand handling as its
    ``tokenize`` and ``predict`` do."""

    def tokens(self, letters: np.ndarray) -> np.ndarray:
        model = self.model
        out = np.full((len(letters), model.input_length), PAD_ID, dtype=np.uint8)
        out[:, : letters.shape[1]] = super().tokens(letters)
        five, three = (f.encode("ascii") for f in model.flanks)
        flanked = np.zeros(len(letters), dtype=bool)
        for flank, side in ((five, slice(0, len(five))), (three, slice(letters.shape[1] - len(three), None))):
            if flank and len(flank) <= letters.shape[1]:
                flanked |= (letters[:, side] == np.frombuffer(flank, dtype=np.uint8)).all(axis=1)
        for row in np.flatnonzero(flanked):  # rare: the string path's tokenisation, row by row
            out[row] = model.tokenize([letters[row].tobytes().decode("ascii")])[0].numpy()
        return out

    #: An :class:`~bioattn.models.ensemble.Ensemble`: values are every member's, ``(R, M × T)``.
    members = False

    def _member_values(self, ids: Any) -> Any:
        member = self.model(ids)["member_values"].double()  # (M, R, T)
        return member.permute(1, 0, 2).reshape(member.shape[1], -1)

    def score(self, ref: Any, alt: Any) -> tuple:
        from bioattn.data.dna import reverse_complement_ids
        model, torch = self.model, self.torch
        both = model.strand == "both"
        ids = torch.cat([ref, alt])
        n = ref.shape[0]
        if self.members:
            values = self._member_values(ids)
            if both:
                values = (values + self._member_values(reverse_complement_ids(ids, ids == PAD_ID))) / 2
            return values[:n], values[n:]
        out = model(ids)
        values, embedding = out["values"], out["embedding"]
        if both:
            back = model(reverse_complement_ids(ids, ids == PAD_ID))
            values, embedding = (values + back["values"]) / 2, (embedding + back["embedding"]) / 2
        values = values.double()
        if not self.embed:
            return values[:n], values[n:]
        return values[:n], values[n:], embedding[:n].double(), embedding[n:].double()


class ClassifierTokens(TokenModel):
    """:class:`~bioattn.models.promoter.PromoterClassifier`: one strand, ``(R, 1)`` (two classes) or ``(R, C)``."""

    def __init__(self, wrapper: Any, embed: bool) -> None:
        super().__init__(wrapper.model, embed)

    def score(self, ref: Any, alt: Any) -> tuple:
        probs = self.model.proba_from_ids(self.torch.cat([ref, alt]), rc_average=False).double()
        probs = probs.reshape(probs.shape[0], -1)
        return probs[: ref.shape[0]], probs[ref.shape[0]:]


def token_model(model: Any, embed: bool) -> TokenModel | None:
    """The token-level scorer of ``model`` (a DNA model as ``as_dna_model`` gives it), or None: the string path."""
    from bioattn.models.activity import ActivityRegressor
    from bioattn.models.ensemble import Ensemble
    from bioattn.models.promoter import PromoterClassifier
    if type(model) is ActivityRegressor:
        return ActivityTokens(model, embed)
    ensemble = getattr(model, "ensemble", None)  # score.MemberOutputs: an ensemble's members side by side
    if isinstance(ensemble, Ensemble) and ensemble.member_type == "ActivityRegressor" and not embed:
        scorer = ActivityTokens(ensemble, embed)
        scorer.members = True
        return scorer
    if type(getattr(model, "model", None)) is PromoterClassifier and not embed:  # score.ClassifierOutputs
        return ClassifierTokens(model, embed)
    return None


@dataclass
class _TokenBatch:
    """One forward pass of :func:`score_tokens`: variants ``index``, their reference window ids ``(b, P * S)`` into
    ``store`` (the contig group's scores), the new reference windows ``ref`` ``(r, L)`` (ids from ``first``) and
    the alternative windows ``alt`` ``(b * P * S, L)``."""

    index: np.ndarray
    ids: np.ndarray
    first: int
    store: dict
    ref: np.ndarray
    alt: np.ndarray


def unique_windows(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(R, W)`` → ``(ids (R,), first (U,))``: each row's window id in order of first occurrence, and the row where
    each id first occurs."""
    rows = np.ascontiguousarray(rows)
    keys = rows.view(np.dtype((np.void, rows.shape[1]))).ravel()
    _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
    rank = np.empty(len(first), dtype=np.int64)
    rank[np.argsort(first)] = np.arange(len(first))
    return rank[inverse.ravel()], np.sort(first)


def score_tokens(scorer: TokenModel, reference: Any, variants: Sequence[Any], offsets: Sequence[int], window: int,
                 both: bool, reverse: Callable[[str], bool] | None, out: dict[str, np.ndarray],
                 update: Callable[[int], None]) -> None:
    """Fill ``out`` (``ref``, ``alt`` ``(N, P, S, T)``, ``weights``, ``where``, ``ref_e``/``alt_e``) in passes of
    about twice :func:`rows_per_allele` rows; each distinct reference window of a contig's group is scored once."""
    from bioattn.tasks.device_feed import feed
    n, p, s = len(variants), len(offsets), 2 if both else 1
    chrom = np.array([v.chrom for v in variants], dtype=object)
    pos = np.fromiter((v.pos for v in variants), dtype=np.int64, count=n)
    order = np.lexsort((pos, np.unique(chrom, return_inverse=True)[1]))
    budget = 2 * rows_per_allele(scorer.device)

    def batches() -> Iterator[_TokenBatch]:
        for block in (order[first : first + BLOCK] for first in range(0, n, BLOCK)):
            for group in build_windows(reference, [variants[i] for i in block], offsets, window, reverse):
                index = block[group.index]
                out["weights"][index], out["where"][index] = group.weights, group.where
                ref, alt = strand_rows(group.ref, both), strand_rows(group.alt, both)
                rows = ref.reshape(len(index) * p * s, -1)
                ids, first = unique_windows(rows)
                ids = ids.reshape(len(index), p * s)
                new_end = np.cumsum(np.bincount(first // (p * s), minlength=len(index)))  # ids scored by v's pass
                cost = np.arange(1, len(index) + 1) * (p * s) + new_end  # rows through variant v
                store: dict = {"size": len(first)}
                a = 0
                while a < len(index):
                    b = max(a + 1, min(len(index), int(np.searchsorted(cost, (cost[a - 1] if a else 0) + budget,
                                                                       side="right"))))
                    lo, hi = (int(new_end[a - 1]) if a else 0), int(new_end[b - 1])
                    yield _TokenBatch(index[a:b], ids[a:b], lo, store, scorer.tokens(rows[first[lo:hi]]),
                                      scorer.tokens(alt[a:b].reshape((b - a) * p * s, -1)))
                    a = b

    def filled(store: dict, name: str, first: int, values: np.ndarray) -> np.ndarray:
        if name not in store:
            store[name] = np.zeros((store["size"], values.shape[1]), dtype=values.dtype)
        store[name][first : first + len(values)] = values
        return store[name]

    torch, model = scorer.torch, scorer.model
    was_training = model.training
    model.eval()
    stream = feed(batches(), lambda alt, ref: scorer.score(ref, alt), scorer.device,
                  tokens=lambda batch: (batch.alt, batch.ref))
    try:
        with torch.inference_mode():
            for batch, result in stream:
                shape = (len(batch.index), p, s, -1)
                values = filled(batch.store, "ref", batch.first, result[0])
                out["ref"][batch.index] = values[batch.ids].reshape(shape)
                out["alt"][batch.index] = result[1].reshape(shape)
                if len(result) > 2:
                    if out.get("ref_e") is None:
                        out["ref_e"] = np.zeros((n, p, s, result[2].shape[1]))
                        out["alt_e"] = np.zeros_like(out["ref_e"])
                    embedded = filled(batch.store, "ref_e", batch.first, result[2])
                    out["ref_e"][batch.index] = embedded[batch.ids].reshape(shape)
                    out["alt_e"][batch.index] = result[3].reshape(shape)
                update(len(batch.index))
    finally:
        stream.close()
        model.train(was_training)


def score_strings(model: Any, reference: Any, variants: Sequence[Any], offsets: Sequence[int], window: int,
                  both: bool, reverse: Callable[[str], bool] | None, embed: bool, chunk: int,
                  out: dict[str, np.ndarray], update: Callable[[int], None],
                  predict_and_embed: Callable[[Any, list[str]], tuple[np.ndarray, np.ndarray]] | None = None) -> None:
    """Any DNA model: one ``predict`` call per chunk of variants on the distinct window strings;
    ``predict_and_embed(model, strings) -> (values, embeddings)`` when embedding."""
    n, p, s = len(variants), len(offsets), 2 if both else 1
    for first in range(0, n, chunk):
        part = variants[first : first + chunk]
        groups = build_windows(reference, part, offsets, window, reverse)
        strings: list[str] = []
        for group in groups:  # per variant: (2 alleles, P, S) windows
            rows = np.stack([strand_rows(group.ref, both), strand_rows(group.alt, both)], axis=1)
            strings += [row.tobytes().decode("ascii") for row in rows.reshape(-1, rows.shape[-1])]
        unique, inverse = np.unique(np.array(strings, dtype=object), return_inverse=True)
        if embed:
            values, embedded = predict_and_embed(model, list(unique))
            embedded = np.asarray(embedded, dtype=np.float64).reshape(len(unique), -1)[inverse]
        else:
            values = model.predict(list(unique))
        values = np.asarray(values, dtype=np.float64).reshape(len(unique), -1)[inverse]
        done = 0
        for group in groups:
            index, rows = first + group.index, len(group.index) * 2 * p * s
            out["weights"][index], out["where"][index] = group.weights, group.where
            block = values[done : done + rows].reshape(len(index), 2, p, s, -1)
            out["ref"][index], out["alt"][index] = block[:, 0], block[:, 1]
            if embed:
                if out.get("ref_e") is None:
                    out["ref_e"] = np.zeros((n, p, s, embedded.shape[1]))
                    out["alt_e"] = np.zeros_like(out["ref_e"])
                e = embedded[done : done + rows].reshape(len(index), 2, p, s, -1)
                out["ref_e"][index], out["alt_e"][index] = e[:, 0], e[:, 1]
            done += rows
        update(len(part))
