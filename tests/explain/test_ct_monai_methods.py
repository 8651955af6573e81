"""MONAI GradCAM and occlusion sensitivity as CT attribution methods."""
from __future__ import annotations

import pytest
import torch

from bioattn.errors import UserInputError
from bioattn.tasks.ct.attribution import volume_attribution
from bioattn.models.hybrid_ct import HybridCT3D


@pytest.fixture(scope="module")
def ct_model() -> HybridCT3D:
    torch.manual_seed(0)
    return HybridCT3D(1, 2, stem_channels=[4, 8], stem_strides=[2, 2], embed_dim=12, num_heads=2, num_layers=1,
                      dropout=0.0).eval()


def test_gradcam_and_occlusion_give_one_voxel_map_per_volume(ct_model) -> None:
    volumes = torch.rand(2, 1, 8, 8, 8)
    gradcam = volume_attribution(ct_model, volumes, "gradcam")
    occlusion = volume_attribution(ct_model, volumes, "occlusion")
    assert gradcam.shape == occlusion.shape == (2, 8, 8, 8)
    assert torch.isfinite(gradcam).all() and torch.isfinite(occlusion).all()
    assert (gradcam >= 0).all()  # GradCAM keeps the positive part of the weighted activations


def test_occlusion_sets_patches_to_the_volume_background(ct_model) -> None:
    """Patches are replaced by the volume's background value (its minimum), as the faithfulness curves do: a
    constant volume is its own background, so no patch changes the prediction and the map is flat (a blurring or
    mean-of-image occlusion would not be)."""
    flat = volume_attribution(ct_model, torch.full((1, 1, 8, 8, 8), 0.7), "occlusion")
    assert torch.allclose(flat, flat.flatten()[0].expand_as(flat))
    varied = volume_attribution(ct_model, torch.rand(1, 1, 8, 8, 8), "occlusion")
    assert varied.std() > 0


def test_unknown_ct_method_is_refused(ct_model) -> None:
    with pytest.raises(UserInputError, match="ism"):
        volume_attribution(ct_model, torch.rand(1, 1, 8, 8, 8), "ism")


def test_auto_chooses_among_every_method_the_faithfulness_table_ranks() -> None:
    """``--method auto`` and the starred row of the table pick from the same methods (GradCAM and occlusion
    included), so the command cannot name one method the most faithful and star another."""
    from bioattn.tasks.ct.explain import FAITHFULNESS_ORDER
    from bioattn.tasks.ct.methods import CT_METHODS

    assert set(FAITHFULNESS_ORDER) == set(CT_METHODS) - {"random"}
