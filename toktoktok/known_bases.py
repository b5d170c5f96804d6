"""OpenAI's published vocabularies, recognised by content.

A ``.tiktoken`` file holds only ranks: the special tokens and the pattern a
vocabulary was trained with are not in it. For a file toktoktok made, its
companion ``NAME.meta.json`` says them; OpenAI's ``cl100k_base.tiktoken``
and ``o200k_base.tiktoken`` come alone, and their special tokens sit at ids
the ranks leave free (cl100k: ``<|endoftext|>`` is 100257). Reading such a
file as "no special tokens" would hand those ids to new merges. So these two
files are recognised by what they hold, whatever they are called and
whether plain, gzip or zstd, and ``recognise`` returns what tiktoken's own
definitions (``tiktoken_ext/openai_public.py``) give them.

A file is recognised by the size and sha256 of its decompressed bytes with
LF line ends (``canonical_bytes``), compared with the published file's.

    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "cl100k_base.tiktoken"
    >>> _ = p.write_bytes(b"IQ== 0\\n")
    >>> recognise(p) is None  # the name alone is not enough
    True
    >>> KNOWN_BASES["cl100k_base"].special_tokens["<|endoftext|>"]
    100257
"""

from __future__ import annotations

import gzip
import hashlib
import os
import zlib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from types import MappingProxyType
from typing import BinaryIO

import zstandard


@dataclass(frozen=True)
class KnownBase:
    """A published vocabulary: its tiktoken name, pattern name (``NAMED_PATTERNS``),
    special tokens with their ids, and its canonical bytes' size and sha256."""

    name: str
    pattern: str
    special_tokens: MappingProxyType[str, int]
    size: int
    sha256: str


# the digests were computed from OpenAI's files (``zcat cl100k_base.tiktoken.gz | sha256sum``,
# ``wc -c`` for the size); they are the ``expected_hash`` tiktoken checks its downloads
# against, and the tests recompute them from the reference files when those are at hand
KNOWN_BASES: dict[str, KnownBase] = {
    base.name: base
    for base in (
        KnownBase("cl100k_base", "cl100k", MappingProxyType({
            "<|endoftext|>": 100257, "<|fim_prefix|>": 100258, "<|fim_middle|>": 100259,
            "<|fim_suffix|>": 100260, "<|endofprompt|>": 100276}),
            1_681_126, "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"),
        KnownBase("o200k_base", "o200k", MappingProxyType({"<|endoftext|>": 199999, "<|endofprompt|>": 200018}),
                  3_613_922, "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"),
    )
}  # fmt: skip

_GZIP_MAGIC = b"\x1f\x8b"
_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
# the largest known file with a CR before every LF, and some room
_MAX_BYTES = 2 * max(b.size for b in KNOWN_BASES.values())


def canonical_bytes(data: bytes) -> bytes:
    """``data`` with LF line ends and a final newline: the form the digests are of.

    >>> canonical_bytes(b"IQ== 0\\r\\nIg== 1")
    b'IQ== 0\\nIg== 1\\n'
    """
    data = data.replace(b"\r\n", b"\n")
    return data if not data or data.endswith(b"\n") else data + b"\n"


def _read_at_most(fh: BinaryIO, limit: int) -> bytes:
    """Up to ``limit`` bytes of a stream (read until the limit or the end)."""
    parts: list[bytes] = []
    got = 0
    while got < limit:
        part = fh.read(limit - got)
        if not part:
            break
        parts.append(part)
        got += len(part)
    return b"".join(parts)


def _decompressed_head(path: Path, limit: int) -> bytes:
    """The file's bytes, decompressed (gzip, zstd or plain), at most ``limit`` of them."""
    with open(path, "rb") as raw:
        magic = raw.read(4)
        raw.seek(0)
        if magic[:2] == _GZIP_MAGIC:
            with gzip.GzipFile(fileobj=raw) as fh:
                return _read_at_most(fh, limit)
        if magic == _ZSTD_MAGIC:
            with zstandard.ZstdDecompressor().stream_reader(raw, read_across_frames=True) as fh:
                return _read_at_most(fh, limit)
        return _read_at_most(raw, limit)


def recognise(path: str | os.PathLike[str]) -> KnownBase | None:
    """The published vocabulary ``path`` holds, or None (not one, or unreadable).

    The answer is kept while the file is unchanged (same size and mtime): each
    reader of a warm start asks. Reading stops past ``_MAX_BYTES``, so a large
    file of anything else costs no more than that; a file that cannot be read
    is simply not recognised (the readers say what is wrong with it).
    """
    try:
        st = Path(path).stat()
    except OSError:
        return None
    return _recognise(str(path), st.st_size, st.st_mtime_ns)


@lru_cache(maxsize=8)
def _recognise(path: str, size: int, mtime_ns: int) -> KnownBase | None:
    try:
        data = _decompressed_head(Path(path), _MAX_BYTES + 1)
    except (OSError, EOFError, zlib.error, zstandard.ZstdError):
        return None
    if len(data) > _MAX_BYTES:
        return None
    return recognise_bytes(data)


def recognise_bytes(data: bytes) -> KnownBase | None:
    """The published vocabulary a file's decompressed bytes are, or None.

    >>> recognise_bytes(b"IQ== 0\\n") is None
    True
    """
    data = canonical_bytes(data)
    candidates = [b for b in KNOWN_BASES.values() if b.size == len(data)]
    if not candidates:
        return None
    digest = hashlib.sha256(data).hexdigest()
    return next((b for b in candidates if b.sha256 == digest), None)
