"""``toktoktok.train``: train a tokenizer from Python, get a ``tiktoken.Encoding``.

    >>> import toktoktok
    >>> docs = ["the cat sat on the mat. " * 20, "the dog sat on the log. " * 20]
    >>> enc = toktoktok.train(docs, merges=10, special_tokens=["<|endoftext|>"],
    ...                       hardcoded_merges=False, heldout_share=0, threads=1)
    >>> enc.n_vocab, enc.decode(enc.encode(" the cat"))
    (267, ' the cat')

This is the one place where the library drives the pipeline: ``train``
imports ``stages`` (ingest, train, export) inside the function, so importing
``toktoktok`` never imports the command-line stages.

Decisions:

- ``texts`` is an iterable of strings, each one document (its sampling and
  held-out unit, SPEC §4). They are written, streamed, as a ``.jsonl`` file
  (one ``{"text": ...}`` a line, ASCII-escaped so that any string, lone
  surrogates included, survives; those become U+FFFD as in any source) into
  a temporary directory, which also holds the config and the work directory
  and is removed at the end, whatever happens. A very large corpus is better
  given as files through a config: the copy costs disk space and time.
- The config built for texts has one phase named ``train`` with
  ``merges``, ``special_tokens``, and every other SPEC §2 top-level option
  passed as a keyword (``hardcoded_merges=False``, ``heldout_share=0``,
  ``pattern="cl100k"``, ``seed=1``, ``warm_start={"file": ...}`` or just a
  path, ...). ``output=PATH`` keeps the trained ``.tiktoken`` (and its
  companions) at PATH; by default it lives in the temporary directory only.
  ``work_dir`` and ``phases`` cannot be given: the work directory is the
  temporary one and there is one phase.
- ``config=PATH`` (or a path as the only positional argument) runs that
  config exactly as ``toktok run -c PATH`` does, with its own outputs and
  work directory, and returns its tokenizer; ``merges``, ``special_tokens``
  and options cannot be combined with it.
- Every configuration problem (an unknown option, a wrong type, ``merges``
  missing) is a ``ValueError`` with the config's message (the temporary
  config's file name replaced by ``train()``); an item of ``texts`` that is
  not a string is a ``TypeError``. Failures while running (unreadable data)
  propagate as they are.
- The pipeline runs in this process, quietly (progress lines only on a
  terminal, or with ``verbose=True``).
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import tiktoken
import yaml

from toktoktok.config import TOP_KEYS, Config, ConfigError, load_config
from toktoktok.loading import load

PHASE_NAME = "train"
_NOT_OPTIONS = ("phases", "work_dir", "special_tokens")


def _run(cfg: Config) -> None:
    """Run every stage of ``cfg`` (the lazy import of ``stages`` happens here)."""
    from stages import pipeline
    from stages.progress import Progress

    pipeline.run(cfg, progress=Progress(verbose=cfg.verbose))


def _write_documents(texts: Iterable[str], path: Path) -> int:
    count = 0
    with open(path, "w", encoding="ascii") as fh:
        for text in texts:
            if not isinstance(text, str):
                raise TypeError(f"train(): texts[{count}] is {type(text).__name__}, expected a string (one document)")
            fh.write(json.dumps({"text": text}, ensure_ascii=True))
            fh.write("\n")
            count += 1
    return count


def _config_error(exc: ConfigError, config_file: Path) -> ValueError:
    """The config's message, with the temporary file's name replaced by ``train()``."""
    message = re.sub(rf"^{re.escape(str(config_file))}( line \d+)?: ", "train(): ", str(exc))
    message = message.replace("phases[0].merges", "merges").replace(str(config_file), "train()")
    return ValueError(message)


def _absolute(path: str | os.PathLike[str]) -> str:
    """A path given to ``train()`` is relative to the current folder, not to the temporary config."""
    return str(Path(path).expanduser().absolute())


def _options_doc(options: dict[str, Any]) -> dict[str, Any]:
    """Keyword options as config keys, checked to be top-level SPEC §2 options."""
    doc: dict[str, Any] = {}
    for key, value in options.items():
        if key in _NOT_OPTIONS or key not in TOP_KEYS:
            allowed = ", ".join(k for k in TOP_KEYS if k not in _NOT_OPTIONS)
            why = "is set by train()" if key in _NOT_OPTIONS else "is not an option"
            raise ValueError(f"train(): {key!r} {why} (options: merges, special_tokens, config, {allowed})")
        if key == "warm_start" and isinstance(value, (str, os.PathLike)):
            value = {"file": value}
        if key == "warm_start" and isinstance(value, dict) and isinstance(value.get("file"), (str, os.PathLike)):
            value = {**value, "file": _absolute(value["file"])}
        elif key == "output" and isinstance(value, (str, os.PathLike)):
            value = _absolute(value)
        doc[key] = value
    return doc


def train(
    texts: Iterable[str] | str | os.PathLike[str] | None = None,
    *,
    merges: int | None = None,
    special_tokens: Iterable[str] = (),
    config: str | os.PathLike[str] | None = None,
    **options: Any,
) -> tiktoken.Encoding:
    """Train a tokenizer and return it as a ``tiktoken.Encoding``.

    ``texts``: an iterable of strings, each one document; or, instead,
    ``config``: a YAML config (SPEC §2), run as ``toktok run -c`` would.
    ``merges``: the number of new tokens to learn from the texts (required
    with texts, unless ``vocab_size=N`` is given: then the phase learns what
    makes exactly N ids, special tokens and padding included). ``special_tokens``: added after the merges, in this order.
    ``**options``: any other top-level config option (``hardcoded_merges``,
    ``heldout_share``, ``pattern``, ``seed``, ``min_frequency``,
    ``max_token_bytes``, ``pad_to_multiple_of``, ``warm_start``, ``threads``,
    ``working_set_mb``, ``output``, ...).

    Runs the same stages as the command line (this function imports
    ``stages`` lazily: it is the one place where the library drives the
    pipeline), in a temporary work directory removed before it returns.
    Raises ``ValueError`` for a configuration problem.
    """
    if isinstance(texts, (str, os.PathLike)):
        if config is not None:
            raise ValueError("train(): give texts or config, not both")
        if not Path(texts).is_file():
            raise ValueError("train(): a single string is not a list of documents: pass [text] for one document, "
                             "or the path of an existing config file")
        texts, config = None, texts
    if config is not None:
        if texts is not None or merges is not None or tuple(special_tokens) or options:
            raise ValueError("train(): with config=, give no texts, merges, special_tokens or options "
                             "(they are in the config)")
        return _train_config(Path(config))
    if texts is None:
        raise ValueError("train(): give texts (an iterable of strings) or config (a YAML file)")
    if merges is None and options.get("vocab_size") is None:
        raise ValueError("train(): merges is required with texts (the number of new tokens to learn), "
                         "unless vocab_size is given (the number of ids in all)")
    return _train_texts(texts, merges, list(special_tokens), options)


def _train_config(path: Path) -> tiktoken.Encoding:
    try:
        cfg = load_config(path)
        _run(cfg)
    except ConfigError as exc:
        raise ValueError(str(exc)) from exc
    return load(cfg.output)


def _train_texts(texts: Iterable[str], merges: Any, special_tokens: list[str],
                 options: dict[str, Any]) -> tiktoken.Encoding:
    doc = _options_doc(options)
    with tempfile.TemporaryDirectory(prefix="toktoktok-train-") as tmp:
        root = Path(tmp)
        data = root / "texts.jsonl"
        config_file = root / "config.yaml"
        _write_documents(texts, data)
        full: dict[str, Any] = {"output": str(root / "out" / f"{PHASE_NAME}.tiktoken")}
        full.update(doc)
        full["work_dir"] = str(root / "work")
        if special_tokens:
            full["special_tokens"] = special_tokens
        phase = {"name": PHASE_NAME, "merges": merges, "sources": [{"file": str(data)}]}
        if merges is None:  # vocab_size: the one phase gets the rest
            del phase["merges"]
        full["phases"] = [phase]
        config_file.write_text(yaml.safe_dump(full, allow_unicode=True, sort_keys=False), encoding="utf-8")
        try:
            cfg = load_config(config_file)
            _run(cfg)
        except ConfigError as exc:
            raise _config_error(exc, config_file) from None
        return load(cfg.output)
