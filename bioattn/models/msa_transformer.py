"""ESM's MSA Transformer (ESM-MSA-1b, Rao et al. 2021) built from bioattn's axial blocks, batch-first, at any depth.

With fair-esm's weights it gives fair-esm's logits, row-attention maps and contacts. Weights are not shipped:
convert fair-esm's checkpoint once with :meth:`MSATransformer.from_esm` (the only place a pickle is read) and save
it; later loads read safetensors::

    model = MSATransformer.from_esm("esm_msa1b_t12_100M_UR50S.pt")
    model.save_pretrained("esm-msa-1b")
    model = MSATransformer.from_pretrained("esm-msa-1b")
    tokens = model.encode(["MKV-LA", "MRV-IA"])[None]          # (B=1, N=2, L+1=7), <cls> first
    contacts = model(tokens, return_contacts=True)["contacts"]  # (1, 6, 6)
"""
from __future__ import annotations

import argparse
import os
import pickle
import re
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from bioattn.attention import AxialTransformerLayer
from bioattn.errors import UserInputError
from bioattn.models.base import PretrainedModel

__all__ = ["ESM_MSA_ALPHABET", "AlignmentPrediction", "MSATransformer", "esm_msa_subsample", "contact_maps_apc"]

#: fair-esm's alphabet of the MSA Transformer: index = token id (``<cls>`` 0, ``<pad>`` 1, ``<mask>`` 32).
ESM_MSA_ALPHABET = ("<cls>", "<pad>", "<eos>", "<unk>", "L", "A", "G", "V", "S", "E", "R", "T", "I", "D", "P", "K", "Q",
                    "N", "F", "Y", "M", "H", "W", "C", "X", "B", "U", "Z", "O", ".", "-", "<null_1>", "<mask>")
#: Default tokens per chunk of rows / columns (fair-esm's ``max_tokens_per_msa``).
DEFAULT_MAX_TOKENS = 2**14
REGRESSION_SUFFIX = "-contact-regression.pt"
#: Rows of an alignment fed to the model by default (ESM-MSA-1b embeds at most 1024 row indices).
DEFAULT_MAX_ROWS = 256


def symmetrize(x: Tensor) -> Tensor:
    """``x + xᵀ`` over the last two dims."""
    return x + x.transpose(-1, -2)


def average_product_correction(x: Tensor) -> Tensor:
    """APC over the last two dims: ``x - rowsum · colsum / total``."""
    row, column = x.sum(-1, keepdim=True), x.sum(-2, keepdim=True)
    return x - row * column / x.sum((-1, -2), keepdim=True)


def contact_maps_apc(row_attentions: Tensor, position_keep: Tensor | None = None) -> Tensor:
    """Symmetrised, APC-corrected maps ``(B, layers, H, L, L)`` → ``(B, layers·H, L, L)``; padded positions
    (``position_keep (B, L)`` False) are zeroed first."""
    b, layers, heads, length, _ = row_attentions.shape
    maps = row_attentions.reshape(b, layers * heads, length, length).float()
    if position_keep is not None:
        maps = maps * (position_keep[:, :, None] & position_keep[:, None, :]).to(maps.dtype)[:, None]
    return average_product_correction(symmetrize(maps))


def esm_msa_subsample(sequences: Sequence[str], max_rows: int) -> list[int]:
    """Sorted indices (row 0 kept) of at most ``max_rows`` rows, chosen as ESM's ``greedy_select(mode="max")``:
    repeatedly the row with the largest mean Hamming distance to the rows already chosen."""
    if max_rows < 1:
        raise ValueError(f"max_rows must be >= 1, got {max_rows}")
    n = len(sequences)
    if n <= max_rows:
        return list(range(n))
    array = torch.frombuffer(bytearray("".join(sequences).encode("ascii", "replace")), dtype=torch.uint8).view(n, -1)
    total = (array != array[0]).sum(1).double()
    chosen = [0]
    available = torch.ones(n, dtype=torch.bool)
    available[0] = False
    for _ in range(max_rows - 1):
        index = int(torch.argmax(torch.where(available, total, torch.tensor(-1.0, dtype=torch.float64))))
        chosen.append(index)
        available[index] = False
        total += (array != array[index]).sum(1).double()
    return sorted(chosen)


@dataclass(frozen=True)
class AlignmentPrediction:
    """One alignment's ``probabilities (L, L)``, ``logits (L, L)``, ``row_attentions (layers, H, L, L)`` (no
    ``<cls>``) and the rows used."""

    probabilities: Tensor
    logits: Tensor
    row_attentions: Tensor
    rows: list[int]


