"""The linear branches of :class:`~bioattn.models.activity.ActivityRegressor`, fitted in closed form, and the blend
of a trained deep model with a ridge regression (what ``bioattn train activity`` keeps by default).

- :func:`load_motif_set`: log-odds matrices of a motif database (JASPAR CORE vertebrates through pyjaspar by
  default, or a MEME file) and the model config that names them.
- :func:`motif_feature_matrix`: their :func:`~bioattn.models.activity.motif_scores` on sequences, the features of
  the motif branch and of the same-run motif ridge baseline.
- :func:`fit_kmer_branch`, :func:`fit_motif_branch`: scikit-learn ``RidgeCV`` (penalty by efficient leave-one-out
  CV over :data:`~bioattn.tasks.activity.scores.RIDGE_ALPHAS`) on standardised features and targets, copied into
  the model's branch and frozen.
- :func:`blend_with_ridge`: a copy of a trained model whose output is ``deep_weight`` × its own plus
  ``1 - deep_weight`` × a ridge fitted on the model's training rows, in the model's standardised units.
- :func:`choose_deep_weight`: that weight, chosen on the rows the deep model early-stopped on (a ridge fitted on
  the other training rows), from :data:`DEEP_WEIGHT_GRID`: a deep model that learned what the ridge cannot keeps
  most of the weight, one that learned little gives it to the ridge.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import Tensor

from bioattn.errors import UserInputError
from bioattn.models.activity import ActivityRegressor, kmer_counts, motif_scores

#: What a blend adds to the deep model (``none``: keep the deep model alone).
BLENDS = ("motifs", "kmers", "none")
DEFAULT_BLEND = "motifs"
#: ``None``: the deep weight is chosen on the validation rows from :data:`DEEP_WEIGHT_GRID`.
DEFAULT_DEEP_WEIGHT: float | None = None
DEEP_WEIGHT_GRID = tuple(round(w, 1) for w in np.linspace(0, 1, 11))
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


def _ridge_into(linear: torch.nn.Linear, mean_buffer: Tensor, scale_buffer: Tensor, features: np.ndarray,
                scaled: np.ndarray, ddof: int = 0) -> float:
    from sklearn.linear_model import RidgeCV

    from bioattn.tasks.activity.scores import RIDGE_ALPHAS

    mean, sd = features.mean(0), features.std(0, ddof=ddof)
    sd = np.where(sd > 0, sd, 1.0)
    ridge = RidgeCV(alphas=RIDGE_ALPHAS, alpha_per_target=True).fit((features - mean) / sd, scaled)
    with torch.no_grad():
        mean_buffer.copy_(torch.as_tensor(mean))
        scale_buffer.copy_(torch.as_tensor(sd))
        linear.weight.copy_(torch.as_tensor(ridge.coef_.reshape(scaled.shape[1], -1)))
        linear.bias.copy_(torch.as_tensor(np.atleast_1d(ridge.intercept_)))
    linear.requires_grad_(False)
    return float(np.mean(ridge.alpha_))


def fit_kmer_branch(model: ActivityRegressor, tokens: Tensor, scaled: Tensor) -> float:
    """Fit the model's k-mer branch on the standardised targets ``scaled (N, T)`` and freeze it; returns the chosen
    penalty (mean over targets)."""
    counts = kmer_counts(tokens, model.kmer_branch).double().numpy()
    return _ridge_into(model.kmer_linear, model.kmer_mean, model.kmer_scale, counts, scaled.double().numpy(), ddof=1)


def fit_motif_branch(model: ActivityRegressor, tokens: Tensor, scaled: Tensor,
                     features: np.ndarray | None = None) -> float:
    """Fit the model's motif branch (its matrices already set) like :func:`fit_kmer_branch`; ``features``: the
    branch's raw scores of ``tokens`` when already computed."""
    if features is None:
        with torch.no_grad():
            features = model.raw_motif_scores(tokens).double().numpy()
    return _ridge_into(model.motif_linear, model.motif_mean, model.motif_scale, features, scaled.double().numpy())


def blend_features(tokens: Tensor, blend: str, motif_set: MotifSet | None,
                   motif_features: np.ndarray | None = None, kmer_max: int = KMER_BLEND_MAX) -> np.ndarray:
    """The ridge features of a ``blend`` (motif scores or k-mer counts) of token ids ``(N, L)``."""
    if blend == "kmers":
        return kmer_counts(tokens, kmer_max).double().numpy()
    if motif_features is not None:
        return motif_features
    return motif_feature_matrix(tokens, motif_set or load_motif_set())


