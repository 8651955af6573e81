"""Download a public dataset the recipes use into a data root, checking each file's checksum.

    bioattn data fetch NAME [--out DIR]
    bioattn data fetch all --out DIR

Datasets: gue (GUE human promoter tasks, train/dev/test), ecoli_sigma70 (iPromoter-2L E. coli promoters),
adrenalmnist3d (MedMNIST AdrenalMNIST3D, 28³ and 64³), coev (8 protein alignments with structures and
published contact predictions), pfam_ardca (arDCA Pfam families with distance files); their sources and
licenses are in data_cards/. Files go where the recipes read them (e.g. DIR/promoters/gue/prom_core_all/
train.csv); use DIR with --data-root DIR or BIOATTN_DATA_ROOT=DIR.

Each file is downloaded to FILE.part, its SHA-256 (or the publisher's MD5) checked, then renamed; files
already present with the right checksum are kept. An interrupted download resumes where it stopped (run the
command again); a checksum mismatch deletes the download and exits with status 2. Files the registry has no
checksum for are reported as UNVERIFIED.
"""
from __future__ import annotations

import argparse
from pathlib import Path

from bioattn.data.fetch import ALL, DEFAULT_FETCH_DIR, fetch_datasets, load_registry
from bioattn.data.root import DATA_ROOT_ENV


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", choices=[*load_registry(), ALL], help="dataset to download, or 'all' (required)")
    parser.add_argument("--out", type=Path, default=None, metavar="DIR",
                              help=f"data root to download into (default: ${DATA_ROOT_ENV}, else ./{DEFAULT_FETCH_DIR})")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars (default: show them on stderr)")


def run(args: argparse.Namespace) -> int:
    fetch_datasets(args.name, args.out, progress=not args.no_progress, report=print)
    return 0
