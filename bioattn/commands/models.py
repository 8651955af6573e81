"""List the pretrained models shipped with bioattn (name, model type, task, headline metric, size).

    bioattn models

Load one by name wherever a run directory is accepted: 'bioattn predict promoter --model NAME ...', in Python
'bioattn.models.load_pretrained(NAME)' or 'PromoterClassifier.from_pretrained(NAME)'. Each model's folder
holds MODEL_CARD.md: its data and license, training command, metrics beside same-run baselines, intended use
and limits.

ESM's MSA Transformer (ESM-MSA-1b) is not shipped: 'bioattn models' says how to obtain its weights, which
'bioattn predict msa --contact-method esm-msa --weights FILE_OR_DIR' then reads; nothing is downloaded.
"""
from __future__ import annotations

import argparse

from bioattn.models.registry import ESM_MSA_WEIGHTS_HELP, PRETRAINED_ROOT, model_table
from bioattn.report import format_table


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """No options."""


def run(args: argparse.Namespace) -> int:
    print(format_table(*model_table()))
    print(f"\nmodel cards: {PRETRAINED_ROOT}/<name>/MODEL_CARD.md")
    print(f"\nESM's MSA Transformer for 'bioattn predict msa --contact-method esm-msa' and 'bioattn explain msa --weights': "
          f"{ESM_MSA_WEIGHTS_HELP}")
    return 0
