"""Motifs a DNA model learned: TF-MoDISco patterns (``pos_<k>``, ``neg_<k>``), where they sit, what they match."""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

from bioattn.errors import UserInputError
from bioattn.explain.motif_db import DEFAULT_Q, MotifDatabase, tomtom_matches
from bioattn.explain.motif_scan import scan_spacings
from bioattn.explain.motif_seqlets import run_modisco

MOTIF_ATTRIBUTIONS = ("integrated_gradients", "ism")
DEFAULT_ATTRIBUTION = MOTIF_ATTRIBUTIONS[0]
MOTIF_USES = ("all", "predicted_positive")
DEFAULT_USE = MOTIF_USES[0]
#: A pattern position is in its core when its summed |contribution| is at least this share of the maximum.
TRIM_FRACTION = 0.3


@dataclass
class ModiscoSettings:
    """TF-MoDISco settings sized for short sequences (tens to hundreds of nt)."""
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
    """One discovered pattern, trimmed to its core: ``(W, 4)`` matrices, seqlet ``sites`` and core ``positions``."""
    name: str
    consensus: str
    ppm: np.ndarray
    contributions: np.ndarray
    hypothetical: np.ndarray
    sites: list[tuple[int, int, int, str]]
    positions: np.ndarray
    carriers: dict[str, float] = field(default_factory=dict)
    matches: list[dict] = field(default_factory=list)
    background: dict | None = None

    @property
    def seqlets(self) -> int:
        return len(self.sites)

    @property
    def composition(self) -> bool:
        """Whether the composition-matched background yields this pattern too."""
        return self.background is not None

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
    background: str = ""
    background_patterns: list[Pattern] = field(default_factory=list)

    def findings(self) -> list[Pattern]:
        """The patterns the background does not also yield, most seqlets first."""
        return sorted((p for p in self.patterns if not p.composition), key=lambda p: -p.seqlets)

    def matched_families(self) -> dict[str, list[str]]:
        """TF family (else the match's name) → names of the findings whose best match has q below ``q_threshold``."""
        families: dict[str, list[str]] = {}
        for pattern in self.findings():
            best = pattern.best_match(self.q_threshold)
            if best:
                families.setdefault(best["family"] or best["name"], []).append(pattern.name)
        return families


def _consensus(ppm: np.ndarray) -> str:
    """Top base where its probability is >= 0.5, lower case >= 0.35, else 'n'."""
    return "".join("ACGT"[t] if c[t] >= 0.5 else ("acgt"[t] if c[t] >= 0.35 else "n")
                   for c in ppm for t in [int(np.argmax(c))])


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
    """N columns padded to both ends of every sequence before TF-MoDISco: one seqlet, ``window + 2 * flank``."""
    return settings.window + 2 * settings.flank


def pattern_spacings(patterns: Sequence[Pattern]) -> list[dict]:
    """For every pair of patterns found together in >= 5 sequences: distance and gap (nt) between their cores."""
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
            distances = [min((abs(y - x), y - x) for x in by_sequence[a][index] for y in by_sequence[b][index])[1]
                         for index in shared]
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
                      settings: ModiscoSettings | None = None, top_matches: int = 3, progress: bool = False,
                      label: str = "TF-MoDISco") -> list[Pattern]:
    """Patterns of ``hypothetical (N, L, 4)`` over ``sequences`` (one length); ``groups``: name → ``(N,)`` bool."""
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
    # TF-MoDISco keeps the first max_seqlets seqlets in sequence order: shuffle so they sample all sequences
    order = np.random.default_rng(0).permutation(len(sequences))
    found = run_modisco(np.pad(one_hot[order], widths, constant_values=0.25), np.pad(hypothetical[order], widths),
                        settings, pad=pad, progress=progress, label=label)
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


