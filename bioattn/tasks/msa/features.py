"""What the contact head reads for one alignment (:func:`prepare_family`): coevolution maps and attention features."""
from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import torch
from torch.utils.data import Dataset

from bioattn.coevolution import apc, gaussian_dca, mi_apc, potts_couplings
from bioattn.data.contacts import ContactTarget
from bioattn.data.msa import MSATokenizer, sequence_weights, subsample
from bioattn.errors import UserInputError
from bioattn.io import load_tensors, save_tensors
from bioattn.models.factored_attention import LR_SCHEDULES, fit_factored_attention
from bioattn.models.msa_contact import MSAContactModel, masked_lm_loss
from bioattn.models.registry import read_config, resolve_model_dir
from bioattn.tasks.common import Recipe, TaskOptions, check_model_options, fit_timed
from bioattn.tasks.msa.head import (
    COEVOLUTION_FEATURES, COEVOLUTION_MAPS, ESM_MSA_MAP, FACTORED_ATTENTION_MAP, attention_feature_names, feature_names,
)
from bioattn.training import TrainConfig, Trainer, plot_curves
from bioattn.distributed import is_main_process

FEATURES_FILE = "features.safetensors"
#: The per-family contact model's :class:`~bioattn.tasks.common.Recipe` (``bioattn train|predict msa``).
RECIPE = Recipe(TrainConfig(
    max_epochs=100, batch_size=1, lr=1e-3, weight_decay=0.01, schedule="warmup_cosine", warmup_steps=50,
    max_minutes=5.0, monitor="val_loss", monitor_mode="min", eval_every_steps=50, max_steps_per_epoch=100, patience=6,
), "one axial model per family, masked-residue loss on held-out rows, 5 wall-minutes")
DEFAULTS = RECIPE.train_config
#: ``--quick``: tiny settings for a smoke test (seconds); factored attention in few large constant steps.
QUICK = dict(max_seqs=256, rows=16, embed_dim=32, heads=2, layers=2, potts_iterations=15, potts_seqs=256, feature_blocks=1,
             factored_heads=4, factored_dim=8, factored_steps=30, factored_lr=0.1, factored_schedule="constant")
QUICK_MAX_MINUTES = 0.2
#: The :class:`~bioattn.tasks.common.TaskOptions` fields that say where and how to run, not what is computed.
RUN_FIELDS = ("out", "data_root", "quick", "cv", "cv_repeats", "resume", "overwrite")


def check_no_cv(options: TaskOptions, command: str) -> None:
    """Refuse ``cv`` / ``cv_repeats`` (a family is one example) with a :class:`UserInputError` naming ``command``."""
    if options.cv is not None or options.cv_repeats != 1:
        raise UserInputError(f"{command} has no --cv (an alignment is one family, not a set of examples to fold); "
                             "use --seeds for an ensemble")


