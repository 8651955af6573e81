"""Closed-form linear branches of :class:`~bioattn.models.activity.ActivityRegressor` and deep + ridge blends."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np
import torch
from torch import Tensor

from bioattn.errors import UserInputError
from bioattn.models.activity import ActivityRegressor, kmer_counts, motif_scores
from bioattn.models.ensemble import ensemble_members
from bioattn.tasks.activity.scores import fit_linear, regression_metrics

#: What a blend adds to the deep model (``auto``: both ridges; ``none``: keep the deep model alone).
BLENDS = ("auto", "motifs", "kmers", "none")
DEFAULT_BLEND = "auto"
BLEND_PARTS = {"auto": ("kmers", "motifs"), "motifs": ("motifs",), "kmers": ("kmers",), "none": ()}
#: ``None``: the deep weight is chosen on the validation rows.
DEFAULT_DEEP_WEIGHT: float | None = None
#: Fewer validation rows than this cannot choose a weight: the deep model is kept alone (weight 1).
MIN_BLEND_VALIDATION = 20
DEFAULT_MOTIF_DB = "jaspar"
#: Parts of the element scored separately by the motif branch (5′ half, 3′ half).
DEFAULT_MOTIF_BINS = 2
KMER_BLEND_MAX = 6


@dataclass(frozen=True)
class MotifSet:
    """Log-odds matrices ``(4, W_i)`` and the ``motifs`` config of a model's motif branch."""

    config: dict[str, Any]
    matrices: list[np.ndarray]

    def tensor(self) -> Tensor:
        """``(M, 4, max W)`` float32, zero-padded on the right."""
        out = torch.zeros(len(self.matrices), 4, max(self.config["widths"]))
        for index, matrix in enumerate(self.matrices):
            out[index, :, : matrix.shape[1]] = torch.as_tensor(matrix, dtype=torch.float32)
        return out


def load_motif_set(spec: str = DEFAULT_MOTIF_DB, bins: int = DEFAULT_MOTIF_BINS) -> MotifSet:
    """The motif database ``spec`` (:func:`bioattn.data.motif_db.load_motif_database`) as a :class:`MotifSet`."""
    from bioattn.data.motif_db import load_motif_database, log_odds_matrices
    if bins < 1:
        raise UserInputError(f"--motif-bins must be >= 1, got {bins}")
    database = load_motif_database(spec)
    if database is None:
        raise UserInputError("the motif branch needs a motif database (--motif-db jaspar or a MEME file), not 'none'")
    matrices = log_odds_matrices(database)
    config = {"ids": list(database.ids), "names": list(database.names), "widths": [m.shape[1] for m in matrices],
              "bins": int(bins), "source": database.label}
    return MotifSet(config, matrices)


@torch.no_grad()
def motif_feature_matrix(tokens: Tensor, motif_set: MotifSet) -> np.ndarray:
    """``(N, 2 × bins × M)`` float64 motif scores of token ids ``(N, L)``."""
    return motif_scores(tokens, motif_set.tensor(), motif_set.config["widths"],
                        motif_set.config["bins"]).double().numpy()


def _ridge_into(model: ActivityRegressor, branch: str, features: np.ndarray, scaled: np.ndarray,
                ddof: int = 0) -> float:
    """Fit :func:`~bioattn.tasks.activity.scores.fit_linear` into the frozen ``branch`` (``kmer`` / ``motif``)."""
    fitted = fit_linear(features, scaled, ddof=ddof)
    linear = getattr(model, f"{branch}_linear")
    with torch.no_grad():
        getattr(model, f"{branch}_mean").copy_(torch.as_tensor(fitted.mean))
        getattr(model, f"{branch}_scale").copy_(torch.as_tensor(fitted.scale))
        linear.weight.copy_(torch.as_tensor(fitted.coef))
        linear.bias.copy_(torch.as_tensor(fitted.intercept))
    if model.clip_features:
        model.set_feature_range(branch, fitted.low, fitted.high)
    linear.requires_grad_(False)
    return float(np.mean(fitted.alpha))


def fit_kmer_branch(model: ActivityRegressor, tokens: Tensor, scaled: Tensor) -> float:
    """Fit and freeze the k-mer branch on ``scaled (N, T)``; returns the mean chosen penalty."""
    counts = kmer_counts(tokens, model.kmer_branch).double().numpy()
    return _ridge_into(model, "kmer", counts, scaled.double().numpy(), ddof=1)


