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

from bioattn.models.registry import PRETRAINED_ROOT, available_models, model_card
from bioattn.report import format_table

HEADER = ["name", "model type", "task", "headline metric", "size"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """No options."""


def model_rows() -> list[list[str]]:
    """One row per shipped model: name, model type (``ensemble of 3 PromoterClassifier``), task, headline metric
    (``metric = value``), size in MB."""
    rows = []
    for name in available_models():
        card = model_card(name)
        kind = card.model_type if card.members == 1 else f"ensemble of {card.members} {card.model_type}"
        rows.append([name, kind, card.task, card.headline(), f"{card.size_bytes / 1e6:.1f} MB"])
    return rows


def run(args: argparse.Namespace) -> int:
    print(format_table(HEADER, model_rows()))
    from bioattn.tasks.msa.esm import WEIGHTS_HELP

    print(f"\nmodel cards: {PRETRAINED_ROOT}/<name>/MODEL_CARD.md")
    print(f"\nESM's MSA Transformer for 'bioattn predict msa --contact-method esm-msa' and 'bioattn explain msa --weights': "
          f"{WEIGHTS_HELP}")
    return 0