@dataclass(frozen=True, kw_only=True)
class MSAOptions(TaskOptions):
    """Everything of a contact run besides the input files and the :class:`TrainConfig` (keyword-only; the fields
    are the ``train msa`` flags of the same names). ``out`` is optional; ``cv`` must stay unset."""

    out: Path | None = None  # type: ignore[assignment]
    embed_dim: int = 64
    heads: int = 4
    layers: int = 4
    dropout: float = 0.1
    rows: int = 32
    max_seqs: int = 4096
    feature_blocks: int = 4
    coevolution: str = "potts"
    potts_iterations: int = 50
    potts_seqs: int = 0
    potts_minutes: float = 15.0
    factored_heads: int = 32
    factored_dim: int = 32
    factored_steps: int = 1000
    factored_lr: float = 0.02
    factored_schedule: str = "cosine"
    factored_minutes: float = 18.0
    init_from: str | None = None
    finetune: bool = True
    esm_weights: str | None = None
    esm_max_rows: int = 256

    def __post_init__(self) -> None:
        check_no_cv(self, "train msa")
        if self.coevolution not in COEVOLUTION_FEATURES:
            raise UserInputError(f"--coevolution must be one of {', '.join(COEVOLUTION_FEATURES)}, got {self.coevolution!r}")
        check_model_options(self, ("embed_dim", "heads", "layers", "rows", "max_seqs", "feature_blocks",
                                   "potts_iterations", "factored_heads", "factored_dim", "factored_steps"))
        if self.potts_seqs < 0 or self.potts_minutes <= 0 or self.factored_minutes <= 0 or self.factored_lr <= 0:
            raise UserInputError("--potts-seqs must be >= 0, --potts-minutes, --factored-minutes and --factored-lr > 0")
        if self.factored_schedule not in LR_SCHEDULES:
            raise UserInputError(f"--factored-schedule must be one of {', '.join(LR_SCHEDULES)}, got {self.factored_schedule!r}")
        if not self.finetune and self.init_from is None:
            raise UserInputError("--no-finetune reads a pretrained model's attention: give --init-from NAME_OR_RUN_DIR")
        self.check_run_options()
        if self.esm_max_rows < 1:
            raise UserInputError(f"--esm-max-rows must be >= 1, got {self.esm_max_rows}")

    @property
    def extra_features(self) -> tuple[str, ...]:
        """The coevolution maps the contact head reads beside attention."""
        return COEVOLUTION_FEATURES[self.coevolution]

    @property
    def baseline_maps(self) -> tuple[str, ...]:
        """Coevolution maps a training run computes: MI and Gaussian DCA always (cheap baselines), Potts on request."""
        return ("mi_apc", "gaussian_dca_apc") + (("potts_apc",) if self.coevolution == "potts" else ())

    @property
    def model_features(self) -> list[str]:
        """Names of the pair features of a model built with these options."""
        return feature_names(self.layers, self.heads, self.extra_features)

    def quick_sizes(self) -> "MSAOptions":
        """These options with the ``--quick`` sizes (:data:`QUICK`)."""
        return dataclasses.replace(self, **QUICK, quick=True)

    def settings(self) -> dict[str, Any]:
        """The options that determine the numbers (recorded in ``contact_head.json``): all but :data:`RUN_FIELDS`."""
        return {k: v for k, v in dataclasses.asdict(self).items() if k not in RUN_FIELDS}


def quick_config(config: TrainConfig) -> TrainConfig:
    """``config`` with ``--quick`` training: 2 epochs of 10 steps."""
    max_minutes = QUICK_MAX_MINUTES if config.max_minutes in (None, DEFAULTS.max_minutes) else config.max_minutes
    return dataclasses.replace(config, max_steps_per_epoch=10, max_epochs=2, eval_every_steps=10, warmup_steps=2,
                               max_minutes=max_minutes)


class RowBlocks(Dataset):
    """Item i: ``(rows, L)`` tokens of ``rows`` rows drawn by weight without replacement (deterministic in seed, i)."""

    def __init__(self, tokens: torch.Tensor, weights: torch.Tensor, rows: int, size: int, seed: int) -> None:
        self.tokens, self.weights, self.rows, self.size, self.seed = tokens, weights, min(rows, len(tokens)), size, seed

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, index: int) -> torch.Tensor:
        generator = torch.Generator().manual_seed(self.seed * 1_000_003 + index)
        return self.tokens[torch.multinomial(self.weights, self.rows, replacement=False, generator=generator)]


