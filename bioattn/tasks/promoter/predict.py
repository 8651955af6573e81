"""Score the sequences of a FASTA/CSV file with a promoter model, one output row per sequence."""
from __future__ import annotations

import itertools
import os
import sys
from collections import Counter
from pathlib import Path

from bioattn.data.dna import read_records
from bioattn.errors import UserInputError
from bioattn.io import table_writer
from bioattn.models.promoter import PromoterClassifier
from bioattn.progress import progress_bar
from bioattn.tasks.promoter.composition import composition_warnings

#: Records read (and length-sorted) at a time, in batches.
CHUNK_BATCHES = 8
#: ``warning:`` lines printed at most; the ``warning`` column has them all.
MAX_WARNING_LINES = 20


def prediction_header(model: PromoterClassifier, *, warning: bool = False) -> list[str]:
    """The output columns for ``model``; ``warning``: with the composition column."""
    probabilities = ["promoter_probability"] if model.binary else [f"p_{name}" for name in model.class_names]
    return ["id", *probabilities, "predicted_label", *(["warning"] if warning else [])]


def predict_file(model: PromoterClassifier, source: Path, output: str | os.PathLike, *, batch_size: int = 256,
                 rc_average: bool | None = None, composition: dict | None = None) -> Counter:
    """Write one row per record of ``source`` to ``output`` (CSV; TSV for ``.tsv``); the count per predicted class.
    ``composition``: :func:`~bioattn.tasks.promoter.composition.load_composition`'s, to check each record against."""
    counts: Counter = Counter()
    flagged = 0
    records = read_records(source)
    with table_writer(output, prediction_header(model, warning=composition is not None)) as write_row, \
            progress_bar(desc="predict", unit="seq", leave=False) as bar:
        while chunk := list(itertools.islice(records, batch_size * CHUNK_BATCHES)):
            tokens = []
            for record in chunk:
                ids = record.tokens(source)
                if len(ids) > model.max_len:
                    raise UserInputError(
                        f"{source}: {record.describe()}: sequence is {len(ids)} nt long; this model accepts at most "
                        f"{model.max_len} nt (its training length); score longer sequences in windows with --window")
                tokens.append(ids)
            probs = model.predict_tokens(tokens, batch_size=batch_size, rc_average=rc_average)
            classes = model.predicted_classes(probs)
            for record, prob, predicted in zip(chunk, probs, classes):
                values = [prob] if model.binary else list(prob)
                label = model.class_names[predicted]
                if composition is None:
                    write_row([record.id, *values, label])
                else:
                    problems = composition_warnings(composition, record.sequence)
                    write_row([record.id, *values, label, "; ".join(problems)])
                    flagged += bool(problems)
                    if problems and flagged <= MAX_WARNING_LINES:
                        print(f"warning: {source}: {record.describe()}: {'; '.join(problems)}; its probability may "
                              "mean little", file=sys.stderr)
                counts[label] += 1
            bar.update(len(chunk))
    if flagged > MAX_WARNING_LINES:
        print(f"warning: {flagged - MAX_WARNING_LINES} more sequences differ from the training sequences (see the "
              "warning column)", file=sys.stderr)
    return counts
