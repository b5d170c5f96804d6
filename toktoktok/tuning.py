"""Tuning knobs derived from the settings, for the library and the stages alike.

``resolve_threads``: how many threads ``threads: -1`` (every core) means
here; ``count_batch_chars``: how much text one counting task takes, from
``working_set_mb`` (the ingest stage's batches and ``toktoktok.train``'s).
"""

from __future__ import annotations

import os


def resolve_threads(threads: int) -> int:
    """``threads: -1`` means every core this process may use.

        >>> resolve_threads(3)
        3
    """
    if threads and threads > 0:
        return threads
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def count_batch_chars(working_set_mb: int) -> int:
    """Text per counting task: a 128th of the budget, from 256 Ki to 512 Ki
    characters (larger batches gained little speed and cost 25-35 MB more at
    peak, in flight on every thread).

        >>> count_batch_chars(1024) == 1 << 19
        True
    """
    return min(max(working_set_mb << 13, 1 << 18), 1 << 19)
