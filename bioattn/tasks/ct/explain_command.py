"""The ``bioattn explain ct`` command (apart from the training commands: it reaches no training code)."""
from __future__ import annotations

from dataclasses import dataclass

from bioattn.options import flag, values
from bioattn.tasks.ct.flags import (
    PREPROCESSING, fit_flag, intensity_window_flag, orientation_flag, preprocessing_overrides, size_flag,
    spacing_flag, tta_flag,
)
from bioattn.tasks.ct.methods import CT_METHODS
from bioattn.tasks.flags import (
    device_flag, explain_input_flag, explain_out_flag, explain_overwrite_flag, faithfulness_steps_flag,
    head_fusion_flag, method_flag, method_options, model_flag, skip_faithfulness_flag, start_layer_flag,
)

_NPZ = "MedMNIST .npz input"


@dataclass(frozen=True, kw_only=True)
class ExplainCT:
    """[CLS] attention rollout and the --method attribution of a trained CT model as 3D maps on the input grid (NIfTI + PNGs).

    ``--input`` is a NIfTI file, a DICOM file/series folder, or a MedMNIST-style ``.npz`` (pick the volume with
    ``--split`` and ``--index``). Writes, under ``--out``: ``rollout.nii.gz`` (the rollout on the input's voxel
    grid, with the input's affine; identity affine for ``.npz`` volumes, which carry none), ``attribution.nii.gz``
    (the ``--method`` map on the same grid, when it is not rollout), ``input.nii.gz`` for ``.npz`` input (to overlay
    in a viewer), ``rollout_slices.png`` / ``attribution_slices.png`` (orthogonal slices through the most
    influential voxel), ``heads_layer{l}.png`` / ``head_diversity_layer{l}.png``, ``head_sharpness.png``,
    ``faithfulness.png`` and ``summary.json`` (with ``faithfulness``: each method's deletion/insertion AUC, voxels
    set to the volume's background value, the minimum). The probability is the one ``predict ct`` prints (the run's
    flip averaging; ``--tta`` overrides it). The cheap maps come first (rollout, gradient x input); ``--method auto``
    shows the more faithful of them on this volume; faithfulness is measured on those maps at as many curve points as
    fit about 40 s (the plan and its cost are printed; Integrated Gradients and occlusion only on request:
    ``--faithfulness-methods all``). Every stage shows its progress and time left.

    NIfTI/DICOM input is prepared as the run's ``preprocessing.json`` says (each preprocessing flag replaces its
    step), and an input unlike the training volumes gets a ``warning:`` line (also in ``summary.json``).

    Rollout treats attention as the only path between tokens: a hypothesis generator, not causal attribution.
    """
    model: str | None = model_flag(trained_by="bioattn train ct")
    device: str = device_flag()
    input: str = explain_input_flag(help="NIfTI (.nii/.nii.gz), DICOM file or series folder, or MedMNIST .npz")
    out: str = explain_out_flag()
    overwrite: bool = explain_overwrite_flag()
    head_fusion: str = head_fusion_flag()
    start_layer: int = start_layer_flag()
    split: str = flag("--split", default="val", group=_NPZ, help="split to read from the .npz (default: val)")
    index: int = flag("--index", default=0, group=_NPZ, help="volume index within the split (default: 0)")
    indices: str | None = flag("--indices", default=None, metavar="SPEC", group=_NPZ,
                               help="measure the faithfulness table over these volumes of --split (all, A-B or A,B,C; "
                                    "mean ± sd over volumes, seconds per volume in summary.json) instead of the "
                                    "--index volume alone; the maps stay those of --index (default: the --index "
                                    "volume only)")
    intensity_window: tuple[float, float] | None = intensity_window_flag(group=PREPROCESSING, default_help="the run's")
    spacing: tuple[float, float, float] | None = spacing_flag(group=PREPROCESSING, default_help="the run's")
    orientation: str | None = orientation_flag()
    size: tuple[int, ...] | None = size_flag()
    fit: str | None = fit_flag(group=PREPROCESSING, default=None, default_help="the run's")
    tta: str | None = tta_flag(default_help="as the run evaluated, so the probability is the one predict ct prints")
    method: str = method_flag(methods=CT_METHODS, auto_help="computes the cheap maps, the rollout and "
                              "gradient_x_input, and shows the more faithful on this volume; the others are computed "
                              "only when named")
    skip_faithfulness: bool = skip_faithfulness_flag(unit="voxels")
    faithfulness_steps: int | None = faithfulness_steps_flag(
        default=None, steps_help="as many, up to 20, as fit about 40 s at the measured time of one forward pass; not "
                                 "measured when even 4 do not fit")
    faithfulness_methods: str = flag("--faithfulness-methods", default="default", metavar="default|all|M1,M2",
                                     help="which methods the faithfulness table measures (against random): default "
                                          "(the maps computed), all (integrated_gradients and occlusion too: minutes "
                                          "to hours on a whole CT on a CPU), or names (default: %(default)s); the "
                                          "choice and its cost are printed")

    def run(self) -> int:
        from bioattn.tasks.ct.explain import describe, explain_ct
        result = explain_ct(self.model, self.input, faithfulness_indices=self.indices,
                            preprocessing=preprocessing_overrides(self),
                            flip_tta=None if self.tta is None else self.tta == "flips",
                            **values(self, "head_fusion", "start_layer", "split", "index", "device", "out",
                                     "overwrite", "faithfulness_methods"), **method_options(self))
        print(describe(result))
        return 0
