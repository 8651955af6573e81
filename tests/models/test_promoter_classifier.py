"""PromoterClassifier: padding invariance, exact strand symmetry, save/load (old configs too), multi-class heads,
and the per-sequence predict command."""
from __future__ import annotations

import csv
import gzip
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from Bio.Seq import reverse_complement

from bioattn.cli import main as bioattn_main
from bioattn.data.dna import N_ID, PAD_ID, collate_tokens, encode
from bioattn.models.promoter import PromoterClassifier
from bioattn.models.base import WEIGHTS_NAME

RNG = np.random.default_rng(0)
SEQUENCES = ["".join(RNG.choice(list("ACGT"), size=n)) for n in (12, 40, 25, 7, 40)]


@pytest.fixture(scope="module")
def model() -> PromoterClassifier:
    torch.manual_seed(0)
    return PromoterClassifier(max_len=48, embed_dim=32, num_heads=4, num_layers=2, conv_kernel=9).eval()


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory, model) -> Path:
    path = tmp_path_factory.mktemp("run")
    model.save_pretrained(path)
    return path


def batch(sequences):
    return collate_tokens([encode(s) for s in sequences])


def test_prediction_alone_equals_prediction_in_padded_batch(model):
    alone = torch.cat([model.proba_from_ids(*batch([s])) for s in SEQUENCES])
    together = model.proba_from_ids(*batch(SEQUENCES))
    torch.testing.assert_close(together, alone, rtol=0, atol=1e-6)
    assert alone.std() > 1e-4  # the sequences really get different scores


def test_forward_computes_only_the_cls_state_and_equals_the_head_on_the_full_encoding(model):
    ids, padding_mask = batch(SEQUENCES)
    full, _, _ = model.encode(ids, padding_mask)
    cls, _, _ = model.encode(ids, padding_mask, cls_only=True)
    assert full.shape[1] == ids.shape[1] + 1 and cls.shape[1] == 1
    torch.testing.assert_close(cls[:, 0], full[:, 0], rtol=0, atol=1e-5)
    seen = []
    hook = model.encoder.layers[-1].feed_forward.register_forward_hook(lambda _m, args, _o: seen.append(args[0].shape))
    try:
        logits = model(ids, padding_mask)
    finally:
        hook.remove()
    assert seen == [(len(SEQUENCES), 1, model.config["embed_dim"])]  # the last layer's feed-forward ran on [CLS] alone
    torch.testing.assert_close(logits, model.head(full[:, 0]).squeeze(-1), rtol=0, atol=1e-5)


@pytest.mark.parametrize("conv_kernel, conv_layers", [(9, 1), (9, 3), (0, 1)])
def test_content_of_pad_positions_is_irrelevant(conv_kernel, conv_layers):
    torch.manual_seed(1)
    net = PromoterClassifier(max_len=48, embed_dim=32, num_heads=4, num_layers=2, conv_kernel=conv_kernel,
                             conv_layers=conv_layers).eval()
    ids, mask = batch(SEQUENCES)
    scrambled = ids.clone()
    scrambled[mask] = torch.randint(PAD_ID, N_ID + 1, (int(mask.sum()),))
    with torch.no_grad():
        torch.testing.assert_close(net(scrambled, mask), net(ids, mask), rtol=0, atol=1e-6)
        # without the mask the padding would matter: the test above is not vacuous
        assert not torch.allclose(net(scrambled, None), net(ids, None), atol=1e-4)


def test_unpadded_batch_attends_without_a_mask_and_padded_batch_with_one(model, monkeypatch):
    """No mask reaches the encoder nor the fused kernel when nothing is padded (CUDA may then use flash attention)."""
    import bioattn.attention.sdpa as sdpa_module

    encoder_masks: list[torch.Tensor | None] = []
    kernel_masks: list[torch.Tensor | None] = []
    fused = sdpa_module.F.scaled_dot_product_attention

    def spy(q, k, v, **kwargs):
        kernel_masks.append(kwargs.get("attn_mask"))
        return fused(q, k, v, **kwargs)

    monkeypatch.setattr(sdpa_module.F, "scaled_dot_product_attention", spy)
    hook = model.encoder.register_forward_pre_hook(
        lambda _, args, kwargs: encoder_masks.append(kwargs["key_padding_mask"]), with_kwargs=True)
    try:
        with torch.no_grad():
            model(*batch(SEQUENCES[1::3]))  # two sequences of 40 nt: nothing padded
            assert encoder_masks == [None] and kernel_masks == [None] * model.config["num_layers"]
            encoder_masks.clear()
            kernel_masks.clear()
            model(*batch(SEQUENCES))  # padded
    finally:
        hook.remove()
    assert encoder_masks[0] is not None and encoder_masks[0].any()
    assert len(kernel_masks) == model.config["num_layers"] and all(mask is not None for mask in kernel_masks)


