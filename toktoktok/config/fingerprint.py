"""The settings that shape the result, and their fingerprint.

``effective_settings(cfg)`` is the JSON-able view of every ``Config`` field
but ``path``, ``verbose``, ``threads``, ``engine``, ``ray`` and ``warnings``
(they change how a run goes, not what it makes); ``config_fingerprint(cfg)``
is the sha256 of its canonical JSON, recorded in ``NAME.meta.json``.

    >>> _jsonable((Path("/a"), {"b": (1, 2)}))
    ['/a', {'b': [1, 2]}]
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import fields, is_dataclass
from pathlib import Path
from typing import Any

from toktoktok.uris import RemotePath

from .schema import Config


def _jsonable(value: Any) -> Any:
    """Dataclasses -> dicts, Paths (and URIs, without their query) -> strings,
    tuples -> lists, recursively."""
    if is_dataclass(value) and not isinstance(value, type):  # a field marked omit_none is left out while None
        return {f.name: _jsonable(getattr(value, f.name)) for f in fields(value)
                if not (f.metadata.get("omit_none") and getattr(value, f.name) is None)}
    if isinstance(value, (Path, RemotePath)):
        return str(value)
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    return value


_NOT_SETTINGS = ("path", "verbose", "threads", "warnings", "engine", "ray")  # how a run goes, not what it makes


def effective_settings(cfg: Config) -> dict[str, Any]:
    """The settings that shape the result, as plain JSON values.

    Every ``Config`` field except ``path``, ``verbose``, ``threads``, ``engine``,
    ``ray`` and ``warnings`` (they change how a run goes, not what it makes); paths are
    absolute strings, the pattern is ``{name, tiktoken, python, cut_at_safe_places, cut_at_spaces}``.
    """
    settings = _jsonable(cfg)
    for key in _NOT_SETTINGS:
        settings.pop(key)
    return settings


def config_fingerprint(cfg: Config) -> str:
    """sha256 hex of the canonical JSON (sorted keys, no spaces) of ``effective_settings``."""
    canonical = json.dumps(effective_settings(cfg), sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(canonical.encode("ascii")).hexdigest()
