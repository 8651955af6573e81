"""Known-motif marginalisation: planting a named site and its shuffles into background sequences, scored the way the
model predicts (bioattn.explain.marginalize)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from bioattn.data.dna import A_ID, collate_tokens, encode
from bioattn.errors import UserInputError
from bioattn.explain.marginalize import jaspar_consensus, marginalize_known_motifs, motif_shuffles
from bioattn.models.promoter import PromoterClassifier

LENGTH, TSS = 70, 34
TATA = "TATAAAA"


class _ReaderModel(torch.nn.Module):
    """A promoter model built to read one TATA box placed at −30 (its centre within ±2 nt of TSS − 30: +3 log-odds)
    and, separately, GC content anywhere (+4 × GC fraction): a GC-rich motif then moves the prediction by its
    composition alone."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.zeros(1))

    def predict_logits(self, ids, padding_mask=None, *, rc_average=None):
        letters = ["".join("ACGTN"[min(int(t) - A_ID, 4)] for t in row) for row in ids]
        box = torch.tensor([any(s[c - 3 : c + 4] == TATA for c in range(TSS - 32, TSS - 27)) for s in letters]).float()
        gc = torch.tensor([sum(ch in "GC" for ch in s) / len(s) for s in letters])
        return 3.0 * box + 4.0 * gc + self.weight


def _backgrounds(n: int, seed: int = 0) -> list[str]:
    rng = np.random.default_rng(seed)
    return ["".join(rng.choice(list("ACGT"), LENGTH)) for _ in range(n)]


def _row(rows, motif, position):
    return next(r for r in rows if r["motif"] == motif and r["position"] == position)


@pytest.mark.slow  # over a second: the full suite runs it, the fast lane does not
def test_a_motif_the_model_reads_is_found_at_its_position_and_composition_is_controlled() -> None:
    rows = marginalize_known_motifs(_ReaderModel(), {"TBP": TATA, "SP1": "GGGGCGGGG"}, _backgrounds(40),
                                    positions=(-30, 0, 20), tss_index=TSS, progress=False)
    tata = _row(rows, "TBP", -30)
    assert tata["start"] == TSS - 30 - 3 and tata["sequences"] == 40 and not tata["covers_tss"]
    assert _row(rows, "TBP", 0)["covers_tss"] and not _row(rows, "TBP", 20)["covers_tss"]
    assert tata["difference_mean"] > 2.5 and tata["fraction_up"] == 1.0  # the box, beyond its composition
    assert abs(_row(rows, "TBP", 0)["difference_mean"]) < 0.05  # the same letters elsewhere: nothing
    gc_box = _row(rows, "SP1", 0)
    assert gc_box["effect_mean"] > 0.2  # the GC-rich letters raise the prediction ...
    assert abs(gc_box["difference_mean"]) < 1e-5  # ... exactly as much as their shuffles: composition only
    assert gc_box["control_shuffle_sd"] < 1e-5 and tata["control_shuffle_sd"] < 0.5
    assert gc_box["difference_se"] == pytest.approx(gc_box["difference_sd"] / np.sqrt(40))


@pytest.mark.slow
def test_a_motif_that_does_not_fit_is_skipped_and_shuffles_keep_composition() -> None:
    rows = marginalize_known_motifs(_ReaderModel(), {"long": "A" * 20 + "C"}, _backgrounds(5), positions=(-30, 0),
                                    tss_index=TSS, progress=False)
    assert [r["position"] for r in rows] == [0]  # a 21-nt motif centred at -30 would start before the sequence
    for shuffle in motif_shuffles("TATAAAAG", 5, seed=3):
        assert sorted(shuffle) == sorted("TATAAAAG") and shuffle != "TATAAAAG"
    assert motif_shuffles("TATAAAAG", 3, seed=3) == motif_shuffles("TATAAAAG", 3, seed=3)


