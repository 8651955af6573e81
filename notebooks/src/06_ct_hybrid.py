# %% [markdown]
# # Hybrid 3D CNN + attention for CT volumes
#
# A CT volume has millions of voxels; attention over raw voxels would need a score for every *pair* of voxels.
# bioattn's `HybridCT3D` first runs a small 3D CNN whose total stride `s` shrinks the volume by `s³`, and only
# the CNN's output grid becomes attention tokens (plus a [CLS] token). This notebook
#
# 1. counts tokens and attention cost with and without the CNN stem, from the model's own token grid;
# 2. trains the model on AdrenalMNIST3D (MedMNIST v2, binary adrenal-gland shape masks from CT) with the
#    project's recipe, beside the recipe's MONAI 3D ResNet baseline;
# 3. overlays the [CLS] attention rollout on orthogonal slices of validation volumes.
#
# Part 2 and 3 need the data under the data root (`../shared/data` or `$BIOATTN_DATA_ROOT`).
# `BIOATTN_QUICK=1` trains tiny models for a few steps (the recipe's `--quick`).

# %%
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import torch
from IPython.display import Image, display
from monai.transforms import DivisiblePad

from bioattn.data import resolve_data_root
from bioattn.data.ct import VolumeDataset, load_medmnist3d_npz, medmnist_npz_path
from bioattn.explain import plot_orthogonal_slices
from bioattn.tasks.ct.rollout import explain_volumes
from bioattn.models.hybrid_ct import HybridCT3D

torch.manual_seed(0)
QUICK = os.environ.get("BIOATTN_QUICK") == "1"
RUN_DIR = Path("runs") / "06_ct_hybrid"  # inside notebooks/, ignored by git
RUN_DIR.mkdir(parents=True, exist_ok=True)

# %% [markdown]
# ## 1. Tokens after the CNN stem vs raw voxels
#
# The recipe's models: three stride-2 stages (`s = 8`) for 28³ volumes (padded to 32³). Above 32 voxels the
# default first folds each 2³ block of voxels into 8 channels (`unshuffle=2`, lossless), so the same three stages
# give `s = 16` at the CNN cost of a 32³ volume; `--unshuffle 1` runs four stages (`s = 16`) on the voxels
# themselves, as the model below does. Either way 64³ and larger volumes have the tokens of `s = 16`.
# One attention map has `(T + 1)²` entries per head and layer for `T` tokens; in float32 that is
# the memory an explicit attention map takes (fused kernels avoid storing it, but the arithmetic still grows as
# `T²`). The two larger volumes are a real abdominal CT (the TotalSegmentator example, 122 × 101 × 112 voxels)
# and a typical clinical scan (512 × 512 × 300); their costs are computed from the token grid, not run.

# %%
small_model = HybridCT3D(stem_channels=[16, 32, 64], stem_strides=[2, 2, 2], embed_dim=96, num_heads=4, num_layers=3)
large_model = HybridCT3D(stem_channels=[16, 32, 64, 96], stem_strides=[2, 2, 2, 2], embed_dim=96, num_heads=4, num_layers=3)
VOLUMES = {
    "AdrenalMNIST3D 28³ (padded to 32³)": ((28, 28, 28), small_model),
    "AdrenalMNIST3D 64³": ((64, 64, 64), large_model),
    "abdominal CT example 122×101×112": ((122, 101, 112), large_model),
    "clinical CT 512×512×300": ((512, 512, 300), large_model),
}
token_table = {}
for name, (shape, model) in VOLUMES.items():
    padded = tuple(int(np.ceil(size / model.stride) * model.stride) for size in shape)  # DivisiblePad
    tokens = int(np.prod(model.token_grid(padded)))
    voxels = int(np.prod(shape))
    token_table[name] = {"voxels": voxels, "padded_voxels": int(np.prod(padded)), "tokens": tokens,
                         "voxel_map_bytes": 4 * voxels**2, "token_map_bytes": 4 * (tokens + 1) ** 2}  # fmt: skip


