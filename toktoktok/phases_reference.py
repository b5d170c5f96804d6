"""Training in phases, in plain Python, from raw text: the reference the pipeline is held to.

A phase counts its pieces with its own pattern (``regex.findall`` over each
text), segments them with every rank so far by tiktoken's rule, and merges
on (``merge.train_reference``); its ranks join the vocabulary the next
phase starts from. This is SuperBPE's two-stage algorithm when a phase with
a word-level pattern is followed by one with ``pattern: superword``: the
second resumes BPE from the first's merges, on pieces that run across spaces.

Quadratic and short, for the tests only.

    >>> from toktoktok.patterns import NAMED_PATTERNS
    >>> base = {bytes([b]): b for b in range(256)}
    >>> phases = [Stage(NAMED_PATTERNS["default"].python, merges=2),
    ...           Stage(NAMED_PATTERNS["superword"].python, merges=3, max_token_words=2)]
    >>> [bytes(t) for *_, t, _ in train_phases_reference(["to be to be to be"], phases, base)]
    [b' b', b'to', b' be', b'to be', b' to be']
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import regex

from toktoktok.merge import Merge, train_reference


@dataclass(frozen=True)
class Stage:
    """One phase of the reference: its pattern (``regex``'s spelling) and training settings."""

    pattern: str
    merges: int
    max_token_words: int | None = None
    min_frequency: int = 2
    max_token_bytes: int | None = None


def piece_counts(texts: Iterable[str], pattern: str) -> Counter[bytes]:
    """The pieces of ``texts`` under ``pattern``, as UTF-8 bytes, with their counts.

        >>> dict(piece_counts(["a b", "a"], r"\\S+|\\s+"))
        {b'a': 2, b' ': 1, b'b': 1}
    """
    compiled = regex.compile(pattern)
    return Counter(p.encode("utf-8") for text in texts for p in compiled.findall(text))


def train_phases_reference(texts: Iterable[str], stages: Iterable[Stage], ranks: Mapping[bytes, int], *,
                           next_rank: int | None = None) -> list[Merge]:
    """Every phase's merges in turn, each trained on its own pieces of ``texts`` from
    ``ranks`` and the ranks of the phases before it (a warm start: ``ranks``
    beyond the 256 bytes). ``next_rank``: the first new rank, where a warm
    start's special tokens sit just after its ranks."""
    texts = list(texts)
    ranks = dict(ranks)
    learned: list[Merge] = []
    for stage in stages:
        start = max(ranks.values()) + 1 if next_rank is None else next_rank
        rows = train_reference(piece_counts(texts, stage.pattern), ranks, merges=stage.merges,
                               min_frequency=stage.min_frequency, max_token_bytes=stage.max_token_bytes,
                               max_token_words=stage.max_token_words, next_rank=start)
        ranks.update((token, rank) for rank, _, _, token, _ in rows)
        learned += rows
        next_rank = start + sum(rank >= start for rank, *_ in rows)  # the ranks new in this stage
    return learned
