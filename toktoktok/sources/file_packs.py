"""Many small files read into one buffer by one call that holds no lock: a pack.

A folder of source code is tens of thousands of small files. Read one at a
time from Python, each file cost an object, a few calls that take and give
back the interpreter's lock, and a check of its bytes; the thread reading
them and the one sending them then waited on each other's lock more than
on the disk. ``read_pack`` opens, reads and closes a run of files in numba
(the C library's ``open``, ``lseek``, ``pread`` and ``close``, declared to
LLVM by name), checks each file's bytes as ``local.whole_is_utf8`` does and
counts its ``blank-line`` documents, all with the lock released; what it
cannot decide (a file that cannot be opened, is too large, holds a NUL byte
near its start, or is not UTF-8) is marked for the caller's Python reader,
which says why.

    >>> import tempfile
    >>> d = Path(tempfile.mkdtemp())
    >>> _ = (d / "a.txt").write_bytes(b"one\\n\\ntwo"); _ = (d / "b.c").write_bytes(b"\\xef\\xbb\\xbfint x;")
    >>> _ = (d / "c.bin").write_bytes(b"\\xff\\x00")
    >>> pack = read_pack([d / "a.txt", d / "b.c", d / "c.bin"], blank=[True, False, False])
    >>> pack.status.tolist(), pack.documents.tolist(), [bytes(pack.text(i)) for i in range(2)]
    ([0, 0, 1], [2, 1, 0], [b'one\\n\\ntwo', b'int x;'])
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

from toktoktok.documents import doc_ends, valid_utf8
from toktoktok.kernel_args import readonly
from toktoktok.sources.decoding import SNIFF_BYTES

READ = 0  # read whole and plain: its text is ``Pack.text(i)``
TO_PYTHON = 1  # left to the Python reader: cannot be opened or read, too large, or not plainly UTF-8 text
NOT_READ = 2  # the buffer was full before it: not looked at (the next pack begins with it)

PACK_BYTES = 4 << 20  # a pack's buffer; a file larger than ``max_file`` never goes in one


@dataclass(frozen=True)
class Pack:
    """What ``read_pack`` read: file ``i``'s text (after a UTF-8 byte order mark) is
    ``data[starts[i]:ends[i]]`` when ``status[i] == READ``; ``sizes[i]``: its bytes as
    read (the mark included); ``documents[i]``: how many documents it holds (1, or
    its ``blank-line`` documents; 0 when empty)."""

    data: np.ndarray
    starts: np.ndarray
    ends: np.ndarray
    sizes: np.ndarray
    status: np.ndarray
    documents: np.ndarray

    def text(self, i: int) -> np.ndarray:
        return self.data[self.starts[i] : self.ends[i]]


def read_pack(paths: list[Path] | list[str], *, blank: list[bool] | np.ndarray, max_file: int = 1 << 20,
              capacity: int = PACK_BYTES) -> Pack:
    """Read ``paths`` in order into one buffer of ``capacity`` bytes, until one does
    not fit; ``blank[i]``: count file ``i``'s documents by the ``blank-line`` rule
    (else a non-empty file is one document). A file over ``max_file`` bytes is
    left to Python (read as it goes, not whole)."""
    encoded = [os.fsencode(p) + b"\0" for p in paths]
    offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
    np.cumsum([len(e) for e in encoded], out=offsets[1:])
    names = np.frombuffer(b"".join(encoded), dtype=np.uint8).copy()  # the C library reads it through a pointer
    data = np.empty(max(capacity, max_file + 1), dtype=np.uint8)
    n = len(encoded)
    starts, ends = np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64)
    sizes, documents = np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64)
    status = np.full(n, NOT_READ, dtype=np.int8)
    # the buffer goes in read-only: ``pread`` writes through its pointer all the same, and the
    # checks' kernels (``valid_utf8``, ``doc_ends``) then take the type Python's callers give
    # them, not a second one compiled and cached for this kernel alone
    used = _read_pack(names, offsets, np.asarray(blank, dtype=np.bool_), max_file, os.O_RDONLY | os.O_CLOEXEC,
                      readonly(data), starts, ends, sizes, status, documents)
    return Pack(data[:used], starts, ends, sizes, status, documents)


@intrinsic
def _c_open(typingctx, names, at, flags):
    """``open(&names[at], flags)``: a file descriptor, or -1."""
    def codegen(context, builder, signature, args):
        array = context.make_array(signature.args[0])(context, builder, args[0])
        fnty = ir.FunctionType(ir.IntType(32), [ir.IntType(8).as_pointer(), ir.IntType(32)], var_arg=True)
        fn = cgutils.get_or_insert_function(builder.module, fnty, "open")
        flag_bits = context.cast(builder, args[2], signature.args[2], types.int32)
        return builder.call(fn, [builder.gep(array.data, [args[1]]), flag_bits])
    return types.int32(names, at, flags), codegen


@intrinsic
def _c_size(typingctx, fd):
    """``lseek(fd, 0, SEEK_END)``: the file's size, or -1."""
    def codegen(context, builder, signature, args):
        i64 = ir.IntType(64)
        fnty = ir.FunctionType(i64, [ir.IntType(32), i64, ir.IntType(32)])
        fn = cgutils.get_or_insert_function(builder.module, fnty, "lseek")
        fd = context.cast(builder, args[0], signature.args[0], types.int32)
        return builder.call(fn, [fd, ir.Constant(i64, 0), ir.Constant(ir.IntType(32), os.SEEK_END)])
    return types.int64(fd), codegen


