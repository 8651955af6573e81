"""Native contacts from structures (bioattn.data.structure) and contact metrics/baselines/files (bioattn.metrics, bioattn.coevolution, bioattn.data.contacts, bioattn.explain.figures)."""
from __future__ import annotations

import gzip

import numpy as np
import pytest
import torch
from Bio.PDB import MMCIFIO, PDBParser

from bioattn.coevolution import apc, mi_apc, mutual_information, potts_couplings, pseudo_likelihood
from bioattn.data.contacts import load_target, read_contact_scores, tool_name, write_rr
from bioattn.tasks.msa.figures import plot_contact_map
from bioattn.metrics import precision_at
from bioattn.data.msa import MSATokenizer
from bioattn.data.structure import native_distances, read_chain, read_struct_dat, virtual_cb
from bioattn.errors import UserInputError

THREE = {"A": "ALA", "C": "CYS", "D": "ASP", "G": "GLY", "K": "LYS", "W": "TRP", "M": "MET"}


def write_pdb(path, sequence: str, first_number: int = 100, chain: str = "B") -> np.ndarray:
    """A toy chain: residue k has N, CA, C (and CB unless glycine) around (3.8k, k², 0). Returns the CB/virtual-CB (n, 3)."""
    lines, serial, cbs = [], 1, []
    for k, letter in enumerate(sequence):
        origin = np.array([3.8 * k, 0.3 * k * k, 0.0])
        atoms = {"N": origin + [-1.2, 0.5, 0.1], "CA": origin, "C": origin + [1.2, 0.6, -0.2]}
        if letter != "G":
            atoms["CB"] = origin + [0.1, -1.0, 1.1]
        for name, xyz in atoms.items():
            lines.append(
                f"ATOM  {serial:5d}  {name:<3s} {THREE[letter]} {chain}{first_number + k:4d}    "
                f"{xyz[0]:8.3f}{xyz[1]:8.3f}{xyz[2]:8.3f}  1.00  0.00           {name[0]}"
            )
            serial += 1
        cbs.append(atoms["CB"] if letter != "G" else virtual_cb(atoms["N"], atoms["CA"], atoms["C"]))
    path.write_text("\n".join(lines) + "\nEND\n")
    return np.array(cbs)


def pairwise(coords: np.ndarray) -> np.ndarray:
    return np.linalg.norm(coords[:, None] - coords[None], axis=-1)


# ------------------------------------------------------------------------------------------ structures
def test_distances_map_by_alignment_not_numbering(tmp_path):
    cb = write_pdb(tmp_path / "x.pdb", "CDGKW", first_number=100)  # numbered 100..104
    query = "MACDGKWM"  # the chain is query positions 2..6
    distances = native_distances(query, tmp_path / "x.pdb")
    assert np.isnan(distances[0]).all() and np.isnan(distances[7]).all()
    np.testing.assert_allclose(distances[2:7, 2:7], pairwise(cb), atol=1e-3)


def test_glycine_gets_the_virtual_cb(tmp_path):
    cb = write_pdb(tmp_path / "x.pdb", "AGA")
    chain = read_chain(tmp_path / "x.pdb")
    assert chain.sequence == "AGA"
    np.testing.assert_allclose(chain.cb, cb, atol=1e-3)


def test_virtual_cb_matches_real_cb_in_a_real_structure(require_data):
    path = require_data("msa", "coev", "1mkcA00", "1mkcA00.pdb")
    residues = [r for r in PDBParser(QUIET=True).get_structure("x", path)[0].get_residues() if "CB" in r]
    deviation = [np.linalg.norm(virtual_cb(r["N"].coord, r["CA"].coord, r["C"].coord) - r["CB"].coord) for r in residues]
    assert np.mean(deviation) < 0.2


def test_mmcif_reads_like_pdb(tmp_path):
    write_pdb(tmp_path / "x.pdb", "ACDK")
    writer = MMCIFIO()
    writer.set_structure(PDBParser(QUIET=True).get_structure("x", tmp_path / "x.pdb"))
    writer.save(str(tmp_path / "x.cif"))
    np.testing.assert_allclose(native_distances("ACDK", tmp_path / "x.cif"), native_distances("ACDK", tmp_path / "x.pdb"), atol=1e-3)


def test_missing_chain_lists_the_chains(tmp_path):
    write_pdb(tmp_path / "x.pdb", "ACDK", chain="B")
    with pytest.raises(UserInputError, match=r"x\.pdb: chain 'A' not found; protein chains in the file: 'B'"):
        read_chain(tmp_path / "x.pdb", "A")


def test_structure_of_another_protein_is_refused(tmp_path):
    write_pdb(tmp_path / "x.pdb", "WWWWKKKK")
    with pytest.raises(UserInputError, match=r"x\.pdb chain 'B': its sequence does not match the query"):
        native_distances("ACDGACDGACDG", tmp_path / "x.pdb")


def test_not_a_structure_file(tmp_path):
    (tmp_path / "x.pdb").write_text("hello\n")
    with pytest.raises(UserInputError, match=r"x\.pdb: (no atoms|cannot parse)"):
        read_chain(tmp_path / "x.pdb")


