"""MSAContactModel: invariances, persistence, masking, the contact head's regression."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from bioattn.data.msa import MSATokenizer
from bioattn.models.msa_contact import MSAContactModel, fit_contact_head, logistic_contact_probabilities, mask_tokens

PAD = MSATokenizer.pad_id


def tiny_model(**kwargs) -> MSAContactModel:
    torch.manual_seed(0)
    return MSAContactModel(max_len=32, embed_dim=16, num_heads=2, num_layers=2, dropout=0.0, **kwargs).eval()


# ------------------------------------------------------------------------------------------ model
def test_padding_rows_and_columns_does_not_change_predictions():
    model = tiny_model()
    tokens = torch.randint(0, 22, (1, 6, 10))
    padded = torch.full((1, 9, 13), PAD)
    padded[:, :6, :10] = tokens
    logits, maps = model(tokens, need_weights=True)
    logits_padded, maps_padded = model(padded, need_weights=True)
    torch.testing.assert_close(logits_padded[:, :6, :10], logits, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(maps_padded[..., :10, :10], maps, atol=1e-5, rtol=1e-5)


def test_row_order_does_not_change_contact_features():
    model = tiny_model()
    tokens = torch.randint(0, 22, (1, 6, 10))
    perm = torch.randperm(6)
    torch.testing.assert_close(model.contact_features(tokens[:, perm]), model.contact_features(tokens), atol=1e-5, rtol=1e-5)
    features = model.contact_features(tokens)[0]
    assert features.shape == (10, 10, 4)
    torch.testing.assert_close(features, features.transpose(0, 1))  # symmetrised
    assert (features[..., 0] >= features[..., 1]).all()  # heads sorted per layer


def test_save_and_load_keep_outputs_and_contact_head(tmp_path):
    model = tiny_model(extra_contact_features=["gaussian_dca_apc"])
    model.set_contact_head(np.arange(5, dtype=np.float32), -1.5)
    model.save_pretrained(tmp_path)
    loaded = MSAContactModel.from_pretrained(tmp_path)
    tokens = torch.randint(0, 22, (1, 4, 12))
    torch.testing.assert_close(loaded(tokens)[0], model(tokens)[0])
    features = torch.rand(12, 12, 5)
    torch.testing.assert_close(loaded.contact_probabilities(features), model.contact_probabilities(features))


def test_mask_tokens_never_masks_padding_and_follows_80_10_10():
    tokens = torch.randint(0, 22, (4, 50, 60))
    tokens[:, 40:] = PAD
    masked, chosen = mask_tokens(tokens, 0.15, torch.Generator().manual_seed(0))
    assert not chosen[tokens == PAD].any()
    assert 0.13 < chosen[tokens != PAD].float().mean() < 0.17
    share_masked = (masked[chosen] == MSATokenizer.mask_id).float().mean()
    assert 0.77 < share_masked < 0.83
    assert torch.equal(masked[~chosen], tokens[~chosen])


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_mask_tokens_masks_cuda_tokens_as_it_masks_the_same_tokens_on_the_cpu():
    tokens = torch.randint(0, 22, (2, 8, 30))
    expected = mask_tokens(tokens, 0.15, torch.Generator().manual_seed(0))
    got = mask_tokens(tokens.cuda(), 0.15, torch.Generator().manual_seed(0))
    assert all(g.is_cuda and torch.equal(g.cpu(), e) for g, e in zip(got, expected))


def test_contact_head_learns_from_other_families_and_ranks_contacts():
    generator = np.random.default_rng(0)

    def family(length):
        distances = generator.uniform(3, 20, (length, length))
        distances = (distances + distances.T) / 2
        signal = (distances < 8).astype(np.float32) + generator.normal(0, 0.3, (length, length))
        features = torch.tensor(np.stack([signal + signal.T, generator.normal(size=(length, length))], -1), dtype=torch.float32)
        return features, distances

    train = [family(40), family(50)]
    weight, bias = fit_contact_head([f for f, _ in train], [d for _, d in train])
    assert weight[0] > 5 * abs(weight[1])
    features, distances = family(45)
    probabilities = logistic_contact_probabilities(features, torch.tensor(weight), bias).numpy()
    upper = np.triu_indices(45, 6)
    top = np.argsort(-probabilities[upper])[:20]
    assert (distances[upper][top] < 8).mean() > 0.9


def test_contact_head_can_be_resized_for_other_pair_features(tmp_path):
    model = tiny_model(extra_contact_features=["mi_apc"])
    model.set_extra_contact_features(["potts_apc", "gaussian_dca_apc", "mi_apc"])
    assert model.num_contact_features == 2 * 2 + 3
    model.save_pretrained(tmp_path)
    assert MSAContactModel.from_pretrained(tmp_path).config["extra_contact_features"] == ["potts_apc", "gaussian_dca_apc", "mi_apc"]
