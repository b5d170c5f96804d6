"""Hugging Face byte-level BPE: its alphabet, and reading a ``tokenizer.json``.

Hugging Face's ByteLevel step writes each byte as one printable character:
the bytes 33-126, 161-172 and 174-255 as themselves, the 68 others as
``chr(256 + k)`` in byte order. Sorted by code point, that alphabet is the
byte order of SPEC §3, which is why our rank order and its ids agree.

    >>> decode = byte_decoder()
    >>> decode["!"], decode["Ġ"], decode["Ċ"]
    (33, 32, 10)
    >>> token_bytes("Ġhello")
    b' hello'
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

from toktoktok.vocab import BYTE_ORDER


@cache
def byte_decoder() -> dict[str, int]:
    """ByteLevel character -> byte."""
    printable = BYTE_ORDER[:188]
    others = sorted(set(range(256)) - set(printable))
    return {chr(b): b for b in printable} | {chr(256 + k): b for k, b in enumerate(others)}


@cache
def byte_encoder() -> dict[int, str]:
    """Byte -> ByteLevel character."""
    return {b: ch for ch, b in byte_decoder().items()}


def token_bytes(text: str) -> bytes:
    """The bytes a ByteLevel token string stands for (KeyError if it is not one)."""
    decode = byte_decoder()
    return bytes(decode[ch] for ch in text)


def token_text(data: bytes) -> str:
    """The ByteLevel string of some bytes: ``token_text(b" hi") == "Ġhi"``."""
    encode = byte_encoder()
    return "".join(encode[b] for b in data)


def read_hf_tokenizer(path: Path) -> tuple[dict[bytes, int], dict[str, int]]:
    """Ranks and special tokens of a byte-level BPE ``tokenizer.json``.

    The ranks are the model's ids (tiktoken merges by rank; for a tokenizer
    trained by ``BpeTrainer`` ids follow merge order, so both encode alike).
    Added tokens become special tokens. Raises ValueError naming the file.
    """
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path}: cannot read the tokenizer.json ({exc})") from exc
    model = doc.get("model") if isinstance(doc, dict) else None
    if not isinstance(model, dict) or model.get("type") != "BPE" or not isinstance(model.get("vocab"), dict):
        raise ValueError(f"{path}: not a BPE tokenizer.json (model.type must be 'BPE' with a vocab)")
    added = {t["content"]: int(t["id"]) for t in doc.get("added_tokens") or []}
    ranks: dict[bytes, int] = {}
    for text, rank in model["vocab"].items():
        if text in added:
            continue
        try:
            ranks[token_bytes(text)] = int(rank)
        except KeyError:
            raise ValueError(f"{path}: vocab entry {text!r} is not byte-level (ByteLevel alphabet)") from None
    return ranks, added
