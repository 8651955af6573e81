"""The contact methods of ``bioattn predict msa`` side by side on every bundled family (``--compare-methods``),
the combined head chosen and fitted on the *other* families for each family (nested leave-one-family-out)."""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bioattn.data.contacts import published_predictions
from bioattn.io import write_json, write_text
from bioattn.metrics import precision_at
from bioattn.report import MISSING, format_table
from bioattn.tasks.msa.train import PREPARE_FILE, family_targets, finished_family
from bioattn.tasks.msa.features import MSAOptions, load_features, prepare_family
from bioattn.tasks.msa.head import ESM_MSA_MAP, FACTORED_ATTENTION_MAP, fit_head, head_precision, select_head
from bioattn.training import TrainConfig, seed_everything
from bioattn.distributed import is_main_process

__all__ = ["COMBINED_FEATURES", "compare_methods", "comparison_table"]

#: The maps the combined head chooses from, in tie-break order.
COMBINED_FEATURES = (FACTORED_ATTENTION_MAP, "potts_apc")


def compare_methods(data_root: Path, out: Path, options: MSAOptions, config: TrainConfig,
                    families: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """Every family of the data root (or ``families``): the maps, the combined head, the table and the heads."""
    out, targets = family_targets(data_root, out, options, families)
    esm = options.esm_weights is not None
    candidates = COMBINED_FEATURES + ((ESM_MSA_MAP,) if esm else ())
    infos: dict[str, dict] = {}
    for name, target in targets.items():
        run_dir = out / name
        if (done := finished_family(run_dir, options)) is not None:
            infos[name] = done
            continue
        if is_main_process():  # once, not once per torchrun process
            print(f"== {name}: {target.msa.depth} sequences × {target.msa.length} columns", flush=True)
        run_dir.mkdir(parents=True, exist_ok=True)
        seed_everything(config.seed)
        infos[name] = prepare_family(target, options, config, run_dir, maps=("mi_apc", "potts_apc"), with_model=False,
                                     factored=True, esm=esm)
        write_json(run_dir / PREPARE_FILE, infos[name])
    features = {name: load_features(out / name) for name in targets}
    labelled = [name for name, target in targets.items() if target.distances is not None]
    distances = {name: targets[name].distances for name in labelled}
    rows = []
    for name in labelled:
        maps = features[name]
        row: dict[str, Any] = {**infos[name], "maps": {
            key: precision_at(maps[key].numpy(), distances[name]) for key in (*candidates, "mi_apc")}}
        others = [f for f in labelled if f != name]
        if len(others) > 1:
            head = select_head({f: features[f] for f in others}, {f: distances[f] for f in others}, candidates)
            row["combined"] = {"features": list(head.features), "P@L/5": head_precision(head, maps, distances[name])}
        if targets[name].predictions_dir is not None:
            row["published"] = {tool: precision_at(scores, distances[name]) for tool, scores in
                                published_predictions(targets[name].predictions_dir, len(targets[name].sequence)).items()}
        rows.append(row)
    if len(labelled) > 1:
        heads = {"attention": [FACTORED_ATTENTION_MAP], "potts": ["potts_apc"], **({"esm-msa": [ESM_MSA_MAP]} if esm else {})}
        settings = {**options.settings(), "seed": config.seed}
        for method, names in heads.items():
            fit_head({f: features[f] for f in labelled}, distances, names, settings).save(out / f"contact_head_{method}.json")
        select_head({f: features[f] for f in labelled}, distances, candidates, settings).save(
            out / "contact_head_combined.json")
    table = comparison_table(rows)
    write_json(out / "summary.json", {"families": rows, "data_root": str(data_root), "options": options.settings()})
    write_text(out / "summary.md", table + "\n")
    return rows


def comparison_table(rows: Sequence[Mapping[str, Any]]) -> str:
    """Markdown table of long-range P@L/5 per family and method, with the means and CPU minutes."""
    columns = {
        "attention only (factored)": lambda r: r["maps"][FACTORED_ATTENTION_MAP]["P@L/5"],
        "Potts+APC": lambda r: r["maps"]["potts_apc"]["P@L/5"],
        "MSA Transformer (your weights)": lambda r: r["maps"].get(ESM_MSA_MAP, {}).get("P@L/5"),
        "combined (LOFO head)": lambda r: r.get("combined", {}).get("P@L/5"),
        "MI+APC": lambda r: r["maps"]["mi_apc"]["P@L/5"],
        "CCMpred (published)": lambda r: next((v["P@L/5"] for k, v in r.get("published", {}).items() if k.startswith("ccmpred")), None),
    }
    if not any(ESM_MSA_MAP in row["maps"] for row in rows):
        del columns["MSA Transformer (your weights)"]
    body, sums = [], {column: [] for column in columns}
    for row in rows:
        cells = []
        for column, pick in columns.items():
            value = pick(row)
            if value is not None:
                sums[column].append(value)
            cells.append(MISSING if value is None else f"{value:.2f}")
        cpu = row.get("cpu_seconds", {})
        minutes = "/".join(f"{cpu[k] / 60:.1f}" if k in cpu else MISSING for k in ("factored_attention_cpu_s", "potts_cpu_s"))
        body.append([row["family"], row["length"], row["depth"], *cells, minutes])
    means = [f"{np.mean(values):.3f} ({len(values)} fam.)" if values else MISSING for values in sums.values()]
    body.append(["**mean**", "", "", *means, ""])
    return format_table(["family", "L", "N", *columns, "CPU-min (attention / Potts)"], body,
                        title="Long-range (|i-j| ≥ 24) P@L/5; combined head chosen and fitted leave-one-family-out")
