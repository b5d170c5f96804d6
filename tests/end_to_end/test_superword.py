"""Superword phases (docs/pretokenization.md, Superword): a phase with ``pattern:
superword`` after a word-level one learns tokens that cross spaces, exactly as
the plain two-stage reference does, from the bytes or from a warm start, and
the tokenizer it makes encodes alike in tiktoken and Hugging Face, long lines
included."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import toktoktok
from tests.conftest import (
    english_text,
    manifest,
    merges_rows,
    mixed_texts,
    parse_tiktoken,
    read_arrow,
    spec_base_ranks,
    toktok,
    work_of,
    write_config,
)
from tests.helpers import SHARED, stdlib_sources
from toktoktok.config import load_config
from toktoktok.merge import words_reference
from toktoktok.patterns import NAMED_PATTERNS
from toktoktok.phases_reference import Stage, train_phases_reference
from toktoktok.tiktoken_file import read_tiktoken

SUPERWORD = NAMED_PATTERNS["superword"]
# phrases that recur, so that tokens across their spaces have the counts to be learned
PHRASES = "By the way, it is what it is. In order to see, we need to look at it. As a matter of fact, 2026 is here.\n"


def _corpus(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "prose.txt"
    path.write_text(english_text(40_000) + "\n" + PHRASES * 30, encoding="utf-8")
    return path


def _stages(cfg) -> list[Stage]:
    return [Stage(cfg.pattern_of(p).python, p.merges, max_token_words=cfg.max_token_words_of(p)) for p in cfg.phases]


def _rows(config: Path) -> list:
    cfg = load_config(config)
    return [row for p in cfg.phases for row in merges_rows(work_of(config) / "train" / p.slug / "merges.arrow")]


def _hf_ids(folder: Path, text: str) -> list[int]:
    from tokenizers import Tokenizer

    return Tokenizer.from_file(str(folder / "tokenizer.json")).encode(text, add_special_tokens=False).ids


@pytest.fixture(scope="module")
def two_phases(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A word phase, then a superword phase of at most four words a token, on the same prose."""
    folder = tmp_path_factory.mktemp("superword")
    text = _corpus(folder / "data")
    phases = [{"name": "words", "merges": 150, "sources": [{"file": str(text)}]},
              {"name": "superwords", "merges": 120, "pattern": "superword", "max_token_words": 4,
               "sources": [{"file": str(text)}]}]
    config = write_config(folder, phases, heldout_share=0, hardcoded_merges=False, export_hf=True)
    r = toktok("run", "-c", config)
    assert r.code == 0, r.err
    return config, text


def test_the_superword_phase_learns_the_two_stage_references_merges(two_phases):
    """Each phase's merges, rank for rank, are those of the plain reference run from the
    raw text: word pieces first, then superword pieces segmented with the first phase's ranks."""
    config, text = two_phases
    cfg = load_config(config)
    want = train_phases_reference([text.read_text(encoding="utf-8")], _stages(cfg), spec_base_ranks(False))
    got = _rows(config)
    assert got == want
    second = [token for *_, token, _ in merges_rows(work_of(config) / "train" / cfg.phases[1].slug / "merges.arrow")]
    spans = [words_reference(token) for token in second]
    assert max(spans) == 4 and sum(s > 1 for s in spans) >= 10  # superwords, none over the bound
    assert max(words_reference(token) for *_, token, _ in got[:150]) == 1  # the word phase's tokens: one word each


