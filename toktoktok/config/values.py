"""The value checkers of the YAML: each returns the checked value or raises ``ConfigError``.

Types and ranges (``bool`` never passes for an integer or a number; integer
keys never accept floats), unknown keys (with a ``did you mean 'merges'?``
or "it belongs in a source" hint), and paths made absolute: ``~`` expanded,
a relative path taken from the config file's folder (never the current
one), ``Path.resolve()``d; a URI is a ``file://`` path or, for a source, a
``pyarrow.fs`` one. A path that must exist is checked to exist and be
readable; nothing here reads a file's contents.

    >>> from toktoktok.config_errors import Context
    >>> integer(Context("c.yaml", Path(".")), ("seed",), 3, 0, 10)
    3
"""

from __future__ import annotations

import math
import os
import re
import stat
from pathlib import Path
from typing import Any

from toktoktok.config_errors import Context, KeyPath, describe, did_you_mean
from toktoktok.uris import RemotePath

from .schema import SOURCE_KEYS

_MISPLACED = {
    "phase": ({"name", "merges", "sources"}, "it belongs in a phase, under phases:"),
    "source": (set(SOURCE_KEYS), "it belongs in a source, under sources:"),
}


def is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def check_keys(ctx: Context, path: KeyPath, mapping: dict[str, Any], allowed: tuple[str, ...]) -> None:
    """Refuse unknown keys, with a did-you-mean or a where-it-belongs hint.

    ``mergez`` in a phase -> ``phases[0].mergez is not a known key (did you mean 'merges'?)``.
    """
    for key in mapping:
        if key in allowed:
            continue
        hint = did_you_mean(key, allowed)
        if not hint:
            belongs = [where for keys, where in _MISPLACED.values() if key in keys and not keys & set(allowed)]
            hint = belongs[0] if belongs else "known keys: " + ", ".join(allowed)
        raise ctx.error(path + (key,), f"is not a known key ({hint})")


def require(ctx: Context, mapping: dict[str, Any], path: KeyPath, key: str) -> Any:
    if key not in mapping:
        raise ctx.error(path + (key,), "is required")
    return mapping[key]


def integer(ctx: Context, path: KeyPath, value: Any, low: int, high: int | None = None) -> int:
    """An integer in [low, high] (bools and floats refused)."""
    if not is_int(value) or value < low:
        raise ctx.error(path, f"must be an integer >= {low}, got {describe(value)}")
    if high is not None and value > high:
        raise ctx.error(path, f"must be an integer <= {high}, got {describe(value)}{_why_bound(path)}")
    return value


def optional_integer(ctx: Context, path: KeyPath, value: Any, low: int, high: int) -> int | None:
    """null, or an integer in [low, high]."""
    if value is None:
        return None
    if not is_int(value) or value < low:
        raise ctx.error(path, f"must be an integer >= {low} or null, got {describe(value)}")
    if value > high:
        raise ctx.error(path, f"must be an integer <= {high:_} or null, got {describe(value)}{_why_bound(path)}")
    return value


def _why_bound(path: KeyPath) -> str:
    """What an upper bound protects, said after a value above it."""
    reasons = {
        "pad_to_multiple_of": "each padding token is a special token that export, load and encode pay for",
        "threads": "each thread is a worker process",
        "working_set_mb": "that is 4 TiB of memory",
    }
    reason = reasons.get(str(path[-1]))
    return f" ({reason})" if reason else ""


def number(ctx: Context, path: KeyPath, value: Any, wanted: str, ok: Any) -> float:
    """A finite int or float for which ``ok(value)`` holds; returned as float."""
    if not is_number(value) or not math.isfinite(value) or not ok(value):
        raise ctx.error(path, f"must be {wanted}, got {describe(value)}")
    return float(value)


def boolean(ctx: Context, path: KeyPath, value: Any) -> bool:
    if not isinstance(value, bool):
        raise ctx.error(path, f"must be true or false, got {describe(value)}")
    return value


def string(ctx: Context, path: KeyPath, value: Any, what: str = "a non-empty string") -> str:
    if not isinstance(value, str) or not value.strip():
        raise ctx.error(path, f"must be {what}, got {describe(value)}")
    return value


