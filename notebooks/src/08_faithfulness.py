# %% [markdown]
# # Which explanation to trust: faithfulness, measured
#
# Attention rollout treats attention as the only path between tokens and ignores values, feed-forward layers and
# convolutions: a hypothesis generator. Here we **measure** how faithful each of bioattn's attribution methods is
# on the shipped promoter model `gue-prom-core-all`, with deletion and insertion curves:
#
# - **deletion**: replace the top-k nucleotides of a method's ranking by N and follow the probability of the class
#   the model predicted, divided by the unperturbed probability; a faithful ranking makes it fall early
#   (**low area**);
# - **insertion**: start from the all-N sequence and reveal the top-k nucleotides; a faithful ranking makes the
#   probability come back early (**high area**);
# - a **random** ranking is the floor.
#
# Methods: `rollout`, gradient-weighted attention `relevance` (Chefer et al. 2021), Captum's
# `integrated_gradients` and `gradient_x_input` on the nucleotide embeddings, `random`. The sequences are the
# GUE prom_core_all dev sample shipped with bioattn, so the notebook needs no data root. `BIOATTN_QUICK=1`
# explains 40 sequences, the full size 300.

# %%
import os
import warnings
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import torch
from IPython.display import Image, display

from bioattn.data.dna import collate_tokens, read_records
from bioattn.explain.attribution import METHODS
from bioattn.explain.faithfulness import compare_methods, most_faithful
from bioattn.explain.faithfulness_figures import plot_faithfulness_curves, plot_head_sharpness
from bioattn.explain.outputs import faithfulness_table
from bioattn.explain.ism import predicted_classes
from bioattn.tasks.promoter.attribution import promoter_attribution, promoter_score
from bioattn.explain.sharpness import head_sharpness
from bioattn.models.promoter import PromoterClassifier
from bioattn.data.root import embedded_sample_dir

warnings.filterwarnings("ignore", message="IProgress not found")  # tqdm in a kernel without ipywidgets
torch.manual_seed(0)
torch.set_num_threads(1)
QUICK = os.environ.get("BIOATTN_QUICK") == "1"
SEQUENCES = 40 if QUICK else 300
FIGURES = Path("runs") / "08_faithfulness"  # inside notebooks/, ignored by git
FIGURES.mkdir(parents=True, exist_ok=True)

model = PromoterClassifier.from_pretrained("gue-prom-core-all").eval()
records = []
for record in read_records(embedded_sample_dir("prom_core_all") / "dev.csv.gz"):
    records.append(record)
    if len(records) == SEQUENCES:
        break
ids, padding_mask = collate_tokens([r.tokens() for r in records])
classes = predicted_classes(model, ids, padding_mask)
print(f"{len(records)} sequences of {ids.shape[1]} nt; predicted promoters: {int(classes.sum())}")

# %% [markdown]
# ## 1. Every method's map, and its deletion / insertion curves
#
# `compare_methods` times each method's maps and measures its curves on the same sequences (20 steps of 5 % of
# the nucleotides each).

# %%
scores = [promoter_score(model, ids[row], int(classes[row])) for row in range(len(records))]


def attribute(method):
    return list(promoter_attribution(model, ids, padding_mask, method, classes=classes).cpu())


results = compare_methods(attribute, scores, METHODS)
print(faithfulness_table(results))
display(Image(plot_faithfulness_curves(results, FIGURES / "faithfulness.png", unit="nucleotides",
                                       title=f"gue-prom-core-all, {len(records)} dev-sample sequences")))

# %% [markdown]
# ## 2. What the most and the least faithful map look like on one sequence

# %%
best = most_faithful(results)
row = int(torch.argmax((classes == 1).int()))  # the first predicted promoter
fig, axes = plt.subplots(2, 1, figsize=(11, 4), sharex=True)
positions = np.arange(ids.shape[1]) - 34  # relative to the TSS
for axis, method in zip(axes, (best, "rollout")):
    values = promoter_attribution(model, ids[row : row + 1], padding_mask[row : row + 1], method,
                                  classes=classes[row : row + 1])[0]
    axis.bar(positions, values.numpy(), color="tab:blue" if method == best else "tab:orange")
    axis.set_ylabel(method)
axes[1].set_xlabel("position relative to the TSS")
fig.suptitle(f"{records[row].id}: the two maps of one predicted promoter")
plt.show()

# %% [markdown]
# ## 3. Per-head sharpness
#
# One head has one softmax temperature. Normalised entropy (1 = uniform attention) and the effective temperature
# `1 / sd(log p)` of each head, averaged over the sequences' queries:

# %%
with torch.no_grad():
    _, key_padding_mask, weights = model.encode(ids, padding_mask, need_weights=True)
sharpness = head_sharpness(weights, key_padding_mask)
display(Image(plot_head_sharpness(sharpness, FIGURES / "head_sharpness.png", title="gue-prom-core-all: per-head sharpness")))
for layer, (entropy, temperature) in enumerate(zip(sharpness["normalised_entropy"], sharpness["temperature"])):
    print(f"layer {layer}: normalised entropy {np.round(entropy.numpy(), 2)}, temperature {np.round(temperature.numpy(), 2)}")

# %% [markdown]
# ## Conclusions
#
# The gradient attributions are the most faithful on this model; rollout is better than random but far behind,
# which is what "rollout is a hypothesis generator" means in numbers.

# %%
random_floor = results["random"]
assert best in ("integrated_gradients", "gradient_x_input"), best
assert results[best]["deletion_auc"] < random_floor["deletion_auc"] - 0.2
assert results[best]["insertion_auc"] > random_floor["insertion_auc"] + 0.1
assert results["rollout"]["deletion_auc"] < random_floor["deletion_auc"]
assert results["relevance"]["deletion_auc"] < results["rollout"]["deletion_auc"]
print("all conclusions hold")
