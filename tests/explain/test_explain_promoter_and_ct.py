"""Explanations of the promoter and CT models: invariances a user relies on, and the ``bioattn explain``
promoter/ct commands end to end on tiny untrained models."""
from __future__ import annotations

import json
from pathlib import Path

import nibabel as nib
import numpy as np
import pytest
import torch

from bioattn.cli import main as cli_main
from bioattn.data.dna import collate_tokens, encode
from bioattn.models.hybrid_ct import HybridCT3D
from bioattn.models.promoter import PromoterClassifier
from bioattn.tasks.ct.rollout import explain_volumes
from bioattn.tasks.promoter.influence import explain_promoters, influence_profile, motif_enrichment

SEQUENCES = ["ACGTATAAAAGGCGCGTACGATCGA", "TTGACATATAAAGCGC", "GGGCCCATATATCCGGAATTCCG"]


@pytest.fixture(scope="module")
def promoter_model() -> PromoterClassifier:
    torch.manual_seed(0)
    return PromoterClassifier(max_len=32, embed_dim=16, num_heads=2, num_layers=2, dropout=0.0).eval()


@pytest.fixture(scope="module")
def ct_model() -> HybridCT3D:
    torch.manual_seed(0)
    return HybridCT3D(1, 2, stem_channels=[4, 8], stem_strides=[2, 2], embed_dim=12, num_heads=2, num_layers=2, dropout=0.0).eval()