class _LMHead(nn.Module):
    """``dense → gelu → LayerNorm``, then the token embedding's transpose and a bias."""

    def __init__(self, embed_dim: int, vocab_size: int) -> None:
        super().__init__()
        self.dense = nn.Linear(embed_dim, embed_dim)
        self.layer_norm = nn.LayerNorm(embed_dim)
        self.bias = nn.Parameter(torch.zeros(vocab_size))

    def forward(self, x: Tensor, embedding: Tensor) -> Tensor:
        return F.linear(self.layer_norm(F.gelu(self.dense(x))), embedding) + self.bias


class MSATransformer(PretrainedModel):
    """ESM's MSA Transformer on bioattn's axial blocks: ``max_positions`` (``<cls>`` included) per row, ``max_rows``
    learned row-index embeddings (0: none) of width ``row_embed_dim`` (default ``embed_dim``), token strings
    ``alphabet``, ``max_tokens`` cells per chunk of rows or columns (None: no chunking)."""

    def __init__(self, embed_dim: int = 768, num_heads: int = 12, num_layers: int = 12, ffn_embed_dim: int = 3072,
                 max_positions: int = 1024, max_rows: int = 1024, row_embed_dim: int | None = None,
                 alphabet: Sequence[str] = ESM_MSA_ALPHABET, dropout: float = 0.1,
                 max_tokens: int | None = DEFAULT_MAX_TOKENS) -> None:
        super().__init__()
        for name, value in (("embed_dim", embed_dim), ("num_heads", num_heads), ("num_layers", num_layers),
                            ("ffn_embed_dim", ffn_embed_dim), ("max_positions", max_positions)):
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        if embed_dim % num_heads:
            raise ValueError(f"embed_dim ({embed_dim}) must be divisible by num_heads ({num_heads})")
        if max_rows < 0 or (max_tokens is not None and max_tokens < 1):
            raise ValueError(f"max_rows must be >= 0 and max_tokens >= 1 or None, got {max_rows}, {max_tokens}")
        alphabet = list(alphabet)
        for token in ("<cls>", "<pad>", "<mask>", "<unk>"):
            if token not in alphabet:
                raise ValueError(f"alphabet lacks {token}")
        row_embed_dim = embed_dim if row_embed_dim is None else row_embed_dim
        self.config = {"embed_dim": embed_dim, "num_heads": num_heads, "num_layers": num_layers,
                       "ffn_embed_dim": ffn_embed_dim, "max_positions": max_positions, "max_rows": max_rows,
                       "row_embed_dim": row_embed_dim, "alphabet": alphabet, "dropout": dropout, "max_tokens": max_tokens}
        self.alphabet = alphabet
        self.token_ids = {token: index for index, token in enumerate(alphabet)}
        self.padding_idx, self.cls_idx = self.token_ids["<pad>"], self.token_ids["<cls>"]
        self.mask_idx, self.unk_idx = self.token_ids["<mask>"], self.token_ids["<unk>"]
        self.max_tokens = max_tokens
        self.embed_tokens = nn.Embedding(len(alphabet), embed_dim, padding_idx=self.padding_idx)
        self.embed_positions = nn.Embedding(max_positions + self.padding_idx + 1, embed_dim, padding_idx=self.padding_idx)
        self.register_parameter("msa_position_embedding",
                                nn.Parameter(0.01 * torch.randn(1, max_rows, 1, row_embed_dim)) if max_rows else None)
        self.emb_layer_norm_before = nn.LayerNorm(embed_dim)
        self.emb_layer_norm_after = nn.LayerNorm(embed_dim)
        self.dropout = nn.Dropout(dropout)
        self.layers = nn.ModuleList(
            AxialTransformerLayer(embed_dim, num_heads, dim_feedforward=ffn_embed_dim, dropout=dropout,
                                  attention_dropout=dropout, activation="gelu", tied=True) for _ in range(num_layers))
        self.lm_head = _LMHead(embed_dim, len(alphabet))
        self.contact_regression = nn.Linear(num_layers * num_heads, 1)

    def encode(self, sequences: Sequence[str]) -> Tensor:
        """Token ids ``(N, L + 1)`` of N aligned rows, ``<cls>`` first (any case; unknown characters → ``<unk>``)."""
        if not sequences:
            raise UserInputError("no sequences to encode (empty alignment)")
        length = len(sequences[0])
        table = torch.full((256,), self.unk_idx, dtype=torch.long)
        for token, index in self.token_ids.items():
            if len(token) == 1:
                table[ord(token)] = index
                table[ord(token.lower())] = index
        rows = []
        for index, sequence in enumerate(sequences):
            if len(sequence) != length:
                raise UserInputError(f"record {index}: length {len(sequence)} != {length} (ragged alignment)")
            raw = torch.frombuffer(bytearray(sequence.encode("ascii", "replace")), dtype=torch.uint8).long()
            rows.append(table[raw] if length else raw)
        return torch.cat([torch.full((len(rows), 1), self.cls_idx, dtype=torch.long), torch.stack(rows)], dim=1)

    def _masks(self, tokens: Tensor) -> tuple[Tensor | None, Tensor | None, Tensor | None]:
        """``(sequence_padding_mask (B, N), position_padding_mask (B, C), cell padding (B, N, C))``, None when unpadded."""
        padding = tokens.eq(self.padding_idx)
        if not padding.any():
            return None, None, None
        rows, positions = padding.all(2), padding.all(1)
        if not torch.equal(padding, rows[:, :, None] | positions[:, None, :]):
            raise ValueError("tokens: <pad> must fill whole rows (missing sequences) or whole columns (shorter alignments)")
        return rows, positions, padding

    def forward(self, tokens: Tensor, *, need_weights: bool = False, return_contacts: bool = False,
                repr_layers: Sequence[int] = ()) -> dict[str, Any]:
        """Alignments ``tokens`` int64 ``(B, N, C)`` (``<cls>`` first, ``<pad>`` filling missing rows / columns) →
        fair-esm's dict: ``logits (B, N, C, V)``, ``representations`` {layer in ``repr_layers``: ``(B, N, C, D)``},
        with ``need_weights`` ``row_attentions (B, layers, H, C, C)``, with ``return_contacts`` also
        ``contacts (B, C-1, C-1)``."""
        if not isinstance(tokens, Tensor) or tokens.dim() != 3 or tokens.dtype != torch.long:
            raise ValueError(f"tokens must be an int64 tensor (B, N, C), got "
                             f"{tuple(tokens.shape) if isinstance(tokens, Tensor) else type(tokens).__name__}")
        b, n, c = tokens.shape
        if c > self.config["max_positions"]:
            raise ValueError(f"tokens: {c} positions (with <cls>), the model takes at most {self.config['max_positions']}")
        if self.msa_position_embedding is not None and n > self.msa_position_embedding.size(1):
            raise ValueError(f"tokens: {n} rows, the model embeds at most {self.msa_position_embedding.size(1)} "
                             "(subsample the alignment: esm_msa_subsample)")
        need_weights = need_weights or return_contacts
        rows, positions, padding = self._masks(tokens)
        keep = None if padding is None else ~padding
        position_ids = (torch.arange(1, c + 1, device=tokens.device).expand(b, n, c) + self.padding_idx if keep is None
                        else (keep.long().cumsum(2) * keep + self.padding_idx).long())
        x = self.embed_tokens(tokens) + self.embed_positions(position_ids)
        if self.msa_position_embedding is not None:
            x = x + self.msa_position_embedding[:, :n]
        x = self.dropout(self.emb_layer_norm_before(x))
        if keep is not None:
            x = x * keep[..., None].to(x.dtype)
        repr_layers = set(repr_layers)
        representations = {0: x} if 0 in repr_layers else {}
        self._set_chunks(n, c)
        masks = {"sequence_padding_mask": rows, "position_padding_mask": positions}
        row_attentions = []
        for index, layer in enumerate(self.layers):
            x, weights = layer(x, need_weights=need_weights, **masks)
            if need_weights:
                row_attentions.append(weights)
            if index + 1 in repr_layers:
                representations[index + 1] = x
        x = self.emb_layer_norm_after(x)
        if len(self.layers) in repr_layers:
            representations[len(self.layers)] = x
        result: dict[str, Any] = {"logits": self.lm_head(x, self.embed_tokens.weight), "representations": representations}
        if need_weights:
            result["row_attentions"] = torch.stack(row_attentions, 1)
            if return_contacts:
                result["contacts"] = self.contacts_from_attentions(result["row_attentions"], positions)
        return result

    def _set_chunks(self, rows: int, columns: int) -> None:
        row_chunk = None if self.max_tokens is None else max(1, self.max_tokens // columns)
        column_chunk = None if self.max_tokens is None else max(1, self.max_tokens // rows)
        for layer in self.layers:
            layer.chunk_size = layer.row_attention.chunk_size = row_chunk
            layer.column_attention.chunk_size = column_chunk

    def contact_features(self, row_attentions: Tensor, position_padding_mask: Tensor | None = None) -> Tensor:
        """``row_attentions (B, layers, H, C, C)`` → the contact regression's inputs ``(B, L, L, layers·H)``."""
        keep = None if position_padding_mask is None else ~position_padding_mask[:, 1:]
        return contact_maps_apc(row_attentions[..., 1:, 1:], keep).permute(0, 2, 3, 1)

    def contacts_from_attentions(self, row_attentions: Tensor, position_padding_mask: Tensor | None = None) -> Tensor:
        """Contact probabilities ``(B, L, L)`` from ``row_attentions (B, layers, H, C, C)`` (the logistic regression)."""
        features = self.contact_features(row_attentions, position_padding_mask).to(self.contact_regression.weight.dtype)
        return torch.sigmoid(self.contact_regression(features).squeeze(-1))

    @torch.no_grad()
    def predict_alignment(self, sequences: Sequence[str], max_rows: int = DEFAULT_MAX_ROWS, *,
                          source: str = "alignment") -> AlignmentPrediction:
        """Contacts of one alignment (aligned rows, query first) from at most ``max_rows`` rows
        (:func:`esm_msa_subsample`), eval mode; ``source`` names the alignment in errors."""
        if max_rows < 1:
            raise UserInputError(f"the row budget must be >= 1, got {max_rows}")
        if self.msa_position_embedding is not None and max_rows > self.msa_position_embedding.size(1):
            raise UserInputError(f"row budget {max_rows}: the model embeds at most {self.msa_position_embedding.size(1)} rows")
        if not sequences:
            raise UserInputError(f"{source}: no sequences (empty alignment)")
        if len(sequences[0]) + 1 > self.config["max_positions"]:
            raise UserInputError(f"{source}: {len(sequences[0])} columns; the MSA Transformer takes at most "
                                 f"{self.config['max_positions'] - 1} (crop the alignment)")
        self.eval()
        rows = esm_msa_subsample(sequences, max_rows)
        tokens = self.encode([sequences[i] for i in rows])[None].to(next(self.parameters()).device)
        attentions = self(tokens, need_weights=True)["row_attentions"]
        logits = self.contact_regression(self.contact_features(attentions)).squeeze(-1)[0].float().cpu()
        return AlignmentPrediction(torch.sigmoid(logits), logits, attentions[0, ..., 1:, 1:].float().cpu(), rows)

    @torch.no_grad()
    def predict_contacts(self, tokens: Tensor) -> Tensor:
        """Contact probabilities ``(B, C-1, C-1)`` of ``tokens (B, N, C)`` (eval mode, no gradients)."""
        self.eval()
        return self(tokens, return_contacts=True)["contacts"]

    @classmethod
    def from_esm(cls, path: str | os.PathLike, regression_path: str | os.PathLike | None = None, *,
                 max_tokens: int | None = DEFAULT_MAX_TOKENS) -> "MSATransformer":
        """Convert a fair-esm checkpoint ``.pt`` and its contact regression (default: ``<path without
        .pt>-contact-regression.pt``). **This reads pickle files** (``torch.load(weights_only=True)``): open only
        checkpoints you trust, and save the result with :meth:`save_pretrained`."""
        path = Path(path)
        regression_path = Path(str(path.with_suffix("")) + REGRESSION_SUFFIX) if regression_path is None else Path(regression_path)
        data = _torch_load(path)
        if not isinstance(data, dict) or not isinstance(data.get("args"), argparse.Namespace) or not isinstance(data.get("model"), dict):
            raise UserInputError(f"{path}: not a fair-esm checkpoint (expected a dict with 'args' and 'model')")
        args = {re.sub(r"^encoder_", "", key): value for key, value in vars(data["args"]).items()}
        if args.get("arch") != "msa_transformer":
            raise UserInputError(f"{path}: holds a fair-esm {args.get('arch')!r} model, not an MSA Transformer (ESM-MSA-1b)")
        regression = _torch_load(regression_path, what="contact-regression file")
        if not isinstance(regression, dict) or not isinstance(regression.get("model"), dict):
            raise UserInputError(f"{regression_path}: not a fair-esm contact-regression file (expected a dict with 'model')")
        state = {_esm_name(key): value for key, value in data["model"].items()}
        state.update(regression["model"])
        return cls.from_esm_state_dict(state, args, source=path, max_tokens=max_tokens)

    @classmethod
    def from_esm_state_dict(cls, state: dict[str, Any], args: dict[str, Any], *, source: str | os.PathLike = "state dict",
                            max_tokens: int | None = DEFAULT_MAX_TOKENS) -> "MSATransformer":
        """The model (eval mode) of a fair-esm ``MSATransformer``'s ``state_dict()`` and ``args`` (a dict)."""
        def tensor(name: str) -> Tensor:
            value = state.get(name)
            if not isinstance(value, Tensor):
                raise UserInputError(f"{source}: no tensor {name!r} (truncated or not an MSA Transformer checkpoint)")
            return value

        embed = tensor("embed_tokens.weight")
        layers = len({int(m.group(1)) for key in state if (m := re.match(r"layers\.(\d+)\.", key))})
        alphabet = list(ESM_MSA_ALPHABET)
        if embed.shape[0] != len(alphabet):
            raise UserInputError(f"{source}: {embed.shape[0]} tokens in embed_tokens.weight, the MSA Transformer has {len(alphabet)}")
        padding_idx = alphabet.index("<pad>")
        msa_rows = state.get("msa_position_embedding")
        try:
            model = cls(embed_dim=embed.shape[1], num_heads=int(args.get("attention_heads", 12)), num_layers=layers,
                        ffn_embed_dim=tensor("layers.0.feed_forward_layer.layer.fc1.weight").shape[0],
                        max_positions=tensor("embed_positions.weight").shape[0] - padding_idx - 1,
                        max_rows=0 if msa_rows is None else msa_rows.shape[1],
                        row_embed_dim=None if msa_rows is None else msa_rows.shape[-1],
                        dropout=float(args.get("dropout", 0.1)), max_tokens=max_tokens)
        except ValueError as exc:
            raise UserInputError(f"{source}: not a consistent MSA Transformer checkpoint ({exc})") from exc
        ours = model.state_dict()
        converted = {}
        for name in ours:
            value = tensor(_ESM_NAMES.get(name) or _esm_layer_name(name))
            if value.shape != ours[name].shape:
                raise UserInputError(f"{source}: {name} has shape {tuple(value.shape)}, expected {tuple(ours[name].shape)}")
            converted[name] = value.float()
        model.load_state_dict(converted)
        return model.eval()


_ESM_NAMES = {"contact_regression.weight": "contact_head.regression.weight", "contact_regression.bias": "contact_head.regression.bias"}
_LAYER_PARTS = {
    "row_attention.": "row_self_attention.layer.", "row_norm.": "row_self_attention.layer_norm.",
    "column_attention.": "column_self_attention.layer.", "column_norm.": "column_self_attention.layer_norm.",
    "feed_forward.linear1.": "feed_forward_layer.layer.fc1.", "feed_forward.linear2.": "feed_forward_layer.layer.fc2.",
    "feed_forward_norm.": "feed_forward_layer.layer_norm.",
}


def _esm_layer_name(name: str) -> str:
    """Our parameter name → fair-esm's ``MSATransformer`` name."""
    for ours, theirs in _LAYER_PARTS.items():
        if f".{ours}" in name:
            return name.replace(f".{ours}", f".{theirs}", 1)
    return name


def _esm_name(key: str) -> str:
    """A key of the distributed checkpoint → fair-esm's module name (as ``esm.pretrained`` loads it: prefix dropped,
    ``row`` and ``column`` swapped)."""
    key = key.replace("row", "\0").replace("column", "row").replace("\0", "column")
    for prefix in ("encoder.sentence_encoder.", "encoder."):
        if key.startswith(prefix):
            return key[len(prefix):]
    return key


def _torch_load(path: Path, what: str = "checkpoint") -> Any:
    """``torch.load(path, weights_only=True)`` allowing :class:`argparse.Namespace`; errors name ``path``."""
    if not path.is_file():
        hint = " (fair-esm distributes it beside the model as <name>-contact-regression.pt)" if what != "checkpoint" else ""
        raise UserInputError(f"{path}: fair-esm {what} not found{hint}")
    try:
        with torch.serialization.safe_globals([argparse.Namespace]):
            return torch.load(path, map_location="cpu", weights_only=True)
    except (pickle.UnpicklingError, RuntimeError, EOFError, zipfile.BadZipFile, ValueError, AttributeError, OSError) as exc:
        message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UserInputError(f"{path}: not a readable fair-esm {what} (truncated or another format: {message})") from exc

