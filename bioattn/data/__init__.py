"""Dataset readers and tokenizers (DNA, MSA, CT) and the data-root convention."""
from bioattn.data.root import resolve_data_root

__all__ = ["resolve_data_root"]
