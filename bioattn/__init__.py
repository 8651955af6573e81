"""bioattn: multi-head attention for genomics and medical imaging.

Subpackages: :mod:`bioattn.attention` (fused attention blocks), :mod:`bioattn.models` (promoter,
MSA contact and CT models), :mod:`bioattn.data` (readers), :mod:`bioattn.training` (the shared training
loop), :mod:`bioattn.explain` (attention rollout and figures).
"""

__version__ = "0.5.0"
