"""Genome scan: score sliding windows of long sequences (regions, chromosomes) with a promoter model.

The FASTA (plain or bgzip) is read through a pyfaidx index, chromosome by chromosome, in constant memory; the
windows are :class:`~bioattn.tasks.promoter.scan_windows.WindowGrid`'s, scored by
:func:`~bioattn.tasks.promoter.scan_windows.score_targets` and written by :mod:`~bioattn.tasks.promoter.tracks`
(``.csv``/``.tsv`` windows, ``.bedGraph``/``.bw`` tiles, ``.bed`` regions; 0-based, half-open). Under ``torchrun``
each process scans its share (:func:`shard_targets`) and the first writes the output, the same bytes as one process.
"""
from __future__ import annotations

import gzip
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any, Sequence

import pyfaidx

from bioattn.errors import UserInputError
from bioattn.io import atomic_write
from bioattn.tasks.promoter.scan_windows import (ScanTarget, WindowGrid, default_batch_size, score_targets,
                                                  window_spans, window_tiles)
from bioattn.tasks.promoter.tracks import (BigWigWriter, ScanSummary, check_writable, fresh_folder, merge_parts,
                                           save_part, text_header)

__all__ = ["SCAN_FORMATS", "ScanSummary", "ScanTarget", "WindowGrid", "default_batch_size", "open_indexed_fasta",
           "read_regions", "scan_format", "scan_genome", "scan_targets", "shard_targets", "window_spans",
           "window_tiles"]

SCAN_FORMATS = {".csv": "csv", ".tsv": "csv", ".bedgraph": "bedgraph", ".bed": "bed", ".bw": "bigwig",
                ".bigwig": "bigwig"}


def scan_format(path: str | os.PathLike) -> str:
    """``csv``, ``bedgraph``, ``bigwig`` or ``bed`` from the output's extension (any case)."""
    suffix = Path(path).suffix.lower()
    if suffix not in SCAN_FORMATS:
        raise UserInputError(f"{path}: unknown output extension {suffix or '(none)'!r}; a genome scan writes "
                             f".bedGraph, .bw (.bigWig), .bed or .csv (.tsv)")
    return SCAN_FORMATS[suffix]


def _check_fasta(path: Path) -> None:
    if not path.is_file():
        raise UserInputError(f"{path}: file not found" if not path.exists() else f"{path}: is not a file")
    with open(path, "rb") as handle:
        head = handle.read(4)
    if head[:2] == b"\x1f\x8b":
        with gzip.open(path, "rb") as handle:
            first = handle.read(1)
        if len(head) < 4 or not head[3] & 0x04:  # the FEXTRA flag: bgzip sets it, plain gzip does not
            raise UserInputError(f"{path}: a genome scan reads plain FASTA or bgzip-compressed FASTA, not gzip; "
                                 f"recompress with 'gunzip {path.name} && bgzip {path.stem}'")
    else:
        first = head[:1]
    if first != b">":
        raise UserInputError(f"{path}: a genome scan (--window) needs a FASTA file whose first line is a '>' header")


def _index_location(path: Path, folder: str) -> dict[str, str]:
    """pyfaidx index file names: beside ``path`` when that works, else in ``folder`` (a temporary folder)."""
    fai = Path(f"{path}.fai")
    fresh = fai.exists() and fai.stat().st_mtime >= path.stat().st_mtime
    if fresh or os.access(path.parent, os.W_OK):
        return {}
    print(f"note: {path.parent} is not writable; indexing {path.name} in a temporary folder (rebuilt on every run)",
          file=sys.stderr)
    return {"indexname": str(Path(folder) / fai.name), "gzi_indexname": str(Path(folder) / f"{path.name}.gzi")}


def open_indexed_fasta(path: Path, folder: str) -> pyfaidx.Fasta:
    """Open ``path`` with pyfaidx (raw text as in the file, either case), building its index if needed."""
    _check_fasta(path)
    try:
        return pyfaidx.Fasta(str(path), as_raw=True, **_index_location(path, folder))
    except (pyfaidx.FastaIndexingError, pyfaidx.UnsupportedCompressionFormat, ValueError, OSError) as exc:
        raise UserInputError(f"{path}: cannot index this FASTA ({str(exc).splitlines()[0]})") from exc


