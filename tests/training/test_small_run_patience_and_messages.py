"""Small runs: when ``min_steps`` lengthens a small run, the early-stopping patience keeps its share of the run,
so a run of one optimizer step per epoch is not stopped inside its warm-up, and the stop is said on stderr; a
zero-width bootstrap interval on a small validation split is not presented as certainty; a one-volume faithfulness
table says "1 example"; a mistyped flag is answered with the command's own usage."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import nn
from torch.utils.data import TensorDataset

from bioattn.training import TrainConfig, Trainer


def _fit(tmp_path: Path, losses: list[float], **config) -> tuple[Trainer, object]:
    """One optimizer step per epoch (24 samples, batch 24); evaluation ``i`` reports ``losses[i]``."""
    torch.manual_seed(0)
    x = torch.randn(24, 4, generator=torch.Generator().manual_seed(0))
    data = TensorDataset(x, (x[:, 0] > 0).long())
    calls = iter(losses)
    options = dict(batch_size=24, lr=0.05, device="cpu", warmup_steps=0, monitor="loss") | config
    trainer = Trainer(nn.Sequential(nn.Linear(4, 2)), data, TrainConfig(**options), tmp_path / "run",
                      loss_fn=lambda model, batch: nn.functional.cross_entropy(model(batch[0]), batch[1]),
                      evaluate=lambda model: {"loss": next(calls)})
    return trainer, trainer.fit()


def test_min_steps_scales_the_patience_with_the_epochs(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    # 2 epochs of 1 step < 10 steps: 10 epochs, patience 1 -> 5; the first evaluation stays the best.
    trainer, result = _fit(tmp_path, [1.0] + [2.0] * 9, max_epochs=2, min_steps=10, patience=1)
    assert trainer.config.max_epochs == 10 and trainer.config.patience == 5
    assert result.stop_reason == "early_stopping" and result.global_step == 6 and result.best_step == 1
    err = capsys.readouterr().err
    assert ("2 epochs of 1 optimizer step are fewer than 10 steps (small training set): training up to 10 epochs, "
            "early stopping after 5 evaluations without improvement (instead of 1)") in err
    assert "early stopping at step 6: no better loss in the last 5 evaluations; the best was step 1 (loss=1)" in err


def test_patience_is_unchanged_when_the_run_is_long_enough(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    trainer, result = _fit(tmp_path, [1.0] + [2.0] * 9, max_epochs=10, min_steps=10, patience=1)
    assert trainer.config.patience == 1
    assert result.stop_reason == "early_stopping" and result.global_step == 2
    err = capsys.readouterr().err
    assert "training up to" not in err and "early stopping at step 2" in err


def test_a_zero_width_bootstrap_interval_is_not_presented_as_certainty() -> None:
    from bioattn.tasks.trust import trust_report

    labels = [0, 1] * 4  # 8 validation examples, perfectly separated
    report = trust_report(labels, [0.1, 0.9] * 4, headline="auroc")
    assert report["interval"] == [1.0, 1.0]
    note = next(line for line in report["warnings"] if "bootstrap 95% interval" in line)
    assert "[1.000, 1.000] (every resample of these 8 examples scores the same" in note
    assert "does not make the value certain" in note and "--cv 5" in note
    mixed = trust_report(labels, [0.1, 0.9, 0.6, 0.4, 0.2, 0.8, 0.3, 0.7], headline="auroc")
    assert "scores the same" not in " ".join(mixed["warnings"])  # a real interval is shown as it is


def test_a_faithfulness_table_of_one_volume_says_example() -> None:
    from bioattn.explain.outputs import faithfulness_table

    row = {"deletion_auc": 0.1, "deletion_auc_sd": 0.0, "insertion_auc": 0.6, "insertion_auc_sd": 0.0, "seconds": 0.1}
    assert "faithfulness over 1 example (* most faithful)" in faithfulness_table({"rollout": {**row, "examples": 1}})
    assert "faithfulness over 5 examples" in faithfulness_table({"rollout": {**row, "examples": 5}})


def test_an_unknown_flag_is_reported_with_the_commands_own_usage(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from bioattn.cli import main as cli_main

    with pytest.raises(SystemExit) as exit_info:
        cli_main(["train", "promoter", "--input", "mine.csv", "--out", str(tmp_path / "run")])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and not (tmp_path / "run").exists()
    assert err.startswith("usage: bioattn train promoter ") and "--train FILE" in err  # the flags it does take
    assert err.splitlines()[-1] == "bioattn train promoter: error: unrecognized arguments: --input mine.csv"


@pytest.mark.parametrize("samples, batch, steps, dropped", [(38, 9, 4, 2), (36, 9, 4, 0), (23, 5, 5, 0)])
def test_a_small_set_never_trains_on_a_batch_of_a_few_left_over_samples(
    tmp_path: Path, capsys: pytest.CaptureFixture, samples: int, batch: int, steps: int, dropped: int
) -> None:
    # 38 volumes in batches of 9 leave 2: a batch of 2 sets batch normalisation's statistics of that step (and its
    # running averages just before each evaluation), so those 2 wait for a later epoch; 23 in batches of 5 leave
    # 3, more than half a batch, which train as a batch of their own
    sizes: list[int] = []
    x = torch.randn(samples, 4, generator=torch.Generator().manual_seed(0))
    config = TrainConfig(max_epochs=3, batch_size=32, min_batches_per_epoch=4, lr=0.01, device="cpu", warmup_steps=0)

    def loss_fn(model: nn.Module, batch_: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        sizes.append(len(batch_[0]))
        return nn.functional.cross_entropy(model(batch_[0]), batch_[1])

    trainer = Trainer(nn.Sequential(nn.Linear(4, 2)), TensorDataset(x, (x[:, 0] > 0).long()), config,
                      tmp_path / "run", loss_fn=loss_fn)
    trainer.fit()
    assert trainer.config.batch_size == batch and trainer.steps_per_epoch == steps
    expected = [batch] * steps if dropped else [batch] * (samples // batch) + [samples % batch] * bool(samples % batch)
    assert sizes == expected * 3
    err = capsys.readouterr().err
    assert f"using batches of {batch}" in err
    assert (f"the {dropped} left over of each shuffled epoch wait for a later one" in err) == bool(dropped)
