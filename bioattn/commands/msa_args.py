"""The flags of ``bioattn train|predict|explain|pretrain msa``; those ``train msa`` and ``predict msa`` share (the
alignment and its structure, what fitting one alignment needs) and the task options they make."""
from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path


def add_input_arguments(parser: argparse.ArgumentParser, *, msa_required: bool = False) -> argparse._ArgumentGroup:
    """``--input --format --query --pdb --chain --struct-dat --out``: the alignment, its optional structure, the output.

    Returns the argument group, for more data flags."""
    from bioattn.data.msa import FORMATS

    data = parser.add_argument_group("data")
    data.add_argument("--input", dest="msa", type=Path, default=None, metavar="FILE", required=msa_required,
                      help="alignment file (.a3m .a2m .fasta .sto .aln; .gz accepted)")
    data.add_argument("--format", choices=FORMATS, default=None, help="alignment format (default: from the file name)")
    data.add_argument("--query", type=Path, default=None,
                      help="FASTA with the query sequence (default: the --pdb chain's row, else row 0)")
    data.add_argument("--pdb", type=Path, default=None, help="native structure (PDB or mmCIF) for evaluation (default: none)")
    data.add_argument("--chain", default=None, help="chain of --pdb (default: the first protein chain)")
    data.add_argument("--struct-dat", type=Path, default=None,
                      help="arDCA *_struct.dat column distances, instead of --pdb (default: none)")
    data.add_argument("--out", type=Path, required=True, help="output directory")
    return data


def add_fit_arguments(group: argparse._ArgumentGroup) -> None:
    """What fitting one alignment needs besides the architecture: model width, row sampling, Potts and factored-attention
    budgets, ``--quick``."""
    from bioattn.models.factored_attention import LR_SCHEDULES

    group.add_argument("--embed-dim", type=int, default=64, help="model width (default: %(default)s)")
    group.add_argument("--dropout", type=float, default=0.1, help="dropout of the model (default: %(default)s)")
    group.add_argument("--rows", type=int, default=32, help="alignment rows per training block (default: %(default)s)")
    group.add_argument("--max-rows", dest="max_seqs", type=int, default=4096,
                       help="random subsample of the alignment used for the model and MI / Gaussian DCA (default: %(default)s)")
    group.add_argument("--feature-blocks", type=int, default=4,
                       help="row blocks whose attention maps are averaged (default: %(default)s)")
    group.add_argument("--potts-iterations", type=int, default=50,
                       help="L-BFGS iterations of the Potts model (default: %(default)s, CCMpred's)")
    group.add_argument("--potts-seqs", type=int, default=0,
                       help="random rows of the alignment for the Potts fit; 0: every row, as CCMpred (default: %(default)s)")
    group.add_argument("--potts-minutes", type=float, default=15.0,
                       help="CPU-time budget of the Potts fit, sequence weights included (default: %(default)s)")
    group.add_argument("--factored-heads", type=int, default=32, help="heads of factored attention (default: %(default)s)")
    group.add_argument("--factored-dim", type=int, default=32,
                       help="query/key size per head of factored attention (default: %(default)s)")
    group.add_argument("--factored-steps", type=int, default=1000,
                       help="Adam steps of the factored-attention fit (default: %(default)s)")
    group.add_argument("--factored-lr", type=float, default=0.02,
                       help="Adam learning rate of the factored-attention fit (default: %(default)s)")
    group.add_argument("--factored-schedule", choices=LR_SCHEDULES, default="cosine",
                       help="learning-rate schedule of the factored-attention fit: cosine decay to 0 over "
                            "--factored-steps, or constant (default: %(default)s)")
    group.add_argument("--factored-minutes", type=float, default=18.0,
                       help="CPU-time budget of the factored-attention fit, sequence weights included (default: %(default)s)")
    group.add_argument("--init-from", default=None, metavar="NAME_OR_RUN_DIR",
                       help="start the per-family axial model from a pretrained one (a 'bioattn pretrain msa' run "
                            "directory or a shipped name such as msa-axial-pfam); its size replaces --embed-dim, "
                            "--heads, --layers, --dropout (default: a fresh model)")
    group.add_argument("--finetune", action=argparse.BooleanOptionalAction, default=True,
                       help="with --init-from: train the pretrained model further on the family; --no-finetune reads its "
                            "attention maps as they are (attention-only contacts) (default: %(default)s)")
    group.add_argument("--weights", dest="esm_weights", default=None, metavar="FILE_OR_DIR",
                       help="ESM-MSA-1b weights you have (a fair-esm .pt with its -contact-regression.pt beside it, or "
                            "a directory converted by MSATransformer.save_pretrained): predict msa --contact-method esm-msa, a contact "
                            "head reading esm_msa_logit, or train msa --compare-methods adding its map to the combined "
                            "head's choices; nothing is downloaded, see 'bioattn models' (default: none)")
    group.add_argument("--esm-max-rows", type=int, default=256,
                       help="rows fed to the MSA Transformer, chosen for maximal Hamming diversity as in ESM's "
                            "examples; at most 1024 (default: %(default)s)")
    group.add_argument("--quick", action="store_true", help="tiny settings for a smoke test (seconds) (default: off)")


