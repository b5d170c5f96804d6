"""What can be checked before any work starts, each problem a ``ConfigError``
naming its key (and its YAML line): a warm start that is not a usable
vocabulary, a ``hf:`` role that names no special token, a source with no
readable file, an output or work folder that cannot be written.

``Work.check_ready`` (``work``) runs them in order; nothing here writes.

    >>> _unwritable(Path(__file__) / "out")  # doctest: +ELLIPSIS
    'needs the folder .../ready.py/out, but .../ready.py is a file'
"""

from __future__ import annotations

import os
from pathlib import Path

from toktoktok.config import Config, config_error, default_work_dir
from toktoktok.sources import SourceError, list_source_files
from toktoktok.warm_start import Base, load_base


def check_sources(cfg: Config) -> None:
    """Every source lists a file (with ``on_bad_file: fail``: every listed file
    opens, and no symbolic link is broken)."""
    strict = cfg.on_bad_file == "fail"
    for phase in cfg.phases:
        for j, src in enumerate(phase.sources):
            where = ("phases", phase.index - 1, "sources", j, "path" if src.is_dir else "file")
            try:
                list_source_files(src, strict=strict)
            except (SourceError, OSError) as exc:
                raise config_error(cfg.path, where, f"has a problem: {exc}") from exc


def check_hf_roles(cfg: Config, base_specials: dict[str, int]) -> None:
    """Each ``hf:`` role names a special token of the config or of the warm start."""
    declared = set(cfg.special_tokens) | set(base_specials)
    for role, token in (cfg.hf.roles if cfg.hf else {}).items():
        if token is not None and token not in declared:
            known = ", ".join(repr(t) for t in sorted(declared)) or "none are declared"
            raise config_error(cfg.path, ("hf", role), f"is {token!r}, not a declared special token "
                                                       f"(special tokens of the config and the warm start: {known})")


def check_warm_start(cfg: Config) -> Base:
    """The base vocabulary must be valid and leave room for the new special tokens."""
    from toktoktok.tiktoken_file import validate_special_tokens

    assert cfg.warm_start is not None
    key = ("warm_start", "file")
    try:
        base = load_base(cfg.warm_start.file, special_tokens=cfg.warm_start.special_tokens)
    except ValueError as exc:
        if any(repr(t) in str(exc) for t in cfg.warm_start.special_tokens or {}):
            raise config_error(cfg.path, ("warm_start", "special_tokens"),
                               f"do not fit the base vocabulary: {exc}") from exc
        raise config_error(cfg.path, key, f"is not a usable base vocabulary: {exc}") from exc
    except OSError as exc:
        raise config_error(cfg.path, key, f"cannot be read: {exc.strerror or exc}") from exc
    new = [t for t in cfg.special_tokens if t not in base.special_tokens]
    top = len(base.vocab)
    try:
        validate_special_tokens({}, base.special_tokens | {t: top + i for i, t in enumerate(new)})
    except ValueError as exc:
        raise config_error(cfg.path, ("special_tokens",), f"do not fit the warm start's: {exc}") from exc
    return base


def check_writable(cfg: Config) -> None:
    """The output's folder and the work directory must be writable (or creatable)."""
    work_key = "output" if cfg.work_dir == default_work_dir(cfg.output) else "work_dir"
    for key, folder in (("output", cfg.output.parent), (work_key, cfg.work_dir)):
        problem = _unwritable(folder)
        if problem:
            raise config_error(cfg.path, (key,), problem)


def _unwritable(folder: Path) -> str | None:
    """Why files cannot be written in ``folder`` (created if need be), or None.

    Checked on the nearest folder that exists, with ``os.access`` (which
    knows read-only file systems) so nothing is created here.
    """
    existing = folder
    try:
        while not existing.exists() and existing != existing.parent:
            existing = existing.parent
        is_dir = existing.is_dir()
    except OSError as exc:  # a parent that cannot be searched
        return f"cannot be written: {exc.filename}: {exc.strerror}"
    if not is_dir:
        return f"needs the folder {folder}, but {existing} is a file"
    if os.access(existing, os.W_OK | os.X_OK):
        return None
    try:
        read_only = bool(os.statvfs(existing).f_flag & os.ST_RDONLY)
    except OSError:
        read_only = False
    why = "a read-only file system" if read_only else "permission denied"
    return f"cannot be written: the folder {existing} is not writable ({why})"
