"""Any tokenizer the commands' ``-t`` names, found and loaded as a ``tiktoken.Encoding``.

``tokenizer_file(value)`` finds the file, in this order: an existing folder
must hold ``tokenizer.json`` (a ``NAME.hf/`` export); an existing file is
itself (a ``.tiktoken``, plain, ``.gz`` or ``.zst``, or a ``tokenizer.json``:
any name ending ``.json``); else a stock name tiktoken knows (``cl100k_base``,
``o200k_base``, ``r50k_base``, ``p50k_base``, ``gpt2``) is the file tiktoken's
own cache keeps for it, never fetched (``stock_file``). A config (``.yaml``)
is the pipeline's to resolve to its output. ``load_hf`` reads a byte-level
BPE ``tokenizer.json``: ranks are its ids, special tokens its added tokens,
the pattern its pre-tokenizer's (``hf_pattern``); anything tiktoken cannot
encode alike is refused in one line naming the file.

    >>> cache_name("cl100k_base") == hashlib.sha1(STOCK["cl100k_base"].url.encode()).hexdigest()
    True
    >>> stock_of(Path("/cache") / cache_name("o200k_base"))
    'o200k_base'
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tiktoken

from toktoktok.errors import MissingInput, TokenizerFileError, UnsupportedTokenizer, UsageError
from toktoktok.hf import onig_pattern, read_hf_tokenizer
from toktoktok.known_bases import KNOWN_BASES
from toktoktok.loading import split_name
from toktoktok.patterns import NAMED_PATTERNS, checked_pattern
from toktoktok.tiktoken_file import missing_single_bytes, read_tiktoken, validate_special_tokens

_BLOB = "https://openaipublic.blob.core.windows.net/"
_EOT = {"<|endoftext|>": 50256}


@dataclass(frozen=True)
class Stock:
    """A vocabulary tiktoken downloads by name: the URL its cache is keyed by, the
    sha256 tiktoken expects of it, its pattern name and special tokens."""

    url: str
    sha256: str
    pattern: str
    special_tokens: dict[str, int] = field(default_factory=dict)


# the URLs and digests are tiktoken_ext/openai_public.py's; gpt2 is read from its merges
# file (vocab.bpe), whose ranks are r50k_base's
STOCK: dict[str, Stock] = {
    "cl100k_base": Stock(_BLOB + "encodings/cl100k_base.tiktoken", KNOWN_BASES["cl100k_base"].sha256, "cl100k",
                         dict(KNOWN_BASES["cl100k_base"].special_tokens)),
    "o200k_base": Stock(_BLOB + "encodings/o200k_base.tiktoken", KNOWN_BASES["o200k_base"].sha256, "o200k",
                        dict(KNOWN_BASES["o200k_base"].special_tokens)),
    "r50k_base": Stock(_BLOB + "encodings/r50k_base.tiktoken",
                       "306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930", "gpt2", _EOT),
    "p50k_base": Stock(_BLOB + "encodings/p50k_base.tiktoken",
                       "94b5ca7dff4d00767bc256fdd1b27e5b17361d7b8a5f968547f9f23eb70d2069", "gpt2", _EOT),
    "gpt2": Stock(_BLOB + "gpt-2/encodings/main/vocab.bpe",
                  "1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5", "gpt2", _EOT),
}  # fmt: skip

FORMS = "a .tiktoken, a tokenizer.json (or a NAME.hf/ folder holding one), a config (.yaml) or a stock name"


def cache_name(name: str) -> str:
    """The file name tiktoken's cache gives a stock vocabulary: the sha1 of its URL."""
    return hashlib.sha1(STOCK[name].url.encode()).hexdigest()


def stock_of(path: Path) -> str | None:
    """The stock name a file of tiktoken's cache holds (by its name), or None."""
    return next((name for name in STOCK if cache_name(name) == Path(path).name), None)


def cache_dir() -> Path | None:
    """Where tiktoken caches: ``TIKTOKEN_CACHE_DIR``, else ``DATA_GYM_CACHE_DIR``, else
    the temporary folder's ``data-gym-cache``; None when set empty (no cache)."""
    for var in ("TIKTOKEN_CACHE_DIR", "DATA_GYM_CACHE_DIR"):
        if var in os.environ:
            return Path(os.environ[var]) if os.environ[var] else None
    return Path(tempfile.gettempdir()) / "data-gym-cache"


