"""Length bucketing of the resumable sampler: every sample once per epoch, padded batches of similar length,
an order fixed by (seed, epoch) so that resuming part-way is exact, and ranks that together form the
single-process batches."""
from __future__ import annotations

import numpy as np
import pytest

from bioattn.training.sampler import POOL_BATCHES, ResumableSampler

RNG = np.random.default_rng(0)
LENGTHS = RNG.integers(20, 500, size=1003).tolist()  # not a multiple of the bucket size


class Sized:
    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n


def sampler(rank: int = 0, world: int = 1, bucket: int = 16, seed: int = 3, lengths=LENGTHS) -> ResumableSampler:
    return ResumableSampler(Sized(len(lengths)), num_replicas=world, rank=rank, seed=seed, lengths=lengths, bucket_size=bucket)


def epoch(s: ResumableSampler, number: int, start: int = 0) -> list[int]:
    s.set_position(number, start)
    return list(s)


def test_every_sample_once_per_epoch_and_batches_are_length_homogeneous():
    order = epoch(sampler(), 0)
    assert sorted(order) == list(range(len(LENGTHS)))
    batches = [order[i : i + 16] for i in range(0, len(order), 16)]
    spread = np.mean([np.ptp([LENGTHS[i] for i in b]) for b in batches])
    random_spread = np.mean([np.ptp(RNG.choice(LENGTHS, 16)) for _ in range(len(batches))])
    assert spread < random_spread / 5  # sorted within pools of POOL_BATCHES batches: far less padding
    assert len(batches[-1]) == len(LENGTHS) % 16  # the short bucket comes last, the others are full


def test_order_depends_on_seed_and_epoch_only_and_resumes_exactly():
    first = epoch(sampler(), 1)
    assert epoch(sampler(), 1) == first
    assert epoch(sampler(), 2) != first and epoch(sampler(seed=4), 1) != first
    assert epoch(sampler(), 1, start=160) == first[160:]
    # pools are sorted, so consecutive batches are not globally sorted: batches are shuffled across the epoch
    batch_means = [np.mean([LENGTHS[i] for i in first[k : k + 16]]) for k in range(0, 16 * POOL_BATCHES, 16)]
    assert batch_means != sorted(batch_means)


@pytest.mark.parametrize("world", [2, 4])
def test_ranks_interleave_into_the_single_process_buckets(world):
    micro = 8
    single = epoch(sampler(bucket=micro * world), 0)
    per_rank = [epoch(sampler(rank=r, world=world, bucket=micro * world), 0) for r in range(world)]
    for step in range(len(LENGTHS) // (micro * world)):
        together = sorted(i for rank in per_rank for i in rank[step * micro : (step + 1) * micro])
        assert together == sorted(single[step * micro * world : (step + 1) * micro * world])


def test_without_lengths_the_plain_shuffle_is_unchanged():
    plain = ResumableSampler(Sized(50), num_replicas=1, rank=0, seed=3)
    plain.set_position(0)
    assert sorted(plain) == list(range(50))
    with pytest.raises(ValueError, match="3 lengths for 50 samples"):
        ResumableSampler(Sized(50), num_replicas=1, rank=0, seed=3, lengths=[1, 2, 3])
