"""``toktoktok.load``: a trained ``.tiktoken`` file as a ready ``tiktoken.Encoding``.

A ``.tiktoken`` file holds only the mergeable ranks. The pattern and the
special tokens live in the companion ``NAME.meta.json`` that export writes
beside ``NAME.tiktoken`` (docs/outputs.md), so ``load`` reads both:

    >>> import tempfile, pathlib
    >>> from toktoktok.tiktoken_file import write_tiktoken
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> write_tiktoken(d / "tiny.tiktoken", {bytes([b]): b for b in range(256)})
    >>> enc = load(d / "tiny.tiktoken", special_tokens={"<|endoftext|>": 256})
    >>> enc.name, enc.n_vocab
    ('tiny', 257)
    >>> enc.encode("hi<|endoftext|>", allowed_special="all")
    [104, 105, 256]

The ranks are read with our own parser (``read_tiktoken``), never with
tiktoken's loader, which caches by path and can serve a rewritten file stale
(docs/outputs.md). Everything tiktoken would panic on or silently accept
wrongly (duplicate ranks, missing bytes, a special id equal to a rank) is
checked first and raised as ``ValueError``: tiktoken's panics are not
``Exception``s.
"""

from __future__ import annotations

import hashlib
import json
import os
import warnings
from pathlib import Path
from typing import Any

import tiktoken

from toktoktok.errors import CompanionMismatch, TokenizerFileError, UsageError
from toktoktok.known_bases import recognise
from toktoktok.patterns import NAMED_PATTERNS, checked_pattern, resolve_pattern
from toktoktok.tiktoken_file import read_tiktoken, validate_special_tokens

META_FORMAT = "toktoktok-meta/2"
OLD_META_FORMATS = ("toktoktok-meta/1",)  # read, with a warning: they hold no digest of their .tiktoken


class OldCompanionWarning(UserWarning):
    """A companion written before digests were recorded (``toktoktok-meta/1``)."""


def split_name(path: str | os.PathLike[str]) -> tuple[Path, str]:
    """The folder and the NAME of ``DIR/NAME.tiktoken`` (or ``.tiktoken.gz``, ``.tiktoken.zst``).

    >>> split_name("out/demo.tiktoken")
    (PosixPath('out'), 'demo')
    >>> split_name("base.tiktoken.gz")[1], split_name("base.tiktoken.zst")[1], split_name("vocab.bpe")[1]
    ('base', 'base', 'vocab')
    """
    p = Path(path)
    for suffix in (".tiktoken.gz", ".tiktoken.zst", ".tiktoken"):
        if p.name.endswith(suffix) and p.name != suffix:
            return p.parent, p.name[: -len(suffix)]
    return p.parent, p.stem


def meta_path(path: str | os.PathLike[str]) -> Path:
    """The companion of ``DIR/NAME.tiktoken``: ``DIR/NAME.meta.json``.

    >>> meta_path("out/demo.tiktoken")
    PosixPath('out/demo.meta.json')
    """
    folder, name = split_name(path)
    return folder / f"{name}.meta.json"


def read_meta(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read and check a ``.meta.json`` file; ``ValueError`` names the file."""
    path = Path(path)
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise TokenizerFileError(path, f"cannot read the companion file ({e})") from e
    if not isinstance(meta, dict):
        raise TokenizerFileError(path, "expected a JSON object")
    if meta.get("format") not in (META_FORMAT, *OLD_META_FORMATS):
        raise TokenizerFileError(path, f"unsupported format {meta.get('format')!r}, expected {META_FORMAT!r}")
    return meta


def check_companion(path: str | os.PathLike[str], meta: dict[str, Any],
                    ranks: dict[bytes, int] | None = None) -> None:
    """Refuse a ``.tiktoken`` whose companion does not describe it.

    A ``toktoktok-meta/2`` companion records the sha256, size and rank count
    of the ``.tiktoken`` it was written with; a file that differs (a publish
    cut short by a kill, a file copied over from elsewhere, a file cut short)
    raises ``CompanionMismatch`` naming both files. Called before the file is
    parsed (``ranks`` None), so a truncated file is told by its size, not by
    the parse error its cut line gives. A ``/1`` companion has no digest: a
    warning says how to re-export it.
    """
    path, companion = Path(path), meta_path(path)
    if meta.get("format") in OLD_META_FORMATS:
        warnings.warn(f"{companion} is an older companion ({meta.get('format')}) that records no digest of "
                      f"{path.name}, so the pair cannot be checked; re-export it with `toktok export -c CONFIG "
                      f"--force`", OldCompanionWarning, stacklevel=3)
        return
    recorded = meta.get("tiktoken")
    if not isinstance(recorded, dict):
        raise CompanionMismatch(f"{companion}: no record of its .tiktoken (the 'tiktoken' entry is missing)")
    actual: dict[str, Any] = {"bytes": path.stat().st_size}
    actual["sha256"] = file_sha256(path)
    if ranks is not None:
        actual["ranks"] = len(ranks)
    differ = [k for k in ("sha256", "bytes", "ranks") if k in actual and recorded.get(k) != actual[k]]
    if differ:
        raise CompanionMismatch(
            f"{path} does not match its companion {companion} ({', '.join(differ)} differ: "
            f"{recorded.get('bytes')} bytes recorded, {actual['bytes']} on disk): they come from different "
            "exports, a publish was cut short, or the file was changed or cut short since; rerun `toktok run` "
            "(or `toktok export`) to write them anew")


def read_checked(path: str | os.PathLike[str], *, data: bytes | None = None) -> tuple[dict[bytes, int], dict]:
    """The ranks of a ``.tiktoken`` and its companion's document (``{}`` without
    one), the pair checked (``check_companion``) before the file is parsed;
    ``data``: the file's ``decompressed_bytes``, already read."""
    companion = meta_path(path)
    meta = read_meta(companion) if companion.is_file() else {}
    if meta and not Path(path).exists():
        raise TokenizerFileError(path, f"no such file, though its companion {companion.name} is there (a first "
                                 "export cut short?): rerun `toktok run` (or `toktok export`) to finish it")
    if meta:
        check_companion(path, meta)
    ranks = read_tiktoken(path, data=data)
    recorded = meta.get("tiktoken")
    if isinstance(recorded, dict) and recorded.get("ranks") != len(ranks):  # the digest matched: a bad record
        raise CompanionMismatch(f"{path} does not match its companion {companion} (ranks differ: "
                                f"{recorded.get('ranks')} recorded, {len(ranks)} in the file)")
    return ranks, meta


