"""What every command shares: the fresh-machine quick run (embedded sample), ``-`` for stdin/stdout, progress
lines in logs, ``run_config.json`` recording what ran, and help/hint texts that match the flags."""
from __future__ import annotations

import argparse
import ast
import csv
import importlib.util
import io
import json
import re
from pathlib import Path
from typing import Iterator

import numpy as np
import pytest
import torch

from bioattn.cli import build_parser, main
from bioattn.data.root import DATA_ROOT_ENV, EMBEDDED_SAMPLE
from bioattn.errors import UserInputError
from bioattn.explain.outputs import prepare_out_dir
from bioattn.models.hybrid_ct import HybridCT3D
from bioattn.models.promoter import PromoterClassifier
from bioattn.progress import progress_bar
from tests.helpers.files import write_tiny_adrenalmnist3d

TINY = ["--quick", "--max-rows", "120", "--epochs", "1", "--overwrite"]
PROGRESS_LINE = re.compile(r"^epoch \d+/\d+: \d+/\d+ \[", re.MULTILINE)


def run_config(out: Path) -> dict:
    return json.loads((out / "run_config.json").read_text())


# ------------------------------------------------------------------------------ fresh machine, run_config
@pytest.mark.slow
def test_quick_run_without_data_root_uses_the_embedded_sample(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(DATA_ROOT_ENV, str(tmp_path / "missing"))
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "runs" / "quick"
    assert main(["train", "promoter", "--task", "prom_core_all", "--out", str(out), *TINY]) == 0
    err = capsys.readouterr().err
    assert "data root not found" in err and EMBEDDED_SAMPLE in err
    saved = run_config(out)
    # what actually ran: the embedded sample, the --quick model and schedule, the row cap
    assert saved["recipe"]["data_root"] == EMBEDDED_SAMPLE
    assert (saved["recipe"]["embed_dim"], saved["recipe"]["heads"], saved["recipe"]["layers"]) == (32, 2, 1)
    assert saved["recipe"]["max_rows"] == 120
    assert saved["training"]["max_epochs"] == 1 and saved["training"]["max_steps_per_epoch"] == 15
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["data_root"] == EMBEDDED_SAMPLE and metrics["splits"] == {"train": 120, "dev": 120}
    assert json.loads((out / "config.json").read_text())["embed_dim"] == 32
    # progress in a log: whole lines, no carriage-return redraws, not one line per step
    assert "\r" not in err
    assert 1 <= len(PROGRESS_LINE.findall(err)) <= 3


def test_full_run_without_data_root_is_an_error(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(DATA_ROOT_ENV, str(tmp_path / "missing"))
    out = tmp_path / "run"
    assert main(["train", "promoter", "--task", "prom_core_all", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "data root not found" in err and "bioattn data fetch" in err and EMBEDDED_SAMPLE not in err
    assert not out.exists()


@pytest.mark.slow  # over a second: the full suite runs it, the fast lane does not
def test_quick_run_records_the_data_root_it_read(tmp_path, monkeypatch):
    rng = np.random.default_rng(0)
    task = tmp_path / "root" / "promoters" / "gue" / "prom_core_tata"
    task.mkdir(parents=True)
    for split in ("train", "dev"):
        labels = np.arange(60) % 2
        rows = ["".join(rng.choice(list("GC" if y else "AT"), 30)) + f",{y}" for y in labels]
        (task / f"{split}.csv").write_text("sequence,label\n" + "\n".join(rows) + "\n")
    monkeypatch.setenv(DATA_ROOT_ENV, str(tmp_path / "root"))
    out = tmp_path / "run"
    assert main(["train", "promoter", "--task", "prom_core_tata", "--out", str(out), *TINY]) == 0
    assert run_config(out)["recipe"]["data_root"] == str((tmp_path / "root").resolve())


@pytest.mark.slow
def test_ct_run_config_records_the_file_read_and_the_quick_model(tmp_path):
    data_file = write_tiny_adrenalmnist3d(tmp_path / "root")
    out = tmp_path / "run"
    assert main(["train", "ct", "--quick", "--baseline", "none", "--data-root", str(tmp_path / "root"),
                 "--out", str(out)]) == 0
    recipe = run_config(out)["recipe"]
    assert recipe["data_file"] == str(data_file.resolve())
    assert (recipe["model"]["embed_dim"], recipe["model"]["num_heads"], recipe["model"]["num_layers"]) == (24, 2, 1)


# --------------------------------------------------------------------------------------- - as stdin/stdout
@pytest.fixture(scope="module")
def promoter_run(tmp_path_factory) -> Path:
    torch.manual_seed(0)
    model = PromoterClassifier(max_len=40, embed_dim=16, num_heads=2, num_layers=1, class_names=["0", "1"])
    path = tmp_path_factory.mktemp("promoter_run")
    model.save_pretrained(path)
    return path


def set_stdin(monkeypatch, text: str) -> None:
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(text.encode())))


FASTA = "".join(f">s{i}\n{'ACGT' * (i + 3)}\n" for i in range(5))


def test_predict_promoter_reads_stdin_and_writes_stdout(promoter_run, tmp_path, monkeypatch, capsys):
    (tmp_path / "in.fa").write_text(FASTA)
    assert main(["predict", "promoter", "--model", str(promoter_run), "--input", str(tmp_path / "in.fa"),
                 "--output", str(tmp_path / "out.csv")]) == 0
    capsys.readouterr()
    set_stdin(monkeypatch, FASTA)
    assert main(["predict", "promoter", "--model", str(promoter_run), "--input", "-", "--output", "-"]) == 0
    captured = capsys.readouterr()
    assert captured.out == (tmp_path / "out.csv").read_text()
    rows = list(csv.DictReader(io.StringIO(captured.out)))
    assert [r["id"] for r in rows] == [f"s{i}" for i in range(5)]
    assert all(0.0 <= float(r["promoter_probability"]) <= 1.0 for r in rows)
    assert re.search(r"^predict: 5/\?", captured.err, re.MULTILINE)  # progress as a log line


def test_predict_promoter_stdin_errors_name_stdin(promoter_run, monkeypatch, capsys):
    set_stdin(monkeypatch, ">ok\nACGT\n>bad\nACGTXZ\n")
    assert main(["predict", "promoter", "--model", str(promoter_run), "--input", "-", "--output", "-"]) == 2
    captured = capsys.readouterr()
    assert "error: <stdin>" in captured.err and "bad" in captured.err
    assert len(captured.out.splitlines()) <= 1  # at most the header: no row of a half-scored input


def test_predict_ct_writes_stdout(tmp_path, capsys):
    torch.manual_seed(0)
    model = HybridCT3D(1, 2, stem_channels=(4, 8), stem_strides=(2, 2), embed_dim=24, num_heads=2, num_layers=1,
                       dropout=0.0, class_names=["normal", "hyperplasia"])
    model.save_pretrained(tmp_path / "run")
    rng = np.random.default_rng(0)
    np.savez(tmp_path / "v.npz", val_images=rng.integers(0, 256, size=(3, 8, 8, 8), dtype=np.uint8),
             val_labels=np.ones((3, 1), np.uint8))
    assert main(["predict", "ct", "--model", str(tmp_path / "run"), "--input", str(tmp_path / "v.npz"),
                 "--output", "-"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))  # only the CSV on stdout
    assert len(rows) == 3 and all(abs(float(r["p_normal"]) + float(r["p_hyperplasia"]) - 1) < 1e-5 for r in rows)


# -------------------------------------------------------------------------------------------- progress
def test_progress_bar_in_a_log_prints_rate_limited_lines():
    stream = io.StringIO()
    with progress_bar(total=500, desc="training", unit="step", file=stream, log_every_s=3600) as bar:
        for step in range(500):
            bar.update(1)
            bar.set_postfix(loss=f"{1 / (step + 1):.4g}", refresh=False)
            if step == 10:
                bar.set_description("epoch 1/1")
            bar.write("evaluation line", file=stream)
    lines = stream.getvalue().splitlines()
    progress = [line for line in lines if line != "evaluation line"]
    assert "\r" not in stream.getvalue() and len(lines) == 501
    assert len(progress) == 1 and progress[0].startswith("epoch 1/1: 500/500") and "loss=0.002" in progress[0]
    silent = io.StringIO()
    with progress_bar(desc="predict", unit="seq", file=silent, log_every_s=0):
        pass  # stopped before its first item (e.g. bad input): no progress line at all
    assert silent.getvalue() == ""


def test_tqdm_disable_silences_even_an_enabled_bar(monkeypatch):
    monkeypatch.setenv("TQDM_DISABLE", "1")
    stream = io.StringIO()
    for _ in progress_bar(range(50), desc="motifs", file=stream, log_every_s=0, disable=False):
        pass
    assert stream.getvalue() == ""
    monkeypatch.delenv("TQDM_DISABLE")
    for _ in progress_bar(range(50), desc="motifs", file=stream, log_every_s=0, disable=False):
        pass
    assert stream.getvalue().startswith("motifs: ")


# ------------------------------------------------------------------------------------------- help texts
def walk(parser: argparse.ArgumentParser, path: list[str]) -> Iterator[tuple[str, argparse.Action]]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from walk(sub, [*path, name])
        elif not isinstance(action, (argparse._HelpAction, argparse._VersionAction)):
            yield " ".join([*path, (action.option_strings or [action.dest])[0]]), action


def shows_default(text: str, default: object) -> bool:
    """Whether a help text says "default" and shows ``default``'s value (an empty list: just "default")."""
    if "default" not in text:
        return False
    if isinstance(default, (list, tuple)):
        return not default or " ".join(map(str, default)) in text or str(list(default)) in text
    return str(default) in text or (isinstance(default, float) and f"{default:g}" in text)


def test_every_option_has_help_showing_its_default():
    problems = []
    for where, action in walk(build_parser(), ["bioattn"]):
        if action.help == argparse.SUPPRESS:
            continue
        text = argparse.HelpFormatter("bioattn")._expand_help(action) if action.help else ""
        if not text.strip():
            problems.append(f"{where}: no help")
        elif action.option_strings and action.default not in (None, False) and not shows_default(text, action.default):
            problems.append(f"{where}: help does not show the default {action.default!r}: {text!r}")
    assert not problems, "\n".join(problems)


# ----------------------------------------------------------------------------------- explain: no bad hints
FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")


def _module_path(name: str) -> Path | None:
    try:
        spec = importlib.util.find_spec(name)
    except (ModuleNotFoundError, ValueError):
        return None
    return Path(spec.origin) if spec is not None and spec.origin and spec.origin.endswith(".py") else None


def _reachable_modules(root: str) -> set[str]:
    """bioattn modules ``root`` imports, transitively (the training loop's and the run directory's own messages
    excepted: explain commands only reach :func:`bioattn.run_dir.prepare_run_dir`, tested below)."""
    seen, todo = set(), [root]
    while todo:
        name = todo.pop()
        if name in seen or name.startswith(("bioattn.training", "bioattn.run_dir", "bioattn.cli")):
            continue
        seen.add(name)
        path = _module_path(name)
        if path is None:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("bioattn"):
                todo += [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
    return {name for name in seen if _module_path(name) is not None}


def _message_flags(path: Path) -> Iterator[str]:
    """Flags named in the string arguments of ``UserInputError(...)`` and ``print(...)`` calls."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", "")) in ("UserInputError", "print"):
            for argument in node.args:
                for constant in ast.walk(argument):
                    if isinstance(constant, ast.Constant) and isinstance(constant.value, str):
                        yield from FLAG.findall(constant.value)


@pytest.mark.parametrize("target", ["promoter", "ct", "msa"])
@pytest.mark.slow  # over a second: the full suite runs it, the fast lane does not
def test_explain_messages_only_suggest_its_own_flags(target):
    parser = dict(walk(build_parser(), ["bioattn"]))
    flags = {option for where, action in parser.items() if where.startswith(f"bioattn explain {target} ")
             for option in action.option_strings}
    from bioattn.tasks.registry import get_task

    command = get_task(target).commands["explain"].partition(":")[0]  # a command module, or a dataclass's module
    modules = {name for name in _reachable_modules(command)
               if not name.startswith("bioattn.commands.") or name == command}
    wrong = {f"{name}: {flag}" for name in modules for flag in _message_flags(_module_path(name)) if flag not in flags}
    assert not wrong, f"explain {target} may print flags it does not have: {sorted(wrong)}"


def test_explain_output_folder_error_does_not_suggest_resume(tmp_path):
    (tmp_path / "old.txt").write_text("x")
    with pytest.raises(UserInputError) as raised:
        prepare_out_dir(tmp_path, overwrite=False)
    assert "--overwrite" in str(raised.value) and "--resume" not in str(raised.value)
