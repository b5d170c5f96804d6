"""A pattern per phase (docs/configuration.md, a phase's keys): each phase counts
its pieces with its own ``pattern:`` (else the top-level one), trains on them
from every rank before it, and the last phase's pattern is the tokenizer's."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

import toktoktok
from tests.conftest import (
    chunk_counts,
    manifest,
    merges_rows,
    piece_counts,
    spec_base_ranks,
    toktok,
    work_of,
    write_config,
)
from tests.helpers import stdlib_text
from toktoktok.config import ConfigError, config_fingerprint, effective_settings, load_config
from toktoktok.merge import train_reference, words_reference
from toktoktok.patterns import NAMED_PATTERNS
from toktoktok_stages.report.growth import Growth
from toktoktok_stages.workdir import Work

# contractions, digit runs and spaces before numbers: where gpt2, cl100k and the
# -digits variants cut differently
EXTRA = "It's 12345 o'clock, we'LL see 2024 and 7 or 1234567 THEY'RE  here 42x.\n"


def _corpus(folder: Path) -> tuple[Path, Path]:
    data = folder / "data"
    data.mkdir(parents=True, exist_ok=True)
    text = stdlib_text(60_000)
    half = len(text) // 2
    a, b = data / "a.txt", data / "b.txt"
    a.write_text(text[:half] + EXTRA * 20, encoding="utf-8")
    b.write_text(text[half:] + EXTRA * 20, encoding="utf-8")
    return a, b


def _phases(a: Path, b: Path, first: str | None, second: str | None) -> list[dict]:
    phases = [{"name": "one", "merges": 120, "sources": [{"file": str(a)}]},
              {"name": "two", "merges": 80, "sources": [{"file": str(b)}]}]
    for phase, pattern in zip(phases, (first, second)):
        if pattern is not None:
            phase["pattern"] = pattern
    return phases


def _documents(path: Path) -> list[str]:
    """A ``.txt`` file's text as ingest counts it: findall over the whole file
    (docs/pretokenization.md; for gpt2 its documents run on into each other)."""
    return [path.read_text(encoding="utf-8")]


@pytest.mark.parametrize("first, second, top", [("gpt2", None, "cl100k"), (None, "gpt2", "cl100k-digits")])
def test_each_phase_counts_with_its_pattern_and_the_last_one_is_the_tokenizers(tmp_path, first, second, top):
    a, b = _corpus(tmp_path)
    config = write_config(tmp_path, _phases(a, b, first, second), pattern=top, heldout_share=0,
                          hardcoded_merges=False)
    r = toktok("run", "-c", config)
    assert r.code == 0, r.err
    cfg = load_config(config)
    wanted = [first or top, second or top]
    assert [cfg.pattern_of(p).name for p in cfg.phases] == wanted
    ingest, train = work_of(config) / "ingest", work_of(config) / "train"
    ranks = spec_base_ranks(False)
    for phase, path, name in zip(cfg.phases, (a, b), wanted):
        pieces = chunk_counts(ingest / phase.slug)
        assert pieces == piece_counts(_documents(path), [], NAMED_PATTERNS[name].python), name
        assert manifest(ingest / phase.slug)["settings"]["pattern"] == NAMED_PATTERNS[name].python
        # the phase trains on its own pieces, segmented with every rank before it
        rows = merges_rows(train / phase.slug / "merges.arrow")
        assert rows == train_reference(pieces, ranks, merges=phase.merges)
        ranks = ranks | {token: rank for rank, _, _, token, _ in rows}
    growth = Growth(Work(cfg))  # the report's columns: each phase's with its pattern, the base with the first's
    first_end = growth.phase_new[0][1]
    assert [growth.encoding(n)._pat_str for n in (None, 0, first_end, first_end + 1, len(growth.new))] == [
        NAMED_PATTERNS[name].tiktoken for name in (wanted[0], wanted[0], wanted[0], wanted[1], wanted[1])]
    report = (tmp_path / "out" / "tok.report.md").read_text(encoding="utf-8")
    assert f"Each phase counted its pieces with its own pattern (one `{wanted[0]}`, two `{wanted[1]}`)" in report
    enc = toktoktok.load(tmp_path / "out" / "tok.tiktoken")
    assert enc._pat_str == NAMED_PATTERNS[wanted[-1]].tiktoken  # the companion records the last phase's
    plan = toktok("plan", "-c", config)
    assert plan.code == 0, plan.err
    assert f"  pattern: {wanted[0]}\n" in plan.out
    assert f"  pattern: {wanted[1]} (the tokenizer's: the last phase's)\n" in plan.out
    settings = yaml.safe_load(plan.out.partition("\nphase 1 of 2")[0])  # the effective configuration loads as it is
    assert [p.get("pattern") for p in settings["phases"]] == [first, second]


def test_changing_one_phases_pattern_ingests_that_phase_again(tmp_path):
    """The ingest key holds the phase's own pattern: the phase whose pattern changed
    is counted again, the other one is left as it was (its manifest not rewritten)."""
    a, b = _corpus(tmp_path)
    config = write_config(tmp_path, _phases(a, b, None, None), heldout_share=0)
    assert toktok("ingest", "-c", config).code == 0
    slugs = [p.slug for p in load_config(config).phases]
    folders = [work_of(config) / "ingest" / slug for slug in slugs]
    before = [(f / "manifest.json").stat().st_mtime_ns for f in folders]
    config = write_config(tmp_path, _phases(a, b, None, "gpt2"), heldout_share=0)
    r = toktok("ingest", "-c", config)
    assert r.code == 0, r.err
    after = [(f / "manifest.json").stat().st_mtime_ns for f in folders]
    assert after[0] == before[0] and after[1] != before[1]
    assert manifest(folders[0])["settings"]["pattern"] == NAMED_PATTERNS["default"].python
    assert manifest(folders[1])["settings"]["pattern"] == NAMED_PATTERNS["gpt2"].python
    assert chunk_counts(folders[1]) == piece_counts(_documents(b), [], NAMED_PATTERNS["gpt2"].python)


def test_a_phase_pattern_is_checked_and_named_by_its_key(tmp_path):
    a, b = _corpus(tmp_path)
    config = write_config(tmp_path, _phases(a, b, None, "(?=x)"))
    with pytest.raises(ConfigError, match=r"phases\[1\]\.pattern"):
        load_config(config)
    config = write_config(tmp_path, _phases(a, b, None, 7))
    with pytest.raises(ConfigError, match=r"phases\[1\]\.pattern must be a name"):
        load_config(config)


def test_a_phase_without_its_own_pattern_keeps_the_config_as_it_was(tmp_path):
    """``pattern: null`` on a phase is the same as leaving it out: same config, same fingerprint."""
    a, b = _corpus(tmp_path)
    left_out = load_config(write_config(tmp_path / "x", _phases(a, b, None, None), pattern="o200k"))
    phases = _phases(a, b, None, None)
    phases[0]["pattern"] = None
    nulled = load_config(write_config(tmp_path / "y", phases, pattern="o200k", output=str(tmp_path / "x" / "out" /
                                                                                         "tok.tiktoken")))
    assert all(p.pattern is None for p in left_out.phases + nulled.phases)
    assert left_out.tokenizer_pattern.name == "o200k"
    assert config_fingerprint(left_out) == config_fingerprint(nulled)
    # nor do the new keys change a config that does not use them: max_token_words left out, or null
    phases[1]["max_token_words"] = None
    also = load_config(write_config(tmp_path / "z", phases, pattern="o200k", max_token_words=None,
                                    output=str(tmp_path / "x" / "out" / "tok.tiktoken")))
    assert config_fingerprint(also) == config_fingerprint(left_out)
    assert "max_token_words" not in str(effective_settings(left_out))


@pytest.mark.parametrize("first, second, joined", [("cl100k-digits", "cl100k", True), ("cl100k", "cl100k-digits", False),
                                                   (None, None, False)])
def test_a_coarser_later_pattern_is_said_in_one_line(tmp_path, first, second, joined):
    """cl100k keeps a run of up to three digits whole, which cl100k-digits cuts one a
    piece: after a cl100k-digits phase, a cl100k phase says what that means, once."""
    a, b = _corpus(tmp_path)
    config = write_config(tmp_path, _phases(a, b, first, second), heldout_share=0)
    r = toktok("run", "-c", config)
    assert r.code == 0, r.err
    slug = load_config(config).phases[1].slug
    notes = [w for w in manifest(work_of(config) / "train" / slug)["warnings"] if "keeps whole pieces" in w]
    assert len(notes) == joined
    if joined:
        assert notes[0].startswith("phase 'two' counts with pattern cl100k, which keeps whole pieces that phase "
                                   "'one''s cl100k-digits cuts (such as ")
        assert notes[0].endswith("): the earlier phase's tokens will be applied inside these longer pieces")
        assert f"warning: {notes[0]}" in r.out + r.err


def test_max_token_words_top_level_and_per_phase(tmp_path):
    """``max_token_words`` bounds the words a token learned spans: the top-level bound for
    every phase, a phase's own for that phase; a line pattern lets tokens cross spaces."""
    a, b = _corpus(tmp_path)
    phases = _phases(a, b, r"[^\n]+|\n+", r"[^\n]+|\n+")
    phases[1]["max_token_words"] = 3
    config = write_config(tmp_path, phases, heldout_share=0, max_token_words=1, hardcoded_merges=False)
    r = toktok("run", "-c", config)
    assert r.code == 0, r.err
    cfg = load_config(config)
    assert [cfg.max_token_words_of(p) for p in cfg.phases] == [1, 3]
    spans = []
    ranks = spec_base_ranks(False)
    for phase in cfg.phases:
        pieces = chunk_counts(work_of(config) / "ingest" / phase.slug)
        rows = merges_rows(work_of(config) / "train" / phase.slug / "merges.arrow")
        assert rows == train_reference(pieces, ranks, merges=phase.merges,
                                       max_token_words=cfg.max_token_words_of(phase))
        ranks = ranks | {token: rank for rank, _, _, token, _ in rows}
        spans.append(max(words_reference(token) for *_, token, _ in rows))
        settings = manifest(work_of(config) / "train" / phase.slug)["settings"]
        assert settings["max_token_words"] == cfg.max_token_words_of(phase)
    assert spans[0] == 1 and 1 < spans[1] <= 3  # the second phase's own bound, not the top-level one
    plan = toktok("plan", "-c", config)
    settings = yaml.safe_load(plan.out.partition("\nphase 1 of 2")[0])
    assert settings["max_token_words"] == 1 and [p.get("max_token_words") for p in settings["phases"]] == [None, 3]
