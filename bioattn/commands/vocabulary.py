"""One word for one thing across every ``bioattn`` subcommand: each concept's one canonical flag."""
from __future__ import annotations

#: concept -> the canonical flag every subcommand uses for it.
CANONICAL: dict[str, str] = {
    "trained model (a shipped name or a run directory)": "--model",
    "file read": "--input",
    "one output file": "--output",
    "output directory": "--out",
    "model width": "--embed-dim",
    "attention heads": "--heads",
    "longest input the model accepts": "--max-length",
    "strand(s) scored": "--strand",
    "test-time augmentation": "--tta",
    "CT model input size": "--size",
    "how a CT volume reaches --size": "--fit",
    "CT intensity window": "--intensity-window",
    "DNA scan window length": "--window",
    "row limit": "--max-rows",
    "attribution method of an explanation": "--method",
    "how contacts are predicted from an alignment": "--contact-method",
}
