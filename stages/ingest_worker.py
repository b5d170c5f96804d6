"""What an ingest worker process runs for patterns without the numba scanner.

It imports only ``toktoktok.pretokenize`` (``regex``), so a worker costs
tens of MB, not the main process's numba and pyarrow. It reports its own
peak memory with each result, so the run can record the peak of all its
processes (``ru_maxrss`` of a spawned child would include the parent's
pages at the moment it was forked, not what the worker used).
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from toktoktok.patterns import Pattern
from toktoktok.pretokenize import count_texts


def count_in_worker(texts: Sequence[str], pattern: Pattern,
                    special_tokens: Sequence[str]) -> tuple[list[bytes], list[int], int, int]:
    """``pretokenize.count_texts`` plus this process's id and peak RSS in kB."""
    found, counts = count_texts(texts, pattern, special_tokens)
    return found, counts, os.getpid(), own_peak_kb()


def own_peak_kb() -> int:
    """This process's peak resident memory (``VmHWM``), 0 where /proc is absent."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def ignore_sigint() -> None:
    """Workers leave Ctrl-C to the main process, which stops the pool and reports."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
