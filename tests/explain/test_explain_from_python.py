"""Each task's ``explain`` pipeline (``explain_promoter`` / ``explain_ct`` / ``explain_msa``, by task name through
``explain_pipeline``) from Python on tiny models and synthetic inputs: the result holds the maps, ``save`` writes
what the command writes, and bad input is one clear error."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from bioattn.cli import main as cli_main
from bioattn.errors import UserInputError
from bioattn.models.hybrid_ct import HybridCT3D
from bioattn.models.msa_contact import MSAContactModel
from bioattn.models.promoter import PromoterClassifier
from bioattn.tasks.explain_dispatch import explain_pipeline

SEQUENCES = ["ACGTATAAAAGGCGCGTACGATCGA", "TTGACATATAAAGCGC", "GGGCCCATATATCCGGAATTCCG"]
FAST = {"method": "rollout", "faithfulness": False, "device": "cpu"}


@pytest.fixture(scope="module")
def promoter_model() -> PromoterClassifier:
    torch.manual_seed(0)
    return PromoterClassifier(max_len=32, embed_dim=16, num_heads=2, num_layers=2, dropout=0.0).eval()


def _files(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())


@pytest.mark.slow  # over a second: the full suite runs it, the fast lane does not
def test_explain_promoter_from_python_matches_the_command(promoter_model: PromoterClassifier, tmp_path: Path) -> None:
    result = explain_pipeline("promoter")(promoter_model, SEQUENCES, tss_index=4, plot_sequences=2, **FAST)
    lengths = [len(s) for s in SEQUENCES]
    assert result.influence.shape == (3, max(lengths)) and list(result.lengths) == lengths
    assert (result.influence[1, lengths[1]:] == 0).all() and (result.influence[1, : lengths[1]] > 0).all()
    assert result.summary["sequences"] == 3 and result.summary["motif"]["sequences_with_match"] == 1
    assert len(result.tables["influence.tsv"][1]) == sum(lengths)
    saved = result.save(tmp_path / "lib")

    promoter_model.save_pretrained(tmp_path / "run")
    (tmp_path / "in.fa").write_text("".join(f">seq{i}\n{s}\n" for i, s in enumerate(SEQUENCES)))
    assert cli_main(["explain", "promoter", "--model", str(tmp_path / "run"), "--input", str(tmp_path / "in.fa"),
                     "--out", str(tmp_path / "cli"), "--tss-index", "4", "--plot-sequences", "2",
                     "--method", "rollout", "--no-faithfulness"]) == 0
    assert _files(saved) == _files(tmp_path / "cli")
    for name in ("influence.tsv", "predictions.tsv", "influence_profile.tsv"):
        assert (saved / name).read_text() == (tmp_path / "cli" / name).read_text()
    ours, theirs = (json.loads((d / "summary.json").read_text()) for d in (saved, tmp_path / "cli"))
    assert {k: v for k, v in ours.items() if k not in ("run", "input")} == \
        {k: v for k, v in theirs.items() if k not in ("run", "input")}
    with pytest.raises(UserInputError, match="output directory already exists"):
        result.save(saved)


def test_explain_promoter_bad_sequence_is_a_clear_error(promoter_model: PromoterClassifier) -> None:
    with pytest.raises(UserInputError, match="'U'"):
        explain_pipeline("promoter")(promoter_model, ["ACGUACGT"], **FAST)
    with pytest.raises(UserInputError, match="at most 32"):
        explain_pipeline("promoter")(promoter_model, ["A" * 40], **FAST)


@pytest.mark.slow  # over a second: the full suite runs it, the fast lane does not
def test_explain_ct_from_python_on_an_in_memory_volume(tmp_path: Path) -> None:
    import nibabel as nib

    torch.manual_seed(0)
    model = HybridCT3D(1, 2, stem_channels=[4, 8], stem_strides=[2, 2], embed_dim=12, num_heads=2, num_layers=2,
                       dropout=0.0).eval()
    volume = torch.rand(1, 10, 13, 9, generator=torch.Generator().manual_seed(0))  # (C, X, Y, Z), not divisible by 4
    result = explain_pipeline("ct")(model, volume, method="gradient_x_input", faithfulness=False, device="cpu")
    assert result.rollout.shape == (10, 13, 9) and result.attribution.shape == (10, 13, 9)
    assert result.summary["model_input_shape"] == [12, 16, 12] and result.summary["token_grid"] == [3, 4, 3]
    assert sum(result.probabilities) == pytest.approx(1.0)
    out = result.save(tmp_path / "ct")
    assert nib.load(out / "rollout.nii.gz").shape == (10, 13, 9)
    for name in ("attribution.nii.gz", "rollout_slices.png", "attribution_slices.png", "heads_layer1.png", "summary.json"):
        assert (out / name).stat().st_size > 0


@pytest.mark.slow  # over a second: the full suite runs it, the fast lane does not
def test_explain_msa_from_python_with_a_structure(tmp_path: Path) -> None:
    length = 40
    torch.manual_seed(0)
    model = MSAContactModel(max_len=length, embed_dim=16, num_heads=2, num_layers=2, dropout=0.0).eval()
    rng = np.random.default_rng(0)
    letters = np.array(list("ACDEFGHIKLMNPQRSTVWY-"))
    rows = ["".join(rng.choice(letters[:-1] if r == 0 else letters, length)) for r in range(10)]
    (tmp_path / "fam.fasta").write_text("".join(f">s{i}\n{row}\n" for i, row in enumerate(rows)))
    i, j = np.triu_indices(length, k=1)
    (tmp_path / "fam_struct.dat").write_text("".join(f"{a + 1} {b + 1} 0.0 {5.0 if b - a == 20 else 20.0}\n"
                                                     for a, b in zip(i, j)))
    result = explain_pipeline("msa")(model, tmp_path / "fam.fasta", struct_dat=tmp_path / "fam_struct.dat", max_rows=6, **FAST)
    assert result.row_attention.shape == (2, 2, length, length) and result.head_precision.shape == (2, 2, 3)
    torch.testing.assert_close(result.row_attention.sum(-1), torch.ones(2, 2, length))
    assert result.columns.shape == (length,) and result.summary["rows_used"] == 6
    out = result.save(tmp_path / "out")
    assert {"row_attention.safetensors", "head_contacts.tsv", "columns.tsv", "head_contact_precision.png",
            "summary.json"} <= set(_files(out))
