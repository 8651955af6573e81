"""The command's allocator setting: freed activation memory is reused instead of page-faulted in again."""
from __future__ import annotations

import subprocess
import sys

import pytest

from bioattn.runtime import keep_freed_memory

FAULTS = """
import resource, sys
import torch
if sys.argv[1] == "keep":
    from bioattn.runtime import keep_freed_memory
    assert keep_freed_memory()
from bioattn.models.promoter import PromoterClassifier
torch.set_num_threads(1)
model = PromoterClassifier.from_pretrained("gue-prom-core-all").eval()
ids = torch.randint(0, 4, (512, 70))  # a genome scan's batch on a CPU
for _ in range(2):  # warm-up: the heap grows to its working size
    model.proba_from_ids(ids)
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(3):
    model.proba_from_ids(ids)
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's allocator setting applies on Linux only")
@pytest.mark.slow  # over a second: the full suite runs it, the fast lane does not
def test_a_scan_batch_reuses_freed_memory_instead_of_faulting_it_in_again() -> None:
    """The same fp32 batches, three times, after two: without the setting each batch's large activations
    are fresh pages from the kernel (tens of thousands of page faults per batch), with it they are reused."""
    faults = {mode: int(subprocess.run([sys.executable, "-c", FAULTS, mode], capture_output=True, text=True,
                                       check=True).stdout)
              for mode in ("default", "keep")}
    assert faults["default"] > 3 * 5_000
    assert faults["keep"] < faults["default"] / 5


@pytest.mark.parametrize("variable, value", [("MALLOC_ARENA_MAX", "2"), ("MALLOC_MMAP_THRESHOLD_", "65536"),
                                             ("LD_PRELOAD", "/usr/lib/libjemalloc.so.2")])
def test_the_users_own_allocator_choice_is_left_alone(monkeypatch: pytest.MonkeyPatch, variable: str,
                                                      value: str) -> None:
    monkeypatch.setenv(variable, value)
    assert keep_freed_memory() is False
