"""The attribution methods of the CT task, their costs and labels, importable without MONAI."""
from __future__ import annotations

from bioattn.explain.attribution import METHOD_COST, METHOD_LABELS, METHODS

#: Every method of :data:`~bioattn.explain.attribution.METHODS`, MONAI's GradCAM and occlusion.
CT_METHODS = (*METHODS, "gradcam", "occlusion")
#: What each of :data:`CT_METHODS` costs, in gradient × input passes over the volume.
RELATIVE_COST = {**{method: METHOD_COST[method] for method in METHODS}, "gradcam": 1, "occlusion": 100.0}
#: How figures name each of :data:`CT_METHODS`' values.
CT_METHOD_LABELS = {**{method: METHOD_LABELS[method] for method in METHODS}, "gradcam": "Grad-CAM (MONAI)",
                    "occlusion": "occlusion sensitivity (MONAI)"}
