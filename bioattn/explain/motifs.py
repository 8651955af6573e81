"""Motifs a DNA model learned, from its attributions: TF-MoDISco patterns, where they sit, what they match.

:func:`discover_patterns` runs TF-MoDISco (``modisco-lite``) on hypothetical contributions ``(N, L, 4)`` (in
bioattn: in-silico mutagenesis of the predicted class, :mod:`bioattn.explain.ism`), trims each pattern to its
informative core, places every seqlet's core on the sequences (mean and sd position relative to the TSS), counts
the sequences of each predicted class carrying it and matches the core against a motif database with TOMTOM
(:mod:`bioattn.explain.motif_db`). :func:`explain_motifs` does the whole pipeline for a promoter model,
including which attention head reads each pattern (:mod:`bioattn.explain.head_motifs`);
:func:`~bioattn.explain.motif_report.write_motif_report` writes the files.

Patterns are named ``pos_<k>`` (their bases support the explained class) and ``neg_<k>`` (they argue against it).
"""
from __future__ import annotations

import time
import warnings
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

from bioattn.errors import UserInputError
from bioattn.explain.motif_db import DEFAULT_Q, MotifDatabase, tomtom_matches

_COMPLEMENT = str.maketrans("ACGT", "TGCA")
#: Hypothetical contributions ``explain_motifs`` can compute; the first is the default.
MOTIF_ATTRIBUTIONS = ("integrated_gradients", "ism")
DEFAULT_ATTRIBUTION = MOTIF_ATTRIBUTIONS[0]
#: Which sequences ``explain_motifs`` explains and clusters; the first is the default.
MOTIF_USES = ("all", "predicted_positive")
DEFAULT_USE = MOTIF_USES[0]
#: A pattern position is in its core when its summed |contribution| is at least this share of the maximum.
TRIM_FRACTION = 0.3


@dataclass
class ModiscoSettings:
    """TF-MoDISco settings sized for short sequences (tens to hundreds of nt); ``n_leiden_runs`` and
    ``max_seqlets`` trade time for stability (the package's defaults are 50 and 20,000)."""

    window: int = 9
    flank: int = 3
    max_seqlets: int = 2000
    n_leiden_runs: int = 8
    min_metacluster_size: int = 50
    final_min_cluster_size: int = 20

    def check(self) -> "ModiscoSettings":
        for name in ("window", "max_seqlets", "n_leiden_runs", "min_metacluster_size", "final_min_cluster_size"):
            if getattr(self, name) < 1:
                raise UserInputError(f"motif discovery: {name} must be >= 1, got {getattr(self, name)}")
        if self.flank < 0:
            raise UserInputError(f"motif discovery: flank must be >= 0, got {self.flank}")
        return self


@dataclass
class Pattern:
    """One discovered pattern, trimmed to its core.

    ppm, contributions, hypothetical: ``(W, 4)`` (A C G T) of the core; sites: ``(sequence, start, end, strand)`` of
    every seqlet's core; positions: core centres relative to the TSS; matches: best database matches."""

    name: str
    consensus: str
    ppm: np.ndarray
    contributions: np.ndarray
    hypothetical: np.ndarray
    sites: list[tuple[int, int, int, str]]
    positions: np.ndarray
    carriers: dict[str, float] = field(default_factory=dict)
    matches: list[dict] = field(default_factory=list)

    @property
    def seqlets(self) -> int:
        return len(self.sites)

    def best_match(self, q_threshold: float = DEFAULT_Q) -> dict | None:
        """The best database match if its q-value is below ``q_threshold``."""
        return self.matches[0] if self.matches and self.matches[0]["q"] < q_threshold else None


