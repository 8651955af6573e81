"""The faithfulness table every ``explain`` prints: sub-second times are not shown as ``0.00``, and it says what the
areas are normalised to and why an insertion area can exceed 1."""
from __future__ import annotations

from bioattn.explain.outputs import faithfulness_table


def _row(seconds: float, insertion: float = 1.08) -> dict[str, float]:
    return {"deletion_auc": 0.2, "deletion_auc_sd": 0.01, "insertion_auc": insertion, "insertion_auc_sd": 0.05,
            "examples": 3, "seconds": seconds}


def _cells(table: str, method: str) -> list[str]:
    (line,) = [line for line in table.splitlines() if line.startswith(f"| {method}")]
    return [cell.strip() for cell in line.strip("|").split("|")]


def test_sub_second_times_keep_their_digits_and_a_zero_time_is_not_printed_as_zero() -> None:
    table = faithfulness_table({"rollout": _row(0.004), "saliency": _row(0.0, insertion=0.9), "ism": _row(12.3456)})
    assert _cells(table, "rollout")[-1] == "0.004"
    assert _cells(table, "saliency")[-1] == "< 0.001"
    assert _cells(table, "ism")[-1] == "12.346"
    assert "0.00 |" not in table and "| seconds (maps) |" in table


def test_the_table_says_what_the_areas_are_normalised_to_and_why_insertion_can_exceed_one() -> None:
    table = faithfulness_table({"rollout": _row(0.5)})
    assert _cells(table, "rollout")[2] == "1.080 ± 0.050"
    note = table.split("\n\n")[-1]  # the lines after the table
    assert not note.startswith("|")
    assert "divided by that probability" in note and "intact input" in note
    assert "Insertion can exceed 1" in note and "time to compute each method's maps" in note
