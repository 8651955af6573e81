"""The ``bioattn`` command; it imports only the command it runs."""
from __future__ import annotations

import argparse
import ast
import contextlib
import functools
import importlib
import importlib.util
import sys
from typing import Callable, Sequence

from bioattn import __version__
from bioattn.errors import ReportedError, Terminated, interrupt_on_signals
from bioattn.runtime import keep_freed_memory
from bioattn.tasks.registry import task_commands

# verb -> {target: "module:Class" of a command dataclass, or a module defining add_arguments(parser) and run(args)}
COMMANDS: dict[str, dict[str, str]] = {**task_commands(), "data": {"fetch": "bioattn.commands.data_fetch"}}
# verbs without a target: verb -> module path.
SIMPLE_COMMANDS: dict[str, str] = {"models": "bioattn.commands.models"}

_VERB_HELP = {
    "train": "train a model on a bundled benchmark or on your own data",
    "predict": "run a trained model on your own files",
    "explain": "attribution maps (attention rollout or gradient methods, --method), per-head maps and head diversity",
    "pretrain": "pretrain a model across many unlabeled inputs (masked-token prediction)",
    "data": "download the public datasets the recipes use",
}


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The ``bioattn`` parser; with ``argv`` only the command it names is imported and gets its arguments."""
    chosen = _chosen_command(argv) if argv is not None else None
    parser = argparse.ArgumentParser(prog="bioattn",
                                     description="Multi-head attention for genomics and medical imaging.")
    parser.add_argument("--version", action="version", version=f"bioattn {__version__}")
    verbs = parser.add_subparsers(dest="verb", metavar="{" + ",".join([*COMMANDS, *SIMPLE_COMMANDS]) + "}")
    for verb, targets in COMMANDS.items():
        verb_parser = verbs.add_parser(verb, help=_VERB_HELP.get(verb, verb), description=_VERB_HELP.get(verb, verb))
        verb_parser.set_defaults(print_verb_help=verb_parser.print_help)
        sub = verb_parser.add_subparsers(dest="target", metavar="{" + ",".join(targets) + "}")
        for target, module_name in targets.items():
            _add_command(sub, target, module_name, load=chosen is None or chosen == (verb, target))
    for verb, module_name in SIMPLE_COMMANDS.items():
        _add_command(verbs, verb, module_name, load=chosen is None or chosen == (verb, None))
    return parser


def _chosen_command(argv: Sequence[str]) -> tuple[str | None, str | None]:
    words = []
    for arg in argv:
        if arg.startswith("-") or len(words) == 2:
            break
        words.append(arg)
    verb = words[0] if words else None
    if verb in SIMPLE_COMMANDS:
        return verb, None
    return verb, words[1] if len(words) > 1 else None


def _docstring(target: str) -> str:
    """The docstring of ``target`` (a module or ``"module:Class"``), read from its source without importing it."""
    module_name, _, class_name = target.partition(":")
    spec = importlib.util.find_spec(module_name)
    if spec is None or spec.origin is None:
        raise ImportError(f"no module named {module_name!r}")
    with open(spec.origin, encoding="utf-8") as handle:
        tree = ast.parse(handle.read())
    if not class_name:
        return ast.get_docstring(tree, clean=False) or ""
    found = [node for node in tree.body if isinstance(node, ast.ClassDef) and node.name == class_name]
    if not found:
        raise ImportError(f"no class {class_name!r} in {module_name}")
    return ast.get_docstring(found[0], clean=True) or ""


def _add_command(subparsers: argparse._SubParsersAction, name: str, target: str, *, load: bool = True) -> None:
    """Add the command ``name`` of ``target``; ``load``: import it and add its arguments (else only its help line)."""
    from bioattn.commands import task_command
    command = (task_command.command_class(target) if ":" in target else importlib.import_module(target)) if load \
        else None
    doc = _docstring(target) if command is None else \
        task_command.description(command) if ":" in target else command.__doc__
    summary = (doc or "").strip().splitlines()[0]
    command_parser = subparsers.add_parser(name, help=summary, description=doc,
                                           formatter_class=argparse.RawDescriptionHelpFormatter)
    if command is None:
        return
    if ":" in target:
        task_command.add_arguments(command_parser, command)
        handler = functools.partial(task_command.run, command)
    else:
        command.add_arguments(command_parser)
        handler = command.run
    command_parser.set_defaults(handler=handler, command_error=command_parser.error)


def run_user_main(main: Callable[[], int | None], *, program: bool = True) -> int:
    """Run ``main``: a ReportedError is one ``error:`` line; ``program``: signals exit ``128 + signum``."""
    try:
        with interrupt_on_signals() if program else contextlib.nullcontext():
            return int(main() or 0)
    except ReportedError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt as exc:
        if not program:
            raise
        terminated = isinstance(exc, Terminated)
        print(str(exc) if terminated else "interrupted", file=sys.stderr)
        return exc.exit_code if terminated else 130


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``bioattn`` command line ``argv`` (``None``: ``sys.argv``, as the program); the exit status."""
    program = argv is None
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(argv)
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        getattr(args, "command_error", parser.error)(f"unrecognized arguments: {' '.join(unknown)}")
    handler = getattr(args, "handler", None)
    if handler is None:
        getattr(args, "print_verb_help", parser.print_help)()
        return 0 if args.verb is None else 2
    keep_freed_memory()
    return run_user_main(lambda: handler(args), program=program)


if __name__ == "__main__":
    sys.exit(main())
