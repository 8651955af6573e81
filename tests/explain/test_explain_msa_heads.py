"""Which heads carry contacts: per-head precision numbers and the ``bioattn explain msa`` command."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from bioattn.cli import main as cli_main
from bioattn.models.msa_contact import MSAContactModel
from bioattn.tasks.msa.head_contacts import PRECISION_NAMES, head_contact_precision, row_attention_maps

LENGTH = 60


def _matching_distances() -> np.ndarray:
    """Residue i touches only i + 30 (i < 30): every residue has exactly one long-range contact."""
    distances = np.full((LENGTH, LENGTH), 20.0)
    for i in range(30):
        distances[i, i + 30] = distances[i + 30, i] = 5.0
    np.fill_diagonal(distances, 0.0)
    return distances


def test_a_head_that_attends_to_contacts_scores_perfectly() -> None:
    contacts = torch.from_numpy(_matching_distances() < 8).float().fill_diagonal_(0)
    uniform = torch.full((LENGTH, LENGTH), 1.0 / LENGTH)
    maps = torch.stack([contacts / contacts.sum(-1, keepdim=True), uniform])[None]  # (1 layer, 2 heads, L, L)
    precision = head_contact_precision(maps, _matching_distances())
    assert precision.shape == (1, 2, len(PRECISION_NAMES))
    # 30 true long-range pairs: the top L/5 = 12 and L/2 = 30 are all contacts, the top L = 60 half of them.
    np.testing.assert_allclose(precision[0, 0], [1.0, 1.0, 0.5])
    assert precision[0, 1, 0] < 0.5


def test_unknown_coordinates_are_not_ranked() -> None:
    distances = _matching_distances()
    distances[:10, :] = distances[:, :10] = np.nan  # residues 0..9 have no coordinates
    contacts = torch.from_numpy(np.nan_to_num(_matching_distances()) < 8).float().fill_diagonal_(0)
    precision = head_contact_precision(contacts[None, None], distances)
    # 50 residues with coordinates, 20 known contacts: the top 10 are all contacts, the top 25 hold all 20.
    # (Were the unknown pairs ranked, the 10 pairs of residues 0..9 would come first and count as misses.)
    np.testing.assert_allclose(precision[0, 0, :2], [1.0, 0.8])


@pytest.fixture(scope="module")
def msa_model() -> MSAContactModel:
    torch.manual_seed(0)
    return MSAContactModel(max_len=LENGTH, embed_dim=16, num_heads=2, num_layers=2, dropout=0.0).eval()


def _write_family(folder: Path, columns: int = LENGTH) -> tuple[Path, Path]:
    rng = np.random.default_rng(0)
    letters = np.array(list("ACDEFGHIKLMNPQRSTVWY-"))
    rows = ["".join(rng.choice(letters[:-1] if r == 0 else letters, columns)) for r in range(12)]  # gap-free query
    msa = folder / "fam.fasta"
    msa.write_text("".join(f">s{i}\n{row}\n" for i, row in enumerate(rows)))
    dat = folder / "fam_struct.dat"
    distances = _matching_distances()
    i, j = np.triu_indices(LENGTH, k=1)
    dat.write_text("".join(f"{a + 1} {b + 1} 0.0 {distances[a, b]:.1f}\n" for a, b in zip(i, j)))
    return msa, dat


def test_row_attention_maps_are_row_stochastic(msa_model: MSAContactModel, tmp_path: Path) -> None:
    from bioattn.data.msa import MSATokenizer, read_msa

    msa, _ = _write_family(tmp_path)
    maps = row_attention_maps(msa_model, MSATokenizer().encode(read_msa(msa)))
    assert maps.shape == (2, 2, LENGTH, LENGTH)
    torch.testing.assert_close(maps.sum(-1), torch.ones(2, 2, LENGTH))


@pytest.mark.slow
def test_explain_msa_command(msa_model: MSAContactModel, tmp_path: Path, capsys) -> None:
    msa_model.save_pretrained(tmp_path / "run")
    msa, dat = _write_family(tmp_path)
    out = tmp_path / "out"
    assert cli_main(["explain", "msa", "--model", str(tmp_path / "run"), "--input", str(msa), "--struct-dat", str(dat),
                     "--out", str(out), "--max-rows", "8"]) == 0
    table = [line.split("\t") for line in (out / "head_contacts.tsv").read_text().splitlines()]
    assert table[0] == ["layer", "head", *PRECISION_NAMES] and len(table) == 1 + 2 * 2
    summary = json.loads((out / "summary.json").read_text())
    assert summary["rows_used"] == 8 and summary["columns"] == LENGTH
    assert summary["long_range_contact_rate"] == pytest.approx(30 / len(np.triu_indices(LENGTH, k=24)[0]))
    best = summary["best_head"]
    assert best["P@L/5"] == pytest.approx(max(float(row[2]) for row in table[1:]), abs=1e-6)
    for name in ("heads_layer0.png", "heads_layer1.png", "head_diversity_layer0.png", "head_contact_precision.png"):
        assert (out / name).stat().st_size > 0
    assert "best head" in capsys.readouterr().out


@pytest.mark.slow
def test_explain_msa_without_structure_and_too_long(msa_model: MSAContactModel, tmp_path: Path, capsys) -> None:
    msa_model.save_pretrained(tmp_path / "run")
    msa, _ = _write_family(tmp_path)
    out = tmp_path / "out"
    assert cli_main(["explain", "msa", "--model", str(tmp_path / "run"), "--input", str(msa), "--out", str(out)]) == 0
    assert (out / "heads_layer1.png").exists() and not (out / "head_contacts.tsv").exists()
    long_dir = tmp_path / "long"
    long_dir.mkdir()
    long_msa, _ = _write_family(long_dir, columns=LENGTH + 5)
    code = cli_main(["explain", "msa", "--model", str(tmp_path / "run"), "--input", str(long_msa), "--out", str(tmp_path / "o2")])
    assert code == 2 and "65 columns" in capsys.readouterr().err
