"""Warm start (docs/configuration.md): every base token and special token keeps its id, new
merges come above the base's highest id, and text encodes as with the base
wherever no new merge applies."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
from pathlib import Path

import pytest
import regex
import tiktoken
import tiktoken.load
import zstandard

import toktoktok
from tests.conftest import toktok
from tests.helpers import SHARED, stdlib_text
from toktoktok import load
from toktoktok.config import ConfigError, load_config
from toktoktok.known_bases import KNOWN_BASES, canonical_bytes, recognise
from toktoktok.patterns import NAMED_PATTERNS
from toktoktok.tiktoken_file import read_tiktoken, write_tiktoken
from toktoktok.warm_start import load_base
from toktoktok_stages import pipeline
from toktoktok_stages.workdir.progress import Progress

CL100K = SHARED / "data/reference/cl100k_base.tiktoken.gz"
CL100K_SPECIALS = {"<|endoftext|>": 100257, "<|fim_prefix|>": 100258, "<|fim_middle|>": 100259,
                   "<|fim_suffix|>": 100260, "<|endofprompt|>": 100276}


def run(tmp_path, warm_start: dict, *, merges: int, pattern: str | None = "default",
        specials=("<|endoftext|>", "<|x|>")):
    """Train ``merges`` on stdlib text from ``warm_start`` (``pattern=None``: left out)."""
    (tmp_path / "data").mkdir(exist_ok=True)
    (tmp_path / "data/a.txt").write_text(stdlib_text(150_000))
    cfg = {"output": "out/ext.tiktoken", "pattern": pattern, "heldout_share": 0, "warm_start": warm_start,
           "special_tokens": list(specials), "phases": [{"name": "p", "merges": merges, "sources": [{"path": "data"}]}]}
    if pattern is None:
        del cfg["pattern"]
    (tmp_path / "cfg.yaml").write_text(json.dumps(cfg))
    pipeline.run(load_config(tmp_path / "cfg.yaml"), progress=Progress(stream=io.StringIO()))
    return load(tmp_path / "out/ext.tiktoken")


def assert_extends(ext: tiktoken.Encoding, base_ranks: dict[bytes, int], base_specials: dict[str, int],
                   base: tiktoken.Encoding, text: str, pattern: str) -> int:
    """Checks ids are kept and returns how many pieces use a new merge."""
    ext_ranks = ext._mergeable_ranks
    assert all(ext_ranks[t] == r for t, r in base_ranks.items())
    top = max([*base_ranks.values(), *base_specials.values()])
    assert min(r for t, r in ext_ranks.items() if t not in base_ranks) == top + 1
    for tok, tid in base_specials.items():
        assert ext.encode(tok, allowed_special="all") == [tid]
    changed = 0
    for piece in regex.findall(pattern, text):
        ids = ext.encode_ordinary(piece)
        if max(ids, default=0) > top:
            changed += 1
        else:
            assert ids == base.encode_ordinary(piece), piece
    return changed


@pytest.mark.skipif(not CL100K.exists(), reason="needs ../shared")
def test_cl100k_warm_start(tmp_path):
    ext = run(tmp_path, {"file": str(CL100K), "special_tokens": CL100K_SPECIALS}, merges=300, pattern="cl100k")
    ranks = read_tiktoken(CL100K)
    pat = NAMED_PATTERNS["cl100k"]
    base = tiktoken.Encoding("cl", pat_str=pat.tiktoken, mergeable_ranks=ranks, special_tokens=CL100K_SPECIALS)
    assert ext.n_vocab == 100277 + 300 + 1  # new merges from 100277, then the new special token
    assert ext.encode("<|x|>", allowed_special="all") == [100277 + 300]
    text = "".join(p.read_text(errors="replace") for p in sorted((SHARED / "data/multilingual").iterdir()))
    changed = assert_extends(ext, ranks, CL100K_SPECIALS, base, text + stdlib_text(50_000), pat.python)
    assert changed > 0  # the new merges are used on the text they were learned from


def test_tiktoken_base_with_gaps(tmp_path):
    # a base like p50k_base: a gap at 300 where its special token sits
    ranks = {bytes([b]): b for b in range(256)} | {b"in": 256, b"th": 257, b"the": 258, b"er": 301}
    write_tiktoken(tmp_path / "base.tiktoken", ranks)
    specials = {"<|endoftext|>": 300}
    ext = run(tmp_path, {"file": "base.tiktoken", "special_tokens": specials}, merges=50)
    base = tiktoken.Encoding("b", pat_str=NAMED_PATTERNS["default"].tiktoken, mergeable_ranks=ranks,
                             special_tokens=specials)
    assert ext.encode("<|endoftext|>", allowed_special="all") == [300]
    assert ext.encode("<|x|>", allowed_special="all") == [302 + 50]
    assert assert_extends(ext, ranks, specials, base, stdlib_text(30_000), NAMED_PATTERNS["default"].python) > 0


def test_hugging_face_base(tmp_path):
    tokenizers = pytest.importorskip("tokenizers")
    from tokenizers import Regex, Tokenizer, models, pre_tokenizers, trainers

    pattern = NAMED_PATTERNS["default"]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(pattern.tiktoken), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = tokenizers.decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=600, special_tokens=["<|endoftext|>"], show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(stdlib_text(100_000).split("\n\n"), trainer)
    tok.save(str(tmp_path / "tokenizer.json"))
    ext = run(tmp_path, {"file": "tokenizer.json"}, merges=40)
    eot = tok.token_to_id("<|endoftext|>")
    assert ext.encode("<|endoftext|>", allowed_special="all") == [eot]
    text = stdlib_text(40_000)
    top = tok.get_vocab_size() - 1
    for piece in regex.findall(pattern.python, text):
        ids = ext.encode_ordinary(piece)
        if max(ids) <= top:
            assert ids == tok.encode(piece).ids, piece
    assert ext.n_vocab == tok.get_vocab_size() + 40 + 1


# ---------------------------------------------------------------- no id reused silently

O200K = SHARED / "data/reference/o200k_base.tiktoken.gz"
O200K_SPECIALS = {"<|endoftext|>": 199999, "<|endofprompt|>": 200018}
REFERENCE = {"cl100k_base": CL100K, "o200k_base": O200K}
needs_shared = pytest.mark.skipif(not (CL100K.exists() and O200K.exists()), reason="needs ../shared")


def variant(source: Path, folder: Path, kind: str, name: str = "vocab") -> Path:
    """The reference file as another user might hold it: plain, gzip, zstd, CRLF line ends, any name."""
    data = gzip.decompress(source.read_bytes())
    if kind == "crlf":
        data = data.replace(b"\n", b"\r\n")
    elif kind == "gz":
        data = gzip.compress(data, compresslevel=1)
    elif kind == "zst":
        data = zstandard.ZstdCompressor(level=1).compress(data)
    path = folder / f"{name}.{kind}"
    path.write_bytes(data)
    return path


@needs_shared
@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base"])
def test_known_digests_are_those_of_the_reference_files(name):
    """known_bases hard-codes only digests: recompute them from OpenAI's files."""
    data = canonical_bytes(gzip.decompress(REFERENCE[name].read_bytes()))
    known = KNOWN_BASES[name]
    assert (len(data), hashlib.sha256(data).hexdigest()) == (known.size, known.sha256)


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base"])
def test_known_bases_are_what_tiktoken_defines(name, monkeypatch):
    """Special tokens, pattern and file hash as tiktoken's own ``openai_public`` gives them
    (its loader is replaced, so nothing is downloaded)."""
    openai_public = pytest.importorskip("tiktoken_ext.openai_public")
    hashes = []
    monkeypatch.setattr(openai_public, "load_tiktoken_bpe",
                        lambda url, expected_hash: hashes.append(expected_hash) or {})
    spec = openai_public.ENCODING_CONSTRUCTORS[name]()
    known = KNOWN_BASES[name]
    assert dict(known.special_tokens) == spec["special_tokens"]
    assert NAMED_PATTERNS[known.pattern].tiktoken == spec["pat_str"]
    assert hashes == [known.sha256]
    assert {"cl100k_base": CL100K_SPECIALS, "o200k_base": O200K_SPECIALS}[name] == spec["special_tokens"]


