"""bioattn.models.MSATransformer against fair-esm's MSA Transformer (random weights built by fair-esm, no download):
same logits, row-attention maps and contacts; the fair-esm checkpoint format read without fair-esm; safetensors
round trip; chunking; padding; ESM's MSA subsampling; clear errors on bad files."""
from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pytest
import torch

from bioattn.errors import UserInputError
from bioattn.models import load_pretrained
from bioattn.models.msa_transformer import MSATransformer
from bioattn.models.msa_transformer import ESM_MSA_ALPHABET, esm_msa_subsample
from tests.helpers.esm_checkpoint import SMALL, esm, esm_load, esm_model, write_esm_checkpoint  # skips without fair-esm

FULL = dict(layers=12, embed_dim=768, ffn_embed_dim=3072, attention_heads=12, max_positions=1024)


def random_msa(rows: int, length: int, seed: int = 0) -> list[str]:
    rng = np.random.default_rng(seed)
    letters = np.array(list("ACDEFGHIKLMNPQRSTVWY-"))
    query = rng.choice(letters[:-1], length)
    msa = []
    for _ in range(rows):
        row = query.copy()
        changed = rng.random(length) < 0.3
        row[changed] = rng.choice(letters, changed.sum())
        msa.append("".join(row))
    msa[0] = "".join(query)
    return msa


def assert_parity(ours: MSATransformer, theirs: torch.nn.Module, tokens: torch.Tensor) -> None:
    with torch.no_grad():
        got = ours(tokens, return_contacts=True)
        expected = theirs(tokens, return_contacts=True)
    for key in ("logits", "row_attentions", "contacts"):
        difference = (got[key] - expected[key]).abs().max().item()
        assert difference <= 1e-4, f"{key}: max abs difference {difference:.2e}"
    assert got["contacts"].shape == (tokens.shape[0], tokens.shape[2] - 1, tokens.shape[2] - 1)


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory) -> tuple[Path, torch.nn.Module]:
    path = write_esm_checkpoint(esm_model(SMALL), tmp_path_factory.mktemp("esm") / "esm_msa_tiny.pt")
    return path, esm_load(path)


# ------------------------------------------------------------------------------------------ parity
def test_checkpoint_in_fair_esm_format_gives_fair_esm_outputs(checkpoint):
    path, reference = checkpoint
    model = MSATransformer.from_esm(path)
    tokens = model.encode(random_msa(6, 20))[None]
    assert torch.equal(tokens, esm.Alphabet.from_architecture("msa_transformer").get_batch_converter()(
        [(str(i), s) for i, s in enumerate(random_msa(6, 20))])[2])  # same tokens as fair-esm's batch converter
    assert_parity(model, reference, tokens)


def test_row_and_column_chunks_change_nothing(checkpoint):
    path, reference = checkpoint
    model = MSATransformer.from_esm(path, max_tokens=7)  # 7 // 21 -> 1 row, 7 // 9 -> 1 column at a time
    tokens = model.encode(random_msa(9, 20, seed=1))[None]
    assert_parity(model, reference, tokens)


@pytest.mark.slow
def test_full_esm_msa_1b_shape_matches_fair_esm():
    reference = esm_model(FULL, seed=1)
    model = MSATransformer.from_esm_state_dict(reference.state_dict(), vars(reference.args))
    assert sum(p.numel() for p in model.parameters()) == sum(
        p.numel() for n, p in reference.named_parameters() if n != "lm_head.weight")  # tied to embed_tokens
    tokens = model.encode(random_msa(8, 48, seed=2))[None]
    assert_parity(model, reference, tokens)


# ------------------------------------------------------------------------------------------ saving / loading
def test_saved_model_loads_without_pickle_or_fair_esm(checkpoint, tmp_path, monkeypatch):
    path, reference = checkpoint
    MSATransformer.from_esm(path).save_pretrained(tmp_path / "converted")
    assert sorted(p.name for p in (tmp_path / "converted").iterdir()) == ["config.json", "model.safetensors"]
    monkeypatch.setattr(torch, "load", lambda *a, **k: pytest.fail("torch.load (pickle) used to load a converted model"))
    loaded = load_pretrained(tmp_path / "converted")
    assert isinstance(loaded, MSATransformer)
    assert_parity(loaded, reference, loaded.encode(random_msa(5, 20, seed=3))[None])


def test_from_esm_does_not_import_fair_esm():
    source = Path(__import__("bioattn.models.msa_transformer", fromlist=["x"]).__file__).read_text()
    assert "import esm" not in source and "from esm" not in source


