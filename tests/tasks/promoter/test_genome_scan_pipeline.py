"""The scan's host pipeline end to end: every output format is byte for byte what a per-window reference kept here
writes (windows from :class:`WindowGrid`, one :func:`encode` per window, the same model), with a model whose
scores are exact functions of the tokens; the device feed keeps order and errors; an unwritable output is one
``error:`` line before any scanning (a bigWig used to crash there)."""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import torch

from bioattn.cli import main as bioattn_main
from bioattn.data.dna import N_ID, encode, reverse_complement_ids
from bioattn.tasks.device_feed import feed
from bioattn.tasks.promoter.scan import WindowGrid, scan_genome
from bioattn.tasks.promoter.tracks import cell

RNG = np.random.default_rng(3)
CHROMS = {
    "chr1": "".join(RNG.choice(list("ACGTacgt"), size=3000)),
    "chr,2": "".join(RNG.choice(list("ACGT"), size=200)) + "N" * 300 + "".join(RNG.choice(list("ACGT"), size=401)),
    "chrM": "ACGTTGCAAC",  # shorter than a window
    "chr4": "n" * 120 + "".join(RNG.choice(list("ACGTRYK"), size=700)),
}
WINDOW, STRIDE = 40, 13


class ExactModel(torch.nn.Module):
    """Scores every window with float64 arithmetic that is exact (small integers over a power of two), so a batch
    of any size gives every window the same number as the window alone."""

    binary, max_len, threshold, class_names = True, 50, 0.5, ["background", "promoter"]

    def __init__(self, rc_average: bool) -> None:
        super().__init__()
        self.rc_average = rc_average
        self.anchor = torch.nn.Parameter(torch.zeros(1))

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        weights = torch.arange(1, ids.shape[1] + 1, dtype=torch.float64)
        return (ids.double() * weights).sum(1) % 37 / 8 - 2.25


def reference(model: ExactModel, kind: str, delimiter: str) -> str:
    """What the per-window scan wrote: each window encoded and scored alone, one formatted row per window."""
    rows = []
    for chrom, sequence in CHROMS.items():
        grid, c, d = WindowGrid(len(sequence), WINDOW, STRIDE), cell(chrom, delimiter), delimiter
        region = None
        for index in range(len(grid)):
            start, end = grid.span(index)
            ids = torch.from_numpy(encode(sequence[start:end]))[None]
            if (ids == N_ID).all():
                continue
            forward = model(ids)
            if model.rc_average:
                backward = model(reverse_complement_ids(ids))
                plus, minus = torch.sigmoid(forward).item(), torch.sigmoid(backward).item()
                p = torch.sigmoid((forward + backward) / 2).item()
                strand = "+" if plus > minus else "-" if plus < minus else "."
            else:
                p, strand = torch.sigmoid(forward).item(), "+"
            if kind == "csv":
                rows.append(f"{c}{d}{start}{d}{end}{d}{p:.6g}\n")
            elif kind == "bedgraph":
                tile = grid.tile(index)
                rows.append(f"{c}{d}{tile[0]}{d}{tile[1]}{d}{p:.6g}\n")
            elif p >= model.threshold:
                summit = (start + end) // 2
                if region is not None and start <= region[1]:
                    region[1] = max(region[1], end)
                    if p > region[2]:
                        region[2:] = [p, summit, strand]
                    continue
                if region is not None:
                    rows.append(bed_line(c, region, d))
                region = [start, end, p, summit, strand]
        if region is not None:
            rows.append(bed_line(c, region, d))
    return "".join(rows)


def bed_line(chrom: str, region: list, d: str) -> str:
    start, end, best, summit, strand = region
    return d.join([chrom, str(start), str(end), "promoter", str(int(round(1000 * best))), strand, str(summit),
                   str(summit + 1)]) + "\n"


