"""Reading ahead: an iterator's items made in a thread of their own, up to
``depth`` ahead of the caller, so that decompressing (``zlib``, ``zstandard``)
and scanning JSON lines (a numba kernel), which release the GIL, overlap with
what the caller does with the last item: the caller's thread was the one
bottleneck of a ``.jsonl.zst`` ingest, the counting threads waiting on it.

Items come in their order; an exception comes in its place. Closing the
result (or leaving a loop over it early) stops the thread after the item it
is making, and the iterator is closed in that thread, where it ran.

    >>> list(read_ahead(iter(range(5)), depth=2))
    [0, 1, 2, 3, 4]
    >>> def failing():
    ...     yield 1
    ...     raise ValueError("bad line 2")
    >>> [item for item in read_ahead(failing(), depth=2) if item < 2]
    Traceback (most recent call last):
    ValueError: bad line 2
"""

from __future__ import annotations

import contextlib
import queue
import threading
from collections.abc import Iterator
from typing import TypeVar

T = TypeVar("T")

_END = object()  # the iterator is exhausted


def read_ahead(items: Iterator[T], *, depth: int) -> Iterator[T]:
    """``items``, made by a thread of their own up to ``depth`` ahead of the caller."""
    ready: queue.Queue = queue.Queue(maxsize=max(1, depth))
    stopping = threading.Event()

    def make() -> None:
        try:
            for item in items:
                if stopping.is_set():
                    return
                ready.put((item, None))
            ready.put((_END, None))
        except BaseException as exc:  # handed to the caller, in its place
            ready.put((_END, exc))
        finally:
            close = getattr(items, "close", None)
            if close is not None:
                close()

    thread = threading.Thread(target=make, name="toktoktok-read-ahead", daemon=True)
    thread.start()
    try:
        while True:
            item, exc = ready.get()
            if exc is not None:
                raise exc
            if item is _END:
                return
            yield item
    finally:
        stopping.set()
        while thread.is_alive():
            with contextlib.suppress(queue.Empty):
                ready.get(timeout=0.05)  # room for a put the thread may wait on
