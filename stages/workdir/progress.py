"""Progress on stderr: a live line on a terminal, one line per step in verbose logs.

On a terminal, ``update`` redraws one line (at most ten times a second) with
the amount done, the rate and an estimate of the time left. When stderr is
not a terminal nothing is drawn; ``verbose`` prints the same line every
``LOG_EVERY`` seconds and one per finished step. Notes (warnings, skipped files) are always printed.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

LOG_EVERY = 5.0  # seconds between progress lines in a log (verbose, not a terminal)


def human_bytes(n: float) -> str:
    """A byte count in binary units, the one unit system of all toktoktok's output
    (``working_set_mb`` is MiB too).

        >>> human_bytes(1536), human_bytes(3 << 20), human_bytes(12)
        ('1.5 KiB', '3.0 MiB', '12 B')
    """
    for suffix in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or suffix == "TiB":
            return f"{n:.0f} {suffix}" if suffix == "B" else f"{n:.1f} {suffix}"
        n /= 1024
    return f"{n} B"


def _human(n: float, unit: str) -> str:
    """``_human(1536, "B") == '1.5 KiB'``; other units get k/M suffixes."""
    if unit == "B":
        return human_bytes(n)
    for suffix in ("", "k", "M", "G"):
        if abs(n) < 1000 or suffix == "G":
            return f"{n:.0f}{suffix} {unit}".rstrip() if suffix == "" else f"{n:.1f}{suffix} {unit}".rstrip()
        n /= 1000
    return str(n)


class Progress:
    """One step at a time: ``start``, any number of ``update``/``set``, ``done``."""

    def __init__(self, *, verbose: bool = False, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stderr
        self.live = self.stream.isatty()
        self.verbose = verbose
        self.label, self.total, self.unit = "", 0, ""
        self.count, self.began, self.drawn = 0, 0.0, 0.0

    def start(self, label: str, *, total: int = 0, unit: str = "") -> None:
        self.label, self.total, self.unit = label, total, unit
        self.count, self.began, self.drawn = 0, time.monotonic(), 0.0

    def update(self, amount: int) -> None:
        self.set(self.count + amount)

    def set(self, count: int) -> None:
        self.count = count
        now = time.monotonic()
        if self.live and now - self.drawn >= 0.1:
            self.drawn = now
            self.stream.write("\r\033[K" + self._line(now))
            self.stream.flush()
        elif self.verbose and not self.live and now - max(self.drawn, self.began) >= LOG_EVERY:
            self.drawn = now  # a log gets a line every few seconds: amount, rate, time left
            self.stream.write(self._line(now) + "\n")
            self.stream.flush()

    def _line(self, now: float) -> str:
        elapsed = max(now - self.began, 1e-9)
        rate = self.count / elapsed
        text = f"{self.label}: {_human(self.count, self.unit)}"
        if self.total:
            text += f" of {_human(self.total, self.unit)}"
        text += f", {_human(rate, self.unit)}/s"
        if self.total and rate > 0 and self.count < self.total:
            text += f", {(self.total - self.count) / rate:.0f} s left"
        return text

    def done(self, summary: str = "") -> None:
        now = time.monotonic()
        line = self._line(now) + f" in {now - self.began:.1f} s" + (f" ({summary})" if summary else "")
        if self.live:
            self.stream.write("\r\033[K" + line + "\n")
        elif self.verbose:
            self.stream.write(line + "\n")
        self.stream.flush()

    def note(self, message: str) -> None:
        """A line the user must see (a warning, a skipped file), always printed."""
        if self.live:
            self.stream.write("\r\033[K")
        self.stream.write(message + "\n")
        self.stream.flush()

    def info(self, message: str) -> None:
        """A line for the terminal or verbose logs (a stage skipped, a stage done)."""
        if self.live or self.verbose:
            self.note(message)
