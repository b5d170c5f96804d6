"""``vocab_size: N``: the number of embedding rows, everything included.

The expected numbers are worked out here from the layout docs/vocabulary.md states
(the 256 bytes, the 1,161 hardcoded merges, each phase, the special tokens,
the padding), and every run's ids are read back with tiktoken.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

import toktoktok
from tests.conftest import english_text, manifest, toktok, work_of
from toktoktok.config import ConfigError, load_config
from toktoktok.errors import LayoutError
from toktoktok.id_layout import BYTES, HARDCODED_MERGES, blocks, fit_merges
from toktoktok.tiktoken_file import write_tiktoken
from toktoktok.vocab import Vocab

BASE = 256 + 1161  # the bytes and the hardcoded merges


@pytest.fixture
def data(tmp_path: Path) -> Path:
    """Two folders of real English prose: enough pairs for a few hundred merges each."""
    for name, offset in (("a", 0), ("b", 30_000)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "text.txt").write_text(english_text(25_000, offset=offset), encoding="utf-8")
    return tmp_path


def config(folder: Path, top: str, phase_a: str = "merges: 40", phase_b: str = "") -> Path:
    """A two-phase config: ``top`` are top-level lines, ``phase_X`` that phase's extra keys."""
    text = textwrap.dedent(f"""\
        output: out/tok.tiktoken
        threads: 1
        heldout_share: 0
        {{top}}
        phases:
          - name: A
            sources: [{{{{path: {folder / 'a'}}}}}]
            {{a}}
          - name: B
            sources: [{{{{path: {folder / 'b'}}}}}]
            {{b}}
        """).format(top=top, a=phase_a, b=phase_b)
    path = folder / "config.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def error_of(path: Path) -> str:
    with pytest.raises(ConfigError) as info:
        load_config(path)
    return str(info.value)


# ---------------------------------------------------------------- the arithmetic


def test_the_hardcoded_count_is_the_vocabularys():
    assert BYTES + HARDCODED_MERGES == len(Vocab.initial(hardcoded=True)) == BASE
    assert len(Vocab.initial(hardcoded=False)) == BYTES


def test_fit_gives_the_rest_to_the_phase_without_merges():
    assert fit_merges(2048, base=BASE, merges=[100, None], specials=3, pad_to=64) == [100, 2048 - BASE - 100 - 3]
    assert fit_merges(2048, base=BASE, merges=[None], specials=0, pad_to=None) == [2048 - BASE]
    # every phase gives its merges: the padding may close the gap, nothing else
    assert fit_merges(1536, base=BASE, merges=[40, 60], specials=3, pad_to=128) == [40, 60]
    assert fit_merges(1520, base=BASE, merges=[40, 60], specials=3, pad_to=None) == [40, 60]


@pytest.mark.parametrize(("kwargs", "key", "words"), [
    (dict(vocab_size=2000, merges=[None], pad_to=64), ("vocab_size",), ["not a multiple", "64", "1984 or 2048"]),
    (dict(vocab_size=2048, merges=[None, 5, None], pad_to=None), ("phases", 2, "merges"), ["only one phase"]),
    (dict(vocab_size=1418, merges=[5, None], pad_to=None), ("vocab_size",), ["too small", "1,425"]),
    (dict(vocab_size=2000, merges=[40, 60], pad_to=None), ("vocab_size",), ["add up to 1,520", "vocab_size: 1520"]),
    (dict(vocab_size=1664, merges=[40, 60], pad_to=128), ("vocab_size",), ["padded", "1,536"]),
])
def test_fit_refuses_what_cannot_make_exactly_n(kwargs, key, words):
    with pytest.raises(LayoutError) as info:
        fit_merges(base=BASE, specials=3, **kwargs)
    assert info.value.key == key
    for word in words:
        assert word in info.value.problem


def test_blocks_are_contiguous_and_end_at_the_size():
    layout = blocks(base=[("bytes", 256), ("hardcoded merges", 1161)], merges=[("A", 40), ("B", 77)],
                    specials=2, pad_to=128)
    assert [b.name for b in layout] == ["bytes", "hardcoded merges", "phase A", "phase B", "special tokens",
                                        "padding"]
    for before, after in zip(layout, layout[1:]):
        assert after.first == before.last + 1
    assert layout[-1].last + 1 == 1536 and layout[-1].size == 1536 - (BASE + 40 + 77 + 2)


# ---------------------------------------------------------------- config errors


def test_a_phase_may_leave_merges_out_with_vocab_size(data):
    cfg = load_config(config(data, "vocab_size: 2048\nspecial_tokens: ['<|endoftext|>']", "merges: 100"))
    assert [(p.merges, p.gets_rest) for p in cfg.phases] == [(100, False), (2048 - BASE - 100 - 1, True)]
    cfg = load_config(config(data, "vocab_size: 2048\nhardcoded_merges: false", "merges: 100"))
    assert cfg.phases[1].merges == 2048 - 256 - 100


def test_without_vocab_size_merges_stays_required(data):
    message = error_of(config(data, "", "merges: 100"))
    assert "line 9: phases[1].merges is required" in message


