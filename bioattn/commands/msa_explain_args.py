"""The flags of ``bioattn explain msa`` (those every explain command shares are in :mod:`bioattn.commands.common`);
apart from the training flags, so that the command reaches no training code."""
from __future__ import annotations

import argparse

from bioattn.commands.common import (
    add_device_argument, add_explain_arguments as add_common_explain_arguments, add_method_arguments, add_model_arguments,
)


def add_msa_explain_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of ``bioattn explain msa``."""
    from bioattn.data.msa import FORMATS

    model = add_model_arguments(parser, trained_by="bioattn train msa")
    model.add_argument("--weights", default=None, metavar="FILE_OR_DIR",
                       help="instead of a run: ESM-MSA-1b weights you have (a fair-esm .pt with its "
                            "-contact-regression.pt beside it, or a converted directory); writes its per-layer, per-head "
                            "row-attention maps and their contact precision; nothing is downloaded (default: none)")
    add_device_argument(parser)
    add_common_explain_arguments(parser, input_help="alignment (.a3m .a2m .fasta .sto .aln; .gz accepted)", rollout=False)
    parser.add_argument("--format", choices=FORMATS, default=None, help="alignment format (default: from the file name)")
    parser.add_argument("--query", default=None, metavar="FASTA",
                        help="FASTA with the query sequence (default: the --pdb chain's row, else row 0)")
    parser.add_argument("--pdb", default=None, help="native structure (PDB or mmCIF) for the contact map")
    parser.add_argument("--chain", default=None, help="chain of --pdb (default: the first protein chain)")
    parser.add_argument("--struct-dat", default=None, metavar="FILE", help="arDCA *_struct.dat column distances, instead of --pdb")
    parser.add_argument("--max-rows", type=int, default=128, help="rows fed to the model, chosen for diversity (default: 128)")
    add_method_arguments(parser, unit="alignment columns")
