"""The linear branches of :class:`~bioattn.models.activity.ActivityRegressor`, fitted in closed form, and the blend
of a trained deep model with a ridge regression (what ``bioattn train activity`` keeps by default).

- :func:`load_motif_set`: log-odds matrices of a motif database (JASPAR CORE vertebrates through pyjaspar by
  default, or a MEME file) and the model config that names them.
- :func:`motif_feature_matrix`: their :func:`~bioattn.models.activity.motif_scores` on sequences, the features of
  the motif branch and of the same-run motif ridge baseline.
- :func:`fit_kmer_branch`, :func:`fit_motif_branch`: the tuned ridge of the same-run baselines
  (:func:`~bioattn.tasks.activity.scores.fit_linear`: penalty by efficient leave-one-out CV over a wide log grid,
  features raw or standardised, whichever leaves the smaller leave-one-out error) on the standardised targets,
  copied into the model's branch with the features' training range (the branch clips to it) and frozen.
- :func:`blend_parts`: a copy of a trained model whose output is a weighted sum of its own and of ridges on
  k-mer counts and / or motif scores fitted on the model's training rows, in the model's standardised units
  (:func:`blend_with_ridge`: one ridge).
- :func:`choose_weights`: those weights (multiples of 0.1 summing to 1, :func:`weight_grid`), chosen on the rows
  the deep model early-stopped on (the ridges fitted on the other training rows); :func:`choose_deep_weight`: the
  same with one ridge.
- :func:`choose_kept`: the run's final choice: the blend only when it beats each of its parts on the members'
  held-out rows, otherwise the best part.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np
import torch
from torch import Tensor

from bioattn.errors import UserInputError
from bioattn.models.activity import ActivityRegressor, kmer_counts, motif_scores

#: What a blend adds to the deep model (``auto``: both ridges; ``none``: keep the deep model alone).
BLENDS = ("auto", "motifs", "kmers", "none")
DEFAULT_BLEND = "auto"
#: The ridge parts of each blend.
BLEND_PARTS = {"auto": ("kmers", "motifs"), "motifs": ("motifs",), "kmers": ("kmers",), "none": ()}
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


def _ridge_into(model: ActivityRegressor, branch: str, features: np.ndarray, scaled: np.ndarray,
                ddof: int = 0) -> float:
    """Fit the tuned, clipped ridge (:func:`~bioattn.tasks.activity.scores.fit_linear`) of ``features`` on
    ``scaled`` and copy it into the model's ``branch`` (``"kmer"`` or ``"motif"``): its centre and scale, its
    weights, and (a model with ``clip_features``) the features' training range; the branch is frozen."""
    from bioattn.tasks.activity.scores import fit_linear

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
    """Fit the model's k-mer branch on the standardised targets ``scaled (N, T)`` and freeze it; returns the chosen
    penalty (mean over targets)."""
    counts = kmer_counts(tokens, model.kmer_branch).double().numpy()
    return _ridge_into(model, "kmer", counts, scaled.double().numpy(), ddof=1)


def fit_motif_branch(model: ActivityRegressor, tokens: Tensor, scaled: Tensor,
                     features: np.ndarray | None = None) -> float:
    """Fit the model's motif branch (its matrices already set) like :func:`fit_kmer_branch`; ``features``: the
    branch's raw scores of ``tokens`` when already computed."""
    if features is None:
        with torch.no_grad():
            features = model.raw_motif_scores(tokens).double().numpy()
    return _ridge_into(model, "motif", features, scaled.double().numpy())


def blend_features(tokens: Tensor, blend: str, motif_set: MotifSet | None,
                   motif_features: np.ndarray | None = None, kmer_max: int = KMER_BLEND_MAX) -> np.ndarray:
    """The ridge features of one part (``"motifs"``: motif scores, ``"kmers"``: k-mer counts) of token ids
    ``(N, L)``."""
    if blend == "kmers":
        return kmer_counts(tokens, kmer_max).double().numpy()
    if motif_features is not None:
        return motif_features
    return motif_feature_matrix(tokens, motif_set or load_motif_set())


def weight_grid(parts: int, step: float = 0.1) -> list[tuple[float, ...]]:
    """Every ``(deep weight, part weights...)`` of multiples of ``step`` that sum to 1, the deep weight first
    (largest first)."""
    units = int(round(1 / step))

    def split(total: int, slots: int) -> list[tuple[int, ...]]:
        if slots == 1:
            return [(total,)]
        return [(first, *rest) for first in range(total, -1, -1) for rest in split(total - first, slots - 1)]

    return [tuple(round(u * step, 10) for u in combo) for combo in split(units, parts + 1)]


