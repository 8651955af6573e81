"""The task registry drives the command line, the model loader and the explain dispatch: adding a task is its model
file, its folder and one line in ``TASKS``, and no central module names a task."""
from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

from bioattn.tasks.base import KINDS, Task
from bioattn.tasks.registry import TASKS, all_tasks, get_task, task_commands, task_model_types, task_of_model
from tests.helpers import REPO_ROOT

#: The modules that serve every task; none of them may name one.
CENTRAL = ["bioattn/cli.py", "bioattn/models/registry.py", "bioattn/models/__init__.py", "bioattn/explain/__init__.py",
           "bioattn/tasks/explain_dispatch.py", "bioattn/tasks/base.py", "bioattn/tasks/common.py"]


def names_in(path: Path) -> set[str]:
    """The words of every identifier, attribute, imported module and string constant of ``path`` (split on ``.``,
    ``_``, ``:``, ``/``, ``-`` and spaces), docstrings excluded."""
    tree = ast.parse(path.read_text())
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef)) and node.body
                  and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
    words: set[str] = set()
    for node in ast.walk(tree):
        texts: list[str] = []
        if isinstance(node, ast.Name):
            texts = [node.id]
        elif isinstance(node, ast.Attribute):
            texts = [node.attr]
        elif isinstance(node, ast.alias):
            texts = [node.name, node.asname or ""]
        elif isinstance(node, ast.ImportFrom):
            texts = [node.module or ""]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            texts = [node.value]
        for text in texts:
            words.update(re.split(r"[._:/\-\s]+", text))
    return words


@pytest.mark.parametrize("module", CENTRAL)
def test_no_central_module_names_a_task(module: str) -> None:
    named = sorted(names_in(REPO_ROOT / module) & set(TASKS))
    assert not named, f"{module} names the task(s) {named}; derive it from bioattn.tasks.registry.TASKS instead"


def test_the_name_check_sees_a_task_name() -> None:
    """The check above is not vacuous: a task's own command module names it."""
    assert "promoter" in names_in(REPO_ROOT / "bioattn/tasks/promoter/task.py")


@pytest.mark.parametrize("name", sorted(TASKS))
def test_registered_tasks_declare_the_contract(name: str) -> None:
    task = get_task(name)
    assert isinstance(task, Task) and task.name == name and task.kind in KINDS and task.headline_metric
    assert task.model_types and "train" in task.commands
    for target in [*task.model_types.values(), task.explain, task.attribution]:
        if target is not None:
            module, _, attribute = target.partition(":")
            assert (REPO_ROOT / Path(*module.split("."))).with_suffix(".py").is_file() and attribute, target
    for target in task.commands.values():  # a module, or "module:Class" of a command dataclass
        module = target.partition(":")[0]
        assert (REPO_ROOT / Path(*module.split("."))).with_suffix(".py").is_file(), target


def test_the_command_line_routes_every_task_command() -> None:
    from bioattn.cli import COMMANDS

    for verb, targets in task_commands().items():
        assert COMMANDS[verb] == targets
    assert set(COMMANDS["train"]) == set(TASKS)


def test_the_model_loader_knows_every_task_model_type() -> None:
    from bioattn.models.registry import MODEL_TYPES

    assert MODEL_TYPES == task_model_types()
    assert {t for task in all_tasks() for t in task.model_types} == set(MODEL_TYPES)


@pytest.mark.slow  # over a second: the full suite runs it, the fast lane does not
def test_the_model_loader_reads_the_table_without_the_task_layer() -> None:
    """``bioattn.models`` sits below the tasks: it reads the model classes from :data:`bioattn.plugins.TASKS` and
    loading a shipped model imports nothing from ``bioattn.tasks``."""
    code = ("import sys\nfrom bioattn.models.registry import MODEL_TYPES, load_pretrained\n"
            "load_pretrained('gue-prom-core-all')\n"
            "print('TASKS', sorted(m for m in sys.modules if m.startswith('bioattn.tasks')), len(MODEL_TYPES))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO_ROOT)
    assert f"TASKS [] {len(task_model_types())}" in done.stdout, done.stderr


def test_attribute_dispatches_through_the_model_task() -> None:
    import torch

    from bioattn.tasks.explain_dispatch import attribute
    from bioattn.models.promoter import PromoterClassifier

    assert task_of_model(PromoterClassifier) is not None
    model = PromoterClassifier(max_len=12, embed_dim=8, num_heads=2, num_layers=1).eval()
    ids = torch.randint(0, 4, (2, 12))
    assert attribute(model, ids, "rollout").shape == (2, 12)
    with pytest.raises(TypeError, match="no attribution for Linear"):
        attribute(torch.nn.Linear(2, 2), ids, "rollout")


def test_reading_the_registry_imports_no_torch() -> None:
    code = ("import sys\nfrom bioattn.tasks.registry import all_tasks, task_commands\nall_tasks(); task_commands()\n"
            "print('HEAVY', sorted({m.split('.')[0] for m in sys.modules} & {'torch', 'numpy'}))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO_ROOT)
    assert "HEAVY []" in done.stdout, done.stderr


@pytest.mark.parametrize("name", sorted(TASKS))
def test_task_module_imports_only_the_contract_at_module_level(name: str) -> None:
    """The CLI reads every task's attributes on ``bioattn --help``: a task.py importing torch, numpy or its own
    code at module level makes every command start slowly (the hooks import inside their bodies)."""
    module = TASKS[name].split(":")[0]
    tree = ast.parse((REPO_ROOT / Path(*module.split("."))).with_suffix(".py").read_text())
    allowed = {"__future__", "typing", "collections.abc", "dataclasses", "bioattn.tasks.base"}
    heavy = []
    for node in tree.body:  # module level only; an `if TYPE_CHECKING:` block is not executed
        if isinstance(node, ast.Import):
            heavy += [alias.name for alias in node.names if alias.name not in allowed]
        elif isinstance(node, ast.ImportFrom) and node.module not in allowed:
            heavy.append(node.module)
    assert not heavy, f"{module} imports {heavy} at module level; import them inside the hooks"


@pytest.mark.parametrize("name", list(TASKS))
def test_every_task_runs_through_the_driver(name: str) -> None:
    """``Task.run`` is written once, the driver's: no registered task overrides it."""
    assert type(get_task(name)).run is Task.run
