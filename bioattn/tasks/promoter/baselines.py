"""Trivial baselines fitted beside the promoter model: a GC-content threshold and a k-mer logistic regression."""
from __future__ import annotations

from typing import Mapping

import numpy as np
from sklearn.feature_extraction.text import CountVectorizer, TfidfTransformer
from sklearn.linear_model import LogisticRegression, LogisticRegressionCV
from sklearn.model_selection import StratifiedKFold
from sklearn.pipeline import make_pipeline

from bioattn.data.dna import gc_content
from bioattn.metrics import classification_metrics
from bioattn.tasks.promoter.data import Split

KMER_MAX = 6
BASELINE_NAMES = {"gc_threshold": "GC-content threshold (this run)",
                  "kmer_logreg": f"k-mer (k=1..{KMER_MAX}) logistic regression (this run)"}

Scores = dict[str, dict[str, float]]  # {split: metrics}


def _class_probabilities(model, features) -> np.ndarray:
    """``(N,)`` probability of class 1 for two classes, else ``(N, C)`` (the layout of the model's outputs)."""
    probs = model.predict_proba(features)
    return probs[:, 1] if probs.shape[1] == 2 else probs


def gc_threshold_baseline(train: Split, evals: Mapping[str, Split]) -> Scores:
    """Logistic regression on the GC fraction alone: ``{split: metrics}`` for each split of ``evals``."""
    model = LogisticRegression().fit(gc_content(train.sequences)[:, None], train.labels)
    return {name: classification_metrics(split.labels, _class_probabilities(model, gc_content(split.sequences)[:, None]))
            for name, split in evals.items()}


def kmer_baseline(train: Split, evals: Mapping[str, Split], seed: int) -> Scores:
    """Logistic regression on k-mer counts (k = 1..6, sublinear, L2-normalised), C by 3-fold CV on MCC."""
    model = make_pipeline(
        CountVectorizer(analyzer="char", ngram_range=(1, KMER_MAX), lowercase=False),
        TfidfTransformer(use_idf=False, norm="l2", sublinear_tf=True),
        LogisticRegressionCV(Cs=[0.3, 1, 3, 10, 30], cv=StratifiedKFold(3, shuffle=True, random_state=seed),
                             scoring="matthews_corrcoef", max_iter=3000, l1_ratios=(0.0,), use_legacy_attributes=False))
    model.fit(train.sequences, train.labels)
    return {name: classification_metrics(split.labels, _class_probabilities(model, split.sequences))
            for name, split in evals.items()}


def run_baselines(train: Split, evals: Mapping[str, Split], seed: int) -> dict[str, Scores]:
    """``{display name: {split: metrics}}`` for the GC threshold and the k-mer logistic regression."""
    return {BASELINE_NAMES["gc_threshold"]: gc_threshold_baseline(train, evals),
            BASELINE_NAMES["kmer_logreg"]: kmer_baseline(train, evals, seed)}
