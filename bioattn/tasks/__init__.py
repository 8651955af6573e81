"""Tasks: everything between the data/models and the commands, importable by users.

- :mod:`bioattn.tasks.promoter`: DNA sequence classification (bundled GUE / E. coli benchmarks or your own
  labelled FASTA/CSV), its baselines (GC-content threshold, k-mer logistic regression) and genome scans.
- :mod:`bioattn.tasks.ct`: 3D volume classification (MedMNIST 3D or your own NIfTI/DICOM + labels CSV), the
  MONAI ResNet baseline and the training protocols.
- :mod:`bioattn.tasks.msa`: contact prediction from an alignment (coevolution baselines, the axial model, the
  contact head and its ``contact_head.json`` schema); :mod:`bioattn.tasks.msa.pretrain`: cross-family
  masked-token pretraining of the axial model.
- :mod:`bioattn.tasks.common`: what the tasks share (option checks, timed fits, ensembles on disk).
- :mod:`bioattn.tasks.trust`: what every classification summary says about its validation numbers (confusion
  matrix and threshold, bootstrap interval on small splits, single-class / chance / beaten-by-baseline warnings).

Each task is a subpackage whose ``task.py`` defines its :class:`~bioattn.tasks.base.Task` (the contract:
:mod:`bioattn.tasks.base`; the one list of tasks: :mod:`bioattn.tasks.registry`) and whose ``train`` module holds its
options and runs (``from bioattn.tasks.ct.train import CTOptions``).

Each task module imports from :mod:`bioattn.attention`, :mod:`bioattn.models`, :mod:`bioattn.data`,
:mod:`bioattn.training`, the method-generic :mod:`bioattn.explain` (each task's explain pipeline,
``tasks/<task>/explain.py``, builds on it) and the shared :mod:`bioattn.metrics` / :mod:`bioattn.report` /
:mod:`bioattn.io`, never from :mod:`bioattn.commands` or :mod:`bioattn.cli`. :mod:`bioattn.tasks.explain_dispatch`
finds a model's or a task's explanation through the registry.
"""
