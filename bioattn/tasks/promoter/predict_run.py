"""``predict_promoter``: what ``bioattn predict promoter`` runs."""
from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any, Sequence

from bioattn.errors import UserInputError
from bioattn.io import STDOUT

STRANDS = {"model": None, "both": True, "forward": False}
#: ``window=MODEL_WINDOW``: scan in windows of the model's ``max_len``.
MODEL_WINDOW = 0


@dataclasses.dataclass
class PromoterPredictions:
    """What was written: ``counts`` (class name → sequences predicted) or a genome ``scan``'s summary."""

    precision: str
    class_names: list[str]
    threshold: float
    counts: dict[str, int] | None = None
    scan: Any = None
    window: int | None = None
    stride: int | None = None
    class_name: str | None = None
    #: False in the processes of a torchrun scan other than the first
    written: bool = True

    def describe(self, output: str | os.PathLike) -> str:
        """One line saying what was scored and where it went (``output``: the file written, ``-`` standard output)."""
        if self.counts is not None:
            shown = ", ".join(f"{name}: {self.counts[name]}" for name in self.class_names)
            written = "standard output" if str(output) == STDOUT else output
            total = sum(self.counts.values())
            return (f"{total} sequence{'' if total == 1 else 's'} scored in {self.precision} (predicted {shown}); "
                    f"wrote {written}")
        scan = self.scan
        merged = f", merged into {scan.regions} regions" if scan.regions else ""
        return (f"{scan.sequences} sequence{'' if scan.sequences == 1 else 's'}, {scan.windows} windows of {self.window} nt every {self.stride} nt scored "
                f"in {self.precision} ({scan.skipped_n_only} only-N windows skipped), {scan.above_threshold} with "
                f"p({self.class_name}) >= {self.threshold}{merged}; wrote {output}")


def _class_index(model, name: str | None) -> int:
    if name is None:
        if not model.binary:
            raise UserInputError(f"this model has {model.num_classes} classes ({', '.join(model.class_names)}); "
                                 f"choose the one to scan for with --class")
        return 1
    if name not in model.class_names:
        raise UserInputError(f"--class {name!r} is not a class of this model ({', '.join(model.class_names)})")
    return model.class_names.index(name)


def predict_promoter(model: str | os.PathLike, inputs: str | os.PathLike, output: str | os.PathLike, *,
                     batch_size: int | None = None, precision: str | None = None, threshold: float | None = None,
                     strand: str = "model", window: int | None = None, stride: int | None = None,
                     scan_class: str | None = None, chroms: Sequence[str] | None = None,
                     regions: str | os.PathLike | None = None, compile_model: bool = False,
                     device: str = "auto") -> PromoterPredictions:
    """Score ``inputs`` into ``output``, or with ``window`` scan a FASTA (``bioattn predict promoter``'s options)."""
    from bioattn.io import input_file, prepare_output
    from bioattn.models.promoter import PromoterClassifier
    from bioattn.models.registry import load_pretrained, resolve_model_dir
    from bioattn.precision import inference_autocast, resolve_inference_precision, warn_if_bf16_is_emulated
    from bioattn.tasks.promoter.composition import load_composition
    from bioattn.tasks.promoter.predict import predict_file
    from bioattn.tasks.promoter.scan import scan_format, scan_genome
    from bioattn.distributed import is_main_process, resolve_device
    inputs, output = Path(inputs), Path(output)
    if batch_size is not None and batch_size < 1:
        raise UserInputError(f"--batch-size must be >= 1, got {batch_size}")
    if threshold is not None and not 0.0 < threshold < 1.0:
        raise UserInputError(f"--threshold must be between 0 and 1, got {threshold}")
    if strand not in STRANDS:
        raise UserInputError(f"--strand must be one of {', '.join(STRANDS)}, got {strand!r}")
    if window is None and (stride is not None or scan_class is not None or chroms is not None or regions is not None
                           or compile_model):
        raise UserInputError("--stride, --class, --chrom, --regions and --compile only apply to a genome scan: add --window")
    from_stdin = str(inputs) == STDOUT
    if from_stdin and window is not None:
        raise UserInputError("--input -: a genome scan needs a FASTA file (it is indexed), not standard input")
    if not from_stdin and output.resolve() == inputs.resolve():
        raise UserInputError(f"{output}: --output would overwrite --input")
    prepare_output(output)
    target = resolve_device(device)
    model_folder = resolve_model_dir(model)
    model = load_pretrained(model_folder, map_location=target, expect=PromoterClassifier)
    precision = resolve_inference_precision(precision or ("fp32" if window is None else "auto"), target)
    warn_if_bf16_is_emulated(precision, target)
    if threshold is not None:
        if not model.binary and window is None:
            raise UserInputError(f"--threshold applies to two-class models and to genome scans; this model has "
                                 f"{model.num_classes} classes and predicts the most probable one")
        model.threshold = threshold
    rc_average = STRANDS[strand]
    result = PromoterPredictions(precision=precision, class_names=list(model.class_names), threshold=model.threshold)
    if window is None:
        if output.suffix.lower() in (".bed", ".bedgraph", ".bw", ".bigwig"):
            raise UserInputError(f"{output}: a {output.suffix} output is written by a genome scan: add --window")
        with input_file(inputs) as source, inference_autocast(precision, target):
            result.counts = predict_file(model, source, output, batch_size=batch_size or 256, rc_average=rc_average,
                                         composition=load_composition(model_folder))
        return result
    scan_format(output)
    class_index = _class_index(model, scan_class)
    result.window = model.max_len if window == MODEL_WINDOW else window
    result.stride = stride if stride is not None else max(1, result.window // 2)
    result.class_name = model.class_names[class_index]
    with inference_autocast(precision, target):
        result.scan = scan_genome(model, inputs, output, window=result.window, stride=result.stride,
                                  class_index=class_index, batch_size=batch_size, rc_average=rc_average,
                                  chroms=chroms, regions=regions, compile_model=compile_model)
    result.written = is_main_process()
    return result
