"""Build the notebooks from their sources and execute them, so the committed ``.ipynb`` files carry real outputs.

Each notebook is written as a plain Python file in ``notebooks/src/`` with ``# %%`` (code) and
``# %% [markdown]`` (text, every line commented with ``# ``) cell markers. This script turns each source into
``notebooks/<name>.ipynb`` and runs it top to bottom in a fresh kernel of the current interpreter (working
directory ``notebooks/``, matplotlib's headless inline backend, which renders with Agg and stores each figure
as a PNG in the notebook).

    python notebooks/build.py                                # build and run all at full size (what is committed)
    python notebooks/build.py --quick 02_one_head_vs_many    # one notebook at quick size (BIOATTN_QUICK=1)
    python notebooks/build.py --check                        # do the committed notebooks match their sources?

The test suite imports :func:`notebook_from_source`, :func:`cells` and :func:`execute_notebook` from here.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

NOTEBOOK_DIR = Path(__file__).resolve().parent
SOURCE_DIR = NOTEBOOK_DIR / "src"
QUICK_ENV = "BIOATTN_QUICK"
KERNEL_NAME = "bioattn-notebooks"
INLINE_BACKEND = "module://matplotlib_inline.backend_inline"
CODE_MARKER = "# %%"
MARKDOWN_MARKER = "# %% [markdown]"


def _markdown_line(line: str, source: Path, number: int) -> str:
    if line == "#":
        return ""
    if not line.startswith("# "):
        raise ValueError(f"{source}:{number}: markdown cell lines must start with '# ' (got {line!r})")
    return line[2:]


def notebook_from_source(source: Path) -> nbformat.NotebookNode:
    """Parse a percent-format ``source`` (.py) into a notebook without outputs."""
    cells: list[tuple[str, list[str]]] = []
    for number, line in enumerate(source.read_text().splitlines(), start=1):
        if line.startswith(MARKDOWN_MARKER):
            cells.append(("markdown", []))
        elif line.startswith(CODE_MARKER):
            cells.append(("code", []))
        elif not cells:
            raise ValueError(f"{source}:{number}: text before the first '# %%' cell marker")
        elif cells[-1][0] == "markdown" and line.strip():
            cells[-1][1].append(_markdown_line(line.rstrip(), source, number))
        else:
            cells[-1][1].append(line)
    notebook = nbformat.v4.new_notebook()
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    notebook.metadata["language_info"] = {"name": "python"}
    for kind, lines in cells:
        text = "\n".join(lines).strip("\n")
        new_cell = nbformat.v4.new_markdown_cell if kind == "markdown" else nbformat.v4.new_code_cell
        notebook.cells.append(new_cell(text))
    return notebook


def _write_kernelspec(jupyter_dir: Path) -> None:
    """A kernelspec that runs ipykernel with *this* interpreter, so no user-level kernel is ever picked up."""
    kernel_dir = jupyter_dir / "kernels" / KERNEL_NAME
    kernel_dir.mkdir(parents=True, exist_ok=True)
    spec = {
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Python 3 (bioattn)",
        "language": "python",
    }
    (kernel_dir / "kernel.json").write_text(json.dumps(spec))


def execute_notebook(
    notebook: nbformat.NotebookNode, *, quick: bool, timeout: int = 1200, extra_env: dict[str, str] | None = None
) -> nbformat.NotebookNode:
    """Run ``notebook`` top to bottom in a fresh kernel; raise ``nbclient.exceptions.CellExecutionError`` on failure.

    The kernel runs with the current interpreter, in ``notebooks/``, with the headless inline matplotlib backend
    (an inherited ``MPLBACKEND=Agg`` would drop every figure) and, when ``quick``, ``BIOATTN_QUICK=1``.
    Returns the notebook with its outputs filled in.
    """
    with tempfile.TemporaryDirectory(prefix="bioattn-kernel-") as jupyter_dir:
        _write_kernelspec(Path(jupyter_dir))
        env = {**os.environ, "MPLBACKEND": INLINE_BACKEND, QUICK_ENV: "1" if quick else "0", **(extra_env or {})}
        # tqdm.auto warns (with this machine's site-packages path) when ipywidgets is absent; bars still print as text
        env["PYTHONWARNINGS"] = ",".join(filter(None, [os.environ.get("PYTHONWARNINGS"), "ignore:IProgress not found"]))
        env["JUPYTER_PATH"] = os.pathsep.join(filter(None, [jupyter_dir, os.environ.get("JUPYTER_PATH")]))
        previous = os.environ.get("JUPYTER_PATH")
        os.environ["JUPYTER_PATH"] = env["JUPYTER_PATH"]  # the kernelspec lookup happens in this process
        try:
            client = NotebookClient(
                notebook,
                timeout=timeout,
                kernel_name=KERNEL_NAME,
                resources={"metadata": {"path": str(NOTEBOOK_DIR)}},
                record_timing=False,
            )
            client.execute(env=env)
        finally:
            if previous is None:
                os.environ.pop("JUPYTER_PATH", None)
            else:
                os.environ["JUPYTER_PATH"] = previous
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    notebook.metadata["bioattn"] = {"quick": quick}
    return notebook


def _sources(names: list[str]) -> list[Path]:
    sources = sorted(SOURCE_DIR.glob("*.py"))
    if names:
        sources = [s for s in sources if s.stem in names]
        missing = set(names) - {s.stem for s in sources}
        if missing:
            raise SystemExit(f"error: no notebook source named {', '.join(sorted(missing))} in {SOURCE_DIR}")
    return sources


def cells(notebook: nbformat.NotebookNode) -> list[tuple[str, str]]:
    """``(cell type, source)`` of every cell: what must match between a source and its committed notebook."""
    return [(cell.cell_type, cell.source) for cell in notebook.cells]


def check(names: list[str]) -> int:
    """Print every committed notebook that is missing or differs from its source; return the count."""
    stale = 0
    for source in _sources(names):
        target = NOTEBOOK_DIR / f"{source.stem}.ipynb"
        if not target.exists() or cells(nbformat.read(target, as_version=4)) != cells(notebook_from_source(source)):
            print(f"{target.relative_to(NOTEBOOK_DIR.parent)} is missing or out of date: run build.py {source.stem}")
            stale += 1
    return stale


def build(names: list[str], *, quick: bool) -> None:
    """Build and execute each notebook, writing ``notebooks/<name>.ipynb`` (also after a failure, to look at)."""
    for source in _sources(names):
        target = NOTEBOOK_DIR / f"{source.stem}.ipynb"
        print(f"executing {source.stem} ({'quick' if quick else 'full'} size) ...", flush=True)
        notebook = notebook_from_source(source)
        try:
            notebook = execute_notebook(notebook, quick=quick)
        except CellExecutionError:
            nbformat.write(notebook, target)  # keep the outputs up to the failing cell
            print(f"failed: {target.relative_to(NOTEBOOK_DIR.parent)} holds the outputs so far", flush=True)
            raise
        nbformat.write(notebook, target)
        print(f"wrote {target.relative_to(NOTEBOOK_DIR.parent)} ({target.stat().st_size / 1024:.0f} KB)", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="notebook names (file stems); default: all")
    parser.add_argument("--quick", action="store_true", help=f"run at quick size ({QUICK_ENV}=1); do not commit these")
    parser.add_argument("--check", action="store_true", help="only check that the committed notebooks match their sources")
    args = parser.parse_args()
    if args.check:
        return 1 if check(args.names) else 0
    build(args.names, quick=args.quick)
    return 0


if __name__ == "__main__":
    sys.exit(main())
