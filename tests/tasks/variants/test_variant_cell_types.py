"""The cell-type-matched variant-effect head: with an activity model of several outputs (one per cell type) each
element's cell type (FASTA header ``cell_type=``, the input's ``CELL_TYPE`` / ``cell_type``, ``--cell-types FILE``,
the flag winning) picks its output, whose features become the ``*_matched`` columns (0 for an element without a
match); the saved head keeps the map, so a prediction input without cell types gives the deltas of one with them,
and a cell type in the prediction input overrides it."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from bioattn.cli import main
from tests.helpers.tiny_activity import write_activity_run

OUTPUTS = ("hepg2", "wtc11")
RNG = np.random.default_rng(7)
SEQS = {name: "".join(RNG.choice(list("ACGT"), 50)) for name in ("E1", "E2", "E3")}
HEADERS = {"E1": "type=promoter cell_type=HepG2", "E2": "type=enhancer", "E3": "type=enhancer cell_type=K562"}
POSITIONS = (3, 9, 14, 20, 27, 33, 38, 44, 48)  # 9 variants per element, in 4 blocks of 16 nt
FAMILIES = ("delta", "abs_delta", "ref_activity", "delta_sd", "ism_here", "ism_local", "ism_local_max", "ism_allele")


def _alt(base: str) -> str:
    return "G" if base != "G" else "T"


def _records() -> list[tuple[str, int, str, str, float]]:
    rng = np.random.default_rng(1)
    return [(name, pos, seq[pos - 1], _alt(seq[pos - 1]), float(rng.normal()))
            for name, seq in SEQS.items() for pos in POSITIONS]


def _fasta(path: Path, headers: bool = True) -> Path:
    path.write_text("".join(f">{name}{' ' + HEADERS[name] if headers else ''}\n{seq}\n" for name, seq in SEQS.items()))
    return path


def _vcf(path: Path, cell_types: dict[str, str] | None = None, effects: bool = True) -> Path:
    lines = ["##fileformat=VCFv4.2", '##INFO=<ID=EFFECT,Number=1,Type=Float,Description="effect">',
             '##INFO=<ID=CELL_TYPE,Number=1,Type=String,Description="cell type">',
             *(f"##contig=<ID={name},length={len(seq)}>" for name, seq in SEQS.items()),
             "#CHROM\tPOS\tID\tREF\tALT\tQUAL\tFILTER\tINFO"]
    for chrom, pos, ref, alt, effect in _records():
        info = [f"EFFECT={effect:.4f}"] if effects else []
        if cell_types and chrom in cell_types:
            info.append(f"CELL_TYPE={cell_types[chrom]}")
        lines.append(f"{chrom}\t{pos}\t.\t{ref}\t{alt}\t.\t.\t{';'.join(info) or '.'}")
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    from bioattn.tasks.variants.task import TASK
    from bioattn.tasks.variants.train import VariantTrainOptions

    root = tmp_path_factory.mktemp("cell_types")
    model = write_activity_run(root / "activity", targets=OUTPUTS)
    fasta, vcf = _fasta(root / "elements.fa"), _vcf(root / "release.vcf")
    out = root / "head"
    metrics = TASK.run(VariantTrainOptions(activity_model=str(model), reference=fasta, input=vcf, out=out, folds=2,
                                           ism_radius=1, paths=("delta_only",)))  # one path: fast
    return {"root": root, "model": model, "fasta": fasta, "vcf": vcf, "out": out, "metrics": metrics}


def test_matched_columns_are_the_matched_outputs_features_and_0_elsewhere(trained) -> None:
    features = pd.read_csv(trained["out"] / "features.tsv", sep="\t")
    e1 = features["chrom"] == "E1"  # cell_type=HepG2 in its header: matches hepg2
    assert e1.sum() == len(POSITIONS)
    for family in FAMILIES:
        matched = features[f"{family}_matched"]
        np.testing.assert_array_equal(matched[e1], features[f"{family}_hepg2"][e1])
        assert (matched[~e1] == 0).all()  # E2 (no cell type) and E3 (K562: no such output)
        assert f"{family}_wtc11" in features.columns  # the other output stays a feature
    assert not np.allclose(features["delta_hepg2"][e1], features["delta_wtc11"][e1])


def test_the_fitted_paths_read_the_matched_features(trained) -> None:
    from bioattn.tasks.variants.train import _feature_sets

    config = json.loads((trained["out"] / "config.json").read_text())
    assert config["feature_names"] == ["delta_hepg2", "delta_wtc11", "delta_matched"]  # the saved delta_only
    names = [f"{f}_{o}" for o in OUTPUTS for f in ("delta", "ism_here")] + ["delta_matched", "ism_here_matched"]
    sets = _feature_sets(names, OUTPUTS)
    assert {"delta_matched", "ism_here_matched"} <= set(sets["head"]) & set(sets["activity_only"])
    assert sets["delta_only"] == ["delta_hepg2", "delta_wtc11", "delta_matched"]
    assert _feature_sets(["delta", "abs_delta"])["delta_only"] == ["delta"]  # one output: as before


def test_the_head_the_metrics_and_the_summary_say_which_element_matched(trained) -> None:
    config = json.loads((trained["out"] / "config.json").read_text())
    assert config["cell_types"] == {"E1": "HepG2", "E3": "K562"}
    assert config["matched_outputs"] == {"E1": "hepg2", "E3": None}
    described = trained["metrics"]["cell_types"]
    assert described["matched"] == {"hepg2": ["E1"], "wtc11": []} and described["unmatched"] == ["E2", "E3"]
    assert described["elements"]["E1"] == {"cell_type": "HepG2", "source": "fasta header", "output": "hepg2"}
    on_disk = json.loads((trained["out"] / "metrics.json").read_text())
    assert on_disk["cell_types"]["unmatched"] == ["E2", "E3"]
    summary = (trained["out"] / "summary.md").read_text()
    assert "| E1 | HepG2 | fasta header | hepg2 |" in summary and "No matching output: E2, E3." in summary


def test_predicting_without_cell_types_uses_the_stored_map_and_the_input_overrides_it(trained, tmp_path) -> None:
    from bioattn.models.registry import load_pretrained
    from bioattn.tasks.variants.head import head_features
    from bioattn.tasks.variants.predict import open_reference, score_variants
    from bioattn.tasks.variants.records import read_variants

    plain = _fasta(tmp_path / "plain.fa", headers=False)  # as a held-out file: no cell type anywhere
    bare = score_variants(trained["out"], plain, _vcf(tmp_path / "bare.vcf", effects=False))
    given = score_variants(trained["out"], plain, _vcf(tmp_path / "given.vcf", {"E1": "HepG2"}, effects=False))
    assert list(bare["matched_output"].unique()) == ["hepg2", ""]
    np.testing.assert_array_equal(bare["delta"], given["delta"])
    assert {"activity_delta_hepg2", "activity_delta_wtc11", "delta"} <= set(bare.columns)
    override = _vcf(tmp_path / "override.vcf", {"E1": "WTC-11"}, effects=False)
    changed = score_variants(trained["out"], plain, override)
    assert set(changed.loc[changed["chrom"] == "E1", "matched_output"]) == {"wtc11"}
    head = load_pretrained(trained["out"])
    with open_reference(plain) as fasta:
        variants = read_variants(override, fasta).variants
        available, _, _ = head_features(head, fasta, variants)
    e1 = np.array([v.chrom == "E1" for v in variants])
    np.testing.assert_array_equal(available["ism_here_matched"][e1], available["ism_here_wtc11"][e1])
    assert (available["ism_here_matched"][~e1] == 0).all()
    one = score_variants(trained["out"], plain, override, output_name="wtc11")
    assert {"ref_score", "alt_score", "activity_delta", "delta"} <= set(one.columns)
    np.testing.assert_array_equal(one["activity_delta"], changed["activity_delta_wtc11"])


def test_cell_types_file_wins_over_the_input_and_the_headers(trained, tmp_path) -> None:
    from bioattn.tasks.variants.task import TASK
    from bioattn.tasks.variants.train import VariantTrainOptions

    release = tmp_path / "release.tsv"
    rows = ["chrom\tpos\tref\talt\teffect\tcell_type"]
    rows += [f"{c}\t{p}\t{r}\t{a}\t{e}\t{'WTC-11' if c == 'E2' else ''}" for c, p, r, a, e in _records()]
    release.write_text("\n".join(rows) + "\n")
    table = tmp_path / "cell_types.tsv"
    table.write_text("chrom\tcell_type\nE1\twtc11\n")  # E1's header says HepG2
    out = tmp_path / "head"
    TASK.run(VariantTrainOptions(activity_model=str(trained["model"]), reference=trained["fasta"], input=release,
                                 out=out, folds=2, ism_radius=1, cell_types=table, paths=("delta_only",)))
    features = pd.read_csv(out / "features.tsv", sep="\t")
    for element in ("E1", "E2"):  # E1 from the file, E2 from the input's cell_type column
        rows = features["chrom"] == element
        np.testing.assert_array_equal(features.loc[rows, "delta_matched"], features.loc[rows, "delta_wtc11"])
    assert (features.loc[features["chrom"] == "E3", "delta_matched"] == 0).all()
    elements = json.loads((out / "metrics.json").read_text())["cell_types"]["elements"]
    assert elements["E1"] == {"cell_type": "wtc11", "source": "--cell-types", "output": "wtc11"}
    assert elements["E2"] == {"cell_type": "WTC-11", "source": "input", "output": "wtc11"}


def test_bad_cell_type_inputs_are_one_error_line(trained, tmp_path, capsys) -> None:
    """From the command (the --cell-types flag reaches the run): both checked before anything is scored."""
    table = tmp_path / "cell_types.tsv"
    table.write_text("chrom\tcell_type\nE9\thepg2\n")
    base = ["train", "variants", "--activity-model", str(trained["model"]), "--reference", str(trained["fasta"]),
            "--folds", "2", "--device", "cpu"]
    assert main([*base, "--input", str(trained["vcf"]), "--out", str(tmp_path / "a"), "--cell-types", str(table)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error:") and len(err.splitlines()) == 1 and "cell_types.tsv:2" in err and "'E9'" in err
    mixed = _vcf(tmp_path / "mixed.vcf", {"E2": "hepg2"})
    text = mixed.read_text().replace("CELL_TYPE=hepg2", "CELL_TYPE=wtc11", 1)  # E2's first record disagrees
    mixed.write_text(text)
    assert main([*base, "--input", str(mixed), "--out", str(tmp_path / "b")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error:") and len(err.splitlines()) == 1 and "an element has one cell type" in err
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_prediction_computes_the_ism_features_at_the_training_radius(trained) -> None:
    """The fixture trains with ``ism_radius=1``: the head stores it, and the features of a prediction are the
    training features (at the default radius 4 ``ism_local`` would average 9 positions, not 3)."""
    from bioattn.models.registry import load_pretrained
    from bioattn.tasks.variants.head import head_features
    from bioattn.tasks.variants.predict import open_reference
    from bioattn.tasks.variants.records import read_variants

    assert json.loads((trained["out"] / "config.json").read_text())["ism_radius"] == 1
    head = load_pretrained(trained["out"])
    head.feature_names = [*head.feature_names, "ism_local_hepg2"]  # a head that reads an ISM feature computes them
    with open_reference(trained["fasta"]) as fasta:
        variants = read_variants(trained["vcf"], fasta).variants
        available, _, _ = head_features(head, fasta, variants)
    features = pd.read_csv(trained["out"] / "features.tsv", sep="\t")
    assert list(features["pos"]) == [v.pos for v in variants]
    for name in ("ism_here_hepg2", "ism_local_hepg2", "ism_local_max_wtc11", "ism_local_matched"):
        np.testing.assert_allclose(available[name], features[name], rtol=1e-4, atol=1e-6)
