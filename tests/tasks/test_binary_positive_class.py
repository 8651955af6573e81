"""The positive class of a binary training task (``bioattn train ct|promoter``): ``--positive-class NAME``, else the
label that is not a negative-sounding one (normal, control, 0, ...), whatever the alphabetical order; one rule
(:func:`bioattn.metrics.order_binary_classes`) for both tasks, checked before any volume is read."""
from __future__ import annotations

from pathlib import Path

import pytest

from bioattn.cli import main as cli_main
from bioattn.errors import UserInputError
from bioattn.metrics import order_binary_classes


def test_a_negative_sounding_label_makes_the_other_one_positive() -> None:
    assert order_binary_classes(["lesion", "normal"])[0] == ["normal", "lesion"]
    assert order_binary_classes(["Healthy", "disease"])[0] == ["Healthy", "disease"]
    assert order_binary_classes(["hit", "negative"])[0] == ["negative", "hit"]
    assert order_binary_classes(["0", "1"])[0] == ["0", "1"]
    assert order_binary_classes(["no", "yes"])[0] == ["no", "yes"]
    names, reason = order_binary_classes(["benign", "malignant"])
    assert names == ["benign", "malignant"] and "positive class: malignant" in reason
    # no negative-sounding label (or two): the sorted order stays and the reason says so
    assert order_binary_classes(["a", "b"]) == (["a", "b"], order_binary_classes(["a", "b"])[1])
    assert "second label in sorted order" in order_binary_classes(["a", "b"])[1]
    assert order_binary_classes(["control", "normal"])[0] == ["control", "normal"]
    assert order_binary_classes(["a", "b", "c"]) == (["a", "b", "c"], None)


def test_positive_class_names_the_positive_one_and_bad_names_are_clear_errors() -> None:
    assert order_binary_classes(["lesion", "normal"], "normal")[0] == ["lesion", "normal"]
    assert order_binary_classes(["a", "b"], "a")[0] == ["b", "a"]
    with pytest.raises(UserInputError, match="'tumour' is not one of the labels"):
        order_binary_classes(["lesion", "normal"], "tumour")
    with pytest.raises(UserInputError, match="applies to two classes"):
        order_binary_classes(["a", "b", "c"], "a")


def test_train_ct_checks_positive_class_before_reading_any_volume(tmp_path: Path, capsys) -> None:
    manifest = tmp_path / "labels.csv"
    for name in ("a", "b"):  # files that exist but are not volumes: reading one would fail differently
        (tmp_path / f"{name}.nii.gz").write_bytes(b"not a volume")
    manifest.write_text("image,label\na.nii.gz,lesion\nb.nii.gz,normal\n")
    code = cli_main(["train", "ct", "--manifest", str(manifest), "--out", str(tmp_path / "r"), "--quick",
                     "--positive-class", "tumour"])
    assert code == 2
    err = capsys.readouterr().err
    assert "'tumour' is not one of the labels (lesion, normal)" in err and not (tmp_path / "r").exists()
    code = cli_main(["train", "ct", "--out", str(tmp_path / "r2"), "--quick", "--positive-class", "hyperplasia"])
    assert code == 2 and "--positive-class" in capsys.readouterr().err  # MedMNIST classes are fixed


def test_the_ct_manifest_classes_follow_the_rule(tmp_path: Path) -> None:
    import nibabel as nib
    import numpy as np

    from bioattn.data.ct import VolumePreprocessing
    from bioattn.tasks.ct.data import load_manifest

    rows = ["image,label"]
    for index in range(6):
        nib.save(nib.Nifti1Image(np.random.default_rng(index).random((8, 8, 8)).astype(np.float32), np.eye(4)),
                 tmp_path / f"v{index}.nii.gz")
        rows.append(f"v{index}.nii.gz,{'lesion' if index % 2 else 'normal'}")
    (tmp_path / "labels.csv").write_text("\n".join(rows) + "\n")
    data = load_manifest(tmp_path / "labels.csv", VolumePreprocessing(), seed=0)
    assert data.class_names == ["normal", "lesion"]
    assert all(label == 1 for label, row in zip(data.labels["train"], data.rows["train"]) if row.label == "lesion")
    flipped = load_manifest(tmp_path / "labels.csv", VolumePreprocessing(), seed=0, positive_class="normal")
    assert flipped.class_names == ["lesion", "normal"]


def test_promoter_own_files_follow_the_same_rule(tmp_path: Path) -> None:
    from bioattn.tasks.promoter.data import load_labelled_files
    from bioattn.tasks.promoter.train import PromoterOptions

    fasta = tmp_path / "my.fa"
    fasta.write_text("".join(f">s{i} label={'hit' if i % 2 else 'negative'}\nACGTACGTAC{'GT' * (i % 3)}\n"
                             for i in range(8)))
    assert load_labelled_files({"train": fasta}, None, 0)[1] == ["negative", "hit"]
    assert load_labelled_files({"train": fasta}, None, 0, "negative")[1] == ["hit", "negative"]
    with pytest.raises(UserInputError, match="not one of the labels"):
        load_labelled_files({"train": fasta}, None, 0, "positive")
    with pytest.raises(UserInputError, match="--positive-class applies to your own --train"):
        PromoterOptions(out=tmp_path / "r", task="prom_core_all", positive_class="1")
    assert PromoterOptions(out=tmp_path / "r", train=fasta, positive_class="hit").positive_class == "hit"
