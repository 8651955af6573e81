# %% [markdown]
# # What the promoter model learned, in a biologist's words: motifs, positions, heads
#
# A per-nucleotide influence track is 70 numbers per sequence; a biologist asks *which motifs did the model learn,
# where do they sit, and are they the known ones?* This notebook answers that for the shipped `gue-prom-core-all`
# model (trained on GUE prom_core_all, not retrained here) on **TATA-box promoters** from GUE prom_core_tata, with
# one library call, `bioattn.explain.explain_promoter(..., motifs=True, known_motifs=N)`, the call behind
# `bioattn explain promoter --motifs --known-motifs N`:
#
# 1. **Discovery**: Integrated Gradients hypothetical contributions (what each of the four bases would contribute
#    at each position) clustered by TF-MoDISco (`modisco-lite`) into patterns, each matched with TOMTOM
#    (`memelite`) against JASPAR2026 CORE vertebrates shipped with `pyjaspar` (nothing is downloaded), with the
#    position of its seqlets relative to the TSS (index 34 of GUE's 70-nt windows).
# 2. **Which head reads which pattern**: the [CLS] attention each head puts on a pattern's seqlets against matched
#    random positions.
# 3. **Planting known motifs**: the JASPAR consensus of core-promoter factors written into dinucleotide shuffles of
#    the sequences at −30 … +20, against shuffles of the motif's own letters (the same composition): what the
#    model does with each element when it is there, whether or not the data carry it often enough to be found.
#
# It needs the GUE data under the data root (`../shared/data`, or `$BIOATTN_DATA_ROOT`). `BIOATTN_QUICK=1`
# explains 400 promoters, the full size 1,500.

# %%
import os

os.environ.setdefault("TQDM_DISABLE", "1")  # no progress bars in the stored outputs (tqdm reads this when imported)
import warnings
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import torch
from IPython.display import Image, display

from bioattn.data import resolve_data_root
from bioattn.tasks.promoter.explain import explain_promoter

warnings.filterwarnings("ignore", message="IProgress not found")  # tqdm in a kernel without ipywidgets
torch.manual_seed(0)
torch.set_num_threads(1)
QUICK = os.environ.get("BIOATTN_QUICK") == "1"
PROMOTERS = 400 if QUICK else 1500
PLANTED = 40 if QUICK else 150  # sequences whose shuffles receive the planted motifs
TSS = 34  # GUE's 70-nt core-promoter windows: the TSS is index 34
REPORT = Path("runs") / "09_motifs"  # inside notebooks/, ignored by git

train = pd.read_csv(resolve_data_root() / "promoters" / "gue" / "prom_core_tata" / "train.csv")
promoters = train[train.label == 1].sample(n=PROMOTERS, random_state=0).sequence.tolist()
print(f"{len(promoters)} labelled TATA promoters of prom_core_tata train, {len(promoters[0])} nt each")

# %% [markdown]
# ## One call: the report
#
# `method="rollout"` and `faithfulness=False` keep the per-nucleotide part cheap: the motif discovery has its own
# attribution (Integrated Gradients hypothetical contributions). `out=` writes what the command writes, including
# `motifs.html`, a self-contained page with every logo and histogram.

# %%
result = explain_promoter("gue-prom-core-all", promoters, tss_index=TSS, motifs=True, known_motifs=PLANTED,
                          method="rollout", faithfulness=False, plot_sequences=0, out=REPORT, overwrite=True)
motifs = pd.read_csv(REPORT / "motifs.tsv", sep="\t")
shown = ["pattern", "consensus", "seqlets", "median_position", "sd_position", "best_match_name",
         "best_match_id", "best_match_q", "best_match_family"]
motifs[shown].round(1).assign(best_match_q=motifs.best_match_q.map("{:.2g}".format))

# %% [markdown]
# Patterns named `pos_*` push the prediction towards "promoter" wherever they occur, `neg_*` against it.
# `best_match_q` is TOMTOM's q-value over the 1,019 JASPAR matrices (a match counts at q < 0.05): a database match
# says the pattern looks like a known site, not that the factor binds there.

# %%
tata = motifs[motifs.consensus.str.upper().str.contains("TATAAA") & motifs.pattern.str.startswith("pos_")]
tata = tata.sort_values("seqlets", ascending=False)
best_tata = tata.iloc[0]
print(f"{best_tata.pattern} {best_tata.consensus}: {best_tata.seqlets} seqlets, median position "
      f"{best_tata.median_position:+.1f} nt from the TSS, best match {best_tata.best_match_name} "
      f"{best_tata.best_match_id} (q = {best_tata.best_match_q:.2g})")
