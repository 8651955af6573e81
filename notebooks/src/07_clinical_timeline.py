# %% [markdown]
# # Long-range retrieval on a clinical timeline: recurrent model vs multi-head attention
#
# A synthetic patient timeline is a sequence of events: admission, day-1 orders, then hundreds of routine events
# (vitals, drugs, nursing notes, lab tests and their results). At the end a lab result arrives. A bleeding-risk
# alert must fire **only if an anticoagulant (warfarin or heparin) was given on day 1 and the last result is a
# high INR**. Deciding needs two pieces of evidence: the lab name just before the result (local) and a drug given
# hundreds of steps earlier (long range).
#
# We compare a recurrent model (GRU), which must carry "anticoagulant given" through every step, with one layer
# of multi-head attention, whose query at the result step can look the drug event up directly, as the gap grows.
# The data are synthetic; the point is the mechanism, not a clinical claim.

# %%
import os

import matplotlib.pyplot as plt
import numpy as np
import torch
from sklearn.metrics import roc_auc_score
from torch import nn

from bioattn.attention import SinusoidalPositionalEncoding, TransformerEncoderLayer

QUICK = os.environ.get("BIOATTN_QUICK") == "1"
GAPS = [16, 64] if QUICK else [10, 30, 100, 300]
STEPS, BATCH, WIDTH = (150, 32, 32) if QUICK else (600, 32, 32)

# %% [markdown]
# ## Synthetic timelines
#
# Position 0 is admission; one of positions 1–3 (day 1) holds a drug; then `gap` routine events, among them
# pairs "lab name, result" for other labs; the last two events are a lab name and its result. Examples are drawn
# so that half of them should alert and the negatives are the hard cases: no anticoagulant before a high INR
# (20%), anticoagulant but a normal INR (15%), anticoagulant and a high result of another lab (15%).

# %%
VOCAB = [
    "admission", "warfarin", "heparin",
    "paracetamol", "amoxicillin", "insulin", "omeprazole", "furosemide",
    "bp_normal", "bp_high", "hr_normal", "hr_high", "temp_normal", "temp_high", "nursing_note",
    "lab_glucose", "lab_sodium", "lab_creatinine", "lab_inr", "result_normal", "result_high",
]  # fmt: skip
TOKEN = {name: i for i, name in enumerate(VOCAB)}
ANTICOAGULANTS = torch.tensor([TOKEN["warfarin"], TOKEN["heparin"]])
OTHER_DRUGS = torch.tensor([TOKEN[n] for n in ("paracetamol", "amoxicillin", "insulin", "omeprazole", "furosemide")])
ROUTINE = torch.arange(TOKEN["paracetamol"], TOKEN["nursing_note"] + 1)
OTHER_LABS = torch.tensor([TOKEN["lab_glucose"], TOKEN["lab_sodium"], TOKEN["lab_creatinine"]])
RESULTS = torch.tensor([TOKEN["result_normal"], TOKEN["result_high"]])
CASES = torch.tensor([0.5, 0.2, 0.15, 0.15])  # alert, no anticoagulant, normal INR, other lab high


def draw(options: torch.Tensor, shape: tuple[int, ...], generator: torch.Generator) -> torch.Tensor:
    return options[torch.randint(len(options), shape, generator=generator)]


