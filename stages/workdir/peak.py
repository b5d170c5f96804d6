"""The stages' memory measurement: each stage's peak resident memory, and the
process's, as the stage manifests record them (``peak_rss_mb``,
``peak_rss_exact``, ``process_peak_rss_mb``).

It lives here, in the work folder's package (layer 4), because every stage
uses it and a stage folder starts and reads it: ``StageFolder.begin`` calls
``release_memory`` and ``STAGE_PEAK.start``, ``StageFolder.finish`` records
``STAGE_PEAK.peak_kb`` (``stages.workdir.folders``); the report reads the
export's peak so far (``stage_peak_rss_mb``). It reads ``/proc/self`` and
writes no file.

    >>> peak_rss_mb() >= 0
    True
"""

from __future__ import annotations

import os
import resource
import threading
import time
from collections.abc import Callable


class StagePeak:
    """A stage's peak resident memory, measured without touching the kernel's
    high-water mark (``VmHWM``), so that the process's own peak stays what
    ``/usr/bin/time``, ``ru_maxrss`` or any outside tool reports.

    If the stage raised the process's high-water mark, its peak is that mark:
    exact. Otherwise its peak was below an earlier stage's, and a thread
    samples the resident size (``VmRSS``) every ``INTERVAL`` seconds while the
    stage runs: a lower bound, since the thread waits while a numba kernel
    holds the GIL, and a spike shorter than the interval can slip between
    samples. The manifest says which (``peak_rss_exact``).
    """

    INTERVAL = 0.02

    def __init__(self) -> None:
        self.begin_hwm_kb = 0
        self.sampled_kb = 0
        self.thread: threading.Thread | None = None

    def start(self) -> None:
        self.begin_hwm_kb = _status_kb("VmHWM")
        self.sampled_kb = _status_kb("VmRSS")
        if self.thread is None:
            self.thread = threading.Thread(target=self._sample, name="toktoktok-stage-peak", daemon=True)
            self.thread.start()

    def _sample(self) -> None:
        rss_kb = _rss_reader()
        while True:
            self.sampled_kb = max(self.sampled_kb, rss_kb())
            time.sleep(self.INTERVAL)

    def peak_kb(self) -> tuple[int, bool]:
        """(the stage's peak in kB, whether it is exact)."""
        hwm = _status_kb("VmHWM")
        if hwm > self.begin_hwm_kb or self.thread is None:
            return hwm, True
        return max(self.sampled_kb, _status_kb("VmRSS")), False


STAGE_PEAK = StagePeak()


def stage_peak_rss_mb() -> float:
    """The running stage's peak resident memory so far, in MiB (see ``StagePeak``)."""
    return round(STAGE_PEAK.peak_kb()[0] / 1024, 1)


def peak_rss_mb() -> float:
    """This process's peak resident memory so far (``VmHWM``, never reset), in MiB.

    Worker processes are not in it: a stage that has them records their
    peaks itself (``ru_maxrss`` of a spawned child would count the parent's
    pages at the fork, not what the child used).
    """
    return round(_status_kb("VmHWM") / 1024, 1)


def _rss_reader() -> Callable[[], int]:
    """A function returning the resident size in kB, cheap enough to call 50
    times a second: one read of ``/proc/self/statm`` (kept open) per call,
    since parsing ``/proc/self/status`` line by line in Python costs a
    noticeable share of a stage's CPU at that rate."""
    page_kb = os.sysconf("SC_PAGE_SIZE") // 1024
    try:
        fd = os.open("/proc/self/statm", os.O_RDONLY)
    except OSError:
        return lambda: _status_kb("VmRSS")
    return lambda: int(os.pread(fd, 128, 0).split()[1]) * page_kb


def _status_kb(field: str) -> int:
    """A ``/proc/self/status`` field in kB (``ru_maxrss`` where /proc is absent)."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def release_memory() -> None:
    """Return freed heap memory to the operating system, where the platform allows.

    What survives the collection is frozen (``gc.freeze``): the modules and
    objects of a long run are not scanned again by the next stage's
    collection nor by Python's own while a stage works, since numba's typing
    makes them many. Stages run in the CLI's process (whose allocators
    ``toktoktok.memory.configure_allocators`` set up); the library
    (``toktoktok``) never freezes anything in its caller's.
    """
    import ctypes
    import gc

    import pyarrow as pa

    gc.collect()
    gc.freeze()
    pa.default_memory_pool().release_unused()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass
