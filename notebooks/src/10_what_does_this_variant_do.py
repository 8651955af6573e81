# %% [markdown]
# # What does this variant do? From a VCF to allele effects, a saturation map and the motifs behind them
#
# A variant in a promoter changes a few letters of a sequence a model reads. `bioattn predict variants` asks the
# model twice, once with the reference allele and once with the alternative, in windows of the model's length cut
# from the reference genome around the variant (several placements, averaged), and reports both scores and their
# difference. Here the model is the shipped promoter classifier `gue-prom-core-all` (70-nt windows, score = its
# promoter probability, output `p_promoter`) and the sequence is the **LDLR promoter** of the CAGI5 saturation
# mutagenesis challenge, whose variants were measured by MPRA (Kircher et al. 2019):
#
# 1. a small VCF of measured LDLR variants → `score_variants` (the Python call behind the command) → the table;
# 2. every possible SNV of the promoter → a **saturation map**, drawn as MPRA papers draw them;
# 3. which stretches the model relies on (in-silico mutagenesis: the mean effect of mutating each base), and
#    whether the MPRA found the same positions important;
# 4. the same VCF through an activity model with an output per cell type, in the cell type LDLR was measured in.
#
# It needs the CAGI5 release under the data root (`../shared/data`, or `$BIOATTN_DATA_ROOT`). A promoter
# classifier is not an expression model: how far its deltas follow the measured effects is printed, not assumed.

# %%
import os

os.environ.setdefault("TQDM_DISABLE", "1")  # no progress bars in the stored outputs
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from IPython.display import Image, display
from scipy.stats import pearsonr

from bioattn.data import resolve_data_root
from bioattn.tasks.variants.predict import saturation_map, score_variants
from bioattn.tasks.variants.saturation import draw_saturation, effect_matrix

torch.set_num_threads(1)
QUICK = os.environ.get("BIOATTN_QUICK") == "1"
CAGI5 = resolve_data_root() / "variants" / "cagi5"
REPORT = Path("runs") / "10_variants"  # inside notebooks/, ignored by git
REPORT.mkdir(parents=True, exist_ok=True)
ELEMENT = "LDLR"
MODEL = "gue-prom-core-all"

release = pd.read_csv(CAGI5 / "train_release.tsv", sep="\t")
ldlr = release[release.element == ELEMENT].reset_index(drop=True)
print(f"{len(ldlr)} measured LDLR variants in the CAGI5 training release")

# %% [markdown]
# ## 1. A VCF in, one row per allele out
#
# The VCF below is written from the release (one record per position, the alleles of a position as one
# multi-allelic record, as variant callers write them). `score_variants` splits the alleles, checks every REF
# against the reference FASTA (a mismatch is an error naming the record) and scores them.

# %%
lines = ["##fileformat=VCFv4.2", f"##contig=<ID={ELEMENT},length=319>", "#CHROM\tPOS\tID\tREF\tALT\tQUAL\tFILTER\tINFO"]
chosen = ldlr if not QUICK else ldlr[ldlr.position <= ldlr.position.min() + 40]
for position, group in chosen.groupby("position"):
    lines.append(f"{ELEMENT}\t{position}\t.\t{group.ref.iloc[0]}\t{','.join(group.alt)}\t.\t.\t.")
vcf = REPORT / "ldlr.vcf"
vcf.write_text("\n".join(lines) + "\n")
scores = score_variants(MODEL, CAGI5 / "elements.fa", vcf)
measured = scores.merge(ldlr.rename(columns={"element": "chrom", "position": "pos"}), on=["chrom", "pos", "ref", "alt"])
print(scores.head().to_string(index=False))
r_measured = pearsonr(measured.delta, measured.effect_size)[0]
print(f"\n{len(scores)} alleles of {len(lines) - 3} records; Pearson(model delta, measured MPRA effect) = {r_measured:.3f}")

# %% [markdown]
# ## 2. Every possible SNV: the saturation map
#
# `saturation_map` scores the 3 alternative alleles of every base (`bioattn predict variants --saturation
# --region LDLR:1-319` writes the same table and this figure). Blue: the mutation lowers the promoter probability;
# red: it raises it. The logo above each map stands each reference letter at the mean effect of mutating it, sign
# flipped: tall letters are the ones the model needs.

# %%
region = f"{ELEMENT}:1-{120 if QUICK else 319}"
table = saturation_map(MODEL, CAGI5 / "elements.fa", region)
figure = draw_saturation(table, REPORT / "ldlr_saturation.png", title=f"{MODEL} on the {ELEMENT} promoter")
display(Image(filename=str(figure)))
positions, matrix, letters = effect_matrix(table, ELEMENT)
print(f"{len(table)} SNVs = 3 x {len(positions)} positions; largest drop {table.delta.min():.3f}, "
      f"largest gain {table.delta.max():.3f}")