@pytest.fixture(scope="module")
def genome(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("genome") / "genome.fa"
    path.write_text("".join(f">{name}\n" + "\n".join(seq[i : i + 60] for i in range(0, len(seq), 60)) + "\n"
                            for name, seq in CHROMS.items()))
    return path


@pytest.mark.parametrize("rc_average", [True, False])
@pytest.mark.parametrize("suffix", [".csv", ".tsv", ".bedGraph", ".bed"])
@pytest.mark.parametrize("batch_size", [7, 512])
def test_every_format_is_the_per_window_reference(genome, tmp_path, suffix, rc_average, batch_size):
    model = ExactModel(rc_average)
    out = tmp_path / f"scan{suffix}"
    summary = scan_genome(model, genome, out, window=WINDOW, stride=STRIDE, class_index=1, batch_size=batch_size)
    kind = {".csv": "csv", ".tsv": "csv", ".bedGraph": "bedgraph", ".bed": "bed"}[suffix]
    delimiter = "," if suffix == ".csv" else "\t"
    head = {"csv": delimiter.join(["chrom", "start", "end", "probability"]) + "\n",
            "bedgraph": "track type=bedGraph name=bioattn_p_promoter\n", "bed": ""}[kind]
    expected = head + reference(model, kind, delimiter)
    assert out.read_text() == expected
    assert expected.count("\n") > (10 if kind == "bed" else 200)
    assert summary.sequences == len(CHROMS) and summary.skipped_n_only > 0


def test_bigwig_holds_the_reference_tiles(genome, tmp_path):
    pyBigWig = pytest.importorskip("pyBigWig")
    model = ExactModel(True)
    out = tmp_path / "scan.bw"
    scan_genome(model, genome, out, window=WINDOW, stride=STRIDE, class_index=1, batch_size=64)
    rows = [line.split("\t") for line in reference(model, "bedgraph", "\t").splitlines()]
    bw = pyBigWig.open(str(out))
    assert bw.chroms() == {name: len(seq) for name, seq in CHROMS.items()}
    read = [(c, s, e) for c in CHROMS for s, e, _ in bw.intervals(c) or []]
    assert read == [(c, int(s), int(e)) for c, s, e, _ in rows]
    values = [v for c in CHROMS for _, _, v in bw.intervals(c) or []]
    np.testing.assert_allclose(values, [float(r[3]) for r in rows], rtol=0, atol=1e-6)


def test_feed_yields_every_batch_in_order_with_its_scores():
    batches = [RNG.integers(3, 8, size=(n, 5), dtype=np.uint8) for n in (4, 0, 9, 1, 0, 6)]
    seen = list(feed(iter(batches), lambda ids: ids.sum(1) * 10, torch.device("cpu"), prefetch=2))
    assert [b is a for (b, _), a in zip(seen, batches)] == [True] * len(batches)
    for batch, scores in seen:
        assert (scores is None) if len(batch) == 0 else np.array_equal(scores, batch.astype(np.int64).sum(1) * 10)
    pairs = list(feed([(b, b[:, ::-1]) for b in batches[:1]], lambda a, r: (a[:, 0], r[:, 0]), torch.device("cpu"),
                      tokens=lambda pair: pair))
    assert np.array_equal(pairs[0][1][1], batches[0][:, -1])


class RecordingModel(ExactModel):
    """:class:`ExactModel` that records the rows of every call."""

    def __init__(self) -> None:
        super().__init__(rc_average=False)
        self.calls: list[int] = []

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        self.calls.append(ids.shape[0])
        return super().forward(ids)


@pytest.mark.parametrize("host_tokens", [None, WINDOW * 7 * 3, 1])
def test_the_model_sees_the_same_batches_when_the_host_groups_them(genome, tmp_path, monkeypatch, host_tokens):
    """The host handles several model batches at once (all of a sequence's here; three, so that model batches meet
    host-batch edges; or one, the token cap's floor); the model is still called once per ``batch_size`` windows of
    a sequence (only-N windows dropped from each), as a scan of one batch at a time would call it."""
    from bioattn.tasks.promoter import scan_windows

    if host_tokens is not None:
        monkeypatch.setattr(scan_windows, "HOST_TOKENS", host_tokens)
    model = RecordingModel()
    summary = scan_genome(model, genome, tmp_path / "scan.csv", window=WINDOW, stride=STRIDE, class_index=1,
                          batch_size=7)
    expected = []
    for sequence in CHROMS.values():
        grid = WindowGrid(len(sequence), WINDOW, STRIDE)
        kept = [not set(sequence[slice(*grid.span(i))].upper()) <= {"N"} for i in range(len(grid))]
        expected += [sum(kept[i : i + 7]) for i in range(0, len(grid), 7) if any(kept[i : i + 7])]
    assert len(expected) > 20 and max(expected) == 7 and min(expected) < 7
    assert model.calls == expected and sum(model.calls) == summary.windows


def test_feed_scores_each_chunk_of_a_host_batch_and_joins_them_in_order():
    batches = [RNG.integers(3, 8, size=(n, 5), dtype=np.uint8) for n in (10, 3)]
    calls = []

    def score(ids):
        calls.append(ids.shape[0])
        return torch.stack([ids.sum(1), ids[:, 0]])  # (2, N): joined along the last dimension

    sizes = {10: (4, 0, 6), 3: (3,)}
    seen = list(feed(iter(batches), score, torch.device("cpu"), chunks=lambda b: sizes[len(b)]))
    assert calls == [4, 6, 3]
    for batch, scores in seen:
        assert np.array_equal(scores, np.stack([batch.astype(np.int64).sum(1), batch[:, 0]]))


def test_feed_raises_the_producers_error_in_the_caller_and_stops_when_closed():
    def failing():
        yield np.zeros((2, 3), dtype=np.uint8)
        raise ValueError("bad batch 2")

    stream = feed(failing(), lambda ids: ids.sum(1), torch.device("cpu"))
    with pytest.raises(ValueError, match="bad batch 2"):
        list(stream)
    endless = (np.ones((1, 3), dtype=np.uint8) for _ in iter(int, 1))
    stream = feed(endless, lambda ids: ids.sum(1), torch.device("cpu"))
    next(stream)
    stream.close()
    import threading

    assert not [t for t in threading.enumerate() if t.name == "bioattn-feed" and t.is_alive()]


def _unwritable(tmp_path: Path) -> list[Path]:
    """Output paths no process can write: under a regular file (for everyone, root included) and, where chmod
    stops this user (not root), in a read-only folder."""
    blocker = tmp_path / "file.txt"
    blocker.write_text("not a folder\n")
    paths = [blocker / "scan.bw"]
    readonly = tmp_path / "ro"
    readonly.mkdir()
    readonly.chmod(0o555)
    try:
        (readonly / "probe").touch()
        (readonly / "probe").unlink()
    except OSError:
        paths.append(readonly / "scan.bw")
    return paths


@pytest.mark.parametrize("suffix", [".bw", ".bedGraph", ".bed", ".csv"])
def test_an_unwritable_output_is_one_error_line_before_scanning(tiny_promoter_run, genome, tmp_path, capsys, suffix):
    paths = _unwritable(tmp_path)
    fresh = tmp_path / "fresh.fa"
    fresh.write_bytes(genome.read_bytes())
    assert paths[0].parent.is_file()  # the case every user (root too) meets runs every time
    for path in paths:
        out = path.with_suffix(suffix)
        code = bioattn_main(["predict", "promoter", "--model", str(tiny_promoter_run), "--input", str(fresh),
                             "--output", str(out), "--window", str(WINDOW), "--device", "cpu"])
        err = capsys.readouterr().err.split("\r")[-1]
        assert code == 2 and err.startswith(f"error: {out}: ") and "writ" in err and err.count("\n") == 1, err
        assert not Path(f"{fresh}.fai").exists()  # nothing was read: the FASTA is not even indexed
    (tmp_path / "ro").chmod(0o755)


def test_missing_output_folders_are_created(tiny_promoter_run, genome, tmp_path):
    out = tmp_path / "new" / "deeper" / "scan.bw"
    assert bioattn_main(["predict", "promoter", "--model", str(tiny_promoter_run), "--input", str(genome),
                         "--output", str(out), "--window", str(WINDOW), "--device", "cpu"]) == 0
    assert out.stat().st_size > 100 and os.listdir(out.parent) == ["scan.bw"]
