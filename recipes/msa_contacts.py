"""Predict residue–residue contacts from a protein alignment with an axial-attention MSA model.

    python recipes/msa_contacts.py --msa FILE [--pdb FILE --chain ID | --struct-dat FILE] --out RUN_DIR
                                   [--contact-head FILE] [--max-minutes M] [--quick]
    python recipes/msa_contacts.py --all [--data-root DIR] --out RUN_DIR [--max-minutes M] [--quick]

For one family the recipe (1) reads the alignment (A3M, A2M, aligned FASTA, Stockholm, Clustal, PSICOV),
takes a random subsample of at most ``--max-seqs`` rows and their 80%-identity weights; (2) computes
coevolution baselines on that subsample: mutual information + APC, Gaussian DCA (inverse covariance) + APC
and, with ``--coevolution potts`` (the default), a pseudo-likelihood Potts model + APC (CCMpred's objective and
conventions, fitted on every row of the alignment with its 80%-identity weights; minutes on CPU);
(3) trains :class:`~bioattn.models.MSAContactModel` from scratch by masked-token prediction on blocks of
``--rows`` rows sampled by weight (early-stopped on the masked-token loss of held-out rows — never on contacts);
(4) reads its tied row-attention maps (symmetrised, APC, sorted over heads) and feeds them, with the
Potts map (``--coevolution gaussian``: the Gaussian DCA and MI maps; ``none``: nothing else), to the
logistic-regression contact head. The head is fitted
on other families only: ``--all`` fits it leave-one-family-out and writes ``contact_head.json`` (fitted on
every family) for use with ``--contact-head`` on new alignments. Without a head, the scores are the first
coevolution map computed (or, with ``--coevolution none``, the mean attention map).

Writes ``contacts.npy`` (L×L scores), ``contacts.rr`` (CASP RR), ``contact_map.png`` (top-L predictions over
the native map), ``metrics.json`` (long-range P@L/5, P@L/2, P@L of the model, of the baselines computed in the
same run and of the published predictions in the family's ``pred/`` folder), ``features.safetensors``, the
model (``config.json`` + ``model.safetensors``), ``train_log.csv`` and ``training_curve.png``. With ``--all``
each family gets a sub-folder, ``--max-minutes`` applies to each family's training, and ``summary.json`` /
``summary.md`` hold the table; ``--resume`` skips finished families and only computes the coevolution maps a
richer ``--coevolution`` adds. Runs under ``torchrun`` (every rank trains; rank 0 computes baselines and writes).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.utils.data import Dataset

from bioattn.cli import run_user_main
from bioattn.coevolution import apc, gaussian_dca, mi_apc, potts_couplings
from bioattn.data.contacts import ContactTarget, discover_families, load_target, published_predictions, write_rr
from bioattn.explain.figures import plot_contact_map
from bioattn.metrics import precision_at
from bioattn.data import resolve_data_root
from bioattn.data.msa import FORMATS, MSATokenizer, sequence_weights, subsample
from bioattn.errors import UserInputError
from bioattn.io import load_tensors, save_tensors, write_json
from bioattn.models.msa_contact import MSAContactModel, fit_contact_head, logistic_contact_probabilities, masked_lm_loss
from bioattn.training import (
    TrainConfig, Trainer, add_training_args, config_from_args, plot_curves, prepare_run_dir, seed_everything,
)
from bioattn.training.distributed import is_main_process

#: Extra contact-head features per --coevolution choice (maps computed in the same run).
#: With ``potts`` the head reads the Potts map only: adding the Gaussian DCA and MI maps (approximations of the
#: same coupling signal) lowered leave-one-family-out P@L/5 from 0.691 to 0.678 (README, MSA section).
COEVOLUTION_FEATURES = {"none": (), "gaussian": ("gaussian_dca_apc", "mi_apc"), "potts": ("potts_apc",)}
FEATURES_FILE = "features.safetensors"
DEFAULTS = TrainConfig(
    max_epochs=100, batch_size=1, lr=1e-3, weight_decay=0.01, schedule="warmup_cosine", warmup_steps=50,
    max_minutes=5.0, monitor="val_loss", monitor_mode="min", eval_every_steps=50, max_steps_per_epoch=100,
    patience=6,
)
QUICK = dict(max_seqs=256, rows=16, embed_dim=32, heads=2, layers=2, potts_iterations=15, potts_seqs=256, feature_blocks=1)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    data = parser.add_argument_group("data")
    data.add_argument("--msa", type=Path, help="alignment file (.a3m .a2m .fasta .sto .aln; .gz accepted)")
    data.add_argument("--format", choices=FORMATS, default=None, help="alignment format (default: from the file name)")
    data.add_argument("--query", type=Path, default=None, help="FASTA with the query sequence (default: see --pdb, else row 0)")
    data.add_argument("--pdb", type=Path, default=None, help="native structure (PDB or mmCIF) for evaluation")
    data.add_argument("--chain", default=None, help="chain of --pdb (default: the first protein chain)")
    data.add_argument("--struct-dat", type=Path, default=None, help="arDCA *_struct.dat column distances, instead of --pdb")
    data.add_argument("--pred", type=Path, default=None, help="folder of published predictions (default: pred/ beside --msa)")
    data.add_argument("--all", action="store_true", help="every family of msa/coev and msa/pfam under the data root")
    data.add_argument("--families", default=None, help="with --all: comma-separated subset of family names")
    data.add_argument("--data-root", default=None, help="data root for --all (default: $BIOATTN_DATA_ROOT or ../shared/data)")
    data.add_argument("--out", type=Path, required=True, help="run directory")
    model = parser.add_argument_group("model")
    model.add_argument("--embed-dim", type=int, default=64)
    model.add_argument("--heads", type=int, default=4)
    model.add_argument("--layers", type=int, default=4)
    model.add_argument("--dropout", type=float, default=0.1)
    model.add_argument("--rows", type=int, default=32, help="alignment rows per training block (default: %(default)s)")
    model.add_argument("--max-seqs", type=int, default=4096, help="random subsample of the alignment used throughout (default: %(default)s)")
    model.add_argument("--feature-blocks", type=int, default=4, help="row blocks whose attention maps are averaged (default: %(default)s)")
    model.add_argument("--coevolution", choices=tuple(COEVOLUTION_FEATURES), default="potts",
                       help="coevolution map(s) fed to the contact head beside attention: none; gaussian (Gaussian DCA + MI, "
                            "seconds); potts (a pseudo-likelihood Potts model, CCMpred's objective; minutes) (default: %(default)s)")
    model.add_argument("--potts-iterations", type=int, default=50,
                       help="L-BFGS iterations of the Potts model (default: %(default)s, CCMpred's)")
    model.add_argument("--potts-seqs", type=int, default=0,
                       help="random rows of the alignment for the Potts fit; 0: every row, as CCMpred (default: %(default)s)")
    model.add_argument("--potts-minutes", type=float, default=15.0,
                       help="CPU-time budget of the Potts fit, sequence weights included (default: %(default)s)")
    model.add_argument("--contact-head", type=Path, default=None, help="contact_head.json of an --all run, for a new family")
    model.add_argument("--quick", action="store_true", help="tiny settings for a smoke test (seconds)")
    add_training_args(parser, DEFAULTS)
    return parser


class RowBlocks(Dataset):
    """Item i: ``(rows, L)`` tokens of ``rows`` alignment rows drawn without replacement with probability ∝ weight.

    Deterministic in ``(seed, i)``; the masking, done in the loss, varies each time.
    """

    def __init__(self, tokens: torch.Tensor, weights: torch.Tensor, rows: int, size: int, seed: int) -> None:
        self.tokens, self.weights, self.rows, self.size, self.seed = tokens, weights, min(rows, len(tokens)), size, seed

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, index: int) -> torch.Tensor:
        generator = torch.Generator().manual_seed(self.seed * 1_000_003 + index)
        return self.tokens[torch.multinomial(self.weights, self.rows, replacement=False, generator=generator)]


def feature_names(layers: int, heads: int, extra: tuple[str, ...]) -> list[str]:
    """Names of the contact head's inputs: ``layer{l}_head_rank{k}`` (heads sorted per pair), then ``extra``."""
    return [f"layer{layer}_head_rank{rank}" for layer in range(layers) for rank in range(heads)] + list(extra)


