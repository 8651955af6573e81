"""The promoter task: DNA sequence classification on the bundled benchmarks or your own labelled files.

- :mod:`~bioattn.tasks.promoter.train`: options, data loading and the fit of one model;
  :mod:`~bioattn.tasks.promoter.protocols`: the driver's hooks (holdout, seeds, cross-validation);
  :mod:`~bioattn.tasks.promoter.report`: its tables; :mod:`~bioattn.tasks.promoter.task`: the task contract.
- :mod:`~bioattn.tasks.promoter.data`: loaders and splits; :mod:`~bioattn.tasks.promoter.baselines`: the
  scikit-learn baselines; :mod:`~bioattn.tasks.promoter.pretrain`: masked-nucleotide pretraining;
  :mod:`~bioattn.tasks.promoter.composition`: the training composition and its warnings.
- :mod:`~bioattn.tasks.promoter.predict` / :mod:`~bioattn.tasks.promoter.predict_run`: prediction on sequences;
  :mod:`~bioattn.tasks.promoter.scan`: genome scans.
"""
