"""Row-attention maps of a trained MSA model per layer and head, beside the native contact map.

Reads the alignment like ``bioattn train msa`` (query row first; with ``--pdb`` the query's non-gap
columns, the chain mapped onto them by sequence alignment; with ``--struct-dat`` every column), keeps up to
``--max-rows`` rows chosen for diversity, and runs the model once with ``need_weights=True``. Writes, under
``--out``: ``heads_layer{l}.png`` (every head's tied row-attention map next to the native contacts, each
head titled with its long-range P@L/5), ``head_diversity_layer{l}.png``, ``head_contact_precision.png``
(layers × heads), ``head_contacts.tsv`` (P@L/5, P@L/2, P@L of every head's symmetrised + APC map),
``row_attention.safetensors`` (the raw ``(layers, H, L, L)`` maps), ``head_sharpness.png``, ``columns.tsv``
(every column's attribution by ``--method``, explaining the model's masked-LM prediction of the query row),
``faithfulness.png`` and ``summary.json`` (with ``faithfulness``: each method's deletion/insertion AUC, columns
masked in every row).

With --weights (instead of --run / --model) the model is ESM's MSA Transformer with the user's ESM-MSA-1b weights:
per layer every head's map (heads_layer{l}.png, head_diversity_layer{l}.png), row_attention.safetensors,
contacts.npy, head_contacts.tsv (each head's weight in its contact regression and, with a structure, its
precision), head_contact_precision.png and summary.json; --max-rows rows chosen as in ESM's examples.

Without a structure the contact figures and tables are left out. The run of an ensemble (``bioattn train msa
--seeds``) is explained through its first member, named on stderr and in ``summary.json``: the heads of
separately trained models do not correspond, so their per-head maps have no mean.
"""
from __future__ import annotations

import argparse
import sys

import numpy as np

from bioattn.commands.common import add_device_argument, add_model_arguments, device_from_args, model_dir, model_label
from bioattn.errors import UserInputError
from bioattn.explain.outputs import (
    add_common_arguments, add_method_arguments, faithfulness_table, prepare_out_dir, resolve_method, write_faithfulness,
    write_layer_figures,
)
from bioattn.io import save_tensors, write_json, write_table


#: Methods from most to least faithful on 1atzA and 5ptpA (README, "Explaining predictions"); gradient × input
#: ranked below random there, so it is never chosen.
FAITHFULNESS_ORDER = ("integrated_gradients", "relevance", "rollout")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from bioattn.data.msa import FORMATS

    model = add_model_arguments(parser, trained_by="bioattn train msa")
    model.add_argument("--weights", default=None, metavar="FILE_OR_DIR",
                       help="instead of a run: ESM-MSA-1b weights you have (a fair-esm .pt with its "
                            "-contact-regression.pt beside it, or a converted directory); writes its per-layer, per-head "
                            "row-attention maps and their contact precision; nothing is downloaded (default: none)")
    add_device_argument(parser)
    add_common_arguments(parser, input_help="alignment (.a3m .a2m .fasta .sto .aln; .gz accepted)", rollout=False)
    parser.add_argument("--format", choices=FORMATS, default=None, help="alignment format (default: from the file name)")
    parser.add_argument("--query", default=None, metavar="FASTA",
                        help="FASTA with the query sequence (default: the --pdb chain's row, else row 0)")
    parser.add_argument("--pdb", default=None, help="native structure (PDB or mmCIF) for the contact map")
    parser.add_argument("--chain", default=None, help="chain of --pdb (default: the first protein chain)")
    parser.add_argument("--struct-dat", default=None, metavar="FILE", help="arDCA *_struct.dat column distances, instead of --pdb")
    parser.add_argument("--max-rows", type=int, default=128, help="rows fed to the model, chosen for diversity (default: 128)")
    add_method_arguments(parser, unit="alignment columns")


