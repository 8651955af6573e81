"""ActivityRegressor: predictions on strings equal the tensor-level forward on tokens, flanks are optional,
padding is masked, strands average as the run says, a too-long element is an error naming the record, and the
model saves / loads with its settings."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from bioattn.data.dna import PAD_ID, encode
from bioattn.errors import UserInputError
from bioattn.models import load_pretrained
from bioattn.models.activity import ActivityRegressor, kmer_counts

FIVE, THREE = "AGGACCGG", "CATTGCGT"


def _model(**kwargs) -> ActivityRegressor:
    torch.manual_seed(0)
    settings = dict(input_length=24, target_names=["a", "b"], target_mean=[1.0, -2.0], target_sd=[2.0, 0.5],
                    flanks=[FIVE, THREE], channels=8, kernel=3, stages=2, embed_dim=8, num_heads=2, num_layers=1,
                    dropout=0.0)
    return ActivityRegressor(**{**settings, **kwargs}).eval()


def _sequences(n: int, length: int, seed: int = 0) -> list[str]:
    rng = np.random.default_rng(seed)
    return ["".join(rng.choice(list("ACGT"), length)) for _ in range(n)]


def test_predict_on_strings_equals_forward_on_tokens() -> None:
    model = _model()
    sequences = _sequences(5, 24) + ["ACGTN" * 3]  # the last one shorter: padded and masked
    tokens = torch.full((6, 24), PAD_ID, dtype=torch.long)
    for i, s in enumerate(sequences):
        tokens[i, : len(s)] = torch.from_numpy(encode(s))
    with torch.no_grad():
        out = model(tokens)
    assert out["values"].shape == (6, 2) and out["embedding"].shape == (6, 8)
    np.testing.assert_allclose(model.predict(sequences), out["values"].numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(model.embed(sequences), out["embedding"].numpy(), rtol=1e-5, atol=1e-6)
    # the flanks are optional; the batch a sequence is in does not matter
    with_flanks = [FIVE + s + THREE for s in sequences]
    np.testing.assert_allclose(model.predict(with_flanks), model.predict(sequences), rtol=1e-6)
    np.testing.assert_allclose(model.predict(sequences[:1]), model.predict(sequences)[:1], rtol=1e-5, atol=1e-6)
    assert model.target_names == ["a", "b"] and model.input_length == 24


def test_values_are_in_the_training_units() -> None:
    model = _model()
    tokens = torch.from_numpy(encode(_sequences(1, 24)[0]))[None]
    with torch.no_grad():
        z, _ = model.standardised(tokens)
        values = model(tokens)["values"]
    np.testing.assert_allclose(values.numpy(), (z * torch.tensor([2.0, 0.5]) + torch.tensor([1.0, -2.0])).numpy(),
                               rtol=1e-6)


def test_strand_both_averages_the_reverse_complement() -> None:
    from bioattn.data.dna import reverse_complement

    model = _model(strand="both")
    sequences = _sequences(3, 24, seed=2)
    np.testing.assert_allclose(model.predict(sequences), model.predict([reverse_complement(s) for s in sequences]),
                               rtol=1e-5, atol=1e-6)
    forward = model.predict(sequences, strand="forward")
    assert not np.allclose(forward, model.predict(sequences))


def test_too_long_or_bad_sequences_are_errors_naming_the_record() -> None:
    model = _model()
    with pytest.raises(UserInputError, match=r"sequence 1: 25 nt after removing the flanks; this model accepts at most 24"):
        model.predict(["ACGT", "A" * 25])
    with pytest.raises(UserInputError, match=r"x\.fa: record 'r2'.*invalid character 'U'"):
        model.predict(["ACGT", "ACGU"], records=["x.fa: record 'r1'", "x.fa: record 'r2'"])


def test_save_and_load_keep_settings_and_numbers(tmp_path: Path) -> None:
    model = _model(kmer_branch=2)
    with torch.no_grad():
        model.kmer_linear.weight.fill_(0.1)
        model.kmer_mean.fill_(1.0)
    model.save_pretrained(tmp_path)
    for loaded in (ActivityRegressor.from_pretrained(tmp_path), load_pretrained(tmp_path)):
        assert isinstance(loaded, ActivityRegressor) and loaded.flanks == [FIVE, THREE]
        np.testing.assert_allclose(loaded.predict(_sequences(3, 20)), model.predict(_sequences(3, 20)), rtol=1e-6)


def test_kmer_counts() -> None:
    tokens = torch.from_numpy(encode("ACGTNAC"))[None]
    counts = kmer_counts(torch.cat([tokens, torch.zeros(1, 2, dtype=torch.long)], 1), 2)[0]
    assert counts[:4].tolist() == [2, 2, 1, 1]  # A C G T (N and padding not counted)
    assert counts[4:].nonzero().flatten().tolist() == [1, 6, 11]  # AC (twice), CG, GT
    assert counts[4 + 1] == 2
