"""``HybridCT3D.predict_proba`` takes in-memory volumes (numpy arrays, torch tensors; the CT task reads files): the
same probabilities as the NIfTI file holding them, a clear error for other shapes; the CT guide uses the current
flag names."""
from __future__ import annotations

from pathlib import Path

import nibabel as nib
import numpy as np
import pytest
import torch

from bioattn.data.ct import VolumePreprocessing
from bioattn.errors import UserInputError
from bioattn.models.hybrid_ct import HybridCT3D
from bioattn.tasks.ct.volumes import predict_proba_files, read_volumes
from tests.helpers import REPO_ROOT


def _model() -> HybridCT3D:
    torch.manual_seed(0)
    model = HybridCT3D(1, 2, stem_channels=(4, 8), stem_strides=(2, 2), embed_dim=12, num_heads=2, num_layers=1)
    model.input_preprocessing = VolumePreprocessing(orientation="RAS", window=(-160.0, 240.0), resize=(16, 16, 16))
    return model.eval()


def test_an_array_in_hounsfield_units_predicts_like_the_nifti_file_holding_it(tmp_path: Path) -> None:
    model = _model()
    volume = np.random.default_rng(0).normal(40, 60, (20, 18, 10)).astype(np.float32)
    spacing = (0.8, 0.8, 2.5)
    nib.save(nib.Nifti1Image(volume, np.diag([*spacing, 1.0])), tmp_path / "v.nii.gz")
    from_file = predict_proba_files(model, tmp_path / "v.nii.gz")
    assert from_file.shape == (1, 2)
    assert np.allclose(model.predict_proba(volume, spacing=spacing), from_file, atol=1e-6)
    assert np.allclose(model.predict_proba(torch.from_numpy(volume)[None], spacing=spacing), from_file, atol=1e-6)
    both = model.predict_proba([volume, *read_volumes(tmp_path / "v.nii.gz")], spacing=spacing)
    assert both.shape == (2, 2) and np.allclose(both[0], both[1], atol=1e-6)
    batch = model.predict_proba(np.stack([volume, volume])[:, None], spacing=spacing)  # (N, C, X, Y, Z): N volumes
    assert batch.shape == (2, 2) and np.allclose(batch, from_file, atol=1e-6)
    assert model.predict(volume, spacing=spacing).tolist()[0] in model.class_names


def test_other_shapes_and_missing_spacing_are_clear_errors() -> None:
    model = _model()
    with pytest.raises(UserInputError, match=r"an array of shape \(4, 4\)"):
        model.predict_proba(np.zeros((4, 4), dtype=np.float32))
    with pytest.raises(UserInputError, match="expected a numpy array or a torch tensor"):
        model.predict_proba([[1.0, 2.0]])
    model.input_preprocessing = VolumePreprocessing(spacing=(1.0, 1.0, 1.0), resize=(16, 16, 16))
    with pytest.raises(UserInputError, match="needs spacing="):
        model.predict_proba(np.zeros((8, 8, 8), dtype=np.float32))


def test_the_ct_guide_uses_intensity_window_not_the_deprecated_window() -> None:
    guide = (REPO_ROOT / "docs" / "guides" / "ct.md").read_text()
    assert "--intensity-window" in guide
    assert "--window " not in guide.replace("--intensity-window ", "")
