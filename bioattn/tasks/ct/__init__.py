"""The CT task: 3D volume classification on MedMNIST 3D or your own NIfTI/DICOM volumes.

- :mod:`~bioattn.tasks.ct.train`: the run's preparation and report, hooks of the shared driver (options:
  :mod:`~bioattn.tasks.ct.options`; one model:
  :mod:`~bioattn.tasks.ct.fit`; seeds / cross-validation: :mod:`~bioattn.tasks.ct.protocols`; tables and trust:
  :mod:`~bioattn.tasks.ct.report`).
- :mod:`~bioattn.tasks.ct.data`: MedMNIST and manifest loaders; :mod:`~bioattn.tasks.ct.preprocessing`: the saved
  NIfTI/DICOM preprocessing and the training-volume profile.
- :mod:`~bioattn.tasks.ct.predict` / :mod:`~bioattn.tasks.ct.predict_run`: prediction on volumes.
- :mod:`~bioattn.tasks.ct.explain`: :func:`explain_ct`, the explanation of a volume (maps:
  :mod:`~bioattn.tasks.ct.rollout`, :mod:`~bioattn.tasks.ct.attribution`, methods :mod:`~bioattn.tasks.ct.methods`; time budget:
  :mod:`~bioattn.tasks.ct.explain_plan`), built on the method-generic :mod:`bioattn.explain`.
"""