def read_regions(path: Path, lengths: dict[str, int]) -> dict[str, list[tuple[int, int]]]:
    """BED intervals per sequence of ``lengths``, sorted, overlapping or touching ones merged."""
    if not path.is_file():
        raise UserInputError(f"{path}: file not found" if not path.exists() else f"{path}: is not a file")
    found: dict[str, list[tuple[int, int]]] = {}
    with open(path) as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip() or line.startswith(("#", "track", "browser")):
                continue
            fields = line.rstrip("\n").split("\t") if "\t" in line else line.split()
            where = f"{path}: line {number}"
            if len(fields) < 3:
                raise UserInputError(f"{where}: a BED line needs chrom, start and end, got {line.strip()!r}")
            chrom = fields[0]
            try:
                start, end = int(fields[1]), int(fields[2])
            except ValueError:
                raise UserInputError(f"{where}: start and end must be integers, got {fields[1]!r} and {fields[2]!r}") from None
            if chrom not in lengths:
                raise UserInputError(f"{where}: sequence {chrom!r} is not in the FASTA")
            if not 0 <= start < end <= lengths[chrom]:
                raise UserInputError(f"{where}: interval {start}-{end} is not within {chrom} (0-{lengths[chrom]}, "
                                     f"0-based half-open, start < end)")
            found.setdefault(chrom, []).append((start, end))
    if not found:
        raise UserInputError(f"{path}: no intervals (a BED file of chrom, start, end lines)")
    for chrom, intervals in found.items():
        out: list[list[int]] = []
        for start, end in sorted(intervals):
            if out and start <= out[-1][1]:
                out[-1][1] = max(out[-1][1], end)
            else:
                out.append([start, end])
        found[chrom] = [(a, b) for a, b in out]
    return found


def scan_targets(lengths: dict[str, int], *, chroms: Sequence[str] | None = None,
                 regions: dict[str, list[tuple[int, int]]] | None = None) -> list[ScanTarget]:
    """The stretches to scan in genome order: every sequence of ``lengths``, or only ``chroms`` / ``regions``."""
    if chroms is not None:
        missing = [name for name in chroms if name not in lengths]
        if missing:
            raise UserInputError(f"--chrom {missing[0]!r} is not a sequence of the FASTA (it has "
                                 f"{', '.join(list(lengths)[:5])}{', ...' if len(lengths) > 5 else ''})")
    chosen = set(chroms) if chroms is not None else None
    targets: list[ScanTarget] = []
    for chrom, length in lengths.items():
        if chosen is not None and chrom not in chosen:
            continue
        spans = regions.get(chrom, []) if regions is not None else [(0, length)]
        for start, end in spans:
            targets.append(ScanTarget(len(targets), chrom, start, end, length))
    if not targets:
        raise UserInputError("nothing to scan: no --regions interval lies on the --chrom sequences")
    return targets


def shard_targets(targets: Sequence[ScanTarget], ranks: int, rank: int, window: int, stride: int) -> list[ScanTarget]:
    """Rank ``rank``'s share of ``targets`` among ``ranks`` processes, balanced by windows, in genome order."""
    load = [0] * ranks
    owner: dict[int, int] = {}
    for target in sorted(targets, key=lambda t: (-t.length, t.index)):
        chosen = min(range(ranks), key=lambda r: (load[r], r))
        owner[target.index] = chosen
        load[chosen] += len(WindowGrid(target.length, window, stride))
    return [target for target in targets if owner[target.index] == rank]


def _bigwig_header(targets: Sequence[ScanTarget]) -> list[tuple[str, int]]:
    """The bigWig's sequences: each scanned chrom once, with its full length, in genome order."""
    return list(dict.fromkeys((t.chrom, t.chrom_length) for t in targets))


