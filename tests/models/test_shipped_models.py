"""Models shipped with bioattn: loadable by name everywhere a run directory is accepted, listed by
``bioattn models``, small enough for the wheel, and each reproducing the headline number of its card on the
real data (so a card can never drift from its weights)."""
from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Callable

import numpy as np
import pytest
from sklearn.metrics import matthews_corrcoef

from bioattn.cli import main
from bioattn.errors import UserInputError
from bioattn.io import write_table
from bioattn.metrics import classification_metrics
from bioattn.models import AutoModel, available_models, load_pretrained, model_card
from bioattn.models.hybrid_ct import HybridCT3D
from bioattn.models.promoter import PromoterClassifier
from bioattn.models.registry import CARD_NAME, CONFIG_NAME, MODEL_TYPES, PRETRAINED_ROOT, WEIGHTS_NAME, resolve_model_dir
from bioattn.tasks.msa.head import SHIPPED_HEADS_DIR

SHIPPED = available_models()
#: Shipped files stay small: the largest is lentimpra-wtc11's weights (5.4 MB: the deep model and its 1,019 motif
#: matrices).
MAX_FILE_BYTES = 6 * 1024 * 1024
TOLERANCE = 1e-4
#: The card's number is scored once, through the command, on the card's full set; the Python loader must give the same
#: rows on the first SUBSET inputs (to ROW_TOLERANCE beyond the six significant digits the tables are written with),
#: which tests it without scoring the whole set again.
SUBSET = 128
ROW_TOLERANCE = 1e-6
ROW_RTOL = 5e-6
#: Per command that loads a model: the arguments it needs besides --model.
MODEL_COMMANDS = {
    ("predict", "promoter"): ["--input", "x.fa", "--output", "out.csv"],
    ("explain", "promoter"): ["--input", "x.fa", "--out", "out"],
    ("predict", "ct"): ["--input", "x.npz", "--output", "out.csv"],
    ("explain", "ct"): ["--input", "x.npz", "--out", "out"],
    ("explain", "msa"): ["--input", "x.a3m", "--out", "out"],
}


