"""The processor's time-stamp counter, read in numba code, and its seconds.

Why. The merge loop's report times its phases (the first heap pop, the
``EARLY_MERGES``-th merge). A Python thread that looked at the loop's progress
every few milliseconds to see them took a core's time slice from the loop's
threads each time, when they used every core. ``cycles()`` costs one
instruction in the loop, and the caller turns counts into ``perf_counter``
times by the rate it measures over the whole run (``to_seconds``).

The counter is read on x86-64 only, where it runs at a constant rate
(``rdtsc``); elsewhere (an Arm processor's cycle counter can trap in user
code) ``cycles()`` is 0 and ``COUNTS`` is False, and callers fall back to
looking at the progress.

    >>> before = now_cycles()
    >>> after = now_cycles()
    >>> after >= before
    True
    >>> to_seconds(200, (100, 10.0), (300, 12.0))
    11.0
"""

from __future__ import annotations

import platform

from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

COUNTS = platform.machine().lower() in ("x86_64", "amd64")


@intrinsic
def _cycle_counter(typingctx):
    """LLVM's ``readcyclecounter`` where ``COUNTS``, else the constant 0."""

    def codegen(context, builder, signature, args):
        i64 = ir.IntType(64)
        if not COUNTS:
            return i64(0)
        counter = cgutils.get_or_insert_function(builder.module, ir.FunctionType(i64, []), "llvm.readcyclecounter")
        return builder.call(counter, [])

    return types.int64(), codegen


@njit(cache=True, nogil=True, inline="always")
def cycles():
    """The time-stamp counter now (0 where ``COUNTS`` is False)."""
    return _cycle_counter()


@njit(cache=True, nogil=True)
def now_cycles():
    """``cycles()`` for Python code (a caller pairs it with ``time.perf_counter()``)."""
    return _cycle_counter()


def to_seconds(count: int, start: tuple[int, float], end: tuple[int, float]) -> float:
    """The ``perf_counter`` time of counter value ``count``, by the line through the
    ``(cycles, perf_counter)`` readings ``start`` and ``end``."""
    (c0, t0), (c1, t1) = start, end
    return t0 + (count - c0) * (t1 - t0) / (c1 - c0)
