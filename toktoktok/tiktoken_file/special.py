"""Special tokens beside a vocabulary (they live in the ``.meta.json``, not in the
``.tiktoken``): checked before tiktoken sees them, and found in a text.

tiktoken silently accepts a special id equal to a rank (decoding becomes
ambiguous), and picks between two special tokens where one contains the
other by hash order: ``validate_special_tokens`` refuses both, and
``find_nested`` finds a nested pair without comparing every pair.
``SpecialIndex`` splits a text at its special tokens in time that grows with
the text, not with the number of tokens.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from toktoktok.tiktoken_file.ranks import MAX_RANK


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
