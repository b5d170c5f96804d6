"""Token files that language-model trainers read: what ``toktok encode`` writes
and ``toktok decode`` reads.

Three layouts of little-endian integer ids, each described field by field in
docs/outputs.md (Token shards):

- ``npy``: shards ``shard-NNNNN.npy`` (a 1-d array each) listed by
  ``index.json`` (written by ``stages/commands/encode.py``);
- ``bin``, nanoGPT's: ``train.bin`` and ``val.bin``, the ids one after the
  other with no header; a vocabulary whose highest id does not fit the
  dtype is refused rather than wrapped around (``bin_dtype``);
- ``megatron``, Megatron-LM's indexed dataset ("MMIDIDX"): a data file
  ``PREFIX.bin`` (ids, no header) and an index ``PREFIX.idx``
  (``megatron_index``), one sequence per document, so the document index is
  ``0, 1, ..., S``; the ids' dtype is Megatron-LM's own choice
  (``megatron_dtype``).

    >>> idx = megatron_index(np.array([3, 1], dtype=np.int64), np.dtype(np.uint16))
    >>> len(idx) == 34 + 2 * 4 + 2 * 8 + 3 * 8
    True
    >>> read_megatron_index(idx).pointers.tolist()
    [0, 6]
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from toktoktok.errors import TokenFileError, UsageError

MEGATRON_MAGIC = b"MMIDIDX\x00\x00"
MEGATRON_VERSION = 1
# Megatron-LM's dtype codes of the ids (there is no uint32 code)
MEGATRON_CODES = {"uint8": 1, "int8": 2, "int16": 3, "int32": 4, "int64": 5, "float64": 6, "float32": 7, "uint16": 8}
MEGATRON_UINT16_BELOW = 65_500  # Megatron-LM's own threshold on the vocabulary size
_HEAD = struct.Struct("<9sQBQQ")  # magic, version, dtype code, sequences, document index entries

BIN_DTYPES = ("uint16", "uint32")


def bin_dtype(name: str, max_token_value: int) -> np.dtype:
    """The dtype of a ``bin`` (or ``npy``) file, refusing one too small for the ids.

        >>> bin_dtype("uint16", 65_535).name
        'uint16'
        >>> try:
        ...     bin_dtype("uint16", 65_536)
        ... except UsageError as refused:
        ...     print(refused)
        --dtype uint16 holds ids up to 65,535, but this vocabulary has 65,537 ids (its highest is 65,536): use --dtype uint32
    """
    if name not in BIN_DTYPES:
        raise UsageError(f"--dtype must be one of {', '.join(BIN_DTYPES)}, got {name!r}")
    dtype = np.dtype(name)
    top = int(np.iinfo(dtype).max)
    if max_token_value > top:
        raise UsageError(f"--dtype {name} holds ids up to {top:,}, but this vocabulary has {max_token_value + 1:,} "
                          f"ids (its highest is {max_token_value:,}): use --dtype uint32")
    return dtype


def megatron_dtype(vocab_size: int) -> np.dtype:
    """Megatron-LM's choice: uint16 for fewer than 65,500 ids, else int32.

        >>> megatron_dtype(65_499).name, megatron_dtype(65_500).name
        ('uint16', 'int32')
    """
    return np.dtype(np.uint16) if vocab_size < MEGATRON_UINT16_BELOW else np.dtype(np.int32)


def megatron_index(sizes: np.ndarray, dtype: np.dtype) -> bytes:
    """The ``.idx`` of a data file holding sequences of ``sizes`` ids, one a document:
    the header (``_HEAD``), each sequence's length in ids (int32), its byte
    offset in the data file (int64), then the document index (int64), the
    layout docs/outputs.md tabulates."""
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
    dtype: np.dtype
    sizes: np.ndarray  # int32, ids per sequence
    pointers: np.ndarray  # int64, byte offset of each sequence in the data file
    document_indices: np.ndarray  # int64, first sequence of each document, then the sequence count


def read_megatron_index(source: bytes | Path) -> MegatronIndex:
    """Parse an ``.idx`` (its bytes or its path); a file that is not one is a ``ValueError``."""
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
    need = _HEAD.size + 12 * count + 8 * entries
    if len(data) < need:
        raise TokenFileError(f"{name}: {len(data)} bytes, but its header announces {need}")
    sizes = np.frombuffer(data, dtype="<i4", count=count, offset=_HEAD.size)
    pointers = np.frombuffer(data, dtype="<i8", count=count, offset=_HEAD.size + 4 * count)
    documents = np.frombuffer(data, dtype="<i8", count=entries, offset=_HEAD.size + 12 * count)
    return MegatronIndex(np.dtype(names[code]), sizes, pointers, documents)