def readable(nbytes: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB", "PB"):
        if nbytes < 1024:
            return f"{nbytes:.0f} {unit}"
        nbytes /= 1024
    return f"{nbytes:.0f} EB"


print(f"{'volume':<36} {'voxels':>12} {'tokens':>7} {'fewer':>8} {'map over voxels':>16} {'map over tokens':>16}")
for name, row in token_table.items():
    print(f"{name:<36} {row['voxels']:>12,} {row['tokens']:>7,} {row['voxels'] / row['tokens']:>7.0f}× "
          f"{readable(row['voxel_map_bytes']):>16} {readable(row['token_map_bytes']):>16}")  # fmt: skip

# Measured: the attention maps the models really return, and their forward time, on random volumes.
measured = {}
for name in list(VOLUMES)[:2]:
    shape, model = VOLUMES[name]
    padded = tuple(int(np.ceil(size / model.stride) * model.stride) for size in shape)
    volume = torch.rand(1, 1, *padded)
    with torch.no_grad():
        model.eval()
        start = time.perf_counter()
        output = model(volume, need_weights=True)
        measured[name] = (tuple(output.attentions[0].shape), time.perf_counter() - start)
    print(f"{name}: attention per layer {measured[name][0]} (B, H, 1+T, 1+T); forward {measured[name][1] * 1e3:.0f} ms")

# %%
fig, ax = plt.subplots(figsize=(9, 3.4))
names = list(token_table)
x = np.arange(len(names))
ax.bar(x - 0.2, [token_table[n]["voxel_map_bytes"] for n in names], width=0.4, label="attention over voxels")
ax.bar(x + 0.2, [token_table[n]["token_map_bytes"] for n in names], width=0.4, label="attention over CNN tokens")
ax.set_yscale("log")
ax.set_xticks(x, [n.replace(" (", "\n(") for n in names], fontsize=8)
ax.set_ylabel("one float32 attention map (bytes)")
for reference, label in ((2**30, "1 GiB"), (80 * 2**30, "80 GiB")):
    ax.axhline(reference, color="k", lw=0.6, ls=":")
    ax.text(len(names) - 0.5, reference, label, fontsize=7, va="bottom", ha="right")
ax.set_title("Size of one attention map (per head and layer)", fontsize=10)
ax.legend(fontsize=8)
fig.tight_layout()
fig.savefig(RUN_DIR / "attention_cost.png", dpi=80)  # bioattn.explain's figure functions also write PNGs
plt.close(fig)
display(Image(filename=RUN_DIR / "attention_cost.png"))

# %% [markdown]
# ## 2. Train on AdrenalMNIST3D
#
# `recipes/ct_classify.py` follows the MedMNIST v2 protocol (Adam, lr 1e-3, batch 32, best validation AUC
# kept) and trains a MONAI 3D ResNet baseline of similar size on the same split with the same budget. The data
# folder holds the train and validation splits only, so the numbers below are validation numbers; the published
# ones are on the official test split. Always predicting "normal" reaches 0.78 validation accuracy here, so
# compare AUC.

# %%
DATA_ROOT = resolve_data_root()  # --data-root flag → $BIOATTN_DATA_ROOT → ../shared/data
command = [sys.executable, "../recipes/ct_classify.py", "--data-root", str(DATA_ROOT), "--dataset", "adrenalmnist3d",
           "--size", "28", "--out", str(RUN_DIR / "run"), "--overwrite", "--seed", "0"]  # fmt: skip
command += ["--quick", "--tta", "none"] if QUICK else ["--epochs", "30", "--max-minutes", "5"]
finished = subprocess.run(command, capture_output=True, text=True)
print(finished.stdout)
if finished.returncode:
    raise RuntimeError(f"the recipe failed:\n{finished.stderr[-3000:]}")
display(Image(filename=RUN_DIR / "run" / "val_auc.png"))

# %% [markdown]
# ## 3. Attention rollout on validation volumes
#
# `explain_volumes` predicts with the fused path, then runs a second pass that returns the attention, rolls it
# out through the layers, takes the [CLS] row on the token grid and upsamples it trilinearly onto the input grid
# (each token's value lands on the centre of the `s³` block of voxels it summarises). The slices pass through
# the centre of the gland (the voxels are a binary gland mask, drawn in light grey).

# %%
model = HybridCT3D.from_pretrained(RUN_DIR / "run")
validation = load_medmnist3d_npz(medmnist_npz_path(DATA_ROOT, "adrenalmnist3d", 28))["val"]
dataset = VolumeDataset(validation, DivisiblePad(k=model.stride))
volumes = torch.stack([dataset[i][0] for i in range(len(dataset))])
explanation = explain_volumes(model, volumes)
probability = explanation.probabilities[:, 1].numpy()
labels = validation.labels
for label, class_name in enumerate(model.class_names):
    chosen = np.flatnonzero(labels == label)
    index = int(chosen[np.argmax(probability[chosen])]) if label == 1 else int(chosen[np.argmin(probability[chosen])])
    gland_centre = [int(c) for c in torch.nonzero(volumes[index, 0] > 0.5).float().mean(0).round()]
    slices_png = plot_orthogonal_slices(
        volumes[index, 0], explanation.voxel_map[index], RUN_DIR / f"rollout_{class_name}.png", center=gland_centre,
        title=f"validation volume {index}: {class_name}, p(hyperplasia) = {probability[index]:.2f}",
    )  # fmt: skip
    display(Image(filename=slices_png))
# Which tokens hold part of the gland (the voxels are a binary gland mask)?
gland_tokens = torch.nn.functional.max_pool3d((volumes > 0.5).float(), model.stride)[:, 0]  # (B, d, h, w)
share = (explanation.grid_map * gland_tokens).sum((1, 2, 3)) / explanation.grid_map.sum((1, 2, 3))
print(f"rollout share on tokens that contain gland: {share.mean():.2f} on average; such tokens are "
      f"{gland_tokens.mean():.2f} of all tokens")  # fmt: skip

# %% [markdown]
# ## Conclusion
#
# - The CNN stem turns tens of thousands to tens of millions of voxels into tens to tens of thousands of
#   tokens (one token per `s³` = 512 or 4,096 voxels), which shrinks one attention map from gigabytes–petabytes
#   to kilobytes–a gigabyte: attention over raw CT voxels is not an option, attention over a CNN grid is.
# - On AdrenalMNIST3D the recipe's table above compares the hybrid model with the MONAI ResNet baseline trained
#   with the same wall-clock budget (validation split; the published numbers are on the test split).
# - The rollout maps are coarse by construction (one value per `s³` block). In this short run they are only
#   not reliably concentrated on the gland: compare the printed share of the rollout on gland tokens with the
#   share of such tokens (the stored run: 0.14 against 0.16; a run without the depth channel gave 0.22), and
#   their maximum often lies beside it. The CNN stem has already mixed each block with its neighbours (and, on
#   binary masks, been given each voxel's depth inside the mask), so the token [CLS] reads from need not be where
#   the evidence is. Read a rollout map as "where [CLS] gathered information from", a hypothesis to check, not a
#   segmentation.

# %%
for name, row in token_table.items():
    stride = VOLUMES[name][1].stride
    assert row["tokens"] * stride**3 == row["padded_voxels"], (name, row)  # one token per s³ block
for name, (shape, _) in measured.items():
    assert shape[-1] == token_table[name]["tokens"] + 1, (name, shape)
assert explanation.voxel_map.shape == volumes[:, 0].shape
grid_totals = explanation.grid_map.sum((1, 2, 3))
assert torch.all(explanation.grid_map >= 0) and torch.all(grid_totals <= 1 + 1e-5), grid_totals
val_auc = json.loads((RUN_DIR / "run" / "metrics.json").read_text())["models"]["hybrid CNN+attention (bioattn)"]["val_auroc"]
if not QUICK:
    assert val_auc > 0.65, val_auc  # well above chance (0.5); see the table for the baseline
print("all conclusions hold")
