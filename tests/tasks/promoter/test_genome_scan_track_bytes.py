"""Scan outputs written in bulk are the bytes of the per-row code they replace: ``%.6g`` and integer columns
(numpy) against Python's own formatting, each output format's text against the per-window reference kept here
(what a scan wrote before the host pipeline), and the bigWig file against pyBigWig fed Python lists."""
from __future__ import annotations

import numpy as np
import pytest

from bioattn.tasks.promoter.text_columns import g6_columns, int_columns, table_rows
from bioattn.tasks.promoter.tracks import TargetOutput, cell, write_bigwig

RNG = np.random.default_rng(7)


def texts(column: tuple[np.ndarray, np.ndarray]) -> list[str]:
    chars, keep = column
    return [bytes(c[k]).decode() for c, k in zip(chars, keep)]


def tricky_floats() -> np.ndarray:
    special = [0.0, -0.0, 1.0, 0.5, 1e-4, 9.99995e-5, 9.999949999e-5, 0.1, 0.09999995, 0.0999999500001, 123456.5,
               999999.5, 1e15, 9.999995e15, 1e16, np.nan, np.inf, -np.inf, 5e-324, 1e-17, 1e-18, 2.5e-5, 1e6,
               999999.0, 1234565.0, 0.30000000000000004, 0.123456500000001, 0.1234565, 1 - 1e-16, 1e-300]
    halves = (RNG.integers(0, 10**6, 3000) + 0.5) / 10.0 ** RNG.integers(0, 12, 3000)  # ties in decimal
    return np.concatenate([special, RNG.random(20000), 10 ** RNG.uniform(-25, 20, 20000), -RNG.random(200),
                           np.round(RNG.random(3000), 7), halves])


def test_g6_columns_write_what_python_writes():
    values = tricky_floats()
    assert texts(g6_columns(values)) == [f"{v:.6g}" for v in values.tolist()]


def test_int_columns_write_what_python_writes():
    values = np.concatenate([[0, 9, 10, 99, 100, 248_956_422], RNG.integers(0, 10**11, 5000)])
    assert texts(int_columns(values)) == [str(v) for v in values.tolist()]
    with pytest.raises(ValueError):
        int_columns(np.array([3, -1]))


def test_table_rows_are_the_f_string_rows():
    starts = RNG.integers(0, 10**9, 3000)
    ends, probs = starts + RNG.integers(1, 500, 3000), RNG.random(3000) ** 4
    expected = "".join(f"chr\u00e91\t{s}\t{e}\t{p:.6g}\n" for s, e, p in zip(starts.tolist(), ends.tolist(), probs.tolist()))
    assert table_rows("chr\u00e91\t".encode(), b"\t", [starts, ends], probs).decode() == expected
    assert table_rows(b"x,", b",", [starts[:0], ends[:0]], probs[:0]) == b""


class Reference:
    """The per-window output code a scan used before the host pipeline (one Python row at a time)."""

    def __init__(self, chrom: str, kind: str, delimiter: str, threshold: float, class_name: str) -> None:
        self.kind, self.delimiter, self.threshold, self.class_name = kind, delimiter, threshold, class_name
        self.chrom, self.parts, self.region = cell(chrom, delimiter), [], None

    def add(self, starts, ends, probs, strands) -> None:
        d, c = self.delimiter, self.chrom
        if self.kind in ("csv", "bedgraph"):
            self.parts.append("".join(f"{c}{d}{s}{d}{e}{d}{p:.6g}\n" for s, e, p in
                                      zip(starts.tolist(), ends.tolist(), probs.tolist())))
            return
        for k in np.flatnonzero(probs >= self.threshold).tolist():
            start, end, probability, strand = int(starts[k]), int(ends[k]), float(probs[k]), "-.+"[strands[k] + 1]
            summit = (start + end) // 2
            if self.region is not None and start <= self.region[1]:
                self.region[1] = max(self.region[1], end)
                if probability > self.region[2]:
                    self.region[2:] = [probability, summit, strand]
            else:
                self.finish()
                self.region = [start, end, probability, summit, strand]

    def finish(self) -> None:
        if self.region is not None:
            start, end, best, summit, strand = self.region
            d = self.delimiter
            self.parts.append(d.join([self.chrom, str(start), str(end), cell(self.class_name, d),
                                      str(int(round(1000 * best))), strand, str(summit), str(summit + 1)]) + "\n")
            self.region = None

    def text(self) -> str:
        return "".join(self.parts)


def batches(count: int, stride: int, width: int) -> list[tuple[np.ndarray, ...]]:
    """Windows in order with gaps (skipped only-N windows), probabilities with ties and runs above 0.5."""
    starts = np.cumsum(RNG.choice([stride, stride, stride, 5 * width], size=count))
    ends = starts + width
    probs = np.where(RNG.random(count) < 0.1, 0.75, RNG.random(count))  # ties in the best probability
    strands = RNG.integers(-1, 2, count).astype(np.int8)
    cuts = np.sort(RNG.choice(np.arange(1, count), size=7, replace=False))
    return [tuple(a[lo:hi] for a in (starts, ends, probs, strands))
            for lo, hi in zip(np.r_[0, cuts], np.r_[cuts, count])] + [tuple(np.zeros(0, a.dtype) for a in
                                                                            (starts, ends, probs, strands))]


@pytest.mark.parametrize("kind, delimiter", [("csv", ","), ("csv", "\t"), ("bedgraph", "\t"), ("bed", "\t"),
                                             ("bed", ",")])
@pytest.mark.parametrize("stride", [3, 40])
def test_each_text_format_is_the_per_window_reference(kind, delimiter, stride):
    ours, theirs = (cls("chr,1", kind, delimiter, 0.5, "pro,moter") for cls in (TargetOutput, Reference))
    data = batches(5000, stride, 40)
    for starts, ends, probs, strands in data:
        ours.add(starts, ends, probs, strands)
        theirs.add(starts, ends, probs, strands)
    ours.finish()
    theirs.finish()
    assert ours.text() == theirs.text()
    assert ours.text().count("\n") > (20 if kind == "bed" else 4000)
    if kind == "bed":
        assert ours.regions == theirs.text().count("\n")
    assert ours.above == sum(int((probs >= 0.5).sum()) for _, _, probs, _ in data)


def test_bigwig_is_the_file_pybigwig_writes_from_lists(tmp_path):
    pyBigWig = pytest.importorskip("pyBigWig")
    header = [("chr1", 900_000), ("chr2", 300_000)]
    tracks = []
    for chrom, length in header:
        starts = np.arange(0, length - 70, 35, dtype=np.int64)
        keep = RNG.random(len(starts)) > 0.05  # gaps
        tracks.append((chrom, (starts[keep], starts[keep] + 35, RNG.random(int(keep.sum())))))
    ours = tmp_path / "ours.bw"
    write_bigwig(ours, header, iter(tracks))
    reference = tmp_path / "reference.bw"
    bw = pyBigWig.open(str(reference), "w")
    bw.addHeader(header, maxZooms=10)
    for chrom, (starts, ends, values) in tracks:
        for first in range(0, len(starts), 1 << 16):
            cut = slice(first, first + (1 << 16))
            bw.addEntries([chrom] * len(starts[cut]), starts[cut].tolist(), ends=ends[cut].tolist(),
                          values=values[cut].astype(float).tolist())
    bw.close()
    assert ours.read_bytes() == reference.read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ours.bw", "reference.bw"]  # no temporary left
