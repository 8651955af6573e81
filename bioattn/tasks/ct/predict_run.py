""":func:`predict_ct`, what ``bioattn predict ct`` runs."""
from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any, Mapping

from bioattn.errors import UserInputError
from bioattn.io import STDOUT
from bioattn.tasks.ct.predict import CTPrediction

AUTO = "auto"


@dataclasses.dataclass
class CTPredictions:
    """The ``predictions`` in input order, per-split ``scores`` and the ``attention_path`` written."""
    predictions: list[CTPrediction]
    class_names: list[str]
    flip_tta: bool
    scores: dict[str, dict[str, Any]]
    attention_path: Path | None
    written: bool = True
    threshold: float = 0.5

    def rows_preview(self, limit: int = 10) -> str:
        """The first ``limit`` volumes and their class probabilities, one line each."""
        from bioattn.tasks.ct.preprocessing import predicted_index
        cut = f" (threshold {self.threshold:.4g})" if len(self.class_names) == 2 and self.threshold != 0.5 else ""
        lines = [f"{p.describe()}: " + ", ".join(f"{name} {value:.4f}" for name, value in zip(self.class_names, p.probabilities))
                 + f" -> {self.class_names[predicted_index(p.probabilities, self.threshold)]}{cut}"
                 for p in self.predictions[:limit]]
        if len(self.predictions) > limit:
            lines.append(f"... {len(self.predictions) - limit} more rows")
        return "\n".join(lines)

    def scores_table(self) -> str | None:
        """AUROC, accuracy and MCC per split of the labelled inputs (``None`` without labels)."""
        from bioattn.report import format_table
        if not self.scores:
            return None
        return format_table(["split", "volumes", "AUROC", "accuracy", "MCC"],
                            [[split, m["volumes"], m.get("auroc"), m["accuracy"], m["mcc"]] for split, m in self.scores.items()],
                            title=f"labelled inputs (flip averaging {'on' if self.flip_tta else 'off'})")


def _attention_path(attention_map: str | os.PathLike | None, output: Path) -> Path | None:
    if attention_map is None:
        return None
    if attention_map == AUTO:
        if str(output) == STDOUT:
            raise UserInputError("--output -: give --attention-map a file name (MAP.nii.gz)")
        return output.with_name(output.name.removesuffix(output.suffix) + ".attention.nii.gz")
    path = Path(attention_map)
    if not path.name.lower().endswith((".nii", ".nii.gz")):
        raise UserInputError(f"{path}: --attention-map must end in .nii or .nii.gz")
    return path


def predict_ct(
    model: str | os.PathLike, inputs: str | os.PathLike, output: str | os.PathLike, *,
    preprocessing: Mapping[str, Any] | None = None, split: str | None = None, batch_size: int = 32,
    tta: str | None = None, attention_map: str | os.PathLike | None = None, head_fusion: str = "mean",
    workers: int = 0, device: str = "auto",
) -> CTPredictions:
    """Predict ``inputs`` with the run or shipped model ``model`` and write the CSV ``output`` (``"-"``: stdout)."""
    from bioattn.data.ct import write_nifti
    from bioattn.data.ct_manifest import is_manifest
    from bioattn.tasks.ct import predict as ct_predict
    from bioattn.distributed import is_main_process, resolve_device
    inputs, output = Path(inputs), Path(output)
    overrides = {k: v for k, v in (preprocessing or {}).items() if v is not None}
    if batch_size < 1:
        raise UserInputError(f"--batch-size must be >= 1, got {batch_size}")
    if tta not in (None, "none", "flips"):
        raise UserInputError(f"--tta must be none or flips, got {tta!r}")
    attention_path = _attention_path(attention_map, output)
    is_npz, many = inputs.suffix.lower() == ".npz", is_manifest(inputs)
    if (is_npz or many) and attention_path is not None:
        raise UserInputError(f"{inputs}: --attention-map needs one NIfTI or DICOM input")
    if not (is_npz or many) and split is not None:
        raise UserInputError(f"{inputs}: --split applies to .npz and manifest inputs only")
    if is_npz and overrides:
        flags = ", ".join("--intensity-window" if k == "window" else f"--{k}" for k in overrides)
        raise UserInputError(f"{inputs}: {flags} apply to NIfTI/DICOM inputs, not to a .npz")
    model, saved = ct_predict.load_run(model, map_location=resolve_device(device))
    flip_tta, overlay = ct_predict.resolve_flip_tta(saved, None if tta is None else tta == "flips"), None
    if is_npz:
        predictions = ct_predict.predict_npz(model, inputs, saved, split=split, batch_size=batch_size, flip_tta=flip_tta)
    elif many:
        predictions = ct_predict.predict_manifest(model, inputs, ct_predict.resolve_preprocessing(saved, **overrides),
                                                  saved, split=split, batch_size=batch_size, flip_tta=flip_tta,
                                                  workers=workers)
        if not is_main_process():
            return CTPredictions(predictions=[], class_names=model.class_names, flip_tta=flip_tta, scores={},
                                 attention_path=None, written=False)
    else:
        prediction, overlay = ct_predict.predict_volume(
            model, inputs, ct_predict.resolve_preprocessing(saved, **overrides), saved, flip_tta=flip_tta,
            attention_map=attention_path is not None, head_fusion=head_fusion)
        predictions = [prediction]
    names, threshold = model.class_names, saved.threshold if saved is not None else 0.5
    ct_predict.write_predictions(output, predictions, names, threshold=threshold)
    if overlay is not None and attention_path is not None:
        write_nifti(attention_path, *overlay)
    ct_predict.report_warnings(predictions)
    return CTPredictions(predictions=predictions, class_names=names, flip_tta=flip_tta,
                         scores=ct_predict.summarize_predictions(predictions, names, threshold), threshold=threshold,
                         attention_path=attention_path if overlay is not None else None)
