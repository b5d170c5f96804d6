"""The configuration schema (docs/configuration.md): typed, validated before any work starts.

``load_config(path)`` reads a YAML file and returns a frozen ``Config``, or
raises ``ConfigError`` with one line that names the file, the YAML line and
the key path, e.g.::

    config.yaml line 7: phases[1].merges must be an integer >= 0, got 'abc' (a string)

The CLI maps ``ConfigError`` to exit code 2 (docs/cli.md).

Design
------
*Schema here, messages apart.* This module holds the schema: the
dataclasses, the keys, types, defaults and bounds, and the checks that build
a ``Config``. ``toktoktok.config_errors`` reads the YAML safely, keeping the
line of every key, and words every error (its docstring says how).

*Validate, then build.* Each mapping's keys are checked first (an unknown key
gets a ``did you mean 'merges'?`` hint, or "it belongs in a source"), so a
typo is reported as a typo rather than as a missing required key. Then every
value is type- and range-checked; ``bool`` never passes for an integer or a
number. The first problem found is raised.

Decisions
---------
- ``output`` must end with ``.tiktoken`` (and have a name before it): every
  artifact name (``NAME.meta.json``, ``NAME.work``, ...) derives from it, and
  a stray ``.txt`` output would make these surprising. It must not be an
  existing directory.
- Paths may use ``~``; relative paths are relative to the config file's
  folder, never the current directory; all paths are made absolute with
  ``Path.resolve()``.
- ``null`` means "not set" only for keys whose default is "nothing":
  ``pattern``, ``work_dir``, ``warm_start``, ``pad_to_multiple_of``,
  ``max_token_bytes``, ``special_tokens``, ``include``, ``exclude`` and
  ``warm_start.special_tokens``. For a key with a value default
  (``working_set_mb:`` left empty, say) ``null`` is an error: it is most
  likely an unfinished edit.
- Numbers: a plain (unquoted) scalar such as ``5e-3`` or ``1e3``, which
  YAML 1.1 reads as a string, is read as a float, as YAML 1.2 does. Integer
  keys never accept floats (``merges: 3e4`` is an error: write ``30000``).
- Every numeric key has an upper bound as well as a lower one (``BOUNDS``,
  README's table): far above any real run, low enough that no value makes a
  step take more than linear time or memory in it. ``seed`` is an integer in
  [0, 2**63); ``merges`` at most 2**31 - 1 (training sizes its arrays for the
  merges the text can give, never more); ``pad_to_multiple_of`` at most
  65,536 (every padding token is a special token, which export, load and
  encode pay for); ``threads`` at most 1,024 worker processes.
- ``pattern`` names are matched case-insensitively, and tiktoken's encoding
  names are accepted as aliases (``cl100k_base``, ``o200k_base``,
  ``r50k_base``/``p50k_base`` = ``gpt2``): a regex that literally matches
  ``CL100K`` is never what was meant. A custom regex must compile in both
  engines (``regex`` via ``resolve_pattern``, and tiktoken's own), so a
  construct only one of them knows (``\\X``, ``(?V1)``) fails here, not at
  export time. An empty pattern is an error, and so is a regex that can
  match the empty string or leaves a character unmatched (``probe_pattern``
  runs it over every Unicode category and line-break and space contexts):
  tiktoken panics on the first and silently drops the text of the second.
- A ``file:`` must have a readable suffix (``.txt``, ``.jsonl``, ``.parquet``,
  ``.txt``/``.jsonl`` + ``.zst``/``.gz``). A ``path:`` directory is not
  scanned here: the scanner reports a directory with no readable files.
- Special tokens: empty, repeated, or one inside another is an error. The
  nesting check also covers ``warm_start.special_tokens`` (a token listed in
  both places is fine: it keeps the base's id); two warm-start tokens with
  the same id are an error.
- Warm start: a ``.tiktoken`` base without a companion ``.meta.json`` must
  list ``warm_start.special_tokens`` (``{}``: it has none), or their ids
  would silently go to new merges; OpenAI's ``cl100k_base`` and
  ``o200k_base``, recognised by content, bring their own, and with
  ``pattern`` left out their pattern (another one is warned about).
- Phase names must be unique case-insensitively, and so must their slugified
  names (``"English General"`` and ``"english-general"`` would share phase
  folders in spirit). Phase slugs are ``NN-name``; the name part is cut at
  60 characters so folder names stay short.
- Safety: ``work_dir`` (which ``toktok clean`` may delete) must not be or
  contain the config file, the output, a source or the warm-start file, and
  the output must not overwrite the warm-start file.
- Warnings, not errors: ``merges: 0``; the same source listed twice in a
  phase (``weight:`` says that more plainly).
- ``vocab_size: N`` (the number of embedding rows, everything included:
  ``toktoktok.id_layout``) makes ``merges:`` optional in one phase, which
  gets the rest; ``resolve_vocab_size`` fills it in, or raises naming
  ``vocab_size`` or ``phases[i].merges`` when the numbers cannot make
  exactly N. Without a warm start that happens here; with one, the base's
  size (its highest id + 1) needs the base file, which the loader does not
  read (a second for cl100k_base, on every command): ``stages.workdir.check_ready``
  reads it and fits ``vocab_size`` then, before any work, and until then the
  phase's ``merges`` is None.
- ``hf:`` (roles, ``model_max_length``, ``chat_template``) implies
  ``export_hf: true`` (``export_hf: false`` beside it is an error). A role
  must name a declared special token; one of a warm start's own (read from
  its file) is checked by ``check_ready``.

``effective_settings(cfg)`` is the JSON-able view of the settings that shape
the result (all fields but ``path``, ``verbose``, ``threads``, ``engine``, ``ray``, ``warnings``);
``config_fingerprint(cfg)`` is the sha256 of its canonical JSON.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field, fields, is_dataclass, replace
from pathlib import Path
from typing import Any

from toktoktok.config_errors import (
    Context,
    KeyPath,
    describe,
    did_you_mean,
    format_key_path,
    read_document,
)

# Re-exported: callers (stages/, tests/) import these from here; their home is
# toktoktok.config_errors (format_key_path, imported above, is one of them).
from toktoktok.config_errors import config_error
from toktoktok import id_layout
from toktoktok.errors import ConfigError, LayoutError, UnsafePattern
from toktoktok.patterns import NAMED_PATTERNS, Pattern, resolve_pattern, tiktoken_rejects
from toktoktok.tiktoken_file import find_nested
from toktoktok.uris import RemotePath


@dataclass(frozen=True)
class Source:
    path: Path | RemotePath  # absolute, resolved against the config file's folder; or a pyarrow.fs URI
    is_dir: bool  # True for `path:` (directory scan), False for `file:`
    text_column: str = "text"
    weight: float = 1.0
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()


@dataclass(frozen=True)
class Phase:
    name: str
    # new tokens this phase adds; None only between loading and ``resolve_vocab_size``
    # for the phase that leaves ``merges:`` out with a warm start (its base size is unknown)
    merges: int | None
    sources: tuple[Source, ...]
    index: int  # 1-based position in the config
    slug: str  # e.g. "01-english-general"
    gets_rest: bool = False  # left ``merges:`` out: it gets the rest of ``vocab_size``


@dataclass(frozen=True)
class WarmStart:
    file: Path
    special_tokens: dict[str, int] | None = None


@dataclass(frozen=True)
class RayOptions:
    """Where the Ray engine runs: ``address`` None starts a local Ray instance
    with ``num_cpus`` CPUs (None: all); ``"auto"`` or ``"ray://host:port"``
    joins a running cluster (``num_cpus`` is then the cluster's business)."""

    address: str | None = None
    num_cpus: int | None = None


@dataclass(frozen=True)
class HfSettings:
    """``hf:``: the roles given (a role set to null: no token), and two settings."""

    roles: dict[str, str | None] = field(default_factory=dict)
    model_max_length: int | None = None
    chat_template: str | None = None


@dataclass(frozen=True)
class Config:
    path: Path  # the YAML file
    output: Path
    phases: tuple[Phase, ...]
    pattern: Pattern
    work_dir: Path
    working_set_mb: int = 1024
    threads: int = -1
    verbose: bool = False
    special_tokens: tuple[str, ...] = ()
    warm_start: WarmStart | None = None
    hardcoded_merges: bool = True
    seed: int = 0
    min_frequency: int = 2
    heldout_share: float = 0.005
    pad_to_multiple_of: int | None = None
    max_token_bytes: int | None = None
    export_hf: bool = False
    max_piece_bytes: int = 1 << 20
    on_bad_file: str = "fail"
    pattern_timeout_s: float = 10.0  # per MiB of a document, for a custom pattern (regex)
    vocab_size: int | None = None
    hf: HfSettings | None = None
    engine: str = "local"  # where ingest counts: "local" (this machine) or "ray"
    ray: RayOptions = field(default_factory=RayOptions)
    warnings: tuple[str, ...] = field(default=(), compare=False)


# --------------------------------------------------------------------------
# Schema tables
# --------------------------------------------------------------------------

TOP_KEYS = (
    "output", "working_set_mb", "threads", "verbose", "special_tokens", "phases",
    "warm_start", "hardcoded_merges", "pattern", "seed", "work_dir",
    "min_frequency", "heldout_share", "pad_to_multiple_of", "max_token_bytes",
    "export_hf", "max_piece_bytes", "on_bad_file", "pattern_timeout_s", "vocab_size", "hf",
    "engine", "ray",
)  # fmt: skip
PHASE_KEYS = ("name", "merges", "sources")
SOURCE_KEYS = ("path", "file", "text_column", "weight", "include", "exclude")
WARM_START_KEYS = ("file", "special_tokens")
RAY_KEYS = ("address", "num_cpus")
ENGINES = ("local", "ray")
HF_ROLES = ("bos_token", "eos_token", "pad_token", "unk_token")
HF_KEYS = (*HF_ROLES, "model_max_length", "chat_template")

# Where a key belongs when it is written one level off.
_MISPLACED = {
    "phase": ({"name", "merges", "sources"}, "it belongs in a phase, under phases:"),
    "source": (set(SOURCE_KEYS), "it belongs in a source, under sources:"),
}

OUTPUT_SUFFIX = ".tiktoken"
READABLE_SUFFIXES = (
    ".txt", ".jsonl", ".parquet", ".txt.zst", ".txt.gz", ".jsonl.zst", ".jsonl.gz",
)  # fmt: skip
PATTERN_ALIASES = {"cl100k_base": "cl100k", "o200k_base": "o200k",
                   "r50k_base": "gpt2", "p50k_base": "gpt2"}  # fmt: skip
MAX_MERGES = 2**31 - 1
MAX_SEED = 2**63 - 1
SLUG_MAX_CHARS = 60

# The bounds of every numeric key, checked when the config is read (exit 2).
# Each is far beyond what a real run needs, and each keeps the cost of the
# value sane: no step of a run costs more than linear time in any of them.
MAX_WORKING_SET_MB = 4 * 1024 * 1024  # 4 TiB: plan, sampling and chunk sizes scale with it
MAX_THREADS = 1024  # one worker process each
MAX_MIN_FREQUENCY = 2**63 - 1  # counts are 64-bit
MAX_HELDOUT_SHARE = 0.5
MAX_PAD_TO_MULTIPLE_OF = 65_536  # up to 65,535 reserved special tokens, each costs export time
MAX_PIECE_BYTES = 64 * 1024 * 1024  # a piece is held whole in memory
MIN_PIECE_BYTES = 1024
MAX_TOKEN_BYTES = MAX_PIECE_BYTES  # a token never outgrows a piece
MAX_WEIGHT = 1_000_000.0  # counts are multiplied by it
MAX_SPECIAL_ID = 2**32 - 2  # tiktoken ranks are u32, u32::MAX is its sentinel
MAX_VOCAB_SIZE = 2**31  # ids 0 to 2**31 - 1, as merges: the phases' arrays are int32
MIN_PATTERN_TIMEOUT_S, MAX_PATTERN_TIMEOUT_S = 0.01, 3600.0
MAX_RAY_CPUS = 1 << 20  # ray.num_cpus: a local instance's CPUs (Ray starts a worker process per CPU)
MAX_MODEL_MAX_LENGTH = 2**31 - 1  # hf.model_max_length: tokens of context, written into tokenizer_config.json

BOUNDS: dict[str, tuple[object, object]] = {
    "working_set_mb": (1, MAX_WORKING_SET_MB),
    "threads": (-1, MAX_THREADS),
    "phases[].merges": (0, MAX_MERGES),
    "min_frequency": (1, MAX_MIN_FREQUENCY),
    "heldout_share": (0, MAX_HELDOUT_SHARE),
    "pad_to_multiple_of": (1, MAX_PAD_TO_MULTIPLE_OF),
    "max_token_bytes": (2, MAX_TOKEN_BYTES),
    "max_piece_bytes": (MIN_PIECE_BYTES, MAX_PIECE_BYTES),
    "seed": (0, MAX_SEED),
    "sources[].weight": ("> 0", MAX_WEIGHT),
    "warm_start.special_tokens ids": (0, MAX_SPECIAL_ID),
    "vocab_size": (257, MAX_VOCAB_SIZE),
    "pattern_timeout_s": (MIN_PATTERN_TIMEOUT_S, MAX_PATTERN_TIMEOUT_S),
    "hf.model_max_length": (1, MAX_MODEL_MAX_LENGTH),
}
"""Every numeric key's (lowest, highest) accepted value, as README's table shows them."""


# --------------------------------------------------------------------------
# Value checkers: each returns the checked value or raises ConfigError
# --------------------------------------------------------------------------


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _check_keys(ctx: Context, path: KeyPath, mapping: dict[str, Any], allowed: tuple[str, ...]) -> None:
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


def _require(ctx: Context, mapping: dict[str, Any], path: KeyPath, key: str) -> Any:
    if key not in mapping:
        raise ctx.error(path + (key,), "is required")
    return mapping[key]


def _int(ctx: Context, path: KeyPath, value: Any, low: int, high: int | None = None) -> int:
    """An integer in [low, high] (bools and floats refused)."""
    if not _is_int(value) or value < low:
        raise ctx.error(path, f"must be an integer >= {low}, got {describe(value)}")
    if high is not None and value > high:
        raise ctx.error(path, f"must be an integer <= {high}, got {describe(value)}{_why_bound(path)}")
    return value


def _optional_int(ctx: Context, path: KeyPath, value: Any, low: int, high: int) -> int | None:
    """null, or an integer in [low, high]."""
    if value is None:
        return None
    if not _is_int(value) or value < low:
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


def _number(ctx: Context, path: KeyPath, value: Any, wanted: str, ok: Any) -> float:
    """A finite int or float for which ``ok(value)`` holds; returned as float."""
    if not _is_number(value) or not math.isfinite(value) or not ok(value):
        raise ctx.error(path, f"must be {wanted}, got {describe(value)}")
    return float(value)


def _bool(ctx: Context, path: KeyPath, value: Any) -> bool:
    if not isinstance(value, bool):
        raise ctx.error(path, f"must be true or false, got {describe(value)}")
    return value


def _string(ctx: Context, path: KeyPath, value: Any, what: str = "a non-empty string") -> str:
    if not isinstance(value, str) or not value.strip():
        raise ctx.error(path, f"must be {what}, got {describe(value)}")
    return value


def _mapping(ctx: Context, path: KeyPath, value: Any, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ctx.error(path, f"must be {what}, got {describe(value)}")
    return value


def _list(ctx: Context, path: KeyPath, value: Any, what: str, non_empty: bool = False) -> list[Any]:
    if not isinstance(value, list) or (non_empty and not value):
        raise ctx.error(path, f"must be {what}, got {describe(value)}")
    return value


def _string_list(ctx: Context, path: KeyPath, value: Any) -> tuple[str, ...]:
    """A list of non-empty strings (null = empty), e.g. include/exclude globs."""
    if value is None:
        return ()
    items = _list(ctx, path, value, "a list of strings")
    return tuple(_string(ctx, path + (i,), item) for i, item in enumerate(items))


_URI = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")


def _path(ctx: Context, path: KeyPath, value: Any, remote: bool = False) -> Path:
    """A path string made absolute against the config's folder (``~`` expanded),
    or a URI (``uri_path``), never made relative to anything. ``remote``: a
    ``pyarrow.fs`` URI other than ``file://`` is allowed (a source's)."""
    text = _string(ctx, path, value, "a path (a non-empty string)")
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
    existence checked by the caller as a path's is (``_existing``).

        >>> uri_path(Context("c.yaml", Path(".")), ("file",), "file:///data/a%20b.txt")
        PosixPath('/data/a b.txt')
        >>> uri_path(Context("c.yaml", Path(".")), ("file",), "s3://bucket/data/?region=eu-west-1")
        RemotePath('s3://bucket/data')
    """
    from pyarrow import fs

    scheme, _, rest = uri.partition("://")
    if scheme.lower() != "file":
        if not rest.partition("?")[0].partition("/")[0]:
            raise ctx.error(path, f"is a {scheme}:// URI without a bucket or host")
        return RemotePath(uri)
    try:
        filesystem, inner = fs.FileSystem.from_uri(uri)
    except Exception as exc:  # noqa: BLE001 - pyarrow's ArrowInvalid and friends: one message
        raise ctx.error(path, f"is not a usable URI ({' '.join(str(exc).split())}); write it percent-encoded, "
                        "as Path.as_uri() does") from None
    if not isinstance(filesystem, fs.LocalFileSystem):
        raise ctx.error(path, "is not a local file:// URI")
    return Path(inner)


def _choice(ctx: Context, path: KeyPath, value: Any, choices: tuple[str, ...]) -> str:
    if value not in choices or not isinstance(value, str):
        close = did_you_mean(value, choices) if isinstance(value, str) else ""
        hint = f" ({close})" if close else ""
        raise ctx.error(path, f"must be one of {', '.join(choices)}, got {describe(value)}{hint}")
    return value


# --------------------------------------------------------------------------
# Sections
# --------------------------------------------------------------------------


def slugify(name: str) -> str:
    """Lowercase; runs of anything but [a-z0-9] become "-"; "phase" if nothing is left.

    >>> slugify("English General"), slugify("C++ / Rust!"), slugify("日本語")
    ('english-general', 'c-rust', 'phase')
    """
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
    return slug[:SLUG_MAX_CHARS].rstrip("-") or "phase"


def _existing(ctx: Context, path: KeyPath, value: Any, want_dir: bool, remote: bool = False) -> Path:
    """A path that exists, is readable and is a directory (want_dir) or a file
    (``remote``: or a ``pyarrow.fs`` URI, asked the same through its filesystem)."""
    resolved = _path(ctx, path, value, remote)
    kind, other = ("directory", "file") if want_dir else ("file", "directory")
    if isinstance(resolved, RemotePath):
        return _existing_remote(ctx, path, resolved, want_dir)
    if not resolved.exists():
        raise ctx.error(path, f"does not exist: {resolved}")
    if resolved.is_dir() != want_dir:
        key = "path" if not want_dir else "file"
        raise ctx.error(path, f"is a {other}, not a {kind}: {resolved} (use `{key}:` for a {other})")
    if not os.access(resolved, os.R_OK | (os.X_OK if want_dir else 0)):
        raise ctx.error(path, f"is not readable: {resolved}")
    return resolved


def _existing_remote(ctx: Context, path: KeyPath, resolved: RemotePath, want_dir: bool) -> Any:
    """``_existing`` for a ``pyarrow.fs`` URI: a folder is a prefix holding objects."""
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


def _source(ctx: Context, path: KeyPath, raw: Any) -> Source:
    """One entry of a phase's ``sources:`` list (exactly one of path:/file:)."""
    entry = _mapping(ctx, path, raw, "a mapping with `path:` (a directory) or `file:` (a file)")
    _check_keys(ctx, path, entry, SOURCE_KEYS)
    if ("path" in entry) == ("file" in entry):
        both = "has both" if "path" in entry else "has neither"
        exactly_one = "give exactly one (path: a directory to scan, file: one file)"
        raise ctx.error(path, f"{both} `path:` and `file:`; {exactly_one}")
    is_dir = "path" in entry
    key = "path" if is_dir else "file"
    location = _existing(ctx, path + (key,), entry[key], want_dir=is_dir, remote=True)
    if not is_dir and not location.name.lower().endswith(READABLE_SUFFIXES):
        readable = ", ".join(READABLE_SUFFIXES)
        raise ctx.error(path + (key,), f"is not a readable kind of file: {location} (readable: {readable})")
    for glob_key in ("include", "exclude"):
        if glob_key in entry and not is_dir:
            raise ctx.error(path + (glob_key,), "is only allowed with `path:` (a directory), not with `file:`")
    text_column = entry.get("text_column", "text")
    if not isinstance(text_column, str) or not text_column:
        raise ctx.error(path + ("text_column",), f"must be a non-empty string, got {describe(text_column)}")
    weight = _number(ctx, path + ("weight",), entry.get("weight", 1.0),
                     f"a positive number at most {MAX_WEIGHT:,.0f}", lambda w: 0 < w <= MAX_WEIGHT)
    include = _string_list(ctx, path + ("include",), entry.get("include"))
    exclude = _string_list(ctx, path + ("exclude",), entry.get("exclude"))
    return Source(location, is_dir, text_column, weight, include, exclude)


def _phase(ctx: Context, path: KeyPath, raw: Any, index: int, merges_optional: bool) -> Phase:
    """One entry of ``phases:``; ``index`` is 1-based. ``merges_optional``: with
    ``vocab_size``, a phase may leave ``merges:`` out (None: it gets the rest)."""
    entry = _mapping(ctx, path, raw, "a mapping with name:, merges: and sources:")
    _check_keys(ctx, path, entry, PHASE_KEYS)
    name = _string(ctx, path + ("name",), _require(ctx, entry, path, "name"))
    if merges_optional and "merges" not in entry:
        merges = None
    else:
        merges = _int(ctx, path + ("merges",), _require(ctx, entry, path, "merges"), 0, MAX_MERGES)
    sources_path = path + ("sources",)
    raw_sources = _require(ctx, entry, path, "sources")
    raw_sources = _list(ctx, sources_path, raw_sources, "a non-empty list of sources", non_empty=True)
    sources = tuple(_source(ctx, sources_path + (i,), s) for i, s in enumerate(raw_sources))
    return Phase(name, merges, sources, index, f"{index:02d}-{slugify(name)}", gets_rest=merges is None)


def _phases(ctx: Context, raw: Any, merges_optional: bool) -> tuple[Phase, ...]:
    """The ``phases:`` list: at least one, names unique (case-insensitively and as slugs)."""
    items = _list(ctx, ("phases",), raw, "a non-empty list of phases", non_empty=True)
    phases = tuple(_phase(ctx, ("phases", i), item, i + 1, merges_optional) for i, item in enumerate(items))
    seen_names: dict[str, int] = {}
    seen_slugs: dict[str, int] = {}
    for i, phase in enumerate(phases):
        where = ("phases", i, "name")
        for seen, key in ((seen_names, phase.name.casefold()), (seen_slugs, slugify(phase.name))):
            if key in seen:
                first = phases[seen[key]].name
                problem = f"{phase.name!r} is too close to phases[{seen[key]}].name {first!r}"
                raise ctx.error(where, f"{problem}: phase names must be unique (ignoring case and punctuation)")
            seen[key] = i
    return phases


def _special_tokens(ctx: Context, raw: Any) -> tuple[str, ...]:
    """``special_tokens:``: a list of non-empty, unique strings (null = none)."""
    if raw is None:
        return ()
    items = _list(ctx, ("special_tokens",), raw, "a list of strings")
    first_at: dict[str, int] = {}
    for i, token in enumerate(items):
        if not isinstance(token, str) or not token:
            raise ctx.error(("special_tokens", i), f"must be a non-empty string, got {describe(token)}")
        if token in first_at:
            raise ctx.error(("special_tokens", i), f"{token!r} repeats special_tokens[{first_at[token]}]")
        first_at[token] = i
    return tuple(items)


def _check_nesting(ctx: Context, tokens: list[tuple[KeyPath, str]]) -> None:
    """No special token may sit inside another (tiktoken would pick by hash order).

    The same token listed in two places (top level and warm start) is allowed.
    The error is raised at the later of the two in the file's order. The search
    is ``find_nested``'s, linear in the tokens' total length (a pairwise
    comparison would take minutes for 100,000 tokens).
    """
    found = find_nested(token for _, token in tokens)
    if found is None:
        return
    first: dict[str, int] = {}
    for i, (_, token) in enumerate(tokens):
        first.setdefault(token, i)
    inner, outer = found
    (path_a, a), (path_b, b) = sorted((tokens[first[inner]], tokens[first[outer]]), key=lambda t: first[t[1]])
    both = f"{b!r} and {format_key_path(path_a)} {a!r}"
    raise ctx.error(path_b, f"{both} overlap: {inner!r} is inside {outer!r}; tiktoken could match either")


def _warm_start(ctx: Context, raw: Any) -> WarmStart | None:
    """``warm_start: {file: base.tiktoken, special_tokens: {tok: id}}`` (null = none)."""
    if raw is None:
        return None
    path: KeyPath = ("warm_start",)
    entry = _mapping(ctx, path, raw, "a mapping like {file: base.tiktoken}")
    _check_keys(ctx, path, entry, WARM_START_KEYS)
    file = _existing(ctx, path + ("file",), _require(ctx, entry, path, "file"), want_dir=False)
    raw_specials = entry.get("special_tokens")
    if raw_specials is None:
        from toktoktok.warm_start import missing_special_tokens  # reads the base (imports numpy)

        try:
            problem = missing_special_tokens(file)
        except ValueError as exc:
            raise ctx.error(path + ("file",), f"is not a usable base vocabulary: {exc}") from None
        if problem:
            raise ctx.error(path + ("special_tokens",), problem)
        return WarmStart(file, None)
    specials = _mapping(ctx, path + ("special_tokens",), raw_specials, "a mapping of token: id")
    by_id: dict[int, str] = {}
    for token, token_id in specials.items():
        where = path + ("special_tokens", token)
        if not token:
            raise ctx.error(where, "is an empty special token")
        _int(ctx, where, token_id, 0, MAX_SPECIAL_ID)
        if token_id in by_id:
            raise ctx.error(where, f"has id {token_id}, already used by {by_id[token_id]!r}")
        by_id[token_id] = token
    return WarmStart(file, dict(specials))


def _hf(ctx: Context, doc: dict[str, Any], special_tokens: tuple[str, ...],
        warm_start: WarmStart | None) -> HfSettings | None:
    """``hf: {bos_token, eos_token, pad_token, unk_token, model_max_length, chat_template}``
    (null = none). A role must name a declared special token (a warm start's
    own, read from its file, are checked by ``stages.workdir.check_ready``);
    ``hf:`` implies ``export_hf: true``, so ``export_hf: false`` beside it is refused."""
    raw = doc.get("hf")
    if raw is None:
        return None
    path: KeyPath = ("hf",)
    entry = _mapping(ctx, path, raw, "a mapping like {pad_token: '<|pad|>'}")
    _check_keys(ctx, path, entry, HF_KEYS)
    if doc.get("export_hf") is False:
        raise ctx.error(("export_hf",), "is false, but hf: is given (hf: writes the Hugging Face files; "
                                        "remove one of the two)")
    declared = list(special_tokens) + list((warm_start.special_tokens or {}) if warm_start else {})
    roles: dict[str, str | None] = {}
    for role in HF_ROLES:
        if role not in entry:
            continue
        token = entry[role]
        if token is not None:
            _string(ctx, path + (role,), token, "a special token (a string) or null")
            if token not in declared and warm_start is None:
                known = ", ".join(repr(t) for t in declared) or "none are declared"
                raise ctx.error(path + (role,), f"is {token!r}, not a declared special token "
                                                f"(special_tokens: {known})")
        roles[role] = token
    max_length = _optional_int(ctx, path + ("model_max_length",), entry.get("model_max_length"), 1,
                               MAX_MODEL_MAX_LENGTH)
    template = entry.get("chat_template")
    if template is not None:
        template = _string(ctx, path + ("chat_template",), template, "a Jinja template (a non-empty string) or null")
    return HfSettings(roles, max_length, template)


def _pattern(ctx: Context, raw: Any) -> Pattern:
    """``pattern:`` null/a name (case-insensitive, tiktoken aliases) or a regex."""
    if raw is None:
        return resolve_pattern(None)
    if not isinstance(raw, str) or not raw:
        names = ", ".join(NAMED_PATTERNS)
        raise ctx.error(("pattern",), f"must be a name ({names}) or a regex string, got {describe(raw)}")
    name = PATTERN_ALIASES.get(raw.strip().lower(), raw.strip().lower())
    if name in NAMED_PATTERNS:
        return NAMED_PATTERNS[name]
    try:
        pattern = resolve_pattern(raw)
    except UnsafePattern as exc:
        raise ctx.error(("pattern",), f"is refused: it {exc}") from None
    except ValueError as exc:
        raise ctx.error(("pattern",), f"is not a valid regex: {exc}") from None
    problem = tiktoken_rejects(pattern.tiktoken)
    if problem:
        raise ctx.error(("pattern",), f"is a regex tiktoken cannot use: {problem}")
    return pattern


def _base_pattern(ctx: Context, raw: Any, warm_start: WarmStart | None) -> tuple[Pattern, tuple[str, ...]]:
    """``pattern:``, and a warning if it is not the one a published warm-start base was
    trained with; left out, that base's pattern (``cl100k`` for cl100k_base)."""
    if warm_start is None:
        return _pattern(ctx, raw), ()
    from toktoktok.warm_start import published_base  # reads the base (imports numpy)

    known = published_base(warm_start.file)
    if known is None:
        return _pattern(ctx, raw), ()
    own = NAMED_PATTERNS[known.pattern]
    if raw is None:
        return own, ()
    pattern = _pattern(ctx, raw)
    if pattern.tiktoken == own.tiktoken:
        return pattern, ()
    shown = pattern.name if pattern.name != "custom" else f"a custom regex {describe(raw)}"
    return pattern, (f"pattern: {shown} is not {own.name}, the pattern the warm start {known.name} was trained "
                     f"with: its merges were learned on {own.name}'s pieces (leave pattern: out to use {own.name})",)


def _output(ctx: Context, raw: Any) -> Path:
    """``output:`` a path ending in ``.tiktoken``, not an existing directory."""
    output = _path(ctx, ("output",), raw)
    if not output.name.endswith(OUTPUT_SUFFIX) or output.name == OUTPUT_SUFFIX:
        wanted = f"a file name ending in {OUTPUT_SUFFIX} (e.g. my_tokenizer{OUTPUT_SUFFIX})"
        raise ctx.error(("output",), f"must be {wanted}, got {raw!r}")
    if output.is_dir():
        raise ctx.error(("output",), f"is an existing directory: {output}")
    return output


def default_work_dir(output: Path) -> Path:
    """``DIR/NAME.tiktoken`` -> ``DIR/NAME.work``.

    >>> default_work_dir(Path("/out/tok.tiktoken")).as_posix()
    '/out/tok.work'
    """
    return output.with_name(output.name[: -len(OUTPUT_SUFFIX)] + ".work")


def _work_dir(ctx: Context, raw: Any, output: Path) -> Path:
    if raw is None:
        return default_work_dir(output)
    work_dir = _path(ctx, ("work_dir",), raw)
    if work_dir.exists() and not work_dir.is_dir():
        raise ctx.error(("work_dir",), f"exists and is not a directory: {work_dir}")
    return work_dir


def _check_work_dir_safety(ctx: Context, cfg: Config) -> None:
    """work_dir may be deleted by ``toktok clean``: it must hold nothing of the user's."""
    guarded: list[tuple[str, Path]] = [("the config file", cfg.path), ("the output", cfg.output)]
    if cfg.warm_start is not None:
        guarded.append(("the warm-start file", cfg.warm_start.file))
        if cfg.output == cfg.warm_start.file:
            raise ctx.error(("output",), f"would overwrite the warm-start file {cfg.warm_start.file}")
    for phase in cfg.phases:
        guarded += [(f"a source of phase {phase.name!r}", s.path) for s in phase.sources
                    if not isinstance(s.path, RemotePath)]  # never inside a local folder
    for what, path in guarded:
        if path == cfg.work_dir or cfg.work_dir in path.parents:
            raise ctx.error(("work_dir",), f"{cfg.work_dir} contains {what} ({path}); it must be a folder of its own")


# --------------------------------------------------------------------------
# Public API
# --------------------------------------------------------------------------


def load_config(path: str | Path) -> Config:
    """Read and fully validate a YAML config; raise ``ConfigError`` on any problem.

    Minimal example (``data/`` being a folder beside the config)::

        output: tok.tiktoken
        phases:
          - {name: English, merges: 1000, sources: [{path: data}]}

    gives ``Config(output=<config dir>/tok.tiktoken, work_dir=<config dir>/tok.work,
    phases=(Phase('English', 1000, ..., index=1, slug='01-english'),), ...)``.
    """
    config_path = Path(path).expanduser()
    ctx = Context(file=str(path), base_dir=config_path.resolve().parent)
    doc = read_document(config_path, ctx)
    _check_keys(ctx, (), doc, TOP_KEYS)
    output = _output(ctx, _require(ctx, doc, (), "output"))
    vocab_size = _optional_int(ctx, ("vocab_size",), doc.get("vocab_size"), id_layout.BYTES + 1, MAX_VOCAB_SIZE)
    phases = _phases(ctx, _require(ctx, doc, (), "phases"), merges_optional=vocab_size is not None)
    settings = _settings(ctx, doc)
    hf = _hf(ctx, doc, settings["special_tokens"], settings["warm_start"])
    cfg = Config(
        path=config_path.resolve(),
        output=output,
        phases=phases,
        work_dir=_work_dir(ctx, doc.get("work_dir"), output),
        warnings=_warnings(phases) + settings.pop("pattern_warnings"),
        vocab_size=vocab_size,
        hf=hf,
        **settings,
    )
    if hf is not None:
        cfg = replace(cfg, export_hf=True)
    _check_work_dir_safety(ctx, cfg)
    if vocab_size is not None:
        try:
            id_layout.check_shape(vocab_size, [p.merges for p in phases], cfg.pad_to_multiple_of)
        except LayoutError as exc:
            raise ctx.error(exc.key, exc.problem) from None
        if cfg.warm_start is None:  # else the base's size is known once it is read (``resolve_vocab_size``)
            cfg = resolve_vocab_size(cfg, base_size=base_size(cfg), base_specials=(), error=ctx.error)
    return cfg


def check_settings(settings: dict[str, Any], *, where: str, base_dir: Path | None = None) -> dict[str, Any]:
    """The settings of a config given as a mapping rather than a file, checked
    as ``load_config`` checks them; ``ConfigError`` names ``where``.

    Every top-level key but ``output``, ``phases`` and ``work_dir`` (which
    only a run of the stages uses; the caller refuses them or not): returns
    the ``Config`` fields they make, defaults filled in. Paths (the warm
    start's) are relative to ``base_dir``, by default the current folder.
    ``toktoktok.train`` validates its options so, with no file to write.

        >>> check_settings({"seed": 3, "pattern": "cl100k_base"}, where="train()")["pattern"].name
        'cl100k'
        >>> check_settings({"heldout_share": 0.9}, where="train()")
        Traceback (most recent call last):
        ...
        toktoktok.errors.ConfigError: train(): heldout_share must be a number between 0 and 0.5, got 0.9 (a number)
    """
    ctx = Context(file=where, base_dir=(base_dir or Path.cwd()).resolve())
    _check_keys(ctx, (), settings, TOP_KEYS)
    return _settings(ctx, settings)


def _settings(ctx: Context, doc: dict[str, Any]) -> dict[str, Any]:
    """The ``Config`` fields of every top-level key but output, phases and work_dir."""
    special_tokens = _special_tokens(ctx, doc.get("special_tokens"))
    warm_start = _warm_start(ctx, doc.get("warm_start"))
    _check_nesting(ctx, _all_special_tokens(special_tokens, warm_start))
    pattern, pattern_warnings = _base_pattern(ctx, doc.get("pattern"), warm_start)
    return {"pattern": pattern, "special_tokens": special_tokens, "warm_start": warm_start,
            "pattern_warnings": pattern_warnings, **_scalar_settings(ctx, doc)}


def base_size(cfg: Config) -> int:
    """The ids before the first phase without a warm start: the bytes and, when on,
    the hardcoded merges (a warm start's is its highest id + 1, known once read)."""
    return id_layout.BYTES + (id_layout.HARDCODED_MERGES if cfg.hardcoded_merges else 0)


def _base_name(cfg: Config) -> str:
    if cfg.warm_start is not None:
        return "the warm start's base (its highest id + 1)"
    return "the 256 bytes and the 1,161 hardcoded merges" if cfg.hardcoded_merges else "the 256 bytes"


def new_special_tokens(cfg: Config, base_specials: Any = ()) -> list[str]:
    """The special tokens that get new ids (a warm start's keep theirs)."""
    return [t for t in cfg.special_tokens if t not in base_specials]


def resolve_vocab_size(cfg: Config, *, base_size: int, base_specials: Any,
                       error: Callable[[KeyPath, str], ConfigError] | None = None) -> Config:
    """``cfg`` with every phase's merges known: the phase that left ``merges:`` out
    gets the rest of ``vocab_size`` (``id_layout.fit_merges``). A config without
    ``vocab_size`` is returned as it is. Raises ``ConfigError`` naming the key
    (``error`` words it; by default the file is read again for the key's line).

    ``base_size``: the ids before the first phase (``base_size(cfg)``, or a warm
    start's highest id + 1); ``base_specials``: a warm start's special tokens.
    """
    if cfg.vocab_size is None:
        return cfg
    specials = len(new_special_tokens(cfg, base_specials))
    try:
        merges = id_layout.fit_merges(cfg.vocab_size, base=base_size, merges=[p.merges for p in cfg.phases],
                                      specials=specials, pad_to=cfg.pad_to_multiple_of, base_name=_base_name(cfg))
    except LayoutError as exc:
        raise (error or (lambda key, problem: config_error(cfg.path, key, problem)))(exc.key, exc.problem) from None
    phases = tuple(replace(p, merges=m) for p, m in zip(cfg.phases, merges))
    rest = [p for p in phases if p.gets_rest]
    if rest and rest[0].merges > MAX_MERGES:
        problem = f"is {cfg.vocab_size:,}: phase {rest[0].name!r} would get {rest[0].merges:,} merges, over {MAX_MERGES}"
        raise (error or (lambda key, p: config_error(cfg.path, key, p)))(("vocab_size",), problem)
    return replace(cfg, phases=phases, warnings=cfg.warnings + _warnings(tuple(rest)))


def _scalar_settings(ctx: Context, doc: dict[str, Any]) -> dict[str, Any]:
    """The simple top-level settings, defaults filled in."""

    def get(key: str) -> tuple[KeyPath, Any]:
        default = next(f.default for f in fields(Config) if f.name == key)
        return (key,), doc.get(key, default)

    threads_path, threads = get("threads")
    if not _is_int(threads) or not (threads == -1 or threads >= 1):
        raise ctx.error(threads_path, f"must be -1 (all cores) or an integer >= 1, got {describe(threads)}")
    _int(ctx, threads_path, threads, -1, MAX_THREADS)
    share_ok = lambda x: 0 <= x <= MAX_HELDOUT_SHARE  # noqa: E731
    return {
        "working_set_mb": _int(ctx, *get("working_set_mb"), 1, MAX_WORKING_SET_MB),
        "threads": threads,
        "verbose": _bool(ctx, *get("verbose")),
        "hardcoded_merges": _bool(ctx, *get("hardcoded_merges")),
        "seed": _int(ctx, *get("seed"), 0, MAX_SEED),
        "min_frequency": _int(ctx, *get("min_frequency"), 1, MAX_MIN_FREQUENCY),
        "heldout_share": _number(ctx, *get("heldout_share"), f"a number between 0 and {MAX_HELDOUT_SHARE}", share_ok),
        "pad_to_multiple_of": _optional_int(ctx, *get("pad_to_multiple_of"), 1, MAX_PAD_TO_MULTIPLE_OF),
        "max_token_bytes": _optional_int(ctx, *get("max_token_bytes"), 2, MAX_TOKEN_BYTES),
        "export_hf": _bool(ctx, *get("export_hf")),
        "max_piece_bytes": _int(ctx, *get("max_piece_bytes"), MIN_PIECE_BYTES, MAX_PIECE_BYTES),
        "on_bad_file": _choice(ctx, *get("on_bad_file"), ("fail", "skip")),
        "pattern_timeout_s": _number(ctx, *get("pattern_timeout_s"), "a number of seconds between 0.01 and 3600",
                                     lambda x: MIN_PATTERN_TIMEOUT_S <= x <= MAX_PATTERN_TIMEOUT_S),
        "engine": _choice(ctx, ("engine",), doc.get("engine", "local"), ENGINES),
        "ray": _ray_options(ctx, doc.get("ray")),
    }


def _ray_options(ctx: Context, value: Any) -> RayOptions:
    """``ray: {address: auto | ray://host:port, num_cpus: N}`` (both optional).

        >>> _ray_options(Context("c.yaml", Path(".")), {"address": "auto"})
        RayOptions(address='auto', num_cpus=None)
    """
    if value is None:
        return RayOptions()
    if not isinstance(value, dict):
        raise ctx.error(("ray",), f"must be a mapping such as {{address: auto, num_cpus: 8}}, got {describe(value)}")
    _check_keys(ctx, ("ray",), value, RAY_KEYS)
    address = value.get("address")
    if address is not None and not (isinstance(address, str) and (address == "auto" or address.startswith("ray://"))):
        raise ctx.error(("ray", "address"), f"must be auto or ray://host:port (left out: start a local Ray instance), "
                        f"got {describe(address)}")
    return RayOptions(address=address, num_cpus=_optional_int(ctx, ("ray", "num_cpus"), value.get("num_cpus"), 1,
                                                                     MAX_RAY_CPUS))


def _all_special_tokens(
    tokens: tuple[str, ...], warm_start: WarmStart | None
) -> list[tuple[KeyPath, str]]:
    """Every special token the config names, with its key path, for the nesting check."""
    found: list[tuple[KeyPath, str]] = [(("special_tokens", i), t) for i, t in enumerate(tokens)]
    if warm_start is not None and warm_start.special_tokens:
        found += [(("warm_start", "special_tokens", t), t) for t in warm_start.special_tokens]
    return found


def _warnings(phases: tuple[Phase, ...]) -> tuple[str, ...]:
    """Valid but probably unintended: ``merges: 0``, a source listed twice in a phase."""
    out: list[str] = []
    for phase in phases:
        if phase.merges == 0 and phase.gets_rest:
            out.append(f"phase {phase.name!r} gets the rest of vocab_size, which is 0: it adds no tokens")
        elif phase.merges == 0:
            out.append(f"phase {phase.name!r} has merges: 0: it adds no tokens")
        seen: set[tuple[Any, ...]] = set()
        for source in phase.sources:
            key = (source.path, source.is_dir, source.text_column, source.include, source.exclude)
            if key in seen:
                twice = f"phase {phase.name!r} lists {source.path} twice"
                out.append(f"{twice}: its text counts twice (weight: says so more plainly)")
            seen.add(key)
    return tuple(out)


def _jsonable(value: Any) -> Any:
    """Dataclasses -> dicts, Paths (and URIs, without their query) -> strings,
    tuples -> lists, recursively."""
    if is_dataclass(value) and not isinstance(value, type):
        return {f.name: _jsonable(getattr(value, f.name)) for f in fields(value)}
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
    absolute strings, the pattern is ``{name, tiktoken, python, cut_at_safe_places}``.
    """
    settings = _jsonable(cfg)
    for key in _NOT_SETTINGS:
        settings.pop(key)
    return settings


def config_fingerprint(cfg: Config) -> str:
    """sha256 hex of the canonical JSON (sorted keys, no spaces) of ``effective_settings``."""
    canonical = json.dumps(effective_settings(cfg), sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(canonical.encode("ascii")).hexdigest()


def resolve_threads(threads: int) -> int:
    """``threads: -1`` means every core this process may use.

        >>> resolve_threads(3)
        3
    """
    if threads and threads > 0:
        return threads
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def batch_chars(working_set_mb: int) -> int:
    """Text per counting task: a 128th of the budget, from 256 Ki to 512 Ki
    characters (larger batches gained little speed and cost 25-35 MB more at
    peak, in flight on every thread: see ``stages.ingest.batching``).

        >>> batch_chars(1024) == 1 << 19
        True
    """
    return min(max(working_set_mb << 13, 1 << 18), 1 << 19)
