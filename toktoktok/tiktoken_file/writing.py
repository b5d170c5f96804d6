"""Writing a ``.tiktoken`` file: the vocabulary checked (``ranks``), one
``BASE64 RANK\\n`` line per token by rank, written atomically; a path ending in
``.gz`` gets gzip data with a zero timestamp, so the bytes stay reproducible."""

from __future__ import annotations

import binascii
import gzip
import os
from collections.abc import Iterable, Mapping

from toktoktok.atomic import atomic_write_bytes
from toktoktok.tiktoken_file.ranks import validate_ranks


def format_tiktoken(ranks: Mapping[bytes, int] | Iterable[tuple[bytes, int]]) -> bytes:
    """The validated file contents: one ``BASE64 RANK\\n`` line per token, by rank.

    >>> format_tiktoken({bytes([b]): b for b in range(256)}).splitlines()[65]
    b'QQ== 65'
    """
    encode = binascii.b2a_base64  # what base64.b64encode calls, with newline=False
    lines = [encode(token, newline=False) + b" %d\n" % rank for token, rank in validate_ranks(ranks)]
    return b"".join(lines)


def write_tiktoken(
    path: str | os.PathLike[str], ranks: Mapping[bytes, int] | Iterable[tuple[bytes, int]]
) -> None:
    """Validate ``ranks`` and write them to ``path`` atomically, sorted by rank.

    A path ending in ``.gz`` gets gzip data (timestamp 0: reproducible bytes).
    Nothing is written when validation fails.
    """
    data = format_tiktoken(ranks)
    if str(path).endswith(".gz"):
        data = gzip.compress(data, mtime=0)
    atomic_write_bytes(path, data)
