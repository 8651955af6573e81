"""Train the axial MSA model on an alignment and predict its contacts (one family, or every bundled family with --all).

    bioattn train msa --input FILE [--pdb FILE [--chain ID] | --struct-dat FILE] --out RUN_DIR [--contact-head FILE] [--quick]
    bioattn train msa --all [--families A,B] [--data-root DIR] --out RUN_DIR [--max-minutes M] [--quick]
    bioattn train msa --all --compare-methods [--families A,B] --out RUN_DIR   # predict msa's three --method maps
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
from __future__ import annotations

import argparse
from pathlib import Path

from bioattn.commands.common import add_device_argument, add_ensemble_arguments, ensemble_options
from bioattn.commands.msa_args import add_fit_arguments, add_input_arguments, load_input, options_from_args
from bioattn.errors import UserInputError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from bioattn.tasks.msa.train import DEFAULTS
    from bioattn.tasks.msa.head import COEVOLUTION_FEATURES
    from bioattn.commands.training_args import add_training_args

    data = add_input_arguments(parser)
    data.add_argument("--pred", type=Path, default=None,
                      help="folder of published predictions to compare with (default: pred/ beside --input, if any)")
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


def run(args: argparse.Namespace) -> int:
    from bioattn.data import resolve_data_root
    from bioattn.tasks.msa.train import train_families, train_family
    from bioattn.tasks.msa.compare import compare_methods
    from bioattn.tasks.msa.head import ContactHead
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
            raise UserInputError("give either --input FILE (one family) or --all (every family under the data root)")
        families = [name.strip() for name in args.families.split(",") if name.strip()] if args.families else None
        run_all = compare_methods if args.compare_methods else train_families
        run_all(resolve_data_root(args.data_root), args.out, options, config, families)
        return 0
    if args.compare_methods:
        raise UserInputError("--compare-methods needs --all")
    if args.msa is None:
        raise UserInputError("give --input FILE (one family) or --all (every family under the data root)")
    beside = args.msa.parent / "pred"
    predictions = args.pred if args.pred is not None else (beside if beside.is_dir() else None)
    target = load_input(args, predictions)
    head = ContactHead.load(args.contact_head) if args.contact_head is not None else None
    train_family(target, args.out, options, config, head=head, head_source=args.contact_head or "contact head")
    return 0