def test_reverse_complement_average_is_exactly_strand_symmetric(model):
    forward = model.proba_from_ids(*batch(SEQUENCES))
    reverse = model.proba_from_ids(*batch([reverse_complement(s) for s in SEQUENCES]))
    assert torch.equal(forward, reverse)
    single = model.proba_from_ids(*batch(SEQUENCES), rc_average=False)
    single_rc = model.proba_from_ids(*batch([reverse_complement(s) for s in SEQUENCES]), rc_average=False)
    assert not torch.allclose(single, single_rc)  # one strand alone is not symmetric


def test_from_pretrained_round_trip_gives_equal_outputs(model, run_dir):
    loaded = PromoterClassifier.from_pretrained(run_dir)
    assert loaded.config == model.config and not loaded.training
    ids, mask = batch(SEQUENCES)
    assert torch.equal(loaded.proba_from_ids(ids, mask), model.proba_from_ids(ids, mask))
    assert json.loads((run_dir / "config.json").read_text())["model_type"] == "PromoterClassifier"
    assert (run_dir / WEIGHTS_NAME).read_bytes()[8:9] == b"{"  # safetensors header, not a pickle


def test_config_saved_before_multiclass_support_loads_as_binary(model, run_dir, tmp_path):
    old = json.loads((run_dir / "config.json").read_text())
    for key in ("num_classes", "class_names", "threshold"):
        old.pop(key)
    (tmp_path / "config.json").write_text(json.dumps(old))
    (tmp_path / WEIGHTS_NAME).write_bytes((run_dir / WEIGHTS_NAME).read_bytes())
    loaded = PromoterClassifier.from_pretrained(tmp_path)
    assert loaded.binary and loaded.class_names == ["0", "1"] and loaded.threshold == 0.5
    assert torch.equal(loaded.proba_from_ids(*batch(SEQUENCES)), model.proba_from_ids(*batch(SEQUENCES)))


def test_multiclass_head_gives_strand_symmetric_class_distributions():
    torch.manual_seed(2)
    net = PromoterClassifier(max_len=48, embed_dim=16, num_heads=2, num_layers=1, num_classes=3,
                             class_names=["x", "y", "z"]).eval()
    probs = net.proba_from_ids(*batch(SEQUENCES))
    assert probs.shape == (len(SEQUENCES), 3)
    torch.testing.assert_close(probs.sum(-1), torch.ones(len(SEQUENCES)))
    assert torch.equal(probs, net.proba_from_ids(*batch([reverse_complement(s) for s in SEQUENCES])))
    tokens = [encode(s) for s in SEQUENCES]
    np.testing.assert_array_equal(net.predicted_classes(net.predict_tokens(tokens)), probs.argmax(-1).numpy())
    with pytest.raises(ValueError, match="3 distinct names"):
        PromoterClassifier(num_classes=3, class_names=["a", "a", "b"])


def test_predict_tokens_batches_by_length_but_returns_input_order(model):
    tokens = [encode(s) for s in SEQUENCES * 3]
    alone = np.array([model.predict_tokens([t])[0] for t in tokens])
    np.testing.assert_allclose(model.predict_tokens(tokens, batch_size=4), alone, rtol=0, atol=1e-6)


def test_longer_than_max_len_is_rejected(model):
    with pytest.raises(ValueError, match="exceeds this model's max_len=48"):
        model(*batch(["A" * 49]))


def test_invalid_options():
    with pytest.raises(ValueError, match="odd"):
        PromoterClassifier(conv_kernel=4)
    with pytest.raises(ValueError, match="divisible"):
        PromoterClassifier(embed_dim=30, num_heads=4)


