"""Running ``toktok`` as a user would, for the end-to-end tests: a process, its signals, what it left.

Everything runs the installed ``toktok`` executable (beside ``sys.executable``)
in a subprocess, on real files in ``tmp_path``: the exit code, stderr and what
is left on disk are what a user would see.

Root: the tests usually run as root, for whom ``chmod 000`` blocks nothing.
Where a test needs an unreadable file it runs ``toktok`` under
``setpriv --bounding-set -dac_override,-dac_read_search`` (root without the
capabilities that bypass file permissions), and skips if that is not
possible. (Mounting a small tmpfs, for a full disk or a read-only folder, is
the ``mount_tmpfs`` fixture of ``tests/end_to_end/conftest.py``.)
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
import yaml

BIN = Path(sys.executable).parent
TOKTOK = BIN / "toktok"
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


slow = pytest.mark.slow


# ---------------------------------------------------------------- running the CLI


@dataclass
class Result:
    code: int
    out: str
    err: str


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}


def without_root_powers() -> list[str]:
    """A command prefix under which file permissions apply, even to root; [] if not root.

    Skips the test when root cannot drop the capabilities (no ``setpriv``).
    """
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root, where chmod does not block reads, and setpriv is missing")
    probe = subprocess.run([setpriv, "--bounding-set", "-dac_override,-dac_read_search", "true"],
                           capture_output=True)
    if probe.returncode != 0:
        pytest.skip("running as root, where chmod does not block reads, and setpriv cannot drop capabilities")
    return [setpriv, "--bounding-set", "-dac_override,-dac_read_search"]


def cli(*args: Any, timeout: float = 300, prefix: list[str] | None = None) -> Result:
    """``toktok ARGS`` as a subprocess; its exit code, stdout and stderr."""
    argv = [*(prefix or []), str(TOKTOK), *(str(a) for a in args)]
    proc = subprocess.run(argv, capture_output=True, text=True, env=_env(), timeout=timeout)
    return Result(proc.returncode, proc.stdout, proc.stderr)


def start(*args: Any) -> subprocess.Popen:
    """``toktok ARGS`` in its own process group (so a signal can go to it and its
    workers, as a terminal's Ctrl-C does), with SIGINT at its default: a test runner
    started in the background may have it ignored, and Python would then never
    raise KeyboardInterrupt."""
    return subprocess.Popen(
        [str(TOKTOK), *(str(a) for a in args)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=_env(), start_new_session=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def finish(proc: subprocess.Popen, timeout: float = 120) -> Result:
    out, err = proc.communicate(timeout=timeout)
    return Result(proc.returncode, out, err)


def signal_group(proc: subprocess.Popen, sig: int) -> None:
    """Send ``sig`` to the process group of ``proc`` (it and its workers), if still there."""
    try:
        os.killpg(proc.pid, sig)
    except ProcessLookupError:
        pass


def wait_for(condition: Callable[[], bool], proc: subprocess.Popen | None = None, timeout: float = 60,
              every: float = 0.002) -> bool:
    """Poll ``condition`` until it holds (True) or ``proc`` ends or time runs out (False)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        if proc is not None and proc.poll() is not None:
            return condition()
        time.sleep(every)
    return False


def children(pid: int) -> list[int]:
    """The child processes of ``pid`` (Linux /proc)."""
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            found += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            pass
    return found


# ---------------------------------------------------------------- messages


def error_line(err: str) -> str:
    """The one ``error: ...`` line of stderr (warnings may come before it), no traceback."""
    assert "Traceback" not in err, err
    lines = [line for line in err.strip().splitlines() if line.strip()]
    assert lines, "no message on stderr"
    assert lines[-1].startswith("error: "), err
    assert all(line.startswith("warning: ") or "skipped bad file" in line for line in lines[:-1]), err
    return lines[-1]


def interrupted_line(err: str) -> str:
    """The one ``interrupted: ...`` line of stderr, no traceback."""
    assert "Traceback" not in err, err
    lines = [line for line in err.strip().splitlines() if line.strip()]
    assert lines and lines[-1].startswith("interrupted: "), err
    return lines[-1]


# ---------------------------------------------------------------- configs and corpora


def write_config(folder: Path, phases: list[dict[str, Any]], **settings: Any) -> Path:
    """``folder/config.yaml``: output ``folder/out/tok.tiktoken``, threads 1 and no
    held-out share unless given."""
    folder.mkdir(parents=True, exist_ok=True)
    doc: dict[str, Any] = {"output": str(folder / "out" / "tok.tiktoken"), "threads": 1, "heldout_share": 0}
    doc.update(settings)
    doc["phases"] = phases
    path = folder / "config.yaml"
    path.write_text(yaml.safe_dump(doc, allow_unicode=True, sort_keys=False), encoding="utf-8")
    return path


def phase(name: str, merges: int, *sources: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "merges": merges, "sources": list(sources)}


def output(config: Path) -> Path:
    return Path(yaml.safe_load(config.read_text())["output"])


def work(config: Path) -> Path:
    doc = yaml.safe_load(config.read_text())
    if doc.get("work_dir"):
        return Path(doc["work_dir"])
    out = output(config)
    return out.with_name(out.name.removesuffix(".tiktoken") + ".work")


def manifest(folder: Path) -> dict[str, Any]:
    return json.loads((folder / "manifest.json").read_text())


def read_arrow(path: Path) -> pa.Table:
    with pa.memory_map(str(path)) as src:
        return pa.ipc.open_file(src).read_all()


def chunk_counts(folder: Path) -> dict[bytes, int]:
    """Summed (piece, count) of an ingest phase folder's chunk files."""
    total: dict[bytes, int] = {}
    for chunk in sorted(folder.glob("chunk-*.arrow")):
        table = read_arrow(chunk)
        for piece, count in zip(table["piece"].to_pylist(), table["count"].to_pylist()):
            total[piece] = total.get(piece, 0) + count
    return total


def temp_files(root: Path) -> list[Path]:
    """Temporary files of atomic writes (``.NAME.XXXX.tmp``) left under ``root``."""
    return sorted(p for p in root.rglob(".*.tmp")) if root.exists() else []


def manifests(root: Path) -> dict[str, bytes]:
    """Every manifest.json under ``root``: relative path -> bytes."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("manifest.json"))} if root.exists() else {}


def assert_nothing_claims_completeness(config: Path, *unfinished: str) -> None:
    """No ``.tiktoken`` (nor ``.meta.json``), no export manifest, no manifest in the
    ``unfinished`` stage folders (``ingest/01-x``, ``train/02-y``, ...), no temp file."""
    out = output(config)
    assert not out.exists(), f"{out} was left behind by a failed run"
    assert not out.with_name(out.name.removesuffix(".tiktoken") + ".meta.json").exists()
    w = work(config)
    assert not (w / "export" / "manifest.json").exists()
    for folder in unfinished:
        assert not (w / folder / "manifest.json").exists(), f"{folder} claims to be finished"
    assert temp_files(out.parent) == [], "temporary files were left behind"


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# ---------------------------------------------------------------- mounts
