"""Lock files: one run at a time writes a folder, and a second one says who holds it.

``holding(path, what)`` takes an exclusive ``flock`` on ``path`` (made if
absent) without waiting, and writes this process's id into it while it holds
it; another run finds it held and fails at once with ``Busy``, naming the lock
file and the process holding it. The lock goes with the process (a killed run
holds nothing), so a lock file left behind never blocks anyone; it is never
deleted, because a run that opened it just before the deletion could then
lock a file that no longer has a name while a third locks a new one.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

from toktoktok.errors import Busy


@contextlib.contextmanager
def holding(path: Path, what: str) -> Iterator[None]:
    """Hold the lock file ``path``, or raise ``Busy`` at once: ``WHAT: PATH is locked by process N; ...``."""
    fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise Busy(f"{what}: {path} is locked by {_holder(fd)}; wait for it to finish") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        try:
            yield
        finally:
            with contextlib.suppress(OSError):  # emptied while still held: no reader sees a finished run's id
                os.ftruncate(fd, 0)
    finally:
        os.close(fd)


def _holder(fd: int) -> str:
    """``process N`` from the lock file, or ``another process`` before it has written its id."""
    text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
    return f"process {text}" if text.isdigit() else "another process"
