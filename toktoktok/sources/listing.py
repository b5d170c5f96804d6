"""Listing the files a source reads: a folder's scan, its globs, its symbolic links.

The user's rule (suffixes, globs, order, hidden names) is in
docs/configuration.md (a source's keys); here, what it leaves open:

- A symbolic link to a folder is followed once, by real path, so loops end;
  a file reached through several links is listed once.
- A symbolic link that leads to no file (dangling, or a loop of links) is
  skipped by default; ``strict=True`` (the pipeline's check before work
  starts, with ``on_bad_file: fail``) reports it, and any listed file that
  cannot be opened, as a ``SourceError`` naming it.
- A sub-folder that cannot be listed is always an error: its files would
  silently be missing. A folder given as a URI (``pyarrow.fs``) has no links.

    >>> import os, tempfile
    >>> d = Path(tempfile.mkdtemp())
    >>> _ = (d / "a.txt").write_text("x"); os.symlink(d / "a.txt", d / "b.txt"); os.symlink(d / "no", d / "c.txt")
    >>> [p.name for p in list_source_files(Source(d, is_dir=True))]
    ['a.txt']
"""

from __future__ import annotations

import errno
import functools
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import regex

from toktoktok.config import Source
from toktoktok.config.values import special_kind
from toktoktok.sources.reads import SourceError, cannot_read
from toktoktok.sources.streams import SUFFIXES, as_path, open_binary
from toktoktok.uris import RemotePath, is_remote


def _is_supported(name: str) -> bool:
    return name.lower().endswith(SUFFIXES)


def _walk_files(root: Path, *, check: bool = False) -> Iterator[tuple[str, bool, str, bool]]:
    """(path, is a file, its real path, readable) under root, as strings, skipping
    hidden names, visiting each real dir once. Only the root's and a linked
    folder's real paths are asked of the system: below them a folder's is its
    parent's joined with its name, and a file's costs nothing unless the file is
    itself a symbolic link (a folder of many files spent its time on these, and
    on a ``Path`` per file).

    Each folder is listed through a descriptor where the system allows it, so
    that ``check`` (whether the user may read each file: ``os.access``) looks
    up one name, not the whole path; without ``check`` every file is readable.
    Entries that are neither a file nor a folder come with ``False`` only when
    they are symbolic links (dangling, or looping): the caller decides.
    """
    seen: set[str] = set()
    stack = [(str(root), os.path.realpath(root))]
    while stack:
        folder, real = stack.pop()
        if real in seen:
            continue
        seen.add(real)
        fd = None
        try:
            if _BY_DESCRIPTOR:
                fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
            entries = sorted(os.scandir(fd if fd is not None else folder), key=lambda e: e.name)
        except OSError as exc:
            if fd is not None:
                os.close(fd)
            raise SourceError(f"{folder}: cannot list directory: {exc.strerror or exc}") from exc
        try:
            subdirs = []
            here = folder if folder.endswith(os.sep) else folder + os.sep  # what scandir's own paths are
            below = real if real.endswith(os.sep) else real + os.sep  # a real path joined with a name, as os.path.join
            for entry in entries:
                name = entry.name
                if name.startswith("."):
                    continue
                try:
                    is_dir, is_file = entry.is_dir(), entry.is_file()
                except OSError:  # a loop of symbolic links raises ELOOP here
                    is_dir = is_file = False
                path = here + name
                if is_dir:
                    link = entry.is_symlink()
                    subdirs.append((path, os.path.realpath(path) if link else below + name))
                elif is_file:
                    link = entry.is_symlink()
                    readable = not check or (os.access(name, os.R_OK, dir_fd=fd) if fd is not None
                                             else os.access(path, os.R_OK))
                    yield path, True, os.path.realpath(path) if link else below + name, readable
                elif entry.is_symlink():
                    yield path, False, "", True
        finally:
            if fd is not None:
                os.close(fd)
        stack.extend(reversed(subdirs))


# a folder listed through its descriptor: its files' checks look up a name, not a path
_BY_DESCRIPTOR = os.scandir in os.supports_fd and os.access in os.supports_dir_fd


