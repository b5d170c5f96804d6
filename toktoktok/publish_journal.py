"""Replace a set of files as one: all of the new ones, or all of the old ones.

A tokenizer is several files that must agree (``NAME.tiktoken``, its
companion, the reports, ``NAME.hf/``); POSIX renames one file at a time, so
``publish`` keeps a journal:

1. **prepare**: each new file is linked (across file systems, copied and
   flushed) beside its target as ``.NAME.publish-new``; the journal names
   them and where each old file goes. Nothing the user sees has changed yet.
2. **commit**: a member the new set does not have is moved aside first; then,
   per target in the order given (the caller puts the ``.tiktoken`` last), the
   old file is linked aside (``.NAME.publish-old``) and the new one renamed over it.
3. **clean**: the journal says ``committed``; the old files and the journal go.

An error or Ctrl-C before ``committed`` is undone on the spot (``rollback``,
which names an output another process replaced meanwhile); an error after it
says the new set is in place. After a kill -9 the next run's ``recover``
undoes or finishes the publish; meanwhile readers refuse a mixed set (``loading``).

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
    """Put each ``(new file, target)`` in place, in order, and move each ``remove``
    target aside first, as one change (see the module's note). Raises
    ``PublishError`` on an ``OSError``, its ``committed`` saying whether the new
    set is in place; re-raises ``KeyboardInterrupt`` after undoing the renames."""
    entries: list[dict] = []
    try:
        for target in remove:  # before any rename, so the last rename completes the new set
            if target.is_file():
                _aside(target, OLD).unlink(missing_ok=True)
                entries.append({"target": str(target), "new": None, "old": str(_aside(target, OLD)),
                                "had_old": True, "before": _identity(target)})
        for new, target in pairs:
            target.parent.mkdir(parents=True, exist_ok=True)
            staged = _aside(target, NEW)
            _place(Path(new), staged)
            _aside(target, OLD).unlink(missing_ok=True)  # left by an earlier publish that was cleaned
            entries.append({"target": str(target), "new": str(staged), "old": str(_aside(target, OLD)),
                            "had_old": target.is_file(), "before": _identity(target),
                            "staged": _identity(staged)})
        _write_journal(journal, "prepared", entries)
    except OSError as exc:
        _discard_new(entries)
        raise _error(exc, "nothing was replaced, the previous outputs are kept", committed=False) from exc
    except BaseException:
        _discard_new(entries)
        raise
    with interrupts_held() as held:
        try:
            _commit(entries)
            _write_journal(journal, "committed", entries)
        except OSError as exc:
            changed = rollback(entries)
            journal.unlink(missing_ok=True)
            raise _error(exc, undone(changed), committed=False) from exc
        if held:
            changed = rollback(entries)
            journal.unlink(missing_ok=True)
            raise KeyboardInterrupt(undone(changed))
    try:
        _clean(entries)
        journal.unlink(missing_ok=True)
    except OSError as exc:  # the journal says committed: the next recover finishes the cleaning
        raise _error(exc, "the new outputs are in place; what the publish left beside them is removed by "
                     f"the next run ({journal})", committed=True) from exc


def _error(exc: OSError, what: str, *, committed: bool) -> PublishError:
    """A ``PublishError`` saying ``what`` is on disk; ``reason`` keeps the cause alone."""
    err = PublishError(exc.errno, f"{what}: {exc}")
    err.committed, err.reason = committed, _cause(exc)
    return err


def _cause(exc: OSError) -> str:
    """An ``OSError``'s reason and files, without its ``[Errno N]``.

        >>> _cause(OSError(5, "Input/output error", "a", None, "b"))
        "Input/output error: 'a' -> 'b'"
    """
    if not exc.strerror:
        return str(exc)
    files = " -> ".join(repr(str(f)) for f in (exc.filename, exc.filename2) if f is not None)
    return f"{exc.strerror}: {files}" if files else exc.strerror


def undone(changed: Sequence[str]) -> str:
    """What a rollback left: the previous outputs, or which ones another process changed.

        >>> undone([])
        'the previous outputs are restored as they were'
    """
    if not changed:
        return "the previous outputs are restored as they were"
    return (f"the previous outputs are restored but {', '.join(changed)}, which another process changed "
            "meanwhile (left as found)")


def _identity(path: Path) -> list[int] | None:
    """What tells a file from its replacement: inode, size, mtime (None: no file)."""
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    return [st.st_ino, st.st_size, st.st_mtime_ns]


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


def rollback(entries: list[dict]) -> list[str]:
    """Give every target its old file back (or none, if it had none); returns the
    targets not as they were before the publish (another process changed them:
    they are left as found, nothing of theirs removed)."""
    changed = []
    for entry in reversed(entries):
        target, old = Path(entry["target"]), Path(entry["old"])
        if entry["had_old"]:
            if old.is_file():
                _restore(old, target)
        elif entry["new"] is not None and _ours(entry, target):
            target.unlink(missing_ok=True)  # the new file had been renamed into place
        if "before" in entry and _identity(target) != entry["before"]:
            changed.append(str(target))
    _discard_new(entries)
    return changed


def _ours(entry: dict, target: Path) -> bool:
    """Whether ``target`` is the file this publish staged (a journal without its
    identity: whether the staged name is gone, as it is once renamed)."""
    if "staged" in entry:
        return _identity(target) == entry["staged"]
    return not Path(entry["new"]).exists()


def _restore(old: Path, target: Path) -> None:
    """Rename ``old`` back over ``target``; when both are one file (the rename over it
    had not happened), remove the ``old`` name: a rename between two links of one
    file does nothing, which would leave ``old`` behind."""
    try:
        same = os.path.samefile(old, target)
    except FileNotFoundError:
        same = False
    if same:
        old.unlink()
    else:
        os.replace(old, target)


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
    changed = rollback(entries)
    journal.unlink(missing_ok=True)
    return f"undid an interrupted publish: {undone(changed)}"
