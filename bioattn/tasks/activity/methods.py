"""What ``bioattn explain activity`` and :func:`~bioattn.tasks.activity.explain.explain_activity` share."""
from __future__ import annotations

#: Methods of an activity model (``auto`` measures the first three on a sample and keeps the most faithful).
ACTIVITY_METHODS = ("ism", "integrated_gradients", "gradient_x_input", "random")
KNOWN_MOTIF_WEIGHTS = 20