def _walk_remote(root: RemotePath) -> Iterator[tuple[RemotePath, bool, str, bool]]:
    """(file, True, its path) under a ``pyarrow.fs`` folder or prefix, hidden names (any
    part starting with ".") skipped, in no order (the caller sorts): no links there."""
    for file in root.walk():
        if not any(part.startswith(".") for part in file.relative_to(root).parts):
            yield file, True, str(file), True


def _selected(rel: str, include: tuple[str, ...], exclude: tuple[str, ...]) -> bool:
    """include (empty = all) and not exclude, globs on the relative posix path."""
    if include and not _any_glob(include)(rel):
        return False
    return not (exclude and _any_glob(exclude)(rel))


@functools.lru_cache(maxsize=64)
def _any_glob(globs: tuple[str, ...]) -> Callable[[str], bool]:
    """Whether a relative path matches any of ``globs`` (``glob_match``), with one
    regex for the globs on names and one for those on paths (a folder of many
    files tried each glob in turn on each file). ``**/NAME`` is a glob on names:
    any depth, then a name that ``NAME`` matches."""
    names, paths = [], []
    for glob in globs:
        on_names = _name_glob(glob)
        (names if on_names is not None else paths).append(_glob_regex(on_names or glob).pattern)
    on_name = regex.compile("|".join(f"(?:{p})" for p in names), regex.DOTALL) if names else None
    on_path = regex.compile("|".join(f"(?:{p})" for p in paths), regex.DOTALL) if paths else None

    def match(rel: str) -> bool:
        if on_name is not None and on_name.fullmatch(rel[rel.rfind("/") + 1 :]) is not None:
            return True
        return on_path is not None and on_path.fullmatch(rel) is not None

    return match


def _name_glob(glob: str) -> str | None:
    """The glob on names that ``glob`` is (None: it needs the whole path). A glob
    without ``/`` is one; so is ``**/NAME`` when nothing in ``NAME`` can match a
    ``/`` (no ``**``, no bracket).

        >>> _name_glob("*.c"), _name_glob("**/*.c"), _name_glob("x/*.c"), _name_glob("**/x[!a]")
        ('*.c', '*.c', None, None)
    """
    if "/" not in glob:
        return glob
    name = glob[3:] if glob.startswith("**/") else glob
    return name if not any(c in name for c in ("/", "**", "[")) else None


def glob_match(rel: str, pattern: str) -> bool:
    """Whether the ``/``-separated relative path ``rel`` matches ``pattern``
    (the globs of docs/configuration.md).

        >>> [glob_match(p, "**/*.txt") for p in ("a.txt", "x/a.txt", "x/y/a.txt", "a.md")]
        [True, True, True, False]
        >>> [glob_match(p, "*.txt") for p in ("a.txt", "x/a.txt")], glob_match("x/a.txt", "x/*")
        ([True, True], True)
        >>> glob_match("x/y/a.txt", "x/*"), glob_match("x/y/a.txt", "x/**")
        (False, True)
    """
    if "/" not in pattern:
        rel = rel.rpartition("/")[2]
    return _glob_regex(pattern).fullmatch(rel) is not None


@functools.lru_cache(maxsize=256)
def _glob_regex(pattern: str) -> regex.Pattern:
    out, i = [], 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:[^/]*/)*")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        elif pattern[i] == "[" and (end := pattern.find("]", i + 2)) > 0:
            body = pattern[i + 1 : end]
            body = "^" + body[1:] if body.startswith("!") else body
            out.append("[" + body.replace("\\", "\\\\") + "]")
            i = end + 1
        else:
            out.append(regex.escape(pattern[i]))
            i += 1
    return regex.compile("".join(out), regex.DOTALL)


