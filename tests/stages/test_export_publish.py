"""The outputs are one set: published all or nothing, checked by every reader.

- ``toktoktok.publish_journal``: a publish that fails or is interrupted restores the
  old files exactly; after a kill -9 between any two renames, ``recover``
  undoes it (or finishes it once committed).
- ``toktok export`` stopped (SIGSTOP, by its own test hook) after each of its
  renames and killed there: ``toktoktok.load``, ``inspect``, ``encode`` and a
  warm start either refuse the pair (naming both files) or read a consistent
  one; the next ``toktok run`` repairs the set before anything else and ends
  with the same files as an uninterrupted run.
- Ctrl-C and an error during the publish leave the old set byte for byte,
  and say so.
- The companion records the digests (``toktoktok-meta/2``); an older one is
  read with a warning.
"""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

import toktoktok
from tests.conftest import SPECIALS, TOKTOK, english_text, toktok, write_config
from toktoktok import publish_journal
from toktoktok.errors import CompanionMismatch, PublishError, TokenizerFileError
from toktoktok.loading import OldCompanionWarning

# ---------------------------------------------------------------- the file set alone


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _old_and_new(tmp_path: Path) -> tuple[Path, Path, list[tuple[Path, Path]]]:
    out, new = tmp_path / "out", tmp_path / "new"
    out.mkdir()
    new.mkdir()
    for name in ("a.md", "b.json", "c.tiktoken"):
        (out / name).write_text(f"old {name}")
        (new / name).write_text(f"new {name}")
    (new / "d.extra").write_text("new only")
    pairs = [(new / n, out / n) for n in ("d.extra", "a.md", "b.json", "c.tiktoken")]
    return out, new, pairs


def test_publish_replaces_the_set_and_moves_stale_members_away(tmp_path):
    out, _, pairs = _old_and_new(tmp_path)
    (out / "stale.png").write_text("old picture")
    publish_journal.publish(pairs, remove=[out / "stale.png"], journal=tmp_path / "j.json")
    assert _files(out) == {"a.md": b"new a.md", "b.json": b"new b.json", "c.tiktoken": b"new c.tiktoken",
                           "d.extra": b"new only"}
    assert not (tmp_path / "j.json").exists()


def test_a_failed_rename_restores_the_old_set(tmp_path):
    out, _, pairs = _old_and_new(tmp_path)
    (out / "b.json").unlink()
    (out / "b.json").mkdir()  # a folder where a file must go: its rename fails
    (out / "b.json" / "x").write_text("in the way")
    before = _files(out)
    with pytest.raises(PublishError, match="previous outputs are restored"):
        publish_journal.publish(pairs, remove=[], journal=tmp_path / "j.json")
    assert _files(out) == before
    assert sorted(p.name for p in out.iterdir()) == ["a.md", "b.json", "c.tiktoken"], "no temporary file left"


def _hidden(folder: Path) -> list[str]:
    """What a publish leaves beside its targets: ``.NAME.publish-new`` and ``.NAME.publish-old``."""
    return sorted(p.name for p in folder.rglob(".*.publish-*"))


def test_a_failed_rename_leaves_no_publish_old_beside_the_restored_file(tmp_path, monkeypatch):
    """The old file is linked aside before the rename over it: undoing a rename
    that failed must remove that second link (renaming one link of a file over
    another link of it does nothing)."""
    out, _, pairs = _old_and_new(tmp_path)
    before = _files(out)
    real_replace = os.replace

    def failing(src, dst, *args, **kwargs):
        if Path(dst) == out / "c.tiktoken" and Path(src).name.endswith(publish_journal.NEW):
            raise OSError(errno.EIO, "Input/output error", str(src))
        return real_replace(src, dst, *args, **kwargs)

    monkeypatch.setattr(os, "replace", failing)
    with pytest.raises(PublishError, match="previous outputs are restored as they were") as err:
        publish_journal.publish(pairs, remove=[], journal=tmp_path / "j.json")
    assert _files(out) == before
    assert _hidden(out) == []
    assert not err.value.committed


