"""Megatron-LM's indexed dataset ("MMIDIDX"): a data file ``PREFIX.bin`` (a flat
file of ids, ``flat``) and its index ``PREFIX.idx``, little-endian; the
layout, field by field: docs/outputs.md (Token shards). toktoktok writes
one sequence per document, so the document index is ``0, 1, ..., S``; the
ids' dtype is Megatron-LM's own choice (``megatron_dtype``).

    >>> idx = megatron_index(np.array([3, 1], dtype=np.int64), np.dtype(np.uint16))
    >>> len(idx) == 34 + 2 * 4 + 2 * 8 + 3 * 8, read_megatron_index(idx).pointers.tolist()
    (True, [0, 6])
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from toktoktok.errors import TokenFileError
from toktoktok.token_files.flat import read_flat

MEGATRON_MAGIC = b"MMIDIDX\x00\x00"
MEGATRON_VERSION = 1
# Megatron-LM's dtype codes of the ids (there is no uint32 code)
MEGATRON_CODES = {"uint8": 1, "int8": 2, "int16": 3, "int32": 4, "int64": 5, "float64": 6, "float32": 7, "uint16": 8}
MEGATRON_UINT16_BELOW = 65_500  # Megatron-LM's own threshold on the vocabulary size
_HEAD = struct.Struct("<9sQBQQ")  # magic, version, dtype code, sequences, document index entries


def megatron_dtype(vocab_size: int) -> np.dtype:
    """Megatron-LM's choice: uint16 for fewer than 65,500 ids, else int32.

        >>> megatron_dtype(65_499).name, megatron_dtype(65_500).name
        ('uint16', 'int32')
    """
    return np.dtype(np.uint16) if vocab_size < MEGATRON_UINT16_BELOW else np.dtype(np.int32)


def megatron_index(sizes: np.ndarray, dtype: np.dtype) -> bytes:
    """The ``.idx`` of a data file holding sequences of ``sizes`` ids, one a document
    (``flat.FlatWriter.lengths`` of the data file it describes): the header
    (``_HEAD``), each sequence's length in ids (int32), its byte offset in the
    data file (int64), then the document index (int64), the layout
    docs/outputs.md tabulates."""
    sizes = np.asarray(sizes, dtype=np.int64)
    if len(sizes) and int(sizes.max()) > np.iinfo(np.int32).max:
        raise TokenFileError(f"a document of {int(sizes.max())} tokens does not fit Megatron-LM's int32 sequence length")
    pointers = np.zeros(len(sizes), dtype=np.int64)
    np.cumsum(sizes[:-1] * dtype.itemsize, out=pointers[1:])
    documents = np.arange(len(sizes) + 1, dtype=np.int64)
    head = _HEAD.pack(MEGATRON_MAGIC, MEGATRON_VERSION, MEGATRON_CODES[dtype.name], len(sizes), len(documents))
    return b"".join([head, sizes.astype("<i4").tobytes(), pointers.astype("<i8").tobytes(),
                     documents.astype("<i8").tobytes()])


@dataclass
class MegatronIndex:
    """An ``.idx`` read back (``read_megatron_index``).

        >>> index = read_megatron_index(megatron_index(np.array([3, 0, 2]), np.dtype(np.uint16)))
        >>> index.documents, index.span(0), index.span(1), index.span(2)
        (3, (0, 3), (3, 3), (3, 5))
    """

    dtype: np.dtype
    sizes: np.ndarray  # int32, ids per sequence
    pointers: np.ndarray  # int64, byte offset of each sequence in the data file
    document_indices: np.ndarray  # int64, first sequence of each document, then the sequence count

    @property
    def documents(self) -> int:
        return len(self.document_indices) - 1

    def span(self, document: int) -> tuple[int, int] | None:
        """Where the ids of ``document`` (0-based) lie in the data file, as
        ``(start, stop)`` in ids; None for a document of no sequence."""
        first, last = int(self.document_indices[document]), int(self.document_indices[document + 1])
        if first == last:
            return None
        start = int(self.pointers[first]) // self.dtype.itemsize
        stop = int(self.pointers[last - 1]) // self.dtype.itemsize + int(self.sizes[last - 1])
        return start, stop


def read_megatron_index(source: bytes | Path) -> MegatronIndex:
    """Parse an ``.idx`` (its bytes or its path) and check it holds together: integer
    ids, no negative size, each sequence right after the one before (as
    Megatron-LM writes them) and a document index from 0 to the sequence count,
    never going back. Anything else is a ``TokenFileError`` naming the file."""
    data = source if isinstance(source, bytes) else Path(source).read_bytes()
    name = "the index" if isinstance(source, bytes) else str(source)
    if len(data) < _HEAD.size:
        raise TokenFileError(f"{name}: too short for a Megatron-LM index")
    magic, version, code, count, entries = _HEAD.unpack_from(data)
    if magic != MEGATRON_MAGIC or version != MEGATRON_VERSION:
        raise TokenFileError(f"{name}: not a Megatron-LM index (magic {magic!r}, version {version})")
    names = {c: n for n, c in MEGATRON_CODES.items()}
    if code not in names:
        raise TokenFileError(f"{name}: unknown dtype code {code}")
    dtype = np.dtype(names[code])
    if dtype.kind not in "iu":
        raise TokenFileError(f"{name}: dtype code {code} is {dtype.name}, not an integer type: token ids are integers")
    need = _HEAD.size + 12 * count + 8 * entries
    if len(data) != need:
        raise TokenFileError(f"{name}: {len(data)} bytes, but its header announces {need}")
    sizes = np.frombuffer(data, dtype="<i4", count=count, offset=_HEAD.size)
    pointers = np.frombuffer(data, dtype="<i8", count=count, offset=_HEAD.size + 4 * count)
    documents = np.frombuffer(data, dtype="<i8", count=entries, offset=_HEAD.size + 12 * count)
    if count and int(sizes.min()) < 0:
        raise TokenFileError(f"{name}: sequence {int(np.argmax(sizes < 0))} has a negative length")
    expected = np.zeros(count, dtype=np.int64)
    np.cumsum(sizes[:-1].astype(np.int64) * dtype.itemsize, out=expected[1:])
    if (bad := np.flatnonzero(pointers != expected)).size:
        raise TokenFileError(f"{name}: sequence {int(bad[0])} starts at byte {int(pointers[bad[0]])}, but the "
                             f"sequences before it end at byte {int(expected[bad[0]])}")
    if not entries or documents[0] != 0 or documents[-1] != count or bool(np.any(np.diff(documents) < 0)):
        raise TokenFileError(f"{name}: its document index does not run from 0 to its {count} sequences in order")
    return MegatronIndex(dtype, sizes, pointers, documents)


def read_megatron(path: Path) -> tuple[MegatronIndex, np.ndarray]:
    """A Megatron-LM data file ``PREFIX.bin`` and its ``PREFIX.idx``, checked against
    each other: the data file holds exactly the ids its index describes, so a
    truncated one, or one beside another run's index, is a ``TokenFileError``."""
    path = Path(path)
    idx = path.with_suffix(".idx")
    index = read_megatron_index(idx)
    need = int(index.sizes.astype(np.int64).sum()) * index.dtype.itemsize
    size = path.stat().st_size
    if size != need:
        raise TokenFileError(f"{path}: {size} bytes, but {idx.name} describes {need} ({len(index.sizes)} sequences "
                             f"of {index.dtype.name} ids): the data file is cut short, or is not the one this index "
                             f"was written for")
    return index, read_flat(path, index.dtype)