def mapping(ctx: Context, path: KeyPath, value: Any, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ctx.error(path, f"must be {what}, got {describe(value)}")
    return value


def sequence(ctx: Context, path: KeyPath, value: Any, what: str, non_empty: bool = False) -> list[Any]:
    if not isinstance(value, list) or (non_empty and not value):
        raise ctx.error(path, f"must be {what}, got {describe(value)}")
    return value


def string_list(ctx: Context, path: KeyPath, value: Any) -> tuple[str, ...]:
    """A list of non-empty strings (null = empty), e.g. include/exclude globs."""
    if value is None:
        return ()
    items = sequence(ctx, path, value, "a list of strings")
    return tuple(string(ctx, path + (i,), item) for i, item in enumerate(items))


_URI = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")


def path_value(ctx: Context, path: KeyPath, value: Any, remote: bool = False) -> Path:
    """A path string made absolute against the config's folder (``~`` expanded),
    or a URI (``uri_path``), never made relative to anything. ``remote``: a
    ``pyarrow.fs`` URI other than ``file://`` is allowed (a source's)."""
    text = string(ctx, path, value, "a path (a non-empty string)")
    if _URI.match(text):
        found = uri_path(ctx, path, text)
        if isinstance(found, RemotePath) and not remote:
            raise ctx.error(path, f"is a {found.scheme}:// URI: only sources are read through pyarrow.fs; "
                            "this must be a local path (or a file:// URI)")
        return found  # type: ignore[return-value]
    try:
        candidate = Path(text).expanduser()
        return (ctx.base_dir / candidate).resolve()  # an absolute candidate wins the `/`
    except (OSError, ValueError, RuntimeError) as exc:
        raise ctx.error(path, f"is not a usable path: {exc}") from None


def uri_path(ctx: Context, path: KeyPath, uri: str) -> Path | RemotePath:
    """The file or folder a URI names (percent-encoded, as ``Path.as_uri()``
    writes it). A ``file://`` URI is a local (or shared) path, absolute by
    construction; any other scheme is read through ``pyarrow.fs``
    (``toktoktok.uris.RemotePath``: ``s3://``, ``gs://``, ``hdfs://``), its
    existence checked by the caller as a path's is (``existing``).

        >>> uri_path(Context("c.yaml", Path(".")), ("file",), "file:///data/a%20b.txt")
        PosixPath('/data/a b.txt')
        >>> uri_path(Context("c.yaml", Path(".")), ("file",), "file://localhost/data/a.txt")
        PosixPath('/data/a.txt')
        >>> uri_path(Context("c.yaml", Path(".")), ("file",), "s3://bucket/data/?region=eu-west-1")
        RemotePath('s3://bucket/data')
    """
    from pyarrow import fs

    scheme, _, rest = uri.partition("://")
    if scheme.lower() != "file":
        if not rest.partition("?")[0].partition("/")[0]:
            raise ctx.error(path, f"is a {scheme}:// URI without a bucket or host")
        return RemotePath(uri)
    host = rest.partition("/")[0]
    if host.lower() == "localhost":  # RFC 8089: the same file as file:///path, which pyarrow alone accepts
        uri, host = f"{scheme}:///{rest.partition('/')[2]}", ""
    if host:
        raise ctx.error(path, f"names the host {host!r}: a file:// URI is a file on this machine, written "
                        "file:///path (no host) or file://localhost/path; mount a shared folder and give its path")
    try:
        filesystem, inner = fs.FileSystem.from_uri(uri)
    except Exception as exc:  # noqa: BLE001 - pyarrow's ArrowInvalid and friends: one message
        raise ctx.error(path, f"is not a usable URI ({' '.join(str(exc).split())}); write it percent-encoded, "
                        "as Path.as_uri() does") from None
    if not isinstance(filesystem, fs.LocalFileSystem):
        raise ctx.error(path, "is not a local file:// URI")
    return Path(inner)


def choice(ctx: Context, path: KeyPath, value: Any, choices: tuple[str, ...]) -> str:
    if value not in choices or not isinstance(value, str):
        close = did_you_mean(value, choices) if isinstance(value, str) else ""
        hint = f" ({close})" if close else ""
        raise ctx.error(path, f"must be one of {', '.join(choices)}, got {describe(value)}{hint}")
    return value


_SPECIAL_KINDS = ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"),
                  (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"))


def special_kind(path: Path | str) -> str | None:
    """What a path that exists but is neither a regular file nor a folder is (links
    followed), e.g. ``"a FIFO (named pipe)"``; None for anything else. Such a file
    is refused where a file is read whole: reading a FIFO waits for a writer.

        >>> special_kind("/dev/null"), special_kind("/")
        ('a character device', None)
    """
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return None
    return next((name for test, name in _SPECIAL_KINDS if test(mode)), None)


def existing(ctx: Context, path: KeyPath, value: Any, want_dir: bool, remote: bool = False) -> Path:
    """A path that exists, is readable and is a directory (want_dir) or a file
    (``remote``: or a ``pyarrow.fs`` URI, asked the same through its filesystem)."""
    resolved = path_value(ctx, path, value, remote)
    kind, other = ("directory", "file") if want_dir else ("file", "directory")
    if isinstance(resolved, RemotePath):
        return _existing_remote(ctx, path, resolved, want_dir)
    if not resolved.exists():
        raise ctx.error(path, f"does not exist: {resolved}")
    if (special := special_kind(resolved)) is not None:
        raise ctx.error(path, f"is not a regular file but {special}: {resolved}")
    if resolved.is_dir() != want_dir:
        key = "path" if not want_dir else "file"
        raise ctx.error(path, f"is a {other}, not a {kind}: {resolved} (use `{key}:` for a {other})")
    if not os.access(resolved, os.R_OK | (os.X_OK if want_dir else 0)):
        raise ctx.error(path, f"is not readable: {resolved}")
    return resolved


def _existing_remote(ctx: Context, path: KeyPath, resolved: RemotePath, want_dir: bool) -> Any:
    """``existing`` for a ``pyarrow.fs`` URI: a folder is a prefix holding objects."""
    try:
        exists, is_dir = resolved.exists(), resolved.is_dir()
    except Exception as exc:  # noqa: BLE001 - pyarrow's OSError, ArrowInvalid (a missing driver): one message
        raise ctx.error(path, f"cannot be reached: {resolved}: {' '.join(str(exc).split())}") from None
    if not exists:
        raise ctx.error(path, f"does not exist: {resolved}")
    if is_dir != want_dir:
        kind, other = ("directory", "file") if want_dir else ("file", "directory")
        key = "path" if not want_dir else "file"
        raise ctx.error(path, f"is a {other}, not a {kind}: {resolved} (use `{key}:` for a {other})")
    return resolved
