"""Artifacts on disk: Arrow IPC files (zstd) and one JSON manifest per stage folder.

Stages talk only through these files. A stage folder is complete when its
``manifest.json`` exists: the manifest is written last, and a stage about to
redo its work deletes the old manifest first, so a folder interrupted half
way is never mistaken for a finished one (``folders.StageFolder`` does both).
The manifest's ``key`` is a digest of everything the stage's result depends
on (settings and its inputs' fingerprints, ``keys``): a stage whose key did
not change is not redone. This module reads and writes the files; it knows
no stage.

    >>> key_of({"b": 1, "a": [1, 2]}) == key_of({"a": [1, 2], "b": 1})
    True
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import pyarrow as pa

if "ARROW_DEFAULT_MEMORY_POOL" not in os.environ:
    # pyarrow's default pool (mimalloc) keeps what it freed: ingest peaks higher
    # with it than with the system allocator, whose freed memory malloc_trim hands back.
    # The CLI sets the variable before pyarrow is imported, which is better
    # still (toktoktok.memory.configure_allocators); this is for other callers.
    pa.set_memory_pool(pa.system_memory_pool())

from toktoktok.atomic import atomic_path, atomic_write_bytes
from toktoktok.errors import DamagedArtifact
from toktoktok.loading import file_sha256

MANIFEST = "manifest.json"
FORMAT = "toktoktok-artifacts/1"


def key_of(obj: Any) -> str:
    """A sha256 digest of ``obj``'s canonical JSON (sorted keys, no spaces)."""
    text = json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def file_digest(path: Path) -> str:
    """sha256 of a file's bytes (``toktoktok.loading.file_sha256``)."""
    return file_sha256(path)


_CHECKED: dict[tuple[str, int, int, int], str] = {}  # (path, inode, size, mtime) -> sha256 seen in this process


def _identity(path: Path) -> tuple[str, int, int, int]:
    st = path.stat()
    return (str(path), st.st_ino, st.st_size, st.st_mtime_ns)


def checked_digest(path: Path) -> str:
    """``file_digest``, computed once per file per process (a file rewritten
    since has another inode or mtime, and is read again)."""
    key = _identity(path)
    if key not in _CHECKED:
        _CHECKED[key] = file_digest(path)
    return _CHECKED[key]


def damaged_output(folder: Path, manifest: dict[str, Any]) -> str | None:
    """Why an output the manifest lists is not as it was written (missing, other
    size, other sha256), or None when all are intact.

    This is what makes an artifact safe to use: a flipped byte in a chunk or
    merges file is caught here, before its values reach a numba kernel. Each
    file is hashed once per process (``checked_digest``), since hashing is
    the costly part of a check.
    """
    for out in manifest.get("outputs", []):
        path = Path(out["path"]) if "path" in out else folder / out["name"]
        try:
            size = path.stat().st_size
        except OSError:
            return f"{path} is missing"
        if size != out.get("bytes", size):
            return f"{path} has {size} bytes, its manifest says {out['bytes']}"
        if checked_digest(path) != out.get("sha256"):
            return f"{path} does not match the sha256 its manifest records (damaged or changed)"
    return None


def unlike_manifest(path: Path) -> str | None:
    """Why a file of a finished stage folder is not what the folder's manifest
    records (not listed, other size, other sha256), or None: no manifest, or a match.

    For readers that show a file rather than use it (``toktok inspect``); a stage
    uses ``damaged_output``, which stops at the first damaged file.
    """
    manifest = read_manifest(path.parent)
    if manifest is None:
        return None
    where = path.parent / MANIFEST
    entry = next((o for o in manifest.get("outputs", []) if o.get("name") == path.name), None)
    if entry is None:
        return f"{path} is not listed in {where}: not written by the stage that finished there"
    size = path.stat().st_size
    if size != entry.get("bytes", size):
        return f"{path} has {size} bytes, {where} records {entry['bytes']} (damaged or changed)"
    if file_digest(path) != entry.get("sha256"):
        return f"{path} does not match the sha256 {where} records (damaged or changed)"
    return None


# rows a record batch: Arrow compresses (and reads back) the batches of a file on
# its threads, one buffer a thread, so a large table in one batch took the
# longest buffer's time
BATCH_ROWS = 1 << 17


def write_ipc(path: Path, table: pa.Table) -> dict[str, Any]:
    """Write ``table`` as a zstd-compressed Arrow IPC file, atomically.

    Returns the output's entry for a manifest: name, rows, bytes, sha256.
    """
    options = pa.ipc.IpcWriteOptions(compression="zstd")
    with atomic_path(path) as tmp:
        with pa.OSFile(str(tmp), "wb") as sink, pa.ipc.new_file(sink, table.schema, options=options) as w:
            w.write_table(table, max_chunksize=BATCH_ROWS)
    return {"name": path.name, "rows": table.num_rows, "bytes": path.stat().st_size, "sha256": checked_digest(path)}


def read_ipc(path: Path) -> pa.Table:
    """Read a whole Arrow IPC file (memory-mapped, so the OS pages it in) and
    validate it fully (offsets within their buffers), so a damaged file is a
    ``DamagedArtifact`` naming it, never a crash further on."""
    try:
        with pa.memory_map(str(path)) as source:
            table = pa.ipc.open_file(source).read_all()
        table.validate(full=True)
    except (pa.ArrowException, OSError, ValueError) as exc:
        if isinstance(exc, FileNotFoundError):
            raise
        raise DamagedArtifact(f"{path} is not a readable Arrow file ({' '.join(str(exc).split())})") from exc
    return table


def read_manifest(folder: Path) -> dict[str, Any] | None:
    """The folder's manifest, or None if the stage never finished there."""
    path = folder / MANIFEST
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None


def write_manifest(folder: Path, manifest: dict[str, Any]) -> str:
    """Write ``folder``'s manifest atomically; returns its text (what a later
    ``read_manifest`` parses)."""
    text = manifest_text(manifest) + "\n"
    atomic_write_bytes(folder / MANIFEST, text.encode())
    return text


def manifest_text(value: Any, depth: int = 0) -> str:
    """JSON indented by two spaces, with each item of a list of objects or lists
    on one line of its own: json's indenting encoder is written in Python, and a
    manifest listing 70,000 input files spent most of a second in it.

        >>> print(manifest_text({"stage": "ingest", "inputs": [{"path": "a.txt", "size": 3}], "n": []}))
        {
          "stage": "ingest",
          "inputs": [
            {"path": "a.txt", "size": 3}
          ],
          "n": []
        }
    """
    pad, inner = "  " * depth, "  " * (depth + 1)
    if isinstance(value, dict) and value:
        items = (f"{inner}{json.dumps(str(k))}: {manifest_text(v, depth + 1)}" for k, v in value.items())
        return "{\n" + ",\n".join(items) + f"\n{pad}}}"
    if isinstance(value, (list, tuple)) and any(issubclass(t, (dict, list, tuple)) for t in set(map(type, value))):
        # the items' types found in C: a list a field of 70,000 input files, asked item by item, took 0.1 s
        return "[\n" + ",\n".join(inner + _ONE_LINE.encode(v) for v in value) + f"\n{pad}]"
    return _ONE_LINE.encode(value)


_ONE_LINE = json.JSONEncoder(default=str)  # one encoder for all: ``json.dumps`` with ``default`` makes one a call


def outputs_key(manifest: dict[str, Any]) -> str:
    """A digest of a finished stage's outputs: what the next stage depends on."""
    return key_of([(o["name"], o["sha256"]) for o in manifest.get("outputs", [])])
