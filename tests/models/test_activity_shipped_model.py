"""The shipped lentiMPRA WTC11 activity model: it loads by name, predicts with or without the MPRA adapters, and
keeps its settings (its card's number is re-scored by ``tests/models/test_shipped_models.py``)."""
from __future__ import annotations

import numpy as np

from bioattn.models import model_card
from bioattn.models.activity import ActivityRegressor

NAME = "lentimpra-wtc11"


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