@pytest.mark.parametrize("corpus", ["code", "languages"])
def test_the_reference_on_other_text(tmp_path, corpus):
    """Source code, and several languages and scripts (marks, which superword's
    punctuation class holds, among them), the single-digit variant in the second case."""
    text = stdlib_sources(30_000) if corpus == "code" else "\n\n".join(mixed_texts().values())[:40_000]
    path = tmp_path / "data" / "text.txt"
    path.parent.mkdir(parents=True)
    path.write_text(text, encoding="utf-8")
    pattern = "superword" if corpus == "code" else "superword-digits"
    phases = [{"name": "words", "merges": 80, "sources": [{"file": str(path)}]},
              {"name": "superwords", "merges": 60, "pattern": pattern, "max_token_words": 3,
               "sources": [{"file": str(path)}]}]
    config = write_config(tmp_path, phases, heldout_share=0, hardcoded_merges=False, pattern="o200k")
    r = toktok("run", "-c", config)
    assert r.code == 0, r.err
    cfg = load_config(config)
    want = train_phases_reference([path.read_text(encoding="utf-8")], _stages(cfg), spec_base_ranks(False))
    assert _rows(config) == want
    assert max(words_reference(token) for *_, token, _ in want[80:]) <= 3


def test_the_exported_superword_tokenizer_is_checked_and_encodes_alike(two_phases):
    """The export's checks hold (every last-phase piece segmented as tiktoken does,
    Hugging Face ids equal to tiktoken's), the tokenizer's pattern is superword, and
    text full of superwords, and a line of 1 MiB, encode alike in both."""
    config, _ = two_phases
    counts = manifest(work_of(config) / "export")["counts"]
    assert counts["pieces_checked_with_tiktoken"] > 0
    assert counts["pieces_differing_from_tiktoken"] == counts["pieces_trainer_differing"] == 0
    assert counts["hf_texts_differing"] == 0
    out = config.parent / "out"
    enc = toktoktok.load(out / "tok.tiktoken")
    assert enc._pat_str == SUPERWORD.tiktoken
    assert json.loads((out / "tok.meta.json").read_text())["pattern"]["name"] == "superword"
    text = PHRASES * 3 + "By the way,  it is... what it is!\n\n  In order to see 12345 of them.\r\n"
    ids = enc.encode_ordinary(text)
    assert any(words_reference(enc.decode_single_token_bytes(i)) > 1 for i in ids)  # superwords are used
    assert ids == _hf_ids(out / "tok.hf", text)
    line = (PHRASES.replace("\n", " ") * 20_000)[: 1 << 20]  # one line: runs of 1,024 characters, cut anyway
    ids = enc.encode_ordinary(line)
    assert enc.decode(ids) == line
    assert ids == _hf_ids(out / "tok.hf", line)


def test_a_warm_start_extended_by_a_superword_phase(two_phases, tmp_path):
    """SuperBPE's "extend an existing tokenizer": a superword phase on a warm start
    keeps every id of the base, records superword as the tokenizer's pattern, and
    learns the reference's merges from the base's ranks."""
    config, text = two_phases
    base_file = config.parent / "out" / "tok.tiktoken"
    phases = [{"name": "extend", "merges": 80, "pattern": "superword", "max_token_words": 4,
               "sources": [{"file": str(text)}]}]
    extended = write_config(tmp_path, phases, heldout_share=0, warm_start={"file": str(base_file)}, export_hf=True)
    r = toktok("run", "-c", extended)
    assert r.code == 0, r.err
    base = dict(parse_tiktoken(base_file))
    cfg = load_config(extended)
    want = train_phases_reference([text.read_text(encoding="utf-8")], _stages(cfg), base)
    assert _rows(extended) == want
    enc = toktoktok.load(tmp_path / "out" / "tok.tiktoken")
    assert {t: r for t, r in enc._mergeable_ranks.items() if t in base} == base
    assert len(enc._mergeable_ranks) == len(base) + 80
    assert enc._pat_str == SUPERWORD.tiktoken
    text = PHRASES * 2
    assert enc.encode_ordinary(text) == _hf_ids(tmp_path / "out" / "tok.hf", text)


CL100K = SHARED / "data/reference/cl100k_base.tiktoken.gz"
CL100K_SPECIALS = {"<|endoftext|>": 100257, "<|fim_prefix|>": 100258, "<|fim_middle|>": 100259,
                   "<|fim_suffix|>": 100260, "<|endofprompt|>": 100276}


