"""The MSA task: contact prediction from a protein alignment.

- :mod:`~bioattn.tasks.msa.train`: one family or every family of a data root.
- :mod:`~bioattn.tasks.msa.features`: options, coevolution maps and the axial model's attention features;
  :mod:`~bioattn.tasks.msa.head`: the contact head; :mod:`~bioattn.tasks.msa.esm`: the MSA Transformer with your
  weights; :mod:`~bioattn.tasks.msa.compare`: the leave-one-family-out comparison of methods.
- :mod:`~bioattn.tasks.msa.train_run`: ``bioattn train msa`` in one call; :mod:`~bioattn.tasks.msa.predict`:
  contacts of a new alignment; :mod:`~bioattn.tasks.msa.pretrain`:
  cross-family masked-token pretraining.
- :mod:`~bioattn.tasks.msa.explain`: :func:`explain_msa`, the explanation of an alignment (which heads carry
  contacts: :mod:`~bioattn.tasks.msa.head_contacts`; per-column maps: :mod:`~bioattn.tasks.msa.attribution`;
  ESM's MSA Transformer with your weights: :mod:`~bioattn.tasks.msa.explain_esm`), built on the method-generic
  :mod:`bioattn.explain`.
"""
