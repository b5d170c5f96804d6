"""No process that a local Ray instance started outlives the toktok that started it.

Why: killed with SIGKILL, a driver that ran ``ray.init()`` (Ray 2.60) leaves
``ray::DashboardAgent`` and ``ray::RuntimeEnvAgent`` running for good (the raylet,
the GCS and the workers die through Ray's own ``PR_SET_PDEATHSIG``), and once
orphaned they are no longer in the driver's process tree. What the prototype
measured, unguarded and guarded: docs/decisions.md (The Ray engine).

How: ``start()`` puts a random token in this process's environment (inherited
by everything Ray starts from now on) and starts a watchdog in a session of its
own (a Ctrl-C to the terminal's process group does not reach it) whose standard
input is a pipe from this process. The kernel closes the pipe however this
process ends (exit, exception, SIGINT, SIGKILL, out of memory): end of file is
a race-free "the driver is gone". The watchdog (``watch``) then ends what the
driver started. Linux only (``/proc``); elsewhere ``start`` does nothing.

The watchdog is this file run as a script (``python -P ray_guard.py``, not
``-m``, which would import the ingest package first); it imports nothing of
the project.
"""

from __future__ import annotations

import os
import secrets
import select
import signal
import subprocess
import sys
import time

ENV_KEY = "TOKTOK_RAY_GUARD"
TICK_S = 0.2


def start(temp_dir: str = "", timeout_s: float = 30.0) -> subprocess.Popen | None:
    """Mark the processes this one starts from now on and start their watchdog,
    which also removes ``temp_dir`` (Ray's session files) at the end.

    Call right before a local ``ray.init`` (never when joining a cluster: this
    process then starts no Ray process). ``stop(watchdog)`` after ``ray.shutdown``.
    """
    if not os.path.isdir("/proc/self"):
        return None
    token = secrets.token_hex(8)
    env = {k: v for k, v in os.environ.items() if k != ENV_KEY}
    watchdog = subprocess.Popen(
        [sys.executable, "-P", os.path.abspath(__file__), token, str(timeout_s), temp_dir], stdin=subprocess.PIPE,
        env=env, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        cwd=os.path.dirname(os.path.abspath(__file__)))
    os.environ[ENV_KEY] = token
    return watchdog


def stop(watchdog: subprocess.Popen | None) -> None:
    """After ``ray.shutdown()``: close the pipe (the watchdog sweeps, finds nothing
    or stragglers, and exits) and forget the token."""
    os.environ.pop(ENV_KEY, None)
    if watchdog is not None and watchdog.stdin is not None:
        watchdog.stdin.close()


# ------------------------------------------------------------ the watchdog


def _stat(pid: int) -> list[bytes] | None:
    """Fields of /proc/PID/stat after the command name (state first), None if gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[1].split()
    except OSError:
        return None


def _start_time(pid: int) -> bytes | None:
    """A live process's start time; None for a zombie or a process gone."""
    rest = _stat(pid)
    return None if rest is None or rest[0] == b"Z" else rest[19]


def _pids() -> list[int]:
    return [int(name) for name in os.listdir("/proc") if name.isdigit()]


def record(driver: int, me: int, seen: dict[int, bytes]) -> None:
    """Add the driver's descendants now to ``seen`` (pid -> start time)."""
    children: dict[int, list[tuple[int, bytes]]] = {}
    for pid in _pids():
        rest = _stat(pid)
        if rest is not None:
            children.setdefault(int(rest[1]), []).append((pid, rest[19]))
    todo = [driver]
    while todo:
        for pid, started in children.get(todo.pop(), []):
            if pid != me:
                seen.setdefault(pid, started)
                todo.append(pid)


def marked(needle: bytes, me: int, seen: dict[int, bytes]) -> list[int]:
    """Live processes holding the token, and recorded descendants still alive."""
    found = []
    for pid in _pids():
        if pid == me or _start_time(pid) is None:
            continue
        try:
            with open(f"/proc/{pid}/environ", "rb") as fh:
                if needle in fh.read() + b"\0":
                    found.append(pid)
        except OSError:
            continue
    return found + [pid for pid, started in seen.items() if pid not in found and _start_time(pid) == started]


def watch(token: str, timeout_s: float, temp_dir: str = "") -> None:
    """Wait for the driver to go, then end what it started (see the module's docstring).

    While the driver lives, its descendants are recorded every ``TICK_S`` (pid
    and start time); at the end SIGTERM, then SIGKILL, go to every recorded
    descendant still alive with the same start time (never a reused pid) and
    to every process whose environment holds the token, until none is left
    (``timeout_s`` at most). Both are needed: Ray's ``setproctitle`` overwrites
    part of some processes' ``/proc/PID/environ``, and a process started less
    than ``TICK_S`` before the death is not recorded yet. A child forked
    without exec keeps the pipe open, so the watchdog also stops waiting when
    it is reparented.
    """
    me, driver = os.getpid(), os.getppid()
    needle = f"{ENV_KEY}={token}\0".encode()
    seen: dict[int, bytes] = {}
    fd = sys.stdin.fileno()
    while True:
        record(driver, me, seen)
        if select.select([fd], [], [], TICK_S)[0] and not os.read(fd, 4096):
            break
        if os.getppid() != driver:
            break
    deadline, first = time.monotonic() + timeout_s, True
    while time.monotonic() < deadline:
        pids = marked(needle, me, seen)
        if not pids:
            break
        for pid in pids:
            try:
                os.kill(pid, signal.SIGTERM if first else signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.5 if first else 0.1)
        first = False
    if temp_dir:
        import shutil

        shutil.rmtree(temp_dir, ignore_errors=True)


if __name__ == "__main__":
    watch(sys.argv[1], float(sys.argv[2]), sys.argv[3] if len(sys.argv) > 3 else "")
