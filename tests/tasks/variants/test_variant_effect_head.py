"""The CAGI5-style variant-effect head: nearby-effect features leave the query's block out, cross-validation on a
synthetic release beats nothing-fitted, the saved head predicts through ``predict variants``, and the real release's
REF bases match elements.fa."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from bioattn.cli import main
from bioattn.models.promoter import PromoterClassifier
from bioattn.tasks.variants.head import nearby_features
from bioattn.tasks.driver import check_metrics

BASES = "ACGT"


def test_nearby_features_leave_the_own_block_out() -> None:
    release = pd.DataFrame({"chrom": ["e"] * 4, "pos": [1, 2, 17, 18], "alt": ["A", "C", "A", "G"],
                            "effect": [5.0, 5.0, -1.0, -3.0]})
    out = nearby_features(np.array(["e", "e", "x"]), np.array([3, 20, 3]), np.array(["A", "A", "A"]), release,
                          bandwidth=1e6, radius=30, block=16)
    assert out[0, 0] == pytest.approx(-2.0)  # block 1-16 left out: only positions 17, 18
    assert out[0, 1] == pytest.approx(-1.0)  # same alt (A) among those: position 17
    assert out[1, 0] == pytest.approx(5.0)  # block 17-32 left out
    assert out[2].tolist() == [0.0, 0.0, 0.0]  # another contig: no evidence
    far = nearby_features(np.array(["e"]), np.array([60]), np.array(["A"]), release, bandwidth=2.0, radius=10, block=16)
    assert far[0].tolist() == [1.5, 1.5, 0.0]  # nothing within the radius: the mean of the other blocks


def _synthetic_release(tmp_path: Path) -> tuple[Path, Path]:
    """Two elements of 160 nt; effects smooth in position (a bump per element) plus noise, every SNV measured."""
    rng = np.random.default_rng(3)
    seqs = {name: "".join(rng.choice(list(BASES), 160)) for name in ("E1", "E2")}
    fasta = tmp_path / "elements.fa"
    fasta.write_text(f">E1 type=promoter gene_strand=-\n{seqs['E1']}\n>E2 type=enhancer\n{seqs['E2']}\n")
    lines = ["##fileformat=VCFv4.2", '##INFO=<ID=EFFECT,Number=1,Type=Float,Description="effect">',
             '##INFO=<ID=CONF,Number=1,Type=Float,Description="confidence">',
             "#CHROM\tPOS\tID\tREF\tALT\tQUAL\tFILTER\tINFO"]
    for name, seq in seqs.items():
        centre = 60 if name == "E1" else 100
        for pos in range(1, 161):
            for alt in BASES:
                if alt != seq[pos - 1]:
                    effect = -2.0 * np.exp(-0.5 * ((pos - centre) / 20) ** 2) + rng.normal(0, 0.3)
                    lines.append(f"{name}\t{pos}\t.\t{seq[pos - 1]}\t{alt}\t.\t.\tEFFECT={effect:.3f};CONF=0.5")
    vcf = tmp_path / "release.vcf"
    vcf.write_text("\n".join(lines) + "\n")
    return fasta, vcf


@pytest.fixture(scope="module")
def tiny_activity(tmp_path_factory) -> Path:
    import torch

    torch.manual_seed(0)
    folder = tmp_path_factory.mktemp("activity")
    PromoterClassifier(max_len=24, embed_dim=16, num_heads=2, num_layers=1, conv_kernel=5).save_pretrained(folder)
    return folder


@pytest.mark.slow  # over a second: the full suite runs it, the fast lane does not
def test_head_cross_validates_and_predicts_through_the_cli(tmp_path, tiny_activity, capsys) -> None:
    from bioattn.tasks.variants.task import TASK
    from bioattn.tasks.variants.train import VariantTrainOptions

    fasta, vcf = _synthetic_release(tmp_path)
    out = tmp_path / "head"
    metrics = TASK.run(VariantTrainOptions(activity_model=str(tiny_activity), reference=fasta, input=vcf, out=out,
                                           folds=3, activity_name="tiny-activity"))
    # the driver's folds are not saved: no fold folders, no ensemble; the run directory is the head
    assert "fold 3 of 3: train" in capsys.readouterr().err
    assert not list(out.glob("fold*"))
    assert json.loads((out / "config.json").read_text())["model_type"] == "VariantEffectHead"
    paths = metrics["paths"]
    assert set(paths) == {"head", "activity_only", "delta_only", "no_model", "activity_delta"}
    # effects are smooth in position: the nearby measured effects predict held-out blocks
    assert paths["no_model"]["mean"]["all"]["pearson"] > 0.5
    assert paths["head"]["mean"]["all"]["pearson"] > 0.5
    assert set(paths["head"]["mean"]) == {"all", "promoter", "enhancer"}
    oof = pd.read_csv(out / "out_of_fold.tsv", sep="\t")
    assert len(oof) == metrics["variants"] and np.isfinite(oof["head"]).all()
    assert metrics["protocol"]["windows"].endswith("gene orientation): E1")
    check_metrics(metrics)
    assert metrics["task"] == "variants" and metrics["headline"]["model"] == metrics["saved_path"]
    # the saved head is a run directory predict variants accepts, standalone (activity weights inside)
    assert (out / "activity" / "config.json").is_file() and (out / "release.tsv").is_file()
    scored = tmp_path / "scored.tsv"
    assert main(["predict", "variants", "--model", str(out), "--reference", str(fasta), "--input", str(vcf),
                 "--output", str(scored)]) == 0
    table = pd.read_csv(scored, sep="\t")
    assert list(table.columns)[-1] == "activity_delta" and len(table) == len(oof)
    from bioattn.models.registry import load_pretrained

    head = load_pretrained(out)
    assert type(head).__name__ == "VariantEffectHead" and head.config["activity_model"] == "tiny-activity"


def test_release_ref_bases_match_elements(require_data) -> None:
    import pyfaidx

    from bioattn.tasks.variants.records import read_variants

    folder = require_data("variants", "cagi5")
    fasta = pyfaidx.Fasta(str(folder / "elements.fa"), as_raw=True)
    found = read_variants(folder / "train_release.vcf", fasta)  # raises on any REF mismatch
    assert len(found) == 4650 and not any(found.skipped.values())
    # the elements are on the + strand of hg19: HBB (a minus-strand gene) carries its TATA box reverse-complemented
    hbb = str(fasta["HBB"][:]).upper()
    assert "TTTTATG" in hbb and "CATAAAA" not in hbb


@pytest.mark.slow  # over a second: the full suite runs it, the fast lane does not
def test_a_head_without_its_release_reads_it_from_the_data_root(tmp_path, tiny_activity, monkeypatch) -> None:
    from bioattn.errors import UserInputError
    from bioattn.models.registry import load_pretrained
    from bioattn.tasks.variants.task import TASK
    from bioattn.tasks.variants.train import VariantTrainOptions

    fasta, vcf = _synthetic_release(tmp_path)
    out = tmp_path / "head"
    TASK.run(VariantTrainOptions(activity_model=str(tiny_activity), reference=fasta, input=vcf, out=out, folds=3))
    saved = pd.read_csv(out / "release.tsv", sep="\t")
    root = tmp_path / "root"
    (root / "variants" / "mine").mkdir(parents=True)
    saved.rename(columns={"chrom": "element", "pos": "position", "effect": "effect_size", "conf": "confidence"}).to_csv(
        root / "variants" / "mine" / "release.tsv", sep="\t", index=False)
    (out / "release.tsv").unlink()
    config = json.loads((out / "config.json").read_text())
    config["release_data"] = "variants/mine/release.tsv"
    (out / "config.json").write_text(json.dumps(config))
    monkeypatch.setenv("BIOATTN_DATA_ROOT", str(tmp_path / "nowhere"))
    with pytest.raises(UserInputError, match="data root"):
        load_pretrained(out)
    monkeypatch.setenv("BIOATTN_DATA_ROOT", str(root))
    head = load_pretrained(out)
    assert list(head.release[["chrom", "pos", "effect"]].itertuples(index=False, name=None)) == \
        list(saved[["chrom", "pos", "effect"]].itertuples(index=False, name=None))


def test_a_head_without_ism_features_scores_the_variants_alone(tmp_path, tiny_activity) -> None:
    import pyfaidx

    from bioattn.models.registry import load_pretrained
    from bioattn.tasks.variants.head import model_features
    from bioattn.tasks.variants.records import read_variants

    fasta, vcf = _synthetic_release(tmp_path)
    reference = pyfaidx.Fasta(str(fasta), as_raw=True)
    variants = read_variants(vcf, reference).variants[::97]
    model = load_pretrained(tiny_activity)
    names, full, _, _ = model_features(model, reference, variants)
    alone_names, alone, _, rows = model_features(model, reference, variants, ism_radius=None, embed=False)
    assert rows.tolist() == list(range(len(variants)))  # no neighbouring SNVs scored
    for name in ("delta", "ref_activity", "delta_sd", "delta_p0"):
        np.testing.assert_allclose(alone[:, alone_names.index(name)], full[:, names.index(name)], atol=1e-6)
    assert "embed_l2" not in alone_names
