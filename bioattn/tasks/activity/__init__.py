"""Quantitative activity regression: DNA sequence → one or more measured activities (MPRA, expression).

- :mod:`~bioattn.tasks.activity.data`: reading CSV/TSV/FASTA with values, flank detection, grouped splits.
- :mod:`~bioattn.tasks.activity.scores`: Pearson / Spearman / R² / MSE and the k-mer ridge and mean baselines.
- :mod:`~bioattn.tasks.activity.train` / :mod:`~bioattn.tasks.activity.run`: options, protocols, reports.
- :mod:`~bioattn.tasks.activity.predict`: loading runs and predicting files.
- :mod:`~bioattn.tasks.activity.task`: the :class:`~bioattn.tasks.base.Task` of the registry (``TASK``).
"""
