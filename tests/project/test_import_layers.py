"""The import graph reads one way: attention → data → models / training → explain → tasks → commands / cli.

Every ``import`` in the package (module level or inside a function, and ``importlib.import_module`` of a constant
name) is read with :mod:`ast`; a module may import only from its own layer or a lower one, and no two modules import
each other, directly or through others. :mod:`bioattn.explain` is method-generic and sits below the tasks, so each
task's explain pipeline (``bioattn.tasks.<task>.explain``) builds on it and ``explain/`` imports no task.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.helpers import REPO_ROOT

PACKAGE = REPO_ROOT / "bioattn"

#: Rank of each part of the package (first component after ``bioattn.``); lower ranks never import higher ones.
LAYERS: dict[str, int] = {
    "__init__": 0, "errors": 0, "io": 0, "metrics": 0, "report": 0, "progress": 0, "precision": 0, "runtime": 0,
    "distributed": 0, "run_dir": 0, "plots": 0, "plugins": 0, "options": 0,
    "attention": 1,
    "data": 2,
    "models": 3, "coevolution": 3, "training": 3,
    "explain": 4,
    "tasks": 5,
    "commands": 6, "cli": 6,
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO_ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imported_modules(path: Path) -> set[str]:
    """Every ``bioattn...`` module ``path`` imports (``from bioattn.x import y`` counts y when it is a module), and
    every one it loads with ``importlib.import_module`` by a string constant, given in the call or bound to a
    module-level name (``ROUTE = "bioattn.x"`` ... ``import_module(ROUTE)``)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    constants = {target.id: node.value.value for node in tree.body if isinstance(node, ast.Assign)
                 and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)
                 for target in node.targets if isinstance(target, ast.Name)}
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name.startswith("bioattn"))
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("bioattn"):
            found.add(node.module)
            for alias in node.names:
                candidate = f"{node.module}.{alias.name}"
                if (PACKAGE.parent / Path(*candidate.split("."))).with_suffix(".py").is_file():
                    found.add(candidate)
        elif (isinstance(node, ast.Call) and node.args
              and getattr(node.func, "attr", getattr(node.func, "id", None)) == "import_module"):
            argument = node.args[0]
            name = (argument.value if isinstance(argument, ast.Constant)
                    else constants.get(argument.id) if isinstance(argument, ast.Name) else None)
            if isinstance(name, str) and name.startswith("bioattn"):
                found.add(name)
    return found


def layer_of(module: str) -> int:
    parts = module.split(".")
    key = parts[1] if len(parts) > 1 else "__init__"
    if key not in LAYERS:
        raise AssertionError(f"{module}: no layer assigned; add {key!r} to LAYERS in {Path(__file__).name}")
    return LAYERS[key]


GRAPH = {module_name(p): imported_modules(p) for p in sorted(PACKAGE.rglob("*.py"))}


@pytest.mark.parametrize("module", sorted(GRAPH))
def test_no_import_from_a_higher_layer(module: str) -> None:
    upward = sorted(target for target in GRAPH[module] if layer_of(target) > layer_of(module))
    assert not upward, f"{module} (layer {layer_of(module)}) imports from a higher layer: {upward}"


def test_importlib_loads_are_edges(tmp_path: Path) -> None:
    """A module loaded through ``importlib.import_module`` by a constant name is an import like any other (the model
    loader once reached the task registry that way, unseen)."""
    path = tmp_path / "loader.py"
    path.write_text('import importlib\nREGISTRY = "bioattn.tasks.registry"\n\n\ndef load():\n'
                    '    importlib.import_module(REGISTRY)\n    return importlib.import_module("bioattn.tasks.base")\n')
    assert imported_modules(path) == {"bioattn.tasks.registry", "bioattn.tasks.base"}


def test_no_import_cycle() -> None:
    edges = {m: {t for t in targets if t in GRAPH and t != m} for m, targets in GRAPH.items()}
    state: dict[str, int] = {}  # 1 = on the current path, 2 = done
    cycles: list[list[str]] = []

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for target in sorted(edges[node]):
            if state.get(target) == 1:
                cycles.append(path[path.index(target):] + [target] if target in path else [node, target])
            elif target not in state:
                visit(target, path + [target])
        state[node] = 2

    for module in sorted(edges):
        if module not in state:
            visit(module, [module])
    # a package's __init__ importing its own submodules is not a cycle with them
    real = [c for c in cycles if not any(a == b.rpartition(".")[0] or b == a.rpartition(".")[0] for a, b in zip(c, c[1:]))]
    assert not real, "import cycles: " + "; ".join(" -> ".join(c) for c in real)


#: importlib's load-a-file-by-path function; the only file the tests may load that way is the notebook builder.
PATH_LOADER = "_".join(("spec", "from", "file", "location"))


def path_loads(path: Path) -> list[set[str]]:
    """For each call of :data:`PATH_LOADER` in ``path``, the string constants of its arguments."""
    loads = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", None)) == PATH_LOADER:
            loads.append({c.value for arg in node.args for c in ast.walk(arg) if isinstance(c, ast.Constant)})
    return loads


@pytest.mark.slow  # over a second: the full suite runs it, the fast lane does not
def test_only_the_notebook_builder_is_loaded_by_path() -> None:
    """Task logic lives in the package: tests and benches import it, they never load a script file by path."""
    offenders = [
        str(path.relative_to(REPO_ROOT))
        for folder in ("tests", "bench", "bioattn")
        for path in (REPO_ROOT / folder).rglob("*.py")
        if any("build.py" not in constants for constants in path_loads(path))
    ]
    assert not offenders, f"load a script by path: {offenders}"


def test_the_trainer_knows_no_attention_kernel():
    """The brief's rule: the training package imports nothing from bioattn.attention (the tasks choose the kernel)."""
    training = sorted((PACKAGE / "training").rglob("*.py"))
    assert training
    for path in training:
        assert not [m for m in imported_modules(path) if m.startswith("bioattn.attention")], path


def test_explain_is_method_generic() -> None:
    """``explain/`` holds the method-generic code (rollout, relevance, Captum, ISM, faithfulness, motifs, figures):
    no module of it is named after a task or imports from ``bioattn.tasks``; each task's pipeline is in its folder."""
    from bioattn.plugins import TASKS

    explain = sorted((PACKAGE / "explain").rglob("*.py"))
    assert explain
    named = [p.name for p in explain if set(p.stem.split("_")) & set(TASKS)]
    assert not named, f"explain/ modules named after a task: {named}; move them to bioattn/tasks/<task>/"
    for path in explain:
        assert not [m for m in imported_modules(path) if m.startswith("bioattn.tasks")], path


def test_explanations_need_nothing_from_training():
    """Device resolution, run directories and shared figures live below both (bioattn.distributed,
    bioattn.run_dir, bioattn.plots): explain/ imports nothing from bioattn.training."""
    explain = sorted((PACKAGE / "explain").rglob("*.py"))
    assert explain
    for path in explain:
        assert not [m for m in imported_modules(path) if m.startswith("bioattn.training")], path