@needs_shared
@pytest.mark.parametrize("kind", ["plain", "gz", "zst", "crlf"])
@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base"])
def test_recognised_by_content_whatever_the_name_and_compression(tmp_path, name, kind):
    path = variant(REFERENCE[name], tmp_path, kind, name="my-vocab")
    assert recognise(path) == KNOWN_BASES[name]
    base = load_base(path)
    assert base.special_tokens == dict(KNOWN_BASES[name].special_tokens)
    assert len(base.vocab) == max(base.special_tokens.values()) + 1  # new merges come after them all


@needs_shared
def test_a_near_copy_is_not_recognised(tmp_path):
    lines = gzip.decompress(CL100K.read_bytes()).splitlines(keepends=True)
    (tmp_path / "short.tiktoken").write_bytes(b"".join(lines[:-1]))  # the last merge left out
    (tmp_path / "swapped.tiktoken").write_bytes(b"".join(lines[:300] + [lines[301], lines[300]] + lines[302:]))
    assert recognise(tmp_path / "short.tiktoken") is None
    assert recognise(tmp_path / "swapped.tiktoken") is None
    assert recognise(tmp_path / "nothing.tiktoken") is None  # missing: not recognised, not an error


@needs_shared
def test_load_uses_a_published_files_pattern_and_special_tokens(tmp_path):
    """toktoktok.load of o200k_base without a companion: its own pattern, not the default;
    ``pattern=`` and ``special_tokens=`` still win."""
    enc = load(variant(O200K, tmp_path, "zst"))
    assert enc._pat_str == NAMED_PATTERNS["o200k"].tiktoken
    assert enc.encode("<|endoftext|>", allowed_special="all") == [199999]
    assert enc.encode("<|endofprompt|>", allowed_special="all") == [200018]
    chosen = load(O200K, pattern="default", special_tokens={})
    assert chosen._pat_str == NAMED_PATTERNS["default"].tiktoken and chosen.special_tokens_set == set()


