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

from toktoktok.errors import PatternMiss, PatternTimeout
from toktoktok.patterns import Pattern
from toktoktok.pretokenize import count_with_regex, special_occurrences


def count_in_worker(texts: Sequence[str], pattern: Pattern, special_tokens: Sequence[str],
                    timeout_s_per_mib: float | None = None) -> tuple[list[bytes], list[int], int, int, dict]:
    """``pretokenize.count_with_regex`` plus this process's id and peak RSS in kB, and
    how often each special token occurs in the texts.

    ``timeout_s_per_mib``: each text may take this many seconds per MiB (at
    least one MiB's worth) before ``PatternTimeout`` names it: a custom
    pattern that backtracks without end must not run without bound.
    """
    specials = special_occurrences(texts, special_tokens)
    if timeout_s_per_mib is None:
        found, counts = count_with_regex(texts, pattern, special_tokens)
        return found, counts, os.getpid(), own_peak_kb(), specials
    found_all: dict[bytes, int] = {}
    for index, text in enumerate(texts):
        seconds = timeout_s_per_mib * max(1.0, len(text) / (1 << 20))
        try:
            found, counts = count_with_regex([text], pattern, special_tokens, timeout=seconds)
        except TimeoutError:
            raise PatternTimeout(seconds, index=index) from None
        except PatternMiss as exc:  # the place in this text: say which text of the batch
            raise PatternMiss(exc.words, index=index, offset=exc.offset) from None
        for piece, n in zip(found, counts):
            found_all[piece] = found_all.get(piece, 0) + n
    return list(found_all), list(found_all.values()), os.getpid(), own_peak_kb(), specials


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
    """Workers leave Ctrl-C to the main process, which stops the pool and reports,
    and die with the main process however it dies (``PR_SET_PDEATHSIG`` on Linux:
    a worker stuck in a pattern that backtracks without end must not run on
    at 100% CPU once the main process is killed)."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    die_with_parent()


def die_with_parent() -> None:
    """Have the kernel SIGKILL this process when its parent ends (Linux; elsewhere
    nothing). If the parent is already gone, exit now."""
    import ctypes
    import signal

    parent = os.getppid()
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG = 1
    except (OSError, AttributeError):
        return
    if os.getppid() != parent or parent == 1:
        os._exit(1)
