"""``explain ct`` measured over many volumes of a MedMNIST split (``--indices``), GradCAM and occlusion beside the
other methods, their maps on the input grid and named in the figures."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from bioattn.cli import main as cli_main
from bioattn.errors import UserInputError
from bioattn.models.hybrid_ct import HybridCT3D
from bioattn.tasks.ct.explain import explain_ct, parse_indices, peak_inside
from bioattn.tasks.ct.methods import CT_METHODS

SIZE = 16


@pytest.fixture(scope="module")
def ct_model() -> HybridCT3D:
    torch.manual_seed(0)
    return HybridCT3D(1, 2, stem_channels=[4, 8], stem_strides=[2, 2], embed_dim=12, num_heads=2, num_layers=1,
                      dropout=0.0, class_names=["normal", "hyperplasia"]).eval()


@pytest.fixture(scope="module")
def npz(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Binary 16³ masks (0/255, as AdrenalMNIST3D): a blob of varying size and place per volume; 4 train, 5 val."""
    rng = np.random.default_rng(0)
    arrays = {}
    for split, n in (("train", 4), ("val", 5)):
        images = np.zeros((n, SIZE, SIZE, SIZE), dtype=np.uint8)
        for k in range(n):
            low = rng.integers(1, 8, size=3)
            high = low + rng.integers(3, 8, size=3)
            images[k, low[0]:high[0], low[1]:high[1], low[2]:high[2]] = 255
        arrays[f"{split}_images"], arrays[f"{split}_labels"] = images, (np.arange(n) % 2)[:, None].astype(np.uint8)
    path = tmp_path_factory.mktemp("ct") / "masks_trainval.npz"
    np.savez(path, **arrays)
    return path


def test_indices_spec_reads_all_ranges_and_lists() -> None:
    assert parse_indices("all", 4, "x") == [0, 1, 2, 3]
    assert parse_indices("0-2,5", 6, "x") == [0, 1, 2, 5]
    assert parse_indices(" 3 , 1-2,3", 6, "x") == [3, 1, 2]  # order kept, repeats dropped
    assert parse_indices([2, 0], 3, "x") == [2, 0]


@pytest.mark.parametrize("spec, message", [("7", "outside 0..4"), ("3-1", "backwards"), ("a-b", "expected all"),
                                           (",", "names no volume"), ([-1], "outside 0..4")])
def test_bad_indices_name_the_input_and_the_problem(spec, message) -> None:
    with pytest.raises(UserInputError, match=message) as caught:
        parse_indices(spec, 5, "val.npz [val]")
    assert "val.npz [val]" in str(caught.value)


@pytest.mark.slow  # over a second: the full suite runs it, the fast lane does not
def test_faithfulness_over_a_split_covers_every_method_and_volume(ct_model, npz) -> None:
    """The table is measured over the listed volumes (mean ± sd over them), with GradCAM and occlusion beside the
    gradient, attention and random methods; the maps stay those of ``index``."""
    single = explain_ct(ct_model, npz, method="gradcam", index=1, device="cpu")
    over = explain_ct(ct_model, npz, method="gradcam", index=1, faithfulness_indices="0-3", device="cpu")
    table = over.summary["faithfulness"]
    assert set(table) == set(CT_METHODS) and {"gradcam", "occlusion", "integrated_gradients", "random"} <= set(table)
    for name, row in table.items():
        assert row["examples"] == 4 and row["indices"] == [0, 1, 2, 3], name
        assert row["seconds_per_example"] == pytest.approx(row["seconds"] / 4, abs=1e-3)
        assert np.isfinite([row["deletion_auc"], row["insertion_auc"], row["deletion_auc_sd"]]).all()
    assert single.summary["faithfulness"]["gradcam"]["examples"] == 1
    torch.testing.assert_close(over.attribution, single.attribution)
    # four different volumes do not all give one deletion area: the sd is over volumes, not a constant 0
    assert table["integrated_gradients"]["deletion_auc_sd"] > 0


