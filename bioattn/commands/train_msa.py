"""Train the axial MSA model on an alignment and predict its contacts (one family, or every bundled family with --all).

    bioattn train msa --msa FILE [--pdb FILE [--chain ID] | --struct-dat FILE] --out RUN_DIR [--contact-head FILE] [--quick]
    bioattn train msa --all [--families A,B] [--data-root DIR] --out RUN_DIR [--max-minutes M] [--quick]
    bioattn train msa --all --compare-methods [--families A,B] --out RUN_DIR   # predict msa's three --method maps
    bioattn train msa --all --init-from NAME_OR_RUN_DIR [--no-finetune] --out RUN_DIR  # start from 'bioattn pretrain msa'
    bioattn train msa --msa FILE --pdb FILE --out RUN_DIR --seeds 0 1 2        # one model per seed and their ensemble

For one family: reads the alignment (A3M, A2M, aligned FASTA, Stockholm, Clustal, PSICOV; .gz accepted), takes a
random subsample of at most --max-seqs rows with their 80%-identity weights, computes MI + APC and Gaussian
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
seeds' models (bioattn predict msa --run RUN_DIR uses its head; bioattn explain msa explains its first member).
With --all every family of msa/coev and msa/pfam gets a sub-folder, the heads are fitted leave-one-family-out,
contact_head.json and coevolution_head.json are fitted on every family (for --contact-head / bioattn predict
msa), and summary.md / summary.json hold the table; --resume skips finished families. Runs under torchrun.
With --all --seeds each family folder holds its seeds' runs and their ensemble as above, each seed's models get
heads fitted leave-one-family-out on the same seed's models, contact_head.json and coevolution_head.json are
fitted on every seed's model of every family, and the table gives the ensemble and the seeds' mean ± sd P@L/5;
--resume skips finished seeds.
With --all --compare-methods no axial model is trained: each family gets the factored-attention map, the Potts
map and MI + APC, the combined head is chosen and fitted leave-one-family-out (bioattn.tasks.msa_compare), and
contact_head_{attention,potts,combined}.json are fitted on every family.
"""
from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

from bioattn.commands.common import add_device_argument, add_ensemble_arguments, ensemble_options
from bioattn.errors import UserInputError


def add_input_arguments(parser: argparse.ArgumentParser, *, msa_required: bool = False) -> argparse._ArgumentGroup:
    """``--msa --format --query --pdb --chain --struct-dat --out``: the alignment, its optional structure, the output.

    Returns the argument group, for more data flags."""
    from bioattn.data.msa import FORMATS

    data = parser.add_argument_group("data")
    data.add_argument("--msa", type=Path, required=msa_required, help="alignment file (.a3m .a2m .fasta .sto .aln; .gz accepted)")
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
    group.add_argument("--max-seqs", type=int, default=4096,
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
                            "a directory converted by MSATransformer.save_pretrained): predict msa --method esm-msa, a contact "
                            "head reading esm_msa_logit, or train msa --compare-methods adding its map to the combined "
                            "head's choices; nothing is downloaded, see 'bioattn models' (default: none)")
    group.add_argument("--esm-max-rows", type=int, default=256,
                       help="rows fed to the MSA Transformer, chosen for maximal Hamming diversity as in ESM's "
                            "examples; at most 1024 (default: %(default)s)")
    group.add_argument("--quick", action="store_true", help="tiny settings for a smoke test (seconds) (default: off)")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from bioattn.tasks.msa import DEFAULTS
    from bioattn.tasks.msa_head import COEVOLUTION_FEATURES
    from bioattn.training import add_training_args

    data = add_input_arguments(parser)
    data.add_argument("--pred", type=Path, default=None,
                      help="folder of published predictions to compare with (default: pred/ beside --msa, if any)")
    data.add_argument("--all", action="store_true", help="every family of msa/coev and msa/pfam under the data root (default: off)")
    data.add_argument("--compare-methods", action="store_true",
                      help="with --all: no axial model; fit the maps of bioattn predict msa --method attention, potts and "
                           "combined on every family and tabulate them, heads leave-one-family-out (default: off)")
    data.add_argument("--families", default=None, help="with --all: comma-separated subset of family names (default: all)")
    data.add_argument("--data-root", default=None, help="data root for --all (default: $BIOATTN_DATA_ROOT or ../shared/data)")
    model = parser.add_argument_group("model")
    model.add_argument("--heads", type=int, default=4, help="attention heads per layer (default: %(default)s)")
    model.add_argument("--layers", type=int, default=4, help="axial layers (default: %(default)s)")
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


def options_from_args(args: argparse.Namespace, **overrides):
    """``(MSAOptions, TrainConfig)`` from parsed flags (``overrides`` replace flag values), ``--quick`` applied;
    with ``--init-from`` the model size is the pretrained model's."""
    from bioattn.tasks.msa import DEFAULTS, MSAOptions, quick_config
    from bioattn.tasks.msa_features import pretrained_size
    from bioattn.training import config_from_args

    names = {f.name for f in dataclasses.fields(MSAOptions)}
    options = MSAOptions(**{**{k: v for k, v in vars(args).items() if k in names}, **overrides})
    config = config_from_args(args, DEFAULTS)
    if args.quick:
        options, config = options.quick(), quick_config(config)
    if options.init_from is not None:
        options = dataclasses.replace(options, **pretrained_size(options.init_from))
    return options, config


def load_input(args: argparse.Namespace, predictions: Path | None = None):
    """The :class:`~bioattn.data.contacts.ContactTarget` of ``--msa`` with its optional structure."""
    from bioattn.data.contacts import load_target

    return load_target(args.msa, fmt=args.format, query_fasta=args.query, pdb=args.pdb, chain=args.chain,
                       struct_dat=args.struct_dat, predictions_dir=predictions)


def run(args: argparse.Namespace) -> int:
    from bioattn.data import resolve_data_root
    from bioattn.tasks.msa import train_families, train_family
    from bioattn.tasks.msa_compare import compare_methods
    from bioattn.tasks.msa_head import ContactHead
    from bioattn.training import check_run_dir

    check_run_dir(args.out, resume=args.resume, overwrite=args.overwrite)  # before any alignment is read
    options, config = options_from_args(args, seeds=ensemble_options(args)["seeds"])
    if args.compare_methods and options.seeds is not None:
        raise UserInputError("--seeds trains one axial model per seed; --compare-methods trains none (drop --seeds)")
    if options.seeds is not None and not options.finetune:
        raise UserInputError("--seeds trains one model per seed, but --no-finetune trains none: every seed would read the "
                             "same pretrained attention (drop --seeds, or fine-tune)")
    if args.all:
        if args.msa is not None:
            raise UserInputError("give either --msa FILE (one family) or --all (every family under the data root)")
        families = [name.strip() for name in args.families.split(",") if name.strip()] if args.families else None
        run_all = compare_methods if args.compare_methods else train_families
        run_all(resolve_data_root(args.data_root), args.out, options, config, families)
        return 0
    if args.compare_methods:
        raise UserInputError("--compare-methods needs --all")
    if args.msa is None:
        raise UserInputError("give --msa FILE (one family) or --all (every family under the data root)")
    beside = args.msa.parent / "pred"
    predictions = args.pred if args.pred is not None else (beside if beside.is_dir() else None)
    target = load_input(args, predictions)
    head = ContactHead.load(args.contact_head) if args.contact_head is not None else None
    train_family(target, args.out, options, config, head=head, head_source=args.contact_head or "contact head")
    return 0
