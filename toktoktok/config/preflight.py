"""The checks that need files, in one named step: ``preflight(cfg)``, before any work.

``load_config`` validates the YAML and, for a warm start, calls
``recognise_warm_start``: the base is read (once a process: ``warm_start``
keeps its bytes, and the vocabulary made of them) and recognised by content,
for the pattern and the special tokens OpenAI's ``cl100k_base`` and
``o200k_base`` bring (another ``.tiktoken`` base without a companion
``.meta.json`` must list ``warm_start.special_tokens``, ``{}``: none).

``preflight(cfg)`` then takes the vocabulary from that same read: it must be
valid and leave room for the new special tokens; ``vocab_size`` is fitted to
its size (its highest id + 1); an ``hf:`` role may name one of its special
tokens; every source lists its files (with ``on_bad_file: fail``, any
listed file that cannot be opened, or a broken symbolic link, is an error),
and one with a ``documents:`` rule that cuts text lists no file of rows.
Each problem is a ``ConfigError`` naming the key and its YAML line. The
stages' ``workdir.check_ready`` calls it, then checks the folders it writes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from toktoktok.config_errors import Context, config_error, describe
from toktoktok.patterns import NAMED_PATTERNS, Pattern

from .schema import Config, Source, WarmStart
from .sections import validate_pattern
from .vocab_size import resolve_vocab_size

if TYPE_CHECKING:
    from toktoktok.known_bases import KnownBase
    from toktoktok.warm_start import Base


def recognise_warm_start(ctx: Context, warm_start: WarmStart | None) -> KnownBase | None:
    """The published vocabulary the warm start holds (None: another, or no warm start).

    Without ``warm_start.special_tokens`` the base must say its own (a
    companion, a ``tokenizer.json``, or its content); else ``ConfigError``.
    """
    if warm_start is None:
        return None
    from toktoktok.warm_start import missing_special_tokens, published_base  # reads the base (imports numpy)

    path = ("warm_start",)
    if warm_start.special_tokens is None:
        try:
            problem = missing_special_tokens(warm_start.file)
        except ValueError as exc:
            raise ctx.error(path + ("file",), f"is not a usable base vocabulary: {exc}") from None
        if problem:
            raise ctx.error(path + ("special_tokens",), problem)
    return published_base(warm_start.file)


def warm_start_pattern(ctx: Context, raw: Any, known: KnownBase | None) -> tuple[Pattern, tuple[str, ...]]:
    """``pattern:``, and a warning if it is not the one the published warm-start base
    ``known`` was trained with; left out, that base's pattern (``cl100k`` for cl100k_base)."""
    if known is None:
        return validate_pattern(ctx, raw), ()
    own = NAMED_PATTERNS[known.pattern]
    if raw is None:
        return own, ()
    pattern = validate_pattern(ctx, raw)
    if pattern.tiktoken == own.tiktoken:
        return pattern, ()
    shown = pattern.name if pattern.name != "custom" else f"a custom regex {describe(raw)}"
    return pattern, (f"pattern: {shown} is not {own.name}, the pattern the warm start {known.name} was trained "
                     f"with: its merges were learned on {own.name}'s pieces (leave pattern: out to use {own.name})",)




def _check_hf_roles(cfg: Config, base_specials: dict[str, int]) -> None:
    """Each ``hf:`` role names a special token of the config or of the warm start."""
    declared = set(cfg.special_tokens) | set(base_specials)
    for role, token in (cfg.hf.roles if cfg.hf else {}).items():
        if token is not None and token not in declared:
            known = ", ".join(repr(t) for t in sorted(declared)) or "none are declared"
            raise config_error(cfg.path, ("hf", role), f"is {token!r}, not a declared special token "
                                                       f"(special tokens of the config and the warm start: {known})")


def _check_warm_start(cfg: Config) -> Base:
    """The base vocabulary must be valid and leave room for the new special tokens."""
    from toktoktok.tiktoken_file import validate_special_tokens
    from toktoktok.warm_start import load_base  # the vocabulary of the base's one read

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


def _check_document_rule(cfg: Config, where: tuple[Any, ...], src: Source, files: list[Any]) -> None:
    """A ``documents:`` rule other than ``file`` cuts text files only: a source that
    lists a file of rows (``.jsonl``, ``.parquet``, ``.arrow``: each row is a
    document) with one is refused, naming the key and the first such file."""
    from toktoktok.sources import ROW_KINDS, file_format

    if src.documents in (None, "file"):
        return
    rows = next((f for f in files if file_format(f)[0] in ROW_KINDS), None)
    if rows is not None:
        shown = "{split_on: ...}" if src.documents.startswith("split-on:") else src.documents
        raise config_error(cfg.path, where, f"is {shown}, which cuts text files only, but the source reads {rows} "
                                            f"(a file of rows: each row is a document; leave documents: out or "
                                            f"give documents: file)")


def preflight(cfg: Config, listed: dict | None = None) -> tuple[Config, list[str]]:
    """Everything about the config that needs its files, checked before work starts;
    returns the config with every phase's merges known, and its warnings.

    Raises ``ConfigError`` naming the key (and its YAML line) for a warm start
    that is not a usable vocabulary or leaves no room for the new special
    tokens, a ``vocab_size`` that cannot be made from its base, an ``hf:`` role
    that is no special token, and a source with no readable file. ``listed``
    (with ``on_bad_file: fail``, where the listing is checked): each source's
    files, for the run that follows.
    """
    from toktoktok.sources import SourceError, list_source_files  # the readers: loaded only for a run

    if cfg.warm_start is not None:
        base = _check_warm_start(cfg)
        cfg = resolve_vocab_size(cfg, base_size=len(base.vocab), base_specials=base.special_tokens)
        _check_hf_roles(cfg, base.special_tokens)
    warnings = list(cfg.warnings)
    strict = cfg.on_bad_file == "fail"
    for phase in cfg.phases:
        for j, src in enumerate(phase.sources):
            where = ("phases", phase.index - 1, "sources", j, "path" if src.is_dir else "file")
            try:
                files = list_source_files(src, strict=strict)
            except (SourceError, OSError) as exc:
                raise config_error(cfg.path, where, f"has a problem: {exc}") from exc
            if listed is not None and strict:  # what the run reads, so that it lists each source once
                listed[src] = files
            _check_document_rule(cfg, ("phases", phase.index - 1, "sources", j, "documents"), src, files)
    return cfg, warnings
