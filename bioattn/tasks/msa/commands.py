"""The ``bioattn train|predict|pretrain msa`` commands: options (:func:`bioattn.options.flag` fields) and runs."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

from bioattn.distributed import is_main_process
from bioattn.models.factored_attention import LR_SCHEDULES
from bioattn.models.msa_contact import POSITIONAL_ENCODINGS
from bioattn.options import flag, training_flags, values
from bioattn.tasks.flags import data_root_flag, device_flag, explain_overwrite_flag, model_flag, seeds_flag
from bioattn.tasks.msa.flags import (
    DATA, alignment_flag, chain_flag, format_flag, out_flag, pdb_flag, query_flag, struct_dat_flag,
)
from bioattn.tasks.msa.head import COEVOLUTION_FEATURES, SHIPPED_HEADS
from bioattn.tasks.msa.predict import DEFAULT_METHOD, ESM_METHOD
from bioattn.tasks.msa.pretrain import EXCLUDE_NONE, EXCLUDE_STRUCTURES, PRETRAIN_DEFAULTS, PretrainOptions
from bioattn.tasks.msa.train import DEFAULTS, RR_MIN_SEPARATION, RR_TOP_PER_RESIDUE, MSAOptions

if TYPE_CHECKING:
    from bioattn.training import TrainConfig

_MODEL = "model"
_FIT = "fit (what the head reads)"
_HEAD = "contact head"
_BUDGET = "per-family axial model (with --model)"
_MSA_DEFAULTS = {field.name: field.default for field in dataclasses.fields(MSAOptions)}
_PRETRAIN_DEFAULTS = PretrainOptions()

#: MSAOptions field -> (its flag's names, the rest of its flag): the fit flags train and predict msa share.
_FIT_FLAGS: dict[str, tuple[tuple[str, ...], dict[str, Any]]] = {
    "embed_dim": (("--embed-dim",), {"help": "model width (default: %(default)s)"}),
    "dropout": (("--dropout",), {"help": "dropout of the model (default: %(default)s)"}),
    "rows": (("--rows",), {"help": "alignment rows per training block (default: %(default)s)"}),
    "max_seqs": (("--max-rows",), {"help": "random subsample of the alignment used for the model and MI / Gaussian "
                                           "DCA (default: %(default)s)"}),
    "feature_blocks": (("--feature-blocks",),
                       {"help": "row blocks whose attention maps are averaged (default: %(default)s)"}),
    "potts_iterations": (("--potts-iterations",),
                         {"help": "L-BFGS iterations of the Potts model (default: %(default)s, CCMpred's)"}),
    "potts_seqs": (("--potts-seqs",), {"help": "random rows of the alignment for the Potts fit; 0: every row, as "
                                               "CCMpred (default: %(default)s)"}),
    "potts_minutes": (("--potts-minutes",), {"help": "CPU-time budget of the Potts fit, sequence weights included "
                                                     "(default: %(default)s)"}),
    "factored_heads": (("--factored-heads",), {"help": "heads of factored attention (default: %(default)s)"}),
    "factored_dim": (("--factored-dim",),
                     {"help": "query/key size per head of factored attention (default: %(default)s)"}),
    "factored_steps": (("--factored-steps",),
                       {"help": "Adam steps of the factored-attention fit (default: %(default)s)"}),
    "factored_lr": (("--factored-lr",),
                    {"help": "Adam learning rate of the factored-attention fit (default: %(default)s)"}),
    "factored_schedule": (("--factored-schedule",), {
        "choices": LR_SCHEDULES, "help": "learning-rate schedule of the factored-attention fit: cosine decay to 0 "
                                         "over --factored-steps, or constant (default: %(default)s)"}),
    "factored_minutes": (("--factored-minutes",), {"help": "CPU-time budget of the factored-attention fit, sequence "
                                                           "weights included (default: %(default)s)"}),
    "init_from": (("--init-from",), {
        "metavar": "NAME_OR_RUN_DIR",
        "help": "start the per-family axial model from a pretrained one (a 'bioattn pretrain msa' run directory or a "
                "shipped name such as msa-axial-pfam); its size replaces --embed-dim, --heads, --layers, --dropout "
                "(default: a fresh model)"}),
    "finetune": (("--finetune",), {
        "action": "boolean",
        "help": "with --init-from: train the pretrained model further on the family; --no-finetune reads its "
                "attention maps as they are (attention-only contacts) (default: %(default)s)"}),
    "esm_weights": (("--weights",), {
        "metavar": "FILE_OR_DIR",
        "help": "ESM-MSA-1b weights you have (a fair-esm .pt with its -contact-regression.pt beside it, or a "
                "directory converted by MSATransformer.save_pretrained): predict msa --contact-method esm-msa, a "
                "contact head reading esm_msa_logit, or train msa --compare-methods adding its map to the combined "
                "head's choices; nothing is downloaded, see 'bioattn models' (default: none)"}),
    "esm_max_rows": (("--esm-max-rows",), {"help": "rows fed to the MSA Transformer, chosen for maximal Hamming "
                                                   "diversity as in ESM's examples; at most 1024 (default: "
                                                   "%(default)s)"}),
    "quick": (("--quick",), {"help": "tiny settings for a smoke test (seconds) (default: off)"}),
}


def _fit_flag(name: str, *, group: str) -> Any:
    """The field of the fit flag of the :class:`~bioattn.tasks.msa.train.MSAOptions` field ``name``, in ``group``."""
    names, how = _FIT_FLAGS[name]
    return flag(*names, default=_MSA_DEFAULTS[name], group=group, **how)


def _msa_options(command: Any, config: TrainConfig) -> tuple[MSAOptions, TrainConfig]:
    """The :class:`~bioattn.tasks.msa.train.MSAOptions` of ``command``'s fields and ``config``, ``--quick`` applied."""
    from bioattn.tasks.msa.features import resolve_sizes
    from bioattn.tasks.msa.train import quick_config
    options = MSAOptions(**values(command, *_MSA_DEFAULTS))
    return resolve_sizes(options), quick_config(config) if options.quick else config


