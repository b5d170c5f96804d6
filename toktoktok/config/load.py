"""``load_config(path)``: the YAML read, every section validated, a frozen ``Config`` built.

The steps, in the order their problems are found (the first one is raised):
the YAML read safely with each key's line (``toktoktok.config_errors``); the
top-level keys; ``output``, ``vocab_size``, ``phases``; the special tokens and
the warm start (read and recognised here, ``preflight.recognise_warm_start``:
a published base brings its pattern); the pattern and the other settings;
``hf`` (its chat template compiled as transformers compiles it); ``work_dir``
and its safety; ``vocab_size`` fitted when no warm start is needed to know
the base's size. ``check_settings`` does the same for the
settings of ``toktoktok.train``, given as a mapping.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from toktoktok import id_layout
from toktoktok.config_errors import Context, read_document
from toktoktok.errors import LayoutError

from .preflight import recognise_warm_start, warm_start_pattern
from .schema import MAX_VOCAB_SIZE, TOP_KEYS, Config
from .sections import (
    all_special_tokens,
    check_hf_chat_template,
    check_nesting,
    check_work_dir_safety,
    phase_warnings,
    scalar_settings,
    validate_hf,
    validate_output,
    validate_phases,
    validate_special_tokens,
    validate_warm_start,
    validate_work_dir,
)
from .values import check_keys, optional_integer, require
from .vocab_size import base_size, resolve_vocab_size


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
    check_keys(ctx, (), doc, TOP_KEYS)
    output = validate_output(ctx, require(ctx, doc, (), "output"))
    vocab_size = optional_integer(ctx, ("vocab_size",), doc.get("vocab_size"), id_layout.BYTES + 1, MAX_VOCAB_SIZE)
    phases = validate_phases(ctx, require(ctx, doc, (), "phases"), merges_optional=vocab_size is not None)
    settings = _settings(ctx, doc)
    hf = validate_hf(ctx, doc, settings["special_tokens"], settings["warm_start"])
    template_warnings = check_hf_chat_template(ctx, hf)
    cfg = Config(
        path=config_path.resolve(),
        output=output,
        phases=phases,
        work_dir=validate_work_dir(ctx, doc.get("work_dir"), output),
        warnings=phase_warnings(phases) + settings.pop("pattern_warnings") + template_warnings,
        vocab_size=vocab_size,
        hf=hf,
        **settings,
    )
    if hf is not None:
        cfg = replace(cfg, export_hf=True)
    check_work_dir_safety(ctx, cfg)
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
    check_keys(ctx, (), settings, TOP_KEYS)
    return _settings(ctx, settings)


def _settings(ctx: Context, doc: dict[str, Any]) -> dict[str, Any]:
    """The ``Config`` fields of every top-level key but output, phases and work_dir
    (the warm start read where its special tokens were checked before: the first problem is the same)."""
    special_tokens = validate_special_tokens(ctx, doc.get("special_tokens"))
    warm_start = validate_warm_start(ctx, doc.get("warm_start"))
    known = recognise_warm_start(ctx, warm_start)  # the base's one read; its special tokens said
    check_nesting(ctx, all_special_tokens(special_tokens, warm_start))
    pattern, pattern_warnings = warm_start_pattern(ctx, doc.get("pattern"), known)
    return {"pattern": pattern, "special_tokens": special_tokens, "warm_start": warm_start,
            "pattern_warnings": pattern_warnings, **scalar_settings(ctx, doc)}
