"""The promoter task: DNA sequence classification on the bundled benchmarks or your own labelled files.

- :mod:`~bioattn.tasks.promoter.train`: options, protocols and :func:`run_promoter`.
- :mod:`~bioattn.tasks.promoter.data`: loaders and splits; :mod:`~bioattn.tasks.promoter.baselines`: the
  scikit-learn baselines; :mod:`~bioattn.tasks.promoter.pretrain`: masked-nucleotide pretraining;
  :mod:`~bioattn.tasks.promoter.composition`: the training composition and its warnings.
- :mod:`~bioattn.tasks.promoter.predict` / :mod:`~bioattn.tasks.promoter.predict_run`: prediction on sequences;
  :mod:`~bioattn.tasks.promoter.scan`: genome scans.
"""
