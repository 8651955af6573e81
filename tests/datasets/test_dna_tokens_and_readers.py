"""DNA tokenizer and FASTA/CSV readers: vocabulary, IUPAC handling, reverse complement, bad inputs."""
from __future__ import annotations

import gzip
import tempfile
from pathlib import Path

import pytest
import torch
from Bio.Seq import reverse_complement as bio_reverse_complement
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bioattn.data.dna import (
    A_ID,
    C_ID,
    G_ID,
    N_ID,
    PAD_ID,
    T_ID,
    collate_tokens,
    decode,
    encode,
    gc_content,
    read_records,
    reverse_complement_ids,
)
from bioattn.errors import UserInputError

IUPAC_AMBIGUITY = "RYSWKMBDHVN"


def write(path: Path, text: str | bytes) -> Path:
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    return path


# ---------------------------------------------------------------------------------------- tokenizer
def test_encode_maps_nucleotides_case_insensitively():
    assert encode("ACGT").tolist() == [A_ID, C_ID, G_ID, T_ID]
    assert encode("acgt").tolist() == encode("ACGT").tolist()
    assert decode(encode("gattaca")) == "GATTACA"


@pytest.mark.parametrize("code", list(IUPAC_AMBIGUITY + IUPAC_AMBIGUITY.lower()))
def test_every_iupac_ambiguity_code_becomes_n(code):
    assert encode(f"A{code}T").tolist() == [A_ID, N_ID, T_ID]


@pytest.mark.parametrize("bad, position", [("ACGU", 4), ("AC-GT", 3), ("ACG T", 4), ("AXGT", 2), ("ACGTé", 5), ("1ACG", 1)])
def test_invalid_character_error_names_file_record_and_position(bad, position):
    with pytest.raises(UserInputError) as info:
        encode(bad, record="record 'chr1:5-9' (#3)", source="reads.fa")
    message = str(info.value)
    assert message.startswith("reads.fa: record 'chr1:5-9' (#3): invalid character")
    assert f"at position {position};" in message
    assert repr(bad[position - 1]) in message


def test_empty_sequence_is_an_error():
    with pytest.raises(UserInputError, match="rec1: empty sequence"):
        encode("", record="rec1")


def test_collate_tokens_right_pads_and_masks():
    ids, mask = collate_tokens([encode("ACG"), encode("T")])
    assert ids.tolist() == [[A_ID, C_ID, G_ID], [T_ID, PAD_ID, PAD_ID]]
    assert mask.tolist() == [[False, False, False], [False, True, True]]


def test_reverse_complement_ids_matches_biopython_on_padded_batch():
    sequences = ["ACGTTGCAN", "AAC", "GGGTACCA", "T"]
    ids, mask = collate_tokens([encode(s) for s in sequences])
    expected, expected_mask = collate_tokens([encode(bio_reverse_complement(s)) for s in sequences])
    assert torch.equal(reverse_complement_ids(ids, mask), expected)
    assert torch.equal(mask, expected_mask)
    assert torch.equal(reverse_complement_ids(reverse_complement_ids(ids, mask), mask), ids)


def test_gc_content_ignores_n():
    assert gc_content(["GGCC", "ATNN", "GCAT"]).tolist() == [1.0, 0.0, 0.5]


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=40))
@pytest.mark.slow
def test_encode_random_text_returns_ids_or_documented_error(text):
    try:
        ids = encode(text, record="r")
    except UserInputError as exc:
        assert str(exc).startswith("r: ")
        return
    assert len(ids) == len(text)
    assert set(ids.tolist()) <= {A_ID, C_ID, G_ID, T_ID, N_ID}


# ------------------------------------------------------------------------------------------ readers
def test_fasta_multiline_lowercase_crlf_and_order(tmp_path):
    path = write(tmp_path / "x.fa", ">s1 first one\r\nACGT\r\nacg\r\n>s2\nRYN\n\n>s3\nT\n")
    records = list(read_records(path))
    assert [r.id for r in records] == ["s1", "s2", "s3"]
    assert [r.sequence for r in records] == ["ACGTacg", "RYN", "T"]
    assert records[1].tokens(path).tolist() == [N_ID, N_ID, N_ID]


def test_gzip_fasta_reads_like_plain_and_is_detected_by_content(tmp_path):
    text = ">a\nACGT\n>b\nGG\n"
    plain = list(read_records(write(tmp_path / "x.fa", text)))
    assert list(read_records(write(tmp_path / "y.fa.gz", gzip.compress(text.encode())))) == plain
    assert list(read_records(write(tmp_path / "z.dat", gzip.compress(text.encode())))) == plain


def test_csv_with_and_without_id_column_labels_ignored_unless_asked(tmp_path):
    with_ids = list(read_records(write(tmp_path / "a.csv", "id,sequence,label\nx,ACGT,1\ny,GGCC,0\n")))
    assert [(r.id, r.sequence, r.label) for r in with_ids] == [("x", "ACGT", None), ("y", "GGCC", None)]
    numbered = list(read_records(write(tmp_path / "b.csv", "sequence,label\nACGT,1\n\nGGCC,0\n"), labels=True))
    assert [(r.id, r.label, r.where) for r in numbered] == [("1", 1, "line 2"), ("2", 0, "line 4")]


def test_sniffed_formats_without_known_suffix(tmp_path):
    assert [r.id for r in read_records(write(tmp_path / "p.txt", "\n>q\nAC\n"))] == ["q"]
    assert [r.sequence for r in read_records(write(tmp_path / "q.txt", "sequence\nAC\n"))] == ["AC"]


