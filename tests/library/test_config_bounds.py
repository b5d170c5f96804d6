"""Every numeric key has a documented bound, checked when the config is read,
and no value within it makes a step cost more than linear time.

The costs are tested by counting work (windows looked up, names drawn,
encode calls and the special tokens each one copies), never by timing.
"""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

from tests.helpers import ROOT
from toktoktok.config import BOUNDS, ConfigError, load_config
from toktoktok.config import sections as config_module
from toktoktok.tiktoken_file import find_nested, validate_special_tokens

CONFIGURATION = ROOT / "docs" / "configuration.md"

MINIMAL = """\
output: out/tok.tiktoken
phases:
  - name: English
    merges: {merges}
    sources:
      - {{path: data, weight: {weight}}}
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "a.txt").write_text("hello world\n")
    (tmp_path / "base.tiktoken").write_text("IQ== 0\n")
    return tmp_path


def _config(folder: Path, top: str = "", merges: object = 100, weight: object = 1) -> Path:
    path = folder / "config.yaml"
    path.write_text(MINIMAL.format(merges=merges, weight=weight) + textwrap.dedent(top))
    return path


# (key as the error names it, YAML line, config pieces at the bound, just past it)
TOP = 7  # the first line after MINIMAL
CASES = [
    ("working_set_mb", TOP, {"top": "working_set_mb: 4194304"}, {"top": "working_set_mb: 4194305"}),
    ("threads", TOP, {"top": "threads: 1024"}, {"top": "threads: 1025"}),
    ("phases[0].merges", 4, {"merges": 2**31 - 1}, {"merges": 2**31}),
    ("min_frequency", TOP, {"top": f"min_frequency: {2**63 - 1}"}, {"top": f"min_frequency: {2**63}"}),
    ("heldout_share", TOP, {"top": "heldout_share: 0.5"}, {"top": "heldout_share: 0.5001"}),
    ("pad_to_multiple_of", TOP, {"top": "pad_to_multiple_of: 65536"}, {"top": "pad_to_multiple_of: 65537"}),
    ("max_token_bytes", TOP, {"top": "max_token_bytes: 67108864"}, {"top": "max_token_bytes: 67108865"}),
    ("max_piece_bytes", TOP, {"top": "max_piece_bytes: 67108864"}, {"top": "max_piece_bytes: 67108865"}),
    ("seed", TOP, {"top": f"seed: {2**63 - 1}"}, {"top": f"seed: {2**63}"}),
    ("phases[0].sources[0].weight", 6, {"weight": 1000000}, {"weight": 1000000.5}),
    ("warm_start.special_tokens['<|x|>']", TOP,
     {"top": "warm_start: {file: base.tiktoken, special_tokens: {'<|x|>': 4294967294}}"},
     {"top": "warm_start: {file: base.tiktoken, special_tokens: {'<|x|>': 4294967295}}"}),
]


@pytest.mark.parametrize("key, line, at, past", CASES, ids=[c[0] for c in CASES])
def test_each_numeric_key_has_an_upper_bound(project: Path, key: str, line: int, at: dict, past: dict) -> None:
    """At the bound the config loads; one past it is refused naming the key and its line.
    (On main, every one of these but merges, seed, heldout_share and the warm-start
    id loaded past the bound.)"""
    load_config(_config(project, **at))
    with pytest.raises(ConfigError) as info:
        load_config(_config(project, **past))
    assert f"config.yaml line {line}: {key} must be" in str(info.value)


def test_pad_to_multiple_of_says_why(project: Path) -> None:
    with pytest.raises(ConfigError, match=r"line 7: pad_to_multiple_of must be an integer <= 65_536 or null, "
                                          r"got 1000000 \(an integer\) \(each padding token is a special token"):
        load_config(_config(project, "pad_to_multiple_of: 1000000"))


def test_docs_document_every_bound() -> None:
    """docs/configuration.md's "Bounds" table has a row for every key of ``BOUNDS`` with its bounds."""
    section = CONFIGURATION.read_text().split("\n## Bounds\n", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for row in re.findall(r"^\| `([^`]+)`([^|]*)\|([^|]*)\|([^|]*)\|", section, re.M):
        rows[row[0] + row[1].rstrip()] = row[3]
    for key, (low, high) in BOUNDS.items():
        assert key in rows, f"docs/configuration.md's bounds table lacks {key}"
        numbers = {int(n.replace(",", "")) for n in re.findall(r"-?\d[\d,]*", rows[key])}
        if isinstance(high, int) and high < 2**40:
            assert high in numbers, (key, rows[key])
        if isinstance(low, int):
            assert low in numbers or (low == 0 and "0" in rows[key]), (key, rows[key])


# ------------------------------------------------------------------ costs, counted


class CountingStr(str):
    """A string that counts how often it is sliced or indexed (``calls`` is shared)."""

    calls = 0

    def __getitem__(self, key):  # type: ignore[override]
        CountingStr.calls += 1
        return str.__getitem__(self, key)


def _reserved(n: int) -> list[str]:
    return ["<|endoftext|>"] + [f"<|reserved_special_token_{k}|>" for k in range(n - 1)]


def _windows_looked_up(tokens: list[str]) -> int:
    CountingStr.calls = 0
    assert find_nested([CountingStr(t) for t in tokens]) is None
    return CountingStr.calls


def test_nesting_check_is_linear_in_the_number_of_special_tokens() -> None:
    """Doubling the tokens doubles the windows looked up; comparing every pair, as main
    did (a minute of export for 65,536 padding tokens), would quadruple it. The tokens
    all have 5 digits: each distinct token length costs one more window a token.)"""
    def five_digits(n: int) -> list[str]:
        return ["<|endoftext|>"] + [f"<|reserved_special_token_{k}|>" for k in range(10000, 10000 + n)]

    small, large = _windows_looked_up(five_digits(20000)), _windows_looked_up(five_digits(40000))
    assert large <= 2.01 * small
    assert large <= 4 * 40000  # far below the 800 million pairs
    assert _windows_looked_up(_reserved(65536)) <= sum(map(len, _reserved(65536)))


def test_nesting_check_still_finds_every_kind() -> None:
    assert find_nested(["<|a|>", "<|a|>x"]) == ("<|a|>", "<|a|>x")  # a prefix
    assert find_nested(["x<|a|>", "<|a|>"]) == ("<|a|>", "x<|a|>")  # a suffix
    assert find_nested(["abc", "zabcz", "q"]) == ("abc", "zabcz")  # in the middle
    assert find_nested(_reserved(3000) + ["<|reserved_special_token_12"]) is not None
    with pytest.raises(ValueError, match="occurs inside"):
        validate_special_tokens({bytes([b]): b for b in range(256)}, {"<|a|>": 300, "<|a|>x": 301})


def test_config_nesting_check_uses_the_linear_search(project: Path, monkeypatch) -> None:
    """100,000 special tokens in a config: one search, not 5 billion comparisons."""
    calls = []
    real = config_module.find_nested
    monkeypatch.setattr(config_module, "find_nested", lambda tokens: calls.append(1) or real(tokens))
    tokens = ", ".join(f"'<|t{k}|>'" for k in range(20000))
    cfg = load_config(_config(project, f"special_tokens: [{tokens}]"))
    assert len(cfg.special_tokens) == 20000 and calls == [1]


def test_padding_draws_each_reserved_name_once(monkeypatch) -> None:
    """special_ids draws at most padding + tokens names: 65,535 at the bound."""
    from toktoktok import vocab

    drawn = []
    monkeypatch.setattr(vocab, "reserved_name", lambda k: drawn.append(k) or f"<|reserved_special_token_{k}|>")
    ids = vocab.special_ids(["<|endoftext|>"], 1, pad_to=65536)
    assert len(ids) == 65535 and max(ids.values()) == 65535 and len(drawn) == 65534
    drawn.clear()
    kept = {f"<|reserved_special_token_{k}|>": 10 + k for k in range(0, 2000, 2)}
    ids = vocab.special_ids(["<|reserved_special_token_1|>"], 3000, kept=kept, pad_to=4096)
    assert len(ids) == 1096 + len(kept) and len(drawn) <= 1096 + len(kept) + 1
    assert sorted(v for v in ids.values() if v >= 3000) == list(range(3000, 4096))


class CountingEncoding:
    """A tiktoken Encoding that counts ``encode`` calls and the special tokens each copies."""

    def __init__(self, enc) -> None:
        self.enc, self.calls, self.copied = enc, 0, 0

    def encode(self, text, *, allowed_special=frozenset(), disallowed_special="all"):
        self.calls += 1
        allowed = self.enc.special_tokens_set if allowed_special == "all" else allowed_special
        disallowed = self.enc.special_tokens_set if disallowed_special == "all" else disallowed_special
        self.copied += len(allowed) + len(disallowed)
        return self.enc.encode(text, allowed_special=allowed_special, disallowed_special=disallowed_special)

    def __getattr__(self, name):
        return getattr(self.enc, name)


def _round_trip_work(n: int) -> tuple[int, int]:
    import toktoktok
    from toktoktok.tiktoken_file import write_tiktoken
    from toktoktok.vocab import special_ids as special_ids_for
    from toktoktok_stages.export import SAMPLES, round_trip_failures

    folder = Path(__import__("tempfile").mkdtemp())
    write_tiktoken(folder / "t.tiktoken", {bytes([b]): b for b in range(256)})
    specials = special_ids_for(["<|endoftext|>"], 256, pad_to=n)
    enc = CountingEncoding(toktoktok.load(folder / "t.tiktoken", special_tokens=specials))
    assert round_trip_failures(enc, SAMPLES, specials) == []
    return enc.calls, enc.copied


def test_export_round_trip_is_linear_in_the_padding() -> None:
    """Export's check that every special token is one id: a fixed number of encode
    calls (main made one per special token, each copying all of them: quadratic,
    hours at 65,536), so the special tokens copied grow as the padding does."""
    calls_small, copied_small = _round_trip_work(4096)
    calls_large, copied_large = _round_trip_work(8192)
    assert calls_small == calls_large <= 3
    assert copied_large <= 2.1 * copied_small


def test_the_bound_itself_completes() -> None:
    """65,536 ids of which 65,279 padding tokens: loaded, validated and round-tripped
    with 3 encode calls (on main the nesting check alone took about a minute)."""
    calls, copied = _round_trip_work(65536)
    assert calls <= 3 and copied <= 3 * 65536


# ------------------------------------------------------------------ encode --allow-special


def _encoder_with_specials(n: int):
    import tiktoken

    from toktoktok.vocab import special_ids as special_ids_for

    ranks = {bytes([b]): b for b in range(256)} | {b"ab": 256, b" <": 257, b"|>": 258}
    specials = special_ids_for(["<|endoftext|>", "<|im_start|>"], 259, pad_to=n)
    return tiktoken.Encoding("t", pat_str=r"\S+|\s+", mergeable_ranks=ranks, special_tokens=specials)


def test_encode_with_special_tokens_gives_tiktokens_ids() -> None:
    """The split at special tokens gives what encode_batch(allowed_special="all") gives."""
    import random

    from toktoktok_stages.commands.encode import batch_encoder

    enc = _encoder_with_specials(512)
    rng = random.Random(3)
    words = ["ab", " <", "|>", "<|endoftext|>", "<|im_start|>", "<|reserved_special_token_7|>", "<|reserved_",
             "<|endoftext", "x", "\n", "<", "é", "<<|im_start|>>"]
    texts = ["", "<|endoftext|>", "<|endoftext|><|im_start|>"]
    texts += ["".join(rng.choice(words) for _ in range(rng.randrange(0, 12))) for _ in range(300)]
    expected = enc.encode_batch(texts, allowed_special="all", disallowed_special=())
    assert batch_encoder(enc, 2, allow_special=True)(texts) == expected


def test_encode_with_special_tokens_never_copies_them_per_document(monkeypatch) -> None:
    """main called encode_batch(allowed_special="all"): every document copied all the
    special tokens into tiktoken (0.14 s a document at 65,536). Now no call takes them."""
    from toktoktok_stages.commands.encode import batch_encoder

    enc = _encoder_with_specials(65536)
    calls = []
    for name in ("encode", "encode_batch"):
        monkeypatch.setattr(enc, name, lambda *a, _n=name, **k: calls.append(_n))
    encode = batch_encoder(enc, 2, allow_special=True)
    out = encode(["hello <|endoftext|>", "<|reserved_special_token_60000|>ab"] * 50)
    assert calls == [] and out[0][-1] == 259 and out[1][0] == enc.encode_single_token("<|reserved_special_token_60000|>")


def test_vocab_size_has_an_upper_bound(project: Path) -> None:
    with pytest.raises(ConfigError, match=r"config.yaml line 7: vocab_size must be an integer <= 2_147_483_648"):
        load_config(_config(project, f"vocab_size: {2**31 + 1}"))
