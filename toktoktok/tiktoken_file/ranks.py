"""A vocabulary's ranks checked: ``{token bytes: rank}`` as tiktoken needs it.

Every token non-empty bytes and every rank an integer in ``0..MAX_RANK``
(tiktoken ranks are ``u32`` and ``u32::MAX`` is its "no merge" sentinel),
no token or rank repeated, all 256 single bytes present. Rank gaps are
allowed: files made elsewhere have them (p50k_base at 50256, where its
special token sits), and a warm start must keep them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from collections.abc import Set as AbstractSet
from operator import itemgetter

MAX_RANK = 2**32 - 2
"""The highest rank tiktoken can hold (``u32``; ``u32::MAX`` is a sentinel)."""

_SINGLE_BYTES = [bytes([b]) for b in range(256)]


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


def missing_bytes_message(missing: list[int]) -> str:
    """A readable, bounded description of the missing single bytes."""
    shown = ", ".join(_describe_byte(b) for b in missing[:16])
    more = f", ... ({len(missing)} missing in all)" if len(missing) > 16 else ""
    return (
        f"the vocabulary lacks {len(missing)} of the 256 single bytes: {shown}{more}; "
        "tiktoken cannot encode text containing a missing byte"
    )


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
        raise ValueError(missing_bytes_message(missing))
    return sorted(pairs, key=itemgetter(1))


def _check_pair(token: object, rank: object) -> None:
    """Type and range checks for one ``(token, rank)`` pair to be written."""
    if not isinstance(token, bytes) or not token:
        raise ValueError(f"token {token!r} is not a non-empty bytes object")
    if isinstance(rank, bool) or not isinstance(rank, int) or not 0 <= rank <= MAX_RANK:
        raise ValueError(f"rank {rank!r} of token {token!r} is not an integer in 0..{MAX_RANK}")


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