def _columns_and_faithfulness(model, rows, args: argparse.Namespace, out, family: str) -> dict:
    """``columns.tsv`` (the chosen method's per-column attribution), head sharpness and every method's
    faithfulness; returns their ``summary.json`` entries."""
    import time

    from bioattn.data.msa import ALPHABET
    from bioattn.explain.attribution import METHODS
    from bioattn.explain.faithfulness import compare_methods
    from bioattn.explain.faithfulness_figures import plot_head_sharpness
    from bioattn.explain.msa import row_attention_maps
    from bioattn.explain.msa_attribution import msa_attribution, msa_score, predicted_residues
    from bioattn.explain.sharpness import head_sharpness, sharpness_summary

    def timed_gradient_pass() -> float:
        start = time.perf_counter()
        msa_attribution(model, rows, "gradient_x_input")
        return time.perf_counter() - start

    residues = predicted_residues(model, rows)

    def attribute(name: str) -> list:
        return [msa_attribution(model, rows, name, residues=residues).cpu()]

    score = msa_score(model, rows.to(next(model.parameters()).device), residues)
    measured: dict = {}  # --method auto's measurements, reused by the faithfulness table (same rows, steps, seed)

    def measure(methods) -> dict:
        measured.update(compare_methods(attribute, [score], methods, steps=args.faithfulness_steps))
        return measured

    method = resolve_method(args, FAITHFULNESS_ORDER, timed_gradient_pass, measure, sample="this alignment")

    values = attribute(method)[0]
    query = rows[0].tolist()
    write_table(out / "columns.tsv", ["column", "query", "predicted", method],
                ([c, ALPHABET[query[c]] if query[c] < len(ALPHABET) else "?", ALPHABET[int(residues[c])], float(values[c])]
                 for c in range(len(query))))
    maps = row_attention_maps(model, rows)
    sharpness = head_sharpness([layer[None] for layer in maps])
    plot_head_sharpness(sharpness, out / "head_sharpness.png", title=f"{family} row attention: per-head sharpness")
    entries: dict = {"method": method, "head_sharpness": sharpness_summary(sharpness)}
    if not args.skip_faithfulness:
        entries["faithfulness"] = write_faithfulness(
            compare_methods(attribute, [score], METHODS, steps=args.faithfulness_steps, known=measured), out,
            unit="alignment columns", title=f"{family}: faithfulness (columns masked)")
        print(faithfulness_table(entries["faithfulness"]))
    return entries


def _load_model(args: argparse.Namespace):
    """``(model, member)``: the model of ``--run`` / ``--model``, or the first member of an ensemble and its folder
    name (``member`` None for a single model)."""
    from bioattn.models import MSAContactModel
    from bioattn.models.ensemble import ensemble_members
    from bioattn.models.registry import load_pretrained, read_config, resolve_model_dir

    folder = model_dir(args)
    members = ensemble_members(load_pretrained(folder, map_location=device_from_args(args), expect=MSAContactModel))
    if len(members) == 1:
        return members[0], None
    first = read_config(resolve_model_dir(folder))["members"][0]
    print(f"note: {model_label(args)} is an ensemble of {len(members)} separately trained models, whose heads do not "
          f"correspond; explaining its first member, {first} (--run {model_label(args)}/<member> for another)", file=sys.stderr)
    return members[0], first


def _explain_esm_msa(args: argparse.Namespace) -> int:
    """``--weights``: the MSA Transformer's heads (:func:`bioattn.explain.esm_msa.explain_esm_msa`)."""
    from bioattn.data.contacts import load_target
    from bioattn.explain.esm_msa import explain_esm_msa
    from bioattn.tasks.msa_esm import load_msa_transformer

    model = load_msa_transformer(args.weights, device_from_args(args))
    target = load_target(args.input, fmt=args.format, query_fasta=args.query, pdb=args.pdb, chain=args.chain,
                         struct_dat=args.struct_dat)
    out = prepare_out_dir(args.out, overwrite=args.overwrite)
    summary = explain_esm_msa(model, target, out, args.max_rows, str(args.weights))
    best = summary.get("best_head")
    found = (f"best head layer {best['layer']} head {best['head']}, long-range P@L/5 = {best['P@L/5']:.2f}"
             if best else "no structure given")
    print(f"{target.name}: MSA Transformer row attention of {len(summary['head_similarity'])} layers, {found} -> {out}")
    return 0


