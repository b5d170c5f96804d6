"""Configs that share an ``output:`` (each with its own ``work_dir:``) never publish into one set.

- The output set has a lock of its own, ``DIR/.NAME.lock``, held while an
  export runs: a second config exporting to the same output meanwhile exits 1
  at once, naming the lock and the process holding it, and changes nothing;
  the lock file is gone once the export ends.
- The export manifest records the digests of what this export staged, not of
  whatever is at the output path after the publish: a file replaced there
  during the publish (by a writer that takes no lock) is never recorded as
  this config's, and the next ``toktok export`` makes the set anew.
- ``toktok clean`` removes a lock file a killed export left, never a held one.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import SPECIALS, TOKTOK, english_text, toktok, write_config
from toktoktok import publish_journal


def _stopped(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "T"
    except OSError:
        return False


def _export_stopped(config: Path, after: int) -> subprocess.Popen:
    """``toktok export`` stopped by its own test hook after ``after`` renames."""
    proc = subprocess.Popen([str(TOKTOK), "export", "-c", str(config)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, publish_journal.STOP_AFTER: str(after)})
    end = time.monotonic() + 120
    while not _stopped(proc.pid):
        if proc.poll() is not None:
            raise AssertionError(f"ended before it stopped: {proc.returncode} {proc.communicate()}")
        assert time.monotonic() < end, "never stopped"
        time.sleep(0.005)
    return proc


def _go_on(proc: subprocess.Popen) -> tuple[int, str]:
    proc.send_signal(signal.SIGCONT)
    _, err = proc.communicate(timeout=120)
    return proc.returncode, err


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    """Config B (60 merges) run and published to ``out/tok.tiktoken``; config A (40
    merges, its own work folder, the same output) ingested and trained."""
    root = tmp_path_factory.mktemp("shared-output")
    data = tmp_path_factory.mktemp("data")  # outside the copies: a source moved would make ingest stale
    (data / "a.txt").write_text(english_text(60_000))

    def config(name: str, merges: int) -> Path:
        return write_config(root / name, [{"name": "A", "merges": merges, "sources": [{"path": str(data)}]}],
                            output=str(root / "out" / "tok.tiktoken"), work_dir=str(root / name / "work"),
                            threads=1, special_tokens=SPECIALS, heldout_share=0.05)

    b = config("b", 60)
    assert toktok("run", "-c", b).code == 0
    a = config("a", 40)
    assert toktok("ingest", "-c", a).code == 0 and toktok("train", "-c", a).code == 0
    return root


def _copy(root: Path, dst: Path) -> tuple[Path, Path, Path]:
    """A copy of the ``shared`` project: (config A, config B, the output)."""
    subprocess.run(["cp", "-a", str(root), str(dst)], check=True)
    for name in ("a", "b"):
        cfg = dst / name / "config.yaml"
        cfg.write_text(cfg.read_text().replace(str(root), str(dst)))
    return dst / "a" / "config.yaml", dst / "b" / "config.yaml", dst / "out" / "tok.tiktoken"


def _outputs(out: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(out.parent.rglob("*")) if p.is_file()}


def test_a_second_config_exporting_to_the_same_output_is_refused_at_once(tmp_path, shared):
    a, b, out = _copy(shared, tmp_path / "p")
    lock = out.parent / ".tok.lock"
    proc = _export_stopped(a, 2)  # in the middle of its renames
    try:
        during = _outputs(out)
        r = toktok("export", "-c", b, "--force")
        assert r.code == 1, r
        line = r.err.strip()
        assert "\n" not in line and str(lock) in line and f"process {proc.pid}" in line, line
        assert _outputs(out) == during, "the refused export changed nothing"
    finally:
        code, err = _go_on(proc)
    assert code == 0, err
    assert not lock.exists(), "the lock file goes with the export"
    meta = json.loads(out.with_name("tok.meta.json").read_text())
    assert meta["tiktoken"]["sha256"] == hashlib.sha256(out.read_bytes()).hexdigest(), "A's set, whole"


def test_the_manifest_records_what_this_export_staged(tmp_path, shared):
    """A's publish done (before its manifest), B's tokenizer put at the path: A's
    manifest still records A's file, so the next export of A makes the set anew."""
    a, b, out = _copy(shared, tmp_path / "p")
    others = out.read_bytes()  # B's tokenizer
    members = 2 + len(json.loads(out.with_name("tok.meta.json").read_text())["members"])
    proc = _export_stopped(a, members)  # every rename done
    mine = out.read_bytes()
    assert mine != others
    out.write_bytes(others)  # a writer that takes no lock
    code, err = _go_on(proc)
    assert code == 0, err
    manifest = json.loads((a.parent / "work" / "export" / "manifest.json").read_text())
    entry = next(o for o in manifest["outputs"] if o["name"] == "tok.tiktoken")
    assert entry["sha256"] == hashlib.sha256(mine).hexdigest()
    r = toktok("export", "-c", a)
    assert r.code == 0, r.err
    assert "up to date" not in r.out + r.err
    assert out.read_bytes() == mine


def test_clean_removes_a_lock_left_by_a_killed_export_never_a_held_one(tmp_path, shared):
    a, b, out = _copy(shared, tmp_path / "p")
    lock = out.parent / ".tok.lock"
    proc = _export_stopped(a, 2)
    try:
        r = toktok("clean", "-c", b, "--yes")
        assert r.code == 0, r.err
        assert lock.is_file(), "a held lock is never removed"
    finally:
        proc.kill()
        proc.wait()
    assert lock.is_file()
    r = toktok("clean", "-c", b, "--yes")  # B's work folder is gone: the lock is all there is to clean
    assert r.code == 0, r.err
    assert not lock.exists() and str(lock) in r.out
    r = toktok("run", "-c", a)  # A's interrupted publish is undone, then A exports
    assert r.code == 0, r.err
    assert not lock.exists()
