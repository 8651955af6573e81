# %% [markdown]
# # Promoter classifier: train, evaluate, and look at what the attention reads
#
# This notebook trains bioattn's `PromoterClassifier` (single-nucleotide tokens, a [CLS] token, a pre-norm
# transformer encoder) on the GUE `prom_core_tata` task (70 bp around the transcription start site, human
# promoters with a TATA box vs shuffled negatives) with the project's recipe, compares it with the trivial
# baselines the recipe fits on the same split, and then explains its predictions on the dev set:
#
# - **rollout tracks**: the [CLS] row of the attention rollout, the share of the [CLS] representation that,
#   following attention alone, comes from each nucleotide (a hypothesis generator, not a causal attribution);
# - **per-head maps** of the last layer for one sequence.
#
# It needs the GUE data under the data root (`../shared/data`, or `$BIOATTN_DATA_ROOT`). `BIOATTN_QUICK=1`
# trains a tiny model for a few steps (the recipe's `--quick`); the full size trains the recipe's default model
# under a time budget.

# %%
import json
import os
import subprocess
import sys
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import torch
from IPython.display import Image, display

from bioattn.data import resolve_data_root
from bioattn.data.dna import collate_tokens, read_records
from bioattn.explain import head_diversity, plot_head_maps, plot_rollout_track
from bioattn.tasks.promoter.influence import explain_promoters, influence_profile, motif_enrichment
from bioattn.models.promoter import PromoterClassifier

torch.manual_seed(0)
QUICK = os.environ.get("BIOATTN_QUICK") == "1"
TASK = "prom_core_tata"
DATA_ROOT = resolve_data_root()  # --data-root flag → $BIOATTN_DATA_ROOT → ../shared/data
RUN_DIR = Path("runs") / "04_promoter"  # inside notebooks/, ignored by git
TSS_INDEX = 34  # 0-based index of the TSS in the 70 bp core sequences (−34..+35); see docs/explain.md
TATA_BOX = (-31, -24)  # where the TATA box sits relative to the TSS in human promoters

# %% [markdown]
# ## 1. Train with the recipe
#
# `recipes/promoter.py` trains on `train.csv` with early stopping on the dev MCC and fits two baselines on the
# same split: a GC-content threshold (positives are GC-richer) and logistic regression on k-mer counts.

# %%
command = [sys.executable, "../recipes/promoter.py", "--task", TASK, "--data-root", str(DATA_ROOT),
           "--out", str(RUN_DIR), "--overwrite", "--seed", "0"]  # fmt: skip
command += ["--quick"] if QUICK else ["--max-minutes", "10"]
finished = subprocess.run(command, capture_output=True, text=True)
print(finished.stdout)
if finished.returncode:
    raise RuntimeError(f"the recipe failed:\n{finished.stderr[-3000:]}")
metrics = json.loads((RUN_DIR / "metrics.json").read_text())
dev_scores = {method: split["dev"] for method, split in metrics["scores"].items()}

# %%
MODEL = "PromoterClassifier (this run)"
names = [MODEL] + [name for name in dev_scores if name != MODEL]
fig, ax = plt.subplots(figsize=(9, 2.8))
ax.barh(names, [100 * dev_scores[n]["mcc"] for n in names], color=["C3"] + ["C7"] * (len(names) - 1))
for value in metrics["published_mcc_x100"].values():
    ax.axvline(value, color="k", lw=0.6, ls=":")
ax.set_xlabel("dev MCC × 100   (dotted lines: published fine-tuned models, official test split)")
ax.set_title(f"{TASK}: the transformer vs trivial baselines trained on the same split", fontsize=10)
ax.invert_yaxis()
ax.grid(axis="x", alpha=0.3)
fig.savefig(RUN_DIR / "dev_mcc.png", dpi=90, bbox_inches="tight")  # bioattn.explain's figures also write PNGs
plt.close(fig)
display(Image(filename=RUN_DIR / "dev_mcc.png"))

# %% [markdown]
# ## 2. Explain the dev set with attention rollout
#
# `explain_promoters` predicts with the model's normal (fused) path, then runs a second pass that returns the
# attention maps and rolls them out. The model averages both strands, so the influence is the mean of the
# forward-strand rollout and the reverse-strand rollout mapped back onto forward positions.

