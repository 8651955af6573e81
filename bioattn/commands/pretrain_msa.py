"""Pretrain one axial MSA model across many alignments by masked-token prediction (no contacts, no structures).

    bioattn pretrain msa --out RUN_DIR [--data-root DIR] [--exclude structures|none|A,B] [--max-minutes M] [--quick]

Reads every alignment under the data root's msa/unlabeled (A2M, aligned FASTA, ...; .gz accepted) and the
msa/coev and msa/pfam families not excluded. --exclude structures (the default) leaves out every family with a
structure, i.e. every family that 'bioattn train msa --all' evaluates, and every unlabeled alignment of the same
Pfam accession (e.g. PF13354's full and seed alignments): one pretrained model is then honest for all of them.
Excluded files are never read. Each step draws one alignment (probability ∝ √Neff at 80 % identity), a block
of --rows rows by weight and, when the alignment is longer, a random window of --max-columns columns; the
model (sinusoidal positions by default) is early-stopped on the masked-token loss of held-out rows.

Writes config.json + model.safetensors (load it with MSAContactModel.from_pretrained(RUN_DIR), or start
'bioattn train msa --init-from RUN_DIR' from it), metrics.json (per alignment: rows, Neff, sampling
probability, held-out masked-token loss and accuracy; the excluded families), train_log.csv,
training_curve.png and checkpoints (--resume continues).
"""
from __future__ import annotations

import argparse

from bioattn.commands.msa_args import add_pretrain_arguments as add_arguments, pretrain_options_from_args

__all__ = ["add_arguments", "run"]


def run(args: argparse.Namespace) -> int:
    from bioattn.tasks.msa.pretrain import pretrain, pretrain_report

    options, config, exclude = pretrain_options_from_args(args)
    metrics = pretrain(args.data_root, args.out, options, config, exclude)
    print(pretrain_report(metrics, args.out))
    return 0