@dataclass
class MotifReport:
    """Everything the motif report shows: patterns, heads × patterns, spacings, settings."""

    patterns: list[Pattern]
    sequences: int
    length: int
    tss_index: int | None
    database: str
    q_threshold: float
    attribution: str
    groups: dict[str, int]
    head_table: Any = None
    spacings: list[dict] = field(default_factory=list)
    scan_spacings: list[dict] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)
    settings: dict[str, Any] = field(default_factory=dict)

    def matched_families(self) -> dict[str, list[str]]:
        """TF family → names of the patterns whose best database match (q below ``q_threshold``) is in it; a match
        without a family (a user's MEME file) counts under its own name."""
        families: dict[str, list[str]] = {}
        for pattern in self.patterns:
            best = pattern.best_match(self.q_threshold)
            if best:
                families.setdefault(best["family"] or best["name"], []).append(pattern.name)
        return families


def _consensus(ppm: np.ndarray) -> str:
    """IUPAC-free consensus: the top base where it has >= 0.5 probability, else lower case, 'n' below 0.35."""
    letters = []
    for column in ppm:
        top = int(np.argmax(column))
        letters.append("ACGT"[top] if column[top] >= 0.5 else ("acgt"[top] if column[top] >= 0.35 else "n"))
    return "".join(letters)


def _core(contributions: np.ndarray) -> tuple[int, int]:
    score = np.abs(contributions).sum(1)
    keep = np.flatnonzero(score >= TRIM_FRACTION * score.max())
    return int(keep[0]), int(keep[-1]) + 1


def _pattern(name: str, raw: Any, length: int, offset: int, pad: int, order: np.ndarray) -> Pattern:
    contributions = np.asarray(raw.contrib_scores)
    first, last = _core(contributions)
    sites, centres = [], []
    for seqlet in raw.seqlets:
        if seqlet.is_revcomp:
            start, end, strand = seqlet.end - last, seqlet.end - first, "-"
        else:
            start, end, strand = seqlet.start + first, seqlet.start + last, "+"
        start, end = max(int(start) - pad, 0), min(int(end) - pad, length)
        if end <= start:
            continue
        sites.append((int(order[seqlet.example_idx]), start, end, strand))
        centres.append((start + end - 1) / 2 - offset)
    ppm = np.asarray(raw.sequence)[first:last]
    return Pattern(name=name, consensus=_consensus(ppm), ppm=ppm, contributions=contributions[first:last],
                   hypothetical=np.asarray(raw.hypothetical_contribs)[first:last], sites=sites,
                   positions=np.asarray(centres, dtype=float))


def edge_padding(settings: ModiscoSettings) -> int:
    """N columns added to both ends of every sequence before TF-MoDISco: one seqlet (``window + 2 * flank``), so
    that seqlets near an end can be extracted, aligned and extended. The padding holds no contribution and a
    uniform letter (0.25 of each base, an N); TF-MoDISco's seqlet thresholds are computed on the unpadded windows
    only (:func:`run_modisco`), so the padding changes which seqlets can be cut, not how strong one must be."""
    return settings.window + 2 * settings.flank


def _extract_seqlets_unpadded_threshold(pad: int):
    """modisco-lite's ``extract_seqlets`` with its null, FDR thresholds and sign threshold computed on the windows
    of the unpadded columns ``[pad, L - pad)``; seqlets are then cut from the padded tracks with them (windows
    of padding alone sum to 0 and never pass). The steps are the library's own helpers, in its order."""
    from modiscolite import extract_seqlets as ex

    def extract(attribution_scores, window_size, flank, suppress, target_fdr, min_passing_windows_frac,
                max_passing_windows_frac, weak_threshold_for_counting_sign):
        inner = ex._smooth(attribution_scores[:, pad : attribution_scores.shape[1] - pad], window_size)
        pos_null, neg_null = ex._laplacian_null(track=inner, window_size=window_size, num_to_samp=10000)
        distribution = np.sort(np.abs(inner).ravel())
        values = inner.ravel()
        if len(values) > 1_000_000:
            values = np.random.RandomState(1234).choice(a=values, size=1_000_000, replace=False)
        pos_values, neg_values = ex._split(values)
        pos_threshold = ex._isotonic_thresholds(pos_values, pos_null, increasing=True, target_fdr=target_fdr)
        neg_threshold = ex._isotonic_thresholds(neg_values, neg_null, increasing=False, target_fdr=target_fdr)
        pos_threshold, neg_threshold = ex._refine_thresholds(
            vals=np.concatenate([pos_values, neg_values]), pos_threshold=pos_threshold, neg_threshold=neg_threshold,
            min_passing_windows_frac=min_passing_windows_frac, max_passing_windows_frac=max_passing_windows_frac)
        transformed = [np.sign(t) * np.searchsorted(distribution, abs(t)) / len(distribution)
                       for t in (pos_threshold, neg_threshold)]
        track = ex._smooth(attribution_scores, window_size)
        passing = (track >= pos_threshold) | (track <= neg_threshold)
        track[passing] = np.abs(track[passing])
        track[~passing] = -np.inf
        track[:, :flank] = -np.inf
        track[:, -flank:] = -np.inf
        seqlets = ex._iterative_extract_seqlets(score_track=track, window_size=window_size, flank=flank,
                                                suppress=suppress)
        weak = min(min(transformed[0], abs(transformed[1])) - 0.0001, weak_threshold_for_counting_sign)
        return seqlets, distribution[int(weak * len(distribution))]

    return extract


