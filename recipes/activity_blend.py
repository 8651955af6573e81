"""lentiMPRA WTC11: the 2-fold cross-validation of a deep ActivityRegressor blended with a k-mer ridge, and the
blend of the model trained on both folds (what bioattn/pretrained/lentimpra-wtc11 ships).

    python recipes/activity_blend.py CV_RUN FIT_ALL_RUN OUT_DIR [--data-root DIR] [--deep-weight 0.5]

CV_RUN: a 'bioattn train activity --dataset lentimpra_wtc11' run (fold1/ holds out fold1.tsv and trained on
fold2.tsv, fold2/ the reverse); FIT_ALL_RUN: the same recipe with --fit-all. For each fold model, the k-mer ridge
is fitted on the file that model trained on and the blend is scored on the file it held out, beside the deep model
alone (the run's metrics.json has the same-run k-mer ridge baseline of the same rows); OUT_DIR gets blend.json
and the blended fit-all model (config.json + model.safetensors).
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from bioattn.data.root import resolve_data_root
from bioattn.io import write_json
from bioattn.models.activity import ActivityRegressor
from bioattn.tasks.activity.data import detect_flanks, read_activity_file, read_activity_files, strip_all
from bioattn.tasks.activity.scores import regression_metrics
from bioattn.tasks.activity.train import blend_with_kmer_ridge


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("cv_run", type=Path)
    parser.add_argument("fit_all_run", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--data-root", default=None)
    parser.add_argument("--deep-weight", type=float, default=0.5)
    args = parser.parse_args()
    folder = resolve_data_root(args.data_root) / "activity" / "lentimpra_wtc11"
    files = [folder / "fold1.tsv", folder / "fold2.tsv"]
    splits = [read_activity_file(f) for f in files]
    flanks = detect_flanks(splits[0].sequences + splits[1].sequences)
    splits = [strip_all(s, flanks) for s in splits]
    folds = {}
    for k, (held_out, train) in enumerate([(splits[0], splits[1]), (splits[1], splits[0])], start=1):
        deep = ActivityRegressor.from_pretrained(args.cv_run / f"fold{k}")
        blended = blend_with_kmer_ridge(deep, train, deep_weight=args.deep_weight)
        folds[f"fold{k}"] = {name: regression_metrics(held_out.values, values, held_out.target_names) for name, values in (
            ("blend", blended.predict(held_out.sequences)), ("deep", deep.predict(held_out.sequences)))}
        print(k, {name: round(m["pearson"], 4) for name, m in folds[f"fold{k}"].items()}, flush=True)
    summary = {name: {metric: {"mean": float(np.mean([folds[f][name][metric] for f in folds])),
                               "sd": float(np.std([folds[f][name][metric] for f in folds], ddof=1)), "n": 2}
                      for metric in ("pearson", "spearman", "r2", "mse")} for name in folds["fold1"]}
    everything = strip_all(read_activity_files(files), flanks)
    shipped = blend_with_kmer_ridge(ActivityRegressor.from_pretrained(args.fit_all_run), everything,
                                    deep_weight=args.deep_weight)
    shipped.save_pretrained(args.out)
    write_json(args.out / "blend.json", {"deep_weight": args.deep_weight, "folds": folds, "summary": summary})
    print(json.dumps({name: summary[name]["pearson"] for name in summary}, indent=1))


if __name__ == "__main__":
    main()
