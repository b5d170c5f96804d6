"""Running one trainer as a whole process and measuring it.

    python -S benchmarks/benchkit/measure.py REPORT.json -- CMD ARGS...    # the launcher (run_measured starts it)

A trainer is started through this small launcher process, which starts the
trainer, waits for it with ``os.wait4`` and writes what it cost into
REPORT.json. The launcher is there for ``ru_maxrss``: Linux counts in it the
memory of the process that *started* a program (exec keeps the old memory's
high-water mark), so a trainer started straight from the benchmark, which
holds the corpora, would report the benchmark's size as its own. Started
from a launcher of a few MB, it reports its own.

- wall time: ``time.perf_counter()`` in the launcher, from just before the
  trainer starts to its end (its Python start-up and imports included, for
  every trainer alike);
- CPU time: user + system time of the trainer and of every descendant it
  waited for, from the ``rusage`` of ``os.wait4``; ``Measured.all_cpu`` also
  counts, from the samples, processes nobody waited for;
- peak RSS: ``ru_maxrss`` of that ``rusage``: the largest resident set of
  the trainer or of any single descendant it waited for (not their sum);
- tree peak: the largest sum of resident sets of the trainer and all its
  live descendants (the launcher left out), sampled from ``/proc`` every
  50 ms by the benchmark: it catches worker processes running at the same
  time; pages they share count once per process, so it can overstate, and
  spikes shorter than a sample are missed.

Processes that leave the tree: a program may start processes that are not,
or no longer, its descendants (Ray's agents once their parent is gone, a
daemon that forks twice). Every run gets a token of its own in its
environment (``MARK_KEY``), which every process it starts inherits; the
sampler adds every process whose environment holds the token, and their
descendants (a process that overwrites its environment block, as Ray's
``setproctitle`` does, is still counted when its parent is). Each process's
environment is read once (it is cached by pid and start time), so a sample
costs one pass over ``/proc/*/stat``. ``Measured.outside`` counts the
processes found that way and not in the tree; ``Measured.commands`` names
every process counted at the peak.
"""

from __future__ import annotations

import json
import math
import os
import secrets
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

PAGE = os.sysconf("SC_PAGE_SIZE")
TICKS = os.sysconf("SC_CLK_TCK")
MB = 1 << 20
SAMPLE_SECONDS = 0.05
MARK_KEY = "TOKTOK_BENCH_RUN"  # the run's token, inherited by every process it starts


@dataclass
class Measured:
    """What one run of one trainer cost."""

    wall: float
    cpu: float
    rss_mb: float
    tree_mb: float
    returncode: int
    log: Path
    tree_cpu: float = 0.0  # CPU seconds of the processes sampled (each as last seen), reaped or not
    outside: int = 0  # processes counted through the run's token, not descendants of the launcher
    commands: tuple[str, ...] = ()  # the names (``comm``) of the processes summed at the tree's peak

    @property
    def peak_mb(self) -> float:
        """True peak RSS as seen from outside: the larger of ``ru_maxrss`` and the sampled tree peak.

        Neither is reset by the measured program's own bookkeeping as long as it
        leaves the kernel's high-water mark alone (toktoktok does); a program that
        resets it through ``/proc/self/clear_refs`` makes ``ru_maxrss`` see only
        the part after the last reset, and the sampled tree peak is the figure.
        """
        return max(self.rss_mb, self.tree_mb)

    @property
    def all_cpu(self) -> float:
        """CPU seconds of the whole run: the larger of what ``wait4`` reports (the
        trainer and the descendants it waited for) and the sampled sum (``tree_cpu``:
        it also sees processes nobody waited for, less their last 50 ms)."""
        return max(self.cpu, self.tree_cpu)


def median_of(values: list[float]) -> float | None:
    """The median of ``values``; None when there are none (every run failed)."""
    return statistics.median(values) if values else None


def exponent(xs: list[float], ys: list[float | None]) -> float | None:
    """Least-squares slope of log(y) on log(x): y ∝ x^k (k = 1 linear, k < 1 sub-linear).

        >>> round(exponent([1, 2, 4], [3, 6, 12]), 6)
        1.0
    """
    pairs = [(math.log(x), math.log(y)) for x, y in zip(xs, ys) if y and y > 0 and x > 0]
    if len(pairs) < 2:
        return None
    mx = sum(p[0] for p in pairs) / len(pairs)
    my = sum(p[1] for p in pairs) / len(pairs)
    sxx = sum((p[0] - mx) ** 2 for p in pairs)
    return sum((p[0] - mx) * (p[1] - my) for p in pairs) / sxx if sxx else None