def stock_file(name: str) -> Path:
    """The cached file of stock vocabulary ``name``; ``MissingInput`` saying where to put it.

    Nothing is fetched: these machines may be offline, and a command that
    silently downloads is not reproducible.
    """
    folder = cache_dir()
    stock = STOCK[name]
    if folder is not None and (folder / cache_name(name)).is_file():
        return folder / cache_name(name)
    where = (f"{folder / cache_name(name)}" if folder is not None
             else f"TIKTOKEN_CACHE_DIR/{cache_name(name)} (TIKTOKEN_CACHE_DIR is set empty)")
    raise MissingInput(f"{name}: not in tiktoken's cache and not fetched (offline): put {stock.url} at {where} "
                       f"(or set TIKTOKEN_CACHE_DIR), or give the path of a local {name}.tiktoken")


def tokenizer_file(value: str | os.PathLike[str]) -> Path:
    """The file ``-t VALUE`` names: an existing path first, then a stock name.

    A folder gives its ``tokenizer.json``. ``UsageError`` (one line) for a
    folder without one, a companion ``NAME.meta.json``, or a value that is
    neither a path nor a stock name.
    """
    path = Path(value)
    if path.is_dir():
        if not (path / "tokenizer.json").is_file():
            raise UsageError(f"{path}: a folder without tokenizer.json; -t takes {FORMS}")
        return path / "tokenizer.json"
    if path.name.endswith(".meta.json"):
        raise UsageError(f"{path}: a .tiktoken's companion, not a tokenizer: give its {path.name[:-10]}.tiktoken")
    if path.exists():
        return path
    if str(value) in STOCK and str(value) in tiktoken.list_encoding_names():
        return stock_file(str(value))
    raise UsageError(f"{value}: no such file, and not a stock name ({', '.join(STOCK)}); -t takes {FORMS}")


def tokenizer_name(path: Path) -> str:
    """What a tokenizer is called: a stock name, the folder of a ``tokenizer.json`` (so an
    export's is ``NAME.hf``, beside ``NAME`` of its ``NAME.tiktoken``), another file's stem.

    >>> tokenizer_name(Path("out/demo.hf/tokenizer.json")), tokenizer_name(Path("out/demo.tiktoken.gz"))
    ('demo.hf', 'demo')
    """
    path = Path(path)
    if stock_of(path):
        return str(stock_of(path))
    if path.name == "tokenizer.json" and path.parent.name:
        return path.parent.name
    return path.stem if path.name.endswith(".json") else split_name(path)[1]


def load_stock(path: Path, pattern: str | None = None) -> tiktoken.Encoding:
    """A stock vocabulary from tiktoken's cache file ``path``, checked against the
    digest tiktoken expects; ``pattern`` (a name or a regex) replaces its own."""
    name = stock_of(path)
    stock = STOCK[name]
    data = Path(path).read_bytes()
    if hashlib.sha256(data).hexdigest() != stock.sha256:
        raise TokenizerFileError(path, f"is not {name} (its sha256 is not the one tiktoken expects): replace it "
                                 f"with {stock.url}")
    ranks = data_gym_ranks(data) if name == "gpt2" else read_tiktoken(path, data=data)
    pat = checked_pattern(pattern or stock.pattern).tiktoken
    return tiktoken.Encoding(name=name, pat_str=pat, mergeable_ranks=ranks, special_tokens=dict(stock.special_tokens))


def data_gym_ranks(data: bytes) -> dict[bytes, int]:
    """GPT-2's ranks from its ``vocab.bpe``: the 256 bytes in data-gym order, then each
    merge in turn (what tiktoken's ``data_gym_to_mergeable_bpe_ranks`` builds)."""
    printable = [b for b in range(256) if chr(b).isprintable() and chr(b) != " "]
    order = printable + [b for b in range(256) if b not in printable]
    char = {chr(b): b for b in printable} | {chr(256 + k): b for k, b in enumerate(order[len(printable):])}
    ranks = {bytes([b]): i for i, b in enumerate(order)}
    for line in data.decode("utf-8").split("\n")[1:-1]:
        first, second = line.split()
        ranks[bytes(char[c] for c in first) + bytes(char[c] for c in second)] = len(ranks)
    return ranks


