"""The memory model: what a run holds, measured, so a budget can be promised.

A run's peak resident memory is a fixed overhead plus what ``working_set_mb``
bounds. The constants here were measured on Linux x86-64, Python 3.11, with
``benchmarks/run.py --section memory`` (``benchmarks/results/MEMORY.md``;
docs/performance.md#memory).

- ``FIXED_OVERHEAD_MB``: the interpreter, numpy, pyarrow, numba with its JIT
  (initialising LLVM at the first compiled call), the loaded kernels, the
  Unicode tables (a tiny corpus peaks there) and the streaming buffers every
  real run fills: the peak of a run at ``working_set_mb: 1`` on the shared
  corpora.
- What the budget bounds, per phase (phases run one after another):
  ingest's count tables (a chunk is a 16th of the budget) and the text in
  flight; train's inventory (the distinct pieces, their counts, offsets) and
  the merge loop's structures (symbols, pair table, occurrence lists, heap).
  Both grow with the kept text, which sampling holds to the budget.

    >>> expected_peak_mb(working_set_mb=64, kept_text_bytes=32 << 20) <= FIXED_OVERHEAD_MB + 64
    True
"""

from __future__ import annotations

from toktoktok.sampling import TEXT_PER_BUDGET_BYTE

FIXED_OVERHEAD_MB = 222  # measured: the shared corpora at working_set_mb 1 (benchmarks/results/MEMORY.md)
WORK_PER_TEXT_BYTE = 1 / TEXT_PER_BUDGET_BYTE  # the budget a byte of kept text may use


TRAIN_BYTES_PER_PIECE = 400  # measured: the train stage's growth per distinct piece, 350-420 at 32,000 merges
TRAIN_SLACK_MB = 16  # a small sample's training fits in the overhead's slack (measured at working_set_mb: 1)


def train_estimate_mb(*, distinct_pieces: int, piece_bytes: int) -> float:
    """What training an inventory is expected to hold (MB): the merge loop's
    structures per distinct piece, plus 12 bytes per piece byte for the
    inventory and its two segmentations (4-byte symbols).

        >>> round(train_estimate_mb(distinct_pieces=217_000, piece_bytes=1_800_000))
        103
    """
    return (distinct_pieces * TRAIN_BYTES_PER_PIECE + piece_bytes * 12) / 2**20


def expected_peak_mb(*, working_set_mb: int, kept_text_bytes: int) -> float:
    """The peak RSS a phase should stay under: the overhead plus its work, capped by the budget."""
    work = min(kept_text_bytes * WORK_PER_TEXT_BYTE / 2**20, float(working_set_mb))
    return FIXED_OVERHEAD_MB + work


MALLOC_ARENAS = 2  # glibc heaps shared by all threads (its default: 8 per core)
MMAP_THRESHOLD_BYTES = 4 << 20  # blocks from this size on leave the process when freed


def configure_allocators() -> None:
    """Set up a process's allocators for a run (the CLI calls it first thing):

    - all threads allocate from ``MALLOC_ARENAS`` glibc heaps (Linux). Each
      worker thread otherwise gets a heap of its own whose freed pages stay
      counted, so ingest and train peak lower this way, at the same speed;
    - pyarrow allocates from the system heap from its import on
      (``ARROW_DEFAULT_MEMORY_POOL``, unless set): switching its pool after
      the import (``toktoktok_stages.workdir.artifacts`` does, for other
      callers) still left mimalloc reserving memory at the first Arrow write,
      which raised the train and export stages' peaks;
    - blocks of ``MMAP_THRESHOLD_BYTES`` and more are mapped on their own and
      given back to the system when freed (Linux). Left alone, glibc raises
      that threshold after the first large block is freed, up to 32 MiB, and
      keeps later arrays below it in its heap, where freed ones stay resident:
      the merge loop's arrays, grown again and again, left much of theirs
      there. 4 MiB costs a little system time; 1 MiB cost much more, since
      ingest's read blocks are 1 MiB.
    """
    import ctypes
    import os

    os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "system")
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt(-8, MALLOC_ARENAS)  # -8: M_ARENA_MAX
        libc.mallopt(-3, MMAP_THRESHOLD_BYTES)  # -3: M_MMAP_THRESHOLD
    except (OSError, AttributeError):
        pass


def keep_pandas_out() -> None:
    """Have pyarrow work without pandas in this process (the CLI calls it after
    ``configure_allocators``); ``to_pandas`` still imports it when called.

    pyarrow looks for pandas once, at its first conversion of Python or numpy
    data, and imports it when installed (it is, wherever ``datasets`` is):
    40 MB resident for the rest of the run, which no stage uses. Here that
    first look is made while an import of pandas fails, and pyarrow keeps
    the answer. Nothing is done if pandas is already imported.
    """
    import importlib.abc
    import sys

    if "pandas" in sys.modules:
        return

    class Refuse(importlib.abc.MetaPathFinder):
        def find_spec(self, name: str, path: object = None, target: object = None) -> None:
            if name == "pandas":
                raise ModuleNotFoundError("not imported by toktoktok's CLI", name=name)
            return None

    import pyarrow as pa

    refuse = Refuse()
    sys.meta_path.insert(0, refuse)
    try:
        pa.array([0])
    finally:
        sys.meta_path.remove(refuse)
