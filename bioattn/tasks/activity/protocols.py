"""The protocols of an activity run as driver hooks: members and plan, fitting and scoring, keeping the best."""
from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from bioattn.tasks.activity.branches import BLEND_PARTS, choose_kept
from bioattn.tasks.activity.data import element_groups, file_folds, group_folds
from bioattn.tasks.activity.scores import BLEND_NAME, DEEP_NAME, RIDGE_NAME
from bioattn.tasks.activity.train import (
    CANDIDATE_NAMES, DEFAULT_CV, HEADLINE, MIN_STEPS, ActivityData, ActivityOptions, Candidates, fit_candidates,
    score_member,
)
from bioattn.tasks.base import FittedMember
from bioattn.tasks.driver import Member, MembersRun, cv_members, seed_members

#: Epochs timed on the first model before the run says how long it expects to take.
PLAN_EPOCHS = 2


@dataclass
class Plan:
    """What a run will do (:meth:`announce`) and the time it expects (:meth:`epoch_done`); ``lines`` keeps them."""

    models: int
    what: str
    out: Any = None
    max_epochs: int = 0
    timing: bool = False
    epochs: int = 0
    clock: float | None = None
    said: str | None = None
    lines: list[str] = field(default_factory=list)

    def say(self, line: str) -> None:
        self.lines.append(line)
        print(line, file=self.out or sys.stderr, flush=True)

    def announce(self) -> None:
        self.say(f"plan: {self.what}; the expected time follows once the first model has trained "
                 f"{PLAN_EPOCHS + 1} epochs")

    def start(self, max_epochs: int) -> None:
        """The first model starts training (later models are not timed)."""
        if self.said is None and not self.timing:
            self.timing, self.max_epochs, self.epochs, self.clock = True, max_epochs, 0, None

    def stop(self) -> None:
        self.timing = False

    def epoch_done(self) -> None:
        if not self.timing or self.said is not None:
            return
        now = time.monotonic()
        if self.clock is None:
            self.clock = now
            return
        self.epochs += 1
        if self.epochs == PLAN_EPOCHS:
            self.said = expected_time_line(self.models, (now - self.clock) / self.epochs, self.max_epochs, self.epochs)
            self.say(self.said)


def expected_time_line(models: int, per_epoch: float, max_epochs: int, timed: int) -> str:
    """The plan's time line: ``models`` × at most ``max_epochs`` epochs of ``per_epoch`` seconds."""
    per_model = per_epoch * max_epochs
    total = models * per_model
    return (f"plan: {models} model{'s' if models > 1 else ''} × at most {per_model:.0f} s "
            f"({max_epochs} epochs of {per_epoch:.1f} s, measured on {timed} epochs) ≈ at most "
            f"{total / 60:.1f} min of training (early stopping usually ends sooner), plus the ridges and scores")


def members_of(options: ActivityOptions, data: ActivityData, run_dir: Path) -> list[Member]:
    if options.protocol == "holdout":
        return seed_members(run_dir, options.seeds, options.seed)
    if options.protocol == "fit_all":
        return [Member("seed", options.seed, run_dir, 1, 1, alone=True)]
    if options.protocol == "file_folds":
        return cv_members(run_dir, file_folds(data.pool.file_index, element_groups(data.pool.sequences)))
    return cv_members(run_dir, group_folds(element_groups(data.pool.sequences), options.cv or DEFAULT_CV, options.seed))


def plan_text(options: ActivityOptions, data: ActivityData, members: list[Member]) -> str:
    """What the run will train, in one line (the plan's first line)."""
    sized = options.sized(len(data.pool))
    kinds = {"cv": f"{len(members)}-fold cross-validation", "file_folds": f"{len(members)} folds, one per file",
             "holdout": f"{len(members)} model{'s' if len(members) > 1 else ''} scored on the --dev file",
             "fit_all": "one model on every row"}
    parts = BLEND_PARTS[options.blend]
    names = {"kmers": "the k-mer ridge", "motifs": "the known-motif ridge"}
    blend = ("the deep model alone" if not parts else
             f"the deep model blended with {' and '.join(names[p] for p in parts)}"
             + (", kept only if it beats each part on the held-out rows" if options.protocol != "fit_all" else ""))
    smoke = "smoke run (--quick): " if options.quick else ""
    return (f"{smoke}{kinds[options.protocol]} of {len(data.pool)} sequences; deep model {sized.channels} channels, "
            f"{sized.layers} attention layer{'s' if sized.layers > 1 else ''}, batch {sized.batch_size}, "
            f"{'2 short' if options.quick else f'up to {options.epochs} (at least {MIN_STEPS} steps)'} epochs; {blend}")


