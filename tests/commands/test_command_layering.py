"""The command layer stays thin: no command module imports another command, and argparse lives only in
``bioattn/cli.py`` and ``bioattn/commands/`` (the library takes keyword arguments, never parsed flags)."""
from __future__ import annotations

import ast
from pathlib import Path

import bioattn
from bioattn.cli import COMMANDS, SIMPLE_COMMANDS

PACKAGE = Path(bioattn.__file__).parent
#: The command modules (a task's command is a ``"module:Class"`` dataclass of its task folder instead).
COMMAND_MODULES = {module for targets in COMMANDS.values() for module in targets.values()
                   if ":" not in module} | set(SIMPLE_COMMANDS.values())
#: The tasks whose commands are options dataclasses built by the one generic builder.
DATACLASS_TASKS = ("activity", "variants", "ct", "msa", "promoter")


def _imports(path: Path) -> set[str]:
    """Every module ``path`` imports (``from a.b import c`` counts as ``a.b`` and ``a.b.c``), at any depth."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def _path(module: str) -> Path:
    return PACKAGE.parent / (module.replace(".", "/") + ".py")


def test_no_command_imports_another_command() -> None:
    assert len(COMMAND_MODULES) >= 2
    offenders = {module: sorted((_imports(_path(module)) & COMMAND_MODULES) - {module}) for module in COMMAND_MODULES}
    assert {m: o for m, o in offenders.items() if o} == {}


def test_a_moved_task_has_no_command_module_of_its_own() -> None:
    """Each verb of a task in :data:`DATACLASS_TASKS` is a class of the task's folder, and no module of
    ``bioattn/commands/`` is named after the task (the generic builder serves it)."""
    for task in DATACLASS_TASKS:
        modules = {target.split(":")[0] for targets in COMMANDS.values() for name, target in targets.items()
                   if name == task}
        assert modules and all(module.startswith(f"bioattn.tasks.{task}.") for module in modules), modules
        assert [p.name for p in (PACKAGE / "commands").glob("*.py") if task in p.stem.split("_")] == []


def test_argparse_only_in_the_command_layer() -> None:
    # msa_transformer reads fair-esm checkpoints, which store their hyperparameters as an argparse.Namespace: it
    # allowlists that class for torch.load and parses no command line
    allowed = {PACKAGE / "cli.py", PACKAGE / "models" / "msa_transformer.py"}
    below = [path.relative_to(PACKAGE).as_posix() for path in PACKAGE.rglob("*.py")
             if path not in allowed and "commands" not in path.relative_to(PACKAGE).parts
             and "argparse" in {name.split(".")[0] for name in _imports(path)}]
    assert below == []


def test_the_scan_sees_an_offender(tmp_path: Path) -> None:
    """The scan reads nested and ``from`` imports (a scan that missed them would pass on a broken package)."""
    source = tmp_path / "m.py"
    source.write_text("def f():\n    from bioattn.commands import predict_ct\n    import argparse as a\n")
    assert {"bioattn.commands.predict_ct", "argparse"} <= _imports(source)
