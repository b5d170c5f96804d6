"""The ids a config gives, in the order they are given, and ``vocab_size: N``.

A model's embedding has one row per id, so people state a vocabulary as one
number: the highest id + 1. The ids come in blocks, in this order:

1. the base: the 256 bytes (ids 0-255) and, when ``hardcoded_merges`` is on,
   the 1,161 hardcoded merges (256-1416); or, with a warm start, the base
   vocabulary with its gaps and special tokens (0 to its highest id);
2. each phase's new tokens (its ``merges``);
3. the new special tokens, in config order (a warm start's keep their ids);
4. the padding tokens up to a multiple of ``pad_to_multiple_of``.

``fit_merges`` gives the one phase that leaves ``merges:`` out the rest of
``vocab_size``, or says why the numbers cannot make exactly N; ``blocks``
lists the blocks with their first and last id (what ``toktok plan`` shows).

    >>> fit_merges(50_000, base=1417, merges=[30_000, None], specials=3, pad_to=8)
    [30000, 18580]
    >>> [(b.name, b.first, b.last) for b in blocks(base=[("bytes", 256)], merges=[("A", 10)], specials=3, pad_to=8)]
    [('bytes', 0, 255), ('phase A', 256, 265), ('special tokens', 266, 268), ('padding', 269, 271)]
"""

from __future__ import annotations

from dataclasses import dataclass

from toktoktok.errors import LayoutError

BYTES = 256
HARDCODED_MERGES = 1161  # len(toktoktok.vocab.hardcoded_merges()); a test checks it


def padded(total: int, pad_to: int | None) -> int:
    """``total`` rounded up to a multiple of ``pad_to`` (unchanged without one).

    >>> padded(1420, 128), padded(1408, 128), padded(1420, None)
    (1536, 1408, 1420)
    """
    return total if not pad_to else -(-total // pad_to) * pad_to


def _parts(base: int, merges: list[int], specials: int, base_name: str) -> str:
    return f"{base_name} ({base:,}), the phases' merges ({sum(merges):,}) and the special tokens ({specials:,})"


def check_shape(vocab_size: int, merges: list[int | None], pad_to: int | None) -> None:
    """What can be said without the base's size: ``vocab_size`` is a multiple of
    ``pad_to``, and at most one phase leaves ``merges:`` out (``LayoutError``)."""
    if pad_to and vocab_size % pad_to:
        low, high = vocab_size // pad_to * pad_to, padded(vocab_size, pad_to)
        raise LayoutError(("vocab_size",), f"is {vocab_size:,}, not a multiple of pad_to_multiple_of ({pad_to}): "
                                           f"use {low} or {high}")
    free = [i for i, m in enumerate(merges) if m is None]
    if len(free) > 1:
        raise LayoutError(("phases", free[1], "merges"),
                          f"is required: only one phase may leave merges: out (phases[{free[0]}] already gets "
                          "the rest of vocab_size)")


def fit_merges(vocab_size: int, *, base: int, merges: list[int | None], specials: int,
               pad_to: int | None, base_name: str = "the base") -> list[int]:
    """Every phase's merges such that the ids number exactly ``vocab_size``.

    ``merges[i]`` is None for a phase that left ``merges:`` out (at most one):
    it gets the rest, and no padding is needed. Raises ``LayoutError`` when
    ``vocab_size`` is not a multiple of ``pad_to``, two phases leave merges out,
    the rest would be negative, or (every phase giving its merges) the ids,
    padded, do not add up to ``vocab_size``.

    >>> fit_merges(2000, base=1417, merges=[500], specials=3, pad_to=None)
    Traceback (most recent call last):
    ...
    toktoktok.errors.LayoutError: is 2,000, but the ids add up to 1,920: the base (1,417), the phases' merges (500) and the special tokens (3); leave merges: out of one phase to give it the rest, or set vocab_size: 1920
    """
    check_shape(vocab_size, merges, pad_to)
    free = [i for i, m in enumerate(merges) if m is None]
    given = [m for m in merges if m is not None]
    taken = base + sum(given) + specials
    if not free:
        total = padded(taken, pad_to)
        if total != vocab_size:
            pad = f", padded to a multiple of {pad_to} ({total:,})" if pad_to and total != taken else ""
            raise LayoutError(("vocab_size",), f"is {vocab_size:,}, but the ids add up to {taken:,}: "
                                               f"{_parts(base, given, specials, base_name)}{pad}; leave merges: out of one "
                                               f"phase to give it the rest, or set vocab_size: {total}")
        return [int(m) for m in given]
    rest = vocab_size - taken
    if rest < 0:
        raise LayoutError(("vocab_size",), f"is {vocab_size:,}, too small: {_parts(base, given, specials, base_name)} "
                                           f"already take {taken:,} ids")
    return [rest if m is None else m for m in merges]


@dataclass(frozen=True)
class Block:
    """A run of ids: ``first`` to ``last`` (``last = first - 1`` when empty)."""

    name: str
    first: int
    size: int

    @property
    def last(self) -> int:
        return self.first + self.size - 1

    def as_dict(self) -> dict[str, int | str]:
        return {"name": self.name, "first": self.first, "last": self.last, "count": self.size}


def blocks(*, base: list[tuple[str, int]], merges: list[tuple[str, int]], specials: int,
           pad_to: int | None) -> list[Block]:
    """The blocks of ids in order: ``base`` (e.g. ``[("bytes", 256), ("hardcoded
    merges", 1161)]`` or ``[("warm start base", 100277)]``), each phase
    (``(name, merges)``), the special tokens, then the padding."""
    out: list[Block] = []
    at = 0
    for name, size in base + [(f"phase {name}", size) for name, size in merges] + [("special tokens", specials)]:
        out.append(Block(name, at, size))
        at += size
    out.append(Block("padding", at, padded(at, pad_to) - at))
    return out
