"""``bioattn models`` shows what each shipped model weighs: a small head in kB (not "0.0 MB"), and the shipped
model it builds on named with its own size."""
from __future__ import annotations

from bioattn.models import registry


def _sizes() -> dict[str, str]:
    header, rows = registry.model_table()
    column = header.index("size")
    return {row[0]: row[column] for row in rows}


def test_a_head_that_builds_on_another_model_shows_its_own_size_and_names_that_model() -> None:
    sizes = _sizes()
    head = registry.model_card("cagi5-release")
    assert head.builds_on == "lentimpra-hepg2-wtc11" and head.size_bytes < 1e5
    assert sizes["cagi5-release"] == (f"{head.size_bytes / 1e3:.0f} kB, builds on lentimpra-hepg2-wtc11 "
                                      f"({sizes['lentimpra-hepg2-wtc11']})")
    assert sizes["cagi5-release"] != "0.0 MB"


def test_models_of_a_tenth_of_a_megabyte_or_more_keep_their_size_in_mb() -> None:
    for name, size in _sizes().items():
        card = registry.model_card(name)
        if card.size_bytes >= 1e5:
            assert size == f"{card.size_bytes / 1e6:.1f} MB", name
        assert not size.startswith("0.0"), name
