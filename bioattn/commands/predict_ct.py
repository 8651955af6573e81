"""Class probabilities of a trained CT model for a manifest of scans, one NIfTI/DICOM volume or a MedMNIST .npz.

``bioattn predict ct --model NAME_OR_DIR --input INPUT --output OUT.csv [--attention-map [MAP.nii.gz]]``
(``NAME_OR_DIR``: a model shipped with bioattn, see ``bioattn models``, or a run directory of ``bioattn train ct``)

- ``INPUT`` is a manifest (``.csv`` with an ``image`` column, optional ``label`` and ``split``, as for
  ``bioattn train ct --manifest``: many scans in one call), a NIfTI file (``.nii``/``.nii.gz``), a DICOM file or a
  folder holding one DICOM series, or a MedMNIST-style ``.npz`` (every volume of every split, or ``--split``).
- ``OUT.csv`` gets one row per volume, in input order, with the same columns for every kind of input:
  ``image,label,split,index`` (a manifest's own columns, empty where the input has none; ``index`` for ``.npz``
  volumes only), then one ``p_<class>`` per class, ``predicted_label`` and ``warning``.
- NIfTI/DICOM volumes are prepared as the run's ``preprocessing.json`` says (orientation, spacing, intensity
  window, ``--size`` reached by ``--fit``, as in training); each preprocessing flag replaces its saved step.
  Predictions are averaged over the 8 flips when the run evaluated that way (``--protocol tuned``); ``--tta
  flips|none`` decides instead.
- Every input is compared with the training volumes (intensity range and mean, binary masks or not, model input
  shape, voxel size and field of view): an input far from them gets a ``warning:`` line on stderr naming it and
  the problem, and the same text in the ``warning`` column. Its probabilities may mean little: e.g. a model
  trained on MedMNIST binary masks has nothing to say about a CT in Hounsfield units.
- ``--attention-map`` (one NIfTI or DICOM input) writes the [CLS] attention rollout over all layers, upsampled
  through the CNN stride and mapped back through every spatial preprocessing step, as a NIfTI on the input's voxel
  grid and affine, scaled so the most-attended voxel is 1. Rollout is a hypothesis about what the model looked at,
  not a causal attribution.
"""
from __future__ import annotations

import argparse
import sys

from bioattn.commands.common import model_source
from bioattn.commands.ct_args import add_predict_arguments as add_arguments, preprocessing_overrides
from bioattn.io import STDOUT

__all__ = ["add_arguments", "run"]


def run(args: argparse.Namespace) -> int:
    from bioattn.tasks.ct.predict_run import predict_ct

    result = predict_ct(model_source(args), args.input, args.output, preprocessing=preprocessing_overrides(args),
                        split=args.split, batch_size=args.batch_size, tta=args.tta, attention_map=args.attention_map,
                        head_fusion=args.head_fusion, workers=args.workers, device=args.device)
    if not result.written:  # another process of a torchrun job writes the rows
        return 0
    print(result.rows_preview(), file=sys.stderr if str(args.output) == STDOUT else sys.stdout)  # stdout may hold the CSV
    table = result.scores_table()
    if table:
        print(table, file=sys.stderr)
    print(f"wrote {args.output}" + (f" and {result.attention_path}" if result.attention_path else ""), file=sys.stderr)
    return 0
