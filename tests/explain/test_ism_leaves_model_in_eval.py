"""In-silico mutagenesis leaves the model as it found it for prediction: in eval mode (tangermeme restores the
training mode of the module it was handed, so a wrapper built in training mode would switch dropout back on)."""
from __future__ import annotations

import torch

from bioattn.data.dna import collate_tokens, encode
from bioattn.explain.ism import ism_attribution
from bioattn.models.promoter import PromoterClassifier


def test_predictions_after_ism_are_the_eval_mode_predictions() -> None:
    torch.manual_seed(0)
    model = PromoterClassifier(max_len=20, embed_dim=16, num_heads=2, num_layers=1, conv_kernel=0, dropout=0.5)
    ids, padding = collate_tokens([encode("ACGTACGTACGTAC"), encode("TTTTACGTAA")])
    model.eval()
    with torch.no_grad():
        before = model.predict_logits(ids, padding)
    ism_attribution(model, ids, padding, torch.tensor([1, 1]))
    assert not model.training and not any(m.training for m in model.modules())
    with torch.no_grad():
        assert torch.equal(model.predict_logits(ids, padding), before)
