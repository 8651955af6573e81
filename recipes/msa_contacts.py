"""Predict residue–residue contacts from a protein alignment with an axial-attention MSA model.

    python recipes/msa_contacts.py --input FILE [--pdb FILE --chain ID | --struct-dat FILE] --out RUN_DIR
                                   [--contact-head FILE] [--max-minutes M] [--quick]
    python recipes/msa_contacts.py --all [--data-root DIR] --out RUN_DIR [--max-minutes M] [--quick]

A thin wrapper around ``bioattn train msa`` (same flags; ``bioattn train msa --help`` describes them). Runs
under ``torchrun`` too.
"""
from __future__ import annotations

import sys

from bioattn.cli import main

if __name__ == "__main__":
    sys.exit(main(["train", "msa", *sys.argv[1:]]))