def test_struct_dat_uses_column_four_only(tmp_path):
    path = tmp_path / "f_struct.dat"
    path.write_text("1 2 99.0 3.5\n1 3 -5.0 9.0\n")
    distances = read_struct_dat(path, 3)
    assert distances[0, 1] == distances[1, 0] == 3.5 and distances[0, 2] == 9.0 and np.isnan(distances[1, 2])
    path.write_text("1 2 99.0 3.5\n1 7 0 9.0\n")
    with pytest.raises(UserInputError, match=r"f_struct\.dat, line 2: column pair \(1, 7\) outside"):
        read_struct_dat(path, 3)


# ------------------------------------------------------------------------------------------ metrics
def test_apc_matches_its_definition():
    scores = torch.rand(6, 6)
    scores = scores + scores.T
    off = scores.clone().fill_diagonal_(0)
    row = off.sum(1) / 5
    expected = off - row[:, None] * row[None, :] / (off.sum() / 30)
    expected.fill_diagonal_(0)
    torch.testing.assert_close(apc(scores), expected)


def test_mutual_information_of_coupled_and_independent_columns():
    tokens = MSATokenizer().encode(["AAC", "CCC", "DDA", "EEA"] * 5)  # col1 == col0 (4 states), col2 a 2-valued function of col0
    mi = mutual_information(tokens, torch.ones(len(tokens)))
    assert mi[0, 1] == pytest.approx(np.log(4), rel=1e-5)
    assert mi[0, 2] == pytest.approx(np.log(2), rel=1e-5)  # col2 is a function of col0 with 2 equiprobable values
    independent = MSATokenizer().encode(["AA", "AC", "CA", "CC"])
    assert mutual_information(independent, torch.ones(4))[0, 1] == pytest.approx(0.0, abs=1e-6)


def test_precision_counts_top_long_range_pairs_with_coordinates():
    length = 60
    distances = np.full((length, length), 20.0)
    distances[0, 30] = distances[30, 0] = 5.0  # a long-range contact
    distances[1, 40] = distances[40, 1] = 5.0
    distances[2, 10] = distances[10, 2] = 5.0  # medium range, never counted
    distances[59, :] = distances[:, 59] = np.nan  # residue 59 has no coordinates: L = 59
    scores = np.zeros((length, length))
    scores[0, 30] = scores[30, 0] = 0.9
    scores[2, 10] = scores[10, 2] = 0.99
    scores[5, 59] = scores[59, 5] = 5.0  # ignored: no coordinates
    scores[3, 50] = scores[50, 3] = 0.8  # wrong
    result = precision_at(scores, distances)
    assert result["P@L/5"] == pytest.approx(1 / 11)  # floor(59/5) = 11 pairs, one contact
    scores[1, 40] = scores[40, 1] = 0.95
    assert precision_at(scores, distances, fractions=(29,))["P@L/29"] == pytest.approx(1.0)  # top 2


def test_rr_round_trip_and_other_formats(tmp_path):
    rng = np.random.default_rng(0)
    scores = rng.random((8, 8))
    scores = (scores + scores.T) / 2
    write_rr(tmp_path / "x.rr", scores, "ACDEFGHI", target="T1", method=["one", "two"], remarks=["uncalibrated"], min_separation=1)
    lines = (tmp_path / "x.rr").read_text().splitlines()
    assert lines[:7] == ["PFRMAT RR", "TARGET T1", "AUTHOR bioattn", "REMARK uncalibrated", "METHOD one", "METHOD two", "MODEL  1"]
    assert lines[7] == "ACDEFGHI" and lines[-1] == "END"
    back = read_contact_scores(tmp_path / "x.rr", 8)
    upper = np.triu_indices(8, 1)
    np.testing.assert_allclose(back[upper], scores[upper], atol=1e-6)
    np.savetxt(tmp_path / "x.mat", scores)
    np.testing.assert_allclose(read_contact_scores(tmp_path / "x.mat", 8), scores)
    (tmp_path / "x.evfold.gz").write_bytes(gzip.compress(b"1 A 3 D 0.5 7.25\n2 C 8 I 0.1 -1.0\n"))
    evfold = read_contact_scores(tmp_path / "x.evfold.gz", 8)
    assert evfold[0, 2] == evfold[2, 0] == 7.25 and evfold[1, 7] == -1.0 and np.isnan(evfold[0, 1])
    assert tool_name("5ptpA.metapsicov.stage1.gz") == "metapsicov.stage1" and tool_name("16pkA0.deepcon.rr.gz") == "deepcon"


