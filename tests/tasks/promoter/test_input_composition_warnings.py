"""DNA inputs far from a promoter model's training sequences (GC content, N fraction, dinucleotides) get a
``warning:`` line and a ``warning`` column, as CT inputs do; the profile is saved at train time and shipped."""
from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from bioattn.cli import main as bioattn_main
from bioattn.models.promoter import PromoterClassifier
from bioattn.models.registry import PRETRAINED_ROOT
from bioattn.tasks.promoter.composition import COMPOSITION_NAME, composition_profile, composition_warnings


def _random_dna(rng: np.random.Generator, n: int, length: int, gc: float = 0.5) -> list[str]:
    weights = [(1 - gc) / 2, gc / 2, gc / 2, (1 - gc) / 2]
    return ["".join(rng.choice(list("ACGT"), size=length, p=weights)) for _ in range(n)]


def _rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


def test_profile_flags_gc_n_and_dinucleotide_outliers_but_not_its_own_kind() -> None:
    rng = np.random.default_rng(0)
    training = _random_dna(rng, 400, 60)
    profile = composition_profile(training)
    assert profile["sequences"] == 400 and len(profile["kmer_mean"]) == 16
    fresh = _random_dna(rng, 200, 60)
    assert sum(bool(composition_warnings(profile, s)) for s in fresh) <= 4  # about 1 % beyond the 0.5-99.5 % range
    assert any("GC content" in w for w in composition_warnings(profile, "GCGGCCGCGGCGCCGC" * 4))
    assert any("N or other non-ACGT" in w for w in composition_warnings(profile, "ACGTNNNNNNNNNNNNACGT" * 3))
    # same GC, same letters, other dinucleotides: alternating AC/GT repeats
    repeat = "ACACACACGTGTGTGT" * 4
    assert any("dinucleotide" in w for w in composition_warnings(profile, repeat)), composition_warnings(profile, repeat)
    assert composition_warnings(None, repeat) == []


@pytest.mark.slow
def test_train_saves_the_profile_and_predict_warns_with_a_column(tmp_path: Path, capsys) -> None:
    rng = np.random.default_rng(1)
    sequences = _random_dna(rng, 120, 48)
    train_csv = tmp_path / "train.csv"
    with open(train_csv, "w", newline="") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(["sequence", "label"])
        writer.writerows([s, i % 2] for i, s in enumerate(sequences))
    run = tmp_path / "run"
    assert bioattn_main(["train", "promoter", "--train", str(train_csv), "--out", str(run), "--quick", "--epochs", "1",
                         "--seed", "0"]) == 0
    saved = json.loads((run / COMPOSITION_NAME).read_text())
    assert saved == composition_profile(_training_sequences(train_csv, run))
    fasta = tmp_path / "new.fa"
    fasta.write_text(f">usual\n{_random_dna(rng, 1, 48)[0]}\n>gc_rich\n{'GCGGCCGCGGCGCCGC' * 3}\n>gappy\n"
                     f"{'ACGT' * 4 + 'N' * 24 + 'ACGT' * 2}\n")
    out = tmp_path / "pred.csv"
    capsys.readouterr()
    assert bioattn_main(["predict", "promoter", "--model", str(run), "--input", str(fasta), "--output", str(out)]) == 0
    rows = {row["id"]: row for row in _rows(out)}
    assert list(next(iter(rows.values()))) == ["id", "promoter_probability", "predicted_label", "warning"]
    assert rows["usual"]["warning"] == ""
    assert "GC content" in rows["gc_rich"]["warning"] and "N or other" in rows["gappy"]["warning"]
    err = capsys.readouterr().err
    assert err.count("warning:") == 2 and "'gc_rich'" in err and "'gappy'" in err


def _training_sequences(train_csv: Path, run: Path) -> list[str]:
    """The training part of the run's split (the dev rows held out of ``train.csv`` are not in the profile)."""
    from bioattn.tasks.promoter.train import PromoterOptions, load_data

    return load_data(PromoterOptions(out=run, train=train_csv, quick=True), 0).splits["train"].sequences


def test_a_run_without_a_profile_is_not_checked(tmp_path: Path, capsys) -> None:
    torch.manual_seed(0)
    PromoterClassifier(max_len=60, embed_dim=16, num_heads=2, num_layers=1, conv_kernel=0).save_pretrained(tmp_path / "old")
    fasta = tmp_path / "in.fa"
    fasta.write_text(">gc_rich\n" + "GCGGCCGCGGCGCCGC" * 3 + "\n")
    assert bioattn_main(["predict", "promoter", "--model", str(tmp_path / "old"), "--input", str(fasta), "--output",
                         str(tmp_path / "o.csv")]) == 0
    assert list(_rows(tmp_path / "o.csv")[0]) == ["id", "promoter_probability", "predicted_label"]
    assert "warning:" not in capsys.readouterr().err


@pytest.mark.parametrize("name", ["gue-prom-core-all", "gue-prom-core-all-ensemble", "ecoli-sigma70"])
def test_shipped_promoter_models_carry_their_training_composition(name: str, tmp_path: Path) -> None:
    profile = json.loads((PRETRAINED_ROOT / name / COMPOSITION_NAME).read_text())
    assert profile["sequences"] > 1000 and profile["other_letters"][1] == 0.0  # no N in those training sets
    fasta = tmp_path / "in.fa"
    fasta.write_text(">repeat\n" + "AT" * 35 + "\n>gappy\n" + "ACGT" * 5 + "N" * 50 + "\n")
    assert bioattn_main(["predict", "promoter", "--model", name, "--input", str(fasta), "--output",
                         str(tmp_path / "o.csv")]) == 0
    rows = _rows(tmp_path / "o.csv")
    assert all(row["warning"] for row in rows)
