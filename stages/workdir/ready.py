"""The one check before work that is the work folder's: the output's folder and
the work folder can be written (a ``ConfigError`` naming the key). What needs
the config's other files (the warm start, ``vocab_size`` fitted to it, the
sources) is ``toktoktok.config.preflight``; ``Work.check_ready`` runs both.

    >>> _unwritable(Path(__file__) / "out")  # doctest: +ELLIPSIS
    'needs the folder .../ready.py/out, but .../ready.py is a file'
"""

from __future__ import annotations

import os
from pathlib import Path

from toktoktok.config import Config, config_error, default_work_dir


def check_writable(cfg: Config) -> None:
    """The output's folder and the work directory must be writable (or creatable)."""
    work_key = "output" if cfg.work_dir == default_work_dir(cfg.output) else "work_dir"
    for key, folder in (("output", cfg.output.parent), (work_key, cfg.work_dir)):
        problem = _unwritable(folder)
        if problem:
            raise config_error(cfg.path, (key,), problem)


def _unwritable(folder: Path) -> str | None:
    """Why files cannot be written in ``folder`` (created if need be), or None.

    Checked on the nearest folder that exists, with ``os.access`` (which
    knows read-only file systems) so nothing is created here.
    """
    existing = folder
    try:
        while not existing.exists() and existing != existing.parent:
            existing = existing.parent
        is_dir = existing.is_dir()
    except OSError as exc:  # a parent that cannot be searched
        return f"cannot be written: {exc.filename}: {exc.strerror}"
    if not is_dir:
        return f"needs the folder {folder}, but {existing} is a file"
    if os.access(existing, os.W_OK | os.X_OK):
        return None
    try:
        read_only = bool(os.statvfs(existing).f_flag & os.ST_RDONLY)
    except OSError:
        read_only = False
    why = "a read-only file system" if read_only else "permission denied"
    return f"cannot be written: the folder {existing} is not writable ({why})"
