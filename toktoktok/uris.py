"""Sources named by a URI that ``pyarrow.fs`` reads: ``s3://``, ``gs://``, ``hdfs://``.

A ``file://`` URI in a config is a local path (``config.values.uri_path``); any other
becomes a ``RemotePath``: the few things ``sources`` and the engines ask of a
path (its name, ``stat``, ``is_file``, ``is_dir``, ``open``, a folder's files,
``/``), answered through the ``pyarrow.fs.FileSystem`` that
``FileSystem.from_uri`` gives for the URI's scheme, host and query. Nothing is
read from the network until one of them is asked: loading a config never
waits on a bucket.

Credentials are never in a URI or a config: the filesystem finds them as
pyarrow does (for S3: ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``,
``AWS_SESSION_TOKEN``, ``AWS_PROFILE`` and ``~/.aws``, an instance role); the
query keeps pyarrow's other options (``?region=...&endpoint_override=...``)
and is left out of the path's text (manifests, messages).

A ``RemotePath`` holds only strings, so it pickles to a Ray task or a worker
process, which builds its own filesystem once (``filesystem``, cached per process).

    >>> p = RemotePath("s3://bucket/corpus/a%20b.txt?region=eu-west-1")
    >>> str(p), p.name, p.suffix, p.key
    ('s3://bucket/corpus/a%20b.txt', 'a b.txt', '.txt', 'corpus/a b.txt')
    >>> str(RemotePath("s3://bucket/corpus/") / "x/y.jsonl"), p == RemotePath(str(p) + "?region=eu-west-1")
    ('s3://bucket/corpus/x/y.jsonl', True)
"""

from __future__ import annotations

import errno
import functools
import os
from pathlib import PurePosixPath
from typing import Any, NamedTuple
from urllib.parse import quote, unquote


class RemoteStat(NamedTuple):
    """What ``RemotePath.stat`` gives: the fields of ``os.stat_result`` that are used."""

    st_size: int
    st_mtime_ns: int

    @property
    def st_mtime(self) -> float:
        return self.st_mtime_ns / 1e9


@functools.lru_cache(maxsize=64)
def filesystem(root: str) -> tuple[Any, str]:
    """The filesystem for ``scheme://host/?query`` and the path it gives the root
    (``"bucket"`` for S3, ``"/"`` for HDFS): one per root and process."""
    from pyarrow import fs

    return fs.FileSystem.from_uri(root)


class RemotePath:
    """A file or folder under a ``pyarrow.fs`` URI (see the module's docstring)."""

    __slots__ = ("scheme", "host", "key", "query")

    def __init__(self, uri: str) -> None:
        base, _, self.query = uri.partition("?")
        scheme, _, rest = base.partition("://")
        self.scheme = scheme.lower()
        self.host, _, key = rest.partition("/")
        self.key = unquote(key).strip("/")

    # ---------------------------------------------------------------- naming

    def __str__(self) -> str:
        return f"{self.scheme}://{self.host}/{quote(self.key)}"

    def __repr__(self) -> str:
        return f"RemotePath({str(self)!r})"

    def _ident(self) -> tuple[str, str, str, str]:
        return self.scheme, self.host, self.key, self.query

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RemotePath) and self._ident() == other._ident()

    def __hash__(self) -> int:
        return hash(self._ident())

    def __lt__(self, other: RemotePath) -> bool:
        return self._ident() < other._ident()

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return RemotePath, (self.uri,)

    @property
    def uri(self) -> str:
        """The URI, with its query."""
        return str(self) + (f"?{self.query}" if self.query else "")

    @property
    def name(self) -> str:
        return self.key.rpartition("/")[2]

    @property
    def suffix(self) -> str:
        return PurePosixPath(self.name).suffix

    @property
    def suffixes(self) -> list[str]:
        return PurePosixPath(self.name).suffixes

    def __truediv__(self, rel: str) -> RemotePath:
        child = RemotePath(self.uri)
        child.key = "/".join(filter(None, (self.key, str(rel).strip("/"))))
        return child

    def relative_to(self, folder: RemotePath) -> PurePosixPath:
        if folder.key and not self.key.startswith(folder.key + "/"):
            raise ValueError(f"{self} is not under {folder}")
        return PurePosixPath(self.key[len(folder.key) + 1:] if folder.key else self.key)

    def as_posix(self) -> str:
        return str(self)

    def as_uri(self) -> str:
        return str(self)

    def resolve(self) -> RemotePath:
        return self

    def expanduser(self) -> RemotePath:
        return self

    # -------------------------------------------------------------- reading

    def inner(self) -> tuple[Any, str]:
        """The filesystem and this path as the filesystem names it."""
        fs, root = filesystem(f"{self.scheme}://{self.host}/" + (f"?{self.query}" if self.query else ""))
        root = root.rstrip("/")
        return fs, f"{root}/{self.key}" if self.key else (root or "/")

    def _info(self) -> Any:
        fs, path = self.inner()
        return fs.get_file_info(path)

    def stat(self) -> RemoteStat:
        """Size and modification time (``FileInfo``); FileNotFoundError if absent."""
        from pyarrow import fs

        info = self._info()
        if info.type == fs.FileType.NotFound:
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), str(self))
        return RemoteStat(int(info.size or 0), int(info.mtime_ns or 0))

    def exists(self) -> bool:
        from pyarrow import fs

        return self._info().type != fs.FileType.NotFound

    def is_file(self) -> bool:
        from pyarrow import fs

        return self._info().type == fs.FileType.File

    def is_dir(self) -> bool:
        """A folder, or (object stores have no folders) a prefix that holds objects."""
        from pyarrow import fs

        return self._info().type == fs.FileType.Directory

    def open(self, mode: str = "rb") -> Any:
        """A file object to read (``pyarrow``'s: ``read``, ``seek``, ``tell``, ``close``)."""
        if mode != "rb":
            raise ValueError(f"{self}: only read ('rb'), got {mode!r}")
        fs, path = self.inner()
        return fs.open_input_file(path)

    def walk(self) -> list[RemotePath]:
        """Every file under this folder (any depth), in no particular order."""
        from pyarrow import fs

        filesystem_, path = self.inner()
        found = []
        for info in filesystem_.get_file_info(fs.FileSelector(path, recursive=True)):
            if info.type == fs.FileType.File:
                rel = info.path[len(path.rstrip("/")) + 1:]
                found.append(self / rel)
        return found


def is_remote(path: object) -> bool:
    """Whether ``path`` is read through ``pyarrow.fs`` (not the local file system)."""
    return isinstance(path, RemotePath)