def config_with(tmp_path, warm_start: str, extra: str = "") -> Path:
    (tmp_path / "data").mkdir(exist_ok=True)
    (tmp_path / "data/a.txt").write_text("hello world\n")
    config = tmp_path / "config.yaml"
    config.write_text("output: out/tok.tiktoken\n"
                      "phases:\n"
                      "  - {name: p, merges: 10, sources: [{path: data}]}\n"
                      f"warm_start: {warm_start}\n{extra}")
    return config


@needs_shared
@pytest.mark.parametrize(("name", "kind"), [("cl100k_base", "gz"), ("o200k_base", "zst")])
def test_pattern_left_out_is_the_published_bases(tmp_path, name, kind):
    path = variant(REFERENCE[name], tmp_path, kind)
    cfg = load_config(config_with(tmp_path, f"{{file: {path}}}"))
    assert cfg.pattern == NAMED_PATTERNS[KNOWN_BASES[name].pattern] and cfg.warnings == ()
    same = load_config(config_with(tmp_path, f"{{file: {path}}}", f"pattern: {name}\n"))
    assert same.pattern == cfg.pattern and same.warnings == ()


@needs_shared
def test_another_pattern_than_the_published_bases_is_warned_about(tmp_path):
    cfg = load_config(config_with(tmp_path, f"{{file: {CL100K}}}", "pattern: default\n"))
    assert cfg.pattern == NAMED_PATTERNS["default"]
    (warning,) = cfg.warnings
    assert "default" in warning and "cl100k" in warning and "cl100k_base" in warning
    custom = load_config(config_with(tmp_path, f"{{file: {CL100K}}}", "pattern: '\\S+|\\s+'\n"))
    assert custom.pattern.name == "custom" and len(custom.warnings) == 1 and "cl100k" in custom.warnings[0]


def small_base(folder: Path) -> Path:
    """A synthetic base, no companion: a gap at 300 where a special token may sit."""
    ranks = {bytes([b]): b for b in range(256)} | {b"in": 256, b"th": 257, b"the": 258, b"er": 301}
    write_tiktoken(folder / "small.tiktoken", ranks)
    return folder / "small.tiktoken"


@pytest.mark.parametrize(("spelling", "line"), [("{{file: {base}}}", 4), ("{{file: {base}, special_tokens: null}}", 4),
                                              ("\n  file: {base}\n  special_tokens:", 6)])
def test_another_base_without_companion_must_list_its_special_tokens(tmp_path, spelling, line):
    config = config_with(tmp_path, spelling.format(base=small_base(tmp_path)))
    with pytest.raises(ConfigError) as info:
        load_config(config)
    message = str(info.value)
    assert message.startswith(f"{config} line {line}: warm_start.special_tokens is required: small.tiktoken has no ")
    assert "special_tokens: {}" in message


