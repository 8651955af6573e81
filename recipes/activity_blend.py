"""Blend already-trained deep ActivityRegressor fold models the way `bioattn train activity` does and score the
file-fold cross-validation beside the same-run baselines: the numbers the default command gives with these deep
models, without training them again (the deep models of a bundled dataset may come from a GPU run).

    python recipes/activity_blend.py CV_RUN OUT_DIR [--dataset lentimpra_wtc11] [--data-root DIR]
                                     [--blend auto|motifs|kmers] [--deep-weight auto|W] [--fit-all-run RUN]

CV_RUN: a `bioattn train activity --dataset D --blend none` run (its `fold<k>/` deep models; fold k holds out the
k-th file of each set). Each fold goes through the library's own steps (`blend_member` with its parts,
`score_member`), then the run keeps the blend or its best part on the folds' held-out scores (`choose_kept`), as
`train activity` does. OUT_DIR gets `blend.json` (per fold and mean ± sd: the saved model, the blend, the deep model
alone, each part and baseline; per output too) and the kept model of each fold as a CV ensemble (`fold<k>/` and
`config.json`), a model directory every `bioattn predict|explain` command reads. With `--fit-all-run` (the same
recipe with `--fit-all`), the kept recipe applied to that deep model is saved in `OUT_DIR/fit_all/`.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from bioattn.io import write_json
from bioattn.metrics import mean_std
from bioattn.models.activity import ActivityRegressor
from bioattn.tasks.activity.branches import BLEND_PARTS, blend_parts, choose_kept
from bioattn.tasks.activity.data import element_groups, file_folds
from bioattn.tasks.activity.train import (
    CANDIDATE_NAMES,
    ActivityOptions,
    blend_member,
    load_data,
    score_member,
    tokens_of,
)
from bioattn.tasks.driver import cv_members, save_ensemble


def weight(text: str) -> float | None:
    return None if text == "auto" else float(text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("cv_run", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--dataset", default="lentimpra_wtc11")
    parser.add_argument("--data-root", default=None)
    parser.add_argument("--blend", choices=["auto", "motifs", "kmers"], default="auto")
    parser.add_argument("--deep-weight", type=weight, default=None)
    parser.add_argument("--fit-all-run", type=Path, default=None)
    args = parser.parse_args()
    options = ActivityOptions(dataset=args.dataset, out=args.out, data_root=args.data_root, blend=args.blend,
                              deep_weight=args.deep_weight)
    data = load_data(options)
    parts = BLEND_PARTS[options.blend]
    folds, chosen, candidates = {}, {}, {}
    members = cv_members(args.out, file_folds(data.pool.file_index, element_groups(data.pool.sequences)))
    for member in members:
        train, held_out = data.pool.subset(member.train_index), data.pool.subset(member.held_out_index)
        features = (data.motif_features("pool", member.train_index), data.motif_features("pool", member.held_out_index))
        deep = ActivityRegressor.from_pretrained(args.cv_run / member.dir_name).eval()
        blended, info, fold_parts = blend_member(options, data, deep, train, options.seed, features[0],
                                                 with_parts=True)
        scores, _ = score_member(blended, data, train, held_out, deep=deep, motif_features=features, parts=fold_parts)
        folds[member.dir_name], chosen[member.dir_name] = scores, info
        candidates[member.dir_name] = {"blend": blended, "deep": deep, **fold_parts}
        print(member.dir_name, {name: round(s["pearson"], 4) for name, s in scores.items()}, info.get("blend_weights"),
              flush=True)
    fold_scores = [{"blend": s["model"]["pearson"], "deep": s[CANDIDATE_NAMES["deep"]]["pearson"],
                    **{p: s[CANDIDATE_NAMES[p]]["pearson"] for p in parts}} for s in folds.values()]
    kept, means = choose_kept(fold_scores, ("deep", *parts))
    for member in members:
        candidates[member.dir_name][kept].save_pretrained(member.run_dir)
        folds[member.dir_name]["saved model"] = (folds[member.dir_name]["model"] if kept == "blend" else
                                                 folds[member.dir_name][CANDIDATE_NAMES[kept]])
    save_ensemble(args.out, "ActivityRegressor", [m.dir_name for m in members])
    summary = {name: mean_std([folds[f][name] for f in folds]) for name in next(iter(folds.values()))}
    record = {"dataset": args.dataset, "blend": args.blend, "deep_weight": args.deep_weight or "auto", "kept": kept,
              "kept_means": means, "folds": folds, "weights": chosen, "summary": summary}
    if args.fit_all_run is not None:
        deep_all = ActivityRegressor.from_pretrained(args.fit_all_run).eval()
        if kept == "deep":
            shipped, record["fit_all"] = deep_all, {"kept": "deep"}
        elif kept == "blend":
            shipped, record["fit_all"] = blend_member(options, data, deep_all, data.pool, options.seed,
                                                      data.motif_features("pool"))
        else:
            shipped = blend_parts(deep_all, tokens_of(data.pool, data.input_length), data.pool.values, {kept: 1.0},
                                  motif_set=data.motif_set, motif_features=data.motif_features("pool"))
            record["fit_all"] = {"kept": kept}
        shipped.save_pretrained(args.out / "fit_all")
    write_json(args.out / "blend.json", record)
    print(json.dumps({"kept": kept, **{name: summary[name]["pearson"] for name in summary}}, indent=1))


if __name__ == "__main__":
    main()
