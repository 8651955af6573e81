"""Train the DNA promoter classifier (GUE, E. coli or your own labelled sequences) beside trivial baselines.

    bioattn train promoter --task prom_core_all --out RUN_DIR [--max-minutes M] [--quick]
    bioattn train promoter --train my.csv [--dev dev.csv] [--test test.fa] --out RUN_DIR
    bioattn train promoter --task prom_core_all --seeds 0 1 2 --out RUN_DIR     # an ensemble of 3 seeds
    bioattn train promoter --train my.csv --cv 5 --out RUN_DIR                 # 5-fold CV, fold models = ensemble

Bundled tasks (read under --data-root): prom_core_all (default), prom_core_notata, prom_core_tata,
prom_300_tata (GUE; train.csv, early stopping on dev.csv MCC, also scored on test.csv when present) and
ecoli_sigma70 (5-fold CV with the case and header label leaks removed). Download them with
'bioattn data fetch gue' / 'bioattn data fetch ecoli_sigma70'. Without a data root (or one lacking the task),
--quick on prom_core_all uses a sample shipped with bioattn (2,000 train + 500 dev GUE sequences) and says so;
other runs stop with an error.

Your own data (--train, instead of --task): CSV/TSV with columns sequence,label (optional id) or FASTA with
the label in the description ('>seq7 label=1'; only the 'label=' field of a header is read), plain or .gz.
Labels may be any text or integers; two classes give a sigmoid model (the second label in sorted order is
the positive class, e.g. 1 of 0/1), more give a softmax model. Sequences are upper-cased before tokenising
and may differ in length up to --max-length (default: the longest training sequence); training batches
group sequences of similar length. Without --dev, a seeded stratified 10% of the training file is the dev
set, with identical sequences kept on one side. Strands: your own data and E. coli default to random reverse
complements in training and both strands averaged in prediction (sequences of unknown orientation); the GUE
tasks, oriented on the transcription start, default to neither. --rc-augment / --no-rc-augment overrides.
--pretrain-epochs N first trains the encoder to predict masked nucleotides of the training sequences (no labels,
dev and test unused; into <member>/pretrain/), masking a --pretrain-mask fraction of them, then fine-tunes at a
lower --lr; the three 70-nt GUE tasks pretrain by default (each flag's help lists the per-task defaults).

Writes into RUN_DIR: config.json + model.safetensors (for 'bioattn predict promoter', which reproduces this
run's numbers without extra flags), metrics.json, summary.md, training_curve.png, train_log.csv, checkpoint/
(--resume continues an interrupted run). With --seeds or --cv, one complete run directory per member
(seed<S>/ or fold<k>/) and a config.json that makes RUN_DIR load as their ensemble (mean probability) in
predict, explain and from_pretrained. Runs under torchrun unchanged (members train one after another).
"""
from __future__ import annotations

import argparse

from bioattn.commands.promoter_args import add_train_arguments as add_arguments, train_options_from_args
from bioattn.distributed import is_main_process

__all__ = ["add_arguments", "run"]


def run(args: argparse.Namespace) -> int:
    from bioattn.tasks.promoter.task import TASK
    from bioattn.tasks.promoter.report import format_report

    options, config = train_options_from_args(args)
    metrics = TASK.run(options, config)
    if is_main_process():
        print(format_report(metrics))
        print(f"model, metrics.json, summary.md and training_curve.png written to {options.out}")
    return 0
