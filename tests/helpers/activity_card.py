"""The number an activity model's card states, computed the two ways a user gets it: ``bioattn predict activity``
and the loader. Shared by the shipped-model tests."""
from __future__ import annotations

import csv
from pathlib import Path
from typing import Callable

import numpy as np
from scipy.stats import pearsonr

from bioattn.cli import main
from bioattn.models import load_pretrained

def activity_scores(name: str, check: dict, require_data: Callable[..., Path], tmp_path: Path, *,
                    subset: int) -> float:
    """Pearson of the card's check file from ``bioattn predict activity --model NAME``; the loader's values on the
    first ``subset`` sequences equal the command's rows (to 1e-6 beyond the table's six significant digits)."""
    source = require_data(*check["data"])
    with open(source, newline="") as handle:
        rows = list(csv.DictReader(handle, delimiter="\t"))
    # the model's output ("column") against the file's measured column (the same name unless "measured" says)
    measured = np.array([float(row[check.get("measured", check["column"])]) for row in rows])
    output = tmp_path / "values.tsv"
    assert main(["predict", "activity", "--model", name, "--input", str(source), "--output", str(output)]) == 0
    with open(output, newline="") as handle:
        from_cli = np.array([float(row[check["column"]]) for row in csv.DictReader(handle, delimiter="\t")])
    model = load_pretrained(name)
    from_loader = model.predict([row["seq"] for row in rows[:subset]])[:, model.target_names.index(check["column"])]
    np.testing.assert_allclose(from_loader, from_cli[:subset], atol=1e-6, rtol=5e-6)
    return float(pearsonr(from_cli, measured)[0])