@dataclass(frozen=True, kw_only=True)
class TrainMSA:
    """Train the axial MSA model on an alignment and predict its contacts (one family, or every bundled family with --all).

        bioattn train msa --input FILE [--pdb FILE [--chain ID] | --struct-dat FILE] --out RUN_DIR [--contact-head FILE] [--quick]
        bioattn train msa --all [--families A,B] [--data-root DIR] --out RUN_DIR [--max-minutes M] [--quick]
        bioattn train msa --all --compare-methods [--families A,B] --out RUN_DIR   # predict msa's three --contact-method maps
        bioattn train msa --all --init-from NAME_OR_RUN_DIR [--no-finetune] --out RUN_DIR  # start from 'bioattn pretrain msa'
        bioattn train msa --input FILE --pdb FILE --out RUN_DIR --seeds 0 1 2        # one model per seed and their ensemble

    For one family: reads the alignment (A3M, A2M, aligned FASTA, Stockholm, Clustal, PSICOV; .gz accepted), takes a
    random subsample of at most --max-rows rows with their 80%-identity weights, computes MI + APC and Gaussian
    DCA + APC and, with --coevolution potts (the default), a pseudo-likelihood Potts model + APC (CCMpred's
    objective, every row of the alignment; minutes on CPU); trains MSAContactModel from scratch by masked-token
    prediction on blocks of --rows rows (early-stopped on held-out rows, never on contacts); reads its tied
    row-attention maps (symmetrised, APC, sorted over heads). A contact head (logistic regression fitted on OTHER
    families) turns these pair features into contact probabilities: --contact-head FILE, else the head shipped
    with bioattn (Potts map only) when --coevolution potts, else uncalibrated scores (said in the RR file).

    Writes contacts.npy (L×L probabilities), contacts.rr (CASP RR, top 2L pairs with |i-j| ≥ 6), contact_map.png,
    metrics.json (with a structure: long-range P@L/5, P@L/2, P@L of the prediction, of the baselines computed in
    the same run and of published predictions in pred/ beside the alignment), features.safetensors, the model
    (config.json + model.safetensors), contact_head.json (the head used), train_log.csv, training_curve.png and
    prepare.json (the alignment's facts and CPU times; --resume reuses a finished run and adds only missing maps).
    --seeds S ... trains one such complete run per seed in RUN_DIR/seed<S>/ (the coevolution maps that do not
    depend on the seed, such as the Potts map fitted on every row, are computed once and copied into each); RUN_DIR
    then holds their ensemble: contacts.npy, contacts.rr and contact_map.png of the mean of the seeds' contact
    probabilities, metrics.json (each seed's long-range P@L/5, P@L/2, P@L, their mean ± sd, the ensemble's, and the
    baselines averaged over the seeds), contact_head.json and a config.json that loads RUN_DIR as an Ensemble of the
    seeds' models (bioattn predict msa --model RUN_DIR uses its head; bioattn explain msa explains its first member).
    With --all every family of msa/coev and msa/pfam gets a sub-folder, the heads are fitted leave-one-family-out,
    contact_head.json and coevolution_head.json are fitted on every family (for --contact-head / bioattn predict
    msa), and summary.md / summary.json hold the table; --resume skips finished families. Runs under torchrun.
    With --all --seeds each family folder holds its seeds' runs and their ensemble as above, each seed's models get
    heads fitted leave-one-family-out on the same seed's models, contact_head.json and coevolution_head.json are
    fitted on every seed's model of every family, and the table gives the ensemble and the seeds' mean ± sd P@L/5;
    --resume skips finished seeds.
    With --all --compare-methods no axial model is trained: each family gets the factored-attention map, the Potts
    map and MI + APC, the combined head is chosen and fitted leave-one-family-out (bioattn.tasks.msa.compare), and
    contact_head_{attention,potts,combined}.json are fitted on every family.
    """

    msa: Path | None = alignment_flag()
    format: str | None = format_flag()
    query: Path | None = query_flag()
    pdb: Path | None = pdb_flag()
    chain: str | None = chain_flag()
    struct_dat: Path | None = struct_dat_flag()
    out: Path = out_flag()
    pred: Path | None = flag("--pred", default=None, group=DATA,
                             help="folder of published predictions to compare with (default: pred/ beside --input, "
                                  "if any)")
    all: bool = flag("--all", default=False, group=DATA,
                     help="every family of msa/coev and msa/pfam under the data root (default: off)")
    compare_methods: bool = flag("--compare-methods", default=False, group=DATA,
                                 help="with --all: no axial model; fit the maps of bioattn predict msa "
                                      "--contact-method attention, potts and combined on every family and tabulate "
                                      "them, heads leave-one-family-out (default: off)")
    families: str | None = flag("--families", default=None, group=DATA,
                                help="with --all: comma-separated subset of family names (default: all)")
    data_root: str | None = data_root_flag(what="data root for --all", group=DATA)
    heads: int = flag("--heads", default=_MSA_DEFAULTS["heads"], group=_MODEL,
                      help="attention heads per layer (default: %(default)s)")
    layers: int = flag("--layers", default=_MSA_DEFAULTS["layers"], group=_MODEL,
                       help="axial layers (default: %(default)s)")
    coevolution: str = flag("--coevolution", default=_MSA_DEFAULTS["coevolution"],
                            choices=tuple(COEVOLUTION_FEATURES), group=_MODEL,
                            help="coevolution map(s) fed to the contact head beside attention: none; gaussian "
                                 "(Gaussian DCA + MI, seconds); potts (a pseudo-likelihood Potts model, CCMpred's "
                                 "objective; minutes) (default: %(default)s)")
    contact_head: Path | None = flag("--contact-head", default=None, group=_MODEL,
                                     help="contact_head.json of an --all run, for a new family (default: the shipped "
                                          "head when --coevolution potts, else none)")
    embed_dim: int = _fit_flag("embed_dim", group=_MODEL)
    dropout: float = _fit_flag("dropout", group=_MODEL)
    rows: int = _fit_flag("rows", group=_MODEL)
    max_seqs: int = _fit_flag("max_seqs", group=_MODEL)
    feature_blocks: int = _fit_flag("feature_blocks", group=_MODEL)
    potts_iterations: int = _fit_flag("potts_iterations", group=_MODEL)
    potts_seqs: int = _fit_flag("potts_seqs", group=_MODEL)
    potts_minutes: float = _fit_flag("potts_minutes", group=_MODEL)
    factored_heads: int = _fit_flag("factored_heads", group=_MODEL)
    factored_dim: int = _fit_flag("factored_dim", group=_MODEL)
    factored_steps: int = _fit_flag("factored_steps", group=_MODEL)
    factored_lr: float = _fit_flag("factored_lr", group=_MODEL)
    factored_schedule: str = _fit_flag("factored_schedule", group=_MODEL)
    factored_minutes: float = _fit_flag("factored_minutes", group=_MODEL)
    init_from: str | None = _fit_flag("init_from", group=_MODEL)
    finetune: bool = _fit_flag("finetune", group=_MODEL)
    esm_weights: str | None = _fit_flag("esm_weights", group=_MODEL)
    esm_max_rows: int = _fit_flag("esm_max_rows", group=_MODEL)
    quick: bool = _fit_flag("quick", group=_MODEL)
    train_config: Mapping[str, Any] = training_flags(DEFAULTS)
    resume: bool = False
    overwrite: bool = False
    seeds: tuple[int, ...] | None = seeds_flag(group="ensembles")
    device: str = device_flag()

    def options(self) -> tuple[MSAOptions, TrainConfig]:
        """The :class:`~bioattn.tasks.msa.train.MSAOptions` and :class:`~bioattn.training.TrainConfig` of the flags."""
        from bioattn.training.config import config_from_values
        return _msa_options(self, config_from_values(self.train_config, DEFAULTS))

    def run(self) -> int:
        from bioattn.tasks.msa.task import TASK
        options, config = self.options()
        TASK.run(options, config, msa=self.msa, fmt=self.format, contact_head=self.contact_head,
                 all_families=self.all, compare=self.compare_methods,
                 **values(self, "query", "pdb", "chain", "struct_dat", "pred", "families"))
        summary = (options.out / "summary.md") if is_main_process() and options.out else None
        if summary is not None and summary.is_file():
            print(summary.read_text(encoding="utf-8"), end="")
        return 0