def _batch(sequences: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
    return collate_tokens([encode(s) for s in sequences])


def test_promoter_influence_ignores_padding_and_batch_neighbours(promoter_model: PromoterClassifier) -> None:
    ids, mask = _batch(SEQUENCES)
    batched = explain_promoters(promoter_model, ids, mask, rc_average=False)
    assert batched.influence.shape == ids.shape
    for row, sequence in enumerate(SEQUENCES):
        alone = explain_promoters(promoter_model, *_batch([sequence]), rc_average=False)
        torch.testing.assert_close(batched.influence[row, : len(sequence)], alone.influence[0], atol=1e-5, rtol=1e-4)
        assert (batched.influence[row, len(sequence):] == 0).all()
        torch.testing.assert_close(batched.probabilities[row], alone.probabilities[0], atol=1e-5, rtol=1e-4)
    # The influences plus what [CLS] keeps of itself make up the whole rollout row.
    from bioattn.explain import attention_rollout

    rollout = attention_rollout(batched.weights, key_padding_mask=torch.nn.functional.pad(mask, (1, 0)))
    torch.testing.assert_close(batched.influence.sum(-1) + rollout[:, 0, 0], torch.ones(3))


def test_strand_averaged_influence_is_reverse_complement_symmetric(promoter_model: PromoterClassifier) -> None:
    from bioattn.data.dna import reverse_complement

    forward = explain_promoters(promoter_model, *_batch(SEQUENCES), rc_average=True)
    reverse = explain_promoters(promoter_model, *_batch([reverse_complement(s) for s in SEQUENCES]), rc_average=True)
    for row, sequence in enumerate(SEQUENCES):
        n = len(sequence)
        torch.testing.assert_close(forward.influence[row, :n], reverse.influence[row, :n].flip(0), atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(forward.probabilities, reverse.probabilities, atol=1e-5, rtol=1e-4)
    single = explain_promoters(promoter_model, *_batch(SEQUENCES), rc_average=False)
    assert not torch.allclose(forward.influence, single.influence), "strand averaging must change the map"


def test_motif_enrichment_hand_example() -> None:
    influence = np.array([[1.0, 1.0, 4.0, 4.0, 4.0, 4.0, 4.0, 4.0, 4.0, 4.0], [1.0] * 10, [2.0] * 6 + [0.0] * 4])
    # sequence 0: TATAAAAG at 2..9 gets 4; its sequence mean is (2 + 32) / 10 = 3.4; the sequences without the
    # motif put (1 + 2) / 2 = 1.5 on positions 2..5 and 1 on positions 6..9 (only sequence 1 is that long).
    result = motif_enrichment(["CCTATAAAAG", "CCCCCCCCCC", "GGGGGG"], influence, "TATAWAWR")
    assert result.starts == [2]
    assert result.ratios_to_sequence == pytest.approx([4.0 / 3.4])
    assert result.ratios_to_position == pytest.approx([4.0 / ((4 * 1.5 + 4 * 1.0) / 8)])
    summary = result.summary()
    assert summary["sequences_with_match"] == 1 and summary["sequences"] == 3
    assert summary["match_start_counts_0based"] == {2: 1}
    assert summary["enrichment_vs_sequence_mean"]["fraction_above_1"] == 1.0


def test_influence_profile_counts_only_real_positions() -> None:
    influence = np.array([[1.0, 3.0, 5.0], [3.0, 5.0, 0.0]])
    mean, sd, counts = influence_profile(influence, np.array([3, 2]))
    np.testing.assert_allclose(mean, [2.0, 4.0, 5.0])
    np.testing.assert_allclose(sd, [1.0, 1.0, 0.0])
    np.testing.assert_array_equal(counts, [2, 2, 1])


def test_ct_rollout_lands_on_the_input_grid(ct_model: HybridCT3D) -> None:
    volumes = torch.rand(2, 1, 8, 12, 16)
    explanation = explain_volumes(ct_model, volumes)
    assert explanation.grid_map.shape == (2, 2, 3, 4)
    assert explanation.voxel_map.shape == (2, 8, 12, 16)
    torch.testing.assert_close(explanation.probabilities, ct_model(volumes).softmax(-1))
    assert (explanation.grid_map > 0).all() and (explanation.grid_map.sum((1, 2, 3)) < 1).all()
    # Each 4x4x4 block's centre value is close to its token's value (trilinear, align_corners=False).
    block_means = explanation.voxel_map.reshape(2, 2, 4, 3, 4, 4, 4).mean((2, 4, 6))
    torch.testing.assert_close(block_means, explanation.grid_map, atol=0.3 * float(explanation.grid_map.max()), rtol=0)
    later = explain_volumes(ct_model, volumes, start_layer=1)
    assert not torch.allclose(later.grid_map, explanation.grid_map)


def _fasta(path: Path, sequences: list[str]) -> Path:
    path.write_text("".join(f">seq{i}\n{s}\n" for i, s in enumerate(sequences)))
    return path


@pytest.mark.slow
def test_explain_promoter_command(tmp_path: Path, promoter_model: PromoterClassifier) -> None:
    promoter_model.save_pretrained(tmp_path / "run")
    fasta = _fasta(tmp_path / "in.fa", SEQUENCES)
    out = tmp_path / "out"
    argv = ["explain", "promoter", "--model", str(tmp_path / "run"), "--input", str(fasta), "--out", str(out),
            "--tss-index", "4", "--mark", "TATA box=-1..6", "--plot-sequences", "2"]
    assert cli_main(argv) == 0
    rows = (out / "influence.tsv").read_text().splitlines()
    assert rows[0].split("\t") == ["id", "position", "relative_position", "nucleotide", "influence"]
    assert len(rows) == 1 + sum(len(s) for s in SEQUENCES)
    assert rows[1].split("\t")[:4] == ["seq0", "0", "-4", "A"]
    assert len((out / "predictions.tsv").read_text().splitlines()) == 1 + len(SEQUENCES)
    assert sorted(p.name for p in (out / "tracks").iterdir()) == ["0000_seq0.png", "0001_seq1.png"]
    for name in ("influence_profile.png", "heads_layer0.png", "heads_layer1.png", "head_diversity_layer1.png"):
        assert (out / name).stat().st_size > 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["sequences"] == 3 and summary["motif"]["sequences_with_match"] == 1
    assert summary["motif"]["enrichment_vs_same_positions_without_motif"]["mean"] > 0
    assert len(summary["head_similarity"]) == 2
    # A non-empty output folder is refused without --overwrite.
    assert cli_main(argv) == 2


def test_explain_promoter_command_reports_bad_input(tmp_path: Path, promoter_model: PromoterClassifier, capsys) -> None:
    promoter_model.save_pretrained(tmp_path / "run")
    fasta = _fasta(tmp_path / "bad.fa", ["ACGT", "ACGUACGT"])
    code = cli_main(["explain", "promoter", "--model", str(tmp_path / "run"), "--input", str(fasta), "--out", str(tmp_path / "o")])
    assert code == 2
    err = capsys.readouterr().err
    assert "bad.fa" in err and "'U'" in err and "position 4" in err
    too_long = _fasta(tmp_path / "long.fa", ["A" * 40])
    code = cli_main(["explain", "promoter", "--model", str(tmp_path / "run"), "--input", str(too_long), "--out", str(tmp_path / "o")])
    assert code == 2 and "at most 32" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


@pytest.mark.slow
def test_explain_ct_command_keeps_the_nifti_grid_and_affine(tmp_path: Path, ct_model: HybridCT3D) -> None:
    ct_model.save_pretrained(tmp_path / "run")
    affine = np.array([[2.0, 0, 0, -10], [0, 1.5, 0, 5], [0, 0, 3.0, 7], [0, 0, 0, 1]])
    volume = np.random.default_rng(0).normal(40, 50, size=(10, 13, 9)).astype(np.float32)  # not divisible by 4
    nib.save(nib.Nifti1Image(volume, affine), tmp_path / "ct.nii.gz")
    out = tmp_path / "out"
    code = cli_main(["explain", "ct", "--model", str(tmp_path / "run"), "--input", str(tmp_path / "ct.nii.gz"),
                     "--out", str(out), "--intensity-window", "-100", "200"])
    assert code == 0
    rollout = nib.load(out / "rollout.nii.gz")
    assert rollout.shape == volume.shape
    np.testing.assert_allclose(rollout.affine, affine)
    assert np.isfinite(rollout.get_fdata()).all() and rollout.get_fdata().max() > 0
    assert (out / "rollout_slices.png").stat().st_size > 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["model_input_shape"] == [12, 16, 12] and summary["token_grid"] == [3, 4, 3]


@pytest.mark.slow
def test_explain_ct_command_on_medmnist_npz(tmp_path: Path, ct_model: HybridCT3D, capsys) -> None:
    ct_model.save_pretrained(tmp_path / "run")
    images = (np.random.default_rng(1).random((3, 6, 8, 10)) > 0.5).astype(np.uint8) * 255  # padded to 8x8x12
    np.savez(tmp_path / "vols.npz", val_images=images, val_labels=np.array([[0], [1], [0]]))
    out = tmp_path / "out"
    argv = ["explain", "ct", "--model", str(tmp_path / "run"), "--input", str(tmp_path / "vols.npz"), "--out", str(out), "--index", "1"]
    assert cli_main(argv) == 0
    rollout = nib.load(out / "rollout.nii.gz").get_fdata()
    assert rollout.shape == (6, 8, 10) and rollout.min() > 0
    np.testing.assert_array_equal(nib.load(out / "input.nii.gz").get_fdata(), images[1] / 255.0)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["label"] == "class_1" and summary["model_input_shape"] == [8, 8, 12]
    assert cli_main([*argv[:-1], "7", "--overwrite"]) == 2
    assert "--index 7 outside 0..2" in capsys.readouterr().err
