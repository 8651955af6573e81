"""The functions that turn parsed flags into task options read the argparse namespace and never change it: the
same flags give the same options however often they are read, and the task's defaults fill only what is unset."""
from __future__ import annotations

import argparse
import copy

import pytest

from bioattn.commands import task_command
from bioattn.tasks.ct.commands import TrainCT
from bioattn.tasks.msa.commands import PretrainMSA, TrainMSA
from bioattn.tasks.promoter.commands import TrainPromoter


def _parse(add_arguments, *argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return parser.parse_args(["--out", "x", *argv])


def _read_twice(convert, args: argparse.Namespace):
    before = copy.deepcopy(vars(args))
    first = convert(args)
    assert vars(args) == before, "the namespace was changed"
    assert repr(convert(args)) == repr(first)
    return first


@pytest.mark.parametrize("argv, epochs, lr", [
    ((), 6, 0.002),  # the default task, prom_core_all: its epochs; its fine-tuning rate after pretraining
    (("--train", "own.csv"), 12, 0.003),  # your own file: the small-data epochs, no pretraining
    (("--pretrain-epochs", "0"), 6, 0.003),  # no pretraining: the from-scratch rate
    (("--epochs", "3", "--lr", "0.01"), 3, 0.01),  # flags win
])
def test_promoter_options_fill_unset_epochs_and_lr_without_changing_args(argv, epochs, lr) -> None:
    args = _parse(lambda parser: task_command.add_arguments(parser, TrainPromoter), *argv)
    _, config = _read_twice(lambda parsed: task_command.options_from_args(TrainPromoter, parsed).options(), args)
    assert (config.max_epochs, config.lr) == (epochs, pytest.approx(lr))
    assert args.epochs == (int(argv[argv.index("--epochs") + 1]) if "--epochs" in argv else None)


@pytest.mark.parametrize("argv, epochs", [((), 15), (("--protocol", "medmnist"), 100), (("--epochs", "4"), 4)])
def test_ct_options_take_the_protocol_epochs_without_changing_args(argv, epochs) -> None:
    args = _parse(lambda parser: task_command.add_arguments(parser, TrainCT), *argv)
    options = _read_twice(lambda parsed: task_command.options_from_args(TrainCT, parsed).options(), args)
    assert options.train_config.max_epochs == epochs
    assert args.epochs == (4 if "--epochs" in argv else None)


@pytest.mark.parametrize("command", [TrainMSA, PretrainMSA])
@pytest.mark.parametrize("quick", [False, True])
def test_msa_options_leave_args_unchanged(command, quick) -> None:
    args = _parse(lambda parser: task_command.add_arguments(parser, command), *(["--quick"] if quick else []))
    _read_twice(lambda parsed: task_command.options_from_args(command, parsed).options(), args)