@pytest.mark.slow
def test_effects_are_the_model_predictions_on_planted_sequences() -> None:
    torch.manual_seed(0)
    model = PromoterClassifier(max_len=LENGTH, embed_dim=8, num_heads=2, num_layers=1, conv_kernel=3,
                               rc_average=True).eval()
    backgrounds = _backgrounds(6, seed=2)
    rows = marginalize_known_motifs(model, {"NRF1": "GCGCATGCGC"}, backgrounds, positions=(-10,), tss_index=TSS,
                                    shuffles=0, progress=False)
    start = TSS - 10 - 5
    planted = [s[:start] + "GCGCATGCGC" + s[start + 10 :] for s in backgrounds]
    with torch.no_grad():  # the model's own predict path: both strands averaged (rc_average)
        before = model.predict_logits(collate_tokens([encode(s) for s in backgrounds])[0])
        after = model.predict_logits(collate_tokens([encode(s) for s in planted])[0])
    difference = (after - before).numpy()
    assert rows[0]["effect_mean"] == pytest.approx(float(difference.mean()), abs=1e-5)
    assert rows[0]["effect_sd"] == pytest.approx(float(difference.std()), abs=1e-5)
    assert rows[0]["control_mean"] == 0.0 and rows[0]["difference_mean"] == rows[0]["effect_mean"]


def test_bad_inputs_are_clear_user_errors() -> None:
    model = _ReaderModel()
    with pytest.raises(UserInputError, match="one length"):
        marginalize_known_motifs(model, {"TBP": TATA}, ["ACGT" * 10, "ACGT" * 11], progress=False)
    with pytest.raises(UserInputError, match="not a consensus"):
        marginalize_known_motifs(model, {"TBP": "TATAXA"}, _backgrounds(2), progress=False)
    with pytest.raises(UserInputError, match="TSS index"):
        marginalize_known_motifs(model, {"TBP": TATA}, _backgrounds(2), tss_index=LENGTH, progress=False)
    with pytest.raises(UserInputError, match="at least one background"):
        marginalize_known_motifs(model, {"TBP": TATA}, [], progress=False)


def test_core_promoter_motifs_are_read_from_the_shipped_jaspar_release() -> None:
    found = jaspar_consensus({"TBP": "MA0108", "NFYA": "MA0060"})
    assert found["TBP"][0].startswith("MA0108.") and "TATAAA" in found["TBP"][1]
    assert "CCAAT" in found["NFYA"][1]
    with pytest.raises(UserInputError, match="no matrix"):
        jaspar_consensus({"none": "MA9999"})


def _tiny_run(tmp_path) -> str:
    torch.manual_seed(0)
    model = PromoterClassifier(max_len=40, embed_dim=8, num_heads=2, num_layers=1, conv_kernel=3, rc_average=True)
    model.eval().save_pretrained(tmp_path / "run")
    return str(tmp_path / "run")


@pytest.mark.slow
def test_explain_promoter_known_motifs_writes_the_table(tmp_path) -> None:
    from bioattn.cli import main as cli_main

    rng = np.random.default_rng(1)
    fasta = tmp_path / "in.fa"
    fasta.write_text("".join(f">s{i}\n{''.join(rng.choice(list('ACGT'), 40))}\n" for i in range(12)))
    out = tmp_path / "out"
    argv = ["explain", "promoter", "--model", _tiny_run(tmp_path), "--input", str(fasta), "--out", str(out), "--motif", "",
            "--plot-sequences", "0", "--no-faithfulness", "--method", "rollout", "--known-motifs", "5", "--tss-index", "34"]
    assert cli_main(argv) == 0
    lines = (out / "known_motifs.tsv").read_text().splitlines()
    header = lines[0].split("\t")
    assert header[:4] == ["motif", "jaspar_id", "consensus", "position"] and "difference_mean" in header
    rows = [dict(zip(header, line.split("\t"))) for line in lines[1:]]
    tata = next(r for r in rows if r["motif"] == "TBP" and r["position"] == "-30")
    assert tata["covers_tss"] == "0" and tata["jaspar_id"].startswith("MA0108.") and tata["sequences"] == "5" and tata["start"] == str(34 - 30 - 3)
    # a motif placed where it does not fit the 40-nt window (ZNF143, 23 nt, centred at +20) has no row
    assert not any(r["motif"] == "ZNF143" and r["position"] == "20" for r in rows)


def test_explain_promoter_known_motifs_needs_the_tss_before_writing(tmp_path, capsys) -> None:
    from bioattn.cli import main as cli_main

    fasta = tmp_path / "in.fa"
    fasta.write_text(">s0\n" + "ACGT" * 10 + "\n")
    out = tmp_path / "out"
    argv = ["explain", "promoter", "--model", _tiny_run(tmp_path), "--input", str(fasta), "--out", str(out),
            "--plot-sequences", "0", "--no-faithfulness", "--method", "rollout", "--known-motifs", "5"]
    assert cli_main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and "--tss-index" in err
    assert not out.exists() or not any(out.iterdir())