def run(args: argparse.Namespace) -> int:
    import torch

    from bioattn.data.contacts import load_target
    from bioattn.metrics import CONTACT_CUTOFF, LONG_RANGE, residues_with_coordinates
    from bioattn.data.msa import MSATokenizer, subsample
    from bioattn.explain.figures import plot_head_scores
    from bioattn.explain.msa import PRECISION_NAMES, head_contact_precision, row_attention_maps

    if args.max_rows < 1:
        raise UserInputError(f"--max-rows must be >= 1, got {args.max_rows}")
    if args.weights is not None:
        return _explain_esm_msa(args)
    model, member = _load_model(args)
    target = load_target(args.input, fmt=args.format, query_fasta=args.query, pdb=args.pdb, chain=args.chain,
                         struct_dat=args.struct_dat)
    tokens = MSATokenizer().encode(target.msa)
    if tokens.shape[1] > model.config["max_len"]:
        raise UserInputError(
            f"{args.input}: {tokens.shape[1]} columns, the model {model_label(args)} accepts at most {model.config['max_len']}"
        )
    out = prepare_out_dir(args.out, overwrite=args.overwrite)
    rows = tokens[subsample(tokens, args.max_rows, "diversity")]
    maps = row_attention_maps(model, rows)  # (layers, H, L, L)
    save_tensors(out / "row_attention.safetensors", {"row_attention": maps})
    layers, heads, length = maps.shape[0], maps.shape[1], maps.shape[-1]
    summary: dict = {"run": model_label(args), "input": str(args.input), "family": target.name, "columns": length,
                     "rows_used": len(rows), "rows_in_alignment": target.msa.depth}
    if member is not None:
        summary["member"] = member
    summary.update(_columns_and_faithfulness(model, rows, args, out, target.name))

    if target.distances is None:
        summary["head_similarity"] = write_layer_figures(list(maps), out, what=f"{target.name} row attention")
        write_json(out / "summary.json", summary)
        print(f"{target.name}: row-attention maps of {layers} layers x {heads} heads -> {out} (no structure given)")
        return 0

    distances = target.distances
    precision = head_contact_precision(maps, distances)  # (layers, H, 3)
    contacts = torch.from_numpy(np.nan_to_num(distances, nan=np.inf) < CONTACT_CUTOFF).float()
    summary["head_similarity"] = write_layer_figures(
        list(maps), out, what=f"{target.name} row attention", reference=contacts,
        reference_title=f"native contacts (< {CONTACT_CUTOFF:g} Å)",
        head_scores=[[float(p) for p in layer] for layer in precision[..., 0]], score_name=PRECISION_NAMES[0],
    )
    plot_head_scores(precision[..., 0], out / "head_contact_precision.png", label=f"long-range {PRECISION_NAMES[0]}",
                     title=f"{target.name}: which heads carry contacts (sym + APC map, separation ≥ {LONG_RANGE})")
    write_table(out / "head_contacts.tsv", ["layer", "head", *PRECISION_NAMES],
              ([layer, head, *map(float, precision[layer, head])] for layer in range(layers) for head in range(heads)))
    i, j = np.triu_indices(length, k=LONG_RANGE)
    known = np.isfinite(distances[i, j])
    best = np.unravel_index(int(np.argmax(precision[..., 0])), precision.shape[:2])
    summary.update({
        "residues_with_coordinates": int(residues_with_coordinates(distances).sum()),
        "long_range_contact_rate": float((distances[i, j][known] < CONTACT_CUTOFF).mean()) if known.any() else None,
        "best_head": {"layer": int(best[0]), "head": int(best[1]),
                      **{name: float(v) for name, v in zip(PRECISION_NAMES, precision[best])}},
        "mean_over_heads": {name: float(precision[..., k].mean()) for k, name in enumerate(PRECISION_NAMES)},
    })
    write_json(out / "summary.json", summary)
    rate = summary["long_range_contact_rate"]
    print(f"{target.name}: best head layer {best[0]} head {best[1]}, long-range {PRECISION_NAMES[0]} = "
          f"{precision[best][0]:.2f} (mean over heads {precision[..., 0].mean():.2f}"
          + (f"; random ranking ≈ {rate:.2f}" if rate is not None else "") + f") -> {out}")
    return 0
