"""``toktok decode``: ids -> text, to check what a token file holds.

The ids come from the command line, or from a file ``toktok encode`` wrote
(or any file of the same layout, ``toktoktok.token_files``):

- a ``.npy`` shard (any integer dtype);
- a ``.bin``: nanoGPT's flat file of ``--dtype`` ids (``uint16`` unless
  given), or Megatron-LM's data file when ``PREFIX.idx`` lies beside it, whose
  dtype it names; ``--document N`` then picks the N-th document (0-based)
  rather than the whole file.

Decisions:

- The ids are decoded together (``decode_bytes`` of all of them), so a
  character split across two tokens comes out whole. Bytes that are not
  UTF-8 are shown as U+FFFD; ``--bytes`` writes the raw bytes instead, for a
  pipe or a file.
- Special tokens decode to their text (``<|endoftext|>``), as tiktoken does.
- An id the tokenizer does not have, however large, is an error naming it.
- A token file is checked before it is read (``token_files.read_npy``,
  ``read_megatron``): one that is not what it claims, is cut short or does
  not match its index is an error naming it, never a wrong document.
- ``--document`` needs document boundaries: a Megatron index has them; a
  flat ``.bin`` or ``.npy`` does not, so it is refused there.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import tiktoken

from toktoktok.errors import UsageError
from toktoktok.token_files import read_flat, read_megatron, read_npy


def ids_of_file(path: Path, *, dtype: str | None = None, document: int | None = None) -> np.ndarray:
    """The ids a token file holds (or its ``document``-th document, Megatron only)."""
    path = Path(path)
    if not path.is_file():
        raise UsageError(f"--from {path}: no such file")
    idx = path.with_suffix(".idx")
    if path.suffix == ".npy":
        if dtype is not None:
            raise UsageError("--dtype is for a .bin file: a .npy names its own dtype")
        ids = read_npy(path)
        if ids.ndim != 1 or ids.dtype.kind not in "iu":
            raise UsageError(f"--from {path}: not a 1-d array of integer ids ({ids.dtype}, shape {ids.shape})")
    elif path.suffix == ".bin" and idx.is_file():
        if dtype is not None:
            raise UsageError(f"--dtype does not apply to a Megatron data file: {idx.name} names its dtype")
        index, data = read_megatron(path)
        if document is None:
            return data
        docs = index.documents
        if not 0 <= document < docs:
            raise UsageError(f"--document {document}: {idx.name} has {docs} documents (0 to {docs - 1})")
        span = index.span(document)
        if span is None:
            return np.zeros(0, dtype=index.dtype)
        return data[span[0] : span[1]]
    elif path.suffix == ".bin":
        name = dtype or "uint16"
        if path.stat().st_size % np.dtype(name).itemsize:
            raise UsageError(f"--from {path}: {path.stat().st_size} bytes is not a whole number of {name} ids")
        ids = read_flat(path, name)
    else:
        raise UsageError(f"--from {path}: expected a .npy shard or a .bin file (nanoGPT's, or Megatron-LM's "
                          f"with its .idx beside it)")
    if document is not None:
        raise UsageError(f"--document needs a Megatron-LM data file (.bin with its .idx): {path.name} has no "
                          f"document boundaries")
    return ids


def decode_ids(enc: tiktoken.Encoding, ids: Sequence[int] | np.ndarray) -> bytes:
    """The bytes of ``ids``; an id the tokenizer does not have is a ``UsageError`` naming it.

        >>> enc = tiktoken.Encoding("t", pat_str=r"\\S+|\\s+", mergeable_ranks={bytes([b]): b for b in range(256)},
        ...                         special_tokens={"<|e|>": 257})
        >>> decode_ids(enc, [104, 105, 257])
        b'hi<|e|>'
        >>> try:
        ...     decode_ids(enc, [104, 256])
        ... except UsageError as refused:
        ...     print(refused)
        id 256 is not in the vocabulary of t (ids 0 to 257, with gaps)
    """
    # compared in their own type (Python ints, or the file's dtype): a conversion to
    # int64 first would overflow past 2^63, or wrap a uint64 id around
    if isinstance(ids, np.ndarray):
        outside = ids[(ids < 0) | (ids > enc.max_token_value)]
        bad = [int(outside[0])] if len(outside) else []
        values = ids.tolist()
    else:
        values = [int(i) for i in ids]
        bad = [i for i in values if not 0 <= i <= enc.max_token_value][:1]
    if bad:
        raise UsageError(f"id {bad[0]} is not in the vocabulary of {enc.name} (ids 0 to {enc.max_token_value})")
    try:
        return enc.decode_bytes(values)
    except KeyError as exc:  # an unused id below the highest
        missing = str(exc.args[0]).rpartition(" ")[2] if exc.args else "?"
        raise UsageError(f"id {missing} is not in the vocabulary of {enc.name} (ids 0 to {enc.max_token_value}, "
                          f"with gaps)") from None


def parse_ids(words: Sequence[str]) -> list[int]:
    """Ids from the command line: separate arguments, or one argument with commas,
    spaces or brackets (a list pasted from Python).

        >>> parse_ids(["[15496,", "995]", "13"])
        [15496, 995, 13]
    """
    ids = []
    for word in words:
        for part in word.replace(",", " ").replace("[", " ").replace("]", " ").split():
            try:
                ids.append(int(part))
            except ValueError:
                raise UsageError(f"{part!r} is not a token id (an integer)") from None
    return ids


def refuse(message: str) -> None:
    """A usage error (exit 2)."""
    raise UsageError(message)
