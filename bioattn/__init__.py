"""bioattn: multi-head attention for genomics and medical imaging."""

__version__ = "0.5.0"
