"""Files of a motif report (:class:`~bioattn.explain.motifs.MotifReport`), ``motifs.html`` self-contained (offline)."""
from __future__ import annotations

import base64
import html
from pathlib import Path

import numpy as np

from bioattn.explain.motif_scan import SCAN_THRESHOLD
from bioattn.explain.motifs import MotifReport, Pattern
from bioattn.io import atomic_write, save_figure, write_json, write_table

MOTIF_COLUMNS = ["pattern", "consensus", "length", "seqlets", "mean_position", "sd_position", "strand_plus_fraction",
                 "best_match_id", "best_match_name", "best_match_family", "best_match_q", "matched", "other_matches",
                 "median_position", "best_match_class", "best_match_rank", "database_matrices", "finding",
                 "background_pattern", "background_q"]


def _logo(matrix: np.ndarray, path: Path, *, title: str, ylabel: str, information: bool = False) -> None:
    import logomaker
    import pandas as pd
    from matplotlib.figure import Figure
    frame = pd.DataFrame(np.asarray(matrix, dtype=float), columns=list("ACGT"))
    if information:
        frame = frame.clip(lower=1e-4)  # rows summing to 1 again, or logomaker prints a warning on stdout
        frame = logomaker.transform_matrix(frame.div(frame.sum(axis=1), axis=0), from_type="probability",
                                           to_type="information")
    figure = Figure(figsize=(max(3.0, 0.35 * len(frame) + 1), 2.0))
    axis = figure.subplots()
    logomaker.Logo(frame, ax=axis)
    axis.set_title(title, fontsize=9)
    axis.set_ylabel(ylabel, fontsize=8)
    axis.set_xticks([])
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.tight_layout()
    save_figure(figure, path, dpi=100)


def _histogram(pattern: Pattern, path: Path, *, length: int, offset: int, xlabel: str) -> None:
    from matplotlib.figure import Figure
    figure = Figure(figsize=(4.5, 2.2))
    axis = figure.subplots()
    axis.hist(pattern.positions, bins=np.arange(-offset - 0.5, length - offset + 0.5, 2), color="tab:blue")
    axis.set_xlim(-offset - 0.5, length - offset - 0.5)
    axis.set_xlabel(xlabel, fontsize=8)
    axis.set_ylabel("seqlets", fontsize=8)
    axis.set_title(f"{pattern.name} ({pattern.consensus}): core centres, n={pattern.seqlets}", fontsize=9)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.tight_layout()
    save_figure(figure, path, dpi=100)


def _heatmap(report: MotifReport, path: Path) -> None:
    from matplotlib.figure import Figure
    table = report.head_table
    layers, heads, motifs = table.ratio.shape
    values = np.log2(np.clip(table.ratio.reshape(layers * heads, motifs), 1e-3, None))
    figure = Figure(figsize=(1.2 + 0.8 * motifs, 0.9 + 0.35 * layers * heads))
    axis = figure.subplots()
    limit = max(float(np.nanmax(np.abs(values))) if np.isfinite(values).any() else 1.0, 0.5)
    image = axis.imshow(values, cmap="RdBu_r", vmin=-limit, vmax=limit, aspect="auto")
    axis.set_xticks(range(motifs), table.motifs, rotation=45, ha="right", fontsize=8)
    axis.set_yticks(range(layers * heads), [f"L{layer} H{head}" for layer in range(layers) for head in range(heads)], fontsize=8)
    for row in range(layers * heads):
        for column in range(motifs):
            if np.isfinite(table.ratio.reshape(layers * heads, motifs)[row, column]):
                axis.text(column, row, f"{table.ratio.reshape(layers * heads, motifs)[row, column]:.2f}", ha="center",
                          va="center", fontsize=7)
    figure.colorbar(image, ax=axis, label="log2 attention on sites / same positions elsewhere")
    axis.set_title("[CLS] attention on each pattern's seqlets", fontsize=9)
    figure.tight_layout()
    save_figure(figure, path, dpi=100)