def training_pool(target: ContactTarget, options: MSAOptions, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Tokens ``(n, L)`` of the random subsample (≤ ``max_seqs`` rows, query first) and their weights ``(n,)``."""
    tokens = MSATokenizer().encode(target.msa)
    pool = tokens[subsample(tokens, options.max_seqs, "random", seed=seed)]
    return pool, sequence_weights(pool)


def potts_rows(target: ContactTarget, options: MSAOptions, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Tokens ``(n, L)`` of the Potts fit (every row, or ``potts_seqs`` random rows) and their weights."""
    tokens = MSATokenizer().encode(target.msa)
    if options.potts_seqs > 0:
        tokens = tokens[subsample(tokens, options.potts_seqs, "random", seed=seed)]
    return tokens, sequence_weights(tokens)


def factored_attention_map(target: ContactTarget, options: MSAOptions, seed: int) -> torch.Tensor:
    """``(L, L)`` APC map of :class:`~bioattn.models.factored_attention.FactoredAttention` fitted on every row."""
    tick = time.process_time()
    tokens = MSATokenizer().encode(target.msa)
    weights = sequence_weights(tokens)
    budget = 60 * options.factored_minutes - (time.process_time() - tick)
    model = fit_factored_attention(tokens, weights, num_heads=options.factored_heads, head_dim=options.factored_dim,
                                   steps=options.factored_steps, lr=options.factored_lr, lr_schedule=options.factored_schedule,
                                   max_cpu_seconds=budget, seed=seed, progress=True)
    return model.contact_map()


def coevolution_maps(target: ContactTarget, pool: torch.Tensor, weights: torch.Tensor, names: Sequence[str],
                     options: MSAOptions, seed: int, timings: dict[str, float]) -> dict[str, torch.Tensor]:
    """The APC-corrected ``(L, L)`` maps ``names`` (MI, Gaussian DCA on ``pool``); CPU seconds into ``timings``."""
    maps = {}
    for name in names:
        tick = time.process_time()
        if name == "mi_apc":
            maps[name] = torch.from_numpy(mi_apc(pool, weights)).float()
        elif name == "gaussian_dca_apc":
            maps[name] = apc(gaussian_dca(pool, weights))
        elif name == "potts_apc":
            tokens, row_weights = potts_rows(target, options, seed)
            budget = 60 * options.potts_minutes - (time.process_time() - tick)
            maps[name] = apc(potts_couplings(tokens, row_weights, max_iterations=options.potts_iterations,
                                             max_cpu_seconds=budget, progress=True))
        else:
            raise ValueError(f"unknown coevolution map {name!r}; known: {', '.join(COEVOLUTION_MAPS)}")
        timings[f"{name.removesuffix('_apc')}_cpu_s"] = time.process_time() - tick
    return maps


def resolve_sizes(options: MSAOptions) -> MSAOptions:
    """``options`` with the ``--quick`` sizes when ``options.quick`` and, with ``init_from``, the pretrained size."""
    if options.quick:
        options = options.quick_sizes()
    if options.init_from is not None:
        options = dataclasses.replace(options, **pretrained_size(options.init_from))
    return options


def pretrained_size(init_from: str) -> dict[str, Any]:
    """``embed_dim``, ``heads``, ``layers``, ``dropout`` of the :class:`MSAContactModel` saved in ``init_from``."""
    config = read_config(resolve_model_dir(init_from))
    if config.get("model_type") != MSAContactModel.__name__:
        raise UserInputError(f"--init-from {init_from}: holds a {config.get('model_type')}, not an {MSAContactModel.__name__}")
    return {"embed_dim": config["embed_dim"], "heads": config["num_heads"], "layers": config["num_layers"],
            "dropout": config["dropout"]}


def initial_model(length: int, options: MSAOptions) -> MSAContactModel:
    """A fresh model of ``options``' size for ``length`` columns, or the pretrained ``options.init_from``."""
    if options.init_from is None:
        return MSAContactModel(max_len=max(length, 1), embed_dim=options.embed_dim, num_heads=options.heads,
                               num_layers=options.layers, dropout=options.dropout,
                               extra_contact_features=options.extra_features)
    model = MSAContactModel.from_pretrained(options.init_from)
    if length > model.config["max_len"]:
        raise UserInputError(f"--init-from {options.init_from}: takes at most {model.config['max_len']} columns, "
                             f"the alignment has {length}")
    model.set_extra_contact_features(options.extra_features)
    return model.train()


def train_model(pool: torch.Tensor, weights: torch.Tensor, options: MSAOptions, config: TrainConfig,
                run_dir: Path) -> tuple[MSAContactModel, dict[str, Any]]:
    """Train :class:`MSAContactModel` by masked-token prediction on row blocks of ``pool (n, L)``, early-stopped on
    held-out rows; returns the best model (eval mode) and the training summary with ``best_val_loss``."""
    generator = torch.Generator().manual_seed(config.seed)
    order = torch.randperm(len(pool), generator=generator)
    held_out = order[: max(1, min(64, len(pool) // 10))] if len(pool) >= 20 else order[:0]
    train_rows = order[len(held_out):]
    validation = pool[held_out][None] if len(held_out) else pool[None]
    model = initial_model(pool.shape[1], options)
    model.contact_head.requires_grad_(False)  # fitted afterwards by logistic regression; frozen so DDP sees no unused parameter
    size = (config.max_steps_per_epoch or 100) * config.batch_size
    dataset = RowBlocks(pool[train_rows], weights[train_rows], options.rows, size=size, seed=config.seed)

    def evaluate(module: MSAContactModel) -> dict[str, float]:
        return {"val_loss": float(masked_lm_loss(module, validation, generator=torch.Generator().manual_seed(1)))}

    if not options.finetune:
        with torch.no_grad():
            held_out_loss = evaluate(model.eval())["val_loss"]
        return model, {"stop_reason": "not fine-tuned (--no-finetune)", "best_val_loss": held_out_loss}
    trainer = Trainer(model, dataset, config, run_dir, loss_fn=lambda m, batch: masked_lm_loss(m, batch),
                      evaluate=evaluate, collate_fn=torch.stack, resume=options.resume, run_info=options.settings())
    result, summary = fit_timed(trainer)
    return model.eval(), {**summary, "best_val_loss": result.best_metrics.get("val_loss")}


@torch.no_grad()
def attention_features(model: MSAContactModel, pool: torch.Tensor, weights: torch.Tensor, blocks: int, seed: int) -> dict[str, torch.Tensor]:
    """The model's named attention features ``(L, L)`` averaged over ``blocks`` blocks of ≤ 128 rows of ``pool``."""
    generator = torch.Generator().manual_seed(seed)
    rows = [pool[subsample(pool, 128, "diversity")]]
    rows += [pool[torch.multinomial(weights, min(128, len(pool)), generator=generator)] for _ in range(blocks - 1)]
    device = next(model.parameters()).device
    stacked = torch.stack([model.contact_features(block[None].to(device))[0].cpu() for block in rows]).mean(0)
    names = attention_feature_names(model.config["num_layers"], model.config["num_heads"])
    return {name: stacked[..., index] for index, name in enumerate(names)}


def esm_msa_map(target: ContactTarget, options: MSAOptions, config: TrainConfig) -> torch.Tensor:
    """The MSA Transformer's ``(L, L)`` contact log-odds on ``target`` with the user's ``options.esm_weights``."""
    from bioattn.tasks.msa.esm import WEIGHTS_HELP, esm_msa_prediction, load_msa_transformer
    from bioattn.distributed import resolve_device
    if options.esm_weights is None:
        raise UserInputError(f"the contact head reads {ESM_MSA_MAP}, the MSA Transformer's map: give --weights. {WEIGHTS_HELP}")
    model = load_msa_transformer(options.esm_weights, resolve_device(config.device))
    return esm_msa_prediction(model, target, options.esm_max_rows).logits


def prepare_family(target: ContactTarget, options: MSAOptions, config: TrainConfig, run_dir: Path, *,
                   maps: Sequence[str], with_model: bool = True, factored: bool = False,
                   esm: bool = False) -> dict[str, Any]:
    """Coevolution ``maps`` and, as asked, the factored-attention map, the MSA Transformer's map and the trained
    model's attention features of one family, saved in ``run_dir``; returns its facts and timings ({} off rank 0)."""
    started_wall, started_cpu = time.monotonic(), time.process_time()
    pool, weights = training_pool(target, options, config.seed)
    is_main = is_main_process()
    timings: dict[str, float] = {}
    features = coevolution_maps(target, pool, weights, maps, options, config.seed, timings) if is_main and maps else {}
    if factored and is_main:
        tick = time.process_time()
        features[FACTORED_ATTENTION_MAP] = factored_attention_map(target, options, config.seed)
        timings["factored_attention_cpu_s"] = time.process_time() - tick
    if esm and is_main:
        tick = time.process_time()
        features[ESM_MSA_MAP] = esm_msa_map(target, options, config)
        timings["esm_msa_cpu_s"] = time.process_time() - tick
    info: dict[str, Any] = {"family": target.name, "length": pool.shape[1], "depth": target.msa.depth,
                            "sequences_used": len(pool), "neff": round(float(weights.sum()), 1)}
    if with_model:
        tick = time.process_time()
        model, training = train_model(pool, weights, options, config, run_dir)
        timings["train_cpu_s"] = time.process_time() - tick
        if not is_main:
            return {}
        if options.finetune:
            plot_curves(run_dir)
        tick = time.process_time()
        features.update(attention_features(model, pool, weights, options.feature_blocks, config.seed))
        timings["features_cpu_s"] = time.process_time() - tick
        model.save_pretrained(run_dir)
        info.update(best_val_loss=training["best_val_loss"], training=training)
    if not is_main:
        return {}
    save_tensors(run_dir / FEATURES_FILE, features)
    info["cpu_seconds"] = {**{k: round(v, 1) for k, v in timings.items()}, "total": round(time.process_time() - started_cpu, 1)}
    info["wall_seconds"] = round(time.monotonic() - started_wall, 1)
    return info


def load_features(run_dir: Path) -> dict[str, torch.Tensor]:
    """The named ``(L, L)`` pair features a run saved."""
    return load_tensors(run_dir / FEATURES_FILE)


