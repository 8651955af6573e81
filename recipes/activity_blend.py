"""lentiMPRA WTC11: blend already-trained deep ActivityRegressor runs the way `bioattn train activity` now does
(a ridge on known-motif scores, the deep weight chosen on each model's validation rows), score the 2-fold
cross-validation beside the same-run baselines, and blend the model trained on both folds (what
bioattn/pretrained/lentimpra-wtc11 ships).

    python recipes/activity_blend.py CV_RUN FIT_ALL_RUN OUT_DIR [--data-root DIR] [--blend motifs|kmers]
                                     [--deep-weight auto|W]

CV_RUN: a 'bioattn train activity --dataset lentimpra_wtc11 --blend none' run (fold1/ holds out fold1.tsv and
trained on fold2.tsv, fold2/ the reverse); FIT_ALL_RUN: the same recipe with --fit-all. Each fold goes through the
library's own steps (blend_member, score_member) with the fold's deep model in place of a new training: the
numbers are those the default `bioattn train activity --dataset lentimpra_wtc11` gives with these deep models.
OUT_DIR gets blend.json (per fold and mean ± sd: the blend, the deep model alone and every baseline) and the
blended fit-all model (config.json + model.safetensors).
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from bioattn.io import write_json
from bioattn.metrics import mean_std
from bioattn.models.activity import ActivityRegressor
from bioattn.tasks.activity.train import ActivityOptions, blend_member, load_data, score_member
from bioattn.tasks.activity.data import file_folds
from bioattn.tasks.driver import cv_members


def weight(text: str) -> float | None:
    return None if text == "auto" else float(text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("cv_run", type=Path)
    parser.add_argument("fit_all_run", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--data-root", default=None)
    parser.add_argument("--blend", choices=["motifs", "kmers"], default="motifs")
    parser.add_argument("--deep-weight", type=weight, default=None)
    args = parser.parse_args()
    options = ActivityOptions(dataset="lentimpra_wtc11", out=args.out, data_root=args.data_root, blend=args.blend,
                              deep_weight=args.deep_weight)
    data = load_data(options)
    folds, chosen = {}, {}
    for member in cv_members(args.out, file_folds(data.pool.file_index)):
        train, held_out = data.pool.subset(member.train_index), data.pool.subset(member.held_out_index)
        features = (data.motif_features("pool", member.train_index), data.motif_features("pool", member.held_out_index))
        deep = ActivityRegressor.from_pretrained(args.cv_run / member.dir_name).eval()
        blended, info = blend_member(options, data, deep, train, options.seed, features[0])
        scores, _ = score_member(blended, data, train, held_out, deep=deep, motif_features=features)
        folds[member.dir_name] = {name: s for name, s in scores.items()}
        chosen[member.dir_name] = info
        print(member.dir_name, {name: round(s["pearson"], 4) for name, s in scores.items()}, info.get("deep_weight"),
              flush=True)
    summary = {name: mean_std([folds[f][name] for f in folds]) for name in folds["fold1"]}
    deep_all = ActivityRegressor.from_pretrained(args.fit_all_run).eval()
    shipped, shipped_info = blend_member(options, data, deep_all, data.pool, options.seed,
                                         data.motif_features("pool"))
    shipped.save_pretrained(args.out)
    write_json(args.out / "blend.json", {"blend": args.blend, "deep_weight": args.deep_weight or "auto",
                                         "folds": folds, "weights": chosen, "summary": summary,
                                         "shipped": shipped_info})
    print(json.dumps({name: summary[name]["pearson"] for name in summary}, indent=1))


if __name__ == "__main__":
    main()
