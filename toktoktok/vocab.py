"""The vocabulary layout of docs/vocabulary.md: byte order, hardcoded merges, and a
compact rank -> bytes table.

Ranks 0..255 are the single bytes in cl100k_base's order (printable bytes
first, so rank 0 is ``b"!"``), which is also the order in which Hugging Face's
ByteLevel alphabet sorts. Ranks 256..1416 are the 1,161 hardcoded merges.

    >>> BYTE_ORDER[0], BYTE_ORDER[93], BYTE_ORDER[94]
    (33, 126, 161)
    >>> v = Vocab.initial(hardcoded=True)
    >>> len(v), v.token(256), v.token(1416)
    (1417, b'00', b'...')

A ``Vocab`` stores every token's bytes in one flat ``uint8`` buffer with
offsets indexed by rank, which is what the numba kernels take. A rank with no
token (a gap inherited from a warm start) has an empty span.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping

import numpy as np

BYTE_ORDER: tuple[int, ...] = tuple(
    list(range(33, 127))
    + list(range(161, 173))
    + list(range(174, 256))
    + [b for b in range(256) if not (33 <= b <= 126 or 161 <= b <= 172 or 174 <= b <= 255)]
)

_CODE_PAIRS = "== != <= >= += -= *= /= -> => :: // /* */ && || ++ -- << >>".split()


def _halves(unit: bytes, n: int) -> tuple[bytes, bytes]:
    """A run of n units built as run(n // 2) + run(n - n // 2)."""
    return unit * (n // 2), unit * (n - n // 2)


def hardcoded_merges() -> list[tuple[bytes, bytes]]:
    """The 1,161 hardcoded merges of docs/vocabulary.md as (left, right) byte pairs, in rank order.

    >>> m = hardcoded_merges()
    >>> len(m), m[0], m[100], m[1100], m[-1]
    (1161, (b'0', b'0'), (b'00', b'0'), (b' ', b' '), (b'..', b'.'))
    """
    digits = [str(d).encode() for d in range(10)]
    merges = [(a, b) for a in digits for b in digits]
    merges += [(f"{n // 10:02d}".encode(), digits[n % 10]) for n in range(1000)]
    merges += [_halves(b" ", n) for n in range(2, 33)]
    merges += [_halves(b"\n", n) for n in range(2, 9)]
    merges.append((b"\r", b"\n"))
    merges += [(p[:1].encode(), p[1:].encode()) for p in _CODE_PAIRS]
    merges += [(b".", b"."), (b"..", b".")]
    return merges


class Vocab:
    """Token bytes by rank, in a flat buffer (``buf``) with offsets (``off``).

    Token ``r`` is ``buf[off[r]:off[r + 1]]``; an empty span is a gap.
    """

    def __init__(self, buf: np.ndarray, off: np.ndarray) -> None:
        self.buf = np.ascontiguousarray(buf, dtype=np.uint8)
        self.off = np.ascontiguousarray(off, dtype=np.int64)

    @classmethod
    def from_tokens(cls, tokens: Iterable[bytes]) -> Vocab:
        """Build from token bytes in rank order (``b""`` marks a gap)."""
        toks = list(tokens)
        lengths = np.fromiter((len(t) for t in toks), dtype=np.int64, count=len(toks))
        off = np.zeros(len(toks) + 1, dtype=np.int64)
        np.cumsum(lengths, out=off[1:])
        buf = np.frombuffer(b"".join(toks), dtype=np.uint8).copy()
        return cls(buf, off)

    @classmethod
    def from_ranks(cls, ranks: Mapping[bytes, int]) -> Vocab:
        """Build from a ``{bytes: rank}`` mapping; missing ranks become gaps."""
        size = max(ranks.values()) + 1 if ranks else 0
        toks = [b""] * size
        for tok, rank in ranks.items():
            toks[rank] = tok
        return cls.from_tokens(toks)

    @classmethod
    def initial(cls, *, hardcoded: bool = True) -> Vocab:
        """The 256 bytes, then (if ``hardcoded``) the 1,161 hardcoded merges."""
        toks = [bytes([b]) for b in BYTE_ORDER]
        if hardcoded:
            toks += [a + b for a, b in hardcoded_merges()]
        return cls.from_tokens(toks)

    def __len__(self) -> int:
        """The number of ranks, gaps included (one more than the highest rank)."""
        return len(self.off) - 1

    def count(self) -> int:
        """The number of tokens (ranks that are not gaps)."""
        return int(np.count_nonzero(np.diff(self.off)))

    def token(self, rank: int) -> bytes:
        return self.buf[self.off[rank] : self.off[rank + 1]].tobytes()

    def ranks(self) -> dict[bytes, int]:
        """``{bytes: rank}`` for every rank that is not a gap (tiktoken's mergeable_ranks)."""
        data = self.buf.tobytes()
        off = self.off.tolist()
        return {data[off[r] : off[r + 1]]: r for r in range(len(self)) if off[r + 1] > off[r]}

    def extended(self, new_tokens: Iterable[bytes]) -> Vocab:
        """A new Vocab with ``new_tokens`` appended at the next ranks."""
        toks = list(new_tokens)
        if not toks:
            return self
        more = Vocab.from_tokens(toks)
        return self.extended_spans(more.buf, more.off)

    def extended_spans(self, buf: np.ndarray, off: np.ndarray) -> Vocab:
        """A new Vocab with the tokens ``buf[off[i]:off[i + 1]]`` appended at the next
        ranks: ``extended`` for tokens already in one buffer (an Arrow column's).

            >>> v = Vocab.initial(hardcoded=False)
            >>> w = v.extended_spans(np.frombuffer(b"xabcde", np.uint8), np.array([1, 3, 6]))
            >>> len(w), w.token(256), w.token(257), v.extended_spans(w.buf, np.array([0])) is v
            (258, b'ab', b'cde', True)
        """
        off = np.asarray(off, dtype=np.int64)
        if len(off) < 2:
            return self
        return Vocab(np.concatenate([self.buf, buf[off[0] : off[-1]]]),
                     np.concatenate([self.off, self.off[-1] + off[1:] - off[0]]))


def special_ids(tokens: Iterable[str], vocab_size: int, *, kept: Mapping[str, int] | None = None,
                pad_to: int | None = None) -> dict[str, int]:
    """Special-token ids as export writes them (docs/vocabulary.md).

    ``kept`` (a warm start's special tokens) keep their ids; the other
    ``tokens`` follow every merge, from ``vocab_size`` on, in their order;
    then ``<|reserved_special_token_K|>`` tokens (K from 0, skipping names
    already used) fill up to a multiple of ``pad_to``, so that the model's
    embedding table has a round size.

        >>> special_ids(["<|a|>"], 1001, pad_to=4)
        {'<|a|>': 1001, '<|reserved_special_token_0|>': 1002, '<|reserved_special_token_1|>': 1003}
        >>> special_ids(["<|end|>", "<|new|>"], 300, kept={"<|end|>": 256, "<|pad|>": 257})
        {'<|end|>': 256, '<|pad|>': 257, '<|new|>': 300}
    """
    kept = dict(kept or {})
    ids = {tok: vocab_size + i for i, tok in enumerate(t for t in tokens if t not in kept)}
    padding = -(vocab_size + len(ids)) % pad_to if pad_to else 0
    # a name already used is skipped: at most padding + len(tokens) + len(kept) names
    # are drawn, linear in pad_to (at most 65,536, the config's bound)
    free = (name for name in map(reserved_name, itertools.count()) if name not in ids and name not in kept)
    for name in itertools.islice(free, padding):
        ids[name] = vocab_size + len(ids)
    return kept | ids


def reserved_name(k: int) -> str:
    """The name of the ``k``-th padding token.

        >>> reserved_name(7)
        '<|reserved_special_token_7|>'
    """
    return f"<|reserved_special_token_{k}|>"
