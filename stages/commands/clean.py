"""``toktok clean -c CFG``: remove a config's work directory.

It removes a work directory only when it holds nothing but ``ingest/``,
``train/``, ``export/`` and ``.lock`` (anything else may be the user's), and
only while no run holds its lock. The outputs are kept; the output set's
lock file (``DIR/.NAME.lock``) that a killed export left is removed, a held
one never.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import TYPE_CHECKING

from toktoktok import publish_journal
from toktoktok.errors import Busy, UsageError

from ..workdir.layout import LOCK, STAGE_FOLDERS
from ..workdir.locks import hold, remove_if_free

if TYPE_CHECKING:
    from ..workdir import Work

WORK_ENTRIES = {**dict.fromkeys(STAGE_FOLDERS, "dir"), LOCK: "file"}


def work_dir_contents(work: Path) -> tuple[int, int]:
    """(files, bytes) under a work directory that looks like toktoktok's, else UsageError.

    It looks like ours when it holds nothing but ``ingest/``, ``train/``,
    ``export/`` (folders) and ``.lock`` (a file): anything else may be the
    user's, and ``toktok clean`` then removes nothing.
    """
    if work.is_symlink() or not work.is_dir():
        raise UsageError(f"work_dir {work} is not a folder; nothing removed")
    foreign = []
    for entry in sorted(work.iterdir(), key=lambda e: e.name):
        kind = WORK_ENTRIES.get(entry.name)
        ok = kind == "dir" and entry.is_dir() and not entry.is_symlink() or kind == "file" and entry.is_file()
        if not ok:
            foreign.append(entry.name + ("/" if entry.is_dir() else ""))
    if foreign:
        shown = ", ".join(foreign[:5]) + (", ..." if len(foreign) > 5 else "")
        raise UsageError(f"work_dir {work} does not look like a toktoktok work directory (it holds {shown}; expected "
                          f"only ingest/, train/, export/ and .lock); nothing removed")
    files = size = 0
    for root, _, names in os.walk(work):
        for name in names:
            files += 1
            size += os.lstat(os.path.join(root, name)).st_size
    return files, size


def remove_work_dir(work: Work) -> tuple[int, int]:
    """Delete ``work``'s folder (checked with ``work_dir_contents``) while holding its lock.

    A publish a killed run left (its journal in the work folder) is finished
    or undone first (``toktoktok.publish_journal.recover``), else the outputs
    could stay a mixed set with nothing left to repair them.
    """
    import fcntl
    import shutil

    folder = work.cfg.work_dir
    files, size = work_dir_contents(folder)
    fd = os.open(work.lock, os.O_RDWR) if work.lock.is_file() else None
    try:
        if fd is not None:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise Busy(f"another toktoktok run is using {folder}; nothing removed") from None
        lock = work.output_lock
        busy = f"another toktoktok export is publishing to {work.cfg.output} ({{}} holds {lock}); nothing removed"
        # a publish to undo touches the outputs: under their lock, as a run's export
        with hold(lock, busy.format, remove=True) if work.publish_journal.exists() else contextlib.nullcontext():
            publish_journal.recover(work.publish_journal)
        shutil.rmtree(folder)
    finally:
        if fd is not None:
            os.close(fd)
    return files, size


def remove_output_lock(work: Work) -> str | None:
    """Remove the output set's lock file when no process holds it (a killed
    export left it); says so, or None (no such file, or it is held)."""
    if remove_if_free(work.output_lock):
        return f"removed {work.output_lock}: the lock of an export that did not end"
    return None
