"""The alignment flags ``train``, ``predict`` and ``explain msa`` share (:func:`bioattn.options.flag` fields)."""
from __future__ import annotations

from typing import Any

from bioattn.data.msa import FORMATS
from bioattn.options import flag

#: The argument group of the alignment flags of ``train`` and ``predict msa``.
DATA = "data"


def alignment_flag(*, required: bool = False) -> Any:
    """``--input FILE``: the alignment of ``train`` and ``predict msa``."""
    return flag("--input", **({} if required else {"default": None}), metavar="FILE", required=required, group=DATA,
                help="alignment file (.a3m .a2m .fasta .sto .aln; .gz accepted)")


def format_flag(*, group: str | None = DATA) -> Any:
    """``--format``: the alignment's format."""
    return flag("--format", default=None, choices=FORMATS, group=group,
                help="alignment format (default: from the file name)")


def query_flag() -> Any:
    """``--query FASTA`` of ``train`` and ``predict msa``."""
    return flag("--query", default=None, group=DATA,
                help="FASTA with the query sequence (default: the --pdb chain's row, else row 0)")


def pdb_flag() -> Any:
    """``--pdb`` of ``train`` and ``predict msa``: the native structure, for evaluation."""
    return flag("--pdb", default=None, group=DATA,
                help="native structure (PDB or mmCIF) for evaluation (default: none)")


def chain_flag(*, group: str | None = DATA) -> Any:
    """``--chain`` of ``--pdb``."""
    return flag("--chain", default=None, group=group, help="chain of --pdb (default: the first protein chain)")


def struct_dat_flag() -> Any:
    """``--struct-dat`` of ``train`` and ``predict msa``: column distances instead of a structure."""
    return flag("--struct-dat", default=None, group=DATA,
                help="arDCA *_struct.dat column distances, instead of --pdb (default: none)")


def out_flag(*, help: str = "output directory", group: str = DATA) -> Any:
    """``--out`` (required)."""
    return flag("--out", required=True, group=group, help=help)