def _embed(path: Path) -> str:
    return f'<img src="data:image/png;base64,{base64.b64encode(path.read_bytes()).decode()}" alt="{html.escape(path.name)}">'


def _cell(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return "" if not np.isfinite(value) else (f"{value:.3g}" if abs(value) < 1e-2 and value else f"{value:.2f}")
    return html.escape(str(value))


def _table(header: list[str], rows: list[list]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{_cell(v)}</td>" for v in row) + "</tr>" for row in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def finding_rows(report: MotifReport) -> list[dict]:
    """One row per finding, most seqlets first, with its best database match, significant or not."""
    return [{"pattern": pattern.name, "consensus": pattern.consensus, "seqlets": pattern.seqlets,
             "median_position": float(np.median(pattern.positions)), "best_match": best.get("name", ""),
             "best_match_id": best.get("id", ""), "rank": best.get("rank"), "of": best.get("of"),
             "q": best.get("q"), "significant": bool(pattern.best_match(report.q_threshold))}
            for pattern in report.findings() for best in [pattern.matches[0] if pattern.matches else {}]]


def motif_summary(report: MotifReport) -> dict:
    """The ``summary.json`` entry of a motif report."""
    findings = finding_rows(report)
    return {"patterns": len(report.patterns), "findings": findings, "matched": sum(row["significant"] for row in findings),
            "database": report.database, "composition": [p.name for p in report.patterns if p.composition],
            "background": report.background, "q_threshold": report.q_threshold, "seconds": report.seconds,
            "families": len(report.matched_families())}


def describe_finding(row: dict, q_threshold: float) -> str:
    """``TATAAA (pos_0), 242 seqlets at +32 (median): best match TBP MA0108.3, rank 1 of 879, q = 0.35 (...)``."""
    text = f"{row['consensus']} ({row['pattern']}), {row['seqlets']} seqlets at {row['median_position']:+.0f} (median)"
    if not row["best_match"]:
        return text
    verdict = "" if row["significant"] else f" (not significant at q < {q_threshold:g})"
    return (text + f": best match {row['best_match']} {row['best_match_id']}, rank {row['rank']} of {row['of']}, "
            f"q = {row['q']:.2g}{verdict}")


def _motif_row(pattern: Pattern, report: MotifReport) -> list:
    best = pattern.matches[0] if pattern.matches else None
    plus = np.mean([strand == "+" for *_, strand in pattern.sites]) if pattern.sites else float("nan")
    others = "; ".join(f"{m['name']} {m['id']} (q={m['q']:.2g})" for m in pattern.matches[1:])
    return [pattern.name, pattern.consensus, len(pattern.ppm), pattern.seqlets, float(pattern.positions.mean()),
            float(pattern.positions.std()), float(plus),
            *((best["id"], best["name"], best["family"], best["q"]) if best else ("", "", "", float("nan"))),
            "yes" if pattern.best_match(report.q_threshold) else "no", others, float(np.median(pattern.positions)),
            best.get("class", "") if best else "", best.get("rank") if best else None, best.get("of") if best else None,
            "no (composition)" if pattern.composition else "yes",
            f"{pattern.background['name']} {pattern.background['consensus']}" if pattern.background else "",
            pattern.background["q"] if pattern.background else None,
            *(pattern.carriers[name] for name in report.groups)]


def _families(report: MotifReport) -> str:
    families = report.matched_families()
    if not families:
        return f"<p>No finding's best database match has q &lt; {report.q_threshold:g}.</p>"
    items = "".join(f"<li>{html.escape(family)}: {html.escape(', '.join(names))}</li>" for family, names in families.items())
    return (f"<p>{len(families)} TF families among the findings' best database matches at q &lt; "
            f"{report.q_threshold:g} (family: patterns):</p><ul>{items}</ul>")


def _summary(report: MotifReport) -> str:
    findings = finding_rows(report)
    text = "".join(f"<li>{html.escape(describe_finding(row, report.q_threshold))}</li>" for row in findings)
    page = (f"<h2>Findings</h2><ol>{text}</ol>" if findings else
            "<h2>Findings</h2><p>No pattern beyond what composition alone yields.</p>")
    composition = [p for p in report.patterns if p.composition]
    if report.background:
        page += (f"<p>Background: {html.escape(report.background)}: {len(report.background_patterns)} patterns. A pattern "
                 "that a background pattern matches (TOMTOM) and whose core is not enriched in the sequences over "
                 "their shuffles (FIMO scan, less than 1.5 times as many) is what the model reads in any sequence of "
                 "this composition: listed below as composition, not as a finding.</p>")
        if composition:
            items = "".join(f"<li>{html.escape(p.name)} {html.escape(p.consensus)} ({p.seqlets} seqlets): background "
                            f"{html.escape(p.background['name'])} {html.escape(p.background['consensus'])} "
                            f"({p.background['seqlets']} seqlets, q = {p.background['q']:.2g}); core in "
                            f"{p.background['in_sequences']} sequences and {p.background['in_shuffles']} shuffles</li>"
                            for p in composition)
            page += f"<p>Composition (not findings):</p><ul>{items}</ul>"
    else:
        page += "<p>No composition-matched background was run: the patterns are not checked against composition.</p>"
    return page


def write_motif_report(report: MotifReport, out_dir: str | Path) -> Path:
    """Write every file of ``report`` under ``out_dir`` (created); returns the path of ``motifs.html``."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    offset = report.tss_index or 0
    xlabel = "position relative to TSS (core centre)" if report.tss_index is not None else "position (0-based, core centre)"
    carrier_columns = [f"fraction_{name}" for name in report.groups]
    rows = [_motif_row(p, report) for p in report.patterns]
    write_table(out / "motifs.tsv", MOTIF_COLUMNS + carrier_columns, rows)
    spacing_columns = ["first", "second", "sequences", "median_centre_distance", "sd_centre_distance", "gap_nt"]
    write_table(out / "motif_spacings.tsv", spacing_columns, ([s[c] for c in spacing_columns] for s in report.spacings))
    scan_columns = ["first", "second", "first_strand", "second_strand", "sequences", *carrier_columns, "spacer_mode",
                    "spacer_median", "at_mode"]
    write_table(out / "motif_scan_spacings.tsv", scan_columns, ([s.get(c) for c in scan_columns] for s in report.scan_spacings))
    sections = []
    for pattern in report.patterns:
        contribution = out / "logos" / f"{pattern.name}_contribution.png"
        probability = out / "logos" / f"{pattern.name}_probability.png"
        position = out / "positions" / f"{pattern.name}.png"
        _logo(pattern.contributions, contribution, title=f"{pattern.name}: contribution", ylabel="contribution")
        _logo(pattern.ppm, probability, title=f"{pattern.name}: {pattern.consensus}", ylabel="bits", information=True)
        _histogram(pattern, position, length=report.length, offset=offset, xlabel=xlabel)
        best = pattern.matches[0] if pattern.matches else None
        verdict = (f"best match <b>{html.escape(best['name'])}</b> {html.escape(best['id'])} "
                   f"({html.escape(best['family'])}; {html.escape(best.get('class', ''))}), rank {best.get('rank')} of "
                   f"{best.get('of')}, q = {best['q']:.2g}"
                   + ("" if best["q"] < report.q_threshold else f" (not significant at q &lt; {report.q_threshold:g})")
                   if best else "no database")
        if pattern.composition:
            verdict += (f"; <b>composition</b>: the background's {html.escape(pattern.background['name'])} "
                        f"{html.escape(pattern.background['consensus'])} matches it")
        sections.append(f"<h3>{html.escape(pattern.name)}: {html.escape(pattern.consensus)}</h3>"
                        f"<p>{pattern.seqlets} seqlets; position {pattern.positions.mean():.1f} ± "
                        f"{pattern.positions.std():.1f} (median {np.median(pattern.positions):.1f}); {verdict}</p>" + _embed(contribution) + _embed(probability)
                        + _embed(position))
    head_html = ""
    if report.head_table is not None:
        write_table(out / "head_motifs.tsv", ["layer", "head", "pattern", "sites", "attention_on_sites",
                                              "attention_same_positions_elsewhere", "ratio"], report.head_table.rows())
        _heatmap(report, out / "head_motifs.png")
        readers = [[name, *report.head_table.reader(name)] for name in report.head_table.motifs]
        head_html = ("<h2>Which head reads which pattern</h2><p>[CLS] attention summed over each seqlet's core, divided "
                     "by the same head's attention on the same positions of randomly drawn other sequences (1 = no "
                     "preference; first ensemble member, forward strand).</p>" + _embed(out / "head_motifs.png")
                     + _table(["pattern", "layer", "head (highest ratio)"], readers))
    seconds = ", ".join(f"{k} {v:.1f} s" for k, v in report.seconds.items())
    page = f"""<!DOCTYPE html><html><head><meta charset="utf-8"><title>bioattn motif report</title>
<style>body{{font-family:sans-serif;max-width:1100px;margin:1em auto}}table{{border-collapse:collapse;font-size:12px}}
td,th{{border:1px solid #ccc;padding:2px 6px}}img{{margin:4px;vertical-align:top}}</style></head><body>
<h1>Motifs the model uses</h1>
<p>{report.sequences} sequences of {report.length} nt ({", ".join(f"{k}: {v}" for k, v in report.groups.items())});
attribution: {html.escape(report.attribution)}; TF-MoDISco (modisco-lite) settings: {html.escape(str(report.settings))};
database: <b>{html.escape(report.database)}</b> (TOMTOM, memelite; a match is called at q &lt; {report.q_threshold:g});
positions are seqlet core centres {"relative to the TSS (index " + str(report.tss_index) + ")" if report.tss_index is not None else "from the sequence start"}.
Time: {html.escape(seconds)}.</p>
<p>Read with care: an attribution says what moves this model's output, not what the cell does; a database match
is a similarity of letters, not evidence of binding; patterns found depend on the number of sequences.</p>
{_summary(report)}
<h2>Patterns</h2>{_families(report)}{_table(MOTIF_COLUMNS + carrier_columns, rows)}
<h2>Spacings between patterns found together</h2>{_table(["first", "second", "sequences", "median centre distance",
                                                          "sd", "gap (nt)"], [list(s.values()) for s in report.spacings])}
<h2>Spacers between pattern matches</h2><p>Each pattern's core scanned over all sequences (FIMO p &lt; {SCAN_THRESHOLD:g}), read on
the strand where most of its seqlets lie; per sequence the best pair with the first pattern upstream of the second and
0–40 nt between them; spacer = nt between the two cores; at mode: sequences within 1 nt of the modal spacer.</p>
{_table(scan_columns, [[s.get(c) for c in scan_columns] for s in report.scan_spacings])}
{"".join(sections)}
{head_html}
</body></html>
"""
    with atomic_write(out / "motifs.html") as handle:
        handle.write(page)
    write_json(out / "motifs.json", {
        "sequences": report.sequences, "length": report.length, "tss_index": report.tss_index, "database": report.database,
        "q_threshold": report.q_threshold, "attribution": report.attribution, "groups": report.groups,
        "seconds": report.seconds, "settings": report.settings, "spacings": report.spacings, "scan_spacings": report.scan_spacings,
        "matched_families": report.matched_families(), "findings": finding_rows(report),
        "background": report.background,
        "background_patterns": [{"name": p.name, "consensus": p.consensus, "seqlets": p.seqlets,
                                 "median_position": float(np.median(p.positions))} for p in report.background_patterns],
        "patterns": [{"name": p.name, "consensus": p.consensus, "seqlets": p.seqlets,
                      "mean_position": float(p.positions.mean()), "sd_position": float(p.positions.std()),
                      "median_position": float(np.median(p.positions)),
                      "carriers": p.carriers, "matches": p.matches, "finding": not p.composition,
                      "background": p.background} for p in report.patterns],
        "head_readers": {name: report.head_table.reader(name) for name in report.head_table.motifs}
        if report.head_table is not None else {},
    })
    return out / "motifs.html"
