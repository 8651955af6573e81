"""What 'bioattn predict variants' says about its reference and its numbers: a gzip (not bgzip) reference gets a
message about variant scoring; a variant-effect head names only the reverse-complemented contigs the reference
has; what ref_score is (the reference allele in the variant's own windows) is said in --help and the VCF header."""
from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from bioattn.cli import main
from bioattn.errors import UserInputError
from bioattn.tasks.variants.predict import predict_variants, score_variants
from tests.helpers.tiny_activity import tiny_activity_model
from tests.tasks.variants.test_variant_scoring import StandIn

RNG = np.random.default_rng(3)
SEQ = "".join(RNG.choice(list("ACGT"), 60))


def _vcf(path: Path, chrom: str) -> Path:
    path.write_text("##fileformat=VCFv4.2\n#CHROM\tPOS\tID\tREF\tALT\tQUAL\tFILTER\tINFO\n"
                    f"{chrom}\t30\t.\t{SEQ[29]}\t{'A' if SEQ[29] != 'A' else 'C'}\t.\t.\t.\n")
    return path


def test_a_gzip_reference_gets_a_variant_scoring_message(tmp_path, capsys) -> None:
    reference = tmp_path / "ref.fa.gz"
    with gzip.open(reference, "wt") as handle:
        handle.write(f">elem1\n{SEQ}\n")
    vcf = _vcf(tmp_path / "calls.vcf", "elem1")
    with pytest.raises(UserInputError, match=r"ref.fa.gz: --reference is gzip-compressed; variant scoring") as raised:
        score_variants(StandIn(), reference, vcf)
    assert "genome scan" not in str(raised.value) and "bgzip ref.fa" in str(raised.value)
    assert main(["predict", "variants", "--model", "gue-prom-core-all", "--reference", str(reference), "--input",
                 str(vcf), "--output", str(tmp_path / "out.tsv")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "genome scan" not in err and not (tmp_path / "out.tsv").exists()


def _head(reversed_contigs: list[str]):
    from bioattn.models.variant_head import VariantEffectHead

    head = VariantEffectHead(feature_names=["delta"], activity_model="tiny", reversed_contigs=reversed_contigs)
    head.set_linear(np.zeros(1), np.ones(1), np.ones(1), 0.0)
    head.activity_model = tiny_activity_model(0)
    head.release = pd.DataFrame({"chrom": ["elem1"], "pos": [5], "ref": [SEQ[4]], "alt": ["A"], "effect": [0.1],
                                 "conf": [1.0]})
    return head


@pytest.mark.parametrize("contig, named", [("elem1", None), ("HBB", "HBB")])
def test_a_head_names_only_the_reversed_contigs_the_reference_has(tmp_path, contig, named) -> None:
    reference = tmp_path / "ref.fa"
    reference.write_text(f">{contig}\n{SEQ}\n")
    result = predict_variants(_head(["HBB", "PKLR", "TERT-GBM"]), reference, _vcf(tmp_path / "calls.vcf", contig),
                              tmp_path / "out.tsv")
    text = result.describe(tmp_path / "out.tsv")
    assert "PKLR" not in text and "TERT-GBM" not in text
    if named is None:
        assert "reverse complement" not in text
    else:
        assert f"scored in reverse complement (gene orientation): {named};" in text


def test_what_ref_score_is_is_said_in_help_and_vcf_header(tmp_path, capsys) -> None:
    with pytest.raises(SystemExit):
        main(["predict", "variants", "--help"])
    assert "ref_score is the reference allele scored in the same windows" in " ".join(capsys.readouterr().out.split())
    reference = tmp_path / "ref.fa"
    reference.write_text(f">elem1\n{SEQ}\n")
    out = tmp_path / "out.vcf"
    predict_variants(StandIn(), reference, _vcf(tmp_path / "calls.vcf", "elem1"), out)
    header = out.read_text()
    assert "model score of the reference allele in the variant's own windows" in header
    assert "ref_score is the reference allele in each variant's own windows" in header
