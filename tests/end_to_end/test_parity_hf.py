"""With hardcoded merges off, our merges equal Hugging Face BpeTrainer's, rank for rank.

Hugging Face is fed whole documents (never lines) through a Split
pre-tokenizer with the same pattern and a ByteLevel step with no regex of its
own; we count the same documents' pieces with the `regex` module.
"""

from __future__ import annotations

import json
from collections import Counter

import pytest
import regex

from tests.helpers import SHARED, as_inventory, stdlib_text
from toktoktok.merge import train_phase
from toktoktok.patterns import DEFAULT_PATTERN
from toktoktok.vocab import BYTE_ORDER, Vocab

tokenizers = pytest.importorskip("tokenizers")


def byte_level_decoder() -> dict[str, int]:
    """Hugging Face's ByteLevel alphabet: printable bytes stand for themselves,
    the others for chr(256 + k) in byte order."""
    printable = [b for b in BYTE_ORDER[:188]]
    others = sorted(set(range(256)) - set(printable))
    return {chr(b): b for b in printable} | {chr(256 + k): b for k, b in enumerate(others)}


def hf_merges(docs: list[str], merges: int, min_frequency: int) -> list[tuple[bytes, bytes]]:
    from tokenizers import Regex, Tokenizer, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(DEFAULT_PATTERN), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    trainer = trainers.BpeTrainer(vocab_size=256 + merges, min_frequency=min_frequency, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(docs, trainer)
    decode = byte_level_decoder()
    as_bytes = lambda s: bytes(decode[ch] for ch in s)  # noqa: E731
    pairs = json.loads(tok.to_str())["model"]["merges"]
    return [(as_bytes(a), as_bytes(b)) for a, b in (p if isinstance(p, list) else p.split(" ") for p in pairs)]


def our_merges(docs: list[str], merges: int, min_frequency: int) -> list[tuple[bytes, bytes]]:
    pieces = Counter(p.encode() for d in docs for p in regex.findall(DEFAULT_PATTERN, d))
    result = train_phase(Vocab.initial(hardcoded=False), *as_inventory(pieces), merges=merges,
                         min_frequency=min_frequency)
    return [(result.vocab.token(int(a)), result.vocab.token(int(b))) for a, b in zip(result.left, result.right)]


def test_byte_level_alphabet_order_is_ours():
    from tokenizers import pre_tokenizers

    decode = byte_level_decoder()
    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    assert [decode[ch] for ch in alphabet] == list(BYTE_ORDER)


@pytest.mark.parametrize("min_frequency", [2, 5])
def test_stdlib_text_same_merges(min_frequency):
    docs = stdlib_text(300_000).split("\n\n")
    ours = our_merges(docs, 1500, min_frequency)
    assert len(ours) == 1500
    assert ours == hf_merges(docs, 1500, min_frequency)


def _shared_docs() -> list[str]:
    docs = (SHARED / "data/tinyshakespeare.txt").read_text().split("\n\n")
    for path in sorted((SHARED / "data/multilingual").iterdir()):
        docs += path.read_text(errors="replace").split("\n\n")
    return docs


@pytest.mark.skipif(not (SHARED / "data/multilingual").is_dir(), reason="needs ../shared")
def test_shakespeare_and_multilingual_same_merges():
    docs = _shared_docs()
    ours = our_merges(docs, 3000, 2)
    assert len(ours) == 3000
    assert ours == hf_merges(docs, 3000, 2)


def _corpus_docs(name: str, mb: int) -> list[str]:
    import zstandard

    with open(SHARED / "corpora" / f"{name}.txt.zst", "rb") as f:
        raw = zstandard.ZstdDecompressor().stream_reader(f).read(mb << 20)
    text = raw.decode("utf-8", "ignore")
    return text[: text.rfind("\n\n")].split("\n\n")


@pytest.mark.skipif(not (SHARED / "corpora").is_dir(), reason="needs ../shared/corpora")
@pytest.mark.parametrize("name", ["english", "code", "german"])
def test_shared_corpora_same_merges(name):
    docs = _corpus_docs(name, 3)
    ours = our_merges(docs, 4000, 2)
    assert len(ours) == 4000
    assert ours == hf_merges(docs, 4000, 2)