def run_modisco(one_hot: np.ndarray, hypothetical: np.ndarray, settings: ModiscoSettings,
                pad: int = 0) -> list[tuple[str, Any]]:
    """TF-MoDISco on ``one_hot (N, L, 4)`` and ``hypothetical (N, L, 4)``: ``[(name, modisco pattern)]``.

    pad: columns at each end that are padding; the seqlet thresholds are then computed without them."""
    from unittest import mock

    from modiscolite import extract_seqlets
    from modiscolite.tfmodisco import TFMoDISco

    settings.check()
    extract = _extract_seqlets_unpadded_threshold(pad) if pad else extract_seqlets.extract_seqlets
    with warnings.catch_warnings(), mock.patch.object(extract_seqlets, "extract_seqlets", extract):
        warnings.simplefilter("ignore")
        positive, negative = TFMoDISco(
            one_hot=one_hot, hypothetical_contribs=hypothetical, sliding_window_size=settings.window,
            flank_size=settings.flank, max_seqlets_per_metacluster=settings.max_seqlets,
            n_leiden_runs=settings.n_leiden_runs, min_metacluster_size=settings.min_metacluster_size,
            final_min_cluster_size=settings.final_min_cluster_size, trim_to_window_size=settings.window + 2 * settings.flank,
            initial_flank_to_add=settings.flank, verbose=False)
    return [(f"pos_{k}", p) for k, p in enumerate(positive or [])] + [(f"neg_{k}", p) for k, p in enumerate(negative or [])]


def pattern_spacings(patterns: Sequence[Pattern]) -> list[dict]:
    """For every pair of patterns found together in at least 5 sequences: the distance between their cores
    (second's centre minus first's, nearest pair per sequence) and the gap between the cores (nt between them)."""
    by_sequence = []
    for pattern in patterns:
        sites: dict[int, list[float]] = {}
        for index, start, end, _ in pattern.sites:
            sites.setdefault(index, []).append((start + end - 1) / 2)
        by_sequence.append(sites)
    rows = []
    for a in range(len(patterns)):
        for b in range(a + 1, len(patterns)):
            shared = by_sequence[a].keys() & by_sequence[b].keys()
            distances = []
            for index in shared:
                pairs = [(abs(y - x), y - x) for x in by_sequence[a][index] for y in by_sequence[b][index]]
                distances.append(min(pairs)[1])
            if len(distances) < 5:
                continue
            distances = np.asarray(distances)
            centre = float(np.median(distances))
            gap = abs(centre) - (len(patterns[a].ppm) + len(patterns[b].ppm)) / 2
            rows.append({"first": patterns[a].name, "second": patterns[b].name, "sequences": int(len(distances)),
                         "median_centre_distance": centre, "sd_centre_distance": float(distances.std()),
                         "gap_nt": float(gap)})
    return rows


