"""One model contract, scikit-learn's meanings: a classifier's ``predict_proba(inputs)`` is ``(N, C)`` with rows
summing to 1 (columns in ``classes_`` / ``class_names`` order) and its ``predict(inputs)`` the class labels; a
regressor's ``predict`` its values; both take user inputs (DNA strings, in-memory volumes), the tensor-level call
has another name, and a model reads no files. Tiny untrained models of each family, plus the shipped
``gue-prom-core-all``."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from bioattn.data.ct import VolumePreprocessing, write_nifti
from bioattn.data.dna import collate_tokens, encode
from bioattn.errors import UserInputError
from bioattn.models import load_pretrained
from bioattn.models.activity import ActivityRegressor
from bioattn.models.ct_resnet import ResNetCT3D
from bioattn.models.ensemble import Ensemble
from bioattn.models.hybrid_ct import HybridCT3D
from bioattn.models.promoter import PromoterClassifier
from bioattn.tasks.ct.volumes import predict_files, predict_proba_files

DNA = ["ACGTATAAAAGGCGCG", "TTGACATATAAAGCGCAT", "GGGCCCATAT", "ACGTACGTACGTACGTAC"]


def _promoter(num_classes: int = 2, seed: int = 0, **kwargs) -> PromoterClassifier:
    torch.manual_seed(seed)
    names = ["no", "yes"] if num_classes == 2 else [f"c{k}" for k in range(num_classes)]
    return PromoterClassifier(max_len=24, embed_dim=16, num_heads=2, num_layers=1, conv_kernel=3,
                              num_classes=num_classes, class_names=names, **kwargs).eval()


def _check_classifier(model, inputs, n: int, classes: list[str], **options) -> np.ndarray:
    probabilities = model.predict_proba(inputs, **options)
    assert isinstance(probabilities, np.ndarray) and probabilities.shape == (n, len(classes))
    np.testing.assert_allclose(probabilities.sum(axis=1), 1.0, atol=1e-6)
    assert (probabilities >= 0).all()
    labels = model.predict(inputs, **options)
    assert isinstance(labels, np.ndarray) and labels.shape == (n,)
    assert set(labels.tolist()) <= set(classes)
    return probabilities


@pytest.mark.parametrize("num_classes", [2, 3])
def test_dna_classifier_predict_proba_is_n_by_c_and_predict_gives_labels(num_classes: int) -> None:
    model = _promoter(num_classes)
    probabilities = _check_classifier(model, DNA, len(DNA), model.class_names)
    assert model.classes_.tolist() == model.class_names
    labels = model.predict(DNA)
    if num_classes == 2:  # class 1 from the run's threshold on its probability, as predict promoter writes it
        expected = np.where(probabilities[:, 1] >= model.threshold, "yes", "no")
    else:
        expected = model.classes_[probabilities.argmax(axis=1)]
    assert labels.tolist() == expected.tolist()
    assert model.predict_proba(DNA[0]).shape == (1, num_classes)  # one string: N = 1
    # the tensor-level call gives the same numbers from one padded batch of token ids
    ids, padding_mask = collate_tokens([encode(s) for s in DNA])
    from_ids = model.proba_from_ids(ids, padding_mask).double().numpy()
    np.testing.assert_allclose(model.class_probabilities(from_ids), probabilities, atol=1e-6)


def test_a_threshold_moves_the_labels_not_the_probabilities() -> None:
    low, high = _promoter(threshold=0.01), _promoter(threshold=0.99)
    np.testing.assert_array_equal(low.predict_proba(DNA), high.predict_proba(DNA))
    assert set(low.predict(DNA).tolist()) == {"yes"} and set(high.predict(DNA).tolist()) == {"no"}


def test_dna_ensemble_keeps_the_contract(tmp_path: Path) -> None:
    members = [_promoter(seed=seed, rc_average=False) for seed in (0, 1)]  # the mean of one-strand probabilities
    ensemble = Ensemble(members).eval()
    probabilities = _check_classifier(ensemble, DNA, len(DNA), members[0].class_names)
    np.testing.assert_allclose(probabilities, np.mean([m.predict_proba(DNA) for m in members], axis=0), atol=1e-5)


def test_dna_classifier_refuses_what_is_not_dna() -> None:
    with pytest.raises(UserInputError, match="sequence 1: invalid character 'U'"):
        _promoter().predict_proba(["ACGT", "ACGU"])


def _ct(cls, **kwargs):
    torch.manual_seed(0)
    model = cls(1, 2, class_names=["normal", "lesion"], **kwargs)
    model.input_preprocessing = VolumePreprocessing(size=(16, 16, 16))
    return model.eval()


CT_MODELS = {
    "HybridCT3D": lambda: _ct(HybridCT3D, stem_channels=(4, 8), stem_strides=(2, 2), embed_dim=12, num_heads=2,
                              num_layers=1),
    "ResNetCT3D": lambda: _ct(ResNetCT3D, widths=(4, 8, 8, 8)),
}


@pytest.mark.parametrize("name", sorted(CT_MODELS))
def test_volume_classifier_takes_arrays_and_the_task_reads_files(name: str, tmp_path: Path) -> None:
    model = CT_MODELS[name]()
    volumes = np.random.default_rng(0).normal(0, 1, (3, 12, 14, 10)).astype(np.float32)
    probabilities = _check_classifier(model, list(volumes), 3, model.class_names)
    assert model.predict_proba(volumes[0]).shape == (1, 2)  # one volume: N = 1
    np.testing.assert_allclose(model.predict_proba(torch.from_numpy(volumes[:, None])), probabilities, atol=1e-6)
    path = tmp_path / "v.nii.gz"
    write_nifti(path, volumes[1], np.eye(4))
    with pytest.raises(UserInputError, match="a model reads no files"):
        model.predict_proba(path)
    np.testing.assert_allclose(predict_proba_files(model, [path]), probabilities[1:2], atol=1e-6)
    assert predict_files(model, path).tolist() == model.predict(volumes[1]).tolist()


def test_regressor_predict_gives_values_and_has_no_probabilities() -> None:
    torch.manual_seed(0)
    model = ActivityRegressor(input_length=20, target_names=["a", "b"], target_mean=[0.0, 1.0], target_sd=[1.0, 2.0],
                              channels=8, kernel=3, stages=1, embed_dim=8, num_heads=2, num_layers=1,
                              dropout=0.0).eval()
    values = model.predict(DNA[:3])
    assert isinstance(values, np.ndarray) and values.shape == (3, 2) and values.dtype == np.float64
    assert not hasattr(model, "predict_proba")


def test_shipped_promoter_model_keeps_the_contract() -> None:
    model = load_pretrained("gue-prom-core-all")
    rng = np.random.default_rng(0)
    sequences = ["".join(rng.choice(list("ACGT"), 70)) for _ in range(5)]
    probabilities = _check_classifier(model, sequences, 5, ["0", "1"])
    labels = model.predict(sequences)
    assert labels.tolist() == np.where(probabilities[:, 1] >= model.threshold, "1", "0").tolist()
