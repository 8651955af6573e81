"""``bioattn predict msa --model NAME``: the shipped pretrained MSA model predicts with the head shipped
beside it, reading its attention as the head was fitted (no fine-tuning); another model type is named."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from bioattn.cli import main as cli_main
from bioattn.models.registry import PRETRAINED_ROOT
from bioattn.tasks.msa.head import HEAD_FILE_NAME, ContactHead

AMINO = "ACDEFGHIKLMNPQRSTVWY"


def _alignment(path: Path, rows: int = 24, columns: int = 30) -> Path:
    tokens = np.random.default_rng(0).integers(0, len(AMINO), (rows, columns))
    tokens[:, 20] = (tokens[:, 3] + 7) % len(AMINO)
    path.write_text("".join(f">seq{k}\n{''.join(AMINO[t] for t in row)}\n" for k, row in enumerate(tokens)))
    return path


@pytest.mark.parametrize("name, kind", [("gue-prom-core-all", "PromoterClassifier"),
                                        ("gue-prom-core-all-ensemble", "PromoterClassifier"),
                                        ("adrenalmnist3d-28", "HybridCT3D")])
def test_a_model_of_another_type_is_named(name: str, kind: str, tmp_path: Path, capsys) -> None:
    code = cli_main(["predict", "msa", "--input", str(_alignment(tmp_path / "f.a3m")), "--model", name,
                     "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("error:") == 1
    assert f"this is a {kind}, not an MSAContactModel" in err, err
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_the_shipped_msa_model_predicts_with_its_shipped_head(tmp_path: Path, capsys) -> None:
    shipped = ContactHead.load(PRETRAINED_ROOT / "msa-axial-pfam" / HEAD_FILE_NAME)
    assert shipped.attention_shape() == (4, 4) and not shipped.coevolution_features
    assert shipped.settings["init_from"] == "msa-axial-pfam" and shipped.settings["finetune"] is False
    out = tmp_path / "out"
    assert cli_main(["predict", "msa", "--input", str(_alignment(tmp_path / "f.a3m")), "--model", "msa-axial-pfam",
                     "--out", str(out)]) == 0
    probabilities = np.load(out / "contacts.npy")
    assert probabilities.shape == (30, 30) and np.all((probabilities >= 0) & (probabilities <= 1))
    np.testing.assert_allclose(probabilities, probabilities.T)
    assert ContactHead.load(out / HEAD_FILE_NAME) == shipped
    metrics = json.loads((out / "metrics.json").read_text())
    assert "not fine-tuned" in json.dumps(metrics)  # the pretrained attention read as is, as the head was fitted