@pytest.mark.parametrize(("top", "phase_a", "phase_b", "expected"), [
    ("vocab_size: 2000\npad_to_multiple_of: 64", "merges: 40", "",
     "line 4: vocab_size is 2,000, not a multiple of pad_to_multiple_of (64): use 1984 or 2048"),
    ("vocab_size: 2048", "", "", "line 9: phases[1].merges is required: only one phase may leave merges: out"),
    ("vocab_size: 1450\nspecial_tokens: [a, b]", "merges: 40", "",
     "line 4: vocab_size is 1,450, too small: the 256 bytes and the 1,161 hardcoded merges (1,417), "
     "the phases' merges (40) and the special tokens (2) already take 1,459 ids"),
    ("vocab_size: 2048", "merges: 40", "merges: 50",
     "line 4: vocab_size is 2,048, but the ids add up to 1,507"),
    ("vocab_size: 2048.0", "merges: 40", "", "line 4: vocab_size must be an integer >= 257 or null"),
    ("vocab_size: true", "merges: 40", "", "vocab_size must be an integer"),
    ("vocab_size: 290\nhardcoded_merges: false", "merges: 40", "", "too small: the 256 bytes (256)"),
])
def test_sizes_that_cannot_be_made_are_config_errors(data, top, phase_a, phase_b, expected):
    path = config(data, top, phase_a, phase_b)
    assert expected in error_of(path)
    r = toktok("run", "-c", path)
    assert r.code == 2
    assert expected in r.err and str(path) in r.err
    assert not work_of(path).exists()


def test_the_rest_of_zero_is_a_warning(data):
    cfg = load_config(config(data, "vocab_size: 1457", "merges: 40"))
    assert cfg.phases[1].merges == 0
    assert any("gets the rest of vocab_size, which is 0" in w for w in cfg.warnings)


# ---------------------------------------------------------------- runs


def ids_of(path: Path) -> tuple[int, dict[str, int], set[int]]:
    """(n_vocab, special token ids, every mergeable id) as tiktoken reads the output."""
    enc = toktoktok.load(path)
    specials = {tok: enc.encode_single_token(tok) for tok in enc.special_tokens_set}
    ranks = set(enc._mergeable_ranks.values())
    return enc.n_vocab, specials, ranks


def test_a_run_makes_exactly_vocab_size(data):
    path = config(data, "vocab_size: 1536\npad_to_multiple_of: 64\nspecial_tokens: ['<|endoftext|>', '<|pad|>']",
                  "merges: 40")
    r = toktok("run", "-c", path)
    assert r.code == 0, r.err
    assert "vocabulary size 1536 = vocab_size (ids 0..1535" in r.out
    n_vocab, specials, ranks = ids_of(data / "out" / "tok.tiktoken")
    assert n_vocab == 1536
    assert ranks == set(range(1534))  # every id below the special tokens is a token, no gap
    assert specials == {"<|endoftext|>": 1534, "<|pad|>": 1535}
    trained = [manifest(work_of(path) / "train" / slug)["counts"] for slug in ("01-a", "02-b")]
    assert [t["merges_made"] for t in trained] == [40, 1536 - BASE - 40 - 2]
    meta = json.loads((data / "out" / "tok.meta.json").read_text())
    assert meta["vocab_size"] == 1536


def test_padding_fills_up_to_vocab_size(data):
    path = config(data, "vocab_size: 1536\npad_to_multiple_of: 128\nspecial_tokens: ['<|endoftext|>']",
                  "merges: 40", "merges: 60")
    assert toktok("run", "-c", path).code == 0
    n_vocab, specials, ranks = ids_of(data / "out" / "tok.tiktoken")
    assert n_vocab == 1536 and ranks == set(range(BASE + 100))
    assert specials["<|endoftext|>"] == BASE + 100
    assert sorted(specials.values()) == list(range(BASE + 100, 1536))
    assert sum(t.startswith("<|reserved_special_token_") for t in specials) == 1536 - BASE - 100 - 1


def test_a_phase_that_runs_out_of_pairs_fails_the_run(data):
    (data / "b" / "text.txt").write_text("a tiny phase: a few words, a few pairs.\n")
    path = config(data, "vocab_size: 2048\nspecial_tokens: ['<|endoftext|>']", "merges: 40")
    r = toktok("run", "-c", path, real=True)
    assert r.code == 1, r.err
    line = r.err.strip()
    assert line.startswith("error: phase 'B' made ")
    made = int(line.split(" made ")[1].split(" of ")[0])
    assert made < 2048 - BASE - 40 - 1
    assert f"of the {2048 - BASE - 40 - 1:,} merges that vocab_size: 2,048 needs" in line
    assert "more text" in line and "min_frequency" in line and "smaller vocab_size" in line
    assert "Traceback" not in r.err
    assert not (data / "out" / "tok.tiktoken").exists()


