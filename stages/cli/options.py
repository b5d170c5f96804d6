"""The options the commands share, and what they give: the config loaded (``-c``,
``-v``, ``--engine``, ``--force``, ``--phase``), the tokenizer loaded (``-t``
or ``-c``, ``--pattern``); failures end the command (``guard.guarded``)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import click

from ..workdir.progress import Progress
from .guard import guarded

CONFIG_HELP = "the YAML configuration (docs/configuration.md)"
TOKENIZER_HELP = ("A .tiktoken (pattern and special tokens from its .meta.json), a byte-level BPE tokenizer.json or "
                  "a NAME.hf/ folder holding one, a config (.yaml: its output), or a stock name (cl100k_base, "
                  "o200k_base, r50k_base, p50k_base, gpt2) read from tiktoken's cache; an existing path first.")


def check_pattern(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """``--pattern``: a regex that does not compile, or that the probe refuses (it can
    match the empty string, or leaves a character unmatched), is a usage error (exit 2)."""
    if value is None:
        return None
    from toktoktok.patterns import checked_pattern

    try:
        checked_pattern(value)
    except ValueError as exc:
        raise click.BadParameter(" ".join(str(exc).split()), ctx=ctx, param=param) from None
    return value


def config_options(func: Callable) -> Callable:
    """``-c CONFIG`` (required) and ``-v``."""
    func = click.option("-v", "--verbose", is_flag=True, help="Progress lines in logs, tracebacks on errors.")(func)
    func = click.option("-c", "--config", "config", required=True, type=click.Path(path_type=Path),
                        help=CONFIG_HELP)(func)
    return func


def force_option(func: Callable) -> Callable:
    return click.option("--force", is_flag=True, help="Redo the work even if its artifacts are up to date.")(func)


def phase_option(func: Callable) -> Callable:
    return click.option("--phase", default=None, help="Only this phase (its name, or its NN-slug).")(func)


def engine_option(func: Callable) -> Callable:
    return click.option("--engine", type=click.Choice(["local", "ray"]), default=None,
                        help="Where ingest counts (default: the config's engine:, else local); "
                             "ray needs pip install 'toktoktok[ray]'.")(func)


def tokenizer_options(func: Callable) -> Callable:
    """``-t TOK`` or ``-c CONFIG`` (the config's output), and ``--pattern`` for a bare ``.tiktoken``."""
    func = click.option("--pattern", default=None, callback=check_pattern,
                        help="Pattern in place of the tokenizer's own (its .meta.json's or tokenizer.json's): a name "
                             "(cl100k, o200k, gpt2, default, each also NAME-digits) or a regex. A bare .tiktoken has "
                             "cl100k_base's and o200k_base's own, else the default pattern.")(func)
    func = click.option("-c", "--config", "config", type=click.Path(path_type=Path), default=None,
                        help="Use this config's output .tiktoken (instead of --tokenizer).")(func)
    func = click.option("-t", "--tokenizer", default=None, metavar="TOKENIZER", help=TOKENIZER_HELP)(func)
    return func


def config_of(config: Path, verbose: bool, engine: str | None = None):
    """The config of ``-c``, loaded (``--engine`` over its ``engine:``), and the
    progress line it asks for."""
    import dataclasses

    from toktoktok.config import load_config

    cfg = guarded(lambda: load_config(config), verbose)
    if engine is not None:  # --engine wins over the config's engine:
        cfg = dataclasses.replace(cfg, engine=engine)
    return cfg, Progress(verbose=verbose or cfg.verbose)


def tokenizer_of(tokenizer: str | None, config: Path | None, pattern: str | None, verbose: bool):
    """The tokenizer of ``-t`` or ``-c`` (exactly one), loaded."""
    from ..commands.texts import load_tokenizer, tokenizer_path

    path = guarded(lambda: tokenizer_path(tokenizer, config), verbose)
    return guarded(lambda: load_tokenizer(path, pattern, override=True), verbose)
