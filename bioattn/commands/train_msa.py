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
from __future__ import annotations

import argparse

from bioattn.commands.common import ensemble_options
from bioattn.commands.msa_args import add_train_arguments as add_arguments, options_from_args
from bioattn.distributed import is_main_process

__all__ = ["add_arguments", "run"]


def run(args: argparse.Namespace) -> int:
    from bioattn.tasks.msa.task import TASK

    options, config = options_from_args(args, seeds=ensemble_options(args)["seeds"])
    TASK.run(options, config, msa=args.msa, fmt=args.format, query=args.query, pdb=args.pdb, chain=args.chain,
             struct_dat=args.struct_dat, pred=args.pred, all_families=args.all, compare=args.compare_methods,
             families=args.families, contact_head=args.contact_head)
    summary = (options.out / "summary.md") if is_main_process() and options.out else None
    if summary is not None and summary.is_file():
        print(summary.read_text(encoding="utf-8"), end="")
    return 0
