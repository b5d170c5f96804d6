"""numba's compile cache, kept fresh for a whole folder of sources at once.

Why. numba keys a cached kernel by its own source file alone. A kernel that
inlines or calls code from another module (``summing``'s counting loop
inlines ``scanner.piece_end``; ``merge`` calls ``segment``'s table lookups)
is not compiled again when only that other module changes: it goes on
running the old code, and nothing says so. An installed package is safe
(every file is rewritten on upgrade); a checkout updated with ``git pull``
is not.

What this does. ``keep_fresh(folder)`` puts, in front of each of numba's
cache locators, a twin that answers only for the ``.py`` files under
``folder`` (sub-packages included) and whose source stamp adds a digest of
all of them: any change to any file there compiles every kernel of the
folder again. The cached files stay where numba puts them (``__pycache__``
beside the sources, or under ``$NUMBA_CACHE_DIR``). ``toktoktok/__init__.py``
calls it for this package before any kernel is defined (numba picks a
kernel's locator when the kernel is decorated). Should a numba release
rename the internals used here, ``keep_fresh`` returns False and numba's own
keys apply.

    >>> from toktoktok import scanner
    >>> scanner.scan_kernel._cache._impl._locator.get_source_stamp()[1] == source_digest(PACKAGE)
    True
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

PACKAGE = Path(__file__).resolve().parent


def source_digest(folder: Path) -> str:
    """sha256 over the paths (relative to ``folder``) and bytes of every ``.py``
    file under ``folder``, sub-folders included."""
    h = hashlib.sha256()
    for rel in sorted(_sources(folder)):
        h.update(rel.encode() + b"\0")
        h.update((folder / rel).read_bytes() + b"\0")
    return h.hexdigest()


def _sources(folder: Path) -> list[str]:
    """The ``/``-separated paths, relative to ``folder``, of the ``.py`` files under it."""
    found = []
    for top, dirs, files in os.walk(folder):
        dirs[:] = [d for d in dirs if d != "__pycache__"]  # no sources there, but every compiled kernel
        rel = os.path.relpath(top, folder).replace(os.sep, "/")
        prefix = "" if rel == "." else rel + "/"
        found += [prefix + name for name in files if name.endswith(".py")]
    return found


class FolderKeyed:
    """Marks the locators ``keep_fresh`` made (``folder``, ``digest``: what they answer for)."""

    folder: Path
    digest: str


def _twin(base: type, folder: Path, digest: str) -> type:
    """A subclass of numba locator ``base`` for the files under ``folder``, stamped with ``digest``."""

    class Twin(FolderKeyed, base):  # type: ignore[misc, valid-type]
        @classmethod
        def from_function(cls, py_func: Any, py_file: str) -> Any:
            if not Path(py_file).resolve().is_relative_to(cls.folder):
                return None
            return super().from_function(py_func, py_file)

        def get_source_stamp(self) -> Any:
            return (super().get_source_stamp(), self.digest)

    Twin.folder, Twin.digest = folder, digest
    Twin.__name__ = Twin.__qualname__ = f"FolderKeyed{base.__name__}"
    return Twin


def keep_fresh(folder: Path) -> bool:
    """Key numba's cache of every kernel defined under ``folder`` by all its sources
    (once per folder; later calls change nothing). False if numba's internals
    are not the ones this knows."""
    try:
        from numba.core import caching

        classes = caching.CacheImpl._locator_classes
    except (ImportError, AttributeError):
        return False
    folder = folder.resolve()
    if any(issubclass(c, FolderKeyed) and c.folder == folder for c in classes):
        return True
    digest = source_digest(folder)
    classes[:0] = [_twin(c, folder, digest) for c in classes if not issubclass(c, FolderKeyed)]
    return True


# The kernels Python calls on the paths of ``toktok run`` and ``toktoktok.train``
# (the others are compiled inside them): one without a cached entry for the
# current sources means the next run compiles.
ENTRY_KERNELS = (
    ("toktoktok.documents", "doc_ends"),
    ("toktoktok.documents", "valid_utf8"),
    ("toktoktok.sources.jsonl_scan", "scan_jsonl"),
    ("toktoktok.sources.file_packs", "_read_pack"),
    ("toktoktok.summing", "_count_text"),
    ("toktoktok.summing", "_add_rows"),
    ("toktoktok.piece_order", "_order"),
    ("toktoktok.segment", "_segment_all"),
    ("toktoktok.merge", "_train_kernel"),
)


def cold_kernels() -> list[str]:
    """The entry kernels (``ENTRY_KERNELS``) numba's cache holds no entry of for the
    current sources, by the index file numba itself reads (empty: warm). Loads
    the kernels' modules, compiles nothing; a kernel without a cache counts as warm."""
    import importlib

    cold = []
    for module, name in ENTRY_KERNELS:
        kernel = getattr(importlib.import_module(module), name)
        index_file = getattr(getattr(kernel, "_cache", None), "_cache_file", None)
        if index_file is None:
            continue
        try:
            entries = index_file._load_index()
        except Exception:  # an unreadable index is one numba would compile over
            entries = {}
        if not entries:
            cold.append(f"{module}.{name}")
    return cold


def compile_counts() -> tuple[int, int]:
    """``(compiled, loaded)``: the kernel signatures this process compiled, and
    those it loaded from numba's cache, over every kernel of this package."""
    import sys

    from numba.core.registry import CPUDispatcher

    compiled = loaded = 0
    for name, module in list(sys.modules.items()):
        if not (name == "toktoktok" or name.startswith("toktoktok.")):
            continue
        for value in list(vars(module).values()):
            if isinstance(value, CPUDispatcher) and value.py_func.__module__ == name:
                compiled += sum(value.stats.cache_misses.values())
                loaded += sum(value.stats.cache_hits.values())
    return compiled, loaded