def test_outputs_another_process_replaced_meanwhile_are_named_not_called_restored(tmp_path, monkeypatch):
    """Another publish to the same outputs runs between two of ours (it takes our
    staged names and removes our old ones): the rollback finds files it did not
    put there, leaves them as found, and says so."""
    out, _, pairs = _old_and_new(tmp_path)
    real_replace = os.replace
    renames = []

    def another_process_between(src, dst, *args, **kwargs):
        if Path(src).name.endswith(publish_journal.NEW):
            renames.append(dst)
            if len(renames) == 3:
                for hidden in out.glob(".*"):
                    hidden.unlink()
                for name in ("a.md", "b.json", "c.tiktoken", "d.extra"):
                    (out / f"{name}.theirs").write_text(f"theirs {name}")
                    real_replace(out / f"{name}.theirs", out / name)
        return real_replace(src, dst, *args, **kwargs)

    monkeypatch.setattr(os, "replace", another_process_between)
    with pytest.raises(PublishError) as err:
        publish_journal.publish(pairs, remove=[], journal=tmp_path / "j.json")
    assert "another process changed" in str(err.value) and "as they were" not in str(err.value)
    assert _files(out) == {n: f"theirs {n}".encode() for n in ("a.md", "b.json", "c.tiktoken", "d.extra")}
    assert _hidden(out) == []


def test_an_error_after_the_commit_says_the_new_set_is_in_place(tmp_path, monkeypatch):
    out, _, pairs = _old_and_new(tmp_path)
    real_unlink = Path.unlink

    def failing(self, missing_ok=False):
        if self.name.endswith(publish_journal.OLD) and self.exists():
            raise OSError(errno.EIO, "Input/output error", str(self))
        return real_unlink(self, missing_ok=missing_ok)

    monkeypatch.setattr(Path, "unlink", failing)
    with pytest.raises(PublishError, match="the new outputs are in place") as err:
        publish_journal.publish(pairs, remove=[], journal=tmp_path / "j.json")
    assert err.value.committed and "restored" not in str(err.value) and "kept" not in str(err.value)
    monkeypatch.undo()
    assert publish_journal.recover(tmp_path / "j.json").startswith("finished")
    assert _files(out) == {"a.md": b"new a.md", "b.json": b"new b.json", "c.tiktoken": b"new c.tiktoken",
                           "d.extra": b"new only"}
    assert _hidden(out) == []


PUBLISH_CHILD = """
import sys, pathlib
from toktoktok import publish_journal
tmp = pathlib.Path(sys.argv[1])
out, new = tmp / "out", tmp / "new"
pairs = [(new / n, out / n) for n in ("d.extra", "a.md", "b.json", "c.tiktoken")]
publish_journal.publish(pairs, remove=[], journal=tmp / "j.json")
"""


