"""The notebooks: committed with the outputs of their own code, and runnable top to bottom at quick size.

Each notebook ends with a cell that asserts its conclusions on the numbers it computed and prints
"all conclusions hold", so running it is a test of the features it demonstrates.
"""
from __future__ import annotations

import importlib.util

import nbformat
import pytest

from tests.helpers import REPO_ROOT
from tests.helpers.real_data import data_path

NOTEBOOK_DIR = REPO_ROOT / "notebooks"
SOURCES = sorted((NOTEBOOK_DIR / "src").glob("*.py"))
CONCLUSION = "all conclusions hold"
# Data each notebook reads, relative to the data root (notebooks not listed need no data).
DATA_NEEDED = {
    "04_promoter_attention": ["promoters/gue/prom_core_tata/train.csv", "promoters/gue/prom_core_tata/dev.csv"],
    "05_axial_msa": ["msa/coev/1atzA/1atzA.aln", "msa/coev/1atzA/1atzA.pdb"],
    "06_ct_hybrid": ["ct/adrenalmnist3d/adrenalmnist3d_trainval.npz"],
    "09_motifs": ["promoters/gue/prom_core_tata/train.csv"],
    "10_what_does_this_variant_do": ["variants/cagi5/elements.fa", "variants/cagi5/train_release.tsv"],
}


def _load_build_module():
    spec = importlib.util.spec_from_file_location("notebook_build", NOTEBOOK_DIR / "build.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


build = _load_build_module()


def _outputs(notebook: nbformat.NotebookNode) -> list[nbformat.NotebookNode]:
    return [output for cell in notebook.cells if cell.cell_type == "code" for output in cell.outputs]


def _stdout(notebook: nbformat.NotebookNode) -> str:
    return "".join(o.get("text", "") for o in _outputs(notebook) if o.output_type == "stream")


def _figures(notebook: nbformat.NotebookNode) -> int:
    return sum("image/png" in o.get("data", {}) for o in _outputs(notebook))


def test_there_are_ten_notebooks_each_with_its_source():
    committed = sorted(p.stem for p in NOTEBOOK_DIR.glob("*.ipynb"))
    assert committed == [s.stem for s in SOURCES]
    assert len(SOURCES) == 10


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.stem)
def test_committed_notebook_shows_what_its_source_produces(source):
    committed = nbformat.read(NOTEBOOK_DIR / f"{source.stem}.ipynb", as_version=4)
    nbformat.validate(committed)
    expected = build.notebook_from_source(source)
    assert build.cells(committed) == build.cells(expected), (
        f"{source.stem}.ipynb is out of date: run `python notebooks/build.py {source.stem}`"
    )
    code = [cell for cell in committed.cells if cell.cell_type == "code"]
    assert [cell.execution_count for cell in code] == list(range(1, len(code) + 1)), "not executed top to bottom"
    assert committed.metadata["bioattn"] == {"quick": False}, "committed outputs must come from a full-size run"
    assert not [o for o in _outputs(committed) if o.output_type == "error"]
    assert _figures(committed) >= 1
    assert CONCLUSION in _stdout(committed)
    assert (NOTEBOOK_DIR / f"{source.stem}.ipynb").stat().st_size < 500_000


def test_source_parser_rejects_a_markdown_line_without_comment_marker(tmp_path):
    source = tmp_path / "broken.py"
    source.write_text("# %% [markdown]\n# # Title\nnot a comment\n")
    with pytest.raises(ValueError, match="broken.py:3"):
        build.notebook_from_source(source)


def _require_notebook_data(name: str) -> None:
    for path in DATA_NEEDED.get(name, []):
        data_path(*path.split("/"))


@pytest.mark.slow
@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.stem)
def test_notebook_runs_at_quick_size_and_its_conclusions_hold(source):
    _require_notebook_data(source.stem)
    notebook = nbformat.read(NOTEBOOK_DIR / f"{source.stem}.ipynb", as_version=4)
    # One thread per kernel: the quick experiments are tiny and the test machine is shared.
    executed = build.execute_notebook(notebook, quick=True, timeout=600, extra_env={"OMP_NUM_THREADS": "1"})
    assert executed.metadata["bioattn"] == {"quick": True}
    assert _figures(executed) >= 1
    assert CONCLUSION in _stdout(executed)