def _attributor(model: Any, attribution: str, target: str, rc_average: bool | None, batch_size: int, progress: bool):
    """``(classify, attribute)``: predicted classes ``(N,)`` and hypothetical contributions ``(N, L, 4)``."""
    import torch
    from bioattn.data.dna import collate_tokens, encode
    from bioattn.explain.hypothetical import gradient_hypothetical
    from bioattn.explain.ism import _uses_rc, ism_attribution, predicted_classes
    from bioattn.progress import progress_bar
    device = next(model.parameters()).device
    method = "in-silico mutagenesis" if attribution == "ism" else "integrated gradients"
    def classify(sequences: Sequence[str]) -> Any:
        ids, padding_mask = collate_tokens([encode(s) for s in sequences])
        return torch.cat([predicted_classes(model, ids[s : s + batch_size].to(device),
                                            padding_mask[s : s + batch_size].to(device),
                                            rc_average=rc_average).cpu() for s in range(0, len(ids), batch_size)])
    def attribute(sequences: Sequence[str], label: str = "motifs") -> np.ndarray:
        ids, padding_mask = collate_tokens([encode(s) for s in sequences])
        classes = classify(sequences)
        explained = torch.ones_like(classes) if target == "positive" and len(model.class_names) == 2 else classes
        chunks = []
        for s in progress_bar(range(0, len(ids), batch_size), desc=f"{label}: {method}", unit="batch",
                              disable=not progress):
            rows = slice(s, s + batch_size)
            if attribution == "ism":
                chunks.append(ism_attribution(model, ids[rows], padding_mask[rows], explained[rows],
                                              rc_average=rc_average, hypothetical=True))
            else:
                chunks.append(gradient_hypothetical(model, ids[rows], explained[rows],
                                                    rc_average=_uses_rc(model, rc_average)))
        return torch.cat(chunks).numpy()
    return classify, attribute


def explain_motifs(model: Any, sequences: Sequence[str], *, tss_index: int | None = None,
                   database: MotifDatabase | None = None, q_threshold: float = DEFAULT_Q,
                   settings: ModiscoSettings | None = None, rc_average: bool | None = None,
                   hypothetical: np.ndarray | None = None, target: str = "positive", batch_size: int = 256,
                   attribution: str = DEFAULT_ATTRIBUTION, use: str = DEFAULT_USE, background: bool = True,
                   progress: bool = True) -> MotifReport:
    """Motif report of a :class:`~bioattn.models.PromoterClassifier` (or an ensemble) on ``sequences`` (one length).

    attribution: ``"integrated_gradients"`` or ``"ism"``; use: ``"all"`` or ``"predicted_positive"``; target:
    ``"positive"`` (class 1's log-odds) or ``"predicted"``; background: flag patterns shuffles also yield."""
    from bioattn.data.dna import collate_tokens, encode
    from bioattn.explain.head_motifs import cls_attention, head_motif_enrichment
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
    settings = settings or ModiscoSettings()
    sequences = [s.upper() for s in sequences]
    classify, attribute = _attributor(model, attribution, target, rc_average, batch_size, progress)
    seconds: dict[str, float] = {}
    classes = classify(sequences)
    if use == "predicted_positive" and len(model.class_names) == 2:
        chosen = (classes == 1).nonzero()[:, 0]
        if len(chosen) == 0:
            raise UserInputError(f"motif discovery on the predicted positives: none of the {len(sequences)} sequences "
                                 "is predicted positive (use all sequences instead)")
        sequences = [sequences[k] for k in chosen.tolist()]
        classes = classes[chosen]
        if hypothetical is not None and len(hypothetical) != len(chosen):
            hypothetical = np.asarray(hypothetical)[chosen.numpy()]
    given = hypothetical is not None
    if not given:
        start = time.perf_counter()
        hypothetical = attribute(sequences)
        seconds[attribution] = time.perf_counter() - start
    names = list(model.class_names)
    if len(names) == 2:
        groups = {"predicted_positive": classes.numpy() == 1, "predicted_negative": classes.numpy() == 0}
    else:
        groups = {f"predicted_{name}": classes.numpy() == k for k, name in enumerate(names)}
    two_class_positive = target == "positive" and len(names) == 2
    label = ("given hypothetical contributions" if given else
             {"ism": "in-silico mutagenesis", "integrated_gradients": "Integrated Gradients (all-N baseline) "
              "path gradients read for every base"}[attribution]
             + ", log-odds of the " + ("positive class" if two_class_positive else "predicted class")
             + " (hypothetical contributions"
             + (", mean of the ensemble's members)" if len(getattr(model, "members", [])) > 1 else ")"))
    def heads(patterns: Sequence[Pattern]) -> Any:
        ids, padding_mask = collate_tokens([encode(s) for s in sequences])
        attention = cls_attention(model, ids, padding_mask, batch_size=batch_size)
        lengths = (~padding_mask).sum(1).numpy()
        return head_motif_enrichment(attention, lengths, {p.name: [s[:3] for s in p.sites] for p in patterns})
    return report_motifs(sequences, hypothetical, attribute, groups=groups, attribution=label, tss_index=tss_index,
                         database=database, q_threshold=q_threshold, settings=settings, background=background,
                         heads=heads, seconds=seconds, progress=progress)


