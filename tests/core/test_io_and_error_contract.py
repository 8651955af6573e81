"""Atomic writes, safetensors persistence, data-root resolution and the CLI's error contract."""
from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from bioattn.cli import main, run_user_main
from bioattn.data import resolve_data_root
from bioattn.errors import UserInputError
from bioattn.io import atomic_write, load_tensors, save_tensors


def test_atomic_write_keeps_the_old_file_when_writing_fails(tmp_path):
    target = tmp_path / "out.csv"
    target.write_text("old complete content\n")
    with pytest.raises(RuntimeError):
        with atomic_write(target) as handle:
            handle.write("half")
            raise RuntimeError("crash mid-write")
    assert target.read_text() == "old complete content\n"
    assert [p.name for p in tmp_path.iterdir()] == ["out.csv"]  # no temp file left behind


def test_atomic_write_into_unwritable_place_is_a_user_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(UserInputError, match="cannot write"):
        with atomic_write(blocker / "sub" / "out.txt") as handle:
            handle.write("x")


def test_safetensors_round_trip_and_corrupt_file(tmp_path):
    tensors = {"w": torch.randn(3, 4), "b": torch.arange(5)}
    save_tensors(tmp_path / "m.safetensors", tensors)
    loaded = load_tensors(tmp_path / "m.safetensors")
    assert set(loaded) == {"w", "b"} and torch.equal(loaded["w"], tensors["w"])
    (tmp_path / "bad.safetensors").write_bytes(b"\x00\x01garbage")
    with pytest.raises(UserInputError, match="bad.safetensors"):
        load_tensors(tmp_path / "bad.safetensors")


def test_data_root_order_flag_then_environment(tmp_path, monkeypatch):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    monkeypatch.setenv("BIOATTN_DATA_ROOT", str(tmp_path / "b"))
    assert resolve_data_root(tmp_path / "a") == (tmp_path / "a").resolve()
    assert resolve_data_root() == (tmp_path / "b").resolve()
    with pytest.raises(UserInputError, match="--data-root"):
        resolve_data_root(tmp_path / "missing")


def test_missing_default_data_root_names_each_folder_tried_once(tmp_path, monkeypatch):
    """Run from the project root with no data beside it: the error names ../shared/data once, not twice."""
    project = tmp_path / "project"
    project.mkdir()
    monkeypatch.delenv("BIOATTN_DATA_ROOT", raising=False)
    monkeypatch.setattr("bioattn.data.root._PROJECT_ROOT", project)
    monkeypatch.chdir(project)
    with pytest.raises(UserInputError, match="data root not found") as raised:
        resolve_data_root()
    assert str(raised.value).count(str(tmp_path / "shared" / "data")) == 1


def test_user_errors_become_exit_code_2_with_one_line(capsys):
    def failing():
        raise UserInputError("reads.fa: record 'x' position 3: invalid character '!'")

    assert run_user_main(failing) == 2
    err = capsys.readouterr().err
    assert err == "error: reads.fa: record 'x' position 3: invalid character '!'\n"


def test_programmer_errors_keep_their_traceback():
    def broken():
        raise TypeError("loss_fn must return a scalar tensor")

    with pytest.raises(TypeError):
        run_user_main(broken)


@pytest.mark.slow
def test_console_help_lists_the_verbs():
    assert main([]) == 0
    done = subprocess.run([sys.executable, "-m", "bioattn.cli", "--help"], capture_output=True, text=True, check=True)
    assert "predict" in done.stdout and "explain" in done.stdout


def test_atomic_write_gives_files_the_usual_permissions(tmp_path):
    import os

    old = os.umask(0o022)
    try:
        with atomic_write(tmp_path / "out.txt") as handle:
            handle.write("x")
    finally:
        os.umask(old)
    assert (tmp_path / "out.txt").stat().st_mode & 0o777 == 0o644