def scan_genome(model: Any, path: Path, output: Path, *, window: int, stride: int, class_index: int,
                batch_size: int | None = None, rc_average: bool | None = None, chroms: Sequence[str] | None = None,
                regions: Path | None = None, compile_model: bool = False) -> ScanSummary:
    """Score every window of the FASTA ``path`` (or of ``chroms`` / the ``regions`` BED) into ``output``; the totals.

    ``class_index``: the scored class (BED keeps windows ``>= model.threshold``); ``batch_size``: default
    :func:`default_batch_size`; ``compile_model``: ``torch.compile`` the model (batches padded to ``batch_size``).
    """
    from bioattn import distributed
    kind = scan_format(output)
    if not 1 <= window <= model.max_len:
        raise UserInputError(f"--window must be between 1 and the model's max_len ({model.max_len}), got {window}")
    if stride < 1:
        raise UserInputError(f"--stride must be >= 1, got {stride}")
    if batch_size is not None and batch_size < 1:
        raise UserInputError(f"--batch-size must be >= 1, got {batch_size}")
    if kind == "bigwig":
        import pyBigWig  # noqa: F401 - fail before scanning when it is missing
    device = next(model.parameters()).device
    batch_size = batch_size or default_batch_size(device)
    rc = model.rc_average if rc_average is None else rc_average
    delimiter = "," if kind == "csv" and Path(output).suffix.lower() == ".csv" else "\t"
    class_name = model.class_names[class_index]
    distributed.init_distributed()
    ranks, rank = distributed.world_size(), distributed.rank()
    scorer = model
    if compile_model:
        import torch

        scorer = torch.compile(model, mode="reduce-overhead" if device.type == "cuda" else None, dynamic=False)
    summary = ScanSummary()
    parts = Path(output).parent / f".{Path(output).name}.parts"
    with tempfile.TemporaryDirectory(prefix="bioattn-faidx-") as folder:
        error: str | None = None
        targets: list[ScanTarget] = []
        try:
            check_writable(Path(output))  # before reading or scoring anything
            with open_indexed_fasta(path, folder) as fasta:
                lengths = {name: len(fasta[name]) for name in fasta.keys()}
                wanted = read_regions(regions, lengths) if regions is not None else None
                targets = scan_targets(lengths, chroms=chroms, regions=wanted)
                mine = shard_targets(targets, ranks, rank, window, stride) if ranks > 1 else targets
                common = dict(window=window, stride=stride, batch_size=batch_size, rc_average=rc, class_index=class_index,
                              kind=kind, delimiter=delimiter, summary=summary, compiled=compile_model)
                if ranks == 1:
                    _scan_to_output(scorer, fasta, path, targets, output, kind, delimiter, class_name, common)
                    return summary
                distributed.run_on_main(lambda: fresh_folder(parts))
                score_targets(scorer, fasta, path, mine, emit=lambda t, out: save_part(parts, t.index, kind, out),
                              **common)
        except UserInputError as exc:
            if ranks == 1:
                raise
            error = str(exc)
        errors = distributed.gather_bytes(json.dumps(error).encode())  # never empty: "null" when fine
        first = distributed.broadcast_json(next((m for m in map(json.loads, errors) if m), None) if errors else None)
        if first is not None:
            distributed.run_on_main(lambda: shutil.rmtree(parts, ignore_errors=True))
            raise UserInputError(first)
        head = text_header(kind, class_name, delimiter)
        distributed.run_on_main(lambda: merge_parts(parts, targets, _bigwig_header(targets), output, kind, head))
    import torch
    totals = distributed.all_reduce_sum(torch.tensor(summary.as_list(), dtype=torch.float64))
    return ScanSummary(*(int(v) for v in totals.tolist()))


def _scan_to_output(model: Any, fasta: pyfaidx.Fasta, path: Path, targets: Sequence[ScanTarget], output: Path,
                    kind: str, delimiter: str, class_name: str, common: dict[str, Any]) -> None:
    """One process: write each target's output as it finishes (text) or into the bigWig (in fixed chunks)."""
    if kind == "bigwig":
        with BigWigWriter(Path(output), _bigwig_header(targets)) as bw:
            score_targets(model, fasta, path, targets, emit=lambda t, out: bw.add(t.chrom, out.bigwig_arrays()),
                          **common)
        return
    with atomic_write(output, newline="") as handle:
        handle.write(text_header(kind, class_name, delimiter))
        score_targets(model, fasta, path, targets, emit=lambda t, out: handle.write(out.text()), **common)
