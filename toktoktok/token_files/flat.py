"""Flat files of ids, the ids one after the other with no header: nanoGPT's
``train.bin`` and ``val.bin``, and the data file of Megatron-LM's dataset
(``megatron``). ``np.memmap(path, dtype=np.uint16, mode="r")`` reads one as
it is (``read_flat``).

Beside nanoGPT's files goes its ``meta.pkl`` (``nanogpt_meta``). A nanoGPT
file is ``uint16`` (or ``uint32``). A ``uint16`` file cannot hold
an id above 65,535, so a vocabulary whose highest id does not fit is refused
rather than wrapped around (``bin_dtype``).

    >>> import tempfile, pathlib
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "train.bin"
    >>> writer = FlatWriter(path, np.dtype(np.uint16))
    >>> writer.write(np.array([5, 6, 7]), [2])  # a document ends after 5, 6
    >>> writer.write(np.array([8]), [1])
    >>> writer.finish(), writer.lengths().tolist()
    ({'file': 'train.bin', 'tokens': 4, 'documents': 2}, [2, 2])
    >>> read_flat(path, np.dtype(np.uint16)).tolist()
    [5, 6, 7, 8]
"""

from __future__ import annotations

import contextlib
import pickle
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from toktoktok.atomic import atomic_path, naming_errors
from toktoktok.errors import UsageError

BIN_DTYPES = ("uint16", "uint32")


class FlatWriter:
    """Writes a stream of tokens into one headerless file of ``dtype`` ids (a nanoGPT
    ``.bin``, a Megatron data file), under a temporary name until ``finish``;
    keeps each document's length (what a Megatron index needs: 8 bytes a document).

    ``before_rename`` is called once the file is written and closed, just
    before it is renamed into place (``toktok encode`` clears the earlier
    set there). A failed write names the file (``atomic.naming_errors``).
    """

    def __init__(self, path: Path, dtype: np.dtype, before_rename: Callable[[], None] | None = None) -> None:
        self.path, self.dtype = path, dtype
        self.tokens = 0
        self._before_rename = before_rename
        self._lengths: list[np.ndarray] = []
        self._open = 0  # tokens of the document not yet ended
        self._stack = contextlib.ExitStack()
        tmp = self._stack.enter_context(atomic_path(path))
        self._fh = self._stack.enter_context(open(tmp, "wb"))

    def write(self, tokens: np.ndarray, ends: Sequence[int]) -> None:
        """Append ``tokens``; ``ends`` are the offsets in it just after each document's last token."""
        with naming_errors(self.path):
            self._fh.write(memoryview(np.ascontiguousarray(tokens, dtype=self.dtype)))
        self.tokens += len(tokens)
        if len(ends):
            at = np.asarray(ends, dtype=np.int64)
            lengths = np.diff(at, prepend=0)
            lengths[0] += self._open
            self._lengths.append(lengths)
            self._open = len(tokens) - int(at[-1])
        else:
            self._open += len(tokens)

    def lengths(self) -> np.ndarray:
        """Each finished document's tokens."""
        return np.concatenate(self._lengths) if self._lengths else np.zeros(0, dtype=np.int64)

    def finish(self) -> dict[str, Any]:
        """Rename the complete file into place; returns its entry (file, tokens, documents)."""
        with naming_errors(self.path):
            self._fh.close()  # its last bytes written before anything is renamed
        if self._before_rename is not None:
            self._before_rename()
        self._stack.close()
        return {"file": self.path.name, "tokens": self.tokens, "documents": int(len(self.lengths()))}

    def abort(self) -> None:
        """Drop the temporary file."""
        with contextlib.suppress(Exception):
            self._stack.__exit__(RuntimeError, RuntimeError("aborted"), None)


def read_flat(path: Path, dtype: np.dtype | str) -> np.ndarray:
    """The ids of a flat file, mapped (an empty file, which cannot be mapped, as an empty array)."""
    return np.memmap(path, dtype=dtype, mode="r") if path.stat().st_size else np.zeros(0, dtype)


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


def nanogpt_meta(vocab_size: int) -> bytes:
    """nanoGPT's ``meta.pkl`` beside its ``.bin`` files: ``{'vocab_size': N}``, which its
    ``train.py`` sizes the model by; pickled with protocol 4, which every Python 3
    that runs nanoGPT reads.

        >>> pickle.loads(nanogpt_meta(6420))
        {'vocab_size': 6420}
    """
    return pickle.dumps({"vocab_size": vocab_size}, protocol=4)
