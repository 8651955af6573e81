"""Planted-motif activity tables and what a default `bioattn train activity` run makes of them.

    python bench/activity_planted.py make OUT_DIR --set tata_gc --rows 360 --noise 0.5 --seed 0
    python bench/activity_planted.py measure RUN_DIR OUT_DIR/train.tsv OUT_DIR/new.tsv

``make`` writes ``train.tsv`` (``--rows`` sequences) and ``new.tsv`` (200 more, drawn the same way): random
sequences of ``--length`` nt with 0-3 copies of each motif of the set planted at random places, the value a known
linear function of the copy counts plus Gaussian noise (sd ``--noise``). ``measure`` predicts ``new.tsv`` with
the run's saved model and prints its Pearson on the new sequences, the largest |z| of its predictions against the
training values, and the Pearson of k-mer ridges tuned as a scikit-learn user would (counts of k = 1..6,
``GridSearchCV`` over a log grid of alphas with 5-fold CV on the training rows), scaled and unscaled.
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

#: Motif sets: (name, site, weight per copy). TATA and GC boxes are in JASPAR; "odd" sites are in no database.
SETS = {
    "tata_gc": [("TATA", "TATAAAAG", 1.6), ("GC", "GGGGCGGGG", 1.2), ("AP1", "TGACTCA", -0.9)],
    "odd": [("odd1", "ACGTTGCAAT", 1.4), ("odd2", "GATCCTAGGA", -1.1), ("odd3", "CCATATGGTT", 0.8)],
    "mixed": [("CAAT", "GGCCAATCT", 1.0), ("odd1", "ACGTTGCAAT", 1.3), ("ETS", "CCGGAAGT", 0.7),
              ("REST", "TTCAGCACCATGGACAG", -1.5)],
}


def planted_table(rows: int, motifs: list[tuple[str, str, float]], length: int, noise: float,
                  rng: np.random.Generator) -> tuple[list[str], np.ndarray]:
    sequences, values = [], []
    for _ in range(rows):
        letters = list(rng.choice(list("ACGT"), length))
        value, taken = 0.0, np.zeros(length, dtype=bool)
        for _name, site, weight in motifs:
            copies = int(rng.integers(0, 4))
            for _ in range(copies):
                for _try in range(20):
                    start = int(rng.integers(0, length - len(site)))
                    if not taken[start : start + len(site)].any():
                        letters[start : start + len(site)] = site
                        taken[start : start + len(site)] = True
                        value += weight
                        break
        sequences.append("".join(letters))
        values.append(value + noise * rng.normal())
    return sequences, np.array(values)


def write(path: Path, sequences: list[str], values: np.ndarray) -> None:
    with open(path, "w") as handle:
        handle.write("id\tsequence\tactivity\n")
        for i, (s, v) in enumerate(zip(sequences, values)):
            handle.write(f"s{i}\t{s}\t{v:.4f}\n")


def make(args: argparse.Namespace) -> None:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(args.seed)
    motifs = SETS[args.set]
    train = planted_table(args.rows, motifs, args.length, args.noise, rng)
    new = planted_table(200, motifs, args.length, args.noise, rng)
    write(out / "train.tsv", *train)
    write(out / "new.tsv", *new)
    print(f"{out}: {args.rows} + 200 rows, values {train[1].min():.2f}..{train[1].max():.2f}")


def read(path: Path) -> tuple[list[str], np.ndarray]:
    lines = Path(path).read_text().splitlines()[1:]
    rows = [line.split("\t") for line in lines]
    return [r[1] for r in rows], np.array([float(r[2]) for r in rows])


def tuned_kmer_ridges(train: tuple[list[str], np.ndarray], new: tuple[list[str], np.ndarray]) -> dict[str, float]:
    from sklearn.feature_extraction.text import CountVectorizer
    from sklearn.linear_model import Ridge
    from sklearn.model_selection import GridSearchCV, KFold
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    out = {}
    for label, scale in (("scaled", True), ("unscaled", False)):
        steps = [CountVectorizer(analyzer="char", ngram_range=(1, 6), lowercase=False)]
        steps += [StandardScaler(with_mean=False)] if scale else []
        pipe = make_pipeline(*steps, Ridge())
        search = GridSearchCV(pipe, {"ridge__alpha": np.logspace(-2, 7, 19)}, cv=KFold(5, shuffle=True, random_state=0))
        search.fit(train[0], train[1])
        out[label] = float(np.corrcoef(search.predict(new[0]), new[1])[0, 1])
        out[f"{label}_alpha"] = float(search.best_params_["ridge__alpha"])
    return out


def measure(args: argparse.Namespace) -> None:
    train, new = read(Path(args.train)), read(Path(args.new))
    with tempfile.TemporaryDirectory() as tmp:
        output = Path(tmp) / "predictions.tsv"
        subprocess.run([sys.executable, "-m", "bioattn.cli", "predict", "activity", "--model", args.run,
                        "--input", args.new, "--output", str(output), "--device", "cpu"], check=True)
        lines = output.read_text().splitlines()
    header = lines[0].split("\t")
    column = header.index("activity")
    predicted = np.array([float(line.split("\t")[column]) for line in lines[1:]])
    z = np.abs(predicted - train[1].mean()) / train[1].std()
    ridges = tuned_kmer_ridges(train, new)
    print(f"model Pearson on new {np.corrcoef(predicted, new[1])[0, 1]:.3f}; max |z| {z.max():.2f}; "
          f"k-mer ridge (GridSearchCV) scaled {ridges['scaled']:.3f} (alpha {ridges['scaled_alpha']:g}), "
          f"unscaled {ridges['unscaled']:.3f} (alpha {ridges['unscaled_alpha']:g})")


def smoke() -> None:
    """A tiny table and its tuned k-mer ridges (no training): that ``make`` and the baseline of ``measure`` run."""
    rng = np.random.default_rng(0)
    motifs = SETS["tata_gc"]
    train, new = planted_table(60, motifs, 80, 0.5, rng), planted_table(30, motifs, 80, 0.5, rng)
    ridges = tuned_kmer_ridges(train, new)
    print(f"smoke: 60 + 30 rows of 80 nt; k-mer ridge (GridSearchCV) on new, scaled {ridges['scaled']:.3f}, "
          f"unscaled {ridges['unscaled']:.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="a tiny table and its tuned k-mer ridges, no training")
    commands = parser.add_subparsers(dest="command")
    p = commands.add_parser("make")
    p.add_argument("out")
    p.add_argument("--set", choices=list(SETS), default="tata_gc")
    p.add_argument("--rows", type=int, default=360)
    p.add_argument("--length", type=int, default=200)
    p.add_argument("--noise", type=float, default=0.5)
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(func=make)
    p = commands.add_parser("measure")
    p.add_argument("run")
    p.add_argument("train")
    p.add_argument("new")
    p.set_defaults(func=measure)
    args = parser.parse_args()
    if args.smoke:
        smoke()
    elif args.command is None:
        parser.error("a command (make or measure) or --smoke is required")
    else:
        args.func(args)


if __name__ == "__main__":
    main()
