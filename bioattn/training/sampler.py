"""A :class:`~torch.utils.data.DistributedSampler` that can start part-way through an epoch."""
from __future__ import annotations

from typing import Iterator

from torch.utils.data import Dataset, DistributedSampler


class ResumableSampler(DistributedSampler):
    """Shuffled order drawn from ``(seed, epoch)`` only, split over ranks, skipping already-seen samples.

    Rank ``r`` of ``W`` takes every ``W``-th index of one shared permutation, so per-rank batches of
    ``B / W`` samples together form exactly the global batch of ``B`` a single process would draw; a
    checkpoint position counted in global batches therefore stays valid if ``W`` changes. Call
    :meth:`set_position` (epoch, samples already consumed by this rank) before iterating.
    """

    def __init__(self, dataset: Dataset, *, num_replicas: int, rank: int, seed: int, shuffle: bool = True) -> None:
        super().__init__(dataset, num_replicas=num_replicas, rank=rank, shuffle=shuffle, seed=seed, drop_last=False)
        self.start = 0

    def set_position(self, epoch: int, start: int = 0) -> None:
        """Iterate epoch ``epoch`` from this rank's ``start``-th sample."""
        self.set_epoch(epoch)
        self.start = start

    def __iter__(self) -> Iterator[int]:
        indices = list(super().__iter__())
        return iter(indices[self.start:])

    def __len__(self) -> int:
        return max(0, self.num_samples - self.start)
