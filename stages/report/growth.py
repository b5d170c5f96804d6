"""The vocabulary the report measures, as it grows: the base tokens (the 256
bytes, the hardcoded merges or a warm start's base), then every phase's new
tokens in rank order; a tiktoken Encoding of any prefix of it.

Read from the artifacts only: the base vocabulary, each phase's
``merges.arrow`` (a merge into a token that already exists adds no rank).
"""

from __future__ import annotations

import functools
from operator import itemgetter

import numpy as np
import pyarrow as pa
import tiktoken

from toktoktok.config import Config
from toktoktok.patterns import Pattern
from toktoktok.vocab import BYTE_ORDER

from .. import workdir
from ..workdir import Work

TOP = 20  # longest tokens and first merges shown per phase


class Growth:
    """The vocabulary as it grows: base tokens, then every phase's new tokens in order."""

    def __init__(self, work: Work) -> None:
        cfg = work.cfg
        base = work.base_vocab()
        self.cfg = cfg
        self.base_ranks = base.ranks()
        self.next_rank = len(base)
        self.new: list[tuple[bytes, int]] = []  # (token, rank) of every phase, in order
        self.phase_new: list[tuple[int, int]] = []  # (start, end) in self.new, per phase
        self.merges: list[dict[str, list]] = []  # each phase's first TOP rows of merges.arrow, as columns
        self._final: tiktoken.Encoding | None = None
        for phase in cfg.phases:
            table = work.train(phase).merges()
            self.merges.append(table.slice(0, TOP).to_pydict())
            start = len(self.new)
            ranks = table["rank"].to_numpy().astype(np.int64)
            keep = workdir.new_token_rows(ranks, self.next_rank)
            kept = ranks[keep].tolist()
            self.new.extend(zip(table["bytes"].filter(pa.array(keep)).to_pylist(), kept))
            self.next_rank = kept[-1] + 1 if kept else self.next_rank
            self.phase_new.append((start, len(self.new)))

    def ranks(self, new_tokens: int) -> dict[bytes, int]:
        """The base and the first ``new_tokens`` learned tokens."""
        return self.base_ranks | dict(self.new[:new_tokens])

    def encoding(self, new_tokens: int | None) -> tiktoken.Encoding:
        """A tiktoken Encoding (no special tokens) of the base and the first
        ``new_tokens`` learned tokens (None: the 256 bytes only), with the
        pattern of the phase those tokens end in (``pattern_at``). The final
        vocabulary's, which the table, the curve and the usage count all
        measure with, is built once, not three times (building an Encoding of a
        large vocabulary takes time)."""
        pattern = self.pattern_at(new_tokens).tiktoken
        if new_tokens is None:
            return _encoding("report-bytes", _bytes_ranks(), pattern)
        if new_tokens < len(self.new):
            return _encoding("report", self.ranks(new_tokens), pattern)
        if self._final is None:
            self._final = _encoding("report-final", self.ranks(new_tokens), pattern)
        return self._final

    def pattern_at(self, new_tokens: int | None) -> Pattern:
        """The pattern text is cut with once the first ``new_tokens`` learned tokens
        exist: that of the phase that learned the last of them (its own, or the
        config's), the first phase's before any (the base), the tokenizer's at the end."""
        phases = self.cfg.phases
        if new_tokens is not None and new_tokens >= len(self.new):
            return self.cfg.tokenizer_pattern
        if new_tokens is None or new_tokens <= 0:
            return self.cfg.pattern_of(phases[0])
        # below len(self.new): the last phase's range ends there, so some phase's range holds it
        return next(self.cfg.pattern_of(phase) for phase, (_, end) in zip(phases, self.phase_new) if new_tokens <= end)

    @functools.cached_property
    def by_rank(self) -> dict[int, bytes]:
        base = dict(zip(self.base_ranks.values(), self.base_ranks))
        return base | dict(zip(map(itemgetter(1), self.new), map(itemgetter(0), self.new)))


def base_label(cfg: Config) -> str | None:
    """The column of the vocabulary before the first phase (None: only the bytes)."""
    if cfg.warm_start is not None:
        return "warm start base"
    return "hardcoded merges" if cfg.hardcoded_merges else None


def _encoding(name: str, ranks: dict[bytes, int], pattern: str) -> tiktoken.Encoding:
    return tiktoken.Encoding(name=name, pat_str=pattern, mergeable_ranks=ranks, special_tokens={})


def _bytes_ranks() -> dict[bytes, int]:
    return {bytes([b]): r for r, b in enumerate(BYTE_ORDER)}