def test_a_base_without_companion_may_say_it_has_no_special_tokens(tmp_path):
    base = small_base(tmp_path)
    cfg = load_config(config_with(tmp_path, f"{{file: {base}, special_tokens: {{}}}}"))
    assert cfg.warm_start is not None and cfg.warm_start.special_tokens == {}
    assert cfg.pattern == NAMED_PATTERNS["default"]  # not a published base: the default as always


def test_a_base_with_a_companion_needs_no_special_tokens(tmp_path):
    base = small_base(tmp_path)
    (tmp_path / "small.meta.json").write_text(json.dumps({"format": "toktoktok-meta/1",
                                                          "special_tokens": {"<|endoftext|>": 300}}))
    load_config(config_with(tmp_path, f"{{file: {base}}}"))
    assert load_base(base).special_tokens == {"<|endoftext|>": 300}


def test_the_refusal_is_exit_2_before_any_work(tmp_path):
    config = config_with(tmp_path, f"{{file: {small_base(tmp_path)}}}")
    for command in ("plan", "run"):
        r = toktok(command, "-c", config)
        assert r.code == 2, r
        (line,) = r.err.strip().splitlines()
        assert line.startswith("error: ") and "line 4: warm_start.special_tokens is required" in line
    assert not (tmp_path / "out").exists()


@needs_shared
@pytest.mark.parametrize("kind", ["gz", "zst"])
def test_cl100k_warm_start_keeps_its_special_tokens_unasked(tmp_path, kind):
    """cl100k_base as downloaded, no special tokens, no pattern in the config: its special ids
    stay its special tokens, new merges start above 100276, and the exported .tiktoken and
    .meta.json load in tiktoken itself with ``<|endoftext|>`` at 100257."""
    path = variant(CL100K, tmp_path, kind, name="cl100k_base.tiktoken")
    ext = run(tmp_path, {"file": str(path)}, merges=60, pattern=None, specials=("<|endoftext|>", "<|x|>"))
    ranks = read_tiktoken(CL100K)
    out = tmp_path / "out/ext.tiktoken"
    meta = json.loads((tmp_path / "out/ext.meta.json").read_text())
    assert meta["special_tokens"] == CL100K_SPECIALS | {"<|x|>": 100277 + 60}
    assert ext._pat_str == NAMED_PATTERNS["cl100k"].tiktoken
    own = tiktoken.Encoding("ext", pat_str=meta["pattern"]["tiktoken"],
                            mergeable_ranks=tiktoken.load.load_tiktoken_bpe(str(out)),
                            special_tokens=meta["special_tokens"])
    assert own.encode("<|endoftext|>", allowed_special="all") == [100257]
    assert own.decode([100257, 100276]) == "<|endoftext|><|endofprompt|>"
    new = {t: r for t, r in own._mergeable_ranks.items() if t not in ranks}
    assert len(new) == 60 and min(new.values()) == 100277 and max(new.values()) == 100276 + 60
    assert all(own._mergeable_ranks[t] == r for t, r in ranks.items())


def test_the_python_api_refuses_it_too(tmp_path):
    base = small_base(tmp_path)
    with pytest.raises(ValueError, match=r"^train\(\): warm_start.special_tokens is required: small.tiktoken"):
        toktoktok.train(["hello world"] * 20, merges=3, warm_start=base)


def test_the_stages_keys_follow_the_special_tokens_the_base_resolves_to(tmp_path):
    """Where the base's special tokens sit decides where new merges start: a work folder
    trained when they were read otherwise (another companion, or cl100k_base before it was
    recognised) must not be taken as current."""
    from toktoktok_stages import workdir

    base = small_base(tmp_path)
    config = config_with(tmp_path, f"{{file: {base}}}")
    keys = []
    for eot in (300, 302):
        (tmp_path / "small.meta.json").write_text(json.dumps({"format": "toktoktok-meta/1",
                                                              "special_tokens": {"<|endoftext|>": eot}}))
        keys.append(workdir.Work(load_config(config)).base_description())
    assert keys[0] != keys[1]
    assert keys[1]["warm_start_special_tokens"] == {"<|endoftext|>": 302}
