"""How a command ends, whatever happens: one line and an exit code.

Exit codes (docs/cli.md): 0 done (warnings allowed), 1 a data or runtime
failure, 2 a usage or configuration error, 130 interrupted. Errors are one
line on stderr; ``--verbose`` adds the Python traceback. ``guarded`` runs a
command's work under this rule; ``start`` runs a click command so that a
Ctrl-C at any moment, and a Python warning, end the same way. A reader that
closed our standard output (``toktok run ... | head -0``) wanted no more of
it: exit 0 without a word (``stdout_closed``), whatever was left to print.
"""

from __future__ import annotations

import errno
import gc
import os
import select
import signal
import sys
import traceback
from collections.abc import Callable
from typing import Any

import click

from toktoktok import memory
from toktoktok.errors import Interrupted, ToktokError, one_line
from toktoktok.interrupts import interrupt_as, on_interrupt, set_handler


def guarded(action: Callable[[], Any], verbose: bool, *, writes: bool = False) -> Any:
    """Run ``action`` and turn every failure into a message and an exit code.

    One line on stderr (line breaks in a message folded): a toktoktok error
    with its own exit code (``toktoktok.errors``), an ``OSError`` as ``FILE:
    reason`` (exit 1), anything else as unexpected (exit 1). A Ctrl-C, also
    one a library turned into an error of its own, exits 130 with the word
    on what was kept (``toktoktok.interrupts.interrupt_as``): a command that
    ``writes`` nothing has nothing kept, and says only ``interrupted``.
    """
    try:
        with interrupt_as(lambda: "stopped; rerun the same command to go on" if writes else ""):
            return action()
    except Interrupted as exc:
        if verbose:
            traceback.print_exc()
        said = one_line(exc)
        click.echo(f"\ninterrupted: {said}" if said else "\ninterrupted", err=True)
        sys.exit(exc.exit_code)
    except ToktokError as exc:
        _fail(one_line(exc), exc.exit_code, verbose)
    except OSError as exc:
        if stdout_closed(exc):
            sys.exit(0)
        _fail(_os_message(exc), 1, verbose)
    except Exception as exc:  # noqa: BLE001 - a bug: said plainly, the traceback with --verbose
        _fail(f"unexpected {type(exc).__name__}: {one_line(exc)} (rerun with --verbose for the traceback)", 1, verbose)


def stdout_closed(exc: BaseException) -> bool:
    """Whether ``exc`` is a broken pipe on our standard output, whose reader has gone
    (poll says so); if so, fd 1 now writes to /dev/null, so that nothing left in
    Python's buffer fails again at exit."""
    if not isinstance(exc, OSError) or exc.errno != errno.EPIPE:
        return False
    try:
        poll = select.poll()
        poll.register(1, select.POLLOUT)
        gone = any(events & (select.POLLERR | select.POLLHUP) for _, events in poll.poll(0))
    except (OSError, ValueError):
        return False
    if gone:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 1)
        os.close(null)
    return gone


def _fail(message: str, code: int, verbose: bool) -> None:
    if verbose:
        traceback.print_exc()
    click.echo(f"error: {message}", err=True)
    sys.exit(code)


def _os_message(exc: OSError) -> str:
    """``FILE: reason`` (e.g. ``No space left on device``), the file named once."""
    if not exc.strerror:
        return one_line(exc)
    named = exc.filename is not None and str(exc.filename) not in exc.strerror
    return one_line(f"{exc.filename}: {exc.strerror}" if named else exc.strerror)


def start(command: click.Command, prog_name: str) -> None:
    """Run a click command so that every Ctrl-C, whenever it comes, ends the same
    way: one line and exit 130 (click alone would say "Aborted!" and exit 1
    for an interrupt it catches first)."""
    _plain_warnings()
    gc.freeze()  # the imported modules: no collection needs to scan them (see workdir.peak.release_memory)
    memory.configure_allocators()
    memory.keep_pandas_out()
    set_handler(signal.SIGINT, on_interrupt)  # from here on, KeyboardInterrupt (and counted), unless ignored
    try:
        code = _run_command(command, prog_name)
        sys.stdout.flush()  # here, not at exit, where a closed reader would make it exit 120
    except OSError as exc:
        if not stdout_closed(exc):
            raise
    finally:  # the command has ended and said so: a Ctrl-C while Python shuts down changes nothing
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    sys.exit(code)


def _plain_warnings() -> None:
    """A Python warning (e.g. an older companion file) as one ``warning:`` line."""
    import warnings

    def show(message, category, filename, lineno, file=None, line=None) -> None:  # noqa: ANN001
        click.echo(f"warning: {' '.join(str(message).split())}", err=True)

    warnings.showwarning = show


def _quiet_on_closed_stdout(method: Callable[..., Any]) -> Callable[..., Any]:
    """``method``, a broken pipe on our standard output raised as click's exit 0."""

    def quiet(*args: Any, **kwargs: Any) -> Any:
        try:
            return method(*args, **kwargs)
        except OSError as exc:
            if stdout_closed(exc):
                raise click.exceptions.Exit(0) from None
            raise

    return quiet


def _run_command(command: click.Command, prog_name: str) -> int:
    """``command`` with click's own handling of errors, as an exit code; a broken
    pipe on our standard output taken before click's (which exits 1)."""
    for name in ("make_context", "invoke"):  # --help and --version print in make_context
        setattr(command, name, _quiet_on_closed_stdout(getattr(command, name)))
    try:
        code = command.main(prog_name=prog_name, standalone_mode=False)
    except click.exceptions.Abort as exc:
        if not isinstance(exc.__context__ or exc.__cause__, KeyboardInterrupt):
            click.echo("error: aborted", err=True)
            return 1
        click.echo("\ninterrupted: stopped before any work was done", err=True)
        return 130
    except KeyboardInterrupt:
        click.echo("\ninterrupted: stopped before any work was done", err=True)
        return 130
    except click.exceptions.ClickException as exc:
        exc.show()
        return exc.exit_code
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except SystemExit as exc:  # the commands' own exits (_fail, Ctrl-C in guarded)
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    return code if isinstance(code, int) else 0
