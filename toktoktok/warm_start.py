"""Warm start (docs/configuration.md): begin from an existing vocabulary instead of bytes +
hardcoded merges.

Every token and special token of the base keeps its id, gaps included; new
merges take ids above the highest id the base uses (its special tokens
included), so the starting ``Vocab`` is the base's ranks padded with gaps up
to that id. Special ids of a ``.tiktoken`` base come from its companion
``.meta.json`` when there is one, and ``warm_start.special_tokens`` adds to
or overrides them.

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

from toktoktok.hf import read_hf_tokenizer
from toktoktok.loading import check_companion, meta_path, read_meta
from toktoktok.tiktoken_file import missing_single_bytes, read_tiktoken, validate_special_tokens
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
            raise ValueError(f"{path}: the vocabulary lacks {len(missing)} of the 256 single bytes")
        return ranks, specials
    ranks = read_tiktoken(path)
    companion = meta_path(path)
    meta = read_meta(companion) if companion.is_file() else {}
    if meta:
        check_companion(path, meta, ranks)
    specials = dict(meta.get("special_tokens", {}))
    return ranks, specials


def load_base(path: Path, *, special_tokens: dict[str, int] | None = None) -> Base:
    """Read a ``.tiktoken`` (optionally .gz) or byte-level ``tokenizer.json`` base.

    Each stage asks for the base (the check before work, every phase's
    starting vocabulary, export): the file is read once per process while it
    is unchanged (same size and mtime).
    """
    st = Path(path).stat()
    extra = tuple(sorted((special_tokens or {}).items()))
    base = _load(str(path), st.st_size, st.st_mtime_ns, extra)
    return Base(base.vocab, dict(base.special_tokens))


@lru_cache(maxsize=4)
def _load(path: str, size: int, mtime_ns: int, extra: tuple[tuple[str, int], ...]) -> Base:
    ranks, specials = _read(Path(path))
    specials |= dict(extra)
    validate_special_tokens(ranks, specials)
    top = max([*ranks.values(), *specials.values()])
    vocab = Vocab.from_ranks(ranks)
    gaps = top + 1 - len(vocab)
    return Base(vocab.extended([b""] * gaps) if gaps else vocab, specials)
