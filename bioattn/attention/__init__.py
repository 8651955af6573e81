"""Attention blocks shared by every bioattn model.

- :func:`scaled_dot_product_attention`: the one attention path of every block; fused by default, explicit with
  ``need_weights=True``. :data:`BLOCKED_SCORE`: float-mask entries at or below it block their key.
- :func:`set_backend`, :func:`use_backend`, :func:`get_backend`: choose the kernel behind every block
  (``"auto"``, ``"math"``, ``"flash"``, ``"efficient"``, ``"cudnn"``, ``"explicit"``).
- :func:`apply_in_chunks`: run a function over chunks of batch-like dims, exactly, to bound memory.
- :class:`MultiHeadAttention`: batch-first self/cross attention, grouped/multi-query K/V.
- :class:`TransformerEncoderLayer`, :class:`TransformerEncoder`: residual + norm + feed-forward.
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