def choose_deep_weight(deep: ActivityRegressor, fit: tuple[np.ndarray, np.ndarray],
                       validation: tuple[Tensor, np.ndarray, np.ndarray]) -> tuple[float, dict[str, float]]:
    """``(deep weight, {weight: validation Pearson})``: the weight of :data:`DEEP_WEIGHT_GRID` whose blend of the deep
    model and a ridge (fitted on ``fit = (features, values)``) correlates best with the validation rows
    ``(tokens, features, values)`` (mean Pearson over targets; the larger weight on ties)."""
    from bioattn.tasks.activity.scores import fit_feature_ridge, regression_metrics

    ridge = fit_feature_ridge(fit[0], fit[1])
    tokens, features, values = validation
    ridge_values = np.asarray(ridge.predict(features), dtype=np.float64).reshape(len(values), -1)
    deep_values = deep.predict_tokens(tokens, batch_size=512)
    names = [str(i) for i in range(values.shape[1])]
    table = {f"{w:.1f}": regression_metrics(values, w * deep_values + (1 - w) * ridge_values, names)["pearson"]
             for w in DEEP_WEIGHT_GRID}
    best = max(DEEP_WEIGHT_GRID, key=lambda w: (round(table[f"{w:.1f}"], 12), w))
    return float(best), table


def blend_with_ridge(model: ActivityRegressor, tokens: Tensor, values: np.ndarray, *, blend: str = DEFAULT_BLEND,
                     deep_weight: float = 0.5, motif_set: MotifSet | None = None,
                     motif_features: np.ndarray | None = None, kmer_max: int = KMER_BLEND_MAX) -> ActivityRegressor:
    """A copy of the trained ``model`` whose output is ``deep_weight`` × its own plus ``1 - deep_weight`` × a ridge
    regression on motif scores (``blend="motifs"``, the matrices of ``motif_set``, default
    :func:`load_motif_set`) or k-mer counts (``"kmers"``, k = 1..``kmer_max``) fitted on ``tokens (N, L)`` /
    ``values (N, T)`` (the rows the model trained on, flanks stripped; never rows the blend is scored on), in the
    model's standardised units: one self-contained ActivityRegressor."""
    if blend not in ("motifs", "kmers"):
        raise UserInputError(f"blend must be 'motifs' or 'kmers', got {blend!r}")
    if not 0 <= deep_weight <= 1:
        raise UserInputError(f"the deep weight must be between 0 and 1, got {deep_weight}")
    if blend == "motifs":
        motif_set = motif_set or load_motif_set()
        config = {**model.config, "kmer_branch": 0, "motifs": motif_set.config}
    else:
        config = {**model.config, "kmer_branch": kmer_max, "motifs": None}
    blended = ActivityRegressor(**config)
    state = {k: v for k, v in model.state_dict().items() if not k.startswith(("kmer_", "motif_"))}
    missing, unexpected = blended.load_state_dict(state, strict=False)
    if unexpected or any(not k.startswith(("kmer_", "motif_")) for k in missing):
        raise ValueError(f"cannot copy the weights (missing {missing}, unexpected {unexpected})")
    scaled = torch.as_tensor((np.asarray(values) - blended.target_mean.numpy()) / blended.target_sd.numpy(),
                             dtype=torch.float32)
    if blend == "motifs":
        blended.set_motif_matrices(motif_set.matrices)  # type: ignore[union-attr]
        fit_motif_branch(blended, tokens, scaled, motif_features)
        branch = blended.motif_linear
    else:
        fit_kmer_branch(blended, tokens, scaled)
        branch = blended.kmer_linear
    with torch.no_grad():
        last = blended.head[-1]
        last.weight.mul_(deep_weight)
        last.bias.mul_(deep_weight)
        branch.weight.mul_(1 - deep_weight)
        branch.bias.mul_(1 - deep_weight)
    return blended.eval()


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
    """``(kept, {candidate: mean score})``: ``"blend"`` when the blend's mean over the members (``fold_scores``: per
    member, the held-out headline of ``"blend"`` and of each of ``parts``, larger is better) beats every part's,
    otherwise the part with the best mean (the earlier part on ties): a blend that does not beat each of its parts
    on the same rows is never kept."""
    means = {name: float(np.mean([scores[name] for scores in fold_scores])) for name in ("blend", *parts)}
    best = max(parts, key=lambda name: (means[name], -list(parts).index(name)))
    return ("blend" if means["blend"] > means[best] else best), means


def top_motif_weights(model: Any, count: int = 10, target: int | str = 0) -> list[dict[str, Any]]:
    """The ``count`` motif-branch features with the largest weights (in sd of the target per sd of the score):
    ``{"id", "name", "part", "of", "score", "weight"}``; part 0 is the 5′ end. ``target``: an output's index or name.

    ``model``: an :class:`~bioattn.models.activity.ActivityRegressor`, or an ensemble of them (an
    :class:`~bioattn.models.ensemble.Ensemble`, or the list of its members, as
    :func:`~bioattn.tasks.activity.predict.load_activity_models` returns): then ``weight`` is the mean over the
    members (a member without a motif branch counts 0: the ensemble averages the members' outputs), ranked by its
    size, with ``weight_sd`` (over the members), ``member_weights`` (one per member) and ``members_with_branch``.
    ``[]`` only when no member has a motif branch (a run with ``--blend none`` or ``kmers``, or whose deep model
    was kept alone)."""
    from bioattn.models.ensemble import ensemble_members

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
