"""Per-file seconds of a test run, for the scheduling order in ``tests/conftest.py``.

    python -m pytest --durations=0 > run.log
    python -m tests.helpers.durations run.log      # rewrites tests/durations.json

Each line ``12.34s call     tests/x/test_y.py::test_z`` of pytest's durations table adds its seconds (setup, call
and teardown) to the file's total; a test of at least :data:`OWN_ENTRY` seconds also gets an entry of its own, keyed
by its node id (the scheduler reads those for the files whose tests are handed out one by one).
"""
from __future__ import annotations

import json
import re
import sys
from collections import defaultdict
from pathlib import Path

#: a node id may end in the ``@group`` pytest-xdist's --dist loadgroup adds: not part of the test's id
LINE = re.compile(r"^\s*([0-9.]+)s\s+(setup|call|teardown)\s+((\S+?\.py)::[^\s\[@]+(?:\[[^\]]*\])?)")
OWN_ENTRY = 10.0
TARGET = Path(__file__).resolve().parents[1] / "durations.json"


def per_file(lines: list[str]) -> dict[str, float]:
    """Seconds per test file, summed over the durations table's lines, and per test for the long ones."""
    totals: dict[str, float] = defaultdict(float)
    tests: dict[str, float] = defaultdict(float)
    for line in lines:
        match = LINE.match(line)
        if match:
            totals[match.group(4)] += float(match.group(1))
            tests[match.group(3)] += float(match.group(1))
    totals.update({node: total for node, total in tests.items() if total >= OWN_ENTRY})
    return {key: round(total, 1) for key, total in sorted(totals.items(), key=lambda kv: -kv[1])}


def main(argv: list[str]) -> int:
    lines = Path(argv[0]).read_text().splitlines() if argv else sys.stdin.read().splitlines()
    totals = per_file(lines)
    if not totals:
        print("error: no durations table in the input (run pytest with --durations=0)", file=sys.stderr)
        return 2
    TARGET.write_text(json.dumps(totals, indent=1) + "\n")
    print(f"{len(totals)} files, {sum(totals.values()):.0f} s in all -> {TARGET.name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
