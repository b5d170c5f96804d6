"""Keep numba's parallel regions cheap when a second thread starts using them.

Why. numba's OpenMP layer (GNU libgomp on Linux) keeps a pool of worker
threads per thread that has started a parallel region. When the pools of a
process hold more threads than there are CPUs, libgomp stops letting idle
workers spin and puts them to sleep instead, and every parallel region then
waits for a wake-up: on a 2-core machine, about 50 microseconds a region
instead of 2. The merge loop runs in a thread of its own (so that Ctrl-C
reaches the main thread at once) after the main thread has counted and
segmented in parallel, and a large merge starts two regions per batch.

What. ``release_idle_pool()`` asks the OpenMP runtime to let go of the calling
thread's idle pool (``omp_pause_resource_all``, OpenMP 5.0), so that the
merge thread's pool is the only one; the calling thread gets a new pool the
next time it starts a region. With any other threading layer, or a runtime
without that call, it does nothing and says so.

    >>> release_idle_pool() in (True, False)
    True
"""

from __future__ import annotations

import ctypes
import functools

OMP_PAUSE_SOFT = 1  # OpenMP's omp_pause_soft: threads go, state that is cheap to rebuild stays


def release_idle_pool() -> bool:
    """Let go of this thread's idle OpenMP workers; True if the runtime did."""
    import numba

    try:
        layer = numba.threading_layer()
    except ValueError:  # no parallel region has run yet: there is no pool to let go of
        return False
    pause = _pause_call() if layer == "omp" else None
    return pause is not None and pause(OMP_PAUSE_SOFT) == 0


@functools.cache
def _pause_call() -> ctypes._CFuncPtr | None:
    """``omp_pause_resource_all`` of the OpenMP runtime under numba's ``omp`` layer, if it has one."""
    try:
        from numba.np.ufunc import omppool

        pause = ctypes.CDLL(omppool.__file__).omp_pause_resource_all
    except (ImportError, OSError, AttributeError):
        return None
    pause.argtypes = [ctypes.c_int]
    pause.restype = ctypes.c_int
    return pause
