"""toktoktok: a multi-phase byte-level BPE trainer for tiktoken."""
__version__ = "0.1.0"

from toktoktok.api import train
from toktoktok.loading import load

__all__ = ["__version__", "load", "train"]