def load_hf(path: Path, pattern: str | None = None, *, override: bool = False) -> tiktoken.Encoding:
    """A byte-level BPE ``tokenizer.json`` as a ``tiktoken.Encoding``.

    Its pattern is its pre-tokenizer's (``hf_pattern``); ``pattern`` replaces
    it with ``override``, else stands in only when it has none tiktoken can
    run. Refused (``UnsupportedTokenizer``, one line naming the file): not BPE,
    not byte-level, a single byte missing, a normalizer, a pre-tokenizer step
    with no tiktoken pattern.
    """
    path = Path(path)
    ranks, special = read_hf_tokenizer(path)
    missing = missing_single_bytes(ranks)
    if missing:
        raise UnsupportedTokenizer(path, f"not a byte-level BPE: its vocabulary lacks {len(missing)} of the 256 "
                                 "single bytes")
    doc = json.loads(path.read_text(encoding="utf-8"))
    _check_steps(doc, path)
    if pattern is not None and override:
        pat = checked_pattern(pattern).tiktoken
    else:
        try:
            pat = hf_pattern(doc, path)
        except UnsupportedTokenizer:
            if pattern is None:
                raise
            pat = checked_pattern(pattern).tiktoken
    validate_special_tokens(ranks, special)
    return tiktoken.Encoding(name=tokenizer_name(path), pat_str=pat, mergeable_ranks=ranks, special_tokens=special)


def _refusal(path: Path, why: str, way_out: str = "") -> UnsupportedTokenizer:
    return UnsupportedTokenizer(path, f"{why}: tiktoken would not encode it alike{way_out}")


def _steps(doc: dict[str, Any]) -> list[dict[str, Any]]:
    pre = doc.get("pre_tokenizer")
    if not isinstance(pre, dict):
        return []
    return list(pre.get("pretokenizers", [])) if pre.get("type") == "Sequence" else [pre]


def _check_steps(doc: dict[str, Any], path: Path) -> None:
    """What no pattern can make up for: a normalizer, a pre-tokenizer that is not
    ``Split`` steps then one ``ByteLevel``, a ByteLevel that adds a space."""
    if doc.get("normalizer") is not None:
        raise _refusal(path, f"its normalizer ({doc['normalizer'].get('type')}) changes the text first")
    steps = _steps(doc)
    kinds = [s.get("type") for s in steps]
    if kinds.count("ByteLevel") != 1 or kinds[-1] != "ByteLevel" or set(kinds) - {"Split", "ByteLevel"}:
        raise _refusal(path, f"its pre-tokenizer ({', '.join(map(str, kinds)) or 'none'}) is not Split then ByteLevel")
    if steps[-1].get("add_prefix_space"):
        raise _refusal(path, "its ByteLevel adds a space before the text")


def hf_pattern(doc: dict[str, Any], path: Path) -> str:
    """The tiktoken pattern a ``tokenizer.json``'s pre-tokenizer splits text by.

    One ``Split`` (a regex whose matches are the pieces: ``Removed`` inverted,
    or ``Isolated``) then ``ByteLevel`` without a regex of its own, as our
    export writes; or ``ByteLevel`` alone with its regex (GPT-2's, our
    ``gpt2``). A regex equal to a named pattern's (either spelling) is that
    pattern; another is used as written if tiktoken runs it and it passes
    the probe (``checked_pattern``). ``UnsupportedTokenizer`` otherwise.
    """
    _check_steps(doc, path)
    steps = _steps(doc)
    level, splits = steps[-1], steps[:-1]
    way_out = " (give --pattern to choose one)"
    if not splits:
        if not level.get("use_regex", True):
            raise _refusal(path, "its pre-tokenizer splits nothing", way_out)
        return NAMED_PATTERNS["gpt2"].tiktoken
    if len(splits) > 1 or level.get("use_regex", True):
        raise _refusal(path, "its pre-tokenizer splits by more than one regex", way_out)
    split = splits[0]
    if (split.get("behavior"), bool(split.get("invert"))) not in (("Removed", True), ("Isolated", False)):
        raise _refusal(path, f"its Split keeps {split.get('behavior')} (invert {split.get('invert')}), "
                       "not its matches", way_out)
    regex = (split.get("pattern") or {}).get("Regex")
    if not isinstance(regex, str):
        raise _refusal(path, "its Split pattern is not a regex", way_out)
    for named in NAMED_PATTERNS.values():
        if regex in (named.tiktoken, onig_pattern(named.tiktoken)):
            return named.tiktoken
    try:
        return checked_pattern(regex).tiktoken
    except ValueError as exc:
        raise _refusal(path, f"its Split regex cannot be run here ({' '.join(str(exc).split())})", way_out) from None