def test_rr_keeps_the_top_pairs_clips_rounding_and_refuses_raw_scores(tmp_path):
    scores = np.zeros((120, 120))
    scores[0, 60] = scores[60, 0] = 1.0 + 1e-9  # rounding above 1: clipped
    scores[3, 5] = scores[5, 3] = 0.9  # |i-j| < 6: left out
    write_rr(tmp_path / "x.rr", scores, "A" * 120, min_separation=6, top=10)
    lines = (tmp_path / "x.rr").read_text().splitlines()
    assert lines[lines.index("MODEL  1") + 1:][:3] == ["A" * 50, "A" * 50, "A" * 20]  # 50 residues per line
    contacts = [line.split() for line in lines[-11:-1]]
    assert contacts[0] == ["1", "61", "0", "8", "1.000000"] and len(contacts) == 10
    assert all(int(j) - int(i) >= 6 for i, j, *_ in contacts)
    scores[0, 60] = scores[60, 0] = 3.2
    with pytest.raises(ValueError, match=r"pair \(1, 61\) has probability 3\.2, outside \[0, 1\]"):
        write_rr(tmp_path / "y.rr", scores, "A" * 120)
    assert not (tmp_path / "y.rr").exists()


def test_prediction_outside_the_query_is_an_error(tmp_path):
    (tmp_path / "x.rr").write_text("1 9 0 8 0.5\n")
    with pytest.raises(UserInputError, match=r"x\.rr, line 1: pair \(1, 9\) outside the query's 8 residues"):
        read_contact_scores(tmp_path / "x.rr", 8)


def test_contact_map_png(tmp_path):
    scores = np.random.default_rng(1).random((30, 30))
    plot_contact_map(tmp_path / "map.png", scores, np.full((30, 30), 6.0))
    assert (tmp_path / "map.png").read_bytes()[:4] == b"\x89PNG"


# ------------------------------------------------------------------------------------------ baselines
def test_potts_and_mi_find_a_planted_coupling():
    generator = torch.Generator().manual_seed(0)
    tokens = torch.randint(0, 20, (200, 12), generator=generator)
    tokens[:, 9] = (tokens[:, 1] + 3) % 20  # column 9 is determined by column 1
    weights = torch.ones(200)
    potts = apc(potts_couplings(tokens, weights, max_iterations=25))
    assert divmod(int(potts.argmax()), 12) in ((1, 9), (9, 1))
    mi = mi_apc(tokens, weights)
    assert divmod(int(np.argmax(mi)), 12) in ((1, 9), (9, 1))


def test_pseudo_likelihood_value_and_gradient_match_a_direct_loop():
    generator = torch.Generator().manual_seed(0)
    length, q, n = 4, 21, 7
    tokens = torch.randint(0, q, (n, length), generator=generator)
    weights = torch.rand(n, generator=generator)
    fields = torch.randn(length * q, generator=generator)
    fields.view(length, q)[:, -1] = 0.0
    free = torch.randn(length * q, length * q, generator=generator)
    block = torch.block_diag(*[torch.ones(q, q, dtype=torch.bool)] * length)
    couplings = (0.5 * (free + free.T)).masked_fill(block, 0.0)
    value, field_grad, pair_grad = pseudo_likelihood(fields, couplings, tokens, weights, lambda_single=0.3, lambda_pair=0.7,
                                                     chunk_size=3)

    h = fields.view(length, q).clone().requires_grad_(True)
    a = couplings.view(length, q, length, q).clone().requires_grad_(True)
    j = 0.5 * (a + a.permute(2, 3, 0, 1))  # a symmetric parametrisation: autograd gives the symmetric gradient
    expected = torch.zeros((), dtype=torch.float64)
    for row, w in zip(tokens, weights):
        for i in range(length):
            logits = h[i] + sum(j[i, :, k, row[k]] for k in range(length) if k != i)
            expected = expected - w * logits.log_softmax(-1)[row[i]]
    expected = expected + 0.3 * h[:, :-1].square().sum()
    expected = expected + 0.7 * (length - 1) * sum(j[i, :, k].square().sum() for i in range(length) for k in range(i + 1, length))
    expected.backward()
    off_diagonal = ~block.view(length, q, length, q)
    assert torch.allclose(value, expected.detach(), rtol=1e-5)
    assert torch.allclose(field_grad.view(length, q)[:, :-1], h.grad[:, :-1], atol=1e-4)
    assert torch.equal(field_grad.view(length, q)[:, -1], torch.zeros(length))  # the gap field is held at 0
    assert torch.allclose(pair_grad.view(length, q, length, q)[off_diagonal], a.grad[off_diagonal], atol=1e-4)
    assert torch.equal(pair_grad.view(length, q, length, q)[~off_diagonal], torch.zeros(length * q * q))
    assert torch.allclose(pair_grad, pair_grad.T)


def test_published_ccmpred_precision_reproduced_on_1atzA(require_data):
    folder = require_data("msa", "coev", "1atzA")
    target = load_target(folder / "1atzA.aln", pdb=folder / "1atzA.pdb")  # row 0 is not the query
    assert target.msa.sequences[0] == read_chain(folder / "1atzA.pdb").sequence
    ccmpred = read_contact_scores(folder / "pred" / "1atzA.ccmpred_apc.mat", target.msa.length)
    result = precision_at(ccmpred, target.distances)
    assert [round(result[k], 2) for k in ("P@L/5", "P@L/2", "P@L")] == [0.80, 0.57, 0.40]  # the published numbers
