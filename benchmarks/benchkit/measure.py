"""Running one trainer as a whole process and measuring it.

    python benchmarks/bench_runs.py REPORT.json -- CMD ARGS...    # the launcher

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
  waited for, from the ``rusage`` of ``os.wait4``;
- peak RSS: ``ru_maxrss`` of that ``rusage``: the largest resident set of
  the trainer or of any single descendant it waited for (not their sum);
- tree peak: the largest sum of resident sets of the trainer and all its
  live descendants (the launcher left out), sampled from ``/proc`` every
  50 ms by the benchmark: it catches worker processes running at the same
  time; pages they share count once per process, so it can overstate, and
  spikes shorter than a sample are missed.
"""

from __future__ import annotations

import json
import math
import os
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

PAGE = os.sysconf("SC_PAGE_SIZE")
MB = 1 << 20
SAMPLE_SECONDS = 0.05


@dataclass
class Measured:
    """What one run of one trainer cost."""

    wall: float
    cpu: float
    rss_mb: float
    tree_mb: float
    returncode: int
    log: Path

    @property
    def peak_mb(self) -> float:
        """True peak RSS as seen from outside: the larger of ``ru_maxrss`` and the sampled tree peak.

        Neither is reset by the measured program's own bookkeeping as long as it
        leaves the kernel's high-water mark alone; when it does not (toktoktok's
        stages reset it through ``/proc/self/clear_refs``), ``ru_maxrss`` sees only
        the part after the last reset and the sampled tree peak is the figure.
        """
        return max(self.rss_mb, self.tree_mb)


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


def _children_map() -> dict[int, list[int]]:
    """parent pid -> child pids, from /proc/*/stat."""
    tree: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as fh:
                stat = fh.read()
        except OSError:
            continue
        ppid = int(stat[stat.rindex(b")") + 2:].split()[1])
        tree.setdefault(ppid, []).append(int(entry.name))
    return tree


def _rss_bytes(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/statm", "rb") as fh:
            return int(fh.read().split()[1]) * PAGE
    except (OSError, IndexError, ValueError):
        return 0


def tree_rss(root: int, include_root: bool = True) -> int:
    """Sum of the resident sets of ``root`` (unless left out) and all its descendants, now."""
    tree = _children_map()
    total, todo = (_rss_bytes(root) if include_root else 0), list(tree.get(root, []))
    while todo:
        pid = todo.pop()
        total += _rss_bytes(pid)
        todo.extend(tree.get(pid, []))
    return total


class TreeSampler(threading.Thread):
    """Samples ``tree_rss(pid)`` until stopped; ``peak`` holds the largest."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid, self.peak = pid, 0
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.is_set():
            self.peak = max(self.peak, tree_rss(self.pid, include_root=False))
            self.stopped.wait(SAMPLE_SECONDS)


def run_measured(cmd: list[str], log: Path, env: dict[str, str] | None = None, cwd: Path | None = None) -> Measured:
    """Run ``cmd`` to its end through the launcher, its output into ``log``; returns its costs."""
    report = log.with_suffix(".rusage.json")
    launcher = [sys.executable, "-S", str(Path(__file__).resolve()), str(report), "--", *cmd]
    with log.open("wb") as out:
        proc = subprocess.Popen(launcher, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=cwd)
        sampler = TreeSampler(proc.pid)
        sampler.start()
        returncode = proc.wait()
        sampler.stopped.set()
        sampler.join()
    if not report.exists():
        raise RuntimeError(f"the launcher failed (exit {returncode}); see {log}")
    got = json.loads(report.read_text())
    return Measured(wall=got["wall"], cpu=got["cpu"], rss_mb=got["maxrss_kb"] * 1024 / MB,
                    tree_mb=sampler.peak / MB, returncode=got["returncode"], log=log)


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
        sys.exit("usage: bench_runs.py REPORT.json -- CMD ARGS...")
    sys.exit(launch(Path(sys.argv[1]), sys.argv[3:]))