def options_from_args(args: argparse.Namespace, **overrides):
    """``(MSAOptions, TrainConfig)`` from parsed flags (``overrides`` replace flag values), ``--quick`` applied;
    with ``--init-from`` the model size is the pretrained model's."""
    from bioattn.tasks.msa.train import DEFAULTS, MSAOptions, quick_config
    from bioattn.tasks.msa.features import resolve_sizes
    from bioattn.commands.training_args import config_from_args

    names = {f.name for f in dataclasses.fields(MSAOptions)}
    options = MSAOptions(**{**{k: v for k, v in vars(args).items() if k in names}, **overrides})
    config = config_from_args(args, DEFAULTS)
    return resolve_sizes(options), quick_config(config) if args.quick else config


def pretrain_options_from_args(args: argparse.Namespace):
    """``(PretrainOptions, TrainConfig, exclude)`` from parsed ``bioattn pretrain msa`` flags, ``--quick`` applied;
    ``exclude`` is ``structures``, ``none`` or a list of family names."""
    from bioattn.commands.training_args import config_from_args
    from bioattn.tasks.msa.pretrain import (
        EXCLUDE_NONE, EXCLUDE_STRUCTURES, PRETRAIN_DEFAULTS, PretrainOptions, quick_pretrain_config,
    )

    names = {f.name for f in dataclasses.fields(PretrainOptions)}
    options = PretrainOptions(**{k: v for k, v in vars(args).items() if k in names})
    config = config_from_args(args, PRETRAIN_DEFAULTS)
    if args.quick:
        options, config = options.quick_sizes(), quick_pretrain_config(config)
    exclude = args.exclude if args.exclude in (EXCLUDE_STRUCTURES, EXCLUDE_NONE) else \
        [name.strip() for name in args.exclude.split(",") if name.strip()]
    return options, config, exclude