# %% [markdown]
# ## 3. Which stretches does the model use, and did the MPRA see them?
#
# The importance of a base is the mean drop of the promoter probability when it is mutated (the logo's heights).
# The 10-nt windows with the highest total importance are the stretches the model relies on on this promoter. The
# MPRA measured a third of the positions (the release's 16-nt blocks): for those, the mean |measured effect| of the
# position says whether the assay found the same stretches important.

# %%
importance = -matrix.sum(axis=0) / 3.0
width = 10
window_sums = np.convolve(importance, np.ones(width), mode="valid")
top = []
for start in np.argsort(window_sums)[::-1]:
    if all(abs(start - s) >= width for s in top):
        top.append(int(start))
    if len(top) == 3:
        break
measured_abs = ldlr.assign(abs_effect=ldlr.effect_size.abs()).groupby("position").abs_effect.mean()
rows = []
for start in top:
    span = positions[start : start + width]
    seen = measured_abs.reindex(span).dropna()
    rows.append({"positions": f"{span[0]}-{span[-1]}", "sequence": letters[start : start + width],
                 "model importance": round(float(window_sums[start]), 4),
                 "measured mean |effect|": round(float(seen.mean()), 3) if len(seen) else "not in release"})
print(pd.DataFrame(rows).to_string(index=False))
both = pd.DataFrame({"importance": importance}, index=positions).join(measured_abs, how="inner")
r_positions = pearsonr(both.importance.abs(), both.abs_effect)[0]
print(f"\nover the {len(both)} measured positions: Pearson(|model importance|, mean |measured effect|) = "
      f"{r_positions:.3f}; all measured positions: mean |effect| {measured_abs.mean():.3f}")

# %% [markdown]
# ## 4. The cell type that matters: an activity model with an output per cell type
#
# LDLR was measured in HepG2 liver cells. `lentimpra-hepg2-wtc11` is an activity model trained on lentiMPRA of
# about 21,500 elements in two cell types, HepG2 and WTC11 stem cells (not on CAGI5: these variants are new to it),
# with one output per cell type on a shared encoder. `score_variants` gives each output its own columns
# (`delta_hepg2`, `delta_wtc11`, ...); `output_name` (`--output-name` on the command line) keeps one. The model is an
# ensemble of its two cross-validation fold models: `delta_sd_<output>` is each variant's spread across them, beside
# the mean.

# %%
ACTIVITY = "lentimpra-hepg2-wtc11"
per_cell = score_variants(ACTIVITY, CAGI5 / "elements.fa", vcf)
per_cell_measured = per_cell.merge(ldlr.rename(columns={"element": "chrom", "position": "pos"}),
                                   on=["chrom", "pos", "ref", "alt"])
outputs = [c.removeprefix("delta_") for c in per_cell.columns if c.startswith("delta_") and not c.startswith("delta_sd")]
print(pd.DataFrame([{"output": o, "Pearson(delta, measured LDLR effect)": round(pearsonr(
    per_cell_measured[f"delta_{o}"], per_cell_measured.effect_size)[0], 3),
    "mean spread across the 2 members": round(float(per_cell_measured[f"delta_sd_{o}"].mean()), 4)}
    for o in outputs]).to_string(index=False))
print(f"for comparison, the promoter classifier above: {r_measured:.3f}")
hepg2 = score_variants(ACTIVITY, CAGI5 / "elements.fa", vcf, output_name="hepg2")

# %% [markdown]
# ## Conclusions, checked on the numbers above

# %%
assert len(table) == 3 * len(positions), "three alternative alleles per position"
assert np.allclose(scores.delta, scores.alt_score - scores.ref_score, atol=1e-9)
assert (table.ref != table.alt).all()
direct = score_variants(MODEL, CAGI5 / "elements.fa", [(ELEMENT, int(p), r, a) for p, r, a in
                                                      zip(scores.pos.head(5), scores.ref.head(5), scores.alt.head(5))])
assert np.allclose(direct.delta, scores.delta.head(5)), "a tuple list scores like the VCF"
assert figure.stat().st_size > 10_000
assert outputs == ["hepg2", "wtc11"] and (per_cell[["delta_sd_hepg2", "delta_sd_wtc11"]] >= 0).all().all()
assert np.allclose(hepg2.delta, per_cell.delta_hepg2), "output_name keeps one output's columns"
print("all conclusions hold")