def list_source_files(source: Source, *, strict: bool = False,
                      skipped: list[dict[str, str]] | None = None) -> list[Path]:
    """The files a source reads, in a deterministic order.

    A ``file:`` source is itself (any suffix); a ``path:`` directory is scanned
    recursively for the files of ``SUFFIXES`` (with ``include``: for any file
    the globs select), filtered by the include/exclude globs
    (``glob_match`` on the path relative to the directory, ``/`` separated)
    and sorted by that relative path.

    ``strict``: a selected symbolic link that leads to no file, or a listed
    file that cannot be opened for reading, raises SourceError naming it
    (by default the first is skipped, and listed in ``skipped`` when given,
    and the second fails when read).
    """
    path = as_path(source.path)
    if not source.is_dir:
        if not path.is_file():
            special = special_kind(path) if not is_remote(path) else None
            raise SourceError(f"{path}: is not a regular file but {special}" if special else f"{path}: no such file")
        if strict:
            _check_openable(path)
        return [path]
    if not path.is_dir():
        raise SourceError(f"{path}: no such directory")
    remote = is_remote(path)
    found: list[tuple[str, Any, str, bool]] = []
    prefix = len(str(path).rstrip("/")) + 1
    for file, is_file, real, readable in _walk_files(path, check=strict) if not remote else _walk_remote(path):
        rel = file[prefix:] if not remote else file.relative_to(path).as_posix()
        if (source.include or _is_supported(rel)) and _selected(rel, source.include, source.exclude):
            if is_file:
                found.append((rel, file, real, readable))
            elif strict:
                raise SourceError(f"{file}: {_broken_link(Path(file))}")
            elif skipped is not None:
                skipped.append({"path": str(file), "error": _broken_link(Path(file)), "text_read_kept": False})
    found.sort()
    names = _unique_real(found) if not remote else [file for _, file, _, _ in found]
    if not names and source.include:
        raise SourceError(f"{path}: no file found (after include/exclude)")
    if not names:
        raise SourceError(f"{path}: no {'/'.join(SUFFIXES)} file found (after include/exclude)")
    if strict:
        for _, file, _, readable in found:
            if not readable or remote:  # the first in the listing's order says why it cannot be read
                _check_openable(file)
    return names if remote else _paths(names)


def _paths(files: list[str]) -> list[Path]:
    """Local files' paths as ``Path``: each a child of its folder's ``Path``, made
    once a folder (parsing each file's whole path was much of a large folder's
    listing).

        >>> [str(p) for p in _paths(["/a/b/c.txt", "/a/b/d.txt", "e.txt", "/f.txt", "./g/h.txt"])]
        ['/a/b/c.txt', '/a/b/d.txt', 'e.txt', '/f.txt', 'g/h.txt']
    """
    folders: dict[str, Any] = {}
    out = []
    for file in files:
        folder, slash, name = file.rpartition("/")
        if not slash:
            out.append(Path(name))
            continue
        child = folders.get(folder)
        if child is None:
            parent = Path(folder or "/")
            # pathlib's own maker of a child from one name (what ``iterdir`` uses): ``/``
            # parses the name again, which was most of a large folder's listing
            child = folders[folder] = getattr(parent, "_make_child_relpath", parent.joinpath)
        out.append(child(name) if name not in ("", ".", "..") else Path(file))
    return out


def _broken_link(path: Path) -> str:
    """Why a symbolic link leads to no file."""
    try:
        path.stat()
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return "a loop of symbolic links, not a file"
        try:
            target = f"to {os.readlink(path)}, "
        except OSError:
            target = ""
        return f"a broken symbolic link ({target}{exc.strerror or exc})"
    return "a symbolic link to something that is not a file"


def _check_openable(path: Path | RemotePath | str) -> None:
    """Open and close the file, or SourceError saying why it cannot be read. A local
    file the system says is readable is taken at its word (an open of every file of
    a large folder cost more than listing it); else the open says why not."""
    try:
        if isinstance(path, RemotePath):
            with open_binary(path):
                pass
        elif not os.access(path, os.R_OK):  # a regular file (the listing says so): no reader object needed
            os.close(os.open(path, os.O_RDONLY))
    except OSError as exc:
        raise cannot_read(path, exc) from exc


def _unique_real(found: list[tuple[str, str, str, bool]]) -> list[str]:
    """Drop files already listed under another name (symlinks)."""
    seen: set[str] = set()
    out = []
    for _, file, real, _ in found:
        if real not in seen:
            seen.add(real)
            out.append(file)
    return out
