"""The shipped lentiMPRA WTC11 activity model: it loads by name, predicts with or without the MPRA adapters, and
reproduces the number of its card on the real data (``bioattn predict activity`` and the loader alike)."""
from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Callable

import numpy as np
import pytest
from scipy.stats import pearsonr

from bioattn.cli import main
from bioattn.models import load_pretrained, model_card
from bioattn.models.activity import ActivityRegressor
from bioattn.models.registry import CARD_NAME, PRETRAINED_ROOT

NAME = "lentimpra-wtc11"
TOLERANCE = 1e-4


def activity_scores(name: str, check: dict, require_data: Callable[..., Path], tmp_path: Path) -> tuple[float, float]:
    """Pearson of the card's check file from ``bioattn predict activity --model NAME`` and from the loader."""
    source = require_data(*check["data"])
    with open(source, newline="") as handle:
        rows = list(csv.DictReader(handle, delimiter="\t"))
    measured = np.array([float(row[check["column"]]) for row in rows])
    output = tmp_path / "values.tsv"
    assert main(["predict", "activity", "--model", name, "--input", str(source), "--output", str(output)]) == 0
    with open(output, newline="") as handle:
        from_cli = np.array([float(row[check["column"]]) for row in csv.DictReader(handle, delimiter="\t")])
    model = load_pretrained(name)
    from_loader = model.predict([row["seq"] for row in rows])[:, model.target_names.index(check["column"])]
    return float(pearsonr(from_cli, measured)[0]), float(pearsonr(from_loader, measured)[0])


def test_shipped_activity_model_loads_by_name_and_keeps_its_settings() -> None:
    model = ActivityRegressor.from_pretrained(NAME)
    card = model_card(NAME)
    assert card.model_type == "ActivityRegressor" and card.metric == "cv_pearson" and card.sd is not None
    assert model.target_names == ["mean_value"] and model.input_length == 200 and model.strand == "forward"
    assert model.flanks == ["AGGACCGGATCAACT", "CATTGCGTGAACCGA"]
    rng = np.random.default_rng(0)
    elements = ["".join(rng.choice(list("ACGT"), 200)) for _ in range(3)]
    with_adapters = [model.flanks[0] + e + model.flanks[1] for e in elements]
    np.testing.assert_allclose(model.predict(with_adapters), model.predict(elements), rtol=1e-6)
    assert model.embed(elements).shape == (3, model.embedding_dim)


@pytest.mark.slow
def test_shipped_activity_model_reproduces_its_card(require_data: Callable[..., Path], tmp_path: Path) -> None:
    check = json.loads((PRETRAINED_ROOT / NAME / CARD_NAME).read_text())["check"]
    from_cli, from_loader = activity_scores(NAME, check, require_data, tmp_path)
    assert from_cli == pytest.approx(check["value"], abs=TOLERANCE)
    assert from_loader == pytest.approx(check["value"], abs=TOLERANCE)
