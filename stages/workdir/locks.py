"""Lock files: the work folder's (``WORK/.lock``) and the output set's (``DIR/.NAME.lock``).

A lock is ``flock`` on a file, which the system releases when its process
ends (a kill -9 too), so a lock file left behind is never held. The holder
writes its process id into the file, for the message of the run refused.
A lock file may be removed (``remove_if_free``, or by its holder on
release) only while locked, and whoever locks checks afterwards that the
file it locked is still the one at the path, else opens it anew: two
processes can then never both hold a lock, one on a removed file.

    >>> import tempfile
    >>> path = Path(tempfile.mkdtemp()) / ".x.lock"
    >>> with hold(path, lambda who: f"busy ({who})", remove=True):
    ...     holder(path) == f"process {os.getpid()}"
    True
    >>> path.exists(), remove_if_free(path)
    (False, False)
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Callable, Iterator
from pathlib import Path

from toktoktok.errors import Busy


def holder(path: Path) -> str:
    """Who holds the lock at ``path``, as its file says: ``process PID``."""
    with contextlib.suppress(OSError, ValueError):
        return f"process {int(path.read_text().strip())}"
    return "a process that has not written its id yet"


def _same_file(fd: int, path: Path) -> bool:
    try:
        st = path.stat()
    except FileNotFoundError:
        return False
    mine = os.fstat(fd)
    return (st.st_dev, st.st_ino) == (mine.st_dev, mine.st_ino)


@contextlib.contextmanager
def hold(path: Path, busy: Callable[[str], str], *, remove: bool = False) -> Iterator[None]:
    """Hold the lock at ``path`` or raise Busy(``busy(holder)``) at once; with
    ``remove``, the file goes when released (a lock beside the user's files)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    while True:
        fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise Busy(busy(holder(path))) from None
        if _same_file(fd, path):
            break
        os.close(fd)  # removed after it was opened (its holder left, or clean): open it anew
    try:
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        yield
    finally:
        if remove:
            with contextlib.suppress(OSError):
                path.unlink()  # while locked, as remove_if_free does
        os.close(fd)


def remove_if_free(path: Path) -> bool:
    """Remove the lock file at ``path`` when no process holds it; True if removed
    (a held one, or none, is left alone)."""
    try:
        fd = os.open(path, os.O_RDWR)
    except FileNotFoundError:
        return False
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        if not _same_file(fd, path):
            return False
        path.unlink()
        return True
    finally:
        os.close(fd)


@contextlib.contextmanager
def holding(path: Path, what: str) -> Iterator[None]:
    """``hold`` a lock file that stays (one inside a folder the run writes), the refusal
    reading ``WHAT: PATH is locked by process N; wait for it to finish``."""
    with hold(path, lambda who: f"{what}: {path} is locked by {who}; wait for it to finish"):
        yield
