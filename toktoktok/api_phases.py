"""``toktoktok.train``'s phases: ``texts`` and ``merges`` as one phase, or ``phases=`` checked.

A phase of ``phases=`` is a config's phase whose one source is its texts:
``{"name": ..., "merges": ..., "texts": ..., "text_column": ...}`` (``merges``
may be left out of one phase with ``vocab_size``: it gets the rest). Names
are unique as in a config (ignoring case and punctuation), and each phase's
slug (``NN-name``) keys its held-out choice and sample as the config's does.

    >>> [p["slug"] for p in plan(None, None, [{"name": "English", "merges": 5, "texts": ["a"]},
    ...                                      {"name": "code", "merges": 5, "texts": ["b"]}], "text", None)]
    ['01-english', '02-code']
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from toktoktok.config import MAX_MERGES
from toktoktok.config.schema import MAX_TOKEN_WORDS
from toktoktok.errors import UsageError

PHASE_NAME = "train"  # the one phase of ``texts`` and ``merges``: its name is the Encoding's name
PHASE_SLUG = "01-train"  # and its slug, which the held-out and sample hashes take
PHASE_KEYS = ("name", "merges", "texts", "text_column", "pattern", "max_token_words")


def plan(texts: Any, merges: Any, phases: Any, text_column: Any, vocab_size: Any) -> list[dict[str, Any]]:
    """The phases to train: ``phases`` checked, or the one phase ``texts`` and ``merges`` make."""
    from toktoktok.config.schema import slugify

    if phases is None:
        if texts is None:
            raise UsageError("train(): give texts (an iterable of strings, each one document, or a column of "
                             "strings) and merges, or phases=[{\"name\": ..., \"merges\": ..., \"texts\": ...}, ...]")
        if merges is None and vocab_size is None:
            raise UsageError("train(): merges is required with texts (the number of new tokens to learn), "
                             "unless vocab_size is given (the number of ids in all)")
        _check_integer(merges, "merges", 0, MAX_MERGES)
        return [{"name": PHASE_NAME, "slug": PHASE_SLUG, "merges": merges, "texts": texts,
                 "text_column": _check_column(text_column, "text_column")}]
    given = [name for name, value in (("texts", texts), ("merges", merges)) if value is not None]
    if given:
        raise UsageError(f"train(): {' and '.join(given)} cannot be given with phases= (each phase gives its own "
                         "texts and merges)")
    if not isinstance(phases, (list, tuple)) or not phases:
        raise UsageError(f"train(): phases must be a non-empty list of {{name, merges, texts}}, got {phases!r:.60}")
    plan: list[dict[str, Any]] = []
    seen: dict[tuple[str, str], int] = {}
    for i, phase in enumerate(phases):
        where = f"phases[{i}]"
        if not isinstance(phase, dict):
            raise UsageError(f"train(): {where} must be a dict with name, merges and texts, got {type(phase).__name__}")
        unknown = [k for k in phase if k not in PHASE_KEYS]
        if unknown:
            raise UsageError(f"train(): {where}.{unknown[0]} is not a phase key (keys: {', '.join(PHASE_KEYS)})")
        for key in ("name", "texts") + (("merges",) if vocab_size is None else ()):
            if phase.get(key) is None:
                raise UsageError(f"train(): {where}.{key} is required")
        name = phase["name"]
        if not isinstance(name, str) or not name.strip() or not slugify(name):
            raise UsageError(f"train(): {where}.name must be a non-empty name, got {name!r}")
        _check_integer(phase.get("merges"), f"{where}.merges", 0, MAX_MERGES)
        for key in (("name", name.casefold()), ("slug", slugify(name))):
            if key in seen:
                raise UsageError(f"train(): {where}.name {name!r} is too close to phases[{seen[key]}].name: "
                                 "phase names must be unique (ignoring case and punctuation)")
            seen[key] = i
        plan.append({"name": name, "slug": f"{i + 1:02d}-{slugify(name)}", "merges": phase.get("merges"),
                     "texts": phase["texts"],
                     "text_column": _check_column(phase.get("text_column", text_column), f"{where}.text_column"),
                     "pattern": _check_pattern(phase.get("pattern"), i),
                     "max_token_words": _check_integer(phase.get("max_token_words"), f"{where}.max_token_words", 1,
                                                       MAX_TOKEN_WORDS, or_none=True)})
    return plan


def _check_pattern(pattern: Any, index: int) -> Any:
    """A phase's own ``pattern`` checked as a config's (None: the top-level one)."""
    if pattern is None:
        return None
    from toktoktok.config.sections import validate_pattern
    from toktoktok.config_errors import Context
    from toktoktok.errors import ConfigError

    try:
        return validate_pattern(Context(file="train()", base_dir=Path.cwd()), pattern, ("phases", index, "pattern"))
    except ConfigError as exc:
        raise UsageError(str(exc)) from None


def _check_integer(value: Any, key: str, low: int, high: int, *, or_none: bool = False) -> Any:
    """``value`` if it is None or an integer from ``low`` to ``high``; else UsageError naming ``key``."""
    if value is not None and (not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high):
        raise UsageError(f"train(): {key} must be an integer from {low} to {high}{' or None' if or_none else ''}, "
                         f"got {value!r}")
    return value


def _check_column(text_column: Any, key: str) -> str:
    if not isinstance(text_column, str) or not text_column:
        raise UsageError(f"train(): {key} must be a non-empty string, got {text_column!r}")
    return text_column