def file_sha256(path: str | os.PathLike[str]) -> str:
    """sha256 of a file's bytes, read in 1 MiB blocks (hex)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(1 << 20):
            h.update(block)
    return h.hexdigest()


def _meta_pattern(meta: dict[str, Any], source: Path) -> str | None:
    """The tiktoken spelling of the meta's pattern, if it names one."""
    pattern = meta.get("pattern")
    if pattern is None:
        return None
    if not isinstance(pattern, dict) or not isinstance(pattern.get("tiktoken"), str):
        raise TokenizerFileError(source, "'pattern' must be an object with a 'tiktoken' string")
    return pattern["tiktoken"]


def _meta_special_tokens(meta: dict[str, Any], source: Path) -> dict[str, int]:
    """The meta's special tokens, ``{}`` if it has none."""
    special = meta.get("special_tokens", {})
    if not isinstance(special, dict):
        raise TokenizerFileError(source, "'special_tokens' must be an object of token -> id")
    return dict(special)


def _known_meta(path: str | os.PathLike[str]) -> dict[str, Any]:
    """What a companion would say of a published vocabulary; ``{}`` for any other file."""
    known = recognise(path)
    if known is None:
        return {}
    return {"pattern": {"tiktoken": NAMED_PATTERNS[known.pattern].tiktoken},
            "special_tokens": dict(known.special_tokens)}


def load(
    path: str | os.PathLike[str],
    *,
    pattern: str | None = None,
    special_tokens: dict[str, int] | None = None,
) -> tiktoken.Encoding:
    """Load ``DIR/NAME.tiktoken`` (+ ``DIR/NAME.meta.json``) as a ``tiktoken.Encoding``.

    ``pattern`` and ``special_tokens`` override the companion file (or, for
    OpenAI's files without one, what they are known to use), each replacing
    that part of it whole (``special_tokens={}``: no special tokens);
    ``special_tokens`` is a dict of token -> id, and anything else (a list of
    names: the ids would be guesses) raises ``UsageError``, a ``ValueError``.
    ``pattern`` takes what a config's ``pattern:`` takes, a name (``"default"``,
    ``"cl100k"``, ``"o200k"``, ``"gpt2"``) or a regex, checked as a config's is
    (``checked_pattern``): a regex that can match the empty string or leaves a
    character unmatched raises ``UnsafePattern``, a ``ValueError``, instead of
    a tiktoken panic at the first encode.

    Without a companion, OpenAI's ``cl100k_base`` and ``o200k_base`` files,
    recognised by content (``known_bases``), get their own pattern and special
    tokens, any other file the default pattern and none; such a file gets the
    structural checks only (valid lines and base64, unique tokens and ranks,
    all 256 single bytes). A companion that does not describe its
    ``.tiktoken`` is refused (``check_companion``), so a set mixed by a publish
    cut short never gives special tokens the wrong ids.

    Raises ``ValueError`` naming the file on anything invalid or unreadable
    (``TokenizerFileError`` for the ``.tiktoken`` itself, a missing one
    included).
    """
    if special_tokens is not None and not isinstance(special_tokens, dict):
        raise UsageError(f"load(): special_tokens takes a dict of token -> id (e.g. {{'<|endoftext|>': 50256}}), "
                         f"got a {type(special_tokens).__name__}; leave it out to keep the file's own")
    ranks, meta = read_checked(path)
    companion = meta_path(path)
    if not meta:
        meta = _known_meta(path)
    pat_str = checked_pattern(pattern).tiktoken if pattern is not None else _meta_pattern(meta, companion)
    if pat_str is None:
        pat_str = resolve_pattern(None).tiktoken
    special = dict(special_tokens) if special_tokens is not None else _meta_special_tokens(meta, companion)
    validate_special_tokens(ranks, special)
    return tiktoken.Encoding(
        name=split_name(path)[1],
        pat_str=pat_str,
        mergeable_ranks=ranks,
        special_tokens=special,
    )
