"""Ctrl-C, one way everywhere: counted, held where it would do harm, and raised
as ``Interrupted`` with a word on what is kept.

The commands install ``on_interrupt`` as their SIGINT handler. It counts each
Ctrl-C before raising ``KeyboardInterrupt``, because a library may turn the
interrupt into an error of its own (inside matplotlib's C++ bindings it came
out as a ``TypeError``; a config check turns pyarrow's errors into a
``ConfigError``): ``interrupt_as`` takes any error raised after a counted
Ctrl-C as the Ctrl-C itself. ``uninterrupted`` holds Ctrl-C back while numba
loads its kernels, where an interrupt inside llvmlite leaves an object half
made whose destructor prints a traceback at exit. A signal the process was
started with ignored (SIGINT in a ``&`` job of a script) stays ignored for its
whole life: ``set_handler`` installs nothing over ``SIG_IGN``.

    >>> try:
    ...     with interrupt_as(lambda: "kept everything"):
    ...         try:
    ...             on_interrupt(2, None)
    ...         except KeyboardInterrupt:
    ...             raise TypeError("incompatible function arguments")
    ... except Interrupted as exc:
    ...     print(type(exc).__name__, exc)
    Interrupted kept everything
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator
from typing import TypeVar

from toktoktok.errors import Interrupted

T = TypeVar("T")

_INTERRUPTS = [0]  # Ctrl-Cs this process took through on_interrupt, or held by interrupts_held


def set_handler(sig: int, handler: Callable[[int, object], None]) -> object:
    """``signal.signal(sig, handler)`` unless ``sig`` is ignored (``SIG_IGN``, as the
    process inherited it): then nothing changes, so that a job its shell started
    with Ctrl-C ignored keeps ignoring it. Returns the handler to restore.

        >>> previous = signal.signal(signal.SIGUSR1, signal.SIG_IGN)
        >>> set_handler(signal.SIGUSR1, on_interrupt) is signal.SIG_IGN
        True
        >>> signal.getsignal(signal.SIGUSR1) is signal.SIG_IGN
        True
        >>> _ = signal.signal(signal.SIGUSR1, previous)
    """
    if signal.getsignal(sig) is signal.SIG_IGN:
        return signal.SIG_IGN
    return signal.signal(sig, handler)


def on_interrupt(signum: int, frame: object) -> None:
    """The commands' Ctrl-C handler: count the interrupt, then raise
    KeyboardInterrupt as Python's own handler does."""
    _INTERRUPTS[0] += 1
    raise KeyboardInterrupt


def interrupts() -> int:
    """How many Ctrl-Cs this process has taken (``on_interrupt``, ``interrupts_held``).

        >>> before = interrupts()
        >>> try:
        ...     on_interrupt(2, None)
        ... except KeyboardInterrupt:
        ...     pass
        >>> interrupts() - before
        1
    """
    return _INTERRUPTS[0]


@contextlib.contextmanager
def interrupt_as(message: Callable[[], str]) -> Iterator[None]:
    """Within the block, a Ctrl-C (a ``KeyboardInterrupt``, or any error raised after
    one was counted) leaves as ``Interrupted(message())``; an ``Interrupted``
    made further in passes as it is, its message being the more precise."""
    seen = interrupts()
    try:
        yield
    except Interrupted:
        raise
    except KeyboardInterrupt as exc:
        raise Interrupted(message()) from exc
    except Exception as exc:
        if interrupts() > seen:
            raise Interrupted(message()) from exc
        raise


def _held(held: list[int], signum: int) -> None:
    held.append(signum)
    _INTERRUPTS[0] += 1


@contextlib.contextmanager
def interrupts_held() -> Iterator[list[int]]:
    """Hold Ctrl-C (SIGINT, SIGTERM) back for a block; yields a list that holds the
    signals that came meanwhile. Off the main thread, nothing is held."""
    held: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield held
        return
    previous = {sig: set_handler(sig, lambda s, f: _held(held, s)) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield held
    finally:
        for sig, handler in previous.items():
            if handler is not signal.SIG_IGN:  # an ignored signal was left as it was
                signal.signal(sig, handler)


def uninterrupted(work: Callable[[], T]) -> T:
    """``work()`` with Ctrl-C held back until it returns, then raised as
    KeyboardInterrupt (for numba loading or compiling its kernels).

        >>> uninterrupted(lambda: 2 + 2)
        4
    """
    with interrupts_held() as came:
        result = work()
    if came:
        raise KeyboardInterrupt
    return result
