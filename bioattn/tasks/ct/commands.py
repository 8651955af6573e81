"""The ``bioattn train|predict ct`` commands, each field one flag (:func:`bioattn.options.flag`)."""
from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

from bioattn.models.hybrid_ct import POOLS, STEMS
from bioattn.options import flag, training_flags, values
from bioattn.tasks.ct.flags import (
    PREPROCESSING, fit_flag, intensity_window_flag, orientation_flag, preprocessing_overrides, size_flag,
    spacing_flag, tta_flag,
)
from bioattn.tasks.ct.options import DEFAULT_DATASET, DEFAULT_STEM_DEPTH, INITS, PROTOCOLS, TUNED_DEFAULTS
from bioattn.tasks.flags import (
    cv_flag, cv_repeats_flag, data_root_flag, device_flag, head_fusion_flag, model_flag, seeds_flag,
)

if TYPE_CHECKING:
    from bioattn.tasks.ct.options import CTOptions

_OWN = "--manifest preprocessing (MONAI; saved with the model)"
_MODEL = "attention model"
_ENSEMBLES = "ensembles (one of)"


@dataclass(frozen=True, kw_only=True)
class TrainCT:
    """Train the hybrid 3D CNN + attention model (beside a MONAI 3D ResNet) on MedMNIST 3D or your own NIfTI/DICOM volumes.

        bioattn train ct --dataset adrenalmnist3d [--size 64|28] --out RUN_DIR [--protocol tuned|medmnist] [--quick]
        bioattn train ct --dataset adrenalmnist3d --cv 5 --out RUN_DIR          # 5-fold CV, fold models = ensemble
        bioattn train ct --manifest labels.csv --out RUN_DIR [--size X Y Z] [--intensity-window LOW HIGH] [--spacing X Y Z]

    Your own data: ``labels.csv`` has the columns ``image,label[,split]``; ``image`` is a NIfTI file or a DICOM series
    folder (relative paths: relative to the CSV), ``label`` any text or number (the sorted distinct labels are the
    classes, saved with the model), ``split`` train/val/test (without it, or without val rows, a seeded stratified 20 %
    of the training rows is held out for validation). Every volume is read once (MONAI CacheDataset), reoriented
    (--orientation, RAS), optionally resampled (--spacing) and windowed (--intensity-window, e.g. HU -160 240 onto [0, 1];
    the default for CT in Hounsfield units), then
    resized (--fit resize) or centre cropped / zero padded (--fit crop-pad) to --size (default 64 64 64; divisible by
    the CNN stride: 16 above 32 voxels, else 8; above 32 voxels each 2³ block of voxels is folded into channels before
    the CNN, --unshuffle); random flips and rotations follow the cache. The preprocessing, the
    evaluation (flip averaging) and a profile of the training volumes are saved in RUN_DIR/preprocessing.json, so
    ``bioattn predict ct`` and ``bioattn explain ct`` apply them by default and warn about inputs unlike the training
    volumes.

    Protocols: ``tuned`` (default) trains 15 epochs with AdamW (weight decay 0.05), warm-up + cosine decay, label
    smoothing 0.1, no intensity jitter, and averages each prediction over the 8 flips of the volume. ``medmnist`` is
    MedMNIST v2's official one: Adam, lr 1e-3, batch 32, no weight decay, lr x0.1 at 50 % and 75 % of --epochs (100).
    Both keep the weights with the best validation AUROC and score them on the test split when there is one.

    Ensembles: --seeds S1 S2 ... trains one complete run per seed (RUN_DIR/seed<S>/) on the same split; --cv K runs a
    K-fold stratified cross-validation over train + val (RUN_DIR/fold<k>/; each fold keeps its final weights, nothing
    is selected on the held-out fold) and reports the out-of-fold AUROC of both models. RUN_DIR then loads as the
    ensemble of the attention models (mean probability) in predict, explain and from_pretrained.

    Writes into RUN_DIR: config.json + model.safetensors + preprocessing.json (the attention model), metrics.json,
    val_auc.png (validation AUROC per epoch, both models), training_curve.png, train_log.csv, checkpoint/ (--resume
    continues), splits.csv (manifest runs), and the same for the baseline in RUN_DIR/baseline_resnet/. Runs under
    torchrun (only rank 0 evaluates and writes).
    """
    dataset: str | None = flag("--dataset", default=None, exclusive="source",
                               help=f"MedMNIST 3D dataset name, found under --data-root (default: {DEFAULT_DATASET})")
    manifest: Path | None = flag("--manifest", default=None, metavar="LABELS.csv", exclusive="source",
                                 help="your own volumes: CSV with columns image,label[,split] (default: none)")
    data_root: str | None = data_root_flag(what="data folder for --dataset")
    positive_class: str | None = flag(
        "--positive-class", default=None, metavar="NAME",
        help="--manifest with two labels: the positive class, the one AUROC, the trust report and p_<class> thresholds "
             "are about (default: the label that is not normal/negative/control/healthy/benign/background/absent/no/"
             "false/0, else the second in sorted order; named in the summary and saved with the model)")
    size: tuple[int, ...] | None = flag(
        "--size", default=None, nargs="+", metavar="N",
        help="--dataset: the volume edge, 64 or 28 (default: 64); --manifest: the model input X Y Z, or one value for "
             "a cube; each of X, Y and Z must be a multiple of the CNN stride (16 when the largest exceeds 32 voxels, "
             "else 8; e.g. 48 48 32, not 48 48 24), checked before any volume is read (default: 64 64 64)")
    out: Path = flag("--out", required=True, help="run directory to create")
    quick: bool = flag("--quick", default=False, help="smoke test: tiny models, 2 epochs of 3 steps of 8")
    baseline: str = flag("--baseline", default="resnet", choices=("resnet", "none"),
                         help="MONAI baseline trained in the same run with the same budget (default: %(default)s)")
    protocol: str = flag("--protocol", default="tuned", choices=tuple(PROTOCOLS),
                         help="training protocol: 'tuned' (AdamW, cosine, label smoothing, flip test-time averaging; "
                              "15 epochs) or 'medmnist' (the MedMNIST v2 official one: Adam, step decay, 100 epochs) "
                              "(default: %(default)s)")
    seeds: tuple[int, ...] | None = seeds_flag(group=_ENSEMBLES)
    cv: int | None = cv_flag(pool="train + val (both models scored)", group=_ENSEMBLES)
    cv_repeats: int = cv_repeats_flag(group=_ENSEMBLES)
    no_augment: bool = flag("--no-augment", default=False, help="turn off flips, rotations and intensity jitter")
    label_smoothing: float | None = flag("--label-smoothing", default=None,
                                         help="cross-entropy label smoothing (default: the protocol's, 0 medmnist, "
                                              "0.1 tuned)")
    intensity_jitter: float | None = flag("--intensity-jitter", default=None,
                                          help="random intensity scale/shift j (default: the protocol's, 0.1 medmnist, "
                                               "0 tuned)")
    tta: str | None = tta_flag(default_help="the protocol's, none medmnist, flips tuned")
    mixup: float | None = flag("--mixup", default=None, metavar="ALPHA",
                               help="mixup: train on convex pairs of volumes (and of their labels), the weight drawn "
                                    "from Beta(ALPHA, ALPHA) per batch; 0: off (default: the protocol's, 0 for both)")
    orientation: str | None = flag("--orientation", default=None, metavar="CODES", group=_OWN,
                                   help="reorient to these axis codes (default: RAS)")
    spacing: tuple[float, float, float] | None = spacing_flag(group=_OWN, default_help="keep each file's")
    intensity_window: tuple[float, float] | None = intensity_window_flag(
        group=_OWN, default_help="-160 240 when the volumes are CT in Hounsfield units, with air and soft tissue; "
                                 "other volumes unchanged")
    fit: str = fit_flag(group=_OWN, default="resize", default_help="%(default)s")
    stem_channels: tuple[int, ...] | None = flag(
        "--stem-channels", default=None, nargs="+", group=_MODEL,
        help="channels of each CNN stage (default: 8 16 32 with --stem resnet and 8 16 64 with --stem residual when "
             "the CNN sees up to 32 voxels after --unshuffle, 16 32 64 96 above)")
    stem_strides: tuple[int, ...] | None = flag(
        "--stem-strides", default=None, nargs="+", group=_MODEL,
        help="stride of each CNN stage (default: 2 2 2 when the CNN sees up to 32 voxels after --unshuffle, 2 2 2 2 "
             "above)")
    stem_depth: int = flag("--stem-depth", default=DEFAULT_STEM_DEPTH, metavar="N", group=_MODEL,
                           help="convolutions per CNN stage: one residual unit of N, or N/2 basic blocks with --stem "
                                "resnet (default: %(default)s, as deep as a ResNet-18 stage)")
    unshuffle: int | None = flag("--unshuffle", default=None, metavar="U", group=_MODEL,
                                 help="fold each U³ block of voxels into channels before the CNN (lossless; the stem "
                                      "then works at 1/U of the size; default: 2 above 32 voxels, so 64³ costs about "
                                      "what 28³ does, else 1)")
    stem_type: str | None = flag("--stem", default=None, choices=STEMS, group=_MODEL,
                                 help="the CNN before attention: MONAI residual units (residual) or a MONAI ResNet's "
                                      "trunk, 7³ convolution, max pooling and basic blocks (resnet) (default: resnet "
                                      "for --manifest, residual for --dataset)")
    pool: str | None = flag("--pool", default=None, choices=POOLS, group=_MODEL,
                            help="what the classifier reads: the [CLS] token (cls) or, beside it, each channel's "
                                 "maximum over the grid tokens (cls+max) or the mean of the CNN's tokens before "
                                 "attention (cls+mean); or a ResNet's readout of the CNN (average pooling, a linear "
                                 "layer) plus the [CLS] head behind a learnable gate that starts at 0 (trunk+gate: the "
                                 "model starts as a ResNet) (default: cls+mean for --manifest, cls for --dataset)")
    init: str | None = flag("--init", default=None, choices=INITS, group=_MODEL,
                            help="how the attention model starts: as the same-run ResNet, trained first (its trunk "
                                 "and readout, frozen), plus an attention branch over its tokens behind a gate that "
                                 "starts at 0, so only attention trains and the ResNet's weights are kept unless it "
                                 "improves on them on the validation split (resnet); or from random weights with "
                                 "its own CNN (scratch) (default: resnet for --manifest with the ResNet baseline "
                                 "and no --stem, --stem-channels, --stem-strides, --unshuffle or --pool; else "
                                 "scratch)")
    distance_channel: bool | None = flag("--distance-channel", default=None, action="boolean", group=_MODEL,
                                         help="also feed the CNN (and the ResNet baseline) how deep each voxel lies "
                                              "inside the mask (its distance to the background), so it sees thickness "
                                              "directly (default: on when the training volumes are binary masks, e.g. "
                                              "AdrenalMNIST3D, else off)")
    embed_dim: int = flag("--embed-dim", default=96, group=_MODEL,
                          help="model width (token size), divisible by 6 (default: %(default)s)")
    heads: int = flag("--heads", default=4, group=_MODEL, help="attention heads (default: %(default)s)")
    layers: int = flag("--layers", default=3, group=_MODEL, help="Transformer layers (default: %(default)s)")
    dropout: float = flag("--dropout", default=0.0, group=_MODEL,
                          help="dropout of the transformer layers and the head (default: %(default)s)")
    train_config: Mapping[str, Any] = training_flags(
        TUNED_DEFAULTS, unset=("epochs",), epochs_help="maximum epochs (default: the protocol's, " + ", ".join(
            f"{protocol.train_config.max_epochs} {name}" for name, protocol in PROTOCOLS.items()) + ")")
    resume: bool = False
    overwrite: bool = False
    device: str = device_flag()

    def options(self) -> CTOptions:
        """The :class:`~bioattn.tasks.ct.options.CTOptions` of these flags (protocol, then ``--config``, then flags)."""
        from bioattn.tasks.ct.train import CTOptions, protocol_train_config
        from bioattn.training.config import config_from_values
        defaults = PROTOCOLS[self.protocol].train_config
        config = protocol_train_config(self.protocol, config_from_values(self.train_config, defaults,
                                                                         max_epochs=defaults.max_epochs),
                                       quick=self.quick, keep_milestones="milestones" in self.train_config)
        fields = values(self)
        for name in ("no_augment", "intensity_window", "train_config", "device"):
            del fields[name]
        return CTOptions(**fields, window=self.intensity_window, augment=not self.no_augment, train_config=config)

    def run(self) -> int:
        from bioattn.tasks.ct.task import TASK
        options = self.options()
        metrics = TASK.run(options)
        if metrics:  # rank 0 only
            print((options.out / "summary.md").read_text(encoding="utf-8").rstrip("\n"))
            if not metrics["test_split_present"]:
                print("note: no test split; this run's numbers are validation numbers"
                      + (", the published ones are test numbers (compare with care)"
                         if metrics["published_test_auroc_accuracy"] else ""))
            print(f"wrote {options.out / 'metrics.json'}")
        return 0


