"""The training-volume profile's statistics (bioattn.tasks.ct.preprocessing.volume_statistics) are torch's own:
percentiles of torch.quantile and the count of torch.unique, bit for bit, on binary masks, Hounsfield-like values,
ties and a volume too large to sort whole."""
from __future__ import annotations

import math

import pytest
import torch

from bioattn.tasks.ct import preprocessing
from bioattn.tasks.ct.preprocessing import volume_statistics


def reference(image: torch.Tensor) -> dict:
    flat = image.reshape(-1).double()
    sample = flat[:: max(1, math.ceil(len(flat) / preprocessing.QUANTILE_SAMPLE))]
    p01, p99 = torch.quantile(sample, torch.tensor([0.01, 0.99], dtype=torch.float64)).tolist()
    return {"min": float(flat.min()), "max": float(flat.max()), "mean": float(flat.mean()), "sd": float(flat.std()),
            "p01": p01, "p99": p99, "distinct": int(torch.unique(flat).numel()), "shape": list(image.shape[1:])}


def _volumes() -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return {
        "binary mask": (torch.rand(1, 17, 9, 13, generator=g) > 0.7).float(),
        "hounsfield": torch.randn(1, 16, 16, 16, generator=g) * 300 - 200,
        "ties": torch.randint(-3, 4, (2, 5, 7, 3), generator=g).float(),
        "one voxel": torch.full((1, 1, 1, 1), 2.5),
        "constant": torch.zeros(1, 4, 4, 4),
        "larger than the sample": torch.randn(1, 9, 9, 9, generator=g),  # with the sample cut to 64 voxels
    }


@pytest.mark.parametrize("name", list(_volumes()))
def test_statistics_are_torchs_quantile_and_unique(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    if name == "larger than the sample":
        monkeypatch.setattr(preprocessing, "QUANTILE_SAMPLE", 64)
    image = _volumes()[name]
    got, expected = volume_statistics(image), reference(image)
    assert got.keys() == expected.keys()
    for key, value in expected.items():  # NaN only where torch gives NaN (the sd of one voxel)
        assert got[key] == value or (math.isnan(value) and math.isnan(got[key])), (key, got[key], value)