def discover_patterns(sequences: Sequence[str], hypothetical: np.ndarray, *, groups: Mapping[str, np.ndarray] | None = None,
                      tss_index: int | None = None, database: MotifDatabase | None = None,
                      settings: ModiscoSettings | None = None, top_matches: int = 3) -> list[Pattern]:
    """Patterns of ``hypothetical (N, L, 4)`` contributions (A C G T) over ``sequences`` (N strings of length L).

    groups: name → ``(N,)`` bool (e.g. predicted class): each pattern gets the fraction of each group's sequences
    carrying at least one of its seqlets. Positions are relative to ``tss_index`` (0-based), else to the start.
    """
    settings = settings or ModiscoSettings()
    lengths = {len(s) for s in sequences}
    if len(lengths) != 1:
        raise UserInputError(f"motif discovery needs sequences of one length, got lengths {sorted(lengths)[:5]}")
    length = lengths.pop()
    if hypothetical.shape != (len(sequences), length, 4):
        raise ValueError(f"hypothetical must be (N, L, 4) = ({len(sequences)}, {length}, 4), got {hypothetical.shape}")
    one_hot = np.array([[[c == b for b in "ACGT"] for c in s.upper()] for s in sequences], dtype=np.float32)
    hypothetical = np.asarray(hypothetical, dtype=np.float32)
    pad = edge_padding(settings)
    widths = ((0, 0), (pad, pad), (0, 0))
    # TF-MoDISco keeps the first ``max_seqlets`` seqlets of each metacluster in sequence order; a fixed random order
    # of the sequences makes them a sample of all sequences rather than of the first ones.
    order = np.random.default_rng(0).permutation(len(sequences))
    found = run_modisco(np.pad(one_hot[order], widths, constant_values=0.25), np.pad(hypothetical[order], widths),
                        settings, pad=pad)
    patterns = [_pattern(name, raw, length, tss_index or 0, pad, order) for name, raw in found]
    patterns = [p for p in patterns if p.sites]
    for pattern in patterns:
        carriers = np.zeros(len(sequences), dtype=bool)
        carriers[[index for index, *_ in pattern.sites]] = True
        pattern.carriers = {name: float(carriers[chosen].mean()) if chosen.any() else float("nan")
                            for name, chosen in (groups or {}).items()}
    if database is not None and patterns:
        for pattern, matches in zip(patterns, tomtom_matches([p.ppm.T for p in patterns], database, top=top_matches)):
            pattern.matches = matches
    return patterns


