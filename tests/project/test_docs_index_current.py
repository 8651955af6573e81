"""The documentation's front page stays current: the number of shipped models it states is the number shipped, and
it names every model class the loader knows and every task."""
from __future__ import annotations

import re

from bioattn.models.registry import MODEL_TYPES, available_models
from bioattn.tasks.registry import TASKS
from tests.helpers import REPO_ROOT

NUMBERS = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve"]
INDEX = REPO_ROOT / "docs" / "index.md"


def test_the_front_page_states_how_many_models_are_shipped() -> None:
    text = " ".join(INDEX.read_text().split())
    stated = re.findall(r"\b(\w+) (?:small )?shipped models\b", text)
    assert stated and all(word == NUMBERS[len(available_models())] for word in stated), stated
    assert not re.search(r"\*\*(?:One|Two|Three|Four|Five|Six) models\*\*", text)  # no count of model classes to go stale


def test_the_front_page_names_every_model_class_and_every_task() -> None:
    text = INDEX.read_text()
    assert not [name for name in MODEL_TYPES if f"`{name}`" not in text]
    assert not [task for task in TASKS if not re.search(rf"\b{task}\b", text)]