def fit_motif_branch(model: ActivityRegressor, tokens: Tensor, scaled: Tensor,
                     features: np.ndarray | None = None) -> float:
    """:func:`fit_kmer_branch` for the motif branch; ``features``: its raw scores of ``tokens``, if computed."""
    if features is None:
        with torch.no_grad():
            features = model.raw_motif_scores(tokens).double().numpy()
    return _ridge_into(model, "motif", features, scaled.double().numpy())


def blend_features(tokens: Tensor, blend: str, motif_set: MotifSet | None, motif_features: np.ndarray | None = None,
                   kmer_max: int = KMER_BLEND_MAX) -> np.ndarray:
    """``(N, L)`` → the ridge features of one part (``motifs`` / ``kmers``)."""
    if blend == "kmers":
        return kmer_counts(tokens, kmer_max).double().numpy()
    if motif_features is not None:
        return motif_features
    return motif_feature_matrix(tokens, motif_set or load_motif_set())


def weight_grid(parts: int, step: float = 0.1) -> list[tuple[float, ...]]:
    """Every ``(deep weight, part weights...)`` of multiples of ``step`` summing to 1, largest deep weight first."""
    units = int(round(1 / step))

    def split(total: int, slots: int) -> list[tuple[int, ...]]:
        if slots == 1:
            return [(total,)]
        return [(first, *rest) for first in range(total, -1, -1) for rest in split(total - first, slots - 1)]

    return [tuple(round(u * step, 10) for u in combo) for combo in split(units, parts + 1)]


def choose_weights(deep: ActivityRegressor, parts: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]],
                   validation: tuple[Tensor, np.ndarray]) -> tuple[dict[str, float], dict[str, float]]:
    """``({"deep": w, part: w...}, {label: validation Pearson})`` of the best :func:`weight_grid` blend."""
    tokens, values = validation
    names = [str(i) for i in range(values.shape[1])]
    columns = [deep.predict_tokens(tokens, batch_size=512)]
    for fit_features, fit_values, val_features in parts.values():
        columns.append(fit_linear(fit_features, fit_values).predict(val_features).reshape(len(values), -1))
    table, best, best_score = {}, None, -np.inf
    for combo in weight_grid(len(parts)):
        predicted = sum(w * c for w, c in zip(combo, columns))
        score = regression_metrics(values, predicted, names)["pearson"]
        table["/".join(f"{w:.1f}" for w in combo)] = score
        if round(score, 12) > round(best_score, 12):
            best, best_score = combo, score
    assert best is not None
    return dict(zip(["deep", *parts], best)), table


def choose_deep_weight(deep: ActivityRegressor, fit: tuple[np.ndarray, np.ndarray],
                       validation: tuple[Tensor, np.ndarray, np.ndarray]) -> tuple[float, dict[str, float]]:
    """:func:`choose_weights` with one ridge part: ``(deep weight, {weight: validation Pearson})``."""
    tokens, features, values = validation
    weights, table = choose_weights(deep, {"ridge": (fit[0], fit[1], features)}, (tokens, values))
    return weights["deep"], {label.split("/")[0]: score for label, score in table.items()}


def blend_parts(model: ActivityRegressor, tokens: Tensor, values: np.ndarray, weights: dict[str, float], *,
                motif_set: MotifSet | None = None, motif_features: np.ndarray | None = None,
                kmer_max: int = KMER_BLEND_MAX) -> ActivityRegressor:
    """A copy of ``model`` adding ridges fitted on ``tokens (N, L)`` / ``values (N, T)``, weighted by ``weights``."""
    unknown = set(weights) - {"deep", "motifs", "kmers"}
    if unknown:
        raise UserInputError(f"blend parts must be deep, motifs or kmers, got {sorted(unknown)}")
    if any(not 0 <= w <= 1 for w in weights.values()) or abs(sum(weights.values()) - 1) > 1e-6:
        raise UserInputError(f"blend weights must be in [0, 1] and sum to 1, got {weights}")
    use_motifs, use_kmers = weights.get("motifs", 0) > 0, weights.get("kmers", 0) > 0
    if use_motifs:
        motif_set = motif_set or load_motif_set()
    config = {**model.config, "kmer_branch": kmer_max if use_kmers else 0,
              "motifs": motif_set.config if use_motifs else None, "clip_features": True}  # type: ignore[union-attr]
    blended = ActivityRegressor(**config)
    state = {k: v for k, v in model.state_dict().items() if not k.startswith(("kmer_", "motif_"))}
    missing, unexpected = blended.load_state_dict(state, strict=False)
    if unexpected or any(not k.startswith(("kmer_", "motif_")) for k in missing):
        raise ValueError(f"cannot copy the weights (missing {missing}, unexpected {unexpected})")
    scaled = torch.as_tensor((np.asarray(values) - blended.target_mean.numpy()) / blended.target_sd.numpy(),
                             dtype=torch.float32)
    layers = {"deep": blended.head[-1]}
    if use_motifs:
        blended.set_motif_matrices(motif_set.matrices)  # type: ignore[union-attr]
        fit_motif_branch(blended, tokens, scaled, motif_features)
        layers["motifs"] = blended.motif_linear
    if use_kmers:
        fit_kmer_branch(blended, tokens, scaled)
        layers["kmers"] = blended.kmer_linear
    with torch.no_grad():
        for name, layer in layers.items():
            layer.weight.mul_(weights.get(name, 0.0))
            layer.bias.mul_(weights.get(name, 0.0))
    return blended.eval()


