"""The NIfTI maps ``explain ct`` and ``predict ct --attention-map`` write on a NIfTI input's grid keep that input's
sform and qform codes (and its qform): a scanner-space input (codes 1/1) gives scanner-space maps, not nibabel's
default 2/0, so a viewer overlays the two in the same space."""
from __future__ import annotations

from pathlib import Path

import nibabel as nib
import numpy as np
import pytest

from bioattn.cli import main as cli_main
from bioattn.data.ct import read_ct_volume, write_nifti
from tests.helpers.ct_volumes import write_tiny_ct_run

#: An affine with a shear (so the qform, which cannot hold one, differs from the sform) and a flipped x axis.
SHEARED = np.array([[-1.5, 0.1, 0, 10.0], [0, 0.8, 0, -20.0], [0, 0, 2.0, 5.0], [0, 0, 0, 1]])


def _scan(path: Path, sform_code: int, qform_code: int, edge: int = 16) -> Path:
    image = nib.Nifti1Image(np.random.default_rng(0).random((edge,) * 3).astype(np.float32) * 100, SHEARED)
    image.set_sform(SHEARED, code=sform_code)
    image.set_qform(SHEARED, code=qform_code)
    nib.save(image, path)
    return path


def _assert_same_space(written: Path, source: Path) -> None:
    out, given = nib.load(written).header, nib.load(source).header
    assert (int(out["sform_code"]), int(out["qform_code"])) == (int(given["sform_code"]), int(given["qform_code"]))
    if given["qform_code"]:
        np.testing.assert_allclose(out.get_qform(), given.get_qform(), atol=1e-5)
    np.testing.assert_allclose(nib.load(written).affine, nib.load(source).affine, atol=1e-5)


@pytest.mark.parametrize("codes", [(1, 1), (0, 1), (4, 2)])
def test_a_map_written_like_its_input_keeps_the_inputs_codes_and_qform(tmp_path: Path, codes) -> None:
    source = _scan(tmp_path / "scan.nii.gz", *codes, edge=6)
    volume = read_ct_volume(source)
    write_nifti(tmp_path / "map.nii.gz", volume[0], volume.affine, volume.meta)
    _assert_same_space(tmp_path / "map.nii.gz", source)


def test_without_an_input_header_the_defaults_stay(tmp_path: Path) -> None:
    write_nifti(tmp_path / "map.nii", np.zeros((3, 3, 3)), SHEARED)
    header = nib.load(tmp_path / "map.nii").header
    assert (int(header["sform_code"]), int(header["qform_code"])) == (2, 0)


@pytest.mark.slow  # over two seconds: the full suite runs it, the fast lane does not
def test_explain_ct_and_predict_ct_maps_keep_a_scanner_space_inputs_codes(tmp_path: Path) -> None:
    run, _ = write_tiny_ct_run(tmp_path)
    source = _scan(tmp_path / "scan.nii.gz", 1, 1)
    assert cli_main(["explain", "ct", "--model", str(run), "--input", str(source), "--out", str(tmp_path / "explain"),
                     "--method", "gradient_x_input", "--no-faithfulness"]) == 0
    for name in ("rollout.nii.gz", "attribution.nii.gz"):
        _assert_same_space(tmp_path / "explain" / name, source)
    assert cli_main(["predict", "ct", "--model", str(run), "--input", str(source), "--output",
                     str(tmp_path / "p.csv"), "--attention-map", str(tmp_path / "attention.nii.gz")]) == 0
    _assert_same_space(tmp_path / "attention.nii.gz", source)