def _stopped(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "T"
    except OSError:
        return False


def _wait_stopped(proc: subprocess.Popen, timeout: float = 120) -> None:
    end = time.monotonic() + timeout
    while not _stopped(proc.pid):
        if proc.poll() is not None:
            raise AssertionError(f"ended before it stopped: {proc.returncode} {proc.communicate()}")
        if time.monotonic() > end:
            raise AssertionError("never stopped")
        time.sleep(0.005)


@pytest.mark.parametrize("after", range(5))
def test_recover_after_a_kill_between_any_two_renames(tmp_path, after):
    """kill -9 after ``after`` of the 4 renames (4: all done, journal not yet
    committed): ``recover`` restores the old set exactly."""
    out, _, _ = _old_and_new(tmp_path)
    before = _files(out)
    env = {**os.environ, publish_journal.STOP_AFTER: str(after)}
    proc = subprocess.Popen([str(TOKTOK.parent / "python"), "-c", PUBLISH_CHILD, str(tmp_path)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    _wait_stopped(proc)
    proc.kill()
    proc.wait()
    assert (tmp_path / "j.json").is_file()
    assert publish_journal.recover(tmp_path / "j.json").startswith("undid")
    assert _files(out) == before
    assert publish_journal.recover(tmp_path / "j.json") is None


def test_ctrl_c_during_the_renames_restores_the_old_set(tmp_path):
    out, _, _ = _old_and_new(tmp_path)
    before = _files(out)
    env = {**os.environ, publish_journal.STOP_AFTER: "2"}
    proc = subprocess.Popen([str(TOKTOK.parent / "python"), "-c", PUBLISH_CHILD, str(tmp_path)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _wait_stopped(proc)
    proc.send_signal(signal.SIGINT)
    proc.send_signal(signal.SIGCONT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode != 0 and "previous outputs are restored" in err
    assert _files(out) == before
    assert not (tmp_path / "j.json").exists()


# ---------------------------------------------------------------- toktok export, stopped at each rename


@pytest.fixture(scope="module")
def two_sets(tmp_path_factory):
    """A project trained twice: set A (40 merges) published, then set B (60 merges)
    trained but not exported; and B's outputs from an uninterrupted export."""
    root = tmp_path_factory.mktemp("publish")
    data = root / "data"
    data.mkdir()
    (data / "a.txt").write_text(english_text(60_000))

    def config(folder: Path, merges: int) -> Path:
        return write_config(folder, [{"name": "A", "merges": merges, "sources": [{"path": str(data)}]}],
                            threads=1, special_tokens=SPECIALS, heldout_share=0.05)

    ref = config(root / "ref", 60)
    assert toktok("run", "-c", ref).code == 0
    reference = _files(root / "ref" / "out")
    base = config(root / "base", 40)
    assert toktok("run", "-c", base).code == 0
    old = {k: v for k, v in _files(root / "base" / "out").items() if not k.startswith("tok.work")}
    config(root / "base", 60)
    assert toktok("ingest", "-c", base).code == 0 and toktok("train", "-c", base).code == 0
    return root / "base", old, {k: v for k, v in reference.items() if not k.startswith("tok.work")}


def _copy_project(src: Path, dst: Path) -> Path:
    subprocess.run(["cp", "-a", str(src), str(dst)], check=True)
    cfg = dst / "config.yaml"
    cfg.write_text(cfg.read_text().replace(str(src), str(dst)))
    return cfg


def _outputs(project: Path) -> dict[str, bytes]:
    return {k: v for k, v in _files(project / "out").items() if not k.startswith("tok.work")}


def _same_tokenizer_and_whole_set(outputs: dict[str, bytes], reference: dict[str, bytes]) -> None:
    """The same ``.tiktoken`` and special tokens as ``reference``, and a whole set:
    every member the companion lists is there with its digest (the reports hold
    timings, so they are compared by their digests in the companion only)."""
    import hashlib

    assert outputs["tok.tiktoken"] == reference["tok.tiktoken"]
    meta, ref = json.loads(outputs["tok.meta.json"]), json.loads(reference["tok.meta.json"])
    assert meta["special_tokens"] == ref["special_tokens"] and meta["tiktoken"] == ref["tiktoken"]
    assert set(outputs) == {"tok.tiktoken", "tok.meta.json", *meta["members"]} == set(reference)
    for name, digest in meta["members"].items():
        assert hashlib.sha256(outputs[name]).hexdigest() == digest, name


def _readers_agree_or_refuse(project: Path, old: dict[str, bytes], new: dict[str, bytes]) -> str:
    """``load`` and ``inspect`` on a possibly mixed set: a refusal naming both files,
    or a pair that is wholly the old one or wholly the new one."""
    tok = project / "out" / "tok.tiktoken"
    pair = (tok.read_bytes(), (project / "out" / "tok.meta.json").read_bytes())
    def describes(meta: bytes, ref: bytes) -> bool:
        a, b = json.loads(meta), json.loads(ref)
        return a["tiktoken"] == b["tiktoken"] and a["special_tokens"] == b["special_tokens"]

    consistent = any(pair[0] == ref["tok.tiktoken"] and describes(pair[1], ref["tok.meta.json"]) for ref in (old, new))
    try:
        enc = toktoktok.load(tok)
    except CompanionMismatch as exc:
        assert not consistent
        assert "tok.tiktoken" in str(exc) and "tok.meta.json" in str(exc)
        r = toktok("inspect", str(tok))
        assert r.code == 1 and "tok.meta.json" in r.err, r
        return "refused"
    assert consistent, "a mixed pair was accepted"
    assert enc.encode("<|endoftext|>", allowed_special="all") == [json.loads(pair[1])["special_tokens"]["<|endoftext|>"]]
    return "consistent"


@pytest.mark.slow
def test_export_killed_after_each_rename_then_rerun(tmp_path, two_sets):
    project, old, new = two_sets
    seen = []
    renames = len(new)  # every member is renamed into place, then the journal is committed
    for after in range(renames + 1):
        config = _copy_project(project, tmp_path / f"k{after}")
        proc = subprocess.Popen([str(TOKTOK), "export", "-c", str(config)], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, env={**os.environ, publish_journal.STOP_AFTER: str(after)})
        _wait_stopped(proc)
        proc.kill()
        proc.wait()
        seen.append(_readers_agree_or_refuse(config.parent, old, new))
        r = toktok("run", "-c", config)
        assert r.code == 0, r.err
        assert "undid an interrupted publish" in r.err
        _same_tokenizer_and_whole_set(_outputs(config.parent), new)
    assert "refused" in seen and "consistent" in seen, seen


@pytest.mark.slow
def test_ctrl_c_and_an_error_during_the_export_keep_the_old_set(tmp_path, two_sets):
    project, old, _ = two_sets
    config = _copy_project(project, tmp_path / "int")
    proc = subprocess.Popen([str(TOKTOK), "export", "-c", str(config)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, publish_journal.STOP_AFTER: "2"})
    _wait_stopped(proc)
    proc.send_signal(signal.SIGINT)
    proc.send_signal(signal.SIGCONT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "previous outputs" in err and "as they were" in err and "Traceback" not in err
    assert _outputs(config.parent) == old

    config = _copy_project(project, tmp_path / "err")
    png = config.parent / "out" / "tok.report.json"
    png.unlink()
    png.mkdir()  # the report cannot take its name
    (png / "x").write_text("in the way")
    before = _outputs(config.parent)
    r = toktok("export", "-c", config, real=True)
    assert r.code == 1
    assert "previous outputs" in r.err and "kept" in r.err or "restored" in r.err, r.err
    assert _outputs(config.parent) == before


def test_the_companion_records_the_set_and_an_old_one_warns(tmp_path, two_sets):
    project, old, _ = two_sets
    meta = json.loads(old["tok.meta.json"])
    assert meta["format"] == "toktoktok-meta/2"
    assert meta["tiktoken"]["ranks"] == len(old["tok.tiktoken"].splitlines())
    assert set(meta["members"]) == {k for k in old if k not in ("tok.tiktoken", "tok.meta.json")}
    out = tmp_path / "o"
    out.mkdir()
    (out / "tok.tiktoken").write_bytes(old["tok.tiktoken"])
    legacy = {k: v for k, v in meta.items() if k not in ("tiktoken", "members")} | {"format": "toktoktok-meta/1"}
    (out / "tok.meta.json").write_text(json.dumps(legacy))
    with pytest.warns(OldCompanionWarning, match="toktok export"):
        enc = toktoktok.load(out / "tok.tiktoken")
    assert enc.encode("<|endoftext|>", allowed_special="all") == [meta["special_tokens"]["<|endoftext|>"]]
    r = toktok("inspect", str(out / "tok.tiktoken"), real=True)
    assert r.code == 0 and "warning:" in r.err and "toktok export" in r.err, r


# ---------------------------------------------------------------- what a failed export says is on disk


def _fault(monkeypatch, point: str, project: Path, order: list[str]) -> None:
    """Make ``toktok export`` (in this process) fail at ``point``; record in ``order``
    the names each staged file is renamed to."""
    real_replace, real_unlink = os.replace, Path.unlink

    def replace(src, dst, *args, **kwargs):
        if Path(src).name.endswith(publish_journal.NEW):
            order.append(Path(dst).name)
        if point == "manifest-enospc" and Path(dst) == project / "out" / "tok.work" / "export" / "manifest.json":
            raise OSError(errno.ENOSPC, "No space left on device", str(dst))
        return real_replace(src, dst, *args, **kwargs)

    def unlink(self, missing_ok=False):
        if self.exists() and (point.startswith("clean") and self.name.endswith(publish_journal.OLD)
                              or point == "journal-eio" and self.name == "publish.json"
                              and '"committed"' in self.read_text()):
            if point == "clean-ctrl-c":
                raise KeyboardInterrupt
            raise OSError(errno.EIO, "Input/output error", str(self))
        return real_unlink(self, missing_ok=missing_ok)

    monkeypatch.setattr(os, "replace", replace)
    monkeypatch.setattr(Path, "unlink", unlink)


@pytest.mark.parametrize("point", ["clean-eio", "journal-eio", "manifest-enospc", "clean-ctrl-c"])
def test_a_failure_after_the_publish_committed_says_the_new_set_is_in_place(tmp_path, two_sets, monkeypatch, point):
    """Removing the old files, the journal, or writing the export manifest fails
    (or Ctrl-C comes) once every file is renamed: the new set is what is on disk,
    and the message says so, never that the previous outputs are kept; the
    .tiktoken was renamed last, after its companion; the next run finishes."""
    project, _, new = two_sets
    config = _copy_project(project, tmp_path / point)
    order: list[str] = []
    _fault(monkeypatch, point, config.parent, order)
    r = toktok("export", "-c", config)
    monkeypatch.undo()
    assert r.code == (130 if point == "clean-ctrl-c" else 1), r.err
    assert "this export's outputs" in r.err and "are in place" in r.err, r.err
    assert "kept as they were" not in r.err and "restored" not in r.err, r.err
    assert order[-2:] == ["tok.meta.json", "tok.tiktoken"], order
    outputs = _outputs(config.parent)
    assert outputs["tok.tiktoken"] == new["tok.tiktoken"]
    assert toktoktok.load(config.parent / "out" / "tok.tiktoken").n_vocab == json.loads(
        new["tok.meta.json"])["vocab_size"]
    rerun = toktok("run", "-c", config)
    assert rerun.code == 0, rerun.err
    _same_tokenizer_and_whole_set(_outputs(config.parent), new)
    assert _hidden(config.parent / "out") == []


def test_a_failed_last_rename_keeps_the_previous_set_with_nothing_beside_it(tmp_path, two_sets, monkeypatch):
    project, old, _ = two_sets
    config = _copy_project(project, tmp_path / "last")
    out = config.parent / "out"
    real_replace = os.replace

    def failing(src, dst, *args, **kwargs):
        if Path(dst) == out / "tok.tiktoken" and Path(src).name.endswith(publish_journal.NEW):
            raise OSError(errno.EIO, "Input/output error", str(src))
        return real_replace(src, dst, *args, **kwargs)

    monkeypatch.setattr(os, "replace", failing)
    r = toktok("export", "-c", config)
    monkeypatch.undo()
    assert r.code == 1 and "previous outputs" in r.err and "kept as they were" in r.err, r.err
    assert _outputs(config.parent) == old
    assert _hidden(out) == []


def test_outputs_another_export_replaced_meanwhile_are_not_called_kept(tmp_path, two_sets, monkeypatch):
    """Another export publishes to the same outputs between two renames of this one
    (it takes the staged names and removes the old ones): the message says what
    was found, and nothing of the other export's is removed."""
    project, _, _ = two_sets
    config = _copy_project(project, tmp_path / "cc")
    out = config.parent / "out"
    real_replace = os.replace
    theirs: dict[str, bytes] = {}
    renames = []

    def another_export_between(src, dst, *args, **kwargs):
        if Path(src).name.endswith(publish_journal.NEW):
            renames.append(dst)
            if len(renames) == 2:
                for hidden in list(out.glob(".*.publish-*")):
                    hidden.unlink()
                for path in [p for p in out.iterdir() if p.is_file() and not p.name.startswith(".")]:
                    theirs[path.name] = f"another export's {path.name}".encode()
                    (out / "theirs").write_bytes(theirs[path.name])
                    real_replace(out / "theirs", path)
        return real_replace(src, dst, *args, **kwargs)

    monkeypatch.setattr(os, "replace", another_export_between)
    r = toktok("export", "-c", config)
    monkeypatch.undo()
    assert theirs, "the other export ran"
    assert r.code == 1, r.err
    assert "another process" in r.err and "kept as they were" not in r.err and "restored" not in r.err, r.err
    assert {k: v for k, v in _outputs(config.parent).items() if "/" not in k} == theirs
    assert _hidden(out) == []


@pytest.mark.slow
def test_a_first_export_killed_before_its_last_rename_leaves_no_tiktoken(tmp_path, two_sets):
    """No earlier outputs: killed before the last rename, every other file is in
    place but the .tiktoken is not, so no reader loads it without its companion."""
    project, _, new = two_sets
    config = _copy_project(project, tmp_path / "first")
    for name in [k for k in _outputs(config.parent) if "/" not in k]:
        (config.parent / "out" / name).unlink()
    import shutil

    for folder in (config.parent / "out").glob("tok.hf"):
        shutil.rmtree(folder)
    proc = subprocess.Popen([str(TOKTOK), "export", "-c", str(config)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env={**os.environ, publish_journal.STOP_AFTER: str(len(new) - 1)})
    _wait_stopped(proc)
    proc.kill()
    proc.wait()
    out = config.parent / "out"
    assert (out / "tok.meta.json").is_file() and not (out / "tok.tiktoken").exists()
    with pytest.raises(TokenizerFileError, match="tok.tiktoken"):
        toktoktok.load(out / "tok.tiktoken")
