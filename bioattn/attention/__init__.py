"""Attention blocks shared by every bioattn model.

- :func:`scaled_dot_product_attention`: fused by default, explicit with ``need_weights=True``.
- :class:`MultiHeadAttention`: batch-first self/cross attention, grouped/multi-query K/V.
- :class:`TransformerEncoderLayer`, :class:`TransformerEncoder`: residual + norm + feed-forward.
- :class:`SinusoidalPositionalEncoding`, :class:`LearnedPositionalEncoding`.
- :class:`RowAttention`, :class:`ColumnAttention`, :class:`AxialTransformerLayer`: axial attention over MSAs.
"""
from bioattn.attention.axial import AxialTransformerLayer, ColumnAttention, RowAttention
from bioattn.attention.encoder import FeedForward, TransformerEncoder, TransformerEncoderLayer
from bioattn.attention.mha import MultiHeadAttention
from bioattn.attention.positional import LearnedPositionalEncoding, SinusoidalPositionalEncoding
from bioattn.attention.sdpa import causal_mask, scaled_dot_product_attention

__all__ = [
    "scaled_dot_product_attention",
    "causal_mask",
    "MultiHeadAttention",
    "FeedForward",
    "TransformerEncoderLayer",
    "TransformerEncoder",
    "SinusoidalPositionalEncoding",
    "LearnedPositionalEncoding",
    "RowAttention",
    "ColumnAttention",
    "AxialTransformerLayer",
]
