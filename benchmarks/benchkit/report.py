"""Facts about the run (machine, commit, versions) and Markdown tables."""

from __future__ import annotations

import datetime as dt
import os
import platform
import subprocess
from importlib import metadata
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("toktoktok", "tokenizers", "rustbpe", "tiktoken", "numba", "numpy", "regex")


def _proc_field(path: str, key: str) -> str | None:
    try:
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                if line.startswith(key):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def machine() -> str:
    """CPU count and model, RAM (total and available now), OS, Python."""
    cores = len(os.sched_getaffinity(0))
    model = _proc_field("/proc/cpuinfo", "model name") or platform.processor() or "unknown CPU"
    total = int((_proc_field("/proc/meminfo", "MemTotal") or "0 kB").split()[0]) / (1 << 20)
    avail = int((_proc_field("/proc/meminfo", "MemAvailable") or "0 kB").split()[0]) / (1 << 20)
    return (f"{cores} CPUs usable (nproc), {os.cpu_count()} online, {model}; RAM {total:.1f} GiB "
            f"({avail:.1f} GiB available at start); {platform.system()} {platform.release()}; "
            f"Python {platform.python_version()}")


def git(*args: str) -> str | None:
    try:
        done = subprocess.run(["git", "--no-optional-locks", *args], cwd=REPO, capture_output=True, text=True,
                              check=True)
    except (OSError, subprocess.CalledProcessError):
        return None
    return done.stdout.strip()


def commit() -> str:
    """``git rev-parse --short HEAD``, marked when tracked files have changes."""
    head = git("rev-parse", "--short", "HEAD")
    if head is None:
        return "unknown (not a git checkout)"
    dirty = git("status", "--porcelain", "--untracked-files=no")
    return head + (" (with uncommitted changes)" if dirty else "")


def versions() -> str:
    found = []
    for name in PACKAGES:
        try:
            found.append(f"{name} {metadata.version(name)}")
        except metadata.PackageNotFoundError:
            found.append(f"{name} (not installed)")
    return ", ".join(found)


def load_average() -> str:
    return " / ".join(f"{x:.2f}" for x in os.getloadavg())


def now() -> str:
    return dt.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")


def md_table(headers: list[str], rows: list[list[str]]) -> str:
    """A Markdown table; columns after the first are right-aligned."""
    align = [":---"] + ["---:"] * (len(headers) - 1)
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join(align) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def num(value: float | None, digits: int = 1) -> str:
    return "–" if value is None else f"{value:,.{digits}f}"


def portable(text: str, args: object = None) -> str:
    """``text`` as a report may show it: each folder or file the command was given
    (a ``Path`` attribute of ``args``: ``--data`` as ``DATA``...), the shared
    corpora and the checkout written as names, not as one machine's paths.

        >>> import argparse
        >>> portable("--data /srv/d --out /srv/d/r.md in /srv/d/x", argparse.Namespace(data=Path("/srv/d")))
        '--data DATA --out DATA/r.md in DATA/x'
    """
    from benchkit.corpus import SHARED_CORPORA

    names = {str(SHARED_CORPORA): "SHARED_CORPORA", str(REPO): "."}
    for key, value in sorted(vars(args).items()) if args is not None else ():
        if isinstance(value, Path) and value.is_absolute() and value != Path("/"):
            names[str(value)] = key.upper()
    for path in sorted(names, key=len, reverse=True):  # the longest first: a folder inside another keeps its name
        text = text.replace(path, names[path])
    return text


def split_part(text: str, heading: str) -> tuple[str, str]:
    """``text`` without its part under ``heading`` (a ``## `` line starting so), and that part.

    The part runs to the next ``## `` heading or the end; a report written by
    one section keeps another section's part this way.

        >>> split_part("# R\\n## a\\nx\\n## shapes: s\\ny\\n### t\\n## b\\nz\\n", "## shapes")
        ('# R\\n## a\\nx\\n## b\\nz\\n', '## shapes: s\\ny\\n### t\\n')
        >>> split_part("# R\\n", "## shapes")
        ('# R\\n', '')
    """
    lines = text.splitlines(keepends=True)
    start = next((i for i, line in enumerate(lines) if line.startswith(heading)), None)
    if start is None:
        return text, ""
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
    return "".join(lines[:start] + lines[end:]), "".join(lines[start:end])
