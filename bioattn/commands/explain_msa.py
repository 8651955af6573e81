"""Row-attention maps of a trained MSA model per layer and head, beside the native contact map.

Reads the alignment like ``bioattn train msa`` (query row first; with ``--pdb`` the query's non-gap
columns, the chain mapped onto them by sequence alignment; with ``--struct-dat`` every column), keeps up to
``--max-rows`` rows chosen for diversity, and runs the model once with ``need_weights=True``. Writes, under
``--out``: ``heads_layer{l}.png`` (every head's tied row-attention map next to the native contacts, each
head titled with its long-range P@L/5), ``head_diversity_layer{l}.png``, ``head_contact_precision.png``
(layers × heads), ``head_contacts.tsv`` (P@L/5, P@L/2, P@L of every head's symmetrised + APC map),
``row_attention.safetensors`` (the raw ``(layers, H, L, L)`` maps), ``head_sharpness.png``, ``columns.tsv``
(every column's attribution by ``--method``, explaining the model's masked-LM prediction of the query row),
``faithfulness.png`` and ``summary.json`` (with ``faithfulness``: each method's deletion/insertion AUC, columns
masked in every row).

With --weights (instead of --model) the model is ESM's MSA Transformer with the user's ESM-MSA-1b weights:
per layer every head's map (heads_layer{l}.png, head_diversity_layer{l}.png), row_attention.safetensors,
contacts.npy, head_contacts.tsv (each head's weight in its contact regression and, with a structure, its
precision), head_contact_precision.png and summary.json; --max-rows rows chosen as in ESM's examples.

Without a structure the contact figures and tables are left out. The run of an ensemble (``bioattn train msa
--seeds``) is explained through its first member, named on stderr and in ``summary.json``: the heads of
separately trained models do not correspond, so their per-head maps have no mean.
"""
from __future__ import annotations

import argparse

from bioattn.commands.common import method_options, model_source
from bioattn.commands.msa_explain_args import add_msa_explain_arguments as add_arguments

__all__ = ["add_arguments", "run"]


def run(args: argparse.Namespace) -> int:
    from bioattn.tasks.msa.explain import describe, explain_msa

    if args.weights is not None:
        from bioattn.tasks.msa.explain_esm import describe_weights_explanation, explain_with_weights

        print(describe_weights_explanation(*explain_with_weights(
            args.weights, args.input, args.out, fmt=args.format, query=args.query, pdb=args.pdb, chain=args.chain,
            struct_dat=args.struct_dat, max_rows=args.max_rows, device=args.device, overwrite=args.overwrite)))
        return 0
    result = explain_msa(model_source(args), args.input, fmt=args.format, query=args.query, pdb=args.pdb,
                         chain=args.chain, struct_dat=args.struct_dat, max_rows=args.max_rows, device=args.device,
                         out=args.out, overwrite=args.overwrite, **method_options(args))
    print(describe(result))
    return 0