@dataclass(frozen=True, kw_only=True)
class PredictCT:
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
    model: str | None = model_flag(trained_by="bioattn train ct")
    device: str = device_flag()
    input: Path = flag("--input", required=True,
                       help="manifest .csv, .nii/.nii.gz, DICOM file or folder, or MedMNIST .npz")
    output: Path = flag("--output", required=True,
                        help="CSV of class probabilities to write ('-': standard output; the summary then goes to "
                             "stderr)")
    attention_map: str | None = flag("--attention-map", default=None, nargs="?", const="auto", metavar="MAP.nii.gz",
                                     help="also write the [CLS] attention rollout as NIfTI on the input grid "
                                          "(default path: OUTPUT with suffix .attention.nii.gz)")
    split: str | None = flag("--split", default=None, choices=("train", "val", "test"),
                             help=".npz or manifest with a split column: predict only this split (default: every "
                                  "row)")
    head_fusion: str = head_fusion_flag(help="how heads are fused in the attention rollout (default: mean)")
    batch_size: int = flag("--batch-size", default=32, help="volumes per batch (default: 32)")
    workers: int = flag("--workers", default=0,
                        help="manifest: DataLoader worker processes reading and preprocessing the scans (0: in the "
                             "main process) (default: %(default)s)")
    tta: str | None = tta_flag(default_help="as the run evaluated: flips after --protocol tuned, else none")
    intensity_window: tuple[float, float] | None = intensity_window_flag(group=PREPROCESSING, default_help="the run's")
    spacing: tuple[float, float, float] | None = spacing_flag(group=PREPROCESSING, default_help="the run's")
    orientation: str | None = orientation_flag()
    size: tuple[int, ...] | None = size_flag()
    fit: str | None = fit_flag(group=PREPROCESSING, default=None, default_help="the run's")

    def run(self) -> int:
        from bioattn.io import STDOUT
        from bioattn.tasks.ct.predict_run import predict_ct
        result = predict_ct(self.model, self.input, self.output, preprocessing=preprocessing_overrides(self),
                            **values(self, "split", "batch_size", "tta", "attention_map", "head_fusion", "workers",
                                     "device"))
        if not result.written:  # another process of a torchrun job writes the rows
            return 0
        # standard output may hold the CSV
        print(result.rows_preview(), file=sys.stderr if str(self.output) == STDOUT else sys.stdout)
        table = result.scores_table()
        if table:
            print(table, file=sys.stderr)
        print(f"wrote {self.output}" + (f" and {result.attention_path}" if result.attention_path else ""),
              file=sys.stderr)
        return 0
