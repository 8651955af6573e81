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
from __future__ import annotations

import argparse

from bioattn.commands.msa_args import add_predict_arguments as add_arguments, options_from_args

__all__ = ["add_arguments", "run"]


def run(args: argparse.Namespace) -> int:
    from bioattn.tasks.msa.predict import prediction_report, run_predict_msa

    options, config = options_from_args(args)
    metrics, head = run_predict_msa(args.msa, args.out, options, config, method=args.method,
                                    contact_head=args.contact_head, model=args.model, top=args.top,
                                    min_separation=args.min_separation, fmt=args.format, query=args.query,
                                    pdb=args.pdb, chain=args.chain, struct_dat=args.struct_dat)
    print(prediction_report(metrics, head, args.out))
    return 0