def report_motifs(sequences: Sequence[str], hypothetical: np.ndarray, attribute: Any, *,
                  groups: Mapping[str, np.ndarray], attribution: str, tss_index: int | None = None,
                  database: MotifDatabase | None = None, q_threshold: float = DEFAULT_Q,
                  settings: ModiscoSettings | None = None, background: bool = True, heads: Any = None,
                  seconds: dict[str, float] | None = None, progress: bool = True) -> MotifReport:
    """Motif report of any model's hypothetical contributions ``(N, L, 4)`` on ``sequences`` (one length, upper)."""
    from bioattn.explain.motif_seqlets import say
    settings = settings or ModiscoSettings()
    seconds = {} if seconds is None else seconds
    start = time.perf_counter()
    patterns = discover_patterns(sequences, hypothetical, groups=groups, tss_index=tss_index, database=database,
                                 settings=settings, progress=progress)
    seconds["modisco_tomtom"] = time.perf_counter() - start
    shuffled: list[Pattern] = []
    if background and patterns:
        from bioattn.explain.motif_background import BACKGROUND, flag_composition
        start = time.perf_counter()
        say(f"background: the same pipeline on {BACKGROUND} of the {len(sequences)} sequences", progress)
        shuffles, shuffled = background_patterns(sequences, lambda s: attribute(s, "background"), settings=settings,
                                                 tss_index=tss_index, progress=progress)
        flag_composition(patterns, shuffled, sequences, shuffles, q_threshold=q_threshold,
                         decoys=database if database is not None and len(database) >= 50 else None)
        patterns = report_order(patterns)
        seconds["background"] = time.perf_counter() - start
        say(f"background: {len(shuffled)} patterns; {sum(p.composition for p in patterns)} of the "
             f"{len(patterns)} patterns are composition ({seconds['background']:.0f} s)", progress)
    start = time.perf_counter()
    say("scanning pattern cores and reading [CLS] attention on the seqlets" if heads is not None
        else "scanning pattern cores", progress and bool(patterns))
    scanned = scan_spacings(patterns, sequences, groups=groups) if patterns else []
    seconds["scan_spacings"] = time.perf_counter() - start
    head_table = None
    if heads is not None:
        start = time.perf_counter()
        if patterns:
            head_table = heads(patterns)
        seconds["heads"] = time.perf_counter() - start
    return MotifReport(
        patterns=patterns, sequences=len(sequences), length=len(sequences[0]), tss_index=tss_index,
        database=database.label if database is not None else "none", q_threshold=q_threshold,
        attribution=attribution, groups={name: int(chosen.sum()) for name, chosen in groups.items()},
        head_table=head_table, spacings=pattern_spacings(patterns), scan_spacings=scanned, seconds=seconds,
        settings=vars(settings),
        background=(f"{BACKGROUND} of the {len(sequences)} sequences (one each), same pipeline"
                    if background and patterns else ""), background_patterns=shuffled)


def report_order(patterns: Sequence[Pattern]) -> list[Pattern]:
    """Findings first, then composition patterns; most seqlets first within each."""
    return sorted(patterns, key=lambda p: (p.composition, -p.seqlets))


def background_patterns(sequences: Sequence[str], attribute: Any, *, settings: ModiscoSettings | None = None,
                        tss_index: int | None = None, seed: int = 0,
                        progress: bool = False) -> tuple[list[str], list[Pattern]]:
    """``(shuffles, patterns)``: dinucleotide shuffles, TF-MoDISco's patterns of ``attribute(shuffles)``."""
    from bioattn.explain.marginalize import shuffled_backgrounds
    shuffles = shuffled_backgrounds(sequences, seed=seed)
    return shuffles, discover_patterns(shuffles, attribute(shuffles), tss_index=tss_index, settings=settings,
                                       progress=progress, label="background TF-MoDISco")
