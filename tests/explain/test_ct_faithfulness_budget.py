"""``explain ct`` on a whole CT volume: the cheap maps first, faithfulness measured on them at as many curve points
as fit a time budget (or not at all, said so), Integrated Gradients and occlusion only on request; the plan and its
cost are in the output."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from bioattn.errors import UserInputError
from bioattn.models.hybrid_ct import HybridCT3D
from bioattn.tasks.ct.explain_plan import (
    FAITHFULNESS_BUDGET_SECONDS, MAX_STEPS, MIN_STEPS, FaithfulnessPlan, plan_faithfulness,
)


def test_the_default_plan_fits_the_budget_and_leaves_the_expensive_methods_out() -> None:
    fast = plan_faithfulness("default", ["gradient_x_input", "rollout"], steps=None, seconds_per_pass=0.01)
    assert fast.methods == ["gradient_x_input", "rollout", "random"] and fast.steps == MAX_STEPS
    assert {"integrated_gradients", "occlusion"} <= set(fast.left_out)
    slow = plan_faithfulness("default", ["gradient_x_input", "rollout"], steps=None, seconds_per_pass=0.5)
    assert MIN_STEPS <= slow.steps < MAX_STEPS and slow.estimated_seconds <= FAITHFULNESS_BUDGET_SECONDS
    # too slow for every map: the first one alone against random
    slower = plan_faithfulness("default", ["gradient_x_input", "rollout"], steps=None, seconds_per_pass=1.5)
    assert slower.methods == ["gradient_x_input", "random"] and slower.estimated_seconds <= FAITHFULNESS_BUDGET_SECONDS
    # too slow for even that: not measured, and the line says why and how to measure it anyway
    none = plan_faithfulness("default", ["gradient_x_input", "rollout"], steps=None, seconds_per_pass=4.0)
    assert not none.measured and "--faithfulness-steps" in none.describe() and "4.0 s" in none.describe()


def test_named_methods_all_and_given_steps_are_measured_whatever_they_cost() -> None:
    every = plan_faithfulness("all", ["gradient_x_input"], steps=None, seconds_per_pass=10.0)
    assert {"integrated_gradients", "occlusion", "gradcam"} <= set(every.methods) and every.steps == MAX_STEPS
    given = plan_faithfulness("default", ["gradient_x_input"], steps=3, seconds_per_pass=10.0)
    assert given.measured and given.steps == 3
    assert plan_faithfulness("occlusion,rollout", [], steps=None, seconds_per_pass=1.0).methods == [
        "occlusion", "rollout", "random"]
    with pytest.raises(UserInputError, match="unknown method"):
        plan_faithfulness("lime", [], steps=None, seconds_per_pass=1.0)
    text = FaithfulnessPlan(**given.to_dict()).describe()
    assert "3 deletion/insertion steps" in text and "forward passes" in text


def _model() -> HybridCT3D:
    torch.manual_seed(0)
    return HybridCT3D(1, 2, stem_channels=(4, 8), stem_strides=(2, 2), embed_dim=12, num_heads=2, num_layers=1).eval()


@pytest.mark.slow
def test_explain_ct_computes_the_cheap_maps_and_measures_only_them_by_default(capsys) -> None:
    from bioattn.tasks.ct.explain import describe, explain_ct

    volume = np.random.default_rng(0).random((1, 16, 16, 16)).astype(np.float32)
    result = explain_ct(_model(), volume)
    summary = result.summary
    assert summary["maps_computed"] == ["rollout", "gradient_x_input"]
    assert summary["method"] in ("rollout", "gradient_x_input")
    assert set(summary["faithfulness"]) == {"gradient_x_input", "rollout", "random"}
    plan = summary["faithfulness_plan"]
    assert plan["methods"] == ["gradient_x_input", "rollout", "random"] and plan["seconds_per_pass"] > 0
    assert {"integrated_gradients", "occlusion"} <= set(plan["left_out"])
    assert "faithfulness: gradient_x_input, rollout, random at" in describe(result)
    assert "explain: faithfulness:" in capsys.readouterr().err
    every = explain_ct(_model(), volume, faithfulness_methods="all", faithfulness_steps=2).summary
    assert {"integrated_gradients", "occlusion", "gradcam", "relevance"} <= set(every["faithfulness"])
