"""MSA readers, tokenizer, sequence weights and subsampling (bioattn.data.msa)."""
from __future__ import annotations

import gzip
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from bioattn.data.msa import ALPHABET, MSA, MSATokenizer, detect_format, read_msa, sequence_weights, subsample
from bioattn.errors import UserInputError

ROWS = ["ACDEF-GHIK", "ACDQF-GHIR", "-CDEFWGHI-"]


def write_format(path: Path, fmt: str, rows: list[str], ids: list[str] | None = None) -> Path:
    """Write ``rows`` in one of the supported formats (the A3M/A2M/Stockholm variants carry insertions to drop)."""
    ids = ids or [f"s{i}" for i in range(len(rows))]
    if fmt == "fasta":
        text = "".join(f">{name} description\n{row[:4]}\n{row[4:]}\n" for name, row in zip(ids, rows))
    elif fmt == "a3m":  # lower-case insertions of different lengths per row
        text = "".join(f">{name}\n{row[:3]}{'kl'[: i % 3]}{row[3:]}\n" for i, (name, row) in enumerate(zip(ids, rows)))
    elif fmt == "a2m":  # insert columns: lower-case or '.' in every row
        text = "".join(f">{name}\n{row[:2]}{'a' if i else '.'}{row[2:]}\n" for i, (name, row) in enumerate(zip(ids, rows)))
    elif fmt == "stockholm":  # an insert column (RF '.') after column 5
        cut = min(5, len(rows[0]))
        body = "".join(f"{name} {row[:cut]}{'q' if i else '.'}{row[cut:]}\n" for i, (name, row) in enumerate(zip(ids, rows)))
        text = "# STOCKHOLM 1.0\n" + body + "#=GC RF " + "x" * cut + "." + "x" * (len(rows[0]) - cut) + "\n//\n"
    elif fmt == "clustal":  # two interleaved blocks
        text = "CLUSTAL W (1.83) multiple sequence alignment\n\n"
        for block in (slice(0, 6), slice(6, None)):
            if rows[0][block]:
                text += "".join(f"{name}    {row[block]}\n" for name, row in zip(ids, rows)) + "\n"
    elif fmt == "psicov":
        text = "".join(row + "\n" for row in rows)
    else:
        raise AssertionError(fmt)
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    "fmt, name", [("fasta", "x.fasta"), ("a3m", "x.a3m"), ("a2m", "x.a2m"), ("stockholm", "x.sto"), ("clustal", "x.aln"), ("psicov", "x.aln")]
)
def test_every_format_reads_the_same_alignment(tmp_path, fmt, name):
    path = write_format(tmp_path / name, fmt, ROWS)
    assert detect_format(path) == fmt
    msa = read_msa(path)
    assert list(msa.sequences) == ROWS
    if fmt != "psicov":
        assert list(msa.ids) == ["s0", "s1", "s2"]


def test_gzipped_file_reads_like_plain(tmp_path):
    plain = write_format(tmp_path / "x.a3m", "a3m", ROWS)
    packed = tmp_path / "x.a3m.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    assert read_msa(packed).sequences == read_msa(plain).sequences


def test_ambiguity_codes_read_as_unknown_and_dots_as_gaps(tmp_path):
    path = tmp_path / "x.fasta"
    path.write_text(">a\nAB.Z\n>b\nAC-U\n")
    msa = read_msa(path)
    assert msa.sequences == ("AB-Z", "AC-U")
    assert MSATokenizer().decode(MSATokenizer().encode(msa)) == ["AX-X", "AC-X"]


# ------------------------------------------------------------------------------------------ bad input
@pytest.mark.parametrize(
    "name,text,message",
    [
        ("bad.fasta", ">a\nACDE\n>b\nACDE\n>c\nACD\n",
         r"bad\.fasta, line 5 \(record 'c'\): 3 aligned columns, but the first record has 4"),
        ("bad.aln", "ACDE\nACDE\n\nACDEF\n", r"bad\.aln, line 4 \(record 'row2'\): 5 aligned columns"),
        ("bad.sto", "# STOCKHOLM 1.0\nseq1 ACDE-F\nseq2 ACD-F\n//\n", r"bad\.sto, line 3 \(record 'seq2'\): 5 aligned columns"),
        ("bad.fasta", ">a\nACDE\n>b\nACkDE\n", r"name it \*\.a3m"),  # an A3M saved as .fasta gets a hint
        ("bad.a3m", ">a\nACDE\n>b\nAC*E\n", r"bad\.a3m, line 3 \(record 'b'\): character '\*' at aligned column 3"),
    ],
    ids=["ragged-fasta", "ragged-psicov", "ragged-stockholm", "a3m-named-fasta", "unknown-character"],
)
def test_bad_alignment_names_file_line_and_record(tmp_path, name, text, message):
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(UserInputError, match=message):
        read_msa(path)


@pytest.mark.parametrize("content", ["", "\n\n"])
def test_empty_alignment_is_an_error(tmp_path, content):
    path = tmp_path / "empty.a3m"
    path.write_text(content)
    with pytest.raises(UserInputError, match=r"empty\.a3m: no sequences \(empty alignment\)"):
        read_msa(path)


