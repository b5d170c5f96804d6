"""The ``npy`` layout: shards of exactly ``shard_tokens`` ids, each a ``.npy`` 1-d
array (format 1.0) that ``np.load(path, mmap_mode="r")`` maps as it is.

A shard is written as its tokens arrive: its header first, with a fixed size
(``HEADER_BYTES``) and length 0, rewritten with the final length when the
shard is closed. Shards are cut at exact token counts, as training loaders
expect, so a document may continue from one shard into the next; each
shard's entry counts the documents that end in it.

    >>> import io
    >>> header = npy_header(np.dtype("<u2"), 3)
    >>> len(header), np.load(io.BytesIO(header + bytes(6))).tolist()
    (128, [0, 0, 0])
"""

from __future__ import annotations

import contextlib
import struct
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from toktoktok.atomic import atomic_path, naming_errors
from toktoktok.errors import TokenFileError, one_line

HEADER_BYTES = 128  # the fixed size of every shard's .npy header


def shard_dtype(max_token_value: int) -> np.dtype:
    """``uint16`` when every id fits, else ``uint32``.

        >>> shard_dtype(65_535).name, shard_dtype(65_536).name
        ('uint16', 'uint32')
    """
    return np.dtype(np.uint16) if max_token_value < 1 << 16 else np.dtype(np.uint32)


def npy_header(dtype: np.dtype, length: int) -> bytes:
    """A ``.npy`` (format 1.0) header of a 1-d array, always ``HEADER_BYTES`` long."""
    text = "{'descr': '%s', 'fortran_order': False, 'shape': (%d,), }" % (dtype.str, length)
    text = text.ljust(HEADER_BYTES - 10 - 1) + "\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(text)) + text.encode("latin1")


class ShardWriter:
    """Writes a stream of tokens into shards of exactly ``shard_tokens`` tokens, in
    ``folder``, named by ``name`` with the shard's number (``shard-{:05d}.npy``).

        >>> import tempfile, pathlib
        >>> writer = ShardWriter(pathlib.Path(tempfile.mkdtemp()), np.dtype(np.uint16), 2, "s-{:02d}.npy")
        >>> writer.write(np.arange(3), [1, 3])  # two documents: [0] and [1, 2]
        >>> writer.finish()
        [{'file': 's-00.npy', 'tokens': 2, 'documents': 1}, {'file': 's-01.npy', 'tokens': 1, 'documents': 1}]

    ``before_rename`` and a failed write: as ``flat.FlatWriter``'s, for each shard.
    """

    def __init__(self, folder: Path, dtype: np.dtype, shard_tokens: int, name: str,
                 before_rename: Callable[[], None] | None = None) -> None:
        self.folder, self.dtype, self.cap, self.name = folder, dtype, shard_tokens, name
        self._before_rename = before_rename
        self.shards: list[dict[str, Any]] = []
        self._stack: contextlib.ExitStack | None = None
        self._fh: Any = None
        self._filled = 0
        self._documents = 0  # documents ended in the open shard (or before any shard)

    def write(self, tokens: np.ndarray, ends: Sequence[int]) -> None:
        """Append ``tokens``; ``ends`` are the offsets in it just after each document's last token."""
        pos = e = 0
        while True:
            while e < len(ends) and ends[e] <= pos:
                self._documents += 1
                e += 1
            if pos == len(tokens):
                return
            if self._fh is None or self._filled == self.cap:
                self._next()
            n = min(self.cap - self._filled, len(tokens) - pos)
            with naming_errors(self.folder / self.shards[-1]["file"]):
                self._fh.write(memoryview(np.ascontiguousarray(tokens[pos : pos + n], dtype=self.dtype)))
            self._filled += n
            pos += n

    def _next(self) -> None:
        self._close()
        name = self.name.format(len(self.shards))
        self._stack = contextlib.ExitStack()
        tmp = self._stack.enter_context(atomic_path(self.folder / name))
        self._fh = self._stack.enter_context(open(tmp, "wb"))
        self.shards.append({"file": name, "tokens": 0, "documents": 0})
        with naming_errors(self.folder / name):
            self._fh.write(npy_header(self.dtype, 0))

    def _close(self) -> None:
        if self._fh is None:
            return
        with naming_errors(self.folder / self.shards[-1]["file"]):
            self._fh.seek(0)
            self._fh.write(npy_header(self.dtype, self._filled))
            self._fh.close()  # its last bytes written before anything is renamed
        if self._before_rename is not None:
            self._before_rename()
        self.shards[-1].update(tokens=self._filled, documents=self._documents)
        self._documents = self._filled = 0
        stack, self._stack, self._fh = self._stack, None, None
        stack.close()  # fsyncs the file and renames it into place

    def finish(self) -> list[dict[str, Any]]:
        """Close the last shard; returns every shard's entry (file, tokens, documents)."""
        self._close()
        return self.shards

    def abort(self) -> None:
        """Drop the open shard's temporary file (the finished shards stay)."""
        if self._stack is not None:
            stack, self._stack, self._fh = self._stack, None, None
            with contextlib.suppress(Exception):
                stack.__exit__(RuntimeError, RuntimeError("aborted"), None)


def read_npy(path: Path) -> np.ndarray:
    """The array of a ``.npy`` file, mapped, never unpickled: a file that is not one,
    holds Python objects or does not hold the bytes its header announces is a
    ``TokenFileError`` naming it."""
    from numpy.lib import format as npy_format

    path = Path(path)
    readers = {(1, 0): npy_format.read_array_header_1_0, (2, 0): npy_format.read_array_header_2_0}
    with open(path, "rb") as fh:
        try:
            version = npy_format.read_magic(fh)
        except ValueError:
            raise TokenFileError(f"{path}: not a .npy file (it does not start with NumPy's magic bytes)") from None
        if version not in readers:
            raise TokenFileError(f"{path}: .npy format version {version[0]}.{version[1]}, expected 1.0 or 2.0")
        try:
            shape, fortran, dtype = readers[version](fh)
        except ValueError as exc:
            raise TokenFileError(f"{path}: not a readable .npy header ({one_line(exc)})") from None
        offset = fh.tell()
    if dtype.hasobject:
        raise TokenFileError(f"{path}: holds Python objects (pickled data), not token ids")
    need = offset + int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    size = path.stat().st_size
    if size != need:
        raise TokenFileError(f"{path}: {size} bytes, but its header announces {need} ({dtype} of shape {shape}): "
                             f"the file is cut short or has bytes after its array")
    if need == offset:  # an empty array: nothing to map
        return np.zeros(shape, dtype=dtype)
    return np.memmap(path, dtype=dtype, mode="r", offset=offset, shape=shape, order="F" if fortran else "C")