@intrinsic
def _c_pread(typingctx, fd, data, at, count, offset):
    """``pread(fd, &data[at], count, offset)``: bytes read, or -1."""
    def codegen(context, builder, signature, args):
        array = context.make_array(signature.args[1])(context, builder, args[1])
        i64 = ir.IntType(64)
        fnty = ir.FunctionType(i64, [ir.IntType(32), ir.IntType(8).as_pointer(), i64, i64])
        fn = cgutils.get_or_insert_function(builder.module, fnty, "pread")
        fd, count, offset = (context.cast(builder, args[k], signature.args[k], t)
                             for k, t in ((0, types.int32), (3, types.int64), (4, types.int64)))
        return builder.call(fn, [fd, builder.gep(array.data, [args[2]]), count, offset])
    return types.int64(fd, data, at, count, offset), codegen


@intrinsic
def _c_close(typingctx, fd):
    def codegen(context, builder, signature, args):
        fnty = ir.FunctionType(ir.IntType(32), [ir.IntType(32)])
        fd = context.cast(builder, args[0], signature.args[0], types.int32)
        return builder.call(cgutils.get_or_insert_function(builder.module, fnty, "close"), [fd])
    return types.int32(fd), codegen


@njit(cache=True, nogil=True)
def _read_whole(fd, data, at, size):
    """Read the file from its start into ``data[at:]``, at most ``size + 1`` bytes
    (one more than its size says: a file that grew meanwhile shows it); -1 on error."""
    got = 0
    while got <= size:
        r = _c_pread(fd, data, at + got, size + 1 - got, got)
        if r < 0:
            return -1
        if r == 0:
            break
        got += r
    return got


@njit(cache=True, nogil=True)
def _plain(data, a, b):
    """Whether ``data[a:b]`` is sent as read: no NUL byte in its first ``SNIFF_BYTES``
    (``WholeFiles.send`` looks closer there), valid UTF-8 (so no wide byte order mark)."""
    for i in range(a, min(b, a + SNIFF_BYTES)):
        if data[i] == 0:
            return False
    return valid_utf8(data[a:b])


@njit(cache=True, nogil=True)
def _read_pack(names, offsets, blank, max_file, flags, data, starts, ends, sizes, status, documents):
    at = 0
    for i in range(len(offsets) - 1):
        fd = _c_open(names, offsets[i], flags)
        if fd < 0:
            status[i] = TO_PYTHON
            continue
        size = _c_size(fd)
        if size < 0 or size > max_file:
            _c_close(fd)
            status[i] = TO_PYTHON
            continue
        if at + size + 1 > len(data):  # no room: this file and the rest wait for the next pack
            _c_close(fd)
            break
        got = _read_whole(fd, data, at, size)
        _c_close(fd)
        if got < 0 or got > size:  # an error, or it grew since: Python reads it whole
            status[i] = TO_PYTHON
            continue
        sizes[i] = got
        skip = 3 if got >= 3 and data[at] == 0xEF and data[at + 1] == 0xBB and data[at + 2] == 0xBF else 0
        a, b = at + skip, at + got
        if not _plain(data, a, b):
            status[i] = TO_PYTHON
            continue
        status[i] = READ
        starts[i], ends[i] = a, b
        if b > a:
            if blank[i]:
                # arguments typed as Python's callers type them (no literal 0 or True): one signature
                # of ``doc_ends`` serves both; the last document runs to the end, where it never ends one
                documents[i] = len(doc_ends(data[a:b], a - a, b - a, blank[i])) + 1
            else:
                documents[i] = 1
        at = b
    return at
