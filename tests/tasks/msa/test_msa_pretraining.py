"""`bioattn pretrain msa` and `bioattn train msa --init-from` on a tiny data root written here.

The data root has two readable unlabeled alignments (one longer than the --quick crop) and, for every family with
a structure, alignments that cannot be parsed: pretraining succeeds only if the excluded files are never read.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
import torch

from bioattn.cli import main
from bioattn.errors import UserInputError
from bioattn.models import load_pretrained
from bioattn.models.msa_contact import MSAContactModel
from bioattn.tasks.msa.pretrain import CroppedBlocks, load_alignment, pretraining_sources, sampling_probabilities

AMINO = "ACDEFHIKLMNPQRSTVWY"
UNPARSEABLE = ">a\nACDE\n>b\nAC\n"  # ragged rows: reading it is an error


def write_alignment(path: Path, rows: int, columns: int, seed: int) -> Path:
    generator = np.random.default_rng(seed)
    tokens = generator.integers(0, len(AMINO), (rows, columns))
    tokens[:, -1] = (tokens[:, 0] + 3) % len(AMINO)  # one coevolving pair
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f">s{k}\n{''.join(AMINO[t] for t in row)}\n" for k, row in enumerate(tokens)))
    return path


def write_unparseable(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(UNPARSEABLE)
    return path


@pytest.fixture(scope="module")
def data_root(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("data")
    unlabeled = root / "msa" / "unlabeled"
    write_alignment(unlabeled / "toy_long.a2m", rows=40, columns=45, seed=0)
    write_alignment(unlabeled / "pfam_seed" / "PF00002_seed.fasta", rows=30, columns=20, seed=1)
    write_unparseable(unlabeled / "pfam_seed" / "PF00001_seed.fasta")  # same accession as an evaluated family
    write_unparseable(root / "msa" / "coev" / "famA" / "famA.aln")
    (root / "msa" / "coev" / "famA" / "famA.pdb").write_text("END\n")
    write_unparseable(root / "msa" / "pfam" / "PF00001" / "PF00001.fasta")
    (root / "msa" / "pfam" / "PF00001" / "PF00001_struct.dat").write_text("1 2 0 5.0\n")
    return root


@pytest.fixture(scope="module")
def pretrained(data_root, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("pretrain") / "run"
    assert main(["pretrain", "msa", "--data-root", str(data_root), "--out", str(out), "--quick"]) == 0
    return out


@pytest.mark.slow
def test_pretraining_skips_every_family_with_a_structure_and_saves_a_loadable_model(pretrained):
    metrics = json.loads((pretrained / "metrics.json").read_text())
    assert metrics["excluded"] == ["PF00001", "famA"]
    assert [row["name"] for row in metrics["trained_on"]] == ["unlabeled/pfam_seed/PF00002_seed", "unlabeled/toy_long"]
    for row in metrics["trained_on"]:
        assert row["held_out_rows"] > 0 and 0 <= row["held_out"]["accuracy"] <= 1
    assert sum(row["sampling_probability"] for row in metrics["trained_on"]) == pytest.approx(1, abs=1e-3)
    model = load_pretrained(pretrained)
    assert isinstance(model, MSAContactModel) and model.config["positional"] == "sinusoidal"
    logits, _ = model(torch.zeros(1, 3, 200, dtype=torch.long))  # longer than any training crop
    assert logits.shape == (1, 3, 200, 22)


def test_excluded_files_would_fail_if_read(data_root, tmp_path, capsys):
    code = main(["pretrain", "msa", "--data-root", str(data_root), "--out", str(tmp_path / "run"), "--quick",
                 "--exclude", "none"])
    assert code == 2
    assert "ragged alignment" in capsys.readouterr().err


def test_naming_the_excluded_families_is_the_same_as_the_default(data_root):
    default, _ = pretraining_sources(data_root)
    named, excluded = pretraining_sources(data_root, ["famA", "PF00001"])
    assert named == default and excluded == ["famA", "PF00001"]


def test_an_unknown_exclude_name_is_a_user_error(data_root, tmp_path, capsys):
    code = main(["pretrain", "msa", "--data-root", str(data_root), "--out", str(tmp_path / "run"), "--quick",
                 "--exclude", "famA,nosuch"])
    assert code == 2
    error = capsys.readouterr().err
    assert "--exclude: unknown family nosuch" in error and "famA" in error and "PF00002" in error
    assert not (tmp_path / "run").exists()


def test_blocks_draw_rows_and_crop_long_alignments(data_root):
    sources, _ = pretraining_sources(data_root)
    alignments = [load_alignment(source, max_seqs=64, seed=0) for source in sources]
    dataset = CroppedBlocks(alignments, sampling_probabilities(alignments), rows=8, max_columns=32, size=40, seed=0)
    lengths = {tuple(dataset[i].shape) for i in range(40)}
    assert lengths == {(8, 20), (8, 32)}
    assert torch.equal(dataset[5], dataset[5])


@pytest.mark.slow  # over a second: the full suite runs it, the fast lane does not
def test_init_from_starts_from_the_pretrained_weights(pretrained, data_root, tmp_path):
    family = write_alignment(tmp_path / "fam.a3m", rows=40, columns=25, seed=3)
    out = tmp_path / "no_finetune"
    assert main(["train", "msa", "--input", str(family), "--out", str(out), "--quick", "--coevolution", "none",
                 "--init-from", str(pretrained), "--no-finetune"]) == 0
    source, read = load_pretrained(pretrained).state_dict(), MSAContactModel.from_pretrained(out).state_dict()
    assert set(source) == set(read)
    for name in source:
        if not name.startswith("contact_head"):
            assert torch.equal(source[name], read[name]), name
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["training"]["stop_reason"] == "not fine-tuned (--no-finetune)"

    finetuned = tmp_path / "finetuned"
    assert main(["train", "msa", "--input", str(family), "--out", str(finetuned), "--quick", "--coevolution", "none",
                 "--init-from", str(pretrained)]) == 0
    model = MSAContactModel.from_pretrained(finetuned)
    assert model.config["embed_dim"] == load_pretrained(pretrained).config["embed_dim"]  # the pretrained size, not --quick's
    assert not torch.equal(model.state_dict()["lm_head.weight"], source["lm_head.weight"])


def test_no_finetune_needs_a_pretrained_model(tmp_path, capsys):
    family = write_alignment(tmp_path / "fam.a3m", rows=20, columns=10, seed=4)
    code = main(["train", "msa", "--input", str(family), "--out", str(tmp_path / "run"), "--quick", "--no-finetune"])
    assert code == 2
    assert "--no-finetune reads a pretrained model's attention: give --init-from" in capsys.readouterr().err


@pytest.mark.parametrize("options, message", [
    (dict(heads=3), "--embed-dim (64) must be divisible by --heads (3)"),
    (dict(dropout=1.0), "--dropout must be in [0, 1), got 1.0"),
    (dict(rows=0), "--rows must be >= 1, got 0"),
    (dict(resume=True, overwrite=True), "choose either --resume or --overwrite"),
])
def test_pretraining_and_per_family_options_refuse_the_same_bad_sizes(options, message):
    from bioattn.tasks.msa.features import MSAOptions
    from bioattn.tasks.msa.pretrain import PretrainOptions

    for option_set in (MSAOptions, PretrainOptions):
        with pytest.raises(UserInputError, match=re.escape(message)):
            option_set(**options)


def test_sinusoidal_pretraining_needs_an_even_width():
    from bioattn.tasks.msa.pretrain import PretrainOptions

    with pytest.raises(UserInputError, match="must be even for sinusoidal positions"):
        PretrainOptions(embed_dim=9, heads=3)
    PretrainOptions(embed_dim=9, heads=3, positional="learned")
