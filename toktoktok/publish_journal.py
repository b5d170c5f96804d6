"""Replace a set of files as one: all of the new ones, or all of the old ones.

A tokenizer is several files that must agree (``NAME.tiktoken``, its
companion, the reports, ``NAME.hf/``); POSIX renames one file at a time, so
``publish`` keeps a journal:

1. **prepare**: each new file is linked (across file systems, copied and
   flushed) beside its target as ``.NAME.publish-new``; the journal names
   them and where each old file goes. Nothing the user sees has changed yet.
2. **commit**: per target, the old file is linked aside (``.NAME.publish-old``)
   and the new one renamed over it (the ``.tiktoken`` last); a member the new
   set does not have is moved aside the same way.
3. **clean**: the journal says ``committed``; the old files and the journal go.

An error or Ctrl-C before ``committed`` is undone on the spot (``rollback``;
a Ctrl-C during the renames waits until they are undone). After a kill -9 the
next run's ``recover`` undoes the publish, or finishes it if it committed;
until then readers tell a mixed set by the companion's digests (``loading``).

    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (d / "a.txt").write_text("old a"); _ = (d / "new-a").write_text("new a")
    >>> publish([(d / "new-a", d / "a.txt")], remove=[], journal=d / "journal.json")
    >>> (d / "a.txt").read_text(), sorted(p.name for p in d.iterdir())
    ('new a', ['a.txt', 'new-a'])
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
from collections.abc import Sequence
from pathlib import Path

from toktoktok.atomic import atomic_write_bytes
from toktoktok.errors import PublishError
from toktoktok.interrupts import interrupts_held

NEW, OLD = ".publish-new", ".publish-old"
STOP_AFTER = "TOKTOKTOK_PUBLISH_STOP_AFTER"  # test hook: SIGSTOP itself after this many renames


def _aside(target: Path, suffix: str) -> Path:
    return target.with_name(f".{target.name}{suffix}")


def publish(pairs: Sequence[tuple[Path, Path]], *, remove: Sequence[Path], journal: Path) -> None:
    """Put each ``(new file, target)`` in place and move each ``remove`` target
    aside, as one change (see the module's note). Raises ``PublishError`` (the
    old set restored) on an ``OSError``; re-raises ``KeyboardInterrupt`` after
    restoring the old set."""
    entries = []
    try:
        for new, target in pairs:
            target.parent.mkdir(parents=True, exist_ok=True)
            staged = _aside(target, NEW)
            _place(Path(new), staged)
            _aside(target, OLD).unlink(missing_ok=True)  # left by an earlier publish that was cleaned
            entries.append({"target": str(target), "new": str(staged), "old": str(_aside(target, OLD)),
                            "had_old": target.is_file()})
        for target in remove:
            if target.is_file():
                _aside(target, OLD).unlink(missing_ok=True)
                entries.append({"target": str(target), "new": None, "old": str(_aside(target, OLD)),
                                "had_old": True})
        _write_journal(journal, "prepared", entries)
    except OSError as exc:
        _discard_new(entries)
        raise PublishError(exc.errno, f"nothing was replaced, the previous outputs are kept: {exc}") from exc
    except BaseException:
        _discard_new(entries)
        raise
    with interrupts_held() as held:
        try:
            _commit(entries)
            _write_journal(journal, "committed", entries)
        except OSError as exc:
            rollback(entries)
            journal.unlink(missing_ok=True)
            raise PublishError(exc.errno, f"the previous outputs are restored as they were: {exc}") from exc
        if held:
            rollback(entries)
            journal.unlink(missing_ok=True)
            raise KeyboardInterrupt("the previous outputs are restored as they were")
    _clean(entries)
    journal.unlink(missing_ok=True)


def _place(new: Path, staged: Path) -> None:
    """``staged`` becomes a copy of ``new``: a hard link where both share a file
    system (no second copy on disk), else a flushed copy."""
    staged.unlink(missing_ok=True)
    try:
        os.link(new, staged)
    except OSError:
        atomic_write_bytes(staged, new.read_bytes())


def _commit(entries: list[dict]) -> None:
    stop_after = int(os.environ.get(STOP_AFTER, "-1"))
    for done, entry in enumerate(entries):
        if done == stop_after:
            os.kill(os.getpid(), signal.SIGSTOP)  # a test kills or interrupts the process here
        target, old = Path(entry["target"]), Path(entry["old"])
        if entry["had_old"]:
            old.unlink(missing_ok=True)
            os.link(target, old)  # a hard link: the old file stays whole at its name until the rename
        if entry["new"] is not None:
            os.replace(entry["new"], target)
        else:
            target.unlink()
    if len(entries) == stop_after:
        os.kill(os.getpid(), signal.SIGSTOP)


def rollback(entries: list[dict]) -> None:
    """Give every target its old file back (or none, if it had none)."""
    for entry in reversed(entries):
        target, old = Path(entry["target"]), Path(entry["old"])
        if entry["had_old"]:
            if old.is_file():
                os.replace(old, target)
        elif entry["new"] is not None and not Path(entry["new"]).exists():
            target.unlink(missing_ok=True)  # the new file had been renamed into place
    _discard_new(entries)


def _discard_new(entries: list[dict]) -> None:
    for entry in entries:
        if entry["new"] is not None:
            Path(entry["new"]).unlink(missing_ok=True)


def _clean(entries: list[dict]) -> None:
    for entry in entries:
        Path(entry["old"]).unlink(missing_ok=True)
    for entry in entries:  # a folder the new set left empty (a Hugging Face export not redone)
        folder = Path(entry["target"]).parent
        with contextlib.suppress(OSError):
            if folder.is_dir() and not any(folder.iterdir()):
                folder.rmdir()


def _write_journal(journal: Path, state: str, entries: list[dict]) -> None:
    journal.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(journal, (json.dumps({"state": state, "entries": entries}, indent=1) + "\n").encode())


def recover(journal: Path) -> str | None:
    """Finish what a killed ``publish`` left: undo it if it had not committed,
    else finish its cleaning. Returns what was done (None: nothing to do)."""
    if not journal.is_file():
        return None
    try:
        doc = json.loads(journal.read_text(encoding="utf-8"))
        state, entries = doc["state"], doc["entries"]
    except (OSError, ValueError, KeyError, TypeError):
        journal.unlink(missing_ok=True)  # written atomically: unreadable means not ours to act on
        return None
    if state == "committed":
        _clean(entries)
        journal.unlink(missing_ok=True)
        return "finished an interrupted publish of the outputs"
    rollback(entries)
    journal.unlink(missing_ok=True)
    return "undid an interrupted publish: the previous outputs are restored"