def model_feature_names(model: MSAContactModel, extra: tuple[str, ...] | None = None) -> list[str]:
    """:func:`feature_names` of a model (``extra`` defaults to the model's own extra features)."""
    extra = tuple(model.config["extra_contact_features"]) if extra is None else extra
    return feature_names(model.config["num_layers"], model.config["num_heads"], extra)


def baseline_names(args: argparse.Namespace) -> tuple[str, ...]:
    """Coevolution maps a run computes: MI and Gaussian DCA always (cheap baselines), the Potts model on request."""
    return ("mi_apc", "gaussian_dca_apc") + (("potts_apc",) if args.coevolution == "potts" else ())


def training_pool(target: ContactTarget, args: argparse.Namespace, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Tokens ``(n, L)`` of the random subsample (≤ ``--max-seqs`` rows) used throughout, and their 80 %-identity weights."""
    tokens = MSATokenizer().encode(target.msa)
    pool = tokens[subsample(tokens, args.max_seqs, "random", seed=seed)]
    return pool, sequence_weights(pool)


def potts_rows(target: ContactTarget, args: argparse.Namespace, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Tokens ``(n, L)`` of the Potts fit (the whole alignment, or ``--potts-seqs`` random rows) and their 80 %-identity weights."""
    tokens = MSATokenizer().encode(target.msa)
    if args.potts_seqs > 0:
        tokens = tokens[subsample(tokens, args.potts_seqs, "random", seed=seed)]
    return tokens, sequence_weights(tokens)


def coevolution_maps(
    target: ContactTarget, pool: torch.Tensor, weights: torch.Tensor, names: tuple[str, ...], args: argparse.Namespace,
    seed: int, timings: dict[str, float],
) -> dict[str, torch.Tensor]:
    """The APC-corrected ``(L, L)`` maps ``names`` (``mi_apc``, ``gaussian_dca_apc``, ``potts_apc``); CPU seconds into ``timings``.

    MI and Gaussian DCA use the training pool ``(n, L)`` and its ``weights``; the Potts model :func:`potts_rows`.
    """
    maps = {}
    for name in names:
        tick = time.process_time()
        if name == "mi_apc":
            maps[name] = torch.from_numpy(mi_apc(pool, weights)).float()
        elif name == "gaussian_dca_apc":
            maps[name] = apc(gaussian_dca(pool, weights))
        else:
            tokens, row_weights = potts_rows(target, args, seed)
            budget = 60 * args.potts_minutes - (time.process_time() - tick)
            maps[name] = apc(potts_couplings(tokens, row_weights, max_iterations=args.potts_iterations,
                                             max_cpu_seconds=budget, progress=True))
        timings[f"{name.removesuffix('_apc')}_cpu_s"] = time.process_time() - tick
    return maps


def prepare_family(target: ContactTarget, args: argparse.Namespace, config: TrainConfig, run_dir: Path) -> dict[str, Any]:
    """Baselines, model training and pair features of one family; returns its metrics (rank 0) or {}."""
    started_wall, started_cpu = time.monotonic(), time.process_time()
    pool, weights = training_pool(target, args, config.seed)
    length = pool.shape[1]
    is_main = is_main_process()
    timings: dict[str, float] = {}
    maps = coevolution_maps(target, pool, weights, baseline_names(args), args, config.seed, timings) if is_main else {}

    tick = time.process_time()
    generator = torch.Generator().manual_seed(config.seed)
    order = torch.randperm(len(pool), generator=generator)
    held_out = order[: max(1, min(64, len(pool) // 10))] if len(pool) >= 20 else order[:0]
    train_rows = order[len(held_out):]
    validation = pool[held_out][None] if len(held_out) else pool[None]
    extra = COEVOLUTION_FEATURES[args.coevolution]
    model = MSAContactModel(
        max_len=max(length, 1), embed_dim=args.embed_dim, num_heads=args.heads, num_layers=args.layers,
        dropout=args.dropout, extra_contact_features=extra,
    )
    model.contact_head.requires_grad_(False)  # fitted afterwards by logistic regression; frozen so DDP sees no unused parameter
    dataset = RowBlocks(pool[train_rows], weights[train_rows], args.rows, size=(config.max_steps_per_epoch or 100) * config.batch_size, seed=config.seed)

    def evaluate(module: MSAContactModel) -> dict[str, float]:
        return {"val_loss": float(masked_lm_loss(module, validation, generator=torch.Generator().manual_seed(1)))}

    trainer = Trainer(
        model, dataset, config, run_dir, loss_fn=lambda m, batch: masked_lm_loss(m, batch), evaluate=evaluate,
        collate_fn=torch.stack, resume=args.resume, run_info={k: str(v) for k, v in vars(args).items()},
    )
    result = trainer.fit()
    timings["train_cpu_s"] = time.process_time() - tick
    if not is_main:
        return {}
    plot_curves(run_dir)
    model.eval()
    tick = time.process_time()
    blocks = [pool[subsample(pool, 128, "diversity")]]
    blocks += [pool[torch.multinomial(weights, min(128, len(pool)), generator=generator)] for _ in range(args.feature_blocks - 1)]
    attention = torch.stack([model.contact_features(block[None].to(next(model.parameters()).device))[0].cpu() for block in blocks]).mean(0)
    timings["features_cpu_s"] = time.process_time() - tick
    save_tensors(run_dir / FEATURES_FILE, {"attention": attention, **maps})
    model.save_pretrained(run_dir)
    return {
        "family": target.name, "length": length, "depth": target.msa.depth, "sequences_used": len(pool),
        "neff": round(float(weights.sum()), 1), "best_val_loss": result.best_metrics.get("val_loss"),
        "cpu_seconds": {**{k: round(v, 1) for k, v in timings.items()}, "total": round(time.process_time() - started_cpu, 1)},
        "wall_seconds": round(time.monotonic() - started_wall, 1),
    }


def pair_features(run_dir: Path, extra: tuple[str, ...]) -> torch.Tensor:
    """``(L, L, F)``: the saved attention features followed by the ``extra`` maps."""
    saved = load_tensors(run_dir / FEATURES_FILE)
    return torch.cat([saved["attention"]] + [saved[name][..., None] for name in extra], dim=-1)


def score_family(
    target: ContactTarget, run_dir: Path, info: dict[str, Any], extra: tuple[str, ...], head: dict[str, Any] | None,
    variants: dict[str, dict[str, Any]],
) -> dict[str, Any]:
    """Final scores with ``head`` over attention + ``extra`` features (else a fallback), outputs and metrics.json."""
    model = MSAContactModel.from_pretrained(run_dir)
    features = pair_features(run_dir, extra)
    saved = load_tensors(run_dir / FEATURES_FILE)
    if head is not None:
        if tuple(model.config["extra_contact_features"]) != extra:
            model.set_extra_contact_features(extra)
        model.set_contact_head(np.array(head["weight"]), head["bias"])
        model.save_pretrained(run_dir)
        scores = model.contact_probabilities(features).numpy()
        method = f"logistic regression on {', '.join(head['fit_on'])}"
    elif extra:
        scores, method = saved[extra[0]].numpy(), f"{extra[0]} (no contact head given)"
    else:
        scores, method = saved["attention"].mean(-1).numpy(), "mean APC'd tied attention (no contact head given)"
    np.save(run_dir / "contacts.npy", scores.astype(np.float32))
    write_rr(run_dir / "contacts.rr", scores, target.sequence.replace("-", "X"), target=target.name, method="bioattn MSAContactModel")
    plot_contact_map(run_dir / "contact_map.png", scores, target.distances, title=f"{target.name}: top-L contacts (|i-j| ≥ 6) over native")
    metrics = {**info, "method": method}
    if target.distances is not None:
        metrics["model"] = precision_at(scores, target.distances)
        metrics["baselines"] = {name: precision_at(saved[name].numpy(), target.distances) for name in saved if name != "attention"}
        metrics["variants"] = {name: precision_at(v["scores"], target.distances) for name, v in variants.items()}
        if target.predictions_dir is not None:
            metrics["published"] = {
                tool: precision_at(pred, target.distances)
                for tool, pred in published_predictions(target.predictions_dir, len(target.sequence)).items()
            }
    write_json(run_dir / "metrics.json", metrics)
    return metrics


def head_record(weight: np.ndarray, bias: float, names: list[str], fit_on: list[str]) -> dict[str, Any]:
    return {"features": names, "weight": [float(w) for w in weight], "bias": bias, "fit_on": fit_on}


def leave_one_out_heads(families: list[str], run_dirs: dict[str, Path], targets: dict[str, ContactTarget], extra: tuple[str, ...]) -> dict[str, dict]:
    """For each family, a contact head on the attention features + ``extra`` maps, fitted on the other families."""
    features = {name: pair_features(run_dirs[name], extra) for name in families}
    names = model_feature_names(MSAContactModel.from_pretrained(run_dirs[families[0]]), extra)
    heads = {}
    for held_out in families:
        others = [name for name in families if name != held_out]
        weight, bias = fit_contact_head([features[n] for n in others], [targets[n].distances for n in others])
        heads[held_out] = head_record(weight, bias, names, others)
    return heads


def format_table(rows: list[dict[str, Any]]) -> str:
    """Markdown table of long-range P@L/5 / P@L/2 / P@L per family, with the mean."""
    columns = ["model", "attention only", "Potts+APC", "GaussDCA+APC", "MI+APC", "published (best tool)"]
    lines = ["| family | L | N | " + " | ".join(columns) + " |", "|---|---|---|" + "---|" * len(columns)]
    sums: dict[str, list[float]] = {c: [] for c in columns}

    def cell(column: str, values: dict[str, float] | None) -> str:
        if not values:
            return "—"
        sums[column].append(values["P@L/5"])
        return "/".join(f"{values[k]:.2f}" for k in ("P@L/5", "P@L/2", "P@L"))

    for m in rows:
        published = m.get("published") or {}
        best = max(published.items(), key=lambda kv: kv[1]["P@L/5"], default=None)
        cells = [
            cell("model", m.get("model")),
            cell("attention only", m.get("variants", {}).get("attention_only")),
            cell("Potts+APC", m.get("baselines", {}).get("potts_apc")),
            cell("GaussDCA+APC", m.get("baselines", {}).get("gaussian_dca_apc")),
            cell("MI+APC", m.get("baselines", {}).get("mi_apc")),
            (f"{best[0]} " if best else "") + cell("published (best tool)", best[1] if best else None),
        ]
        lines.append(f"| {m['family']} | {m['length']} | {m['depth']} | " + " | ".join(cells) + " |")
    means = [f"{np.mean(sums[c]):.3f} (P@L/5, {len(sums[c])} fam.)" if sums[c] else "—" for c in columns]
    lines.append("| **mean** | | | " + " | ".join(means) + " |")
    return "\n".join(lines)


def add_missing_maps(target: ContactTarget, run_dir: Path, info: dict[str, Any], args: argparse.Namespace, seed: int) -> None:
    """Compute the coevolution maps of ``--coevolution`` that a resumed family's features file lacks (no retraining)."""
    saved = load_tensors(run_dir / FEATURES_FILE)
    missing = tuple(name for name in baseline_names(args) if name not in saved)
    if not missing:
        return
    pool, weights = training_pool(target, args, seed)
    timings: dict[str, float] = {}
    save_tensors(run_dir / FEATURES_FILE, {**saved, **coevolution_maps(target, pool, weights, missing, args, seed, timings)})
    info["cpu_seconds"] = {**info["cpu_seconds"], **{k: round(v, 1) for k, v in timings.items()}}
    info["cpu_seconds"]["total"] = round(info["cpu_seconds"]["total"] + sum(timings.values()), 1)


def run_all(args: argparse.Namespace, config: TrainConfig) -> int:
    root = resolve_data_root(args.data_root)
    found = discover_families(root)
    if not found:
        raise UserInputError(f"{root}: no families under msa/coev or msa/pfam")
    names = list(found)
    if args.families:
        names = [n.strip() for n in args.families.split(",") if n.strip()]
        unknown = [n for n in names if n not in found]
        if unknown:
            raise UserInputError(f"--families: unknown {', '.join(unknown)}; available: {', '.join(found)}")
    out = prepare_run_dir(args.out, resume=args.resume, overwrite=args.overwrite)
    targets = {name: load_target(**found[name]) for name in names}
    run_dirs = {name: out / name for name in names}
    infos: dict[str, dict] = {}
    for name in names:
        print(f"== {name}: {targets[name].msa.depth} sequences × {targets[name].msa.length} columns", flush=True)
        info_file = run_dirs[name] / "prepare.json"
        if args.resume and info_file.is_file() and (run_dirs[name] / FEATURES_FILE).is_file():
            infos[name] = json.loads(info_file.read_text())
            if is_main_process():  # a resumed run asking for more coevolution maps computes only those
                add_missing_maps(targets[name], run_dirs[name], infos[name], args, config.seed)
                write_json(info_file, infos[name])
            continue
        run_dirs[name].mkdir(parents=True, exist_ok=True)
        seed_everything(config.seed)
        infos[name] = prepare_family(targets[name], args, config, run_dirs[name])
        if is_main_process():
            write_json(info_file, infos[name])
    if not is_main_process():
        return 0
    labelled = [n for n in names if targets[n].distances is not None]
    extra = COEVOLUTION_FEATURES[args.coevolution]
    heads = leave_one_out_heads(labelled, run_dirs, targets, extra) if len(labelled) > 1 else {}
    attention_heads = leave_one_out_heads(labelled, run_dirs, targets, ()) if extra and len(labelled) > 1 else heads
    rows = []
    for name in names:
        variants = {}
        if name in attention_heads:
            head = attention_heads[name]
            scores = logistic_contact_probabilities(pair_features(run_dirs[name], ()), torch.tensor(head["weight"]), head["bias"])
            variants["attention_only"] = {"scores": scores.numpy()}
        rows.append(score_family(targets[name], run_dirs[name], infos[name], extra, heads.get(name), variants))
    if len(labelled) > 0:
        features = [pair_features(run_dirs[n], extra) for n in labelled]
        weight, bias = fit_contact_head(features, [targets[n].distances for n in labelled])
        record = head_record(weight, bias, model_feature_names(MSAContactModel.from_pretrained(run_dirs[labelled[0]]), extra), labelled)
        write_json(out / "contact_head.json", record)
    table = format_table(rows)
    print(table)
    write_json(out / "summary.json", {"families": rows})
    (out / "summary.md").write_text("Long-range (|i-j| ≥ 24) precision P@L/5 / P@L/2 / P@L; contact head fitted leave-one-family-out.\n\n" + table + "\n")
    return 0


def run_one(args: argparse.Namespace, config: TrainConfig) -> int:
    if args.msa is None:
        raise UserInputError("give --msa FILE (or --all)")
    predictions = args.pred if args.pred is not None else (args.msa.parent / "pred" if (args.msa.parent / "pred").is_dir() else None)
    target = load_target(args.msa, fmt=args.format, query_fasta=args.query, pdb=args.pdb, chain=args.chain,
                         struct_dat=args.struct_dat, predictions_dir=predictions)
    head = None
    if args.contact_head is not None:
        try:
            head = json.loads(args.contact_head.read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise UserInputError(f"{args.contact_head}: not a readable contact_head.json ({exc})") from exc
        expected = feature_names(args.layers, args.heads, COEVOLUTION_FEATURES[args.coevolution])
        if not isinstance(head, dict) or head.get("features") != expected:
            raise UserInputError(f"{args.contact_head}: fitted on other features than this model's {len(expected)} "
                                 "(use the --layers, --heads and --coevolution of the run that wrote it)")
    out = prepare_run_dir(args.out, resume=args.resume, overwrite=args.overwrite)
    info = prepare_family(target, args, config, out)
    if not is_main_process():
        return 0
    metrics = score_family(target, out, info, COEVOLUTION_FEATURES[args.coevolution], head, {})
    print(format_table([metrics]))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.quick:
        for key, value in QUICK.items():
            setattr(args, key, value)
        if args.max_minutes is None or args.max_minutes == DEFAULTS.max_minutes:
            args.max_minutes = 0.2
    config = config_from_args(args, DEFAULTS)
    if args.quick:
        config.max_steps_per_epoch, config.max_epochs, config.eval_every_steps, config.warmup_steps = 10, 2, 10, 2
    if args.all:
        return run_all(args, config)
    return run_one(args, config)


if __name__ == "__main__":
    sys.exit(run_user_main(main))
