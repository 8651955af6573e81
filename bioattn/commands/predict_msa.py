"""Predict the residue contacts of a new alignment (no structure needed): contacts.npy, a CASP RR file and a map.

    bioattn predict msa --input FILE --out DIR [--method attention|potts|combined | --contact-head FILE |
                        --model NAME_OR_DIR] [--top N] [--quick] [--pdb FILE [--chain ID] | --struct-dat FILE]

The contact head decides what is fitted on the alignment. --method picks a head shipped with bioattn (a logistic
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
--model msa-axial-pfam is such a model: its shipped head reads its attention without fine-tuning. A --run or
--model holding another model type (a promoter or CT model) is an error naming that type.

Writes, under --out: contacts.npy (L×L contact probabilities, L = the query's residues), contacts.rr (CASP
RR: PFRMAT, TARGET, AUTHOR, METHOD, MODEL 1, the sequence, then "i j 0 8 p" for the top --top pairs with
|i-j| ≥ --min-separation, 1-based, i < j, p in [0, 1], most probable first, END), contact_map.png,
contact_head.json (the head used), features.safetensors and metrics.json (the alignment's facts, CPU times
and, with --pdb or --struct-dat, used for evaluation only: long-range P@L/5, P@L/2, P@L of the prediction and
of the coevolution maps computed in the same run).
"""
from __future__ import annotations

import argparse
from pathlib import Path

from bioattn.commands.common import add_device_argument, add_model_arguments, model_dir
from bioattn.commands.msa_args import add_fit_arguments, add_input_arguments, load_input, options_from_args
from bioattn.errors import UserInputError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from bioattn.tasks.msa.train import DEFAULTS, RR_MIN_SEPARATION, RR_TOP_PER_RESIDUE
    from bioattn.tasks.msa.head import SHIPPED_HEADS
    from bioattn.tasks.msa.predict import DEFAULT_METHOD, ESM_METHOD

    add_input_arguments(parser, msa_required=True)
    head = add_model_arguments(parser.add_argument_group("contact head"), trained_by="bioattn train msa", required=False)
    head.add_argument("--contact-head", type=Path, default=None,
                      help="contact_head.json to use (default: the head shipped for --method)")
    head.add_argument("--method", choices=(*SHIPPED_HEADS, ESM_METHOD), default=None,
                      help="which shipped head: factored attention only, Potts only, or both; or esm-msa, the MSA "
                           f"Transformer with --weights (default: {DEFAULT_METHOD})")
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


def run(args: argparse.Namespace) -> int:
    from bioattn.tasks.msa.head import ContactHead, shipped_head
    from bioattn.tasks.msa.predict import (
        DEFAULT_METHOD, ESM_METHOD, predict_contacts, predict_contacts_esm, prediction_report, run_head,
    )

    if args.top is not None and args.top < 1:
        raise UserInputError(f"--top must be >= 1, got {args.top}")
    if args.min_separation < 1:
        raise UserInputError(f"--min-separation must be >= 1, got {args.min_separation}")
    if args.method == ESM_METHOD:
        if args.contact_head is not None or model_dir(args) is not None:
            raise UserInputError(f"--method {ESM_METHOD} uses the MSA Transformer's own contact regression; drop "
                                 "--contact-head / --run / --model")
        options, config = options_from_args(args)
        metrics = predict_contacts_esm(load_input(args), args.out, options, config, top=args.top,
                                       min_separation=args.min_separation)
        print(prediction_report(metrics, None))
        print(f"wrote {args.out}/contacts.rr, contacts.npy, contact_map.png, row_attention.safetensors, metrics.json")
        return 0
    model_size = {}
    run_dir = model_dir(args)
    if run_dir is not None:
        head, model_size = run_head(run_dir)
    else:
        head = ContactHead.load(args.contact_head) if args.contact_head is not None else shipped_head(args.method or DEFAULT_METHOD)
    options, config = options_from_args(args, **model_size)
    target = load_input(args)
    metrics = predict_contacts(target, args.out, options, config, head, top=args.top, min_separation=args.min_separation)
    print(prediction_report(metrics, head))
    print(f"wrote {args.out}/contacts.rr, contacts.npy, contact_map.png, metrics.json")
    return 0