@pytest.mark.skipif(not CL100K.exists(), reason="needs ../shared")
def test_cl100k_extended_by_a_superword_phase(two_phases, tmp_path):
    """cl100k_base plus one superword phase: every cl100k id (special tokens too) kept,
    the reference's merges from cl100k's ranks, superword recorded as the pattern,
    and the export loads in transformers with tiktoken's ids."""
    transformers = pytest.importorskip("transformers")
    _, text = two_phases
    phases = [{"name": "extend", "merges": 60, "pattern": "superword", "max_token_words": 4,
               "sources": [{"file": str(text)}]}]
    config = write_config(tmp_path, phases, heldout_share=0, export_hf=True,
                          warm_start={"file": str(CL100K), "special_tokens": CL100K_SPECIALS})
    r = toktok("run", "-c", config)
    assert r.code == 0, r.err
    base = read_tiktoken(CL100K)
    rows = _rows(config)
    assert rows == train_phases_reference([text.read_text(encoding="utf-8")], _stages(load_config(config)), base,
                                          next_rank=100277)
    assert [rank for rank, *_ in rows] == list(range(100277, 100277 + 60))  # after cl100k's last special token
    enc = toktoktok.load(tmp_path / "out" / "tok.tiktoken")
    assert all(enc._mergeable_ranks[t] == r for t, r in base.items())
    assert {t: enc._special_tokens[t] for t in CL100K_SPECIALS} == CL100K_SPECIALS
    assert enc._pat_str == SUPERWORD.tiktoken
    assert json.loads((tmp_path / "out" / "tok.meta.json").read_text())["pattern"]["name"] == "superword"
    tok = transformers.PreTrainedTokenizerFast.from_pretrained(str(tmp_path / "out" / "tok.hf"))
    sample = PHRASES * 2 + "<|endoftext|>" + english_text(2_000)
    assert tok.encode(sample, add_special_tokens=False) == enc.encode(sample, allowed_special="all")
    assert any(words_reference(enc.decode_single_token_bytes(i)) > 1 for i in enc.encode_ordinary(PHRASES))


def test_the_report_has_a_superword_section(two_phases):
    """The report says, for the superword phase only, how many of its tokens span words,
    the share of its text's tokens that do, and the most produced of them."""
    config, _ = two_phases
    out = config.parent / "out"
    doc = json.loads((out / "tok.report.json").read_text(encoding="utf-8"))
    words, supers = (p["superwords"] for p in doc["phases"])
    assert words is None
    second = [token for *_, token, _ in _rows(config)[150:]]
    spans = [words_reference(t) for t in second]
    assert supers["new_spanning_words"] == sum(s > 1 for s in spans)
    assert supers["new_by_words"] == {str(n): spans.count(n) for n in sorted(set(spans)) if n > 1}
    # the last phase's text: its pieces as the trainer segmented them (heldout_share is 0)
    usage = read_arrow(work_of(config) / "train" / load_config(config).phases[1].slug / "usage.arrow")
    ranks = {r: t for t, r in parse_tiktoken(out / "tok.tiktoken")}
    used = dict(zip(usage["id"].to_pylist(), usage["count"].to_pylist()))
    multi = sorted((-n, i) for i, n in used.items() if words_reference(ranks[i]) > 1)
    assert [(t["rank"], t["produced"]) for t in supers["most_produced"]] == [(i, -n) for n, i in multi[:20]]
    assert supers["produced_share"] == round(-sum(n for n, _ in multi) / sum(used.values()), 6)
    assert 0 < supers["produced_share"] < 1
    assert all(t["words"] > 1 for t in supers["most_produced"])
    markdown = (out / "tok.report.md").read_text(encoding="utf-8")
    assert markdown.count("Tokens across words:") == 1
    assert f"The {len(supers['most_produced'])} most produced tokens that span words:" in markdown