def explain_motifs(model: Any, sequences: Sequence[str], *, tss_index: int | None = None,
                   database: MotifDatabase | None = None, q_threshold: float = DEFAULT_Q,
                   settings: ModiscoSettings | None = None, rc_average: bool | None = None,
                   hypothetical: np.ndarray | None = None, target: str = "positive", batch_size: int = 256,
                   attribution: str = DEFAULT_ATTRIBUTION, use: str = DEFAULT_USE, progress: bool = True) -> MotifReport:
    """The motif report of a :class:`~bioattn.models.PromoterClassifier` (or an ensemble) on ``sequences`` (one
    length, A C G T N): hypothetical contributions (or the given ``hypothetical (N, L, 4)``), TF-MoDISco, TOMTOM
    against ``database``, the spacers between patterns from scans of their cores (:func:`scan_spacings`) and the heads ×
patterns table of [CLS] attention (see :mod:`bioattn.explain.head_motifs`).

    attribution: ``"integrated_gradients"`` (gradients along the Integrated Gradients path read for every base,
    :mod:`bioattn.explain.hypothetical`; an ensemble's is the mean of its members') or ``"ism"`` (in-silico
    mutagenesis of the whole model, :mod:`bioattn.explain.ism`).

    use: ``"all"``: every sequence; ``"predicted_positive"`` (two-class models): only the sequences the model
    predicts positive are explained and clustered (a multi-class model uses all).

    target: ``"positive"`` explains the log-odds of class 1 in every sequence (two-class models; ``pos_`` patterns
    then support the positive class wherever they occur), ``"predicted"`` the class predicted for each sequence
    (a multi-class model always uses it)."""
    import torch

    from bioattn.data.dna import collate_tokens, encode
    from bioattn.explain.head_motifs import cls_attention, head_motif_enrichment
    from bioattn.explain.ism import ism_attribution
    from bioattn.explain.promoter_attribution import predicted_classes
    from bioattn.progress import progress_bar

    if not sequences:
        raise UserInputError("motif discovery needs at least one sequence")
    if target not in ("positive", "predicted"):
        raise UserInputError(f"motif target must be 'positive' or 'predicted', got {target!r}")
    if use not in MOTIF_USES:
        raise UserInputError(f"motif sequences must be one of {', '.join(MOTIF_USES)}, got {use!r}")
    if attribution not in MOTIF_ATTRIBUTIONS:
        raise UserInputError(f"motif attribution must be one of {', '.join(MOTIF_ATTRIBUTIONS)}, got {attribution!r}")
    if not 0 < q_threshold <= 1:
        raise UserInputError(f"motif q-value threshold must be in (0, 1], got {q_threshold}")
    sequences = [s.upper() for s in sequences]
    ids, padding_mask = collate_tokens([encode(s) for s in sequences])
    device = next(model.parameters()).device
    seconds: dict[str, float] = {}
    classes = torch.cat([predicted_classes(model, ids[s : s + batch_size].to(device), padding_mask[s : s + batch_size].to(device),
                                           rc_average=rc_average).cpu() for s in range(0, len(ids), batch_size)])
    if use == "predicted_positive" and len(model.class_names) == 2:
        chosen = (classes == 1).nonzero()[:, 0]
        if len(chosen) == 0:
            raise UserInputError(f"motif discovery on the predicted positives: none of the {len(sequences)} sequences "
                                 "is predicted positive (use all sequences instead)")
        sequences = [sequences[k] for k in chosen.tolist()]
        ids, padding_mask, classes = ids[chosen], padding_mask[chosen], classes[chosen]
        if hypothetical is not None and len(hypothetical) != len(chosen):
            hypothetical = np.asarray(hypothetical)[chosen.numpy()]
    explained = torch.ones_like(classes) if target == "positive" and len(model.class_names) == 2 else classes
    given = hypothetical is not None
    if hypothetical is None:
        from bioattn.explain.hypothetical import gradient_hypothetical
        from bioattn.explain.promoter_attribution import _uses_rc

        start = time.perf_counter()
        chunks = []
        steps = range(0, len(ids), batch_size)
        label = "in-silico mutagenesis" if attribution == "ism" else "integrated gradients"
        for s in progress_bar(steps, desc=f"motifs: {label}", unit="batch", disable=not progress):
            rows = slice(s, s + batch_size)
            if attribution == "ism":
                chunks.append(ism_attribution(model, ids[rows], padding_mask[rows], explained[rows],
                                              rc_average=rc_average, hypothetical=True))
            else:
                chunks.append(gradient_hypothetical(model, ids[rows], explained[rows],
                                                    rc_average=_uses_rc(model, rc_average)))
        hypothetical = torch.cat(chunks).numpy()
        seconds[attribution] = time.perf_counter() - start
    names = list(model.class_names)
    if len(names) == 2:
        groups = {"predicted_positive": classes.numpy() == 1, "predicted_negative": classes.numpy() == 0}
    else:
        groups = {f"predicted_{name}": classes.numpy() == k for k, name in enumerate(names)}
    start = time.perf_counter()
    patterns = discover_patterns(sequences, hypothetical, groups=groups, tss_index=tss_index, database=database,
                                 settings=settings)
    seconds["modisco_tomtom"] = time.perf_counter() - start
    start = time.perf_counter()
    scanned = scan_spacings(patterns, sequences, groups=groups) if patterns else []
    seconds["scan_spacings"] = time.perf_counter() - start
    start = time.perf_counter()
    head_table = None
    if patterns:
        attention = cls_attention(model, ids, padding_mask, batch_size=batch_size)
        lengths = (~padding_mask).sum(1).numpy()
        head_table = head_motif_enrichment(attention, lengths, {p.name: [s[:3] for s in p.sites] for p in patterns})
    seconds["heads"] = time.perf_counter() - start
    settings = settings or ModiscoSettings()
    return MotifReport(
        patterns=patterns, sequences=len(sequences), length=len(sequences[0]), tss_index=tss_index,
        database=database.label if database is not None else "none", q_threshold=q_threshold,
        attribution=("given hypothetical contributions" if given else
                     {"ism": "in-silico mutagenesis", "integrated_gradients": "Integrated Gradients (all-N baseline) "
                      "path gradients read for every base"}[attribution]
                     + ", log-odds of the " + ("positive class" if explained is not classes else "predicted class")
                     + " (hypothetical contributions"
                     + (", mean of the ensemble's members)" if len(getattr(model, "members", [])) > 1 else ")")),
        groups={name: int(chosen.sum()) for name, chosen in groups.items()}, head_table=head_table,
        spacings=pattern_spacings(patterns), scan_spacings=scanned, seconds=seconds, settings=vars(settings))


