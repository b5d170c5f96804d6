"""Reading and writing ``.tiktoken`` files, with our own strict parser.

The format, and what the parser accepts and refuses: docs/outputs.md (The
``.tiktoken`` file). Special tokens are not in it (they live in the
``.meta.json`` companion).

Why not ``tiktoken.load.load_tiktoken_bpe``? It caches files by path, even
local ones, so a rewritten file can load stale; and it accepts data that
makes tiktoken panic later (duplicate ranks) or mis-encode silently
(duplicate bytes: the last line wins). This parser reports every problem with
the file name and the 1-based line number, before tiktoken ever sees it.
Rank gaps are allowed: files made elsewhere have them (p50k_base at 50256,
where its special token sits), and a warm start must keep them.

    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "t.tiktoken"
    >>> vocab = {bytes([b]): b for b in range(256)} | {b"ab": 256}
    >>> write_tiktoken(p, vocab)
    >>> p.read_bytes().splitlines()[256]
    b'YWI= 256'
    >>> read_tiktoken(p) == vocab
    True
"""

from __future__ import annotations

import base64
import binascii
import gzip
import os
import zlib
from collections.abc import Iterable, Mapping
from collections.abc import Set as AbstractSet
from operator import itemgetter
from pathlib import Path

import numpy as np
import zstandard

from toktoktok.atomic import atomic_write_bytes
from toktoktok.errors import TokenizerFileError

MAX_RANK = 2**32 - 2
"""The highest rank tiktoken can hold (``u32``; ``u32::MAX`` is a sentinel)."""

_SINGLE_BYTES = [bytes([b]) for b in range(256)]
_GZIP_MAGIC = b"\x1f\x8b"
_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"


def _describe_byte(b: int) -> str:
    r"""Name a single byte readably.

    >>> print(_describe_byte(10), _describe_byte(200))
    0x0a ('\n') 0xc8
    """
    return f"0x{b:02x} ({chr(b)!r})" if b < 128 else f"0x{b:02x}"


def missing_single_bytes(tokens: Iterable[bytes]) -> list[int]:
    """The byte values (0-255) that are not tokens on their own.

    >>> missing_single_bytes([bytes([b]) for b in range(2, 256)])
    [0, 1]
    """
    if not isinstance(tokens, (Mapping, AbstractSet)):  # a dict or set is looked up as it is: 256 lookups
        tokens = {t for t in tokens if len(t) == 1}
    return [b for b, single in enumerate(_SINGLE_BYTES) if single not in tokens]


def _missing_bytes_message(missing: list[int]) -> str:
    """A readable, bounded description of the missing single bytes."""
    shown = ", ".join(_describe_byte(b) for b in missing[:16])
    more = f", ... ({len(missing)} missing in all)" if len(missing) > 16 else ""
    return (
        f"the vocabulary lacks {len(missing)} of the 256 single bytes: {shown}{more}; "
        "tiktoken cannot encode text containing a missing byte"
    )


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


def _shorten(raw: bytes, limit: int = 60) -> str:
    """repr of a possibly long byte string, cut to about ``limit`` characters."""
    text = raw.decode("utf-8", "backslashreplace")
    return repr(text if len(text) <= limit else text[:limit] + "...")


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
    for number, line in enumerate(data.split(b"\n"), start=1):
        if line.endswith(b"\r"):
            line = line[:-1]
        if not line:
            continue
        try:
            token, rank = _parse_line(line)
        except ValueError as e:
            raise TokenizerFileError(path, str(e), line=number) from None
        if token in ranks:
            raise TokenizerFileError(
                path, f"duplicate token {token!r}: already on line {line_of_token[token]}", line=number
            )
        if rank in line_of_rank:
            raise TokenizerFileError(
                path, f"duplicate rank {rank}: already on line {line_of_rank[rank]}", line=number
            )
        ranks[token] = rank
        line_of_token[token] = number
        line_of_rank[rank] = number
    return ranks


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
        raise TokenizerFileError(path, _missing_bytes_message(missing))
    return ranks


def _check_pair(token: object, rank: object) -> None:
    """Type and range checks for one ``(token, rank)`` pair to be written."""
    if not isinstance(token, bytes) or not token:
        raise ValueError(f"token {token!r} is not a non-empty bytes object")
    if isinstance(rank, bool) or not isinstance(rank, int) or not 0 <= rank <= MAX_RANK:
        raise ValueError(f"rank {rank!r} of token {token!r} is not an integer in 0..{MAX_RANK}")