display(Image(REPORT / "logos" / f"{best_tata.pattern}_contribution.png"))
display(Image(REPORT / "positions" / f"{best_tata.pattern}.png"))

# %% [markdown]
# The TATA box, found without being asked for, matched to TBP and placed where it belongs, about 30 nt upstream
# of the TSS. The other patterns are usually long GC-/A-rich stretches whose matches (CTCF, zinc fingers) come from
# composition, and TATA-like letters in `neg_` patterns: GUE's negatives are shuffled promoters that keep part of
# the sequence, so the same letters also occur where they do not make a promoter.
#
# ## Which head reads which pattern

# %%
heads = pd.read_csv(REPORT / "head_motifs.tsv", sep="\t")
display(Image(REPORT / "head_motifs.png"))
tata_heads = heads[heads.pattern == best_tata.pattern].sort_values("ratio", ascending=False)
tata_heads.head(4).round(3)[["layer", "head", "sites", "attention_on_sites", "attention_same_positions_elsewhere", "ratio"]]

# %% [markdown]
# `ratio` is the [CLS] attention a head puts on a pattern's seqlets divided by its attention on the same positions
# in sequences without the pattern (1 = no preference; first model of an ensemble, forward strand). Read the heat
# map row by row: a head with a ratio well above 1 for a pattern looks at it from [CLS]; ratios near 1 for every
# head mean the pattern acts through the convolution and feed-forward layers rather than through one head's
# attention.
#
# ## Planting the known core-promoter elements

# %%
known = pd.read_csv(REPORT / "known_motifs.tsv", sep="\t")
effect = known.pivot_table(index="motif", columns="position", values="difference_mean")
error = known.pivot_table(index="motif", columns="position", values="difference_se")
order = effect.max(axis=1).sort_values(ascending=False).index
fig, axis = plt.subplots(figsize=(10, 4))
width = 0.8 / effect.shape[1]
for column, position in enumerate(effect.columns):
    x = np.arange(len(order)) + (column - effect.shape[1] / 2 + 0.5) * width
    axis.bar(x, effect.loc[order, position], width, yerr=error.loc[order, position], label=f"{position:+d}" if position else "TSS")
axis.axhline(0, color="0.4", linewidth=0.8)
axis.set_xticks(np.arange(len(order)), order)
axis.set_ylabel("log-odds change beyond\nthe motif's letter shuffles")
axis.set_title(f"gue-prom-core-all: JASPAR consensus planted into shuffles of {PLANTED} TATA promoters")
axis.legend(title="centre vs TSS", fontsize=7, ncol=2)
plt.tight_layout()
plt.show()
effect.round(2)

# %% [markdown]
# The model rewards a TATA box at −30 far more than anywhere else, and the same letters over the TSS cost it
# (they replace the initiator). Other consensus sites raise the prediction beyond their letter shuffles too: the
# ETS sites (GABPA at every position, ELK1 at the TSS), NRF1, NF-Y's CCAAT at −30, and most of all the long
# ZNF143 consensus at −10 (it lowers the prediction over the TSS). They are rare in these 70-nt windows, so
# TF-MoDISco does not see enough of them to make patterns. The SP1 GC box adds almost nothing beyond GC content,
# which the model reads anyway. CTCF, planted as a control (not a core-promoter element), raises the prediction
# too: a positive effect alone does not make a site an element the model has learned. Limits: attribution is not causation; planted consensus sites are idealised; a database match is not
# binding evidence; motif calls depend on how many sequences carry the element (see the motif results pages of
# the documentation for prom_core_all and E. coli).
#
# ## Conclusions

# %%
assert best_tata.best_match_id.startswith("MA0108") and best_tata.best_match_q < 0.05, best_tata.to_dict()
assert abs(best_tata.median_position - (-31)) <= 6, best_tata.median_position
tbp = effect.loc["TBP"]
assert tbp[-30] > 1.0 and tbp[-30] == tbp.max(), tbp.to_dict()
assert tbp[-30] > effect.drop(index="TBP")[-30].max(), effect[-30].to_dict()
assert abs(effect.loc["SP1"]).max() < 0.5, effect.loc["SP1"].to_dict()
print("all conclusions hold")