def scan_pattern_sites(patterns: Sequence[Pattern], sequences: Sequence[str], *, threshold: float = 1e-4,
                       offset: int = 0) -> dict[str, list[tuple[int, int, int, str, float]]]:
    """Every match of each pattern's core in ``sequences`` (N strings, A C G T N), on both strands: FIMO (memelite)
    with the core's probability matrix, hits with p < ``threshold``.

    Seqlets mark only the sites TF-MoDISco kept (those above its contribution threshold, at most ``max_seqlets`` per
    metacluster, clustered into one pattern among several similar ones); a scan finds the pattern wherever its
    letters are, so it counts the sequences carrying a box regardless of those choices.

    Returns:
        pattern name → ``[(sequence, start, end, strand, p)]``: 0-based half-open core coordinates on the forward
        strand minus ``offset`` (e.g. the TSS index, so positions are relative to it); strand ``"-"`` when the
        reverse complement of the core matches.
    """
    from memelite import fimo

    if not 0 < threshold <= 1:
        raise UserInputError(f"pattern scan: p-value threshold must be in (0, 1], got {threshold}")
    if not patterns or not sequences:
        return {p.name: [] for p in patterns}
    lengths = {len(s) for s in sequences}
    if len(lengths) != 1:
        raise UserInputError(f"pattern scan needs sequences of one length, got lengths {sorted(lengths)[:5]}")
    one_hot = np.array([[[c == b for c in s.upper()] for b in "ACGT"] for s in sequences], dtype=np.float32)
    motifs = {p.name: np.clip(np.asarray(p.ppm, dtype=float), 1e-3, None).T for p in patterns}
    motifs = {name: ppm / ppm.sum(0, keepdims=True) for name, ppm in motifs.items()}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        hits = fimo(motifs, one_hot, threshold=threshold)
    found: dict[str, list[tuple[int, int, int, str, float]]] = {p.name: [] for p in patterns}
    for table in hits:
        columns = ["motif_name", "sequence_name", "start", "end", "strand", "p-value"]
        for name, index, start, end, strand, p in table[columns].itertuples(index=False, name=None):
            found[name].append((int(index), int(start) - offset, int(end) - offset, str(strand), float(p)))
    return found


def box_spacers(upstream: Sequence[tuple], downstream: Sequence[tuple], *, upstream_strand: str = "+",
                downstream_strand: str = "+", gaps: tuple[int, int] = (0, 40)) -> dict[int, int]:
    """Spacer (nt between the two cores) of a two-box element such as the σ70 −35 and −10 boxes, per sequence.

    upstream, downstream: sites of :func:`scan_pattern_sites` of the two patterns; ``*_strand`` the strand whose hits
    read the box in the element's sense (``"-"`` when a pattern's consensus is the box's reverse complement). In each
    sequence the pair with the upstream core before the downstream one, a gap within ``gaps`` (inclusive) and the
    smallest product of the two p-values is kept. Returns sequence → gap (downstream start − upstream end)."""
    by_sequence: dict[int, list[tuple]] = {}
    for site in downstream:
        if site[3] == downstream_strand:
            by_sequence.setdefault(site[0], []).append(site)
    best: dict[int, tuple[float, int]] = {}
    for index, start, end, strand, p in upstream:
        if strand != upstream_strand:
            continue
        for _, d_start, _, _, d_p in by_sequence.get(index, []):
            gap = d_start - end
            if gaps[0] <= gap <= gaps[1] and (index not in best or p * d_p < best[index][0]):
                best[index] = (p * d_p, gap)
    return {index: gap for index, (_, gap) in sorted(best.items())}


