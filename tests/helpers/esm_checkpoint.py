"""Tiny fair-esm MSA Transformers with random weights, written in the checkpoint layout fair-esm distributes (no
download). Importing this module skips the importing test module when fair-esm is not installed."""
from __future__ import annotations

import argparse
from pathlib import Path

import pytest
import torch

esm = pytest.importorskip("esm")  # the test/bench extra; installed in CI

SMALL = dict(layers=2, embed_dim=32, ffn_embed_dim=64, attention_heads=4, max_positions=64)


def esm_args(size: dict) -> argparse.Namespace:
    """fair-esm's MSATransformer arguments (ESM-MSA-1b: row-index embedding), dropout off."""
    return argparse.Namespace(arch="msa_transformer", dropout=0.0, attention_dropout=0.0, activation_dropout=0.0,
                              max_tokens_per_msa=2**14, max_tokens=2**14, embed_positions_msa=True, **size)


def esm_model(size: dict, seed: int = 0) -> torch.nn.Module:
    """A fair-esm MSATransformer with fair-esm's random initialisation, its norms' and biases' constant
    initial values perturbed so that every parameter's mapping is checked."""
    torch.manual_seed(seed)
    model = esm.MSATransformer(esm_args(size), esm.Alphabet.from_architecture("msa_transformer"))
    with torch.no_grad():
        for parameter in model.parameters():
            if parameter.dim() == 1:
                parameter.add_(0.05 * torch.randn_like(parameter))
    return model.eval()


def write_esm_checkpoint(model: torch.nn.Module, path: Path) -> Path:
    """``path`` (``<name>.pt``) and ``<name>-contact-regression.pt`` in the layout fair-esm distributes: ``args`` with
    ``encoder_`` names, the state under ``encoder.sentence_encoder.`` / ``encoder.`` with row and column swapped."""
    args = {("encoder_" + k if k in ("layers", "embed_dim", "ffn_embed_dim", "attention_heads") else k): v
            for k, v in vars(model.args).items()}
    state, regression = {}, {}
    for name, value in model.state_dict().items():
        if name.startswith("contact_head."):
            regression[name] = value.clone()
            continue
        swapped = name.replace("row", "\0").replace("column", "row").replace("\0", "column")
        prefix = "encoder." if name.startswith("lm_head.") else "encoder.sentence_encoder."
        state[prefix + swapped] = value.clone()
    torch.save({"args": argparse.Namespace(**args), "model": state}, path)
    torch.save({"model": regression}, path.with_name(path.stem + "-contact-regression.pt"))
    return path


def esm_load(path: Path) -> torch.nn.Module:
    """The checkpoint loaded by fair-esm itself (proves the file is in fair-esm's format)."""
    with torch.serialization.safe_globals([argparse.Namespace]):
        model, _ = esm.pretrained.load_model_and_alphabet_local(str(path))
    return model.eval()
