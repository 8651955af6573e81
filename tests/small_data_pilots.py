"""Small synthetic pilots of the kind a new user brings: tens of NIfTI CT volumes in Hounsfield units with a visible
lesion class, and a few hundred labelled FASTA sequences with a planted motif.

Used by ``tests/test_small_data.py`` (tiny versions) and runnable as a script to write full-size pilots::

    python tests/small_data_pilots.py ct FOLDER [--volumes 40] [--seed 0]      # FOLDER/labels.csv + new/labels.csv
    python tests/small_data_pilots.py promoter FOLDER [--sequences 400] [--seed 0]   # FOLDER/my.fa + new.fa

then ``bioattn train ct --manifest FOLDER/labels.csv --out R`` / ``bioattn train promoter --train FOLDER/my.fa --out R``
with the defaults, and ``bioattn predict`` on the ``new`` files (labels known, never trained on).
"""
from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

#: Voxel spacing (mm) and a non-identity affine: x flipped, thick slices, an offset origin.
CT_SPACING = (0.8, 0.8, 2.5)
CT_SHAPE = (48, 48, 24)
MOTIF = "TGACGTCATATAAGG"


def ct_affine() -> np.ndarray:
    """The pilots' affine: x flipped, ``CT_SPACING`` mm voxels, origin off zero."""
    sx, sy, sz = CT_SPACING
    return np.array([[-sx, 0, 0, 120.0], [0, sy, 0, -80.0], [0, 0, sz, 40.0], [0, 0, 0, 1.0]])


def ct_volume(rng: np.random.Generator, lesion: bool, shape: tuple[int, int, int] = CT_SHAPE) -> np.ndarray:
    """``shape`` float32 in Hounsfield units: air (-1000) around an ellipsoid body of soft tissue (40 HU, noise sd 15)
    holding a brighter organ; ``lesion``: a sphere of 100 HU (radius 3-5 voxels in-plane) somewhere in the body."""
    x, y, z = np.meshgrid(*(np.arange(n, dtype=np.float32) for n in shape), indexing="ij")
    cx, cy, cz = (np.array(shape) - 1) / 2 + rng.normal(0, 1.5, 3)
    body = ((x - cx) / (0.42 * shape[0])) ** 2 + ((y - cy) / (0.36 * shape[1])) ** 2 + ((z - cz) / (0.48 * shape[2])) ** 2 < 1
    volume = np.full(shape, -1000.0, dtype=np.float32)
    volume[body] = 40.0
    organ = ((x - cx - 6) / 8) ** 2 + ((y - cy) / 6) ** 2 + ((z - cz) / 5) ** 2 < 1
    volume[organ & body] = 60.0
    if lesion:
        radius = rng.uniform(3.0, 5.0)
        lx, ly = cx + rng.uniform(-9, 9), cy + rng.uniform(-7, 7)
        lz = cz + rng.uniform(-4, 4)
        sphere = ((x - lx) / radius) ** 2 + ((y - ly) / radius) ** 2 + ((z - lz) / (radius * CT_SPACING[0] / CT_SPACING[2] + 1)) ** 2 < 1
        volume[sphere & body] = 100.0
    volume += rng.normal(0, 15, shape).astype(np.float32) * body
    return volume


def write_ct_pilot(folder: Path, volumes: int = 40, seed: int = 0, shape: tuple[int, int, int] = CT_SHAPE,
                   new: int = 20) -> tuple[Path, Path]:
    """Write ``folder/labels.csv`` (``volumes`` NIfTI files, alternately ``normal`` / ``lesion``) and
    ``folder/new/labels.csv`` (``new`` more of the same kind); return both manifests."""
    import nibabel as nib

    rng = np.random.default_rng(seed)
    manifests = []
    for sub, count in (("", volumes), ("new", new)):
        target = folder / sub if sub else folder
        (target / "scans").mkdir(parents=True, exist_ok=True)
        rows = ["image,label"]
        for index in range(count):
            lesion = index % 2 == 1
            name = f"scans/case{index:03d}.nii.gz"
            nib.save(nib.Nifti1Image(ct_volume(rng, lesion, shape), ct_affine()), target / name)
            rows.append(f"{name},{'lesion' if lesion else 'normal'}")
        (target / "labels.csv").write_text("\n".join(rows) + "\n")
        manifests.append(target / "labels.csv")
    return manifests[0], manifests[1]


def promoter_sequences(rng: np.random.Generator, count: int, length: int = 120, motif: str = MOTIF,
                       mutation: float = 0.1) -> list[tuple[str, int]]:
    """``count`` (sequence, label) pairs, alternately 0 and 1: random DNA (GC 45 %) of ``length`` nt; class 1 holds
    ``motif`` (each base mutated with probability ``mutation``) at a random position, on a random strand."""
    complement = str.maketrans("ACGT", "TGCA")
    pairs = []
    for index in range(count):
        label = index % 2
        seq = list(rng.choice(list("ACGT"), size=length, p=[0.275, 0.225, 0.225, 0.275]))
        if label:
            planted = "".join(b if rng.random() > mutation else rng.choice(list("ACGT")) for b in motif)
            if rng.random() < 0.5:
                planted = planted.translate(complement)[::-1]
            start = int(rng.integers(0, length - len(motif)))
            seq[start:start + len(motif)] = list(planted)
        pairs.append(("".join(seq), label))
    return pairs


def write_promoter_pilot(folder: Path, sequences: int = 400, seed: int = 0, new: int = 200,
                         length: int = 120, mutation: float = 0.1) -> tuple[Path, Path]:
    """Write ``folder/my.fa`` (``sequences`` labelled records, ``>seqN label=0|1``) and ``folder/new.fa`` (``new``
    more of the same kind); return both."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, count in (("my.fa", sequences), ("new.fa", new)):
        pairs = promoter_sequences(rng, count, length, mutation=mutation)
        text = "".join(f">seq{i} label={label}\n{seq}\n" for i, (seq, label) in enumerate(pairs))
        (folder / name).write_text(text)
        paths.append(folder / name)
    return paths[0], paths[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("kind", choices=("ct", "promoter"))
    parser.add_argument("folder", type=Path)
    parser.add_argument("--volumes", type=int, default=40)
    parser.add_argument("--sequences", type=int, default=400)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--length", type=int, default=120)
    parser.add_argument("--mutation", type=float, default=0.1)
    args = parser.parse_args()
    if args.kind == "ct":
        print(*write_ct_pilot(args.folder, args.volumes, args.seed))
    else:
        print(*write_promoter_pilot(args.folder, args.sequences, args.seed, length=args.length, mutation=args.mutation))


if __name__ == "__main__":
    main()
