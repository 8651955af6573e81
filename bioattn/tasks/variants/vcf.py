"""Reading VCFs with cyvcf2 without htslib's own messages (written straight to file descriptor 2) reaching the
user: :func:`htslib_messages` captures them, errors are reported in our words (:func:`check_vcf_header`,
:func:`describe_record`)."""
from __future__ import annotations

import contextlib
import gzip
import os
import re
import sys
import tempfile
from itertools import islice
from pathlib import Path
from typing import Any, Callable, Iterator

from bioattn.errors import UserInputError

#: htslib's log lines: ``[W::function] text`` (also ``[E::`` errors, ``[I::`` information, ``[D::`` debugging).
HTSLIB_LINE = re.compile(r"^\[[EWIDT]::[^\]]*\] ?")
#: Records read from cyvcf2 per capture of descriptor 2.
CHUNK = 4096
VCF_COLUMNS = ("#CHROM", "POS", "ID", "REF", "ALT", "QUAL", "FILTER", "INFO")


@contextlib.contextmanager
def htslib_messages() -> Iterator[list[str]]:
    """Capture file descriptor 2 within the block: the yielded list gets htslib's lines (prefix removed), other
    lines go on to ``sys.stderr``; where it cannot be redirected the block runs as is."""
    messages: list[str] = []
    try:
        capture = tempfile.TemporaryFile()
    except OSError:
        yield messages
        return
    with capture:
        try:
            sys.stderr.flush()
            saved = os.dup(2)
        except (OSError, ValueError, AttributeError):
            yield messages
            return
        try:
            os.dup2(capture.fileno(), 2)
            yield messages
        finally:
            with contextlib.suppress(OSError, ValueError, AttributeError):
                sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            capture.seek(0)
            other = []
            for line in capture.read().decode("utf-8", errors="replace").splitlines():
                if HTSLIB_LINE.match(line):
                    messages.append(HTSLIB_LINE.sub("", line).strip())
                elif line.strip() and messages and line.startswith("\t"):  # htslib's continuation lines
                    messages[-1] += " " + line.strip()
                elif line:
                    other.append(line)
            if other:
                print("\n".join(other), file=sys.stderr)


def _text_opener(path: Path) -> Any:
    with open(path, "rb") as handle:
        return gzip.open if handle.read(2) == b"\x1f\x8b" else open


def _is_bcf(path: Path) -> bool:
    try:
        with _text_opener(path)(path, "rb") as handle:
            return handle.read(3) == b"BCF"
    except (OSError, EOFError):
        return False


def check_vcf_header(path: Path) -> int:
    """The number of header lines of the VCF ``path`` (plain or gzip), its ``##fileformat`` and ``#CHROM`` lines
    checked; 0 for a BCF (left to cyvcf2)."""
    if _is_bcf(path):
        return 0
    hint = "a VCF starts with ##fileformat=VCFv4.x, then ## header lines, then the #CHROM line"
    count = 0
    try:
        with _text_opener(path)(path, "rt", encoding="utf-8", errors="replace") as handle:
            for line in handle:
                line = line.rstrip("\r\n")
                count += 1
                if count == 1 and not line.startswith("##fileformat="):
                    raise UserInputError(
                        f"{path}: line 1: no ##fileformat header line ({hint}; a table of variants is read as one "
                        "when it ends in .tsv, with chrom, pos, ref, alt columns)")
                if line.startswith("#CHROM"):
                    fields = line.split("\t")
                    if tuple(fields[:8]) != VCF_COLUMNS:
                        raise UserInputError(
                            f"{path}: line {count}: the #CHROM line must be the tab-separated columns "
                            f"{' '.join(VCF_COLUMNS)} (then FORMAT and samples, if any); got {line[:80]!r}")
                    return count
                if not line.startswith("##"):
                    raise UserInputError(f"{path}: no #CHROM header line before line {count} ({hint})")
    except (OSError, EOFError, gzip.BadGzipFile) as exc:
        raise UserInputError(f"{path}: cannot read this VCF ({exc})") from exc
    if count == 0:
        raise UserInputError(f"{path}: empty file ({hint})")
    raise UserInputError(f"{path}: no #CHROM header line ({hint})")


def describe_record(path: Path, line_number: int, messages: list[str]) -> str:
    """Why line ``line_number`` of ``path`` is not a VCF record, in our words where we can tell, else htslib's."""
    text = None
    with contextlib.suppress(OSError, EOFError):
        with _text_opener(path)(path, "rt", encoding="utf-8", errors="replace") as handle:
            text = next(islice(handle, line_number - 1, None), None)
    if text is not None:
        fields = text.rstrip("\r\n").split("\t")
        if len(fields) < 8:
            return (f"{len(fields)} tab-separated column{'s' if len(fields) != 1 else ''}; a VCF record has at least 8 "
                    f"({' '.join(VCF_COLUMNS).lstrip('#')})")
        if not fields[1].strip().isdigit():
            return f"position {fields[1]!r} is not a positive integer"
    errors = [m for m in messages if m] or ["htslib cannot parse it"]
    return f"not a VCF record ({errors[-1]})"


def open_vcf(path: Path, checked: bool = False, **kwargs: Any) -> Any:
    """A :class:`cyvcf2.VCF` of ``path``, its header checked first (``checked``: the caller did), htslib quiet."""
    from cyvcf2 import VCF
    if not checked:
        check_vcf_header(path)
    with htslib_messages() as messages:
        try:
            return VCF(str(path), **kwargs)
        except Exception as exc:  # cyvcf2 raises OSError / Exception for files htslib cannot read
            error = exc
    reason = messages[-1] if messages else str(error).replace(str(path), "").strip(" :") or "unreadable"
    raise UserInputError(f"{path}: not a readable VCF ({reason})") from error


def vcf_rows(path: Path, on_open: Callable[[Any], None] | None = None) -> Iterator[tuple[int, Any]]:
    """``(line number, cyvcf2 record)`` of every record of the VCF ``path``, htslib quiet (``on_open(reader)``
    first); a record htslib cannot parse is a :class:`UserInputError` naming its line."""
    line = check_vcf_header(path) + 1
    reader = open_vcf(path, lazy=True, checked=True)
    try:
        if on_open is not None:
            with htslib_messages():
                on_open(reader)
        records = iter(reader)
        while True:
            chunk, error, finished = [], None, False
            with htslib_messages() as messages:
                while len(chunk) < CHUNK:
                    try:
                        chunk.append(next(records))
                    except StopIteration:
                        finished = True
                        break
                    except Exception as exc:  # cyvcf2: "error parsing variant with `htslib::bcf_read` ..."
                        error = exc
                        break
            for record in chunk:
                yield line, record
                line += 1
            if error is not None:
                raise UserInputError(f"{path}:{line}: {describe_record(path, line, messages)}") from error
            if finished:
                return
    finally:
        with htslib_messages():
            reader.close()
