"""Activity regressor: DNA sequence → one or more measured activities (MPRA log2(RNA/DNA), expression, ...).

Element token ids → conv stem and residual conv blocks pooling by 2 → :class:`~bioattn.attention.TransformerEncoder`
→ masked mean pooling (the *embedding*) → MLP head, plus optional linear branches over :func:`kmer_counts` and
:func:`motif_scores`.
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from bioattn.attention import LearnedPositionalEncoding, TransformerEncoder
from bioattn.data.dna import A_ID, PAD_ID, VOCAB_SIZE, encode, reverse_complement_ids
from bioattn.errors import UserInputError
from bioattn.models.base import PretrainedModel

__all__ = ["ActivityRegressor", "STRANDS", "kmer_counts", "motif_scores", "strip_flanks"]

STRANDS = ("forward", "both")


def strip_flanks(sequence: str, flanks: Sequence[str]) -> str:
    """``sequence`` without the constant 5′ / 3′ flank where it carries it (case-insensitive); unchanged otherwise."""
    five, three = (flanks[0] or "", flanks[1] or "") if flanks else ("", "")
    upper = sequence.upper()
    if five and upper.startswith(five.upper()):
        sequence, upper = sequence[len(five):], upper[len(five):]
    if three and upper.endswith(three.upper()):
        sequence = sequence[: len(sequence) - len(three)]
    return sequence


def kmer_counts(tokens: Tensor, kmax: int) -> Tensor:
    """Counts of every A/C/G/T k-mer, k = 1..``kmax``, lexicographic per k: ``(B, L)`` → ``(B, 4 + ... + 4^kmax)``."""
    base = tokens - A_ID
    valid = (base >= 0) & (base < 4)
    base = base.clamp(0, 3)
    features = []
    for k in range(1, kmax + 1):
        counts = torch.zeros(tokens.shape[0], 4**k, device=tokens.device)
        if tokens.shape[1] >= k:
            weights = 4 ** torch.arange(k - 1, -1, -1, device=tokens.device)
            index = (base.unfold(1, k, 1) * weights).sum(-1)
            ok = valid.unfold(1, k, 1).all(-1)
            counts.scatter_add_(1, index * ok, ok.to(counts.dtype))
        features.append(counts)
    return torch.cat(features, dim=1)


#: Motif widths are rounded up to a multiple of this to share one convolution (a matrix's extra columns are 0).
MOTIF_WIDTH_STEP = 4
#: Rows scored at once by :func:`motif_scores`.
MOTIF_CHUNK = 64


def one_hot(tokens: Tensor) -> Tensor:
    """``(B, 4, L)`` float one-hot (rows A, C, G, T) of token ids ``(B, L)``; ``N`` and padding are all zero."""
    base = tokens - A_ID
    valid = (base >= 0) & (base < 4)
    return (F.one_hot(base.clamp(0, 3), 4) * valid.unsqueeze(-1)).transpose(1, 2).float()


def motif_scores(tokens: Tensor, matrices: Tensor, widths: Sequence[int], bins: int = 1) -> Tensor:
    """Scores of M log-odds ``matrices (M, 4, W)`` (matrix i uses ``widths[i]`` columns) on token ids ``(B, L)`` →
    ``(B, 2 * bins * M)``: per part of ``bins`` (by window start), per matrix, ``max(0, best score)`` over both
    strands, then ``log(1 + Σ_p exp(s_p))``; part 0's M best scores, its M soft counts, then part 1's, ...
    """
    widths_t = torch.as_tensor(list(widths), dtype=torch.long)
    if matrices.dim() != 3 or matrices.shape[1] != 4 or len(widths_t) != matrices.shape[0]:
        raise ValueError(f"matrices must be (M, 4, W) with one width each, got {tuple(matrices.shape)}")
    if bins < 1:
        raise ValueError(f"bins must be >= 1, got {bins}")
    buckets: dict[int, list[int]] = {}
    for index, width in enumerate(widths_t.tolist()):
        padded = -(-int(width) // MOTIF_WIDTH_STEP) * MOTIF_WIDTH_STEP
        buckets.setdefault(min(padded, matrices.shape[2]), []).append(index)
    order = torch.tensor([i for width in sorted(buckets) for i in buckets[width]], dtype=torch.long)
    inverse = torch.empty_like(order)
    inverse[order] = torch.arange(len(order))
    inverse = inverse.to(matrices.device)
    # each matrix's reverse complement within its own width, zero-padded on the right like the matrix
    columns = torch.arange(matrices.shape[2], device=matrices.device)[None, :]
    width_col = widths_t.to(matrices.device)[:, None]
    source = (width_col - 1 - columns).clamp_min(0)[:, None, :].expand(-1, 4, -1)
    reverse = matrices.flip(1).gather(2, source) * (columns < width_col)[:, None, :].to(matrices.dtype)
    lengths = (tokens != PAD_ID).sum(1)
    weights = {width: torch.cat([matrices[rows, :, :width], reverse[rows, :, :width]])
               for width in sorted(buckets) for rows in [torch.tensor(buckets[width], device=matrices.device)]}
    out = []
    for start in range(0, tokens.shape[0], MOTIF_CHUNK):
        ids = tokens[start : start + MOTIF_CHUNK]
        x = one_hot(ids).to(matrices.dtype)
        per_bucket = []
        for width, weight in weights.items():
            both = F.conv1d(F.pad(x, (0, width - 1)), weight)
            per_bucket.append(torch.maximum(*both.chunk(2, dim=1)))
        scores = torch.cat(per_bucket, 1)  # (b, M, L), matrices in bucket order
        features = scores.new_zeros(len(ids), bins, 2, matrices.shape[0])
        chunk_lengths = lengths[start : start + MOTIF_CHUNK].clamp_min(1)
        for length in chunk_lengths.unique().tolist():
            rows = (chunk_lengths == length).nonzero()[:, 0]
            if len(rows) == len(ids):
                rows = slice(None)
            for b in range(bins):  # window starts p with b * length <= p * bins < (b + 1) * length
                lo, hi = -(-b * length // bins), -(-(b + 1) * length // bins)
                if hi > lo:
                    part = scores[rows, :, lo:hi]
                    features[rows, b, 0] = part.amax(-1).clamp_min(0.0)
                    features[rows, b, 1] = F.softplus(torch.logsumexp(part, -1))
        out.append(features[..., inverse].flatten(1))  # matrices in their given order
    return torch.cat(out) if out else matrices.new_zeros(0, 2 * bins * matrices.shape[0])


class _SqueezeExcite(nn.Module):
    def __init__(self, channels: int, reduction: int = 4) -> None:
        super().__init__()
        hidden = max(channels // reduction, 4)
        self.down, self.up = nn.Linear(channels, hidden), nn.Linear(hidden, channels)

    def forward(self, x: Tensor, keep: Tensor) -> Tensor:  # x (B, C, L), keep (B, 1, L)
        pooled = (x * keep).sum(-1) / keep.sum(-1).clamp_min(1.0)
        return x * torch.sigmoid(self.up(F.silu(self.down(pooled))))[:, :, None]


class _ConvBlock(nn.Module):
    """``x + SE(BN(conv(SiLU(BN(conv(x))))))`` then SiLU; padding positions kept at zero."""

    def __init__(self, channels: int, kernel: int, dropout: float) -> None:
        super().__init__()
        self.conv1 = nn.Conv1d(channels, channels, kernel, padding=kernel // 2)
        self.norm1 = nn.BatchNorm1d(channels)
        self.conv2 = nn.Conv1d(channels, channels, kernel, padding=kernel // 2)
        self.norm2 = nn.BatchNorm1d(channels)
        self.se = _SqueezeExcite(channels)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor, keep: Tensor) -> Tensor:
        branch = F.silu(self.norm1(self.conv1(x))) * keep
        branch = self.se(self.norm2(self.conv2(self.dropout(branch))), keep)
        return F.silu(x + branch) * keep


class ActivityRegressor(PretrainedModel):
    """Sequence → ``T`` activities (regression), with a convolutional stem and an attention encoder.

    Args:
        target_mean, target_sd: per target, the training mean and sd; outputs are ``mean + sd * head``.
        flanks: ``[5′, 3′]`` constant adapters removed from raw strings; strand: ``"forward"`` or ``"both"``.
        channels, kernel, stages: the conv stem (width, odd kernel size, residual blocks each pooling by 2).
        kmer_branch, motifs: 0 / None (off), or linear branches over the k-mer counts, k = 1..K, and the scores of
            the motif matrices ``{"ids", "names", "widths", "bins", "source"}`` (:meth:`set_motif_matrices`).
        clip_features: clip each branch's raw features to their training range (:meth:`set_feature_range`).
    """

    def __init__(self, *, input_length: int = 200, target_names: Sequence[str] = ("activity",),
                 target_mean: Sequence[float] | None = None, target_sd: Sequence[float] | None = None,
                 flanks: Sequence[str] = ("", ""), strand: str = "forward", channels: int = 64, kernel: int = 7,
                 stages: int = 3, embed_dim: int = 64, num_heads: int = 4, num_layers: int = 2, dropout: float = 0.1,
                 kmer_branch: int = 0, motifs: Mapping[str, Any] | None = None, clip_features: bool = False) -> None:
        super().__init__()
        target_names = [str(name) for name in target_names]
        count = len(target_names)
        if count < 1 or len(set(target_names)) != count:
            raise ValueError(f"target_names must be one or more distinct names, got {target_names}")
        target_mean = [0.0] * count if target_mean is None else [float(v) for v in target_mean]
        target_sd = [1.0] * count if target_sd is None else [float(v) for v in target_sd]
        if len(target_mean) != count or len(target_sd) != count or min(target_sd) <= 0:
            raise ValueError("target_mean and target_sd need one value per target (sd > 0)")
        if input_length < 1 or kernel < 1 or kernel % 2 == 0 or stages < 0 or channels < 1:
            raise ValueError("input_length >= 1, an odd kernel, stages >= 0 and channels >= 1 are required")
        if embed_dim % num_heads:
            raise ValueError(f"embed_dim ({embed_dim}) must be divisible by num_heads ({num_heads})")
        if strand not in STRANDS:
            raise ValueError(f"strand must be one of {', '.join(STRANDS)}, got {strand!r}")
        flanks = [str(flanks[0] or "").upper(), str(flanks[1] or "").upper()]
        self.config: dict[str, Any] = {
            "input_length": input_length, "target_names": target_names, "target_mean": target_mean,
            "target_sd": target_sd, "flanks": flanks, "strand": strand, "channels": channels, "kernel": kernel,
            "stages": stages, "embed_dim": embed_dim, "num_heads": num_heads, "num_layers": num_layers,
            "dropout": dropout, "kmer_branch": kmer_branch}
        if motifs is not None:
            widths = [int(w) for w in motifs["widths"]]
            ids = [str(i) for i in motifs["ids"]]
            if not widths or len(ids) != len(widths) or min(widths) < 1:
                raise ValueError("motifs needs one id and one width >= 1 per matrix")
            motifs = {"ids": ids, "names": [str(n) for n in motifs.get("names", ids)], "widths": widths,
                      "bins": int(motifs.get("bins", 1)), "source": str(motifs.get("source", ""))}
            if motifs["bins"] < 1:
                raise ValueError(f"motifs['bins'] must be >= 1, got {motifs['bins']}")
            self.config["motifs"] = motifs
        self.clip_features = bool(clip_features)
        if self.clip_features:  # absent from the config of older models
            self.config["clip_features"] = True
        self.input_length, self.target_names, self.flanks, self.strand = input_length, target_names, flanks, strand
        self.register_buffer("target_mean", torch.tensor(target_mean), persistent=False)
        self.register_buffer("target_sd", torch.tensor(target_sd), persistent=False)
        self.embedding = nn.Embedding(VOCAB_SIZE, channels, padding_idx=PAD_ID)
        self.stem = nn.Conv1d(channels, channels, kernel, padding=kernel // 2)
        self.stem_norm = nn.BatchNorm1d(channels)
        self.blocks = nn.ModuleList(_ConvBlock(channels, kernel, dropout) for _ in range(stages))
        self.project = nn.Linear(channels, embed_dim)
        tokens = input_length
        for _ in range(stages):
            tokens = (tokens + 1) // 2
        self.positional = LearnedPositionalEncoding(tokens, embed_dim)
        self.encoder = TransformerEncoder(embed_dim, num_heads, num_layers, dropout=dropout, attention_dropout=0.0,
                                          ffn_dropout=0.0, norm_first=True)
        self.head = nn.Sequential(nn.Linear(embed_dim, embed_dim), nn.SiLU(), nn.Dropout(dropout),
                                  nn.Linear(embed_dim, count))
        self.kmer_branch = kmer_branch
        if kmer_branch:
            self._linear_branch("kmer", sum(4**k for k in range(1, kmer_branch + 1)), count)
        self.motifs = motifs
        if motifs is not None:
            self.register_buffer("motif_matrices", torch.zeros(len(motifs["widths"]), 4, max(motifs["widths"])))
            self._linear_branch("motif", 2 * motifs["bins"] * len(motifs["widths"]), count)

    def _linear_branch(self, branch: str, features: int, outputs: int) -> None:
        """Buffers ``{branch}_mean``, ``_scale`` (and ``_low``, ``_high`` to clip to) and a zero ``{branch}_linear``."""
        self.register_buffer(f"{branch}_mean", torch.zeros(features))
        self.register_buffer(f"{branch}_scale", torch.ones(features))
        if self.clip_features:
            self.register_buffer(f"{branch}_low", torch.full((features,), -torch.inf))
            self.register_buffer(f"{branch}_high", torch.full((features,), torch.inf))
        linear = nn.Linear(features, outputs)
        nn.init.zeros_(linear.weight)
        nn.init.zeros_(linear.bias)
        setattr(self, f"{branch}_linear", linear)

    def set_feature_range(self, branch: str, low: Tensor | np.ndarray, high: Tensor | np.ndarray) -> None:
        """Store the training range ``(F,)`` of the raw features of ``branch`` (``"kmer"`` or ``"motif"``)."""
        if not self.clip_features:
            raise ValueError("this model has no feature ranges (built without clip_features)")
        with torch.no_grad():
            getattr(self, f"{branch}_low").copy_(torch.as_tensor(np.asarray(low)))
            getattr(self, f"{branch}_high").copy_(torch.as_tensor(np.asarray(high)))

    def _clip(self, branch: str, features: Tensor) -> Tensor:
        if not self.clip_features:
            return features
        return torch.minimum(torch.maximum(features, getattr(self, f"{branch}_low")), getattr(self, f"{branch}_high"))

    @property
    def num_targets(self) -> int:
        return len(self.target_names)

    @property
    def embedding_dim(self) -> int:
        """Width D of :meth:`embed`'s vectors."""
        return int(self.config["embed_dim"])

    def standardised(self, tokens: Tensor) -> tuple[Tensor, Tensor]:
        """``(head output (B, T) in training-sd units, pooled embedding (B, D))`` for ``tokens (B, L)``."""
        if tokens.dim() != 2 or tokens.shape[1] > self.input_length:
            raise ValueError(f"tokens must be (B, L) with L <= {self.input_length}, got {tuple(tokens.shape)}")
        keep = (tokens != PAD_ID).unsqueeze(1).to(self.embedding.weight.dtype)  # (B, 1, L)
        x = self.embedding(tokens).transpose(1, 2) * keep
        x = F.silu(self.stem_norm(self.stem(x))) * keep
        for block in self.blocks:
            x = block(x, keep)
            x = F.max_pool1d(x, 2, ceil_mode=True)
            keep = F.max_pool1d(keep, 2, ceil_mode=True)
            x = x * keep
        hidden = self.positional(self.project(x.transpose(1, 2)))
        padding = keep[:, 0] == 0  # (B, L')
        hidden, _ = self.encoder(hidden, key_padding_mask=padding if bool(padding.any()) else None)
        weights = (~padding).unsqueeze(-1).to(hidden.dtype)
        embedding = (hidden * weights).sum(1) / weights.sum(1).clamp_min(1.0)
        with torch.autocast(hidden.device.type, enabled=False):
            out = self.head(embedding.float())
            if self.kmer_branch:
                out = out + self.kmer_linear(self.kmer_features(tokens))
            if self.motifs is not None:
                out = out + self.motif_linear(self.motif_features(tokens))
        return out, embedding

    def kmer_features(self, tokens: Tensor) -> Tensor:
        """The standardised (with ``clip_features`` first clipped) k-mer counts ``(B, F)`` of the k-mer branch."""
        return (self._clip("kmer", kmer_counts(tokens, self.kmer_branch)) - self.kmer_mean) / self.kmer_scale

    def set_motif_matrices(self, matrices: Sequence[np.ndarray]) -> None:
        """Store the log-odds matrices ``(4, W_i)`` of the motif branch, one per ``config["motifs"]`` id."""
        if self.motifs is None:
            raise ValueError("this model has no motif branch (motifs=None)")
        if len(matrices) != len(self.motifs["widths"]):
            raise ValueError(f"expected {len(self.motifs['widths'])} matrices, got {len(matrices)}")
        with torch.no_grad():
            self.motif_matrices.zero_()
            for index, (matrix, width) in enumerate(zip(matrices, self.motifs["widths"])):
                matrix = torch.as_tensor(np.asarray(matrix), dtype=self.motif_matrices.dtype)
                if tuple(matrix.shape) != (4, width):
                    raise ValueError(f"matrix {self.motifs['ids'][index]}: expected (4, {width}), got {tuple(matrix.shape)}")
                self.motif_matrices[index, :, :width] = matrix

    def raw_motif_scores(self, tokens: Tensor) -> Tensor:
        """The unstandardised :func:`motif_scores` ``(B, 2 × bins × M)`` of the motif branch."""
        with torch.autocast(tokens.device.type, enabled=False):
            return motif_scores(tokens, self.motif_matrices.float(), self.motifs["widths"], self.motifs["bins"])

    def motif_features(self, tokens: Tensor) -> Tensor:
        """The standardised (with ``clip_features`` first clipped) motif scores ``(B, 2 × bins × M)``."""
        return (self._clip("motif", self.raw_motif_scores(tokens)) - self.motif_mean) / self.motif_scale

    def forward(self, tokens: Tensor) -> dict[str, Tensor]:
        """``tokens (B, L)`` → ``{"values": (B, T) in the training units, "embedding": (B, D)}`` (one strand)."""
        out, embedding = self.standardised(tokens)
        return {"values": out * self.target_sd + self.target_mean, "embedding": embedding}

    def tokenize(self, sequences: str | Sequence[str], records: Sequence[str] | None = None) -> Tensor:
        """Token ids ``(N, input_length)`` of raw strings, flanks stripped; ``records`` name them in errors."""
        if isinstance(sequences, str):
            sequences = [sequences]
        if len(sequences) == 0:
            raise UserInputError("no sequences given")
        out = torch.full((len(sequences), self.input_length), PAD_ID, dtype=torch.long)
        for index, sequence in enumerate(sequences):
            record = records[index] if records is not None else f"sequence {index}"
            ids = encode(strip_flanks(sequence, self.flanks), record=record)
            if len(ids) > self.input_length:
                raise UserInputError(f"{record}: {len(ids)} nt after removing the flanks; this model accepts at most "
                                     f"{self.input_length} nt (its training length)")
            out[index, : len(ids)] = torch.from_numpy(ids)
        return out

    @torch.no_grad()
    def _run(self, tokens: Tensor, key: str, batch_size: int, strand: str | None) -> np.ndarray:
        was_training = self.training
        self.eval()
        device = next(self.parameters()).device
        both = (strand or self.strand) == "both"
        chunks = []
        try:
            for start in range(0, len(tokens), batch_size):
                ids = tokens[start : start + batch_size].to(device)
                out = self(ids)[key]
                if both:
                    out = (out + self(reverse_complement_ids(ids, ids == PAD_ID))[key]) / 2
                chunks.append(out.double().cpu().numpy())
        finally:
            self.train(was_training)
        return np.concatenate(chunks)

    def predict_tokens(self, tokens: Tensor, *, batch_size: int = 256, strand: str | None = None) -> np.ndarray:
        """Values ``(N, T)`` float64 of token ids ``(N, L)`` (see :meth:`forward`), strands as :attr:`strand` says."""
        return self._run(tokens, "values", batch_size, strand)

    def predict(self, sequences: str | Sequence[str], *, batch_size: int = 256, strand: str | None = None,
                records: Sequence[str] | None = None) -> np.ndarray:
        """Activities ``(N, T)`` float64 of DNA strings (with or without the flanks); ``strand`` default: the run's."""
        return self.predict_tokens(self.tokenize(sequences, records), batch_size=batch_size, strand=strand)

    def embed(self, sequences: str | Sequence[str], *, batch_size: int = 256, strand: str | None = None) -> np.ndarray:
        """Pooled encoder embeddings ``(N, D)`` float64 of DNA strings (strands as in :meth:`predict`)."""
        return self._run(self.tokenize(sequences), "embedding", batch_size, strand)
