"""Reading a ``.tiktoken`` file with our own strict parser; what it accepts and
refuses: docs/outputs.md (The ``.tiktoken`` file).

Why not ``tiktoken.load.load_tiktoken_bpe``? It caches files by path, even
local ones, so a rewritten file can load stale; and it accepts data that
makes tiktoken panic later (duplicate ranks) or mis-encode silently
(duplicate bytes: the last line wins). This parser reports every problem with
the file name and the 1-based line number, before tiktoken ever sees it.
"""

from __future__ import annotations

import base64
import binascii
import gzip
import os
import zlib
from pathlib import Path

import numpy as np
import zstandard

from toktoktok.errors import TokenizerFileError
from toktoktok.tiktoken_file.ranks import MAX_RANK, missing_bytes_message, missing_single_bytes

_GZIP_MAGIC = b"\x1f\x8b"
_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"


def decompressed_bytes(path: str | os.PathLike[str]) -> bytes:
    """A ``.tiktoken`` file's bytes, decompressed when it is gzip or zstd (``TokenizerFileError``
    when it cannot be read), for ``read_tiktoken(path, data=...)`` and other readers of the same bytes."""
    return _read_raw(Path(path))


def read_tiktoken(path: str | os.PathLike[str], *, data: bytes | None = None) -> dict[bytes, int]:
    """Read a ``.tiktoken`` (or ``.tiktoken.gz``, ``.tiktoken.zst``) file into ``{token bytes: rank}``;
    ``data``: its ``decompressed_bytes``, already read.

    A gzip- or zstd-compressed file is recognised by its magic bytes, whatever
    its name. Raises ``TokenizerFileError`` (a ``ValueError``) naming the file,
    and the line where there is one, for anything tiktoken would choke on, a
    missing single byte included.
    """
    path = Path(path)
    ranks = parse_tiktoken_bytes(_read_raw(path) if data is None else data, path)
    missing = missing_single_bytes(ranks)
    if missing:
        raise TokenizerFileError(path, missing_bytes_message(missing))
    return ranks


def _read_raw(path: Path) -> bytes:
    """The file's bytes, decompressed when it is gzip or zstd."""
    try:
        data = path.read_bytes()
    except OSError as e:
        raise TokenizerFileError(path, f"cannot read the file ({e.strerror or e})") from e
    if data[:4] == _ZSTD_MAGIC:
        return _unzstd(path, data)
    if data[:2] != _GZIP_MAGIC:
        return data
    try:
        return gzip.decompress(data)
    except (OSError, EOFError, zlib.error) as e:
        raise TokenizerFileError(path, f"corrupt gzip data ({e})") from e


def _unzstd(path: Path, data: bytes) -> bytes:
    """Every zstd frame of ``data`` decompressed; a cut-off last frame is an error."""
    out: list[bytes] = []
    try:
        while data:
            frame = zstandard.ZstdDecompressor().decompressobj()
            out.append(frame.decompress(data))
            if not frame.eof:
                raise TokenizerFileError(path, "truncated zstd data (the last frame is incomplete)")
            data = frame.unused_data
    except zstandard.ZstdError as e:
        raise TokenizerFileError(path, f"corrupt zstd data ({e})") from e
    return b"".join(out)


def parse_tiktoken_bytes(data: bytes, path: str | os.PathLike[str] = "<bytes>") -> dict[bytes, int]:
    """Parse the contents of a ``.tiktoken`` file; ``path`` only names errors.

    A well-formed file is parsed in bulk (``_parse_whole``); anything else,
    CRLF and empty lines included, line by line (``_parse_lines``), which
    names the first bad line. Both give the same ranks, in the same order.

    Lenient where every loader is lenient: a trailing ``\\r`` (CRLF files), a
    missing final newline, empty lines (skipped; line numbers still count
    them). Strict elsewhere: exactly one space between the two fields, base64
    checked with ``validate=True`` (no stray characters, correct padding), the
    rank plain ASCII decimal digits, at most ``MAX_RANK``, bytes unique, ranks
    unique.

    >>> parse_tiktoken_bytes(b"IQ== 0\\r\\nIg== 1")
    {b'!': 0, b'"': 1}
    """
    ranks = _parse_whole(data)
    return ranks if ranks is not None else _parse_lines(data, path)