@dataclass(frozen=True, kw_only=True)
class PredictMSA:
    """Predict the residue contacts of a new alignment (no structure needed): contacts.npy, a CASP RR file and a map.

        bioattn predict msa --input FILE --out DIR [--contact-method attention|potts|combined |
                            --contact-head FILE |
                            --model NAME_OR_DIR] [--top N] [--quick] [--pdb FILE [--chain ID] | --struct-dat FILE]

    The contact head decides what is fitted on the alignment. --contact-method picks a head shipped with bioattn (a logistic
    regression on z-scored maps, see each head's fit_on and settings):
      attention  factored attention (one layer, queries and keys from positions, values from residues, fitted by
                 pseudo-likelihood on every row; --factored-steps Adam steps from --factored-lr with a cosine decay,
                 --factored-minutes CPU budget); its contact map is the APC-corrected norm of the couplings its
                 attention implies. No coevolution statistic (no Potts model, DCA or MI) is computed, not even for
                 evaluation.
      potts      (default) a pseudo-likelihood Potts model (CCMpred's objective on every row, --potts-minutes CPU
                 budget).
      combined   the head chosen leave-one-family-out on the bundled families among one per map and one on both
                 (its choice, and why: metrics.json of the run that fitted it).
      esm-msa    ESM's MSA Transformer (ESM-MSA-1b) with the weights you give in --weights (a fair-esm .pt with its
                 -contact-regression.pt beside it, or a converted directory; nothing is downloaded, see 'bioattn
                 models'), on at most --esm-max-rows rows chosen for diversity as in ESM's examples; its own contact
                 regression gives the probabilities, and row_attention.safetensors holds its maps.
    --contact-head FILE or --model NAME_OR_DIR (a bioattn train msa run directory, or such a run shipped with bioattn:
    its contact_head.json and model size) can read attention features of the axial model too: then the per-family
    axial model is also trained on the alignment (--max-minutes and the training flags apply; one model, seed
    --seed; for the run of an ensemble trained with --seeds S1 S2 ..., one model per seed in --out/seed<S>/ and
    their mean in --out, as train msa --seeds writes it). A run whose head was fitted on a pretrained model
    starts from the same model here, fine-tuned or not as its contact_head.json settings (init_from, finetune) say;
    --model msa-axial-pfam is such a model: its shipped head reads its attention without fine-tuning. A
    --model holding another model type (a promoter or CT model) is an error naming that type.

    Writes, under --out: contacts.npy (L×L contact probabilities, L = the query's residues), contacts.rr (CASP
    RR: PFRMAT, TARGET, AUTHOR, METHOD, MODEL 1, the sequence, then "i j 0 8 p" for the top --top pairs with
    |i-j| ≥ --min-separation, 1-based, i < j, p in [0, 1], most probable first, END), contact_map.png,
    contact_head.json (the head used), features.safetensors and metrics.json (the alignment's facts, CPU times
    and, with --pdb or --struct-dat, used for evaluation only: long-range P@L/5, P@L/2, P@L of the prediction and
    of the coevolution maps computed in the same run).
    """

    msa: Path = alignment_flag(required=True)
    format: str | None = format_flag()
    query: Path | None = query_flag()
    pdb: Path | None = pdb_flag()
    chain: str | None = chain_flag()
    struct_dat: Path | None = struct_dat_flag()
    out: Path = out_flag()
    model: str | None = model_flag(trained_by="bioattn train msa", required=False, group=_HEAD)
    contact_head: Path | None = flag("--contact-head", default=None, group=_HEAD, exclusive="model",
                                     help="contact_head.json to use (default: the head shipped for --contact-method)")
    method: str | None = flag("--contact-method", default=None, choices=(*SHIPPED_HEADS, ESM_METHOD), group=_HEAD,
                              exclusive="model",
                              help="which shipped head: factored attention only, Potts only, or both; or esm-msa, "
                                   f"the MSA Transformer with --weights (default: {DEFAULT_METHOD})")
    top: int | None = flag("--top", default=None, group="output",
                           help=f"pairs written to contacts.rr (default: {RR_TOP_PER_RESIDUE}L)")
    min_separation: int = flag("--min-separation", default=RR_MIN_SEPARATION, group="output",
                               help="smallest |i-j| written to contacts.rr (default: %(default)s)")
    embed_dim: int = _fit_flag("embed_dim", group=_FIT)
    dropout: float = _fit_flag("dropout", group=_FIT)
    rows: int = _fit_flag("rows", group=_FIT)
    max_seqs: int = _fit_flag("max_seqs", group=_FIT)
    feature_blocks: int = _fit_flag("feature_blocks", group=_FIT)
    potts_iterations: int = _fit_flag("potts_iterations", group=_FIT)
    potts_seqs: int = _fit_flag("potts_seqs", group=_FIT)
    potts_minutes: float = _fit_flag("potts_minutes", group=_FIT)
    factored_heads: int = _fit_flag("factored_heads", group=_FIT)
    factored_dim: int = _fit_flag("factored_dim", group=_FIT)
    factored_steps: int = _fit_flag("factored_steps", group=_FIT)
    factored_lr: float = _fit_flag("factored_lr", group=_FIT)
    factored_schedule: str = _fit_flag("factored_schedule", group=_FIT)
    factored_minutes: float = _fit_flag("factored_minutes", group=_FIT)
    init_from: str | None = _fit_flag("init_from", group=_FIT)
    finetune: bool = _fit_flag("finetune", group=_FIT)
    esm_weights: str | None = _fit_flag("esm_weights", group=_FIT)
    esm_max_rows: int = _fit_flag("esm_max_rows", group=_FIT)
    quick: bool = _fit_flag("quick", group=_FIT)
    max_minutes: float = flag("--max-minutes", default=DEFAULTS.max_minutes, group=_BUDGET,
                              help="wall-clock budget for training the per-family axial model (default: %(default)s)")
    seed: int = flag("--seed", default=DEFAULTS.seed, group=_BUDGET, help="random seed (default: %(default)s)")
    overwrite: bool = explain_overwrite_flag()
    device: str = device_flag()

    def options(self) -> tuple[MSAOptions, TrainConfig]:
        """The :class:`~bioattn.tasks.msa.train.MSAOptions` and :class:`~bioattn.training.TrainConfig` of the flags."""
        from bioattn.training.config import config_from_values
        return _msa_options(self, config_from_values(values(self, "max_minutes", "seed", "device"), DEFAULTS))

    def run(self) -> int:
        from bioattn.tasks.msa.predict import prediction_report, run_predict_msa
        options, config = self.options()
        metrics, head = run_predict_msa(self.msa, self.out, options, config, fmt=self.format,
                                        **values(self, "method", "contact_head", "model", "top", "min_separation",
                                                 "query", "pdb", "chain", "struct_dat"))
        print(prediction_report(metrics, head, self.out))
        return 0