def _stats() -> dict[int, tuple[int, int, str, int]]:
    """pid -> (parent pid, start time, command name, user + system CPU time), times in
    clock ticks, from /proc/*/stat."""
    found: dict[int, tuple[int, int, str, int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as fh:
                stat = fh.read()
        except OSError:
            continue
        close = stat.rindex(b")")
        fields = stat[close + 2:].split()
        comm = stat[stat.index(b"(") + 1:close].decode(errors="replace")
        found[int(entry.name)] = (int(fields[1]), int(fields[19]), comm, int(fields[11]) + int(fields[12]))
    return found


def _children_map() -> dict[int, list[int]]:
    """parent pid -> child pids, from /proc/*/stat."""
    tree: dict[int, list[int]] = {}
    for pid, (ppid, *_) in _stats().items():
        tree.setdefault(ppid, []).append(pid)
    return tree


def _rss_bytes(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/statm", "rb") as fh:
            return int(fh.read().split()[1]) * PAGE
    except (OSError, IndexError, ValueError):
        return 0


def _marked(pid: int, needle: bytes) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as fh:
            return needle in fh.read()
    except OSError:
        return False


def descendants(tree: dict[int, list[int]], roots: list[int]) -> set[int]:
    """``roots`` and every process below them in ``tree`` (parent -> children).

        >>> sorted(descendants({1: [2, 3], 3: [4], 9: [10]}, [3, 9]))
        [3, 4, 9, 10]
    """
    seen, todo = set(), list(roots)
    while todo:
        pid = todo.pop()
        if pid not in seen:
            seen.add(pid)
            todo.extend(tree.get(pid, []))
    return seen


def tree_rss(root: int, include_root: bool = True) -> int:
    """Sum of the resident sets of ``root`` (unless left out) and all its descendants, now."""
    tree = _children_map()
    pids = descendants(tree, tree.get(root, []))
    return sum(_rss_bytes(pid) for pid in pids) + (_rss_bytes(root) if include_root else 0)


class TreeSampler(threading.Thread):
    """Samples the resident sets of ``pid``'s descendants (``pid`` left out) and of
    every process marked with ``token`` (and theirs) until stopped; ``peak``
    holds the largest sum, ``outside`` the processes seen only through the
    token, ``commands`` the names summed at the peak."""

    def __init__(self, pid: int, token: str | None = None) -> None:
        super().__init__(daemon=True)
        self.pid, self.peak, self.outside, self.commands = pid, 0, 0, ()
        self.needle = f"{MARK_KEY}={token}\0".encode() if token else None
        self.marks: dict[tuple[int, int], bool] = {}  # (pid, start time) -> environment holds the token
        self.seen_outside: set[tuple[int, int]] = set()
        self.ticks: dict[tuple[int, int], int] = {}  # (pid, start time) -> its CPU ticks when last seen
        self.stopped = threading.Event()

    def sample(self) -> None:
        stats = _stats()
        tree: dict[int, list[int]] = {}
        for pid, (ppid, *_) in stats.items():
            tree.setdefault(ppid, []).append(pid)
        inside = descendants(tree, tree.get(self.pid, []))
        roots = list(inside)
        if self.needle is not None:
            for pid, (_, start, *_) in stats.items():
                if pid in inside or pid == self.pid:
                    continue
                key = (pid, start)
                if key not in self.marks:
                    self.marks[key] = _marked(pid, self.needle)
                if self.marks[key]:
                    roots.append(pid)
        pids = descendants(tree, roots)
        for pid in pids - inside:
            self.seen_outside.add((pid, stats[pid][1]))
        for pid in pids:
            self.ticks[(pid, stats[pid][1])] = stats[pid][3]
        self.outside = len(self.seen_outside)
        total = sum(_rss_bytes(pid) for pid in pids)
        if total > self.peak:
            self.peak = total
            self.commands = tuple(sorted(stats[pid][2] for pid in pids if pid in stats))

    def run(self) -> None:
        while not self.stopped.is_set():
            self.sample()
            self.stopped.wait(SAMPLE_SECONDS)


def run_measured(cmd: list[str], log: Path, env: dict[str, str] | None = None, cwd: Path | None = None) -> Measured:
    """Run ``cmd`` to its end through the launcher, its output into ``log``; returns its costs."""
    report = log.with_suffix(".rusage.json")
    launcher = [sys.executable, "-S", str(Path(__file__).resolve()), str(report), "--", *cmd]
    token = secrets.token_hex(8)
    env = {**(os.environ if env is None else env), MARK_KEY: token}
    with log.open("wb") as out:
        proc = subprocess.Popen(launcher, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=cwd)
        sampler = TreeSampler(proc.pid, token)
        sampler.start()
        returncode = proc.wait()
        sampler.stopped.set()
        sampler.join()
        sampler.sample()  # a process the run left behind is still its own
    if not report.exists():
        raise RuntimeError(f"the launcher failed (exit {returncode}); see {log}")
    got = json.loads(report.read_text())
    return Measured(wall=got["wall"], cpu=got["cpu"], rss_mb=got["maxrss_kb"] * 1024 / MB,
                    tree_mb=sampler.peak / MB, returncode=got["returncode"], log=log, outside=sampler.outside,
                    tree_cpu=sum(sampler.ticks.values()) / TICKS,
                    commands=sampler.commands)


def launch(report: Path, cmd: list[str]) -> int:
    """The launcher: run ``cmd``, write its wall and CPU time and ``ru_maxrss`` to ``report``."""
    started = time.perf_counter()
    proc = subprocess.Popen(cmd)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - started
    proc.returncode = os.waitstatus_to_exitcode(status)
    report.write_text(json.dumps({"wall": wall, "cpu": usage.ru_utime + usage.ru_stime,
                                  "maxrss_kb": usage.ru_maxrss, "returncode": proc.returncode}))
    return 0


if __name__ == "__main__":
    if len(sys.argv) < 4 or sys.argv[2] != "--":
        sys.exit(f"usage: {Path(sys.argv[0]).name} REPORT.json -- CMD ARGS...")
    sys.exit(launch(Path(sys.argv[1]), sys.argv[3:]))