def make_timelines(n: int, gap: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """-> tokens (n, gap + 6), alert label (n,) float, position of the day-1 drug (n,)."""
    length = gap + 6
    tokens = draw(ROUTINE, (n, length), generator)
    lab_at = torch.randint(4, length - 3, (n, max(1, gap // 10)), generator=generator)  # other-lab pairs
    tokens.scatter_(1, lab_at, draw(OTHER_LABS, tuple(lab_at.shape), generator))
    tokens.scatter_(1, lab_at + 1, draw(RESULTS, tuple(lab_at.shape), generator))
    tokens[:, 0] = TOKEN["admission"]
    case = torch.multinomial(CASES, n, replacement=True, generator=generator)
    rows, drug_at = torch.arange(n), torch.randint(1, 4, (n,), generator=generator)
    anticoagulant = draw(ANTICOAGULANTS, (n,), generator)
    tokens[rows, drug_at] = torch.where(case != 1, anticoagulant, draw(OTHER_DRUGS, (n,), generator))
    tokens[:, -2] = torch.where(case != 3, TOKEN["lab_inr"], draw(OTHER_LABS, (n,), generator))
    tokens[:, -1] = torch.where(case != 2, TOKEN["result_high"], TOKEN["result_normal"])
    return tokens, (case == 0).float(), drug_at


example, label, _ = make_timelines(1, 20, torch.Generator().manual_seed(3))
print(f"alert={bool(label)}:", " ".join(VOCAB[t] for t in example[0]))

# %% [markdown]
# ## Two models of similar size
#
# Both read the token embeddings (width 32) and classify the last step. The GRU has one recurrent layer; the
# attention model has sinusoidal positions and one pre-norm `TransformerEncoderLayer` with 4 heads under a causal
# mask (each step sees only the past, as an online alert would).


# %%
class AttentionAlert(nn.Module):
    def __init__(self, width: int = WIDTH, heads: int = 4) -> None:
        super().__init__()
        self.embed = nn.Embedding(len(VOCAB), width)
        self.position = SinusoidalPositionalEncoding(width)
        self.layer = TransformerEncoderLayer(width, heads, dim_feedforward=2 * width, dropout=0.0)
        self.norm = nn.LayerNorm(width)
        self.classify = nn.Linear(width, 1)

    def forward(self, tokens, need_weights=False):
        """tokens (B, L) -> (alert logit at the last step (B,), weights (B, H, L, L) or None)."""
        x, weights = self.layer(self.position(self.embed(tokens)), causal=True, need_weights=need_weights)
        return self.classify(self.norm(x[:, -1])).squeeze(-1), weights


class RecurrentAlert(nn.Module):
    def __init__(self, width: int = WIDTH) -> None:
        super().__init__()
        self.embed = nn.Embedding(len(VOCAB), width)
        self.gru = nn.GRU(width, width, batch_first=True)
        self.classify = nn.Linear(width, 1)

    def forward(self, tokens, need_weights=False):
        """tokens (B, L) -> (alert logit at the last step (B,), None)."""
        states, _ = self.gru(self.embed(tokens))
        return self.classify(states[:, -1]).squeeze(-1), None


def train(model: nn.Module, gap: int, seed: int = 0) -> nn.Module:
    generator = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=5e-3)
    for _ in range(STEPS):
        tokens, label, _ = make_timelines(BATCH, gap, generator)
        loss = nn.functional.binary_cross_entropy_with_logits(model(tokens)[0], label)
        optimizer.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
    return model.eval()


def evaluate(model: nn.Module, gap: int) -> dict[str, float]:
    tokens, label, _ = make_timelines(500 if QUICK else 2000, gap, torch.Generator().manual_seed(7))
    with torch.no_grad():
        logit = model(tokens)[0]
    return {"accuracy": ((logit > 0).float() == label).float().mean().item(), "auc": roc_auc_score(label, logit)}


for name, cls in (("GRU", RecurrentAlert), ("attention", AttentionAlert)):
    torch.manual_seed(0)
    print(f"{name}: {sum(p.numel() for p in cls().parameters()):,} parameters")

# %% [markdown]
# ## Accuracy as the gap grows
#
# Each model is trained from scratch for every gap with the same budget (steps × batch), then evaluated on fresh
# timelines. A model that ignores day 1 can still reach 0.8 accuracy (alert on every high INR).

# %%
results, attention_models = {"GRU": {}, "attention": {}}, {}
for gap in GAPS:
    for name, cls in (("GRU", RecurrentAlert), ("attention", AttentionAlert)):
        torch.manual_seed(0)
        model = train(cls(), gap)
        results[name][gap] = evaluate(model, gap)
        if name == "attention":
            attention_models[gap] = model
        print(f"gap {gap:>3}: {name:>9} accuracy {results[name][gap]['accuracy']:.3f}, AUC {results[name][gap]['auc']:.3f}")

# %% [markdown]
# ## What the heads do at the result step
#
# For the model trained on the longest gap, take the attention weights of the query at the last step (the lab
# result) in every head, over timelines where an anticoagulant was given. The *retrieval* head is the one that
# puts the most weight on the day-1 drug; the *local* head is the one that puts the most weight on the last few
# events.

# %%
gap = GAPS[-1]
tokens, label, drug_at = make_timelines(500, gap, torch.Generator().manual_seed(11))
with torch.no_grad():
    weights = attention_models[gap](tokens, need_weights=True)[1][:, :, -1]  # (B, H, L): query = last step
given = torch.isin(tokens[torch.arange(len(tokens)), drug_at], ANTICOAGULANTS)
on_drug = weights[torch.arange(len(tokens)), :, drug_at][given].mean(0)  # (H,)
on_recent = weights[:, :, -3:].sum(-1).mean(0)  # (H,) last 3 events, itself included
retrieval_head = int(on_drug.argmax())
local_head = int(torch.where(torch.arange(len(on_recent)) == retrieval_head, -1.0, on_recent).argmax())
for head in range(weights.size(1)):
    role = {retrieval_head: "  <- retrieval", local_head: "  <- local"}.get(head, "")
    print(f"head {head}: weight on the day-1 drug {on_drug[head]:.2f}, on the last 3 events {on_recent[head]:.2f}{role}")

# %%
fig, axes = plt.subplots(1, 2, figsize=(13, 3.8), gridspec_kw={"width_ratios": [1, 2]})
for name, marker in (("GRU", "o"), ("attention", "s")):
    axes[0].plot(GAPS, [results[name][g]["accuracy"] for g in GAPS], marker + "-", label=name)
axes[0].axhline(0.8, color="k", ls=":", lw=0.8, label="ignore day 1")
axes[0].set(xscale="log", xlabel="steps between drug and lab result", ylabel="test accuracy", ylim=(0.45, 1.02))
axes[0].set_xticks(GAPS, [str(g) for g in GAPS], minor=False)
axes[0].minorticks_off()
axes[0].set_title("Alert accuracy vs gap")
axes[0].legend(fontsize=8)
index = int(torch.nonzero(given & (label == 1))[0])
positions = np.arange(tokens.size(1))
for head, color in ((retrieval_head, "C3"), (local_head, "C0")):
    role = "retrieval" if head == retrieval_head else "local"
    axes[1].plot(positions, weights[index, head], color=color, lw=1.2, label=f"head {head} ({role})")
axes[1].axvline(int(drug_at[index]), color="C3", ls="--", lw=0.8)
axes[1].annotate(VOCAB[tokens[index, drug_at[index]]], (int(drug_at[index]), 0.9), color="C3", xytext=(5, 0),
                 textcoords="offset points", xycoords=("data", "axes fraction"))  # fmt: skip
axes[1].annotate("lab_inr, result_high", (positions[-1], 0.9), color="C0", ha="right", xytext=(-5, 0),
                 textcoords="offset points", xycoords=("data", "axes fraction"))  # fmt: skip
axes[1].set(xlabel="position in the timeline", ylabel="attention weight", yscale="log", ylim=(1e-5, 1.5))
axes[1].set_title(f"Query at the result step, one alerting timeline (gap {gap})")
axes[1].legend(fontsize=8, loc="center")
for ax in axes:
    ax.grid(alpha=0.3)
fig.tight_layout()
plt.show()

# %% [markdown]
# ## Conclusion
#
# - With the same budget, the attention model stays near perfect at every gap, while the GRU, which must carry
#   the day-1 drug through every intermediate step, falls to the "ignore day 1" level (0.8) as the gap grows: it
#   learns the local rule (high INR) but not the long-range condition.
# - Inside the attention layer the heads divide the work: at the result step one head retrieves the day-1
#   anticoagulant hundreds of positions back, another stays on the last few events, where the lab name sits.
#   The feed-forward layer combines the two into the alert.

# %%
longest = GAPS[-1]
assert results["attention"][longest]["accuracy"] > 0.95, results
assert results["attention"][longest]["accuracy"] > results["GRU"][longest]["accuracy"] + 0.1, results
assert on_drug[retrieval_head] > 0.3 and on_recent[local_head] > 0.3, (on_drug, on_recent)
print("all conclusions hold")