@pytest.mark.parametrize("damage", ["missing", "truncated", "not_a_checkpoint", "other_arch", "no_regression", "missing_tensor"])
def test_bad_checkpoint_is_one_clear_error(checkpoint, tmp_path, damage):
    path, _ = checkpoint
    target = tmp_path / "model.pt"
    regression = tmp_path / "model-contact-regression.pt"
    regression.write_bytes(path.with_name(path.stem + "-contact-regression.pt").read_bytes())
    data = path.read_bytes()
    with torch.serialization.safe_globals([argparse.Namespace]):
        content = torch.load(path, weights_only=True)
    expected = {"missing": "checkpoint not found", "truncated": "not a readable fair-esm checkpoint",
                "not_a_checkpoint": "not a fair-esm checkpoint", "other_arch": "not an MSA Transformer",
                "no_regression": "contact-regression file not found", "missing_tensor": "no tensor"}[damage]
    if damage == "truncated":
        target.write_bytes(data[: len(data) // 2])
    elif damage == "not_a_checkpoint":
        torch.save({"weights": torch.zeros(2)}, target)
    elif damage == "other_arch":
        content["args"].arch = "roberta_large"
        torch.save(content, target)
    elif damage == "no_regression":
        target.write_bytes(data)
        regression.unlink()
    elif damage == "missing_tensor":
        del content["model"]["encoder.lm_head.dense.weight"]
        torch.save(content, target)
    with pytest.raises(UserInputError, match=expected) as error:
        MSATransformer.from_esm(target)
    assert str(target if damage != "no_regression" else regression) in str(error.value)
    assert "\n" not in str(error.value)


def test_pickle_that_would_run_code_is_refused(tmp_path):
    class Exploit:
        def __reduce__(self):
            return (print, ("code ran",))

    target = tmp_path / "evil.pt"
    torch.save({"args": Exploit(), "model": {}}, target)
    with pytest.raises(UserInputError, match="not a readable fair-esm checkpoint"):
        MSATransformer.from_esm(target)


def test_truncated_safetensors_is_refused(checkpoint, tmp_path):
    path, _ = checkpoint
    MSATransformer.from_esm(path).save_pretrained(tmp_path / "converted")
    weights = tmp_path / "converted" / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:1000])
    with pytest.raises(UserInputError, match="model.safetensors"):
        load_pretrained(tmp_path / "converted")


# ------------------------------------------------------------------------------------------ behaviour
def test_padded_batch_gives_each_alignment_its_own_result(checkpoint):
    path, _ = checkpoint
    model = MSATransformer.from_esm(path)
    short, deep = model.encode(random_msa(3, 12, seed=4)), model.encode(random_msa(6, 20, seed=5))
    batch = torch.full((2, 6, 21), model.padding_idx, dtype=torch.long)
    batch[0, :3, :13], batch[1] = short, deep
    with torch.no_grad():
        together = model(batch, return_contacts=True)
        alone = [model(t[None], return_contacts=True) for t in (short, deep)]
    torch.testing.assert_close(together["logits"][0, :3, :13], alone[0]["logits"][0], atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(together["contacts"][0, :12, :12], alone[0]["contacts"][0], atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(together["contacts"][1], alone[1]["contacts"][0], atol=1e-4, rtol=1e-4)


def test_encode_matches_fair_esm_alphabet_and_rejects_ragged_rows():
    alphabet = esm.Alphabet.from_architecture("msa_transformer")
    assert tuple(alphabet.all_toks) == ESM_MSA_ALPHABET
    model = MSATransformer(embed_dim=8, num_heads=2, num_layers=1, ffn_embed_dim=16, max_positions=16, max_rows=4)
    assert model.encode(["ac-J"])[0].tolist() == [0, alphabet.get_idx("A"), alphabet.get_idx("C"), alphabet.get_idx("-"), 3]
    with pytest.raises(UserInputError, match="ragged"):
        model.encode(["ACD", "AC"])
    with pytest.raises(ValueError, match="at most 4"):
        model(model.encode(["ACD"] * 5)[None])


def esm_greedy_select(msa: list[str], num_seqs: int) -> list[int]:
    """ESM's examples' greedy_select(mode="max"), transcribed (scipy Hamming distances), returning the indices."""
    from scipy.spatial.distance import cdist

    if len(msa) <= num_seqs:
        return list(range(len(msa)))
    array = np.array([list(seq) for seq in msa], dtype=np.bytes_).view(np.uint8)
    all_indices = np.arange(len(msa))
    indices = [0]
    pairwise = np.zeros((0, len(msa)))
    for _ in range(num_seqs - 1):
        pairwise = np.concatenate([pairwise, cdist(array[indices[-1:]], array, "hamming")])
        shifted = np.delete(pairwise, indices, axis=1).mean(0)
        indices.append(int(np.delete(all_indices, indices)[np.argmax(shifted)]))
    return sorted(indices)


def test_subsampling_is_esm_greedy_max_hamming():
    msa = random_msa(60, 30, seed=6)
    for budget in (1, 5, 17, 60, 100):
        assert esm_msa_subsample(msa, budget) == esm_greedy_select(msa, budget)


def test_no_attention_call_sees_more_cells_than_max_tokens(checkpoint):
    """Memory linear in depth: row attention sees <= max_tokens // L rows at once, column attention <= max_tokens // N
    columns, whatever N."""
    path, _ = checkpoint
    model = MSATransformer.from_esm(path, max_tokens=64)
    seen = {"row": [], "column": []}
    for layer in model.layers:
        for kind, module in (("row", layer.row_attention), ("column", layer.column_attention)):
            module.q_proj.register_forward_hook(lambda m, inputs, out, kind=kind: seen[kind].append(inputs[0].shape[:-1].numel()))
    for rows in (8, 32):
        tokens = model.encode(random_msa(rows, 15, seed=rows))[None]  # 16 positions with <cls>
        with torch.no_grad():
            model(tokens, return_contacts=True)
    assert seen["row"] and seen["column"]
    assert max(seen["row"]) <= 64 and max(seen["column"]) <= 64  # cells per call, at 8 and at 32 rows alike
