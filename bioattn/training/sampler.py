"""A :class:`~torch.utils.data.DistributedSampler` that can start part-way through an epoch and can batch by length."""
from __future__ import annotations

from typing import Iterator, Sequence

import torch
from torch.utils.data import Dataset, DistributedSampler

#: With length bucketing, samples are sorted by length within pools of this many batches.
POOL_BATCHES = 50


class ResumableSampler(DistributedSampler):
    """Shuffled order drawn from ``(seed, epoch)`` only, split over ranks, optionally bucketed by length."""

    def __init__(self, dataset: Dataset, *, num_replicas: int, rank: int, seed: int, shuffle: bool = True,
                 lengths: Sequence[int] | None = None, bucket_size: int = 1) -> None:
        super().__init__(dataset, num_replicas=num_replicas, rank=rank, shuffle=shuffle, seed=seed, drop_last=False)
        if lengths is not None and len(lengths) != len(dataset):  # type: ignore[arg-type]
            raise ValueError(f"{len(lengths)} lengths for {len(dataset)} samples")  # type: ignore[arg-type]
        if bucket_size < 1:
            raise ValueError(f"bucket_size must be >= 1, got {bucket_size}")
        self.lengths = None if lengths is None else [int(n) for n in lengths]
        self.bucket_size = bucket_size
        self.start = 0

    def set_position(self, epoch: int, start: int = 0) -> None:
        """Iterate epoch ``epoch`` from this rank's ``start``-th sample."""
        self.set_epoch(epoch)
        self.start = start

    def _bucketed_indices(self) -> list[int]:
        """This epoch's order with length bucketing, padded to ``total_size``."""
        assert self.lengths is not None
        generator = torch.Generator()
        generator.manual_seed(self.seed + self.epoch)
        count = len(self.lengths)
        order = torch.randperm(count, generator=generator).tolist() if self.shuffle else list(range(count))
        pool = self.bucket_size * POOL_BATCHES
        buckets: list[list[int]] = []
        for start in range(0, count, pool):
            by_length = sorted(order[start : start + pool], key=self.lengths.__getitem__)
            buckets += [by_length[i : i + self.bucket_size] for i in range(0, len(by_length), self.bucket_size)]
        tail = buckets.pop() if len(buckets[-1]) < self.bucket_size else []
        shuffled = torch.randperm(len(buckets), generator=generator).tolist() if self.shuffle else range(len(buckets))
        indices = [index for b in shuffled for index in buckets[b]] + tail
        padding = self.total_size - len(indices)
        indices += (indices * (padding // len(indices) + 1))[:padding]
        return indices[self.rank : self.total_size : self.num_replicas]

    def __iter__(self) -> Iterator[int]:
        indices = list(super().__iter__()) if self.lengths is None else self._bucketed_indices()
        return iter(indices[self.start:])

    def __len__(self) -> int:
        return max(0, self.num_samples - self.start)
