"""Tasks: everything between the data/models and the commands, importable by users.

- :mod:`bioattn.tasks.promoter`: DNA sequence classification (bundled GUE / E. coli benchmarks or your own
  labelled FASTA/CSV), its baselines (GC-content threshold, k-mer logistic regression) and genome scans.
- :mod:`bioattn.tasks.ct`: 3D volume classification (MedMNIST 3D or your own NIfTI/DICOM + labels CSV), the
  MONAI ResNet baseline and the training protocols.
- :mod:`bioattn.tasks.msa`: contact prediction from an alignment (coevolution baselines, the axial model, the
  contact head and its ``contact_head.json`` schema); :mod:`bioattn.tasks.msa.pretrain`: cross-family
  masked-token pretraining of the axial model.
- :mod:`bioattn.tasks.common`: what the three tasks share (option checks, timed fits, ensembles on disk).
- :mod:`bioattn.tasks.trust`: what every classification summary says about its validation numbers (confusion
  matrix and threshold, bootstrap interval on small splits, single-class / chance / beaten-by-baseline warnings).

Each task is a subpackage whose ``train`` module holds its options and runs; the subpackage re-exports those names
(``from bioattn.tasks.ct import CTOptions``). The flat module names of release 0.3 (``bioattn.tasks.ct_data``,
``bioattn.tasks.msa_head``, ...) still import, with a :class:`DeprecationWarning` naming the new module, for one
release.

Each task module imports from :mod:`bioattn.attention`, :mod:`bioattn.models`, :mod:`bioattn.data`,
:mod:`bioattn.training` and the shared :mod:`bioattn.metrics` / :mod:`bioattn.report` / :mod:`bioattn.io`, never
from :mod:`bioattn.explain` (which builds on the tasks), :mod:`bioattn.commands` or :mod:`bioattn.cli`.
"""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import warnings
from typing import Any, Callable

#: Release 0.3's flat module names and the modules that replace them.
MOVED_MODULES: dict[str, str] = {
    "promoter_data": "promoter.data", "promoter_scan": "promoter.scan", "promoter_predict": "promoter.predict",
    "promoter_predict_run": "promoter.predict_run", "promoter_pretrain": "promoter.pretrain",
    "promoter_baselines": "promoter.baselines", "dna_composition": "promoter.composition",
    "ct_data": "ct.data", "ct_predict": "ct.predict", "ct_predict_run": "ct.predict_run",
    "ct_preprocessing": "ct.preprocessing",
    "msa_compare": "msa.compare", "msa_esm": "msa.esm", "msa_features": "msa.features", "msa_head": "msa.head",
    "msa_predict": "msa.predict", "msa_pretrain": "msa.pretrain",
}


def reexport(package: str, module: str) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package`` that answers with the names of ``module``, imported on first use."""

    def __getattr__(name: str) -> Any:
        if not name.startswith("__"):
            target = importlib.import_module(module)
            if hasattr(target, name):
                return getattr(target, name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return __getattr__


class _MovedModuleFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports ``bioattn.tasks.<old name>`` as the module that replaced it, with a :class:`DeprecationWarning`."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        package, _, name = fullname.rpartition(".")
        if package != __name__ or name not in MOVED_MODULES:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec: Any) -> Any:
        new = f"{__name__}.{MOVED_MODULES[spec.name.rpartition('.')[2]]}"
        warnings.warn(f"{spec.name} is deprecated and will be removed in the next release; import {new}",
                      DeprecationWarning, stacklevel=2)
        return importlib.import_module(new)

    def exec_module(self, module: Any) -> None:
        """The replacing module is already executed."""


if not any(isinstance(finder, _MovedModuleFinder) for finder in sys.meta_path):
    sys.meta_path.append(_MovedModuleFinder())
