"""The quick main job says how many sequences it trains on: the shipped sample's 2,000 train sequences and the
1,500 that ``--quick`` keeps of them, in the sample message and on the split line printed before training."""
from __future__ import annotations

from pathlib import Path

import pytest

from bioattn.cli import main
from bioattn.tasks.promoter import protocols
from bioattn.tasks.promoter.task import TASK
from bioattn.tasks.promoter.train import QUICK_ROWS, PromoterOptions, load_data, quick_options


class _Stop(Exception):
    """Raised where training would start."""


def _quick(tmp_path: Path) -> PromoterOptions:
    (tmp_path / "empty").mkdir()  # a data root without GUE: --quick falls back to the shipped sample
    return quick_options(PromoterOptions(task="prom_core_all", out=tmp_path / "run", data_root=str(tmp_path / "empty"),
                                         quick=True))


def test_the_sample_message_and_the_split_line_agree_on_the_sizes(tmp_path: Path, capsys, monkeypatch) -> None:
    options = _quick(tmp_path)
    data = load_data(options, seed=0)
    assert (len(data.splits["train"]), len(data.splits["dev"])) == (QUICK_ROWS, 500) == (1500, 500)
    sample = capsys.readouterr().err
    assert "(2,000 train + 500 dev sequences)" in sample
    assert "--quick trains on a seeded random 1,500 of its 2,000 train sequences" in sample

    def stop(*args, **kwargs):
        raise _Stop

    monkeypatch.setattr(type(TASK), "members", stop)  # the split line is printed before the members are planned
    with pytest.raises(_Stop):
        main(["train", "promoter", "--task", "prom_core_all", "--quick", "--data-root", str(tmp_path / "empty"),
              "--out", str(tmp_path / "run")])
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert line.startswith("prom_core_all: train 1,500, dev 500 sequences (at most 1,500 per split, a seeded random "
                           "subset: --quick), 2 classes")


def test_a_run_that_reads_every_row_says_nothing_about_a_cap(tmp_path: Path) -> None:
    options = PromoterOptions(task="prom_core_all", out=tmp_path / "run")
    assert protocols.row_cap(options) == ""
    assert protocols.row_cap(PromoterOptions(task="prom_core_all", out=tmp_path / "run", max_rows=300)) == (
        " (at most 300 per split, a seeded random subset: --max-rows)")