# %%
model = PromoterClassifier.from_pretrained(RUN_DIR)
records = list(read_records(DATA_ROOT / "promoters" / "gue" / TASK / "dev.csv", labels=True))
records = records[:128] if QUICK else records
ids, padding_mask = collate_tokens([record.tokens() for record in records])
labels = np.array([record.label for record in records])
explanation = explain_promoters(model, ids, padding_mask)
influence = explanation.influence.numpy()  # (N, 70)
predicted = explanation.probabilities.numpy() >= 0.5
positions = np.arange(influence.shape[1]) - TSS_INDEX
print(f"{len(records)} dev sequences, accuracy {np.mean(predicted == labels):.3f}")

mean_by_class = {}
for name, chosen in (("predicted promoter", predicted), ("predicted non-promoter", ~predicted)):
    mean, _, _ = influence_profile(influence[chosen], np.full(chosen.sum(), influence.shape[1]))
    mean_by_class[name] = mean
mean_all, spread_all, _ = influence_profile(influence, np.full(len(influence), influence.shape[1]))
profile_png = plot_rollout_track(
    mean_all, RUN_DIR / "influence_profile.png", positions=positions, spread=spread_all, spans={"TATA box": TATA_BOX},
    others=mean_by_class, label="mean over dev", spread_label="± 1 sd", xlabel="position relative to the TSS",
    title="[CLS] rollout influence per position, dev set",
)  # fmt: skip
display(Image(filename=profile_png))

# %% [markdown]
# One confidently predicted promoter that contains a TATA box (`TATAWAWR`), with its letters:

# %%
enrichment = motif_enrichment([r.sequence for r in records], influence, "TATAWAWR")
summary = enrichment.summary()
print(json.dumps({k: summary[k] for k in ("sequences_with_match", "enrichment_vs_sequence_mean",
                                          "enrichment_vs_same_positions_without_motif")}, indent=1))  # fmt: skip
has_tata = np.array(["TATA" in r.sequence[:15] for r in records])
candidates = np.flatnonzero(has_tata & (labels == 1) & predicted)
index = int(candidates[np.argmax(explanation.probabilities.numpy()[candidates])]) if len(candidates) else 0
track_png = plot_rollout_track(
    influence[index], RUN_DIR / "track.png", positions=positions, sequence=records[index].sequence,
    spans={"TATA box": TATA_BOX}, title=f"dev record {records[index].id}: p(promoter) = "
    f"{explanation.probabilities[index]:.2f}", xlabel="position relative to the TSS",
)  # fmt: skip
display(Image(filename=track_png))

# %% [markdown]
# ## 3. Per-head maps of the last layer
#
# Each panel is one head's `(1 + 70) × (1 + 70)` attention for that sequence (row = query, column = key,
# token 0 = [CLS]). Heads that attend differently have low cosine similarity.

# %%
last_layer = explanation.weights[-1]  # (N, H, 71, 71)
heads_png = plot_head_maps(last_layer[index], RUN_DIR / "heads_last_layer.png",
                           title=f"last layer, dev record {records[index].id}")  # fmt: skip
display(Image(filename=heads_png))
similarity = head_diversity(last_layer)
print("head similarity (cosine, mean over the dev sequences):\n", np.round(similarity.numpy(), 2))

# %% [markdown]
# ## Conclusion
#
# - Trained from scratch on 4,904 sequences, the small transformer is far above the GC-content threshold and the
#   k-mer logistic regression fitted on the same split. Its dev MCC is in the range of the published numbers,
#   but those come from large pretrained models scored on the official test split, which is not in the data
#   folder: context, not a like-for-like comparison.
# - The rollout peaks where a TATA box sits (about 30 nt upstream of the TSS), in promoters and non-promoters
#   alike. The motif check says the same: on `TATAWAWR` matches the influence is well above the sequence mean,
#   but about equal to the influence on the same positions in sequences *without* a match. The model reads the
#   place where a TATA box should be, whatever is there; what it finds there then drives the prediction.
# - Rollout follows attention only: it suggests where to look. Confirm a finding with an intervention (mutate
#   the box and re-predict) before relying on it.

# %%
model_mcc = dev_scores[MODEL]["mcc"]
gc_mcc = dev_scores["GC-content threshold (this run)"]["mcc"]
totals = influence.sum(1)
assert np.all(influence >= 0) and np.all(totals <= 1 + 1e-5), "rollout influence is a share of [CLS]"
assert model_mcc > 0.15, model_mcc  # even the quick model learns something
if not QUICK:
    assert model_mcc > gc_mcc + 0.1, (model_mcc, gc_mcc)
    peak = positions[np.argmax(mean_all)]
    assert TATA_BOX[0] <= peak <= TATA_BOX[1], peak  # rollout peaks in the TATA-box window
print("all conclusions hold")
