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
import os
from pathlib import Path

from bioattn.commands.vocabulary import add_alias
from bioattn.data.fetch import fetch_dataset, load_registry
from bioattn.data.root import DATA_ROOT_ENV

ALL = "all"
DEFAULT_DIR = "bioattn-data"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", choices=[*load_registry(), ALL], help="dataset to download, or 'all' (required)")
    out = parser.add_argument("--out", type=Path, default=None, metavar="DIR",
                              help=f"data root to download into (default: ${DATA_ROOT_ENV}, else ./{DEFAULT_DIR})")
    add_alias(parser, out, "--to")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars (default: show them on stderr)")


def run(args: argparse.Namespace) -> int:
    root = args.out or Path(os.environ.get(DATA_ROOT_ENV) or DEFAULT_DIR)
    registry = load_registry()
    names = list(registry) if args.name == ALL else [args.name]
    unverified = []
    for name in names:
        dataset = registry[name]
        print(f"{name}: {dataset.description} ({dataset.license}; see {dataset.card})")
        results = fetch_dataset(dataset, root, progress=not args.no_progress)
        counts = {status: sum(r.status == status for r in results) for status in ("downloaded", "present", "skipped")}
        unverified += [r.file.path for r in results if r.status != "skipped" and not r.verified]
        print(f"{name}: {counts['downloaded']} downloaded, {counts['present']} already present, "
              f"{counts['skipped']} skipped, under {root}")
    if unverified:
        print(f"UNVERIFIED (no checksum recorded): {', '.join(unverified)}")
    print(f"use it with --data-root {root} or {DATA_ROOT_ENV}={root}")
    return 0
