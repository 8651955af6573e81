"""The shipped lentiMPRA WTC11 activity model: it loads by name, predicts with or without the MPRA adapters, and
reproduces the number of its card on the real data (``bioattn predict activity`` and the loader alike)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

import numpy as np
import pytest

from bioattn.models import model_card
from bioattn.models.activity import ActivityRegressor
from bioattn.models.registry import CARD_NAME, PRETRAINED_ROOT
from tests.helpers.activity_card import activity_scores

NAME = "lentimpra-wtc11"
TOLERANCE = 1e-4


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