def blend_with_ridge(model: ActivityRegressor, tokens: Tensor, values: np.ndarray, *, blend: str = "motifs",
                     deep_weight: float = 0.5, motif_set: MotifSet | None = None,
                     motif_features: np.ndarray | None = None, kmer_max: int = KMER_BLEND_MAX) -> ActivityRegressor:
    """:func:`blend_parts` with one ridge: ``deep_weight`` × the model + ``1 - deep_weight`` × the ridge."""
    if blend not in ("motifs", "kmers"):
        raise UserInputError(f"blend must be 'motifs' or 'kmers', got {blend!r}")
    if not 0 <= deep_weight <= 1:
        raise UserInputError(f"the deep weight must be between 0 and 1, got {deep_weight}")
    return blend_parts(model, tokens, values, {"deep": deep_weight, blend: 1 - deep_weight}, motif_set=motif_set,
                       motif_features=motif_features, kmer_max=kmer_max)


def _motif_weights(model: ActivityRegressor, target: int) -> dict[tuple[str, int, int, str], tuple[str, float]]:
    """``{(id, part, bins, score kind): (name, weight)}`` of one model's motif branch (``{}`` without one)."""
    if model.motifs is None:
        return {}
    ids, names, bins = model.motifs["ids"], model.motifs["names"], model.motifs["bins"]
    weights = model.motif_linear.weight[target].detach().double().cpu().numpy()
    table = {}
    for column, weight in enumerate(weights):
        part, rest = divmod(column, 2 * len(ids))
        kind, index = divmod(rest, len(ids))
        table[(ids[index], part, bins, ("best", "soft count")[kind])] = (names[index], float(weight))
    return table


def choose_kept(fold_scores: Sequence[Mapping[str, float]], parts: Sequence[str]) -> tuple[str, dict[str, float]]:
    """``(kept, {candidate: mean score})``: ``"blend"`` only if its mean beats every part's, else the best part."""
    means = {name: float(np.mean([scores[name] for scores in fold_scores])) for name in ("blend", *parts)}
    best = max(parts, key=lambda name: (means[name], -list(parts).index(name)))
    return ("blend" if means["blend"] > means[best] else best), means


def top_motif_weights(model: Any, count: int = 10, target: int | str = 0) -> list[dict[str, Any]]:
    """The ``count`` largest motif-branch weights of a model or an ensemble (mean over members); ``[]`` if none."""
    members = list(model) if isinstance(model, (list, tuple)) else ensemble_members(model)
    if not members:
        raise UserInputError("top_motif_weights: no model given")
    if isinstance(target, str):
        if target not in members[0].target_names:
            raise UserInputError(f"target {target!r}: the model predicts {', '.join(members[0].target_names)}")
        target = members[0].target_names.index(target)
    if not 0 <= target < members[0].num_targets:
        raise UserInputError(f"target {target}: the model has {members[0].num_targets} output(s)")
    tables = [_motif_weights(member, target) for member in members]
    keys = list(dict.fromkeys(key for table in tables for key in table))
    if not keys:
        return []
    names = {key: table[key][0] for table in tables for key in table}
    per_member = np.array([[table[key][1] if key in table else 0.0 for table in tables] for key in keys])  # (F, M)
    mean = per_member.mean(1)
    rows = []
    for row in np.argsort(-np.abs(mean), kind="stable")[:count]:
        motif_id, part, bins, kind = keys[row]
        entry = {"id": motif_id, "name": names[keys[row]], "part": part, "of": bins, "score": kind,
                 "weight": float(mean[row])}
        if len(members) > 1:
            entry.update(weight_sd=float(per_member[row].std()), member_weights=[float(w) for w in per_member[row]],
                         members_with_branch=sum(bool(table) for table in tables))
        rows.append(entry)
    return rows