def test_without_vocab_size_a_short_phase_warns_and_says_the_size(data):
    (data / "b" / "text.txt").write_text("a tiny phase: a few words, a few pairs.\n")
    path = config(data, "special_tokens: ['<|endoftext|>']", "merges: 40", "merges: 500")
    r = toktok("run", "-c", path)
    assert r.code == 0, r.err
    made = manifest(work_of(path) / "train" / "02-b")["counts"]["merges_made"]
    size = BASE + 40 + made + 1
    assert ids_of(data / "out" / "tok.tiktoken")[0] == size
    assert f"vocabulary size {size} (ids 0..{size - 1}" in r.out
    assert f"the vocabulary size is {size}, not {BASE + 40 + 500 + 1}" in r.out
    assert "ran out of pairs" in r.err
    report = (data / "out" / "tok.report.md").read_text()
    assert f"= {size:,} ids" in report and "stopped early" in report


# ---------------------------------------------------------------- warm start: fitted once the base is read


@pytest.fixture
def base(tmp_path: Path) -> Path:
    """A base of the bytes, three tokens and a special token at id 300 (size 301)."""
    path = tmp_path / "base.tiktoken"
    write_tiktoken(path, {bytes([b]): b for b in range(256)} | {b"th": 256, b"he": 257, b"the": 258})
    return path


def warm(data: Path, base: Path, vocab_size: int) -> Path:
    top = (f"vocab_size: {vocab_size}\nwarm_start: {{file: {base}, special_tokens: {{'<|end|>': 300}}}}\n"
           "special_tokens: ['<|end|>', '<|pad|>']")
    return config(data, top, "merges: 30")


def test_warm_start_base_size_comes_from_the_file(data, base):
    path = warm(data, base, 400)
    assert load_config(path).phases[1].merges is None  # not known before the base is read
    r = toktok("plan", "-c", path, "--json")
    assert r.code == 0, r.err
    plan = json.loads(r.out)
    assert [p["merges"] for p in plan["phases"]] == [30, 400 - 301 - 30 - 1]
    assert [(b["name"], b["first"], b["last"]) for b in plan["ids"]] == [
        ("warm start base", 0, 300), ("phase A", 301, 330), ("phase B", 331, 398), ("special tokens", 399, 399),
        ("padding", 400, 399)]
    assert plan["vocab_size"] == 400
    assert toktok("run", "-c", path).code == 0
    n_vocab, specials, _ = ids_of(data / "out" / "tok.tiktoken")
    assert n_vocab == 400 and specials == {"<|end|>": 300, "<|pad|>": 399}


def test_warm_start_too_small_is_a_config_error_at_the_check(data, base):
    path = warm(data, base, 320)
    load_config(path)  # the base is not read here
    for command in ("plan", "run"):
        r = toktok(command, "-c", path)
        assert r.code == 2
        assert "line 4: vocab_size is 320, too small: the warm start's base (its highest id + 1) (301)" in r.err
    assert not (data / "out").exists()


# ---------------------------------------------------------------- plan


def test_plan_shows_the_id_layout(data):
    path = config(data, "vocab_size: 1536\npad_to_multiple_of: 64\nspecial_tokens: ['<|endoftext|>', '<|pad|>']",
                  "merges: 40")
    plan = json.loads(toktok("plan", "-c", path, "--json").out)
    assert [(b["name"], b["first"], b["last"], b["count"]) for b in plan["ids"]] == [
        ("bytes", 0, 255, 256), ("hardcoded merges", 256, 1416, 1161), ("phase A", 1417, 1456, 40),
        ("phase B", 1457, 1533, 77), ("special tokens", 1534, 1535, 2), ("padding", 1536, 1535, 0)]
    text = toktok("plan", "-c", path).out
    assert "ids: 1,536 in all (vocab_size)" in text
    rows = [line.split() for line in text.splitlines() if line.strip().endswith(("bytes", "merges", " A", " B"))]
    assert ["1457", "1533", "77", "phase", "B"] in rows
    assert "phase 2 of 2: B (02-b), 77 merges (the rest of vocab_size)" in text


def test_plan_without_vocab_size_shows_the_layout_if_every_phase_makes_its_merges(data):
    path = config(data, "pad_to_multiple_of: 100\nhardcoded_merges: false\nspecial_tokens: [x]", "merges: 40",
                  "merges: 10")
    plan = json.loads(toktok("plan", "-c", path, "--json").out)
    assert [(b["name"], b["first"], b["last"]) for b in plan["ids"]] == [
        ("bytes", 0, 255), ("phase A", 256, 295), ("phase B", 296, 305), ("special tokens", 306, 306),
        ("padding", 307, 399)]
    assert "ids: 400 in all (if every phase makes all its merges)" in toktok("plan", "-c", path).out


# ---------------------------------------------------------------- from Python


def test_train_from_python_with_vocab_size_instead_of_merges():
    docs = [english_text(3_000, offset=k * 3_000) for k in range(8)]
    enc = toktoktok.train(docs, vocab_size=400, special_tokens=["<|endoftext|>"], hardcoded_merges=False,
                          heldout_share=0, threads=1)
    assert enc.n_vocab == 400 and enc.encode_single_token("<|endoftext|>") == 399
    assert set(enc._mergeable_ranks.values()) == set(range(399))
    with pytest.raises(ValueError, match="merges is required .* unless vocab_size"):
        toktoktok.train(docs)