def planned_members(options: ActivityOptions, data: ActivityData, run_dir: Path) -> tuple[list[Member], Plan]:
    """The members of the run (:func:`members_of`) and its :class:`Plan`, announced before anything trains."""
    members = members_of(options, data, run_dir)
    plan = Plan(len(members), plan_text(options, data, members))
    plan.announce()
    return members, plan


def fit(options: ActivityOptions, data: ActivityData, member: Member, plan: Plan | None = None) -> FittedMember:
    """Train one member and score it on its held-out rows (the held-out fold, or the dev file)."""
    if member.kind == "fold":
        train, held_out = data.pool.subset(member.train_index), data.pool.subset(member.held_out_index)
        features = (data.motif_features("pool", member.train_index), data.motif_features("pool", member.held_out_index))
    else:
        train, held_out = data.pool, data.dev
        features = (data.motif_features("pool"), data.motif_features("dev") if held_out is not None else None)
    seed = member.index if member.kind == "seed" else options.seed
    fitted = fit_candidates(options, data, train, member.run_dir, seed, motif_features=features[0], plan=plan)
    result: dict[str, Any] = {"member": member.dir_name if not member.alone else ".", "training": fitted.info,
                              "sizes": {"train": len(train), "held_out": len(held_out) if held_out else 0}}
    predictions: dict[str, np.ndarray] = {}
    if held_out is not None:
        scores, predictions = score_member(
            fitted.blend, data, train, held_out, options.baselines,
            deep=fitted.deep if options.blend != "none" else None, parts=fitted.parts,
            motif_features=features if features[0] is not None else None)  # type: ignore[arg-type]
        result["scores"] = scores
    return FittedMember(model=fitted.blend, summary=result, saved_to=member.run_dir,
                        extra={"candidates": fitted, "held_out": held_out, "predictions": predictions})


def out_of_fold_rows(kept: dict[str, Any], run: MembersRun[FittedMember]) -> list[list[Any]]:
    """``out_of_fold.csv``'s rows: each fold's held-out rows predicted by the saved model and the k-mer ridge."""
    rows: list[list[Any]] = []
    for member, fitted in zip(run.members, run.results):
        held_out, predictions = fitted.extra["held_out"], fitted.extra["predictions"]
        if member.kind != "fold" or held_out is None:
            continue
        saved = predictions[CANDIDATE_NAMES[kept["kept"]] if kept["kept"] != "blend" else "model"]
        ridge = predictions.get(RIDGE_NAME)
        for i, record in enumerate(held_out.records):
            for t, target in enumerate(held_out.target_names):
                if not np.isfinite(held_out.values[i, t]):
                    continue
                rows.append([record, member.index, target, held_out.values[i, t], saved[i, t],
                             ridge[i, t] if ridge is not None else ""])
    return rows


def keep_best(options: ActivityOptions, run: MembersRun[FittedMember]) -> dict[str, Any]:
    """Keep the blend or the part that beats it (:func:`~bioattn.tasks.activity.branches.choose_kept`)."""
    parts = BLEND_PARTS[options.blend]
    results = [fitted.summary for fitted in run.results]
    scored = [r for r in results if "scores" in r]
    if not parts or not scored or len(scored) != len(results):
        return {"kept": "blend", "means": {}, "reason": "no held-out rows to compare the blend with its parts"
                if parts else "no blend"}
    fold_scores = [{"blend": r["scores"]["model"][HEADLINE], "deep": r["scores"][DEEP_NAME][HEADLINE],
                    **{p: r["scores"][CANDIDATE_NAMES[p]][HEADLINE] for p in parts}} for r in scored]
    kept, means = choose_kept(fold_scores, ("deep", *parts))
    for result, member, fitted in zip(results, run.members, run.results):
        candidates: Candidates = fitted.extra["candidates"]
        scores = result["scores"]
        scores[BLEND_NAME] = scores["model"]
        if kept != "blend":
            scores["model"] = scores[CANDIDATE_NAMES[kept]]
            candidates.model(kept).save_pretrained(member.run_dir)
            result["training"]["kept"] = kept
    return {"kept": kept, "means": means}
