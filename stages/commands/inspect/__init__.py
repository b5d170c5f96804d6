"""``toktok inspect PATH``: a readable summary of any artifact or output.

What PATH may be (recognised by name, then by the Arrow schema: ``kind_of``),
what is shown of it, and the module that shows it:

- an ingest chunk file ``chunk-NNNNN.arrow`` or phase folder (its chunks
  summed): the most frequent pieces with their counts and share, the totals;
  a held-out file ``heldout.arrow``: documents, bytes, the first documents
  (``ingest``);
- a merges file ``merges.arrow`` or a train phase folder: its phase, its rank
  range, the first and last merges with their counts and the tokens they join
  (``merges``);
- a ``.tiktoken`` file, with its ``NAME.meta.json`` when present: the
  vocabulary's layout (single bytes, hardcoded merges or a warm start's base,
  each phase, special tokens) and the longest tokens (``vocabulary``);
- a training report ``NAME.report.json``: each of its tables (``report_file``).
A file unlike its record (manifest, companion) is shown with a warning
(``InspectWarning``); a ``.tiktoken`` unlike its companion is refused. The options (``--top``, ``--search``, ``--id``) are in docs/cli.md. Tokens are
shown as double-quoted, escaped text (``shown``), so spaces and line breaks
are visible; ``--search`` reads the same escapes back. Every table is a polars
DataFrame printed without shape and dtypes; counts are plain integers (no
thousands separators), so they can be grepped. A path of a kind not listed
above, or an option that does not apply to it (``--id`` on a chunk file), is a
usage error (exit 2, ``UsageError``).
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import NoReturn

import pyarrow as pa

from toktoktok.errors import MissingInput, UsageError

from ...workdir import artifacts
from .ingest import inspect_chunks, inspect_heldout
from .merges import inspect_merges
from .report_file import inspect_report
from .shown import parse_search
from .vocabulary import inspect_tiktoken

DEFAULT_TOP = 20


class InspectWarning(UserWarning):
    """A file inspected that is not what its manifest or companion records.

    A warning, not a refusal: inspect only looks, and a damaged or replaced
    file is often what a user inspects to see (the stage commands refuse it).
    A ``.tiktoken`` unlike its companion is refused instead: the companion's
    special tokens and phases would be shown as the file's own.
    """


def _warn_unlike_record(path: Path, kind: str) -> None:
    """Warn for each file ``path`` stands for that differs from its record."""
    if kind == "report":
        reason = _report_unlike_companion(path)
        reasons = [reason] if reason else []
    else:
        files = sorted(path.glob("chunk-*.arrow")) if kind == "chunks" and path.is_dir() else \
            [path / "merges.arrow"] if path.is_dir() else [path]
        reasons = [r for f in files if (r := artifacts.unlike_manifest(f))]
    for reason in reasons:
        warnings.warn(f"{reason}; shown as found (`toktok run` makes it anew)", InspectWarning, stacklevel=3)


def _report_unlike_companion(path: Path) -> str | None:
    """Why a ``NAME.report.json`` is not the one its ``NAME.meta.json`` records, or None."""
    companion = path.with_name(path.name.removesuffix(".report.json") + ".meta.json")
    try:
        members = json.loads(companion.read_text(encoding="utf-8")).get("members")
    except (OSError, ValueError, AttributeError):
        return None  # no companion to compare with (its readers say what is wrong with it)
    if not isinstance(members, dict):
        return None
    if path.name not in members:
        return f"{path} is not in the set its companion {companion} records"
    if artifacts.file_digest(path) != members[path.name]:
        return f"{path} does not match the digest its companion {companion} records (another export's, or changed)"
    return None


def _check_top(top: int) -> int:
    if top < 1:
        raise UsageError(f"--top must be at least 1, got {top}")
    return top


def refuse(message: str) -> NoReturn:
    """A usage error (exit 2 on the command line)."""
    raise UsageError(message)


def config_output(config: Path) -> Path:
    """The ``.tiktoken`` a config writes (its ``output:``); it must exist."""
    from toktoktok.config import load_config

    cfg = load_config(config)
    if not cfg.output.is_file():
        raise MissingInput(f"{cfg.output} does not exist yet: run `toktok run -c {config}` first")
    return cfg.output


def path_or_output(path: Path | None, config: Path | None, what: str) -> Path:
    """``path``, or the output of ``config``: exactly one of them must be given."""
    if (path is None) == (config is None):
        refuse(f"give {what} or -c CONFIG (one of them)")
    return path if path is not None else config_output(config)


def kind_of(path: Path) -> str:
    """chunks | heldout | merges | tiktoken | report; UsageError for anything else."""
    name = path.name
    if path.is_dir():
        if list(path.glob("chunk-*.arrow")):
            return "chunks"
        if (path / "merges.arrow").is_file():
            return "merges"
        raise UsageError(f"{path}: a folder that is neither an ingest phase folder (chunk-*.arrow) nor a train "
                          f"phase folder (merges.arrow); give a file to inspect")
    if not path.is_file():
        raise UsageError(f"{path}: no such file or folder")
    if name.endswith((".tiktoken", ".tiktoken.gz")):
        return "tiktoken"
    if name.endswith(".report.json"):
        return "report"
    if name.endswith(".arrow"):
        try:
            columns = set(artifacts.read_ipc(path).schema.names)
        except (OSError, pa.ArrowException) as exc:
            raise UsageError(f"{path}: not an Arrow IPC file ({exc})") from exc
        if {"piece", "count"} <= columns:
            return "chunks"
        if {"rank", "left", "right", "bytes", "count"} <= columns:
            return "merges"
        if columns == {"text"}:
            return "heldout"
        raise UsageError(f"{path}: an Arrow file with columns {sorted(columns)}, not a toktoktok artifact")
    raise UsageError(f"{path}: unknown kind of file: expected a chunk, held-out or merges .arrow file, a "
                      f".tiktoken file, or a .report.json")


def inspect_path(path: Path, *, top: int = DEFAULT_TOP, search: str | None = None, token_id: int | None = None) -> str:
    """The printed summary of ``path`` (see the module docstring)."""
    path = Path(path)
    top = _check_top(top)
    if path.name.endswith(".meta.json") and path.is_file():  # the companion stands for its .tiktoken
        name = path.name[: -len(".meta.json")]
        beside = [path.with_name(name + s) for s in (".tiktoken", ".tiktoken.gz") if path.with_name(name + s).is_file()]
        if not beside:
            raise UsageError(f"{path}: a companion file without its {name}.tiktoken; inspect the .tiktoken")
        path = beside[0]
    kind = kind_of(path)
    if kind != "tiktoken":
        _warn_unlike_record(path, kind)
    needle = parse_search(search) if search is not None else None
    if token_id is not None and kind not in ("tiktoken", "merges"):
        raise UsageError(f"--id applies to a .tiktoken or a merges file, not to a {kind} file")
    if needle is not None and kind in ("heldout", "report"):
        raise UsageError(f"--search applies to chunk, merges and .tiktoken files, not to a {kind} file")
    if kind == "chunks":
        return inspect_chunks(path, top=top, needle=needle)
    if kind == "heldout":
        return inspect_heldout(path, top=top)
    if kind == "merges":
        return inspect_merges(path, top=top, needle=needle, token_id=token_id)
    if kind == "tiktoken":
        return inspect_tiktoken(path, top=top, needle=needle, token_id=token_id)
    return inspect_report(path)