#: FIMO p-value below which :func:`scan_spacings` counts a pattern's match (a 6-nt core cannot reach 1e-4: 4**-6).
SCAN_THRESHOLD = 1e-3


def pattern_sense(pattern: Pattern) -> str:
    """The strand (``"+"`` or ``"-"``) on which most of ``pattern``'s seqlets read its consensus: the sense in which
    the pattern occurs on the sequences explained (``"-"`` when the consensus is reported as the reverse complement
    of what the sequences carry, as TF-MoDISco may do; ``"+"`` on a tie or without seqlets)."""
    reverse = sum(site[3] == "-" for site in pattern.sites)
    return "-" if reverse > len(pattern.sites) - reverse else "+"


def scan_spacings(patterns: Sequence[Pattern], sequences: Sequence[str], *, groups: Mapping[str, np.ndarray] | None = None,
                  threshold: float = SCAN_THRESHOLD, gaps: tuple[int, int] = (0, 40), min_sequences: int = 5,
                  sites: Mapping[str, Sequence[tuple]] | None = None) -> list[dict]:
    """Spacers between every ordered pair of patterns from scans of their cores over all ``sequences``.

    Seqlet co-occurrence (:func:`pattern_spacings`) counts a pair only where TF-MoDISco cut a seqlet for both boxes;
    here each pattern's core is matched wherever its letters are (:func:`scan_pattern_sites`, FIMO p <
    ``threshold``), read in its sense on these sequences (:func:`pattern_sense`), and for every sequence carrying the
    first pattern upstream of the second with a spacer within ``gaps`` the best pair gives the spacer
    (:func:`box_spacers`). Pairs found in fewer than ``min_sequences`` sequences are left out.

    groups: name → ``(N,)`` bool; each row gets the fraction of each group's sequences carrying the pair.
    sites: precomputed :func:`scan_pattern_sites` output (else scanned here).

    Returns rows ``{first, second, first_strand, second_strand, sequences, fraction_<group>..., spacer_mode,
    spacer_median, at_mode}`` (``at_mode``: sequences whose spacer is within 1 nt of the mode), most sequences first.
    """
    if min_sequences < 1:
        raise UserInputError(f"scan spacings: min_sequences must be >= 1, got {min_sequences}")
    if not 0 <= gaps[0] <= gaps[1]:
        raise UserInputError(f"scan spacings: gaps must be 0 <= low <= high, got {gaps}")
    if sites is None:
        sites = scan_pattern_sites(patterns, sequences, threshold=threshold)
    senses = {p.name: pattern_sense(p) for p in patterns}
    rows = []
    for first in patterns:
        for second in patterns:
            if first is second:
                continue
            spacers = box_spacers(sites[first.name], sites[second.name], upstream_strand=senses[first.name],
                                  downstream_strand=senses[second.name], gaps=gaps)
            if len(spacers) < min_sequences:
                continue
            values = np.fromiter(spacers.values(), dtype=int)
            counts = np.bincount(values)
            mode = int(np.argmax(counts))
            row = {"first": first.name, "second": second.name, "first_strand": senses[first.name],
                   "second_strand": senses[second.name], "sequences": len(values)}
            carriers = np.zeros(len(sequences), dtype=bool)
            carriers[list(spacers)] = True
            for name, chosen in (groups or {}).items():
                row[f"fraction_{name}"] = float(carriers[chosen].mean()) if chosen.any() else float("nan")
            row.update(spacer_mode=mode, spacer_median=float(np.median(values)),
                       at_mode=int(counts[max(mode - 1, 0) : mode + 2].sum()))
            rows.append(row)
    return sorted(rows, key=lambda row: -row["sequences"])