# ----------------------------------------------------------------------------------------------------- train msa
def add_train_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of ``bioattn train msa``."""
    from bioattn.commands.common import (
        add_data_root_argument, add_device_argument, add_ensemble_arguments, add_size_arguments,
    )
    from bioattn.tasks.msa.train import DEFAULTS
    from bioattn.tasks.msa.head import COEVOLUTION_FEATURES
    from bioattn.commands.training_args import add_training_args

    data = add_input_arguments(parser)
    data.add_argument("--pred", type=Path, default=None,
                      help="folder of published predictions to compare with (default: pred/ beside --input, if any)")
    data.add_argument("--all", action="store_true", help="every family of msa/coev and msa/pfam under the data root (default: off)")
    data.add_argument("--compare-methods", action="store_true",
                      help="with --all: no axial model; fit the maps of bioattn predict msa --contact-method attention, potts and "
                           "combined on every family and tabulate them, heads leave-one-family-out (default: off)")
    data.add_argument("--families", default=None, help="with --all: comma-separated subset of family names (default: all)")
    add_data_root_argument(data, what="data root for --all")
    model = parser.add_argument_group("model")
    add_size_arguments(model, embed_dim=None, heads=4, layers=4, heads_help="attention heads per layer",
                       layers_help="axial layers")
    model.add_argument("--coevolution", choices=tuple(COEVOLUTION_FEATURES), default="potts",
                       help="coevolution map(s) fed to the contact head beside attention: none; gaussian (Gaussian DCA + MI, "
                            "seconds); potts (a pseudo-likelihood Potts model, CCMpred's objective; minutes) (default: %(default)s)")
    model.add_argument("--contact-head", type=Path, default=None,
                       help="contact_head.json of an --all run, for a new family (default: the shipped head when "
                            "--coevolution potts, else none)")
    add_fit_arguments(model)
    add_training_args(parser, DEFAULTS)
    add_ensemble_arguments(parser, cv_pool=None)
    add_device_argument(parser)


# --------------------------------------------------------------------------------------------------- predict msa
def add_predict_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of ``bioattn predict msa``."""
    from bioattn.commands.common import add_device_argument, add_model_arguments
    from bioattn.tasks.msa.train import DEFAULTS, RR_MIN_SEPARATION, RR_TOP_PER_RESIDUE
    from bioattn.tasks.msa.head import SHIPPED_HEADS
    from bioattn.tasks.msa.predict import DEFAULT_METHOD, ESM_METHOD

    add_input_arguments(parser, msa_required=True)
    head = add_model_arguments(parser.add_argument_group("contact head"), trained_by="bioattn train msa", required=False)
    head.add_argument("--contact-head", type=Path, default=None,
                      help="contact_head.json to use (default: the head shipped for --contact-method)")
    head.add_argument("--contact-method", dest="method", choices=(*SHIPPED_HEADS, ESM_METHOD), default=None,
                               help="which shipped head: factored attention only, Potts only, or both; or esm-msa, the "
                                    f"MSA Transformer with --weights (default: {DEFAULT_METHOD})")
    output = parser.add_argument_group("output")
    output.add_argument("--top", type=int, default=None,
                        help=f"pairs written to contacts.rr (default: {RR_TOP_PER_RESIDUE}L)")
    output.add_argument("--min-separation", type=int, default=RR_MIN_SEPARATION,
                        help="smallest |i-j| written to contacts.rr (default: %(default)s)")
    add_fit_arguments(parser.add_argument_group("fit (what the head reads)"))
    budget = parser.add_argument_group("per-family axial model (with --model)")
    budget.add_argument("--max-minutes", type=float, default=DEFAULTS.max_minutes,
                        help="wall-clock budget for training the per-family axial model (default: %(default)s)")
    budget.add_argument("--seed", type=int, default=DEFAULTS.seed, help="random seed (default: %(default)s)")
    parser.add_argument("--overwrite", action="store_true", help="replace the contents of a non-empty --out folder")
    add_device_argument(parser)


# -------------------------------------------------------------------------------------------------- pretrain msa
def add_pretrain_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of ``bioattn pretrain msa``."""
    from bioattn.commands.common import add_data_root_argument, add_size_arguments, add_training_and_device_arguments
    from bioattn.models.msa_contact import POSITIONAL_ENCODINGS
    from bioattn.tasks.msa.pretrain import EXCLUDE_STRUCTURES, PRETRAIN_DEFAULTS, PretrainOptions

    defaults = PretrainOptions()
    data = parser.add_argument_group("data")
    data.add_argument("--out", type=Path, required=True, help="output run directory")
    add_data_root_argument(data, what="data root")
    data.add_argument("--exclude", default=EXCLUDE_STRUCTURES,
                      help="families never read: 'structures' (every msa/coev and msa/pfam family, i.e. every evaluated "
                           "one), 'none', or comma-separated family names / Pfam accessions (default: %(default)s)")
    data.add_argument("--max-rows", dest="max_seqs", type=int, default=defaults.max_seqs,
                             help="random rows kept per alignment (default: %(default)s)")
    data.add_argument("--rows", type=int, default=defaults.rows, help="alignment rows per training block (default: %(default)s)")
    data.add_argument("--max-columns", type=int, default=defaults.max_columns,
                      help="longer alignments are cropped to a random window of this many columns (default: %(default)s)")
    model = parser.add_argument_group("model")
    add_size_arguments(model, embed_dim=defaults.embed_dim, heads=defaults.heads, layers=defaults.layers,
                       width_help="model width", heads_help="attention heads per layer", layers_help="axial layers",
                       dropout=defaults.dropout, dropout_help="dropout")
    model.add_argument("--positional", choices=POSITIONAL_ENCODINGS, default=defaults.positional,
                       help="column positions: sinusoidal (defined beyond the training crops) or learned (default: %(default)s)")
    model.add_argument("--quick", action="store_true", help="tiny settings for a smoke test (seconds) (default: off)")
    add_training_and_device_arguments(parser, PRETRAIN_DEFAULTS)
