"""Atomic file writes: a reader sees the old file or the new one, never half.

Every artifact toktoktok writes (the ``.tiktoken`` file, manifests, Arrow
chunks) goes through here, because an interrupted run must not leave a
truncated file that a later run mistakes for a finished one.

The recipe is the classic one: write a temporary file *in the same folder*
(``os.replace`` is only atomic within one file system), flush it, ``fsync``
it so the bytes are on disk before the name points at them, then
``os.replace`` it over the target, and finally ``fsync`` the folder (where the
platform allows it) so the rename itself survives a crash.
``atomic_write_bytes`` writes data already in memory; ``atomic_path`` yields
the temporary path, for writers that want a file name (pyarrow, polars);
``naming_errors`` makes an ``OSError`` of a write name the file it was for.

    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> atomic_write_bytes(d / "a.txt", b"hello")
    >>> (d / "a.txt").read_bytes()
    b'hello'
    >>> with atomic_path(d / "b.txt") as tmp:
    ...     _ = tmp.write_bytes(b"bye")
    >>> sorted(p.name for p in d.iterdir())
    ['a.txt', 'b.txt']
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Iterator
from pathlib import Path


def _fsync_file(path: Path) -> None:
    """Flush a closed file's bytes to disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_dir(folder: Path) -> None:
    """Make a rename durable; silently skipped where folders cannot be opened."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:  # Windows, some network file systems
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _temp_sibling(path: Path, claimed: list[Path]) -> Path:
    """Create (empty) and return a uniquely named hidden file beside ``path``.

    The name starts with ``.NAME.`` and ends with ``.tmp`` so a stray one
    left by a killed process is easy to recognise and never matches ``*.NAME``.
    Created with mode 0o666 filtered by the umask, like ``open(path, "w")``
    (``tempfile.mkstemp`` would make the final file private, 0o600).

    The name goes into ``claimed`` *before* the file is created, so a Ctrl-C
    that lands just after the creation still leaves the caller its name to
    delete; it is taken out again if the name turns out to be someone else's.
    """
    for _ in range(100):
        tmp = path.parent / f".{path.name}.{secrets.token_hex(6)}.tmp"
        claimed.append(tmp)
        try:
            os.close(os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666))
        except FileExistsError:
            claimed.remove(tmp)
            continue
        return tmp
    raise FileExistsError(f"could not create a temporary file beside {path}")


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary sibling of ``path``; move it onto ``path`` on success.

    The parent folder must exist. On an exception inside the block (or a
    Ctrl-C at any point before the rename) the temporary file is deleted,
    ``path`` is left untouched, and the exception propagates. An ``OSError``
    while writing (a full disk, a read-only folder) comes out as an
    ``OSError`` of the same errno whose message names the target file
    (``cannot write DIR/chunk-00000.arrow: No space left on device``).
    """
    target = Path(path)
    claimed: list[Path] = []
    try:
        tmp = _temp_sibling(target, claimed)
        yield tmp
        _fsync_file(tmp)
        os.replace(tmp, target)
    except BaseException as exc:
        for name in claimed:  # at most one: gone already if the rename was done
            with contextlib.suppress(OSError):
                name.unlink()
        if isinstance(exc, OSError) and not getattr(exc, "names_target", False):
            raise _naming(exc, target) from exc
        raise
    _fsync_dir(target.parent)


@contextlib.contextmanager
def naming_errors(target: str | os.PathLike[str]) -> Iterator[None]:
    """Inside the block, an ``OSError`` becomes one of the same errno naming ``target``
    (``cannot write OUT/train.bin: No space left on device``): for writers that
    write a temporary file outside ``atomic_path``'s block."""
    try:
        yield
    except OSError as exc:
        if getattr(exc, "names_target", False):
            raise
        raise _naming(exc, Path(target)) from exc


def _naming(exc: OSError, target: Path) -> OSError:
    """The same kind of error (same errno), its message naming the file being written.

        >>> import errno
        >>> str(_naming(OSError(errno.ENOSPC, "No space left on device"), Path("/out/a.txt")))
        '[Errno 28] cannot write /out/a.txt: No space left on device'
    """
    reason = " ".join((exc.strerror or str(exc) or type(exc).__name__).split())
    message = f"cannot write {target}: {reason}"
    error = OSError(exc.errno, message) if exc.errno is not None else OSError(message)  # errno picks the subclass
    error.names_target = True  # type: ignore[attr-defined]
    return error


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (see the module docstring)."""
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)  # atomic_path flushes and fsyncs it
