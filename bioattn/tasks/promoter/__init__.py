"""The promoter task: DNA sequence classification on the bundled benchmarks or your own labelled files.

- :mod:`~bioattn.tasks.promoter.train`: options, protocols and :func:`run_promoter` (re-exported here, so
  ``from bioattn.tasks.promoter import PromoterOptions, run_promoter`` works).
- :mod:`~bioattn.tasks.promoter.data`: loaders and splits; :mod:`~bioattn.tasks.promoter.baselines`: the
  scikit-learn baselines; :mod:`~bioattn.tasks.promoter.pretrain`: masked-nucleotide pretraining;
  :mod:`~bioattn.tasks.promoter.composition`: the training composition and its warnings.
- :mod:`~bioattn.tasks.promoter.predict` / :mod:`~bioattn.tasks.promoter.predict_run`: prediction on sequences;
  :mod:`~bioattn.tasks.promoter.scan`: genome scans.
"""
from __future__ import annotations

from bioattn.tasks import reexport

__getattr__ = reexport(__name__, "bioattn.tasks.promoter.train")
