"""Mixup: the inputs are convex pairs of the batch, the loss the matching mix of cross-entropies, and it follows
torch's global RNG (so a resumed run continues the same stream)."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from bioattn.training.mixup import check_mixup_alpha, mixup_cross_entropy

BATCH = 6
WEIGHT = torch.randn(BATCH, 3, generator=torch.Generator().manual_seed(1))  # a linear model: 3 classes


def _recording_forward(seen: list[torch.Tensor]):
    def forward(inputs: torch.Tensor) -> torch.Tensor:
        seen.append(inputs)
        return inputs @ WEIGHT

    return forward


def test_inputs_are_pairs_of_the_batch_and_the_loss_mixes_both_labels() -> None:
    torch.manual_seed(0)
    seen: list[torch.Tensor] = []
    forward = _recording_forward(seen)
    inputs, labels = torch.eye(BATCH), torch.tensor([0, 1, 2, 0, 1, 2])
    loss = mixup_cross_entropy(forward, inputs, labels, alpha=0.4, label_smoothing=0.1)
    (mixed,) = seen
    # row i of the mixed one-hot batch is lam·e_i + (1-lam)·e_partner(i) (a row paired with itself stays e_i)
    assert torch.allclose(mixed.sum(1), torch.ones(BATCH)) and (mixed >= 0).all()
    paired = (mixed > 0).sum(1) == 2
    assert paired.sum() >= 2
    lam = mixed.diagonal()[paired]
    assert torch.allclose(lam, lam[0].expand_as(lam)) and 0.0 < float(lam[0]) < 1.0
    off_diagonal = mixed - torch.diag(mixed.diagonal())
    partner = torch.where(paired, off_diagonal.argmax(1), torch.arange(BATCH))
    assert sorted(partner.tolist()) == list(range(BATCH))  # a permutation of the batch
    logits = forward(mixed)
    expected = (lam[0] * F.cross_entropy(logits, labels, label_smoothing=0.1)
                + (1 - lam[0]) * F.cross_entropy(logits, labels[partner], label_smoothing=0.1))
    assert torch.allclose(loss, expected)


def test_alpha_zero_is_plain_cross_entropy_and_draws_nothing() -> None:
    seen: list[torch.Tensor] = []
    forward = _recording_forward(seen)
    inputs, labels = torch.randn(BATCH, BATCH), torch.tensor([0, 1, 2, 0, 1, 2])
    state = torch.get_rng_state()
    loss = mixup_cross_entropy(forward, inputs, labels, alpha=0.0)
    assert torch.equal(torch.get_rng_state(), state) and torch.equal(seen[0], inputs)
    assert torch.allclose(loss, F.cross_entropy(inputs @ WEIGHT, labels))


def test_same_rng_state_same_mix() -> None:
    inputs, labels = torch.randn(BATCH, BATCH), torch.tensor([0, 1, 2, 0, 1, 2])
    losses = []
    for _ in range(2):
        torch.manual_seed(3)
        losses.append(mixup_cross_entropy(_recording_forward([]), inputs, labels, alpha=0.2))
    assert torch.equal(losses[0], losses[1])


@pytest.mark.parametrize("alpha", [-0.1, float("nan")])
def test_invalid_alpha_is_refused(alpha: float) -> None:
    with pytest.raises(ValueError, match="mixup alpha must be >= 0"):
        check_mixup_alpha(alpha)
    with pytest.raises(ValueError, match="mixup alpha must be >= 0"):
        mixup_cross_entropy(_recording_forward([]), torch.eye(BATCH), torch.zeros(BATCH, dtype=torch.long), alpha=alpha)