def _read_csv(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


# ----------------------------------------------------------------------------------------- no data needed
def test_every_folder_is_a_complete_small_model_with_its_number_in_its_card() -> None:
    folders = sorted(p.name for p in PRETRAINED_ROOT.iterdir() if p.is_dir() and p != SHIPPED_HEADS_DIR)
    assert folders == SHIPPED and len(SHIPPED) >= 3
    for name in SHIPPED:
        folder = PRETRAINED_ROOT / name
        files = {p.name: p for p in folder.iterdir()}
        assert {CONFIG_NAME, CARD_NAME, "MODEL_CARD.md"} <= set(files), name
        members = json.loads(files[CONFIG_NAME].read_text()).get("members")
        for weights_dir in [folder / m for m in members] if members else [folder]:  # an ensemble: in its members
            assert {CONFIG_NAME, WEIGHTS_NAME} <= {p.name for p in weights_dir.iterdir()}, weights_dir
        for path in folder.rglob("*"):
            assert path.is_dir() or path.stat().st_size < MAX_FILE_BYTES, path
        card = model_card(name)
        assert card.model_type in MODEL_TYPES
        # the human-readable card shows the machine-readable headline number and the same-run baselines
        text = files["MODEL_CARD.md"].read_text()
        check = card.data["check"]
        for metric, value in ((card.metric, card.value), (check["metric"], check["value"])):
            assert f"{value:.4f}" in text, f"{name}: MODEL_CARD.md does not show {metric} = {value:.4f}"
        if check["metric"] == card.metric:
            assert check["value"] == card.value
        for baseline in card.data["baselines"].values():
            value = baseline[card.metric]
            assert f"{value['mean'] if isinstance(value, dict) else value:.4f}" in text, name
        assert card.data["training"]["command"].split(" --out")[0] in text, name


def test_bioattn_models_lists_every_shipped_model(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["models"]) == 0
    lines = capsys.readouterr().out.splitlines()
    for name in SHIPPED:
        card = model_card(name)
        (line,) = [line for line in lines if line.startswith(f"| {name} |")]
        assert card.model_type in line and card.headline() in line and " MB" in line
        assert (f"| ensemble of {card.members} {card.model_type} |" in line) == (card.members > 1)


#: Shipped models whose loading reads a dataset under the data root (cagi5-release: the measured release its
#: nearby-effect features come from).
LOADING_NEEDS_DATA = {"cagi5-release": ("variants", "cagi5")}


@pytest.mark.parametrize("name", SHIPPED)
def test_generic_loader_dispatches_on_the_saved_model_type(name: str, require_data: Callable[..., Path]) -> None:
    if name in LOADING_NEEDS_DATA:
        require_data(*LOADING_NEEDS_DATA[name])
    model, card = load_pretrained(name), model_card(name)
    ensemble = card.members > 1
    assert type(model).__name__ == ("Ensemble" if ensemble else card.model_type)
    if ensemble:
        assert len(model.members) == card.members and {type(m).__name__ for m in model.members} == {card.model_type}
    assert not model.training
    assert type(AutoModel.from_pretrained(name)) is type(model)
    member_class = type(model.members[0]) if ensemble else type(model)
    assert type(load_pretrained(name, expect=member_class)) is type(model)
    if ensemble:  # a class's own loader returns that class: an ensemble is an error that names load_pretrained
        with pytest.raises(UserInputError, match=r"holds an ensemble of .*bioattn\.models\.load_pretrained"):
            member_class.from_pretrained(name)
    else:
        assert type(member_class.from_pretrained(name)) is type(model)  # the class's own loader takes a name too


def test_a_class_refuses_a_shipped_model_of_another_type() -> None:
    promoters = [name for name in SHIPPED if model_card(name).model_type == "PromoterClassifier"]
    single = next(name for name in promoters if model_card(name).members == 1)
    ensemble = next(name for name in promoters if model_card(name).members > 1)
    with pytest.raises(UserInputError, match="holds a PromoterClassifier, not a HybridCT3D"):
        HybridCT3D.from_pretrained(single)
    with pytest.raises(UserInputError, match="holds an ensemble of PromoterClassifier, not a HybridCT3D"):
        HybridCT3D.from_pretrained(ensemble)


def test_unknown_name_is_an_error_listing_the_shipped_models(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for load in (load_pretrained, PromoterClassifier.from_pretrained):
        with pytest.raises(UserInputError, match="no-such-model: neither a run directory nor a shipped model") as error:
            load("no-such-model")
        assert all(name in str(error.value) for name in SHIPPED)
    fasta = tmp_path / "x.fa"
    fasta.write_text(">a\nACGT\n")
    code = main(["predict", "promoter", "--model", "no-such-model", "--input", str(fasta),
                 "--output", str(tmp_path / "out.csv")])
    assert code == 2
    error_line = capsys.readouterr().err.strip()
    assert error_line.startswith("error: no-such-model:") and all(name in error_line for name in SHIPPED)
    assert not (tmp_path / "out.csv").exists()


@pytest.mark.parametrize("command", MODEL_COMMANDS, ids="-".join)
def test_model_is_required_and_run_is_not_a_flag(
    command: tuple[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rest = MODEL_COMMANDS[command]
    with pytest.raises(SystemExit) as exit_info:  # --run, --model's spelling before 0.5.0, is argparse's usual error
        main([*command, "--run", str(tmp_path), "--model", SHIPPED[0], *rest])
    assert exit_info.value.code == 2
    assert f"unrecognized arguments: --run {tmp_path}" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_info:
        main([*command, *rest])
    assert exit_info.value.code == 2
    assert "one of the arguments --model" in capsys.readouterr().err  # explain msa: "--model --weights"


@pytest.mark.slow
def test_explain_promoter_with_a_model_name_equals_its_folder(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    fasta = tmp_path / "x.fa"
    fasta.write_text("".join(f">s{i}\n{''.join(rng.choice(list('ACGT'), 70))}\n" for i in range(3)))
    outputs = {}
    for kind, value in (("name", "gue-prom-core-all"), ("folder", str(PRETRAINED_ROOT / "gue-prom-core-all"))):
        out = tmp_path / kind
        assert main(["explain", "promoter", "--model", value, "--input", str(fasta), "--out", str(out),
                     "--plot-sequences", "0", "--motif", ""]) == 0
        assert json.loads((out / "summary.json").read_text())["run"] == value
        outputs[kind] = (out / "predictions.tsv").read_text()
    assert outputs["name"] == outputs["folder"] and len(outputs["name"].splitlines()) == 4


@pytest.mark.slow
def test_explain_ct_accepts_a_model_name(tmp_path: Path) -> None:
    volumes = np.zeros((2, 28, 28, 28), dtype=np.uint8)
    volumes[:, 10:18, 11:17, 12:16] = 255  # a gland-like binary blob, as in the training masks
    npz = tmp_path / "masks.npz"
    np.savez(npz, val_images=volumes, val_labels=np.array([[0], [1]]))
    out = tmp_path / "explain"
    assert main(["explain", "ct", "--model", "adrenalmnist3d-28", "--input", str(npz), "--out", str(out)]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["run"] == "adrenalmnist3d-28" and set(summary["probabilities"]) == {"normal", "hyperplasia"}
    assert (out / "rollout.nii.gz").is_file()


# ------------------------------------------------------------------------- the card's number, on real data
def _labelled_csv(check: dict, require_data: Callable[..., Path], tmp_path: Path) -> tuple[Path, list[str]]:
    """A bundled ``sequence,label`` CSV (e.g. GUE dev.csv) and its labels."""
    path = require_data(*check["data"])
    return path, [row["label"] for row in _read_csv(path)]


def _out_of_fold_mcc(name: str, check: dict, require_data: Callable[..., Path], tmp_path: Path) -> float:
    """A cross-validated ensemble: each fold model predicts the fold it never saw (``predict --model MEMBER``); the
    pooled out-of-fold MCC of the run that saved it. Each member's loader gives the command's rows on a subset."""
    from bioattn.tasks.promoter.data import BINARY_CLASSES, load_ecoli, stratified_group_folds

    everything = load_ecoli(require_data(*check["data"]), None, check["seed"])
    folder = resolve_model_dir(name)
    members = json.loads((folder / CONFIG_NAME).read_text())["members"]
    folds = stratified_group_folds(everything, len(members), check["seed"])
    labels, from_cli = [], []
    for member, (_, held_out) in zip(members, folds, strict=True):
        part = everything.subset(held_out)
        labels += [BINARY_CLASSES[k] for k in part.labels]
        source, output = tmp_path / f"{member}.csv", tmp_path / f"{member}_predictions.csv"
        write_table(source, ["id", "sequence"], zip(range(len(part)), part.sequences))
        assert main(["predict", "promoter", "--model", str(folder / member), "--input", str(source),
                     "--output", str(output)]) == 0
        rows = _read_csv(output)
        from_cli += [row["predicted_label"] for row in rows]
        model = PromoterClassifier.from_pretrained(folder / member)
        _assert_loader_gives_the_rows(model.predict_tokens(part.tokens[:SUBSET], batch_size=512), rows, model)
    return matthews_corrcoef(labels, from_cli)


def _assert_loader_gives_the_rows(probabilities: np.ndarray, rows: list[dict[str, str]], model) -> None:
    """The loader's class probabilities equal the first rows of ``bioattn predict promoter`` (its probability columns
    on the same inputs)."""
    names = list(model.class_names)
    if probabilities.ndim == 1:  # two classes: the probability of the positive class
        from_rows = np.array([float(row["promoter_probability"]) for row in rows[:len(probabilities)]])
    else:
        from_rows = np.array([[float(row[f"p_{c}"]) for c in names] for row in rows[:len(probabilities)]])
    ours = probabilities
    assert len(probabilities) == min(SUBSET, len(rows))
    np.testing.assert_allclose(ours, from_rows, atol=ROW_TOLERANCE, rtol=ROW_RTOL)


#: ``check.kind`` of a promoter card -> the input file and its labels (CT cards: ``medmnist_npz``, see _ct_scores).
PROMOTER_INPUTS = {"labelled_csv": _labelled_csv}


def _promoter_score_from_cli(name: str, metric: str, source: Path, labels: list[str], tmp_path: Path) -> float:
    """The card's MCC from ``bioattn predict promoter --model NAME``; the loader gives the same first rows."""
    from bioattn.data.dna import read_records

    assert metric.endswith("_mcc")
    output = tmp_path / "predictions.csv"
    assert main(["predict", "promoter", "--model", name, "--input", str(source), "--output", str(output)]) == 0
    rows = _read_csv(output)
    model = load_pretrained(name)
    tokens = [record.tokens(source) for record in read_records(source)][:SUBSET]
    _assert_loader_gives_the_rows(model.predict_tokens(tokens, batch_size=512), rows, model)
    return matthews_corrcoef(labels, [row["predicted_label"] for row in rows])


def _ct_scores(name: str, check: dict, require_data: Callable[..., Path], tmp_path: Path) -> tuple[float, float]:
    from bioattn.tasks.ct.predict import predict_npz
    from bioattn.tasks.ct.preprocessing import SavedPreprocessing

    key = check["metric"].split("_", 1)[1]
    source = require_data(*check["data"])
    output = tmp_path / "predictions.csv"
    assert main(["predict", "ct", "--model", name, "--input", str(source), "--split", check["split"],
                 "--output", str(output)]) == 0
    model = load_pretrained(name)
    rows = _read_csv(output)
    labels = np.array([int(row["label"]) for row in rows])
    probabilities = np.array([[float(row[f"p_{c}"]) for c in model.config["class_names"]] for row in rows])
    from_cli = classification_metrics(labels, probabilities)[key]
    saved = SavedPreprocessing.load(resolve_model_dir(name))
    predictions = predict_npz(model, source, saved, split=check["split"], flip_tta=saved.flip_tta)
    from_loader = classification_metrics(np.array([p.label for p in predictions]),
                                         np.stack([p.probabilities for p in predictions]))[key]
    return from_cli, from_loader


def _msa_masked_accuracy(name: str, check: dict, require_data: Callable[..., Path]) -> tuple[float, float]:
    """Masked-token accuracy of a pretrained MSA model on a seeded row sample of a family it never saw, loaded by
    name both ways."""
    from bioattn.data.msa import MSATokenizer, read_msa, subsample
    from bioattn.models.msa_contact import MSAContactModel
    from bioattn.tasks.msa.pretrain import masked_token_metrics

    tokens = MSATokenizer().encode(read_msa(require_data(*check["data"])))
    block = tokens[subsample(tokens, check["rows"], "random", seed=check["seed"], keep_first=False)][None]
    return tuple(masked_token_metrics(load(name), block, seed=check["mask_seed"])[1]
                 for load in (load_pretrained, MSAContactModel.from_pretrained))


def _variant_release_pearson(name: str, check: dict, require_data: Callable[..., Path], tmp_path: Path) -> float:
    """Mean over the elements of Pearson(delta, measured effect) on a release of measured variants, from
    ``bioattn predict variants``; ``score_variants`` on the loaded head gives the same deltas on a subset."""
    import pandas as pd

    from bioattn.tasks.variants.predict import score_variants

    folder = require_data(*check["data"])
    reference, variants = folder / check["reference"], folder / check["input"]
    out = tmp_path / "scores.tsv"
    assert main(["predict", "variants", "--model", name, "--reference", str(reference), "--input", str(variants),
                 "--output", str(out), "--device", "cpu"]) == 0
    measured = pd.read_csv(folder / check["labels"], sep="\t")["effect_size"].to_numpy()
    table = pd.read_csv(out, sep="\t", comment="#").assign(effect=measured)
    subset = tmp_path / "subset.tsv"
    table[["chrom", "pos", "ref", "alt"]].head(SUBSET).to_csv(subset, sep="\t", index=False)
    from_loader = score_variants(load_pretrained(name), reference, subset)
    np.testing.assert_allclose(from_loader["delta"].to_numpy(), table["delta"].head(SUBSET).to_numpy(),
                               atol=ROW_TOLERANCE, rtol=ROW_RTOL)
    return float(np.mean([np.corrcoef(g.delta, g.effect)[0, 1] for _, g in table.groupby("chrom")]))


@pytest.mark.parametrize("name", SHIPPED)
@pytest.mark.slow
def test_shipped_model_reproduces_its_card(name: str, require_data: Callable[..., Path], tmp_path: Path) -> None:
    check = json.loads((PRETRAINED_ROOT / name / CARD_NAME).read_text())["check"]
    metric, expected = check["metric"], check["value"]
    if check["kind"] == "medmnist_npz":
        from_cli, from_loader = _ct_scores(name, check, require_data, tmp_path)
    elif check["kind"] == "msa_masked_tokens":
        from_cli, from_loader = _msa_masked_accuracy(name, check, require_data)
    elif check["kind"] == "cv_out_of_fold":
        from_cli = from_loader = _out_of_fold_mcc(name, check, require_data, tmp_path)
    elif check["kind"] == "activity_tsv":
        from tests.helpers.activity_card import activity_scores

        from_cli = from_loader = activity_scores(name, check, require_data, tmp_path, subset=SUBSET)
    elif check["kind"] == "variant_release":
        from_cli = from_loader = _variant_release_pearson(name, check, require_data, tmp_path)
    else:
        source, labels = PROMOTER_INPUTS[check["kind"]](check, require_data, tmp_path)
        from_cli = from_loader = _promoter_score_from_cli(name, metric, source, labels, tmp_path)
    assert from_cli == pytest.approx(expected, abs=TOLERANCE), f"{name}: bioattn predict gives {metric} {from_cli}"
    assert from_loader == pytest.approx(expected, abs=TOLERANCE), f"{name}: load_pretrained gives {metric} {from_loader}"
