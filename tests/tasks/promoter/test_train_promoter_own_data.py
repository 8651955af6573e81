"""``bioattn train promoter --train FILE`` on synthetic data the tests write: train → predict → explain end to end,
FASTA labels, multi-class, case/header invariance, the duplicate-aware dev split, and clear errors."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from bioattn.cli import main as bioattn_main
from bioattn.data.dna import encode
from bioattn.io import load_tensors
from bioattn.metrics import classification_metrics
from bioattn.models.promoter import PromoterClassifier
from bioattn.tasks.promoter.train import MODEL_NAME
from bioattn.tasks.promoter.data import Split, dev_split
from bioattn.tasks.driver import check_metrics
from tests.helpers.promoter_records import TINY, make_records, read_rows, train, write_csv


def mixed_case(sequence: str, seed: int) -> str:
    flips = np.random.default_rng(seed).random(len(sequence)) < 0.5
    return "".join(c.lower() if f else c for c, f in zip(sequence, flips))


def write_fasta(path: Path, records, *, scramble: bool = False) -> Path:
    """FASTA with ``label=`` in the description; ``scramble``: mixed case and header text that names a class."""
    lines = []
    for i, (record_id, sequence, label) in enumerate(records):
        if scramble:
            lines.append(f">{record_id} class=pos label={label} note=promoter_{i % 2}")
            lines.append(mixed_case(sequence, i))
        else:
            lines.append(f">{record_id} label={label}")
            lines.append(sequence)
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture(scope="module")
def binary_data(promoter_binary_data) -> dict[str, object]:
    """600 + 120 two-class records and their CSV files (the session's, conftest.py)."""
    return promoter_binary_data


@pytest.fixture(scope="module")
def binary_run(promoter_binary_run) -> Path:
    """The session's tiny run on :func:`binary_data` (conftest.py)."""
    return promoter_binary_run


# ------------------------------------------------------------------------------------- end to end
@pytest.mark.slow  # over a second: the full suite runs it, the fast lane does not
def test_own_csv_trains_and_predict_reproduces_the_run(binary_run: Path, binary_data, tmp_path):
    metrics = json.loads((binary_run / "metrics.json").read_text())
    check_metrics(metrics)
    assert metrics["class_names"] == ["neg", "pos"] and metrics["files"]["train"].endswith("train.csv")
    assert metrics["splits"]["train"] + metrics["splits"]["dev"] == 600 and 50 <= metrics["splits"]["dev"] <= 70
    assert metrics["splits"]["test"] == 120 and metrics["headline"]["split"] == "test"
    assert set(metrics["scores"]) == {MODEL_NAME, "GC-content threshold (this run)",
                                      "k-mer (k=1..6) logistic regression (this run)"}
    assert metrics["metrics"]["test_mcc"] > 0.5  # the composition signal was learnt: labels reached the model
    assert "| PromoterClassifier (this run) |" in (binary_run / "summary.md").read_text()
    model = PromoterClassifier.from_pretrained(binary_run)
    longest = max(len(s) for _, s, _ in binary_data["records"])
    assert (model.class_names, model.rc_average, model.max_len, model.threshold) == (["neg", "pos"], True, longest, 0.5)

    out = tmp_path / "pred.csv"
    assert bioattn_main(["predict", "promoter", "--model", str(binary_run), "--input", str(binary_data["test_csv"]),
                         "--output", str(out)]) == 0
    rows = read_rows(out)
    assert list(rows[0]) == ["id", "promoter_probability", "predicted_label", "warning"]
    assert [r["id"] for r in rows] == [r[0] for r in binary_data["test"]]
    probs = np.array([float(r["promoter_probability"]) for r in rows])
    assert {r["predicted_label"] for r in rows} <= {"neg", "pos"}
    assert [r["predicted_label"] for r in rows] == ["pos" if p >= 0.5 else "neg" for p in probs]
    labels = np.array([r[2] == "pos" for r in binary_data["test"]], dtype=int)
    again = classification_metrics(labels, probs)
    assert again["mcc"] == pytest.approx(metrics["metrics"]["test_mcc"], abs=1e-9)
    assert again["auroc"] == pytest.approx(metrics["metrics"]["test_auroc"], abs=1e-4)


@pytest.mark.slow
def test_explain_works_on_an_own_data_model(binary_run: Path, binary_data, tmp_path):
    out = tmp_path / "explain"
    assert bioattn_main(["explain", "promoter", "--model", str(binary_run), "--input", str(binary_data["test_csv"]),
                         "--out", str(out), "--plot-sequences", "1", "--max-rows", "20"]) == 0
    rows = read_rows(out / "predictions.tsv", "\t")
    assert list(rows[0]) == ["id", "length", "probability", "predicted_label"] and len(rows) == 20
    assert {r["predicted_label"] for r in rows} <= {"neg", "pos"}
    influence = read_rows(out / "influence.tsv", "\t")
    assert len(influence) == sum(int(r["length"]) for r in rows)
    summary = json.loads((out / "summary.json").read_text())
    assert sum(summary["predicted"].values()) == 20 and set(summary["predicted"]) == {"neg", "pos"}


@pytest.mark.slow  # over a second: the full suite runs it, the fast lane does not
def test_fasta_labels_letter_case_and_header_text_do_not_change_the_model(binary_run: Path, binary_data, tmp_path):
    folder = binary_data["folder"]
    train_fa = write_fasta(tmp_path / "train.fa", binary_data["records"], scramble=True)
    test_fa = write_fasta(tmp_path / "test.fa.gz.txt", binary_data["test"], scramble=True)
    assert folder != tmp_path
    other = train(tmp_path, "--train", str(train_fa), "--test", str(test_fa))
    weights, reference = load_tensors(other / "model.safetensors"), load_tensors(binary_run / "model.safetensors")
    assert weights.keys() == reference.keys()
    assert all(np.array_equal(weights[k].numpy(), reference[k].numpy()) for k in weights)
    assert json.loads((other / "metrics.json").read_text())["scores"] == json.loads((binary_run / "metrics.json").read_text())["scores"]
    # and at prediction time: a lower-case copy of a sequence gets the same probability
    model = PromoterClassifier.from_pretrained(other)
    upper = [encode(s) for _, s, _ in binary_data["test"][:8]]
    lower = [encode(mixed_case(s, 7)) for _, s, _ in binary_data["test"][:8]]
    assert all(np.array_equal(a, b) for a, b in zip(upper, lower))
    np.testing.assert_array_equal(model.predict_tokens(upper), model.predict_tokens(lower))


@pytest.mark.slow
def test_three_classes_train_predict_and_explain(tmp_path):
    records = make_records(("neg", "pos", "mid"), 450, seed=3, lengths=(20, 40))
    train_fa = write_fasta(tmp_path / "train.fasta", records)
    dev_csv = write_csv(tmp_path / "dev.csv", make_records(("neg", "pos", "mid"), 90, seed=4, lengths=(20, 40)),
                        columns=("sequence", "label"))
    run = train(tmp_path, "--train", str(train_fa), "--dev", str(dev_csv), "--no-rc-augment", "--strand", "forward")
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["class_names"] == ["mid", "neg", "pos"] and metrics["splits"] == {"train": 450, "dev": 90}
    for method in metrics["scores"].values():
        assert {"mcc", "accuracy", "f1", "auroc", "loss"} <= set(method["dev"])
    model = PromoterClassifier.from_pretrained(run)
    assert model.num_classes == 3 and not model.binary and model.rc_average is False
    out = tmp_path / "pred.csv"
    assert bioattn_main(["predict", "promoter", "--model", str(run), "--input", str(dev_csv), "--output", str(out)]) == 0
    rows = read_rows(out)
    assert list(rows[0]) == ["id", "p_mid", "p_neg", "p_pos", "predicted_label", "warning"] and len(rows) == 90
    probs = np.array([[float(r[f"p_{c}"]) for c in ("mid", "neg", "pos")] for r in rows])
    np.testing.assert_allclose(probs.sum(1), 1.0, atol=1e-5)
    assert [r["predicted_label"] for r in rows] == [["mid", "neg", "pos"][k] for k in probs.argmax(1)]
    labels = np.array([["mid", "neg", "pos"].index(r[2]) for r in make_records(("neg", "pos", "mid"), 90, seed=4,
                                                                              lengths=(20, 40))])
    assert classification_metrics(labels, probs)["mcc"] == pytest.approx(metrics["metrics"]["dev_mcc"], abs=1e-9)
    explained = tmp_path / "explain"
    assert bioattn_main(["explain", "promoter", "--model", str(run), "--input", str(dev_csv), "--out", str(explained),
                         "--plot-sequences", "1", "--max-rows", "12"]) == 0
    header = (explained / "predictions.tsv").read_text().splitlines()[0].split("\t")
    assert header == ["id", "length", "p_mid", "p_neg", "p_pos", "predicted_label"]


# ------------------------------------------------------------------------------------------ dev split
def test_dev_split_keeps_identical_sequences_on_one_side_and_is_stratified():
    rng = np.random.default_rng(0)
    base = ["".join(rng.choice(list("ACGT"), size=12)) for _ in range(300)]
    sequences = base + base[:150] + base[:60]  # many exact duplicates (as after upper-casing)
    labels = np.array([i % 2 if i < 200 else 2 for i in range(300)] * 1)[np.r_[0:300, 0:150, 0:60]]
    split = Split(sequences, [encode(s) for s in sequences], labels, [f"f: record {i}" for i in range(len(sequences))])
    train_part, dev_part = dev_split(split, seed=5, source="f", class_names=["a", "b", "c"])
    assert len(train_part) + len(dev_part) == len(split)
    assert not set(train_part.sequences) & set(dev_part.sequences)
    assert 0.07 < len(dev_part) / len(split) < 0.13
    for label in range(3):
        share = np.mean(split.labels == label)
        assert abs(np.mean(dev_part.labels == label) - share) < 0.06
    again = dev_split(split, seed=5, source="f", class_names=["a", "b", "c"])[1]
    assert again.sequences == dev_part.sequences  # seeded: resume gets the same split


# ------------------------------------------------------------------------------------------ bad input
GOOD = "id,sequence,label\n" + "".join(f"g{i},{s},{label}\n" for i, (_, s, label) in
                                     enumerate(make_records(("0", "1"), 30, seed=9, lengths=(12, 17))))

BAD_TRAINING = [
    ("missing label", {"train.csv": GOOD + "r9,ACGTACGT,\n"}, [], "train.csv: record 'r9' (line 32): missing label"),
    ("FASTA record without label", {"train.fa": ">a label=1\nACGT\n>b promoter\nACGA\n>c label=0\nAC\n"}, [],
     "train.fa: record 'b' (#2): no 'label=VALUE' field in the FASTA description"),
    ("longer than --max-length", {"train.csv": GOOD + "long1,ACGTACGTACGTACGTACGTA,1\n"}, ["--max-length", "20"],
     "train.csv: record 'long1' (line 32): sequence is 21 nt long, longer than --max-length 20"),
    ("dev longer than training", {"train.csv": GOOD, "dev.csv": "sequence,label\nACGT,1\n" + "A" * 40 + ",0\n"}, [],
     "dev.csv: record '2' (line 3): sequence is 40 nt long, longer than the longest training sequence (16 nt); "
     "allow longer ones with --max-length"),
    ("unseen dev label", {"train.csv": GOOD, "dev.csv": "sequence,label\nACGT,1\nACGT,2\n"}, [],
     "dev.csv: record '2' (line 3): label '2' does not occur in the training data (classes: 0, 1)"),
    ("one class", {"train.csv": "sequence,label\nACGT,1\nACGA,1\n"}, [], "every record has the label '1'"),
    ("bad letter", {"train.csv": GOOD + "r7,ACGUA,1\n"}, [], "train.csv: record 'r7' (line 32): invalid character 'U'"),
]


@pytest.mark.parametrize("files, flags, fragment", [b[1:] for b in BAD_TRAINING], ids=[b[0] for b in BAD_TRAINING])
def test_bad_training_input_exits_2_with_one_line_and_writes_nothing(tmp_path, capsys, files, flags, fragment):
    paths = {}
    for name, content in files.items():
        paths[name.split(".")[0]] = tmp_path / name
        (tmp_path / name).write_text(content)
    argv = ["train", "promoter", "--out", str(tmp_path / "run"), *TINY, "--train", str(paths["train"]), *flags]
    if "dev" in paths:
        argv += ["--dev", str(paths["dev"])]
    code = bioattn_main(argv)
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("error: ") and fragment in err and err.count("\n") == 1, err
    assert not (tmp_path / "run").exists()


def test_task_and_own_files_do_not_mix(tmp_path, capsys):
    train_csv = tmp_path / "t.csv"
    train_csv.write_text(GOOD)
    with pytest.raises(SystemExit) as exit_info:
        bioattn_main(["train", "promoter", "--out", str(tmp_path / "run"), "--task", "prom_core_all", "--train", str(train_csv)])
    assert exit_info.value.code == 2 and "not allowed with argument" in capsys.readouterr().err
    assert bioattn_main(["train", "promoter", "--out", str(tmp_path / "run"), "--dev", str(train_csv)]) == 2
    assert capsys.readouterr().err == "error: --dev and --test need a --train file\n"
