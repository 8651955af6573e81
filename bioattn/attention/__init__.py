"""Attention blocks shared by every bioattn model.

- :func:`scaled_dot_product_attention` (the one attention path; :data:`BLOCKED_SCORE`), :func:`set_backend`,
  :func:`use_backend`, :func:`get_backend` (the kernel behind every block), :func:`apply_in_chunks`.
- :class:`MultiHeadAttention`, :class:`TransformerEncoderLayer`, :class:`TransformerEncoder`.
- :class:`SinusoidalPositionalEncoding`, :class:`LearnedPositionalEncoding`.
- :class:`RowAttention`, :class:`ColumnAttention`, :class:`AxialTransformerLayer`: axial attention over MSAs.

Causal attention: pass ``causal=True`` to a block.
"""
from bioattn.attention.axial import AxialTransformerLayer, ColumnAttention, RowAttention
from bioattn.attention.backends import BACKENDS, get_backend, set_backend, use_backend
from bioattn.attention.chunking import apply_in_chunks
from bioattn.attention.encoder import FeedForward, TransformerEncoder, TransformerEncoderLayer
from bioattn.attention.mha import MultiHeadAttention
from bioattn.attention.positional import LearnedPositionalEncoding, SinusoidalPositionalEncoding
from bioattn.attention.sdpa import BLOCKED_SCORE, scaled_dot_product_attention

__all__ = [
    "scaled_dot_product_attention", "BLOCKED_SCORE", "BACKENDS", "set_backend", "get_backend", "use_backend",
    "apply_in_chunks", "MultiHeadAttention", "FeedForward", "TransformerEncoderLayer", "TransformerEncoder",
    "SinusoidalPositionalEncoding", "LearnedPositionalEncoding", "RowAttention", "ColumnAttention",
    "AxialTransformerLayer",
]