def weights_label(weights: tuple[float, ...]) -> str:
    return "/".join(f"{w:.1f}" for w in weights)


def choose_weights(deep: ActivityRegressor, parts: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]],
                   validation: tuple[Tensor, np.ndarray]) -> tuple[dict[str, float], dict[str, float]]:
    """``({"deep": w, part: w...}, {weights label: validation Pearson})``: the weights of :func:`weight_grid` whose
    blend of the deep model and one ridge per part (``parts[name] = (fit features, fit values, validation
    features)``, the ridge fitted on the fit rows) correlates best with the validation rows ``(tokens, values)``
    (mean Pearson over targets; on ties the larger deep weight, then the earlier part)."""
    from bioattn.tasks.activity.scores import fit_linear, regression_metrics

    tokens, values = validation
    names = [str(i) for i in range(values.shape[1])]
    columns = [deep.predict_tokens(tokens, batch_size=512)]
    for fit_features, fit_values, val_features in parts.values():
        columns.append(fit_linear(fit_features, fit_values).predict(val_features).reshape(len(values), -1))
    table, best, best_score = {}, None, -np.inf
    for combo in weight_grid(len(parts)):
        predicted = sum(w * c for w, c in zip(combo, columns))
        score = regression_metrics(values, predicted, names)["pearson"]
        table[weights_label(combo)] = score
        if round(score, 12) > round(best_score, 12):
            best, best_score = combo, score
    assert best is not None
    return dict(zip(["deep", *parts], best)), table


def choose_deep_weight(deep: ActivityRegressor, fit: tuple[np.ndarray, np.ndarray],
                       validation: tuple[Tensor, np.ndarray, np.ndarray]) -> tuple[float, dict[str, float]]:
    """``(deep weight, {weight: validation Pearson})`` of a blend with one ridge (fitted on ``fit = (features,
    values)``), chosen on the validation rows ``(tokens, features, values)``: :func:`choose_weights` with one
    part."""
    tokens, features, values = validation
    weights, table = choose_weights(deep, {"ridge": (fit[0], fit[1], features)}, (tokens, values))
    return weights["deep"], {label.split("/")[0]: score for label, score in table.items()}


def blend_parts(model: ActivityRegressor, tokens: Tensor, values: np.ndarray, weights: dict[str, float], *,
                motif_set: MotifSet | None = None, motif_features: np.ndarray | None = None,
                kmer_max: int = KMER_BLEND_MAX) -> ActivityRegressor:
    """A copy of the trained ``model`` whose output is ``weights["deep"]`` × its own plus, per part,
    ``weights["motifs"]`` × a ridge regression on motif scores (the matrices of ``motif_set``, default
    :func:`load_motif_set`; ``motif_features``: their scores of ``tokens`` when already computed) and
    ``weights["kmers"]`` × one on k-mer counts (k = 1..``kmer_max``), the ridges fitted on ``tokens (N, L)`` /
    ``values (N, T)`` (the rows the model trained on, flanks stripped; never rows the blend is scored on), in the
    model's standardised units, with their features clipped to the training range: one self-contained
    ActivityRegressor (a part of weight 0 is left out)."""
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
    with torch.no_grad():
        last = blended.head[-1]
        last.weight.mul_(weights.get("deep", 0.0))
        last.bias.mul_(weights.get("deep", 0.0))
    if use_motifs:
        blended.set_motif_matrices(motif_set.matrices)  # type: ignore[union-attr]
        fit_motif_branch(blended, tokens, scaled, motif_features)
        with torch.no_grad():
            blended.motif_linear.weight.mul_(weights["motifs"])
            blended.motif_linear.bias.mul_(weights["motifs"])
    if use_kmers:
        fit_kmer_branch(blended, tokens, scaled)
        with torch.no_grad():
            blended.kmer_linear.weight.mul_(weights["kmers"])
            blended.kmer_linear.bias.mul_(weights["kmers"])
    return blended.eval()


def blend_with_ridge(model: ActivityRegressor, tokens: Tensor, values: np.ndarray, *, blend: str = "motifs",
                     deep_weight: float = 0.5, motif_set: MotifSet | None = None,
                     motif_features: np.ndarray | None = None, kmer_max: int = KMER_BLEND_MAX) -> ActivityRegressor:
    """:func:`blend_parts` with one ridge (``blend``: ``"motifs"`` or ``"kmers"``): ``deep_weight`` × the model
    plus ``1 - deep_weight`` × the ridge."""
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