@dataclass(frozen=True, kw_only=True)
class PretrainMSA:
    """Pretrain one axial MSA model across many alignments by masked-token prediction (no contacts, no structures).

        bioattn pretrain msa --out RUN_DIR [--data-root DIR] [--exclude structures|none|A,B] [--max-minutes M] [--quick]

    Reads every alignment under the data root's msa/unlabeled (A2M, aligned FASTA, ...; .gz accepted) and the
    msa/coev and msa/pfam families not excluded. --exclude structures (the default) leaves out every family with a
    structure, i.e. every family that 'bioattn train msa --all' evaluates, and every unlabeled alignment of the same
    Pfam accession (e.g. PF13354's full and seed alignments): one pretrained model is then honest for all of them.
    Excluded files are never read. Each step draws one alignment (probability ∝ √Neff at 80 % identity), a block
    of --rows rows by weight and, when the alignment is longer, a random window of --max-columns columns; the
    model (sinusoidal positions by default) is early-stopped on the masked-token loss of held-out rows.

    Writes config.json + model.safetensors (load it with MSAContactModel.from_pretrained(RUN_DIR), or start
    'bioattn train msa --init-from RUN_DIR' from it), metrics.json (per alignment: rows, Neff, sampling
    probability, held-out masked-token loss and accuracy; the excluded families), train_log.csv,
    training_curve.png and checkpoints (--resume continues).
    """

    out: Path = out_flag(help="output run directory")
    data_root: str | None = data_root_flag(what="data root", group=DATA)
    exclude: str = flag("--exclude", default=EXCLUDE_STRUCTURES, group=DATA,
                        help="families never read: 'structures' (every msa/coev and msa/pfam family, i.e. every "
                             "evaluated one), 'none', or comma-separated family names / Pfam accessions (default: "
                             "%(default)s)")
    max_seqs: int = flag("--max-rows", default=_PRETRAIN_DEFAULTS.max_seqs, group=DATA,
                         help="random rows kept per alignment (default: %(default)s)")
    rows: int = flag("--rows", default=_PRETRAIN_DEFAULTS.rows, group=DATA,
                     help="alignment rows per training block (default: %(default)s)")
    max_columns: int = flag("--max-columns", default=_PRETRAIN_DEFAULTS.max_columns, group=DATA,
                            help="longer alignments are cropped to a random window of this many columns (default: "
                                 "%(default)s)")
    embed_dim: int = flag("--embed-dim", default=_PRETRAIN_DEFAULTS.embed_dim, group=_MODEL,
                          help="model width (default: %(default)s)")
    heads: int = flag("--heads", default=_PRETRAIN_DEFAULTS.heads, group=_MODEL,
                      help="attention heads per layer (default: %(default)s)")
    layers: int = flag("--layers", default=_PRETRAIN_DEFAULTS.layers, group=_MODEL,
                       help="axial layers (default: %(default)s)")
    dropout: float = flag("--dropout", default=_PRETRAIN_DEFAULTS.dropout, group=_MODEL,
                          help="dropout (default: %(default)s)")
    positional: str = flag("--positional", default=_PRETRAIN_DEFAULTS.positional, choices=POSITIONAL_ENCODINGS,
                           group=_MODEL,
                           help="column positions: sinusoidal (defined beyond the training crops) or learned "
                                "(default: %(default)s)")
    quick: bool = _fit_flag("quick", group=_MODEL)
    train_config: Mapping[str, Any] = training_flags(PRETRAIN_DEFAULTS)
    resume: bool = False
    overwrite: bool = False
    device: str = device_flag()

    def options(self) -> tuple[PretrainOptions, TrainConfig, str | list[str]]:
        """``(PretrainOptions, TrainConfig, exclude)`` of these flags, ``--quick`` applied."""
        from bioattn.tasks.msa.pretrain import quick_pretrain_config
        from bioattn.training.config import config_from_values
        options = PretrainOptions(**values(self, *(field.name for field in dataclasses.fields(PretrainOptions))))
        config = config_from_values(self.train_config, PRETRAIN_DEFAULTS)
        if self.quick:
            options, config = options.quick_sizes(), quick_pretrain_config(config)
        exclude = self.exclude if self.exclude in (EXCLUDE_STRUCTURES, EXCLUDE_NONE) else \
            [name.strip() for name in self.exclude.split(",") if name.strip()]
        return options, config, exclude

    def run(self) -> int:
        from bioattn.tasks.msa.pretrain import pretrain, pretrain_report
        options, config, exclude = self.options()
        metrics = pretrain(self.data_root, self.out, options, config, exclude)
        print(pretrain_report(metrics, self.out))
        return 0
