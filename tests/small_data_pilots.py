"""Small synthetic pilots of the kind a new user brings: tens of NIfTI CT volumes in Hounsfield units with a visible
lesion class, and a few hundred labelled FASTA sequences with a planted motif.

Used by the tests (tiny versions: ``tests/tasks/test_trust_on_small_data.py``, ``tests/tasks/ct/``; imported as
``tests.small_data_pilots``) and runnable as a script to write full-size pilots::

    python tests/small_data_pilots.py ct FOLDER [--volumes 40] [--seed 0] [--contrast 100 300] [--radius-mm 3 6]
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


def ct_volume(rng: np.random.Generator, lesion: bool, shape: tuple[int, int, int] = CT_SHAPE, *,
              contrast: tuple[float, float] = (100.0, 300.0), radius_mm: tuple[float, float] = (3.0, 6.0),
              noise: float = 15.0, spine: float | None = None,
              radius_voxels: tuple[float, float] | None = None) -> np.ndarray:
    """``shape`` float32 in Hounsfield units, on ``CT_SPACING`` voxels: air (-1000) around an ellipsoid body of soft
    tissue (40 HU) holding a brighter organ (60 HU), with Gaussian noise of sd ``noise`` HU inside the body;
    ``lesion``: a sphere of radius ``radius_mm`` (mm, uniform in the range; spherical in world space, so about 3x
    flatter in voxels along the thick z slices) ``contrast`` HU (uniform in the range) above the tissue around it,
    anywhere inside the body, its edge partial-volumed over one voxel. ``spine``: also a bright cylinder of this many HU
    (bone, e.g. 700) along z behind the centre of the body, in every volume. ``radius_voxels``: the lesion is a sphere
    of this radius in voxels instead (uniform in the range; so about 3x longer along the thick z slices in mm)."""
    spacing = np.asarray(CT_SPACING, dtype=np.float32)
    x, y, z = np.meshgrid(*(np.arange(n, dtype=np.float32) for n in shape), indexing="ij")
    cx, cy, cz = (np.array(shape) - 1) / 2 + rng.normal(0, 1.5, 3)
    body = ((x - cx) / (0.42 * shape[0])) ** 2 + ((y - cy) / (0.36 * shape[1])) ** 2 + ((z - cz) / (0.48 * shape[2])) ** 2 < 1
    volume = np.full(shape, -1000.0, dtype=np.float32)
    volume[body] = 40.0
    organ = ((x - cx - 6) / 8) ** 2 + ((y - cy) / 6) ** 2 + ((z - cz) / 5) ** 2 < 1
    volume[organ & body] = 60.0
    if spine is not None:
        volume[(((x - cx) / 4.5) ** 2 + ((y - cy + 0.22 * shape[1]) / 4.5) ** 2 < 1) & body] = spine
    if lesion:
        if radius_voxels is not None:
            spacing = np.ones(3, dtype=np.float32)  # the sphere lives on the voxel grid
        radius = rng.uniform(*(radius_voxels if radius_voxels is not None else radius_mm))
        # a centre whose whole sphere lies inside the body (the ellipsoid shrunk by the radius)
        semi = np.array([0.42 * shape[0], 0.36 * shape[1], 0.48 * shape[2]]) - radius / spacing - 1
        while True:
            offset = rng.uniform(-1, 1, 3)
            if (offset ** 2).sum() < 1:
                break
        lx, ly, lz = np.array([cx, cy, cz]) + offset * np.maximum(semi, 0)
        distance = np.sqrt(((x - lx) * spacing[0]) ** 2 + ((y - ly) * spacing[1]) ** 2 + ((z - lz) * spacing[2]) ** 2)
        # fraction of each voxel inside the sphere: 1 inside, 0 outside, linear over one in-plane voxel at the edge
        inside = np.clip((radius - distance) / spacing[0] + 0.5, 0, 1) * body
        volume += inside * rng.uniform(*contrast)
    volume += rng.normal(0, noise, shape).astype(np.float32) * body
    return volume


def write_ct_pilot(folder: Path, volumes: int = 40, seed: int = 0, shape: tuple[int, int, int] = CT_SHAPE,
                   new: int = 20, **lesion: tuple[float, float] | float) -> tuple[Path, Path]:
    """Write ``folder/labels.csv`` (``volumes`` NIfTI files, alternately ``normal`` / ``lesion``) and
    ``folder/new/labels.csv`` (``new`` more of the same kind); return both manifests. ``lesion``: ``contrast``,
    ``radius_mm`` and ``noise`` of :func:`ct_volume`."""
    import nibabel as nib

    rng = np.random.default_rng(seed)
    manifests = []
    for sub, count in (("", volumes), ("new", new)):
        target = folder / sub if sub else folder
        (target / "scans").mkdir(parents=True, exist_ok=True)
        rows = ["image,label"]
        for index in range(count):
            name = f"scans/case{index:03d}.nii.gz"
            nib.save(nib.Nifti1Image(ct_volume(rng, index % 2 == 1, shape, **lesion), ct_affine()), target / name)
            rows.append(f"{name},{'lesion' if index % 2 == 1 else 'normal'}")
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
    parser.add_argument("--contrast", type=float, nargs=2, default=(100.0, 300.0), metavar=("LOW", "HIGH"),
                        help="ct: lesion HU above the tissue around it, uniform in LOW..HIGH (default: 100 300)")
    parser.add_argument("--radius-mm", type=float, nargs=2, default=(3.0, 6.0), metavar=("LOW", "HIGH"),
                        help="ct: lesion radius in mm, uniform in LOW..HIGH (default: 3 6)")
    parser.add_argument("--radius-voxels", type=float, nargs=2, default=None, metavar=("LOW", "HIGH"),
                        help="ct: lesion radius in voxels (a sphere on the voxel grid) instead of --radius-mm")
    parser.add_argument("--spine", type=float, default=None, metavar="HU",
                        help="ct: a bright cylinder (bone) of this many HU in every volume (default: none)")
    parser.add_argument("--shape", type=int, nargs=3, default=CT_SHAPE, metavar=("X", "Y", "Z"),
                        help="ct: voxels per volume (default: 48 48 24)")
    parser.add_argument("--new", type=int, default=20, help="ct: volumes in new/labels.csv (default: 20)")
    args = parser.parse_args()
    if args.kind == "ct":
        print(*write_ct_pilot(args.folder, args.volumes, args.seed, tuple(args.shape), args.new,
                              contrast=tuple(args.contrast), radius_mm=tuple(args.radius_mm), spine=args.spine,
                              radius_voxels=tuple(args.radius_voxels) if args.radius_voxels else None))
    else:
        print(*write_promoter_pilot(args.folder, args.sequences, args.seed, length=args.length, mutation=args.mutation))


if __name__ == "__main__":
    main()
