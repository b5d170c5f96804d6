"""Warm start (docs/configuration.md): begin from an existing vocabulary instead of bytes +
hardcoded merges.

Every token and special token of the base keeps its id, gaps included; new
merges take ids above the highest id the base uses (its special tokens
included), so the starting ``Vocab`` is the base's ranks padded with gaps up
to that id. Special ids of a ``.tiktoken`` base come from its companion
``.meta.json`` when there is one, else, for OpenAI's ``cl100k_base`` and
``o200k_base`` (recognised by content, ``known_bases``), from tiktoken's
definitions; ``warm_start.special_tokens`` adds to or overrides them. Any
other base without a companion must list its special tokens (the config
refuses it otherwise): none would be guessed, and a guessed "none" gives
their ids to new merges.

    >>> import tempfile, pathlib
    >>> from toktoktok.tiktoken_file import write_tiktoken
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> write_tiktoken(d / "b.tiktoken", {bytes([b]): b for b in range(256)} | {b"ab": 256})
    >>> base = load_base(d / "b.tiktoken", special_tokens={"<|end|>": 300})
    >>> len(base.vocab), base.special_tokens
    (301, {'<|end|>': 300})
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from toktoktok.errors import TokenizerFileError
from toktoktok.hf import read_hf_tokenizer
from toktoktok.known_bases import KNOWN_BASES, KnownBase, recognise_bytes
from toktoktok.loading import meta_path, read_checked
from toktoktok.tiktoken_file import decompressed_bytes, missing_single_bytes, read_tiktoken, validate_special_tokens
from toktoktok.vocab import Vocab


@dataclass(frozen=True)
class Base:
    """A warm start's vocabulary (gaps up to its highest id) and special tokens."""

    vocab: Vocab
    special_tokens: dict[str, int]


def _read(path: Path) -> tuple[dict[bytes, int], dict[str, int]]:
    if path.name.endswith(".json"):
        ranks, specials = read_hf_tokenizer(path)
        missing = missing_single_bytes(ranks)
        if missing:
            raise TokenizerFileError(path, f"the vocabulary lacks {len(missing)} of the 256 single bytes")
        return ranks, specials
    ranks, meta = read_checked(path, data=_file_bytes(path))
    if meta:
        return ranks, dict(meta.get("special_tokens", {}))
    known = published_base(path)
    return ranks, dict(known.special_tokens) if known is not None else {}


def published_base(path: Path) -> KnownBase | None:
    """OpenAI's vocabulary this base holds, when it has no companion to say more.

    A ``tokenizer.json`` carries its own added tokens and a companion
    ``.meta.json`` its special tokens and pattern: they are believed first.
    """
    path = Path(path)
    if path.name.endswith(".json") or meta_path(path).is_file():
        return None
    try:
        return recognise_bytes(_file_bytes(path))
    except (OSError, ValueError):  # unreadable: not recognised (its readers say what is wrong)
        return None


def _file_bytes(path: Path) -> bytes:
    """A ``.tiktoken`` base's decompressed bytes, read once a process while the file is
    unchanged (same size and mtime): recognising it and parsing it share the read."""
    st = Path(path).stat()
    return _read_once(str(path), st.st_size, st.st_mtime_ns)


@lru_cache(maxsize=1)
def _read_once(path: str, size: int, mtime_ns: int) -> bytes:
    return decompressed_bytes(path)


def missing_special_tokens(path: Path) -> str | None:
    """Why ``warm_start.special_tokens`` must be given for this base, or None.

    A ``.tiktoken`` has no room for special tokens: unless a companion, a
    ``tokenizer.json`` or the content (OpenAI's files) says which ids they
    hold, those ids would silently become new merges. A file that is no
    vocabulary at all says so first (``TokenizerFileError``): listing special
    tokens would not help it.
    """
    path = Path(path)
    if path.name.endswith(".json") or meta_path(path).is_file() or published_base(path) is not None:
        return None
    read_tiktoken(path, data=_file_bytes(path))  # only on the way to an error: its own problem first
    known = " or ".join(KNOWN_BASES)
    return (f"is required: {path.name} has no companion {meta_path(path).name} and is not {known} "
            "(recognised by content), so the ids its special tokens hold are unknown and would go to new "
            "merges; list them with their ids (e.g. {'<|endoftext|>': 50256}), or write special_tokens: {} "
            "if it has none")


def load_base(path: Path, *, special_tokens: dict[str, int] | None = None) -> Base:
    """Read a ``.tiktoken`` (optionally .gz or .zst) or byte-level ``tokenizer.json`` base.

    Each stage asks for the base (the check before work, every phase's
    starting vocabulary, export): the file is read once per process while it
    and its companion are unchanged (same size and mtime).
    """
    st = Path(path).stat()
    extra = tuple(sorted((special_tokens or {}).items()))
    companion = meta_path(path)
    meta_st = companion.stat() if companion.is_file() else None
    meta_key = (meta_st.st_size, meta_st.st_mtime_ns) if meta_st else None
    base = _load(str(path), st.st_size, st.st_mtime_ns, meta_key, extra)
    return Base(base.vocab, dict(base.special_tokens))


@lru_cache(maxsize=4)
def _load(path: str, size: int, mtime_ns: int, companion: tuple[int, int] | None,
          extra: tuple[tuple[str, int], ...]) -> Base:
    ranks, specials = _read(Path(path))
    specials |= dict(extra)
    validate_special_tokens(ranks, specials)
    top = max([*ranks.values(), *specials.values()])
    vocab = Vocab.from_ranks(ranks)
    gaps = top + 1 - len(vocab)
    return Base(vocab.extended([b""] * gaps) if gaps else vocab, specials)