# --------------------------------------------------------------------------------- predict command
def read_output(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


def test_predict_fasta_keeps_ids_and_order(model, run_dir, tmp_path, capsys):
    fasta = tmp_path / "in.fa"
    fasta.write_text("".join(f">seq{i} description\n{s[:20]}\n{s[20:].lower()}\n" for i, s in enumerate(SEQUENCES)))
    out = tmp_path / "out.csv"
    code = bioattn_main(["predict", "promoter", "--model", str(run_dir), "--input", str(fasta), "--output", str(out),
                         "--batch-size", "2"])
    assert code == 0
    rows = read_output(out)
    assert list(rows[0]) == ["id", "promoter_probability", "predicted_label"]
    assert [r["id"] for r in rows] == [f"seq{i}" for i in range(len(SEQUENCES))]
    expected = model.predict_tokens([encode(s) for s in SEQUENCES])
    np.testing.assert_allclose([float(r["promoter_probability"]) for r in rows], expected, atol=2e-6)
    assert [int(r["predicted_label"]) for r in rows] == [int(p >= 0.5) for p in expected]
    assert "5 sequences scored" in capsys.readouterr().err


def test_predict_csv_ignores_label_and_numbers_rows(model, run_dir, tmp_path):
    table = tmp_path / "in.csv.gz"
    table.write_bytes(gzip.compress(("label,sequence\n" + "".join(f"1,{s}\n" for s in SEQUENCES)).encode()))
    out = tmp_path / "sub" / "out.csv"
    assert bioattn_main(["predict", "promoter", "--model", str(run_dir), "--input", str(table), "--output", str(out)]) == 0
    rows = read_output(out)
    assert [r["id"] for r in rows] == [str(i) for i in range(1, len(SEQUENCES) + 1)]
    np.testing.assert_allclose([float(r["promoter_probability"]) for r in rows],
                               model.predict_tokens([encode(s) for s in SEQUENCES]), atol=2e-6)


def test_predict_bf16_stays_close_to_fp32_and_keeps_fp32_probabilities(model, run_dir, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(torch.cpu, "get_capabilities", lambda: {}, raising=False)  # a CPU without bf16 units
    fasta = tmp_path / "in.fa"
    fasta.write_text("".join(f">s{i}\n{s}\n" for i, s in enumerate(SEQUENCES)))
    outputs = {}
    for precision in ("fp32", "bf16"):
        out = tmp_path / f"{precision}.csv"
        assert bioattn_main(["predict", "promoter", "--model", str(run_dir), "--input", str(fasta), "--output", str(out),
                             "--precision", precision, "--device", "cpu"]) == 0
        err = capsys.readouterr().err
        assert f"scored in {precision}" in err
        assert ("warning: this CPU has no bf16 units" in err) is (precision == "bf16")  # emulated bf16 is slow
        outputs[precision] = np.array([float(r["promoter_probability"]) for r in read_output(out)])
    np.testing.assert_allclose(outputs["bf16"], outputs["fp32"], atol=0.02)
    assert not np.array_equal(outputs["bf16"], outputs["fp32"])  # bf16 really ran
    # the head runs in fp32: probabilities are not bf16 numbers (which are multiples of 2^-9 near 0.5)
    assert np.any(np.abs(outputs["bf16"] * 512 - np.round(outputs["bf16"] * 512)) > 1e-3)


def test_head_logits_are_fp32_under_bf16_autocast(model):
    ids, mask = batch(SEQUENCES)
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        assert model(ids, mask).dtype == torch.float32


BAD_PREDICT_INPUTS = [
    ("empty.fa", "", "file is empty"),
    ("notes.fa", "just some notes\n", "not valid FASTA"),
    ("badchar.fa", ">ok\nACGT\n>bad1\nACGUA\n", "record 'bad1' (#2): invalid character 'U' at position 4"),
    ("emptyrec.fa", ">ok\nACGT\n>hollow\n>next\nAC\n", "record 'hollow' (#2): empty sequence"),
    ("nocol.csv", "seq\nACGT\n", "CSV without a 'sequence' column"),
    ("long.fa", ">ok\nACGT\n>big\n" + "A" * 49 + "\n",
     "record 'big' (#2): sequence is 49 nt long; this model accepts at most 48 nt (its training length); "
     "score longer sequences in windows with --window"),
]


@pytest.mark.parametrize("name, content, fragment", BAD_PREDICT_INPUTS, ids=[b[0] for b in BAD_PREDICT_INPUTS])
def test_predict_bad_input_exit_2_one_line_and_no_output(run_dir, tmp_path, capsys, name, content, fragment):
    source = tmp_path / name
    source.write_text(content)
    out = tmp_path / "out.csv"
    code = bioattn_main(["predict", "promoter", "--model", str(run_dir), "--input", str(source), "--output", str(out),
                         "--batch-size", "1"])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith(f"error: {source}: ") and fragment in err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert not out.exists() and not list(tmp_path.glob(".out.csv*"))  # nothing half-written, no temp left


@pytest.mark.slow
def test_predict_failure_keeps_previous_output_and_console_script_exits_2(run_dir, tmp_path):
    source = tmp_path / "cut.fa.gz"
    data = gzip.compress("".join(f">r{i}\n{SEQUENCES[i % 5]}\n" for i in range(400)).encode())
    source.write_bytes(data[: len(data) // 2])
    out = tmp_path / "out.csv"
    out.write_text("previous results\n")
    done = subprocess.run([sys.executable, "-m", "bioattn.cli", "predict", "promoter", "--model", str(run_dir),
                           "--input", str(source), "--output", str(out), "--batch-size", "8"],
                          capture_output=True, text=True)
    assert done.returncode == 2
    assert done.stderr.strip() == f"error: {source}: truncated gzip file (compressed data ended early)"
    assert out.read_text() == "previous results\n"


def test_predict_threshold_option_moves_the_decision(model, run_dir, tmp_path):
    fasta = tmp_path / "in.fa"
    fasta.write_text("".join(f">s{i}\n{s}\n" for i, s in enumerate(SEQUENCES)))
    probs = model.predict_tokens([encode(s) for s in SEQUENCES])
    cut = float(np.median(probs))
    assert bioattn_main(["predict", "promoter", "--model", str(run_dir), "--input", str(fasta), "--output",
                         str(tmp_path / "o.csv"), "--threshold", str(cut), "--device", "cpu"]) == 0  # as probs
    assert [r["predicted_label"] for r in read_output(tmp_path / "o.csv")] == [str(int(p >= cut)) for p in probs]


def test_predict_rejects_a_folder_that_is_not_a_run(tmp_path, capsys):
    source = tmp_path / "in.fa"
    source.write_text(">a\nACGT\n")
    code = bioattn_main(["predict", "promoter", "--model", str(tmp_path), "--input", str(source), "--output", str(tmp_path / "o.csv")])
    assert code == 2 and "no config.json" in capsys.readouterr().err


def test_convolution_from_token_tables_equals_conv1d_forward_and_backward():
    torch.manual_seed(3)
    net = PromoterClassifier(max_len=48, embed_dim=32, num_heads=4, num_layers=1, conv_kernel=9, conv_layers=2).train()
    ids, mask = batch(SEQUENCES)
    ids[mask] = N_ID  # whatever sits under the padding mask is ignored by both paths
    results, conv_calls = {}, []
    net.convs[0].register_forward_hook(lambda module, inputs, output: conv_calls.append(1))
    for from_tables in (True, False):
        net.conv_from_token_tables = from_tables
        net.zero_grad()
        conv_calls.clear()
        out = net(ids, mask)
        out.square().sum().backward()
        results[from_tables] = out.detach(), [p.grad.clone() for p in net.parameters()]
        assert len(conv_calls) == (0 if from_tables else 1)  # the tables really replace the first Conv1d
    torch.testing.assert_close(results[True][0], results[False][0], rtol=0, atol=1e-5)
    for with_tables, with_conv in zip(results[True][1], results[False][1]):
        torch.testing.assert_close(with_tables, with_conv, rtol=1e-4, atol=1e-5)
    assert results[True][1][0].abs().sum() > 0  # the embedding really gets a gradient through the tables


def test_forward_hook_on_the_embedding_reaches_the_convolution():
    torch.manual_seed(4)
    net = PromoterClassifier(max_len=48, embed_dim=32, num_heads=4, num_layers=1, conv_kernel=9).eval()
    ids, mask = batch(SEQUENCES)
    outputs = {}
    with torch.no_grad():
        plain = net(ids, mask)
        handle = net.embedding.register_forward_hook(lambda module, inputs, output: output * 0.5)  # as Captum does
        for from_tables in (True, False):
            net.conv_from_token_tables = from_tables
            outputs[from_tables] = net(ids, mask)
        handle.remove()
    assert not torch.allclose(outputs[False], plain, atol=1e-4)
    torch.testing.assert_close(outputs[True], outputs[False], rtol=0, atol=0)


def test_token_table_convolution_refuses_convolutions_it_does_not_compute():
    from bioattn.models.promoter import token_table_conv1d

    with pytest.raises(ValueError, match="stride 1"):
        token_table_conv1d(torch.nn.Conv1d(4, 4, 3, stride=2, padding=1), torch.randn(6, 4), torch.zeros(1, 5, dtype=torch.long), 5)
