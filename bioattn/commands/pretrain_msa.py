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
from pathlib import Path

from bioattn.commands.common import add_device_argument


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from bioattn.models.msa_contact import POSITIONAL_ENCODINGS
    from bioattn.tasks.msa.pretrain import EXCLUDE_STRUCTURES, PRETRAIN_DEFAULTS, PretrainOptions
    from bioattn.commands.training_args import add_training_args
    from bioattn.commands.vocabulary import add_alias

    defaults = PretrainOptions()
    data = parser.add_argument_group("data")
    data.add_argument("--out", type=Path, required=True, help="output run directory")
    data.add_argument("--data-root", default=None, help="data root (default: $BIOATTN_DATA_ROOT or ../shared/data)")
    data.add_argument("--exclude", default=EXCLUDE_STRUCTURES,
                      help="families never read: 'structures' (every msa/coev and msa/pfam family, i.e. every evaluated "
                           "one), 'none', or comma-separated family names / Pfam accessions (default: %(default)s)")
    rows = data.add_argument("--max-rows", dest="max_seqs", type=int, default=defaults.max_seqs,
                             help="random rows kept per alignment (default: %(default)s)")
    add_alias(data, rows, "--max-seqs", "--max-sequences")
    data.add_argument("--rows", type=int, default=defaults.rows, help="alignment rows per training block (default: %(default)s)")
    data.add_argument("--max-columns", type=int, default=defaults.max_columns,
                      help="longer alignments are cropped to a random window of this many columns (default: %(default)s)")
    model = parser.add_argument_group("model")
    model.add_argument("--embed-dim", type=int, default=defaults.embed_dim, help="model width (default: %(default)s)")
    model.add_argument("--heads", type=int, default=defaults.heads, help="attention heads per layer (default: %(default)s)")
    model.add_argument("--layers", type=int, default=defaults.layers, help="axial layers (default: %(default)s)")
    model.add_argument("--dropout", type=float, default=defaults.dropout, help="dropout (default: %(default)s)")
    model.add_argument("--positional", choices=POSITIONAL_ENCODINGS, default=defaults.positional,
                       help="column positions: sinusoidal (defined beyond the training crops) or learned (default: %(default)s)")
    model.add_argument("--quick", action="store_true", help="tiny settings for a smoke test (seconds) (default: off)")
    add_training_args(parser, PRETRAIN_DEFAULTS)
    add_device_argument(parser)


def run(args: argparse.Namespace) -> int:
    import dataclasses

    from bioattn.data import resolve_data_root
    from bioattn.tasks.msa.pretrain import (
        EXCLUDE_NONE, EXCLUDE_STRUCTURES, PRETRAIN_DEFAULTS, PretrainOptions, pretrain, quick_pretrain_config,
    )
    from bioattn.commands.training_args import config_from_args

    names = {f.name for f in dataclasses.fields(PretrainOptions)}
    options = PretrainOptions(**{k: v for k, v in vars(args).items() if k in names})
    config = config_from_args(args, PRETRAIN_DEFAULTS)
    if args.quick:
        options, config = options.quick(), quick_pretrain_config(config)
    exclude = args.exclude if args.exclude in (EXCLUDE_STRUCTURES, EXCLUDE_NONE) else \
        [name.strip() for name in args.exclude.split(",") if name.strip()]
    metrics = pretrain(resolve_data_root(args.data_root), args.out, options, config, exclude)
    mean = metrics["held_out_mean"]
    held = f"held-out masked-token loss {mean['loss']:.3f}, accuracy {mean['accuracy']:.3f}; " if mean else ""
    print(f"pretrained on {len(metrics['trained_on'])} alignments ({held}excluded: {', '.join(metrics['excluded']) or 'none'}); "
          f"wrote {args.out}/model.safetensors, metrics.json")
    return 0
