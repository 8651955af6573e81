"""The ``bioattn`` command: ``bioattn train|predict|explain promoter|ct|msa``, ``bioattn pretrain msa``, ``bioattn data fetch NAME``
and ``bioattn models``.

Each subcommand lives in its own module under :mod:`bioattn.commands` that defines
``add_arguments(parser)`` and ``run(args) -> int``; this file only routes to them. :func:`main` imports only the
module of the command it runs (the others' help summaries are read from their source), so ``bioattn --version``,
``bioattn --help`` and each command start without importing what other commands need.
"""
from __future__ import annotations

import argparse
import ast
import importlib
import importlib.util
import sys
from typing import Callable, Sequence

from bioattn import __version__
from bioattn.errors import ReportedError
from bioattn.errors import Terminated, interrupt_on_signals
from bioattn.runtime import keep_freed_memory

# verb -> {target: module path}; each module defines add_arguments(parser) and run(args) -> int.
COMMANDS: dict[str, dict[str, str]] = {
    "train": {
        "promoter": "bioattn.commands.train_promoter",
        "ct": "bioattn.commands.train_ct",
        "msa": "bioattn.commands.train_msa",
        "variants": "bioattn.commands.train_variants",
    },
    "predict": {
        "promoter": "bioattn.commands.predict_promoter",
        "ct": "bioattn.commands.predict_ct",
        "msa": "bioattn.commands.predict_msa",
        "variants": "bioattn.commands.predict_variants",
    },
    "explain": {
        "promoter": "bioattn.commands.explain_promoter",
        "ct": "bioattn.commands.explain_ct",
        "msa": "bioattn.commands.explain_msa",
    },
    "pretrain": {
        "msa": "bioattn.commands.pretrain_msa",
    },
    "data": {
        "fetch": "bioattn.commands.data_fetch",
    },
}

# verbs without a target: verb -> module path.
SIMPLE_COMMANDS: dict[str, str] = {
    "models": "bioattn.commands.models",
}

_VERB_HELP = {
    "train": "train a model on a bundled benchmark or on your own data",
    "predict": "run a trained model on your own files",
    "explain": "attribution maps (attention rollout or gradient methods, --method), per-head maps and head diversity",
    "pretrain": "pretrain a model across many unlabeled inputs (MSA: masked-token prediction over alignments)",
    "data": "download the public datasets the recipes use",
}


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The ``bioattn`` parser. With ``argv`` only the command it names (``VERB TARGET``) is imported and gets its
    arguments; the others are listed with their help summary. Without ``argv``: every command, complete."""
    chosen = _chosen_command(argv) if argv is not None else None
    parser = argparse.ArgumentParser(
        prog="bioattn",
        description="Multi-head attention for genomics and medical imaging.",
    )
    parser.add_argument("--version", action="version", version=f"bioattn {__version__}")
    verbs = parser.add_subparsers(dest="verb", metavar="{" + ",".join([*COMMANDS, *SIMPLE_COMMANDS]) + "}")
    for verb, targets in COMMANDS.items():
        verb_parser = verbs.add_parser(verb, help=_VERB_HELP[verb], description=_VERB_HELP[verb])
        verb_parser.set_defaults(print_verb_help=verb_parser.print_help)
        sub = verb_parser.add_subparsers(dest="target", metavar="{" + ",".join(targets) + "}")
        for target, module_name in targets.items():
            _add_command(sub, target, module_name, load=chosen is None or chosen == (verb, target))
    for verb, module_name in SIMPLE_COMMANDS.items():
        _add_command(verbs, verb, module_name, load=chosen is None or chosen == (verb, None))
    return parser


def _chosen_command(argv: Sequence[str]) -> tuple[str | None, str | None]:
    """``(verb, target)`` named by the first words of ``argv`` (``None`` where absent)."""
    words = []
    for arg in argv:
        if arg.startswith("-") or len(words) == 2:
            break
        words.append(arg)
    verb = words[0] if words else None
    if verb in SIMPLE_COMMANDS:
        return verb, None
    return verb, words[1] if len(words) > 1 else None


def _module_docstring(module_name: str) -> str:
    """The docstring of ``module_name``, read from its source without importing it."""
    spec = importlib.util.find_spec(module_name)
    if spec is None or spec.origin is None:
        raise ImportError(f"no module named {module_name!r}")
    with open(spec.origin, encoding="utf-8") as handle:
        return ast.get_docstring(ast.parse(handle.read()), clean=False) or ""


def _add_command(subparsers: argparse._SubParsersAction, name: str, module_name: str, *, load: bool = True) -> None:
    """Add the command ``name`` of ``module_name`` (its docstring: help summary and description); ``load``: import
    the module and add its arguments (else only its help line is listed)."""
    module = importlib.import_module(module_name) if load else None
    doc = module.__doc__ if module is not None else _module_docstring(module_name)
    summary = (doc or "").strip().splitlines()[0]
    command_parser = subparsers.add_parser(name, help=summary, description=doc,
                                           formatter_class=argparse.RawDescriptionHelpFormatter)
    if module is not None:
        module.add_arguments(command_parser)
        command_parser.set_defaults(handler=module.run, command_error=command_parser.error)


def run_user_main(main: Callable[[], int | None]) -> int:
    """Run ``main``; a :class:`~bioattn.errors.ReportedError` becomes one ``error:`` line on stderr and its exit
    code (2 for bad input, 3 for diverged training). Ctrl-C (SIGINT), SIGTERM and SIGHUP unwind alike: temporary
    output files are removed, finished ones kept, and the exit status is ``128 + signal number`` (130, 143, 129)."""
    try:
        with interrupt_on_signals():
            return int(main() or 0)
    except ReportedError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    except Terminated as exc:
        print(str(exc), file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(argv)
    args, unknown = parser.parse_known_args(argv)
    if unknown:  # named by the command's own usage, which lists the flags it takes
        getattr(args, "command_error", parser.error)(f"unrecognized arguments: {' '.join(unknown)}")
    handler = getattr(args, "handler", None)
    if handler is None:
        getattr(args, "print_verb_help", parser.print_help)()
        return 0 if args.verb is None else 2
    keep_freed_memory()
    return run_user_main(lambda: handler(args))


if __name__ == "__main__":
    sys.exit(main())