BAD_INPUTS = [
    # (name, content, expected message fragment)
    ("empty.fa", "", "file is empty"),
    ("blank.fa", "\n  \n", "file is empty"),
    ("notes.fa", "hello world\nfoo\n", "not valid FASTA: text before the first '>' header line"),
    ("notes.txt", "hello world\nfoo\n", "neither FASTA (no '>' header line) nor CSV with a 'sequence' column"),
    ("emptyrec.fa", ">a\n>b\nACGT\n", "record 'a' (#1): empty sequence"),
    ("headers.fa", ">a\n>b\n", "record 'a' (#1): empty sequence"),
    ("nocol.csv", "seq,label\nACGT,1\n", "CSV without a 'sequence' column"),
    ("emptyrow.csv", "id,sequence\nr1,ACGT\nr2,\n", "record 'r2' (line 3): empty sequence"),
    ("header_only.csv", "sequence,label\n", "CSV has a header but no records"),
    ("binary.fa", b"\xff\xfe\x00\x81binary", "not a text file"),
]


@pytest.mark.parametrize("name, content, fragment", BAD_INPUTS, ids=[b[0] for b in BAD_INPUTS])
def test_bad_files_raise_user_error_naming_file(tmp_path, name, content, fragment):
    path = write(tmp_path / name, content)
    with pytest.raises(UserInputError) as info:
        list(read_records(path))
    assert str(info.value).startswith(f"{path}: ")
    assert fragment in str(info.value)


def test_truncated_gzip_is_a_user_error(tmp_path):
    data = gzip.compress((">a\n" + "ACGT" * 5000 + "\n").encode())
    path = write(tmp_path / "cut.fa.gz", data[: len(data) // 2])
    with pytest.raises(UserInputError, match="truncated gzip file"):
        list(read_records(path))


def test_missing_file_and_folder(tmp_path):
    with pytest.raises(UserInputError, match="file not found"):
        list(read_records(tmp_path / "nope.fa"))
    with pytest.raises(UserInputError, match="is a folder"):
        list(read_records(tmp_path))


def test_labels_are_integers_or_text_and_missing_ones_are_errors(tmp_path):
    records = list(read_records(write(tmp_path / "t.csv", "sequence,label\nACGT,1\nACGT,TATA box\nAC,-2\n"), labels=True))
    assert [r.label for r in records] == [1, "TATA box", -2]
    with pytest.raises(UserInputError, match=r"t2.csv: record '2' \(line 3\): missing label"):
        list(read_records(write(tmp_path / "t2.csv", "sequence,label\nACGT,1\nACGT,\n"), labels=True))
    with pytest.raises(UserInputError, match="no 'label' column"):
        list(read_records(write(tmp_path / "u.csv", "sequence\nACGT\n"), labels=True))


def test_fasta_labels_come_from_the_label_field_only(tmp_path):
    path = write(tmp_path / "l.fa", ">s1 label=1 promoter of GENE\nacgt\n>label=0\tlabel=neg\nGG\n>s3 x=1 label=7\nT\n")
    records = list(read_records(path, labels=True))
    assert [(r.id, r.label) for r in records] == [("s1", 1), ("label=0", "neg"), ("s3", 7)]
    assert [r.label for r in read_records(path)] == [None, None, None]  # ignored unless asked


@pytest.mark.parametrize("header, problem", [(">s2 promoter", "no 'label=VALUE' field"), (">s2 label=", "an empty label"),
                                             (">s2 label=1 label=0", "several 'label=' fields")])
def test_fasta_label_problems_name_the_record(tmp_path, header, problem):
    path = write(tmp_path / "l.fa", f">s1 label=1\nACGT\n{header}\nACGT\n")
    with pytest.raises(UserInputError) as info:
        list(read_records(path, labels=True))
    assert str(info.value).startswith(f"{path}: record 's2' (#2): {problem} in the FASTA description")


def test_invalid_character_position_counts_from_the_offset():
    with pytest.raises(UserInputError, match="invalid character 'X' at position 1003;"):
        encode("ACX", record="record 'chr1'", source="g.fa", offset=1000)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(content=st.one_of(st.binary(max_size=300), st.text(alphabet=">ACGTNacgtxU-,\n\r ;#", max_size=300)),
       suffix=st.sampled_from([".fa", ".csv", ".txt", ".fa.gz"]), compress=st.booleans())
def test_random_files_parse_or_raise_user_error_only(content, suffix, compress):
    data = content.encode() if isinstance(content, str) else content
    if compress:
        data = gzip.compress(data)[: max(1, len(data) // 2 + 10)] if len(data) % 3 == 0 else gzip.compress(data)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / f"in{suffix}"
        path.write_bytes(data)
        try:
            for record in read_records(path):
                assert record.sequence
                tokens = record.tokens(path)
                assert len(tokens) == len(record.sequence)
        except UserInputError as exc:
            assert str(exc).startswith(f"{path}: ")
            assert "\n" not in str(exc).strip()


def test_strand_average_maps_the_reverse_strand_back_onto_forward_positions():
    import torch

    from bioattn.data.dna import collate_tokens, encode, strand_average

    ids, padding_mask = collate_tokens([encode("AACGT"), encode("TTA")])
    is_a = lambda strand: (strand == encode("A")[0]).float()  # noqa: E731
    averaged = strand_average(is_a, ids, padding_mask, per_position=True)
    # an A on the reverse strand is a T on the forward strand, at the mirrored position of its own sequence
    expected = torch.tensor([[0.5, 0.5, 0.0, 0.0, 0.5], [0.5, 0.5, 0.5, 0.0, 0.0]])
    assert torch.equal(averaged * ~padding_mask, expected)
    # a per-sequence score is averaged as it is
    counts = strand_average(lambda strand: is_a(strand).sum(-1), ids, padding_mask)
    assert torch.equal(counts, torch.tensor([1.5, 1.5]))
