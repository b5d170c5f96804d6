"""Warm start (docs/configuration.md): every base token and special token keeps its id, new
merges come above the base's highest id, and text encodes as with the base
wherever no new merge applies."""

from __future__ import annotations

import io
import json

import pytest
import regex
import tiktoken

from stages import pipeline
from stages.progress import Progress
from tests.helpers import SHARED, stdlib_text
from toktoktok import load
from toktoktok.config import load_config
from toktoktok.patterns import NAMED_PATTERNS
from toktoktok.tiktoken_file import read_tiktoken, write_tiktoken

CL100K = SHARED / "data/reference/cl100k_base.tiktoken.gz"
CL100K_SPECIALS = {"<|endoftext|>": 100257, "<|fim_prefix|>": 100258, "<|fim_middle|>": 100259,
                   "<|fim_suffix|>": 100260, "<|endofprompt|>": 100276}


def run(tmp_path, warm_start: dict, *, merges: int, pattern: str = "default", specials=("<|endoftext|>", "<|x|>")):
    (tmp_path / "data").mkdir(exist_ok=True)
    (tmp_path / "data/a.txt").write_text(stdlib_text(150_000))
    cfg = {"output": "out/ext.tiktoken", "pattern": pattern, "heldout_share": 0, "warm_start": warm_start,
           "special_tokens": list(specials), "phases": [{"name": "p", "merges": merges, "sources": [{"path": "data"}]}]}
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
