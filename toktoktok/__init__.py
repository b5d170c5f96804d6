"""toktoktok: a multi-phase byte-level BPE trainer for tiktoken."""
__version__ = "0.1.0"

# before any kernel is defined: numba's cache of them is keyed by all of this
# package's sources, not each kernel's own file alone (see jit_cache)
from toktoktok.jit_cache import PACKAGE as _PACKAGE
from toktoktok.jit_cache import keep_fresh as _keep_fresh

_keep_fresh(_PACKAGE)

from toktoktok.api import train  # noqa: E402
from toktoktok.loading import load  # noqa: E402

__all__ = ["__version__", "load", "train"]
