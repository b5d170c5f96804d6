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
