"""How often each token of the final vocabulary is produced by each phase's own
text, and the phase's under-trained tokens: new tokens its text produces
fewer than ``UNDERTRAINED_BELOW`` times.

A phase's text is the inventory it trained on (each piece segmented as
tiktoken would, times its count) and its held-out text (encoded with
tiktoken).
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from ..workdir import Work
from .compression import Domain
from .growth import Growth

UNDERTRAINED_BELOW = 10  # a phase's new token produced fewer times than this by its own text is under-trained


def token_usage(work: Work, growth: Growth, domains: list[Domain]) -> list[Any]:
    """For each phase: how often each id of the final vocabulary is produced by the
    phase's inventory (segmented as tiktoken would, each piece times its count)
    and by its held-out text (encoded with tiktoken)."""
    from toktoktok.counts import inventory
    from toktoktok.segment import segment_pieces

    cfg = work.cfg
    vocab = work.vocab_after(len(cfg.phases))
    enc = growth.encoding(len(growth.new)) if any(domain.groups for domain in domains) else None
    size = max(growth.by_rank, default=-1) + 1
    out = []
    for phase, domain in zip(cfg.phases, domains):
        # the last phase's trainer segmented its pieces with this very vocabulary
        trained = work.train(phase).usage(len(vocab)) if phase is cfg.phases[-1] else None
        if trained is not None and len(trained) <= size:
            used = np.zeros(size, dtype=np.float64)
            used[: len(trained)] = trained
        else:
            buf, off, counts = inventory(work.ingest(phase).inventory())
            sym, lens = segment_pieces(vocab, buf, off)
            n = lens.astype(np.int64)
            within = np.arange(int(n.sum())) - np.repeat(np.cumsum(n) - n, n)
            ids = sym[np.repeat(off[:-1], n) + within]
            used = np.bincount(ids, weights=np.repeat(counts.astype(np.float64), n), minlength=size)
        for group in domain.groups:  # one count per group of documents, not an array per document
            ids = np.fromiter(itertools.chain.from_iterable(enc.encode_ordinary_batch(group)), dtype=np.int64)
            used += np.bincount(ids, minlength=size)[:size]
        out.append(used)
    return out


def undertrained(new: list[tuple[bytes, int]], ranks: np.ndarray, used: Any) -> list[tuple[int, int, bytes]]:
    """``(produced, rank, token)`` of the phase's new tokens that its own text (the
    inventory it trained on, each piece times its count, and its held-out text,
    encoded with the final vocabulary) produces fewer than ``UNDERTRAINED_BELOW``
    times, fewest first: tokens that are nearly always merged further, whose
    embedding a model barely trains (the "glitch tokens" of released models).
    ``new``: the phase's new ``(token, rank)``; ``ranks``: their ranks; ``used``:
    the phase's entry of ``token_usage``.

        >>> used = np.array([0, 30, 4, 0])
        >>> undertrained([(b"ab", 1), (b"abc", 2), (b"x", 3)], np.array([1, 2, 3]), used)
        [(0, 3, b'x'), (4, 2, b'abc')]
    """
    rare = [(int(used[new[i][1]]), new[i][1], new[i][0])
            for i in np.flatnonzero(used[ranks] < UNDERTRAINED_BELOW).tolist()]
    rare.sort(key=lambda x: (x[0], x[1]))
    return rare
