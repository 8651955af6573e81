"""The attribution methods of the CT task, their costs and labels (``explain ct --method``), without the models:
``explain ct --help`` reads them without importing MONAI."""
from __future__ import annotations

from bioattn.explain.attribution import METHOD_COST, METHOD_LABELS, METHODS

#: Methods of the CT model: every method of :data:`~bioattn.explain.attribution.METHODS`, MONAI's GradCAM (on the
#: last CNN stage, upsampled to the voxels) and occlusion (patches set to the background value; the map is the drop
#: in the predicted class's probability).
CT_METHODS = (*METHODS, "gradcam", "occlusion")
#: What each of :data:`CT_METHODS` costs, in gradient × input passes over the volume.
RELATIVE_COST = {**{method: METHOD_COST[method] for method in METHODS}, "gradcam": 1, "occlusion": 100.0}
#: How figures name each of :data:`CT_METHODS`' values.
CT_METHOD_LABELS = {**{method: METHOD_LABELS[method] for method in METHODS}, "gradcam": "Grad-CAM (MONAI)",
                    "occlusion": "occlusion sensitivity (MONAI)"}