def _parse_whole(data: bytes) -> dict[bytes, int] | None:
    """The ranks of a file whose every line is ``BASE64 RANK`` with valid fields
    and no token or rank repeated; None for anything else, even valid (CRLF,
    empty lines), so that ``_parse_lines`` parses it or names its first bad line.

    Why: ``_parse_lines`` costs a few Python calls per line; this does the same
    checks on whole columns, in far fewer calls (the line structure with
    numpy, the ranks with one ``isdigit``, the base64 with the same strict
    ``a2b_base64`` that ``b64decode(validate=True)`` calls).

        >>> _parse_whole(b"IQ== 0\\nIg== 1\\n")
        {b'!': 0, b'"': 1}
        >>> _parse_whole(b"IQ== 0\\r\\n") is None, _parse_whole(b"IQ== 0\\nIQ== 1\\n") is None
        (True, True)
    """
    body = data[:-1] if data.endswith(b"\n") else data
    if not body or b"\r" in body or b"\n\n" in body or body.startswith(b"\n"):
        return None
    lines = body.count(b"\n") + 1
    if body.count(b" ") != lines or not _one_space_per_line(body):
        return None
    fields = body.replace(b"\n", b" ").split(b" ")
    b64s, rank_fields = fields[0::2], fields[1::2]
    if not b"".join(rank_fields).isdigit():  # ASCII digits only, as _parse_rank
        return None
    try:
        rank_list = list(map(int, rank_fields))
        tokens = [binascii.a2b_base64(b64, strict_mode=True) for b64 in b64s]
    except ValueError:  # binascii.Error, or a rank of more digits than int() takes
        return None
    if not all(tokens) or max(rank_list) > MAX_RANK:
        return None
    ranks = dict(zip(tokens, rank_list))
    if len(ranks) != lines or len(set(rank_list)) != lines:
        return None
    return ranks


def _one_space_per_line(body: bytes) -> bool:
    """Whether, given as many spaces as lines, each line of ``body`` has its space
    strictly inside it (so exactly one, with both fields non-empty).

        >>> _one_space_per_line(b"a b\\nc d"), _one_space_per_line(b"ab\\nc d e")
        (True, False)
    """
    chars = np.frombuffer(body, dtype=np.uint8)
    newlines = np.flatnonzero(chars == ord("\n"))
    spaces = np.flatnonzero(chars == ord(" "))
    starts = np.concatenate([[0], newlines + 1])
    ends = np.concatenate([newlines, [len(body)]])
    return len(spaces) == len(starts) and bool(np.all((spaces > starts) & (spaces < ends - 1)))


def _parse_lines(data: bytes, path: str | os.PathLike[str]) -> dict[bytes, int]:
    """``parse_tiktoken_bytes`` one line at a time; raises on the first bad line."""
    ranks: dict[bytes, int] = {}
    line_of_token: dict[bytes, int] = {}
    line_of_rank: dict[int, int] = {}
    lines = data.split(b"\n")
    for number, line in enumerate(lines, start=1):
        if line.endswith(b"\r"):
            line = line[:-1]
        if not line:
            continue
        cut = _cut_note(number, lines)
        try:
            token, rank = _parse_line(line)
        except ValueError as e:
            raise TokenizerFileError(path, f"{e}{cut}", line=number) from None
        if token in ranks:
            raise TokenizerFileError(
                path, f"duplicate token {token!r}: already on line {line_of_token[token]}{cut}", line=number
            )
        if rank in line_of_rank:
            raise TokenizerFileError(
                path, f"duplicate rank {rank}: already on line {line_of_rank[rank]}{cut}", line=number
            )
        ranks[token] = rank
        line_of_token[token] = number
        line_of_rank[rank] = number
    return ranks


def _cut_note(number: int, lines: list[bytes]) -> str:
    """What to add to an error on line ``number``: a last line with no line break
    is where a file cut short ends (a cut rank reads as an earlier rank, a cut
    token as bad base64), so the error says the file may be truncated.

        >>> _cut_note(2, [b"IQ== 0", b"IQ== 1"])
        '; it is the last line and has no line break: the file may be truncated'
        >>> _cut_note(2, [b"IQ== 0", b"IQ== 1", b""])
        ''
    """
    if number == len(lines) and lines[-1].rstrip(b"\r"):
        return "; it is the last line and has no line break: the file may be truncated"
    return ""


def _parse_line(line: bytes) -> tuple[bytes, int]:
    """Parse one ``BASE64 RANK`` line (``\\r`` already stripped).

    >>> _parse_line(b"IQ== 0")
    (b'!', 0)
    """
    fields = line.split(b" ")
    if len(fields) != 2:
        raise ValueError(
            f"expected '<base64> <rank>' separated by one space, got {_shorten(line)}"
        )
    b64, rank_field = fields
    try:
        token = base64.b64decode(b64, validate=True)
    except (binascii.Error, ValueError) as e:
        raise ValueError(f"invalid base64 {_shorten(b64)} ({e})") from None
    if not token:
        raise ValueError("empty token (the base64 field decodes to no bytes)")
    return token, _parse_rank(rank_field)


def _parse_rank(field: bytes) -> int:
    """Parse the rank field; raise ``ValueError`` with the reason.

    >>> _parse_rank(b"42")
    42
    """
    text = field.decode("ascii", "backslashreplace")
    if field[:1] == b"-" and field[1:].isdigit():
        raise ValueError(f"negative rank {text}")
    if not field.isdigit():  # bytes.isdigit is ASCII-only: no "+1", " 1", "١"
        raise ValueError(f"rank {text!r} is not a non-negative decimal integer")
    rank = int(field)
    if rank > MAX_RANK:
        raise ValueError(f"rank {rank} is too large (tiktoken ranks are 32-bit, at most {MAX_RANK})")
    return rank


def _shorten(raw: bytes, limit: int = 60) -> str:
    """repr of a possibly long byte string, cut to about ``limit`` characters."""
    text = raw.decode("utf-8", "backslashreplace")
    return repr(text if len(text) <= limit else text[:limit] + "...")
