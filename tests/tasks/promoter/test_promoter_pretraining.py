"""Masked-nucleotide pretraining of the promoter encoder: masking, learning, the CLI path and exact resume."""
from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from bioattn.cli import main as bioattn_main
from bioattn.data.dna import A_ID, MASK_ID, T_ID, collate_tokens, encode
from bioattn.data.masking import bert_mask, masked_cross_entropy
from bioattn.io import load_tensors
from bioattn.models.promoter import PromoterClassifier
from bioattn.tasks.promoter.train import (
    DEFAULTS,
    FINETUNE_LR,
    FINETUNE_MASK,
    TASK_RECIPES,
    PromoterOptions,
    default_config,
    quick_options,
)
from bioattn.tasks.promoter.data import Split
from bioattn.tasks.promoter.pretrain import (
    MASK_PROBABILITY,
    PRETRAIN_BATCH_FACTOR,
    PRETRAIN_LR,
    PRETRAIN_WARMUP_STEPS,
    MaskedNucleotideModel,
    mask_nucleotides,
    masked_nucleotide_loss,
    pretrain_config,
    pretrain_encoder,
)
from bioattn.training import TrainConfig


def random_ids(rows: int, length: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-padded DNA ids with some N: ``(rows, length)`` and the padding mask."""
    rng = np.random.default_rng(seed)
    tokens = [encode("".join(rng.choice(list("ACGTN"), p=[0.24, 0.24, 0.24, 0.24, 0.04], size=int(n))))
              for n in rng.integers(length // 2, length + 1, size=rows)]
    return collate_tokens(tokens)


def test_masking_chooses_only_nucleotides_and_follows_80_10_10():
    ids, padding = random_ids(400, 80, seed=0)
    masked, chosen = mask_nucleotides(ids, torch.Generator().manual_seed(0))
    nucleotide = (ids >= A_ID) & (ids <= T_ID)
    assert not chosen[~nucleotide].any()  # never PAD or N
    assert torch.equal(masked[~chosen], ids[~chosen])
    assert chosen.sum() / nucleotide.sum() == pytest.approx(MASK_PROBABILITY, abs=0.01)
    to_mask = masked[chosen] == MASK_ID
    assert to_mask.float().mean() == pytest.approx(0.8, abs=0.02)
    others = masked[chosen][~to_mask]
    assert ((others >= A_ID) & (others <= T_ID)).all()  # random replacements are nucleotides
    unchanged = (others == ids[chosen][~to_mask]).float().mean()  # 10 % kept + a quarter of the 10 % random
    assert unchanged == pytest.approx((0.1 + 0.1 / 4) / 0.2, abs=0.06)
    again = mask_nucleotides(ids, torch.Generator().manual_seed(0))
    assert torch.equal(again[0], masked) and torch.equal(again[1], chosen)


@pytest.mark.parametrize("probability", [0.05, 0.3, 0.5])
def test_masking_chooses_the_asked_fraction_of_nucleotides(probability):
    ids, _ = random_ids(400, 80, seed=1)
    _, chosen = mask_nucleotides(ids, torch.Generator().manual_seed(0), probability=probability)
    nucleotide = (ids >= A_ID) & (ids <= T_ID)
    assert chosen.sum() / nucleotide.sum() == pytest.approx(probability, abs=0.01)


def test_bert_mask_rejects_a_mask_of_another_shape_and_bad_probabilities():
    ids = torch.full((2, 5), A_ID)
    with pytest.raises(ValueError, match="maskable must be bool"):
        bert_mask(ids, torch.ones(2, 4, dtype=torch.bool), 0.15, MASK_ID, torch.arange(A_ID, T_ID + 1))
    with pytest.raises(ValueError, match="probability"):
        bert_mask(ids, torch.ones(2, 5, dtype=torch.bool), 1.5, MASK_ID, torch.arange(A_ID, T_ID + 1))


def test_masked_cross_entropy_averages_the_chosen_cells_and_is_a_differentiable_zero_without_any():
    logits = torch.randn(3, 7, 4, requires_grad=True)
    targets = torch.randint(4, (3, 7))
    chosen = torch.rand(3, 7) < 0.4
    expected = torch.nn.functional.cross_entropy(logits[chosen], targets[chosen])
    torch.testing.assert_close(masked_cross_entropy(logits, targets, chosen), expected)
    none = masked_cross_entropy(logits, targets, torch.zeros(3, 7, dtype=torch.bool))
    none.backward()
    assert none.item() == 0.0 and logits.grad is not None and not logits.grad.any()


def test_masked_nucleotide_model_predicts_every_position_and_ignores_padding():
    classifier = PromoterClassifier(max_len=40, embed_dim=16, num_heads=2, num_layers=1).eval()
    model = MaskedNucleotideModel(classifier).eval()
    ids, padding = random_ids(3, 30, seed=1)
    logits = model(ids, padding)
    assert logits.shape == (*ids.shape, 4)
    alone = model(ids[:1, : int((~padding[0]).sum())], padding[:1, : int((~padding[0]).sum())])
    torch.testing.assert_close(alone[0], logits[0, : alone.shape[1]], rtol=1e-5, atol=1e-5)  # padding never reaches it
    assert model.classifier is classifier  # shared: pretraining changes the classifier itself


def periodic_split(count: int, length: int, seed: int) -> Split:
    """Sequences that repeat ``ACGGT`` from a random phase: every nucleotide follows from its neighbours."""
    rng = np.random.default_rng(seed)
    unit = "ACGGT"
    sequences = [(unit * (length // len(unit) + 2))[p: p + length] for p in rng.integers(0, len(unit), size=count)]
    return Split(sequences, [encode(s) for s in sequences], np.zeros(count, dtype=np.int64),
                 [f"synthetic: record {i}" for i in range(count)])


@pytest.mark.slow
def test_pretraining_learns_the_sequences_and_leaves_the_classifier_head_alone(tmp_path):
    torch.manual_seed(0)
    classifier = PromoterClassifier(max_len=40, embed_dim=32, num_heads=2, num_layers=1, conv_kernel=3)
    head_before = {k: v.clone() for k, v in classifier.head.state_dict().items()}
    query_before = classifier.encoder.layers[0].self_attn.q_proj.weight.clone()
    train = periodic_split(256, 40, seed=0)
    ids, padding = collate_tokens(train.tokens[:128])
    probe = MaskedNucleotideModel(classifier)
    with torch.no_grad():
        before = masked_nucleotide_loss(probe.eval(), ids, padding, torch.Generator().manual_seed(5)).item()
    config = TrainConfig(max_epochs=1, batch_size=32, lr=3e-3, warmup_steps=2, max_steps_per_epoch=200)
    info = pretrain_encoder(classifier, train, tmp_path / "pretrain", config, epochs=6, resume=False, quick=True)
    assert before > math.log(4) - 0.2
    assert info["train_loss"] < 0.5 * math.log(4)  # far below guessing: it learnt the sequences
    for name, value in classifier.head.state_dict().items():
        assert torch.equal(value.cpu(), head_before[name])
    assert not torch.equal(classifier.encoder.layers[0].self_attn.q_proj.weight.cpu(), query_before)
    assert (tmp_path / "pretrain" / "train_log.csv").is_file()


def test_pretraining_schedule_doubles_the_batch_at_its_own_rate_and_only_a_quick_run_keeps_its_own():
    fine_tuning = TrainConfig(max_epochs=6, batch_size=64, lr=1e-3, warmup_steps=100, max_minutes=30.0, patience=8,
                              monitor="dev_mcc", monitor_mode="max", max_steps_per_epoch=500,
                              ema_decay=0.999)  # e.g. set in a YAML file
    full = pretrain_config(fine_tuning, epochs=4, sequences=47_356)
    assert full.batch_size == PRETRAIN_BATCH_FACTOR * 64 == 128 and full.max_epochs == 4 and full.lr == PRETRAIN_LR
    assert full.warmup_steps == PRETRAIN_WARMUP_STEPS  # 4 x 370 steps: a quarter is more than 200
    assert full.max_minutes is None and full.patience is None and full.monitor == "loss" and full.find_unused_parameters
    assert full.ema_decay is None  # nothing is evaluated: the pretraining keeps its last weights, not an average
    assert pretrain_config(fine_tuning, epochs=1, sequences=1_000).warmup_steps == 8 // 4  # ceil(1000 / 128) = 8 steps
    quick = pretrain_config(fine_tuning, epochs=2, sequences=47_356, quick=True)
    assert quick.batch_size == 64 and quick.warmup_steps == 100 and quick.lr == PRETRAIN_LR


# ------------------------------------------------------------------------------------- command line
def write_csv(path: Path, count: int, seed: int) -> Path:
    rng = np.random.default_rng(seed)
    rows = ["sequence,label"]
    for i in range(count):
        label = i % 2
        own = rng.choice(list("GC" if label else "AT"), size=36)
        rows.append("".join(np.where(rng.random(36) < 0.75, own, rng.choice(list("ACGT"), size=36))) + f",{label}")
    path.write_text("\n".join(rows) + "\n")
    return path


def assert_refused(argv: list[str], out: Path, capsys, message: str) -> None:
    """``bioattn argv --out out`` exits 2 with the one line ``error: message`` and creates nothing at ``out``."""
    capsys.readouterr()
    code = bioattn_main([*argv, "--out", str(out)])
    assert code == 2 and capsys.readouterr().err.strip().splitlines() == [f"error: {message}"]
    assert not out.exists()


@pytest.mark.slow
def test_train_with_pretraining_end_to_end_and_resume_after_pretraining_is_exact(tmp_path, capsys):
    data = write_csv(tmp_path / "train.csv", 400, seed=3)
    run = tmp_path / "run"
    flags = ["train", "promoter", "--train", str(data), "--quick", "--epochs", "2", "--seed", "0", "--deterministic",
             "--finetune-mask", "0.2", "--pretrain-epochs", "2"]  # masked fine-tuning batches too: their random choice must resume exactly as well
    assert bioattn_main([*flags, "--out", str(run)]) == 0
    assert f"pretraining the encoder: masked nucleotides ({MASK_PROBABILITY:.0%}) of the" in capsys.readouterr().err
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["training"]["pretraining"]["epochs_run"] == 2
    assert metrics["metrics"]["dev_mcc"] > 0.5
    log = (run / "pretrain" / "train_log.csv").read_text().splitlines()
    assert log[0].startswith("step,epoch,phase,loss") and len(log) > 2
    assert PromoterClassifier.from_pretrained(run).config["embed_dim"] == 32  # the classifier, not the pretraining wrapper
    settings = json.loads((run / "run_config.json").read_text())
    pretraining = json.loads((run / "pretrain" / "run_config.json").read_text())["training"]
    assert settings["training"]["lr"] == FINETUNE_LR and pretraining["lr"] == PRETRAIN_LR  # each stage its own rate
    plain = tmp_path / "plain"  # the same run without pretraining (own files: none unless asked), at the same lr
    assert bioattn_main([*flags[:-2], "--lr", str(FINETUNE_LR), "--out", str(plain)]) == 0
    assert not (plain / "pretrain").exists()
    assert not torch.equal(load_tensors(plain / "model.safetensors")["embedding.weight"],
                           load_tensors(run / "model.safetensors")["embedding.weight"])  # fine-tuning started from it

    # A run stopped after its pretraining (fine-tuning's files gone) resumes to the same model.
    interrupted = tmp_path / "interrupted"
    shutil.copytree(run, interrupted)
    for name in ("checkpoint", "model.safetensors", "config.json", "metrics.json", "train_log.csv", "run_config.json",
                 "summary.md", "training_curve.png", "tensorboard"):
        target = interrupted / name
        shutil.rmtree(target) if target.is_dir() else target.unlink(missing_ok=True)
    assert bioattn_main([*flags, "--out", str(interrupted), "--resume"]) == 0
    expected, got = load_tensors(run / "model.safetensors"), load_tensors(interrupted / "model.safetensors")
    assert expected.keys() == got.keys()
    for name in expected:
        assert torch.equal(expected[name], got[name]), name


@pytest.mark.slow
def test_pretraining_batches_by_length_exactly_when_fine_tuning_does(tmp_path, monkeypatch):
    import bioattn.tasks.promoter.pretrain as pretrain_module

    seen = []

    class Recording(pretrain_module.Trainer):
        def __init__(self, *args, bucket_lengths=None, **kwargs):
            seen.append(bucket_lengths)
            super().__init__(*args, bucket_lengths=bucket_lengths, **kwargs)

    monkeypatch.setattr(pretrain_module, "Trainer", Recording)
    rng = np.random.default_rng(4)
    rows = ["sequence,label"] + [f"{''.join(rng.choice(list('ACGT'), size=int(n)))},{i % 2}"
                                 for i, n in enumerate(rng.integers(20, 40, size=120))]
    data = tmp_path / "varied.csv"
    data.write_text("\n".join(rows) + "\n")
    flags = ["train", "promoter", "--train", str(data), "--quick", "--epochs", "1", "--pretrain-epochs", "1"]
    assert bioattn_main([*flags, "--out", str(tmp_path / "buckets")]) == 0
    assert bioattn_main([*flags, "--no-length-buckets", "--out", str(tmp_path / "shuffled")]) == 0
    assert seen[0] is not None and len(set(seen[0])) > 1  # the training sequences' lengths
    assert seen[1] is None  # --no-length-buckets reaches the pretraining too


def test_defaults_pretrain_the_70_nt_gue_tasks_only_and_fine_tune_them_at_a_lower_rate(tmp_path):
    for task in ("prom_core_all", "prom_core_notata", "prom_core_tata"):
        pretrained = PromoterOptions(out=tmp_path, task=task)
        recipe = TASK_RECIPES[task]
        assert pretrained.pretrain_epochs == recipe.pretrain_epochs > 0 and pretrained.pretrain_mask == recipe.pretrain_mask
        assert default_config(task, pretrained.pretrain_epochs).lr == recipe.finetune_lr < DEFAULTS.lr
    all_tasks = PromoterOptions(out=tmp_path, task="prom_core_all")  # the README's numbers: 12 epochs, 30 %, lr 2e-3, 10 %
    assert (all_tasks.pretrain_epochs, all_tasks.pretrain_mask, default_config("prom_core_all", 12).lr,
            all_tasks.finetune_mask) == (12, 0.3, 2e-3, FINETUNE_MASK) and FINETUNE_MASK == 0.1
    assert quick_options(all_tasks).pretrain_epochs == 2  # --quick stays a smoke test: 2 short epochs of each stage
    for options in (PromoterOptions(out=tmp_path, task="prom_300_tata"), PromoterOptions(out=tmp_path, task="ecoli_sigma70"),
                    PromoterOptions(out=tmp_path, train=Path("x.csv"))):
        assert options.pretrain_epochs == 0 and default_config(options.task, 0).lr == DEFAULTS.lr
        assert options.pretrain_mask == MASK_PROBABILITY and default_config(options.task, 2).lr == FINETUNE_LR
        assert options.finetune_mask == FINETUNE_MASK  # every task masks its fine-tuning batches
    assert PromoterOptions(out=tmp_path, task="prom_core_all", pretrain_epochs=0).pretrain_epochs == 0


def test_negative_pretraining_epochs_exit_2_with_one_line(tmp_path, capsys):
    data = write_csv(tmp_path / "train.csv", 40, seed=3)
    assert_refused(["train", "promoter", "--train", str(data), "--quick", "--pretrain-epochs", "-1"], tmp_path / "run",
                   capsys, "--pretrain-epochs must be >= 0, got -1")


@pytest.mark.slow
def test_pretrain_mask_reaches_the_masking_and_a_bad_fraction_exits_2_with_one_line(tmp_path, capsys, monkeypatch):
    import bioattn.tasks.promoter.pretrain as pretrain_module

    asked = []

    def recording_bert_mask(ids, maskable, probability, *args, **kwargs):
        asked.append(probability)
        return bert_mask(ids, maskable, probability, *args, **kwargs)

    monkeypatch.setattr(pretrain_module, "bert_mask", recording_bert_mask)
    data = write_csv(tmp_path / "train.csv", 120, seed=3)
    flags = ["train", "promoter", "--train", str(data), "--quick", "--epochs", "1", "--pretrain-epochs", "1",
             "--finetune-mask", "0"]  # only the pretraining masks
    assert bioattn_main([*flags, "--pretrain-mask", "0.4", "--out", str(tmp_path / "run")]) == 0
    assert asked and set(asked) == {0.4}
    assert json.loads((tmp_path / "run" / "run_config.json").read_text())["recipe"]["pretrain_mask"] == 0.4
    asked.clear()
    assert bioattn_main([*flags, "--out", str(tmp_path / "default")]) == 0
    assert set(asked) == {MASK_PROBABILITY}  # your own files: the module's default
    for bad in ("0", "1.5"):
        assert_refused([*flags, "--pretrain-mask", bad], tmp_path / f"bad{bad}", capsys,
                       f"--pretrain-mask must be between 0 and 1 (a fraction), got {float(bad)}")


@pytest.mark.slow
def test_finetune_mask_masks_training_batches_only_and_a_bad_fraction_exits_2_with_one_line(tmp_path, capsys, monkeypatch):
    masked_share: dict[bool, list[float]] = {True: [], False: []}  # grad enabled (training) / not (evaluation)
    forward = PromoterClassifier.forward

    def recording_forward(self, ids, padding_mask=None):
        masked_share[torch.is_grad_enabled()].append(float((ids == MASK_ID).sum() / (ids >= MASK_ID).sum()))
        return forward(self, ids, padding_mask)

    monkeypatch.setattr(PromoterClassifier, "forward", recording_forward)
    data = write_csv(tmp_path / "train.csv", 120, seed=3)
    flags = ["train", "promoter", "--train", str(data), "--quick", "--epochs", "1"]
    assert bioattn_main([*flags, "--finetune-mask", "0.5", "--out", str(tmp_path / "run")]) == 0
    assert 0.3 < np.mean(masked_share[True]) < 0.5  # 80 % of the chosen half become [MASK]
    assert masked_share[False] and set(masked_share[False]) == {0.0}  # dev is scored on the sequences as they are
    assert json.loads((tmp_path / "run" / "run_config.json").read_text())["recipe"]["finetune_mask"] == 0.5
    masked_share[True].clear()
    assert bioattn_main([*flags, "--out", str(tmp_path / "default")]) == 0
    assert 0.4 * FINETUNE_MASK < np.mean(masked_share[True]) < 1.2 * FINETUNE_MASK  # the default, your own files too
    masked_share[True].clear()
    assert bioattn_main([*flags, "--finetune-mask", "0", "--out", str(tmp_path / "off")]) == 0
    assert masked_share[True] and set(masked_share[True]) == {0.0}
    for bad in ("-0.1", "1"):
        assert_refused([*flags, "--finetune-mask", bad], tmp_path / f"bad{bad}", capsys,
                       f"--finetune-mask must be at least 0 and below 1 (a fraction), got {float(bad)}")
