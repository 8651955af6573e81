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

from bioattn.commands.common import (
    add_device_argument, add_explain_arguments, add_method_arguments, add_model_arguments, method_options, model_source,
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from bioattn.data.msa import FORMATS

    model = add_model_arguments(parser, trained_by="bioattn train msa")
    model.add_argument("--weights", default=None, metavar="FILE_OR_DIR",
                       help="instead of a run: ESM-MSA-1b weights you have (a fair-esm .pt with its "
                            "-contact-regression.pt beside it, or a converted directory); writes its per-layer, per-head "
                            "row-attention maps and their contact precision; nothing is downloaded (default: none)")
    add_device_argument(parser)
    add_explain_arguments(parser, input_help="alignment (.a3m .a2m .fasta .sto .aln; .gz accepted)", rollout=False)
    parser.add_argument("--format", choices=FORMATS, default=None, help="alignment format (default: from the file name)")
    parser.add_argument("--query", default=None, metavar="FASTA",
                        help="FASTA with the query sequence (default: the --pdb chain's row, else row 0)")
    parser.add_argument("--pdb", default=None, help="native structure (PDB or mmCIF) for the contact map")
    parser.add_argument("--chain", default=None, help="chain of --pdb (default: the first protein chain)")
    parser.add_argument("--struct-dat", default=None, metavar="FILE", help="arDCA *_struct.dat column distances, instead of --pdb")
    parser.add_argument("--max-rows", type=int, default=128, help="rows fed to the model, chosen for diversity (default: 128)")
    add_method_arguments(parser, unit="alignment columns")


def run(args: argparse.Namespace) -> int:
    from bioattn.explain.msa_report import describe, explain_msa
    from bioattn.explain.result import check_out_dir

    if args.weights is not None:
        from bioattn.tasks.msa.esm import explain_with_weights

        summary, out, family = explain_with_weights(
            args.weights, args.input, args.out, fmt=args.format, query=args.query, pdb=args.pdb, chain=args.chain,
            struct_dat=args.struct_dat, max_rows=args.max_rows, device=args.device, overwrite=args.overwrite)
        best = summary.get("best_head")
        found = (f"best head layer {best['layer']} head {best['head']}, long-range P@L/5 = {best['P@L/5']:.2f}"
                 if best else "no structure given")
        print(f"{family}: MSA Transformer row attention of {len(summary['head_similarity'])} layers, {found} -> {out}")
        return 0
    check_out_dir(args.out, overwrite=args.overwrite)
    result = explain_msa(model_source(args), args.input, fmt=args.format, query=args.query, pdb=args.pdb,
                         chain=args.chain, struct_dat=args.struct_dat, max_rows=args.max_rows, device=args.device,
                         **method_options(args))
    out = result.save(args.out, overwrite=args.overwrite)
    print(describe(result, out))
    return 0
