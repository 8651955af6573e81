"""Train the DNA promoter classifier on GUE human promoters, E. coli promoters or your own labelled sequences,
beside a GC-content threshold and a k-mer logistic regression.

    python recipes/promoter.py --data-root DIR --task prom_core_all --out RUN_DIR [--max-minutes M] [--quick]
    python recipes/promoter.py --train my.csv [--dev dev.csv] [--test test.fa] --out RUN_DIR

A thin wrapper around ``bioattn train promoter`` (same flags; ``bioattn train promoter --help`` describes them).
Runs under ``torchrun`` too.
"""
from __future__ import annotations

import sys

from bioattn.cli import main

if __name__ == "__main__":
    sys.exit(main(["train", "promoter", *sys.argv[1:]]))
