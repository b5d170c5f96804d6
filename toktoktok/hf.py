"""Hugging Face byte-level BPE: its alphabet, reading a ``tokenizer.json``, and the export.

The export (``write_hf``, ``tokenizer_json``) writes a tokenizer that
``tokenizers`` and ``transformers`` load and that gives exactly tiktoken's ids
(``encode(text, allowed_special="all")``): the pattern respelled for
Oniguruma (``onig_pattern``, from ``toktoktok.oniguruma``), and one merge per
token, derived the way tiktoken's encoder builds it (``bpe_merges``).

Hugging Face's ByteLevel step writes each byte as one printable character:
the bytes 33-126, 161-172 and 174-255 as themselves, the 68 others as
``chr(256 + k)`` in byte order. Sorted by code point, that alphabet is the
byte order of docs/vocabulary.md, which is why our rank order and its ids agree.

    >>> decode = byte_decoder()
    >>> decode["!"], decode["Ġ"], decode["Ċ"]
    (33, 32, 10)
    >>> token_bytes("Ġhello")
    b' hello'
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from functools import cache
from pathlib import Path

from toktoktok.errors import TokenizerFileError, UnsupportedTokenizer
from toktoktok.oniguruma import onig_pattern  # also re-exported: tests import it from here
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
        raise TokenizerFileError(path, f"cannot read the tokenizer.json ({exc})") from exc
    model = doc.get("model") if isinstance(doc, dict) else None
    if not isinstance(model, dict) or model.get("type") != "BPE" or not isinstance(model.get("vocab"), dict):
        kind = model.get("type") if isinstance(model, dict) else None
        raise UnsupportedTokenizer(path, f"a {kind or 'model-less'} tokenizer.json, not BPE: only a byte-level BPE "
                                 "(model.type 'BPE' with a vocab) can be read")
    added = {t["content"]: int(t["id"]) for t in doc.get("added_tokens") or []}
    ranks: dict[bytes, int] = {}
    for text, rank in model["vocab"].items():
        if text in added:
            continue
        try:
            ranks[token_bytes(text)] = int(rank)
        except KeyError:
            raise UnsupportedTokenizer(path, f"not a byte-level BPE: vocab entry {text!r} is not in "
                                     "the ByteLevel alphabet") from None
    return ranks, added


# ---------------------------------------------------------------------------
# The export: tokenizer.json and its companions.


def _bpe_parts(token: bytes, ranks: dict[bytes, int]) -> list[bytes]:
    """tiktoken's rule on ``token``'s own bytes, stopped when two parts are left.

    Join the adjacent pair whose joined bytes have the lowest rank (leftmost
    on ties), never the whole token itself. Returns the two parts, or the
    parts it got stuck at.
    """
    parts = [token[k : k + 1] for k in range(len(token))]
    while len(parts) > 2:
        best_rank, best = None, -1
        for k in range(len(parts) - 1):
            rank = ranks.get(parts[k] + parts[k + 1])
            if rank is not None and (best_rank is None or rank < best_rank):
                best_rank, best = rank, k
        if best_rank is None:
            break
        parts[best : best + 2] = [parts[best] + parts[best + 1]]
    return parts


def bpe_merges(ranks: dict[bytes, int]) -> list[tuple[bytes, bytes]]:
    """The merges Hugging Face's BPE needs to encode like tiktoken, in rank order.

    tiktoken joins, anywhere in a piece, the adjacent pair whose joined
    bytes have the lowest rank. When it builds a token ``t`` that way, the
    parts it joins are fully inside ``t``'s span and were built there by the
    same rule, so they are exactly what the rule makes of ``t``'s bytes
    alone: one pair per token, found by ``_bpe_parts``. Hugging Face applies
    its merges by priority (position in the list), so listing each token's
    pair in rank order makes it join the same pairs in the same order.

    A token whose own bytes never come together into two parts (possible in
    vocabularies made elsewhere) is never built by tiktoken's merging either;
    tiktoken emits it only when a whole piece equals it, which is what
    ``ignore_merges`` makes Hugging Face do, so it simply gets no merge.
    """
    merges: list[tuple[bytes, bytes]] = []
    for token, _rank in sorted(ranks.items(), key=lambda item: item[1]):
        if len(token) > 1:
            parts = _bpe_parts(token, ranks)
            if len(parts) == 2:
                merges.append((parts[0], parts[1]))
    return merges


def _check_exportable(ranks: dict[bytes, int], special_tokens: dict[str, int]) -> None:
    """What tiktoken would reject, and what Hugging Face would silently get wrong."""
    from toktoktok.tiktoken_file import validate_ranks, validate_special_tokens

    validate_ranks(ranks)  # repeated tokens or ranks, a missing single byte
    validate_special_tokens(ranks, special_tokens)
    encode = byte_encoder()
    texts = {"".join(encode[b] for b in token) for token in ranks}
    for special in special_tokens:
        if special in texts:
            raise ValueError(f"special token {special!r} is spelled like a vocabulary token in Hugging Face's "
                             "ByteLevel alphabet; tokenizers would give it that token's id")


def _byte_level(add_prefix_space: bool = False) -> dict:
    return {"type": "ByteLevel", "add_prefix_space": add_prefix_space, "trim_offsets": False, "use_regex": False}


def tokenizer_json(ranks: dict[bytes, int], special_tokens: dict[str, int], pattern: str) -> dict:
    """A byte-level BPE ``tokenizer.json`` document that encodes exactly like tiktoken.

    ``pattern`` is the tiktoken spelling (a name is not resolved here). Ids
    are the ranks (gaps allowed) and the special tokens' ids. Raises
    ValueError for a vocabulary tiktoken itself would reject.

    Decisions, each checked against tokenizers and tiktoken in the tests:

    - pre-tokenizer: ``Split`` with ``onig_pattern(pattern)``, behaviour
      ``Removed`` with ``invert: true``, i.e. the matches are the pieces and
      text the pattern does not cover is dropped, as tiktoken drops it (with
      ``Isolated`` that text would become pieces of its own; for the named
      patterns, which cover all text, the two are the same); then
      ``ByteLevel`` with no prefix space and no regex of its own.
    - model: BPE, merges from ``bpe_merges`` as ``"left right"`` strings
      (ByteLevel strings never hold a space, and every tokenizers version
      reads them), ``ignore_merges: true`` (tiktoken, too, takes a piece that
      is a token whole before merging anything).
    - special tokens: added tokens, not normalized, ``special: true``, and
      also entries of the model's vocab: tokenizers ignores an added token's
      ``id`` when it is not in the vocab and numbers it from the vocab's size
      (cl100k_base's ``<|endoftext|>`` would get 100256, not 100257).
    - no normalizer and no post-processor: nothing is added to the ids
      (tiktoken adds no BOS) and offsets are the ByteLevel pre-tokenizer's,
      untrimmed.
    """
    ranks = dict(ranks)
    special_tokens = dict(special_tokens)
    _check_exportable(ranks, special_tokens)
    encode = byte_encoder()

    def text(data: bytes) -> str:
        return "".join(encode[b] for b in data)

    ids = [(text(token), rank) for token, rank in ranks.items()] + list(special_tokens.items())
    vocab = dict(sorted(ids, key=lambda item: item[1]))
    merges = [f"{text(left)} {text(right)}" for left, right in bpe_merges(ranks)]
    added = [
        {"id": tid, "content": token, "single_word": False, "lstrip": False, "rstrip": False,
         "normalized": False, "special": True}
        for token, tid in sorted(special_tokens.items(), key=lambda item: item[1])
    ]
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": None,
        "pre_tokenizer": {
            "type": "Sequence",
            "pretokenizers": [
                {"type": "Split", "pattern": {"Regex": onig_pattern(pattern)}, "behavior": "Removed", "invert": True},
                _byte_level(),
            ],
        },
        "post_processor": None,
        "decoder": _byte_level(),
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": None,
            "continuing_subword_prefix": None,
            "end_of_word_suffix": None,
            "fuse_unk": False,
            "byte_fallback": False,
            "ignore_merges": True,
            "vocab": vocab,
            "merges": merges,
        },
    }


# ---------------------------------------------------------------------------
# Roles: which special token transformers uses to begin, end and pad.

ROLES = ("bos_token", "eos_token", "pad_token", "unk_token")
ROLE_NAMES = {  # the common spellings, the first declared one wins
    "bos_token": ("<|bos|>", "<s>"),
    "eos_token": ("<|eos|>", "</s>", "<|endoftext|>"),
    "pad_token": ("<|pad|>", "<pad>"),
    "unk_token": (),
}


def hf_roles(special_tokens: Iterable[str], given: Mapping[str, str | None] | None = None) -> dict[str, str]:
    """The special token of each role (``bos_token``, ``eos_token``, ``pad_token``,
    ``unk_token``): ``given`` first (None there: no token for that role), then
    the common names: ``<|bos|>`` or ``<s>`` begin, ``<|eos|>``, ``</s>`` or
    ``<|endoftext|>`` end; then, with no begin token given or declared,
    ``<|endoftext|>`` begins too when it is the end token, by name or given
    (GPT-2's convention), and only then. ``<|pad|>`` or ``<pad>`` pad.
    Without a pad token, ``padding=True`` raises in transformers, so a model's
    training script wants one: declare ``<|pad|>`` or set ``hf.pad_token``.

    >>> hf_roles(["<|endoftext|>", "<|pad|>"])
    {'bos_token': '<|endoftext|>', 'eos_token': '<|endoftext|>', 'pad_token': '<|pad|>'}
    >>> hf_roles(["<|endoftext|>", "<|im_end|>"], {"eos_token": "<|im_end|>"})
    {'eos_token': '<|im_end|>'}
    >>> hf_roles(["<s>", "</s>", "<|endoftext|>"], {"pad_token": "</s>", "bos_token": None})
    {'eos_token': '</s>', 'pad_token': '</s>'}
    """
    tokens = set(special_tokens)
    given = dict(given or {})
    roles: dict[str, str] = {}
    for role, names in ROLE_NAMES.items():
        found = next((name for name in names if name in tokens), None)
        if found is not None:
            roles[role] = found
    for role, token in given.items():
        if token is None:
            roles.pop(role, None)
        else:
            roles[role] = token
    # decided on the final eos: a user who names another eos and no bos gets no bos
    if "bos_token" not in roles and "bos_token" not in given and roles.get("eos_token") == "<|endoftext|>":
        roles["bos_token"] = "<|endoftext|>"
    return {role: roles[role] for role in ROLES if role in roles}


# transformers' VERY_LARGE_INTEGER: "no maximum length", what it assumes when none is given.
NO_MAX_LENGTH = int(1e30)


def _json_bytes(doc: dict, *, sort_keys: bool) -> bytes:
    return (json.dumps(doc, ensure_ascii=False, indent=2, sort_keys=sort_keys) + "\n").encode("utf-8")


def write_hf(
    folder: Path,
    ranks: dict[bytes, int],
    special_tokens: dict[str, int],
    pattern: str,
    *,
    roles: Mapping[str, str] | None = None,
    model_max_length: int | None = None,
    chat_template: str | None = None,
) -> None:
    """Write ``folder/tokenizer.json``, ``tokenizer_config.json`` and ``special_tokens_map.json``.

    ``transformers.AutoTokenizer.from_pretrained(folder)`` loads them, as a
    ``PreTrainedTokenizerFast`` that pads, truncates and batches. ``roles``
    (default: ``hf_roles(special_tokens)``) says which special token is
    ``bos_token``, ``eos_token``, ``pad_token``, ``unk_token``; each must be
    one of ``special_tokens`` (ValueError). The other special tokens are
    listed as additional special tokens. ``chat_template`` (a Jinja template,
    ValueError if it does not compile as transformers compiles it) goes into
    ``tokenizer_config.json``; ``model_max_length`` default: none.
    Nothing is added to the ids (no BOS): they stay tiktoken's. Each file is
    written atomically; the JSON is UTF-8 (``ensure_ascii=False``) and
    byte-for-byte reproducible.
    """
    from toktoktok.atomic import atomic_write_bytes
    from toktoktok.chat_template import check_chat_template

    folder = Path(folder)
    doc = tokenizer_json(ranks, special_tokens, pattern)
    by_id = sorted(special_tokens.items(), key=lambda item: item[1])
    named = dict(hf_roles(special_tokens) if roles is None else roles)
    for role, token in named.items():
        if role not in ROLES or token not in special_tokens:
            raise ValueError(f"{role}: {token!r} is not one of the special tokens")
    extra = [token for token, _ in by_id if token not in named.values()]
    special_map: dict = dict(named)
    if extra:
        special_map["additional_special_tokens"] = extra
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "model_max_length": NO_MAX_LENGTH if model_max_length is None else model_max_length,
        "clean_up_tokenization_spaces": False,
        "model_input_names": ["input_ids", "attention_mask"],
        "added_tokens_decoder": {
            str(t["id"]): {k: t[k] for k in ("content", "lstrip", "normalized", "rstrip", "single_word", "special")}
            for t in doc["added_tokens"]
        },
        **special_map,
    }
    if chat_template is not None:
        try:
            check_chat_template(chat_template)
        except ValueError as exc:
            raise ValueError(f"chat_template is not a valid Jinja template: {exc}") from None
        config["chat_template"] = chat_template
    folder.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(folder / "tokenizer.json", _json_bytes(doc, sort_keys=False))
    atomic_write_bytes(folder / "tokenizer_config.json", _json_bytes(config, sort_keys=True))
    atomic_write_bytes(folder / "special_tokens_map.json", _json_bytes(special_map, sort_keys=True))