def validate_ranks(ranks: Mapping[bytes, int] | Iterable[tuple[bytes, int]]) -> list[tuple[bytes, int]]:
    """Check a vocabulary and return it as ``(token, rank)`` pairs sorted by rank.

    Raises ``ValueError`` on a bad type, a repeated token or rank, or a
    missing single byte.

    >>> validate_ranks([(bytes([b]), 255 - b) for b in range(256)])[0]
    (b'\\xff', 0)
    """
    pairs = list(ranks.items()) if isinstance(ranks, Mapping) else list(ranks)
    tokens = _plainly_valid(pairs)
    if tokens is None:
        tokens = _check_pairs(pairs)
    missing = missing_single_bytes(tokens)
    if missing:
        raise ValueError(_missing_bytes_message(missing))
    return sorted(pairs, key=itemgetter(1))


def _plainly_valid(pairs: list) -> set[bytes] | None:
    """The tokens of ``pairs`` when every pair is a non-empty ``bytes`` (exactly)
    and an ``int`` (exactly) in ``0..MAX_RANK``, no token or rank repeated;
    None otherwise, valid or not (``_check_pairs`` then decides, and names the
    first bad pair).

    Why: checks on whole columns are quicker than ``_check_pairs``, which
    checks pair by pair.

        >>> sorted(_plainly_valid([(b"a", 0), (b"b", 1)])), _plainly_valid([(b"a", 0), (b"b", True)])
        ([b'a', b'b'], None)
    """
    try:
        if not pairs or set(map(len, pairs)) != {2}:
            return None
        tokens, values = list(map(itemgetter(0), pairs)), list(map(itemgetter(1), pairs))
    except (TypeError, KeyError):  # a pair with no len, or a mapping of two keys
        return None
    if set(map(type, tokens)) != {bytes} or set(map(type, values)) != {int} or not all(tokens):
        return None
    unique = set(tokens)
    if min(values) < 0 or max(values) > MAX_RANK or len(unique) != len(pairs) or len(set(values)) != len(pairs):
        return None
    return unique


def _check_pairs(pairs: list) -> dict[bytes, int]:
    """``{token: rank}`` of ``pairs``, checked one at a time: raises ``ValueError`` on the first bad pair."""
    seen_tokens: dict[bytes, int] = {}
    seen_ranks: dict[int, bytes] = {}
    for token, rank in pairs:
        _check_pair(token, rank)
        if token in seen_tokens:
            raise ValueError(f"token {token!r} appears twice (ranks {seen_tokens[token]} and {rank})")
        if rank in seen_ranks:
            raise ValueError(f"rank {rank} is given to two tokens: {seen_ranks[rank]!r} and {token!r}")
        seen_tokens[token] = rank
        seen_ranks[rank] = token
    return seen_tokens


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


def validate_special_tokens(ranks: Mapping[bytes, int], special: Mapping[str, int]) -> None:
    """Check special tokens against a vocabulary before tiktoken sees them.

    tiktoken silently accepts a special id equal to a rank (decoding becomes
    ambiguous), and picks between two special tokens where one contains the
    other by hash order; so all of these raise ``ValueError``: an empty or
    non-string token, an id that is not an integer in ``0..MAX_RANK``, an id
    equal to a rank, two tokens with one id, one token inside another.

    >>> ranks = {bytes([b]): b for b in range(256)}
    >>> validate_special_tokens(ranks, {"<|endoftext|>": 256})
    >>> validate_special_tokens(ranks, {"<|endoftext|>": 255})
    Traceback (most recent call last):
    ...
    ValueError: special token '<|endoftext|>' has id 255, which is already the rank of b'\\xff'
    """
    by_rank = {rank: token for token, rank in ranks.items()}
    owner: dict[int, str] = {}
    for token, tid in special.items():
        _check_special(token, tid)
        if tid in by_rank:
            raise ValueError(
                f"special token {token!r} has id {tid}, which is already the rank of {by_rank[tid]!r}"
            )
        if tid in owner:
            raise ValueError(f"special tokens {owner[tid]!r} and {token!r} share the id {tid}")
        owner[tid] = token
    _check_not_nested(list(special))


def _check_special(token: object, tid: object) -> None:
    """Type and range checks for one special token and its id."""
    if not isinstance(token, str) or not token:
        raise ValueError(f"special token {token!r} is not a non-empty string")
    if isinstance(tid, bool) or not isinstance(tid, int) or not 0 <= tid <= MAX_RANK:
        raise ValueError(f"special token {token!r} has id {tid!r}, not an integer in 0..{MAX_RANK}")