@pytest.mark.slow  # over a second: the full suite runs it, the fast lane does not
def test_split_faithfulness_equals_the_single_volume_measurement_for_one_index(ct_model, npz) -> None:
    """``--indices 2`` measures exactly what explaining volume 2 alone measures (same volume, score and ranking)."""
    alone = explain_ct(ct_model, npz, method="gradient_x_input", index=2, device="cpu",
                       faithfulness_methods="all").summary["faithfulness"]
    listed = explain_ct(ct_model, npz, method="gradient_x_input", index=0, faithfulness_indices=[2],
                        device="cpu").summary["faithfulness"]
    for name in ("gradient_x_input", "gradcam", "occlusion"):
        assert listed[name]["deletion_auc"] == pytest.approx(alone[name]["deletion_auc"])
        assert listed[name]["insertion_auc"] == pytest.approx(alone[name]["insertion_auc"])


@pytest.mark.parametrize("method", ["gradcam", "occlusion"])
@pytest.mark.slow  # over a second: the full suite runs it, the fast lane does not
def test_monai_maps_are_on_the_input_grid_and_the_figure_names_the_method(ct_model, npz, method, monkeypatch,
                                                                          tmp_path) -> None:
    titles = []
    import bioattn.explain.figures as figures

    real = figures.plot_orthogonal_slices
    monkeypatch.setattr(figures, "plot_orthogonal_slices",
                        lambda image, values, path, title="", **kw: (titles.append(title),
                                                                     real(image, values, path, title=title, **kw)))
    result = explain_ct(ct_model, npz, method=method, index=0, faithfulness=False, device="cpu")
    assert tuple(result.attribution.shape) == (SIZE, SIZE, SIZE) == tuple(result.image.shape)
    assert result.attribution.std() > 0
    result.save(tmp_path / "out")
    assert any(t.startswith(method) for t in titles), titles
    assert (tmp_path / "out" / "attribution_slices.png").is_file()


def test_indices_need_npz_input(ct_model) -> None:
    with pytest.raises(UserInputError, match="needs MedMNIST .npz input"):
        explain_ct(ct_model, torch.rand(1, SIZE, SIZE, SIZE), method="gradcam", faithfulness_indices="all",
                   device="cpu")


def test_indices_without_faithfulness_are_refused(ct_model, npz) -> None:
    with pytest.raises(UserInputError, match="--no-faithfulness"):
        explain_ct(ct_model, npz, method="gradcam", faithfulness=False, faithfulness_indices="all", device="cpu")


@pytest.mark.slow  # over a second: the full suite runs it, the fast lane does not
def test_cli_indices_end_to_end_and_a_bad_index_fails_cleanly(ct_model, npz, tmp_path, capsys) -> None:
    run = tmp_path / "run"
    ct_model.save_pretrained(run)
    out = tmp_path / "out"
    assert cli_main(["explain", "ct", "--model", str(run), "--input", str(npz), "--split", "val", "--indices", "all",
                     "--method", "occlusion", "--out", str(out), "--device", "cpu"]) == 0
    printed = capsys.readouterr().out
    assert "faithfulness over 5 examples" in printed and "| gradcam" in printed and "| occlusion" in printed
    assert (out / "attribution.nii.gz").is_file()
    bad = tmp_path / "bad"
    assert cli_main(["explain", "ct", "--model", str(run), "--input", str(npz), "--indices", "0-9",
                     "--method", "gradcam", "--out", str(bad), "--device", "cpu"]) == 2
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert error.startswith("error:") and "masks_trainval.npz [val]" in error and "5 outside 0..4" in error
    assert not (bad / "summary.json").exists()


def test_attribution_slices_pass_through_the_object_not_a_background_peak() -> None:
    """GradCAM on a mask can peak in the empty background; the slices then go through the object's top voxel."""
    image = torch.zeros(8, 8, 8)
    image[4:6, 4:6, 4:6] = 1
    values = torch.rand(8, 8, 8) * 0.5
    values[0, 0, 0] = 1.0  # background peak
    values[5, 4, 5] = 0.9  # the object's most influential voxel
    assert peak_inside(image, values) == (5, 4, 5)
    assert peak_inside(torch.zeros(8, 8, 8), values) == (0, 0, 0)  # constant image: the overall peak
