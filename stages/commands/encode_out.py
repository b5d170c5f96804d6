"""``toktok encode``'s ``--out`` folder: one set of token files, written by one run at a time.

Its files' names, the writer of each split (``split_writers``), and:

- Locked: ``OUT/.encode.lock`` is held for the whole run (``workdir.locks``);
  a second encode into the folder fails at once naming it and its holder.
- Checked: the folder is new, empty, or an earlier encode's output (its file
  names, temporary files of a killed run, the lock); anything else is
  refused rather than overwritten.
- One set: the earlier run's files are all deleted, ``index.json`` first,
  just before this run puts its first file in place (``clear``). A kill at
  any point leaves the earlier set, whole or without its ``index.json``
  (deleted first), or part of the new set without one: never a new file
  beside an earlier run's.
"""

from __future__ import annotations

import re
from pathlib import Path
from types import TracebackType
from typing import Any

import numpy as np

from toktoktok.errors import UsageError
from toktoktok.token_files import FlatWriter, ShardWriter

from ..workdir.locks import holding

INDEX = "index.json"
LOCK = ".encode.lock"
SHARD_NAME = "shard-{:05d}.npy"
VAL_SHARD_NAME = "val-shard-{:05d}.npy"
BIN_NAMES = {"train": "train.bin", "val": "val.bin"}
MEGATRON_PREFIXES = {"train": "train_text_document", "val": "val_text_document"}
NANOGPT_META = "meta.pkl"  # nanoGPT's train.py reads its vocab_size
OUTPUT = re.compile(r"(val-)?shard-\d{5,}\.npy|(train|val)\.bin|(train|val)_text_document\.(bin|idx)|meta\.pkl")
_TEMP = re.compile(r"\..+\.[0-9a-f]{12}\.tmp")


class OutFolder:
    """The output folder of one run, used as ``with OutFolder(path) as out: ...``.

    Entering makes the folder, checks it, takes its lock and deletes the
    temporary files a killed run left; ``clear`` (the writers' ``before_rename``)
    deletes the earlier set once; ``removed`` names the earlier files deleted.
    """

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)
        self.cleared = False
        self.earlier: list[str] = []
        self._lock = holding(self.folder / LOCK, f"--out {self.folder}: another `toktok encode` is writing it")

    def __enter__(self) -> OutFolder:
        folder = self.folder
        if folder.exists() and not folder.is_dir():
            raise UsageError(f"--out {folder}: exists and is not a folder")
        folder.mkdir(parents=True, exist_ok=True)
        foreign = sorted(e.name for e in folder.iterdir() if not (e.is_file() and _ours(e.name)))
        if foreign:
            shown = ", ".join(foreign[:3]) + (", ..." if len(foreign) > 3 else "")
            raise UsageError(f"--out {folder}: holds files that are not `toktok encode` output ({shown}); "
                             f"choose a new or empty folder")
        self._lock.__enter__()
        try:
            for e in folder.iterdir():
                if _TEMP.fullmatch(e.name):  # a killed run's: no other run writes here while we hold the lock
                    e.unlink(missing_ok=True)
        except BaseException:
            self._lock.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self._lock.__exit__(kind, exc, tb)

    def clear(self) -> None:
        """Delete the earlier set (``index.json`` first), once, before this run's first file goes in place."""
        if self.cleared:
            return
        (self.folder / INDEX).unlink(missing_ok=True)
        names = sorted(e.name for e in self.folder.iterdir() if OUTPUT.fullmatch(e.name))
        for name in sorted(names, key=lambda n: not n.endswith((".idx", ".pkl"))):  # what describes data goes first
            (self.folder / name).unlink(missing_ok=True)
        self.earlier, self.cleared = names, True

    def removed(self, written: set[str]) -> list[str]:
        """The earlier files deleted that this run did not write anew (more shards, another format)."""
        return [name for name in self.earlier if name not in written]

    def state(self) -> str:
        """What a run stopped now leaves in the folder, for its message."""
        if self.cleared:
            return f"{self.folder} is unfinished (it has no {INDEX}): run the command again"
        return f"nothing was put in {self.folder}: what it held is kept as it was"


def _ours(name: str) -> bool:
    return name in (INDEX, LOCK) or bool(OUTPUT.fullmatch(name) or _TEMP.fullmatch(name))


def split_writers(fmt: str, out: OutFolder, dtype: np.dtype, shard_tokens: int, val: bool) -> dict[str, Any]:
    """The writer of each split of a format (val only when there is a split, or for bin);
    each clears the earlier set before its first file goes in place."""
    if fmt == "npy":
        writers = {"train": ShardWriter(out.folder, dtype, shard_tokens, SHARD_NAME, out.clear)}
        if val:
            writers["val"] = ShardWriter(out.folder, dtype, shard_tokens, VAL_SHARD_NAME, out.clear)
        return writers
    names = BIN_NAMES if fmt == "bin" else {k: f"{v}.bin" for k, v in MEGATRON_PREFIXES.items()}
    writers = {}
    try:
        for split in ("train", "val"):
            if split == "train" or val or fmt == "bin":
                writers[split] = FlatWriter(out.folder / names[split], dtype, out.clear)
    except BaseException:
        for w in writers.values():
            w.abort()
        raise
    return writers