def _check_not_nested(tokens: list[str]) -> None:
    """Reject a special token that occurs inside another one.

    >>> _check_not_nested(["<|a|>", "<|ab|>"])
    >>> _check_not_nested(["<|a|>", "x<|a|>"])
    Traceback (most recent call last):
    ...
    ValueError: special token '<|a|>' occurs inside special token 'x<|a|>' (tiktoken would choose between them by hash order)
    """
    found = find_nested(tokens)
    if found is not None:
        inner, outer = found
        raise ValueError(
            f"special token {inner!r} occurs inside special token {outer!r} "
            "(tiktoken would choose between them by hash order)"
        )


def find_nested(tokens: Iterable[str]) -> tuple[str, str] | None:
    """The first ``(inner, outer)`` pair of distinct tokens with ``inner`` inside
    ``outer``, or None; a token listed twice is not nested in itself.

    Why not compare every pair: 65,536 padding tokens are 2 billion pairs.
    Instead each window of ``outer`` that
    starts with a character some token starts with is looked up, for each
    shorter token length, in the set of tokens of that length: at most
    ``sum(len(t)) * (number of distinct lengths)`` lookups, and the reserved
    tokens ``<|reserved_special_token_K|>`` start with ``<`` only at their
    first character, so they cost one window per length each.

    >>> find_nested(["<|a|>", "<|b|>", "<|a|>"]) is None
    True
    >>> find_nested(["ab", "xaby", "b"])
    ('b', 'ab')
    """
    by_length: dict[int, set[str]] = {}
    for token in tokens:
        by_length.setdefault(len(token), set()).add(token)
    lengths = sorted(by_length)
    starts = {token[0] for group in by_length.values() for token in group if token}
    for length in lengths[1:]:
        for outer in sorted(by_length[length]):
            inner = _inner_token(outer, starts, lengths, by_length)
            if inner is not None:
                return inner, outer
    return None


def _inner_token(outer: str, starts: set[str], lengths: list[int], by_length: dict[int, set[str]]) -> str | None:
    """A shorter token found inside ``outer`` (``lengths`` ascending), or None."""
    size = len(outer)
    for i, char in enumerate(outer):
        if char not in starts:
            continue
        for length in lengths:
            if length >= size or i + length > size:
                break
            window = outer[i : i + length]
            if window in by_length[length]:
                return window
    return None


class SpecialIndex:
    """Finds special tokens in a text in time that grows with the text, not with
    the number of tokens.

    Why: tiktoken's ``encode(text, allowed_special=...)`` copies the whole
    allowed set into Rust on every call (a cost that grows with the special
    tokens, whatever the text's length), so encoding a corpus with special
    tokens allowed cost documents x special tokens. This index is built once;
    a text is scanned for the characters special tokens start with, and at
    each such place the windows of each token length are looked up in sets.
    The tokens must not sit inside one another (``validate_special_tokens``
    refuses that), so at most one token starts at a place and the leftmost
    match wins, as in tiktoken.

        >>> index = SpecialIndex({"<|a|>": 300, "<|bb|>": 301})
        >>> index.split("x<|a|><|bb|>y<|a|")
        ['x', 300, 301, 'y<|a|']
    """

    def __init__(self, ids: Mapping[str, int]) -> None:
        import re

        self.ids = dict(ids)
        self.by_length: dict[int, set[str]] = {}
        for token in self.ids:
            self.by_length.setdefault(len(token), set()).add(token)
        self.lengths = sorted(self.by_length)
        starts = sorted({token[0] for token in self.ids})
        self.starts = re.compile("[" + "".join(re.escape(c) for c in starts) + "]") if starts else None

    def split(self, text: str) -> list[str | int]:
        """``text`` as its non-empty stretches of ordinary text and the ids of the special
        tokens between them, in order."""
        out: list[str | int] = []
        done = 0
        if self.starts is None:
            return [text] if text else []
        for match in self.starts.finditer(text):
            at = match.start()
            if at < done:
                continue
            for length in self.lengths:
                window = text[at : at + length]
                if len(window) < length:
                    break
                if window in self.by_length[length]:
                    if at > done:
                        out.append(text[done:at])
                    out.append(self.ids[window])
                    done = at + length
                    break
        if done < len(text):
            out.append(text[done:])
        return out
