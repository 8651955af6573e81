"""Atomic, checksummed training checkpoints without pickle (``run_dir/checkpoint/ckpt-<seq>/``)."""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import torch

from bioattn.errors import UserInputError
from bioattn.io import load_tensors, save_tensors, write_json

CHECKSUM_FILE = "SHA256SUMS"
STATE_FILE = "state.json"
_PREFIX = "ckpt-"
_KEEP = 2


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def snapshots(checkpoint_dir: Path) -> list[Path]:
    """Complete snapshots, oldest first."""
    if not checkpoint_dir.is_dir():
        return []
    found = [p for p in checkpoint_dir.iterdir()
             if p.is_dir() and p.name.startswith(_PREFIX) and p.name[len(_PREFIX):].isdigit()]
    return sorted(found, key=lambda p: int(p.name[len(_PREFIX):]))


def latest_checkpoint(checkpoint_dir: str | os.PathLike) -> Path | None:
    """The newest complete snapshot folder, or ``None``."""
    found = snapshots(Path(checkpoint_dir))
    return found[-1] if found else None


def write_checkpoint(checkpoint_dir: str | os.PathLike, seq: int, tensor_files: dict[str, dict[str, torch.Tensor]],
                     state: dict[str, Any]) -> Path:
    """Write snapshot ``seq``: one safetensors file per ``tensor_files`` entry plus ``state.json``."""
    checkpoint_dir = Path(checkpoint_dir)
    final = checkpoint_dir / f"{_PREFIX}{seq:08d}"
    tmp: Path | None = None
    try:
        checkpoint_dir.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=checkpoint_dir, prefix=f".{final.name}.", suffix=".tmp"))
        for name, tensors in tensor_files.items():
            save_tensors(tmp / f"{name}.safetensors", tensors)
        write_json(tmp / STATE_FILE, state)
        sums = "".join(f"{_sha256(p)}  {p.name}\n" for p in sorted(tmp.iterdir()))
        (tmp / CHECKSUM_FILE).write_text(sums)
        if final.exists():
            shutil.rmtree(final)
        os.replace(tmp, final)
    except (OSError, UserInputError) as exc:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
        previous = latest_checkpoint(checkpoint_dir)
        kept = f"; the previous checkpoint {previous} is kept" if previous else ""
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise UserInputError(f"{checkpoint_dir}: cannot write checkpoint ({reason}){kept}") from exc
    for old in snapshots(checkpoint_dir)[:-_KEEP]:
        shutil.rmtree(old, ignore_errors=True)
    for leftover in checkpoint_dir.glob(f".{_PREFIX}*.tmp"):
        shutil.rmtree(leftover, ignore_errors=True)
    return final


def verify_checkpoint(snapshot: Path) -> None:
    """Check every file of ``snapshot`` against ``SHA256SUMS``; raise :class:`UserInputError` naming the bad file."""
    sums_path = snapshot / CHECKSUM_FILE
    hint = _recovery_hint(snapshot)
    try:
        lines = sums_path.read_text().splitlines()
    except OSError as exc:
        raise UserInputError(f"{sums_path}: checksum list missing or unreadable ({exc.strerror or exc}); "
                             f"checkpoint not loaded{hint}") from exc
    expected: dict[str, str] = {}
    for number, line in enumerate(lines, 1):
        digest, sep, name = line.partition("  ")
        if not sep or len(digest) != 64 or not name:
            raise UserInputError(f"{sums_path}: line {number} is damaged ({line[:80]!r}); checkpoint not loaded{hint}")
        expected[name] = digest
    present = {p.name for p in snapshot.iterdir() if p.name != CHECKSUM_FILE}
    for name in sorted(present | set(expected)):
        path = snapshot / name
        if name not in expected:
            raise UserInputError(f"{path}: file not listed in {CHECKSUM_FILE}; checkpoint not loaded{hint}")
        if name not in present:
            raise UserInputError(f"{path}: file missing from the checkpoint; checkpoint not loaded{hint}")
        if _sha256(path) != expected[name]:
            raise UserInputError(f"{path}: checksum mismatch, the file is corrupt or truncated; "
                                 f"checkpoint not loaded{hint}")


def _recovery_hint(snapshot: Path) -> str:
    older = [p for p in snapshots(snapshot.parent) if p != snapshot]
    if older:
        return f" (delete {snapshot} to resume from the previous checkpoint {older[-1].name})"
    return " (restore the file, or start the run again with --overwrite)"


def read_state(snapshot: Path) -> dict[str, Any]:
    """``state.json`` of a verified snapshot."""
    path = snapshot / STATE_FILE
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise UserInputError(f"{path}: unreadable checkpoint state ({exc})") from exc


def read_tensors(snapshot: Path, name: str) -> dict[str, torch.Tensor]:
    """Tensors of ``name.safetensors`` in a verified snapshot (empty dict when absent)."""
    path = snapshot / f"{name}.safetensors"
    return load_tensors(path) if path.is_file() else {}


def optimizer_state(optimizer: torch.optim.Optimizer) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """Split ``optimizer.state_dict()`` into tensors (``state/<param>/<key>``) and a JSON-able rest."""
    full = optimizer.state_dict()
    tensors: dict[str, torch.Tensor] = {}
    scalars: dict[str, dict[str, Any]] = {}
    for index, per_param in full["state"].items():
        for key, value in per_param.items():
            if isinstance(value, torch.Tensor):
                tensors[f"state/{index}/{key}"] = value.detach().cpu().clone()
            else:
                scalars.setdefault(str(index), {})[key] = value
    groups = [{k: list(v) if isinstance(v, tuple) else v for k, v in g.items()} for g in full["param_groups"]]
    return tensors, {"param_groups": groups, "scalars": scalars}


def load_optimizer_state(optimizer: torch.optim.Optimizer, tensors: dict[str, torch.Tensor], meta: dict[str, Any]) -> None:
    """Inverse of :func:`optimizer_state`."""
    state: dict[int, dict[str, Any]] = {}
    for name, value in tensors.items():
        _, index, key = name.split("/", 2)
        state.setdefault(int(index), {})[key] = value
    for index, values in meta["scalars"].items():
        state.setdefault(int(index), {}).update(values)
    groups = [{k: tuple(v) if isinstance(v, list) and k != "params" else v for k, v in g.items()}
              for g in meta["param_groups"]]
    optimizer.load_state_dict({"state": state, "param_groups": groups})