def test_missing_file_and_binary_file(tmp_path):
    with pytest.raises(UserInputError, match="not found"):
        read_msa(tmp_path / "absent.a3m")
    binary = tmp_path / "x.a3m"
    binary.write_bytes(b"\xff\xfe\x00\x01")
    with pytest.raises(UserInputError, match="not a readable text alignment"):
        read_msa(binary)


def test_tokenizer_rejects_foreign_characters():
    with pytest.raises(UserInputError, match=r"record 1: character '1' at column 2"):
        MSATokenizer().encode(["AC", "A1"])


# ------------------------------------------------------------------------------------------ properties
aligned_rows = st.integers(1, 12).flatmap(
    lambda length: st.lists(st.text(alphabet=ALPHABET, min_size=length, max_size=length), min_size=1, max_size=6)
)


@settings(max_examples=40, deadline=None)
@given(aligned_rows)
def test_tokenizer_round_trip(rows):
    tokens = MSATokenizer().encode(rows)
    assert tokens.shape == (len(rows), len(rows[0]))
    assert int(tokens.max()) < len(ALPHABET)
    assert MSATokenizer().decode(tokens) == rows


@settings(max_examples=25, deadline=None)
@given(rows=aligned_rows, fmt=st.sampled_from(["fasta", "a3m", "a2m", "stockholm", "clustal", "psicov"]))
def test_parsers_round_trip(tmp_path_factory, rows, fmt):
    folder = tmp_path_factory.mktemp(fmt)
    path = write_format(folder / ("x.aln" if fmt in ("clustal", "psicov") else f"x.{ {'stockholm': 'sto'}.get(fmt, fmt) }"), fmt, rows)
    assert list(read_msa(path, fmt).sequences) == rows


@settings(max_examples=30, deadline=None)
@given(rows=aligned_rows, insert=st.text(alphabet="acdefghiklmnpqrstvwy.", max_size=4), where=st.integers(0, 12))
def test_a3m_insertions_never_change_the_match_columns(tmp_path_factory, rows, insert, where):
    path = tmp_path_factory.mktemp("a3m") / "x.a3m"
    cut = min(where, len(rows[0]))
    path.write_text("".join(f">s{i}\n{row[:cut]}{insert if i % 2 else ''}{row[cut:]}\n" for i, row in enumerate(rows)))
    assert list(read_msa(path).sequences) == rows


# ------------------------------------------------------------------------------------------ weights, subsampling
def test_sequence_weights_count_neighbours_at_80_percent_identity():
    rows = ["AAAAAAAAAA", "AAAAAAAAAC", "AAAAAAAACC", "CCCCCCCCCC"]  # identities to row 0: 1.0, 0.9, 0.8, 0.0
    weights = sequence_weights(MSATokenizer().encode(rows))
    # row0 ~ {0,1,2}; row1 ~ {0,1,2}; row2 ~ {0,1,2} (0.8 to row0, 0.9 to row1); row3 alone
    assert torch.allclose(weights, torch.tensor([1 / 3, 1 / 3, 1 / 3, 1.0]))
    assert torch.allclose(sequence_weights(MSATokenizer().encode(rows), identity=1.0), torch.ones(4))


def test_weights_are_exact_under_chunking():
    tokens = torch.randint(0, 3, (37, 8))
    assert torch.equal(sequence_weights(tokens, chunk_size=5), sequence_weights(tokens))


def test_weights_of_duplicated_rows_match_a_direct_count():
    generator = torch.Generator().manual_seed(0)
    distinct = torch.randint(0, 4, (9, 10), generator=generator)
    tokens = distinct[torch.randint(0, 9, (40,), generator=generator)]  # every distinct row several times
    identity = (tokens[:, None, :] == tokens[None, :, :]).float().mean(-1)
    expected = 1.0 / (identity >= 0.8).sum(1).float()
    assert torch.allclose(sequence_weights(tokens, chunk_size=4), expected)


def test_random_subsample_keeps_query_and_is_reproducible():
    tokens = torch.randint(0, 21, (50, 6))
    first = subsample(tokens, 10, "random", seed=3)
    assert first[0] == 0 and len(set(first.tolist())) == 10
    assert torch.equal(first, subsample(tokens, 10, "random", seed=3))
    assert torch.equal(subsample(tokens, 99), torch.arange(50))


def test_diversity_subsample_prefers_distant_rows():
    near = ["AAAAAAAA"] * 20
    far = ["CCCCCCCC", "DDDDDDDD", "EEEEEEEE"]
    tokens = MSATokenizer().encode(near + far)
    chosen = subsample(tokens, 4, "diversity")
    assert chosen[0] == 0 and set(chosen[1:].tolist()) == {20, 21, 22}


def test_msa_helpers_select_rows_columns_and_find_query():
    msa = MSA.from_sequences(ROWS)
    assert msa.depth == 3 and msa.length == 10
    assert msa.with_query_first(2).sequences[0] == ROWS[2]
    assert msa.select_columns([0, 2]).sequences == ("AD", "AD", "-D")
    assert msa.find_row("CDEFWGHI") == 2 and msa.find_row("WWW") is None


# ------------------------------------------------------------------------------------------ real data
def test_real_psicov_family_reads(require_data):
    path = require_data("msa", "coev", "1mkcA00", "1mkcA00.aln")
    msa = read_msa(path)
    assert (msa.depth, msa.length) == (142, 43)
    assert msa.sequences[0] == "CKYKFENWGACDGGTGTKVRQGTLKKARYNAQCQETIRVTKPC"
