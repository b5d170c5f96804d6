"""``vocab_size: N`` fitted: the phase that left ``merges:`` out gets the rest of N.

``vocab_size`` is the number of embedding rows, everything included
(``toktoktok.id_layout``). Without a warm start the base's size is known
from the config, and ``load_config`` fits it; with one, the base's size is
its highest id + 1, known once ``preflight`` has read it, and until then
that phase's ``merges`` is None. Nothing here reads a file.

    >>> from pathlib import Path
    >>> from toktoktok.config.schema import Config
    >>> base_size(Config(Path("c.yaml"), Path("t.tiktoken"), (), None, Path("w")))
    1417
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from toktoktok import id_layout
from toktoktok.config_errors import KeyPath, config_error
from toktoktok.errors import ConfigError, LayoutError

from .schema import MAX_MERGES, Config
from .sections import phase_warnings


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
    return replace(cfg, phases=phases, warnings=cfg.warnings + phase_warnings(tuple(rest)))
