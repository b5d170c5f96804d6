"""The training report: ``NAME.report.md``, ``.report.json``, ``.report.png``.

Two real runs of the pipeline on real text (tinyshakespeare and the
multilingual samples from ``/work/shared/data`` when present, else the
standard library's docstrings and sources): one holding out 20% of each
phase's documents, one holding out nothing. The numbers are checked against
tiktoken run here on the held-out documents read straight from the Arrow
files, with vocabularies rebuilt from the ``.tiktoken`` file and the
manifests.
"""

from __future__ import annotations

import json
import re
import struct
import zlib
from pathlib import Path
from types import SimpleNamespace

import pytest
import tiktoken

from tests.conftest import (
    SPEC_PATTERN,
    SPECIALS,
    english_text,
    manifest,
    mixed_texts,
    parse_tiktoken,
    read_arrow,
    toktok,
    work_of,
    write_config,
)

MERGES = (300, 200)
PHASES = ("Shakespeare", "Mixed")


def _sources(root: Path, english_chars: int) -> list[dict]:
    english = root / "english"
    mixed = root / "mixed"
    english.mkdir(parents=True, exist_ok=True)
    mixed.mkdir(parents=True, exist_ok=True)
    (english / "plays.txt").write_text(english_text(english_chars), encoding="utf-8")
    for name, text in sorted(mixed_texts().items()):
        (mixed / name).write_text(text, encoding="utf-8")
    return [
        {"name": PHASES[0], "merges": MERGES[0], "sources": [{"path": str(english)}]},
        {"name": PHASES[1], "merges": MERGES[1], "sources": [{"path": str(mixed)}]},
    ]


def _run(root: Path, heldout_share: float, english_chars: int) -> SimpleNamespace:
    config = write_config(root / "run", _sources(root / "data", english_chars), heldout_share=heldout_share,
                          special_tokens=SPECIALS, threads=2)
    result = toktok("run", "-c", config)
    assert result.code == 0, result.err
    out = root / "run" / "out" / "tok.tiktoken"
    return SimpleNamespace(
        config=config,
        work=work_of(config),
        output=out,
        md=out.with_name("tok.report.md"),
        json=out.with_name("tok.report.json"),
        png=out.with_name("tok.report.png"),
        slugs=["01-shakespeare", "02-mixed"],
    )


@pytest.fixture(scope="module")
def held(tmp_path_factory) -> SimpleNamespace:
    run = _run(tmp_path_factory.mktemp("held"), 0.2, 300_000)
    run.doc = json.loads(run.json.read_text(encoding="utf-8"))
    run.text = run.md.read_text(encoding="utf-8")
    return run


@pytest.fixture(scope="module")
def none_held(tmp_path_factory) -> SimpleNamespace:
    return _run(tmp_path_factory.mktemp("none"), 0, 40_000)


def _has_matplotlib() -> bool:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def _section(md: str, title: str) -> str:
    """The text of ``## title`` up to the next ``## ``."""
    start = md.index(f"## {title}\n")
    end = md.find("\n## ", start + 1)
    return md[start : end if end >= 0 else len(md)]


def _table_rows(section: str) -> list[list[str]]:
    """The cells of the first Markdown table of a section (header first, no rule line)."""
    rows = []
    for line in section.splitlines():
        if line.startswith("|"):
            if re.fullmatch(r"\|(-+:?\|)+", line):
                continue
            rows.append([c.strip() for c in line.strip("|").split(" | ")])
        elif rows:
            break
    return rows


def _heldout_docs(run: SimpleNamespace, slug: str) -> list[str]:
    return read_arrow(run.work / "ingest" / slug / "heldout.arrow")["text"].to_pylist()


def _bytes_per_token(ranks: dict[bytes, int], docs: list[str]) -> tuple[int, int]:
    enc = tiktoken.Encoding("check", pat_str=SPEC_PATTERN, mergeable_ranks=ranks, special_tokens={})
    return sum(len(d.encode("utf-8")) for d in docs), sum(len(enc.encode_ordinary(d)) for d in docs)


# ---------------------------------------------------------------- files


def test_report_files_exist_and_are_export_outputs(held):
    assert held.md.is_file() and held.json.is_file()
    assert held.png.is_file() == _has_matplotlib()
    assert held.doc["format"] == "toktoktok-report/1"
    listed = {o["name"] for o in manifest(held.work / "export")["outputs"]}
    expected = {"tok.report.md", "tok.report.json"} | ({"tok.report.png"} if _has_matplotlib() else set())
    assert expected <= listed, "the report files are export outputs (so a damaged one redoes the export)"
    assert not list(held.output.parent.glob(".*.tmp")), "atomic writes leave no temporary file"
    assert "![held-out compression as the vocabulary grows](tok.report.png)" in held.text or not _has_matplotlib()


def test_phase_counts_come_from_the_manifests(held):
    for entry, slug, requested in zip(held.doc["phases"], held.slugs, MERGES):
        ingest = manifest(held.work / "ingest" / slug)["counts"]
        train = manifest(held.work / "train" / slug)["counts"]
        assert entry["documents"] == ingest["documents"] and entry["bytes_read"] == ingest["bytes_read"]
        assert entry["heldout_documents"] == ingest["heldout_documents"] > 0
        assert entry["heldout_bytes"] == ingest["heldout_bytes"] > 0
        # held-out "documents" count sampling units: the share is of the units
        assert entry["heldout_share_documents"] == round(ingest["heldout_documents"] / ingest["units"], 6)
        assert 0.05 < entry["heldout_share_documents"] < 0.5, "about the configured 20% of documents"
        assert entry["distinct_pieces"] == train["distinct_pieces"]
        assert entry["merges_requested"] == requested == entry["merges_made"]
        assert entry["early_stop"] is None
    rows = _table_rows(_section(held.text, "Phases"))
    assert [r[0] for r in rows[1:]] == list(PHASES)
    assert rows[1][7] == f"{MERGES[0]:,} / {MERGES[0]:,}"
    timing_rows = _table_rows(_section(held.text, "Time and memory"))
    assert [r[0] for r in timing_rows[1:]] == ["ingest Shakespeare", "train Shakespeare", "ingest Mixed",
                                               "train Mixed", "export (before this report)"]


# ---------------------------------------------------------------- compression


def test_compression_table_shape(held):
    sizes = [manifest(held.work / "train" / s)["counts"]["vocab_size_after"] for s in held.slugs]
    rows = _table_rows(_section(held.text, "Compression on held-out text"))
    assert rows[0] == ["held-out domain", "held-out text", "bytes only (256)", "hardcoded merges (1,417)",
                       f"after {PHASES[0]} ({sizes[0]:,})", f"after {PHASES[1]} ({sizes[1]:,})"]
    assert [r[0] for r in rows[1:]] == list(PHASES), "one row per phase's held-out domain"
    assert all(len(r) == len(rows[0]) for r in rows)
    comp = held.doc["compression"]
    assert [c["key"] for c in comp["columns"]] == ["bytes", "base", *(f"after:{s}" for s in held.slugs)]
    assert [c["tokens"] for c in comp["columns"]] == [256, 1417, *sizes]
    assert [r["phase"] for r in comp["rows"]] == list(PHASES)


def test_compression_equals_tiktoken_on_the_heldout_text(held):
    """Two cells recomputed here: the final vocabulary (from the .tiktoken file) on the
    second domain, the vocabulary after phase 1 on the first domain."""
    final = dict(parse_tiktoken(held.output))
    after_first = manifest(held.work / "train" / held.slugs[0])["counts"]["vocab_size_after"]
    cells = [
        (1, f"after:{held.slugs[1]}", final),
        (0, f"after:{held.slugs[0]}", {t: r for t, r in final.items() if r < after_first}),
    ]
    rows = _table_rows(_section(held.text, "Compression on held-out text"))
    keys = [c["key"] for c in held.doc["compression"]["columns"]]
    for row, key, ranks in cells:
        nbytes, tokens = _bytes_per_token(ranks, _heldout_docs(held, held.slugs[row]))
        entry = held.doc["compression"]["rows"][row]
        assert entry["heldout_bytes"] == nbytes
        assert entry["tokens"][key] == tokens
        assert entry["bytes_per_token"][key] == round(nbytes / tokens, 4)
        assert rows[1 + row][2 + keys.index(key)] == f"{nbytes / tokens:.3f}"


def test_each_phase_compresses_its_own_domain(held):
    comp = held.doc["compression"]
    for k, slug in enumerate(held.slugs):
        values = comp["rows"][k]["bytes_per_token"]
        assert values["bytes"] == 1.0, "256 single bytes: one token a byte"
        assert values[f"after:{slug}"] > values["bytes"]
        assert values[f"after:{slug}"] > values["base"]
        if k:
            assert values[f"after:{slug}"] > values[f"after:{held.slugs[k - 1]}"], "a phase helps its own domain"


def test_curve_checkpoints(held):
    curve = held.doc["curve"]
    points = curve["checkpoints"]
    sizes = [p["vocab_tokens"] for p in points]
    assert sizes == sorted(set(sizes)), "strictly growing vocabulary"
    assert sizes[:2] == [256, 1417] and sizes[-1] == len(parse_tiktoken(held.output))
    assert [s["vocab_tokens"] for s in curve["phase_starts"]] == [1417, 1417 + MERGES[0]]
    for phase in PHASES:
        assert len([p for p in points if p["phase"] == phase]) == 10
    for p in points:
        assert set(p["bytes_per_token"]) == set(PHASES)
    # the sample is all of this small held-out text, so the last point equals the table
    last = held.doc["compression"]["rows"]
    for k, phase in enumerate(PHASES):
        assert points[-1]["bytes_per_token"][phase] == last[k]["bytes_per_token"][f"after:{held.slugs[-1]}"]
    rows = _table_rows(_section(held.text, "Compression as the vocabulary grows"))
    assert len(rows) == 1 + len(points)


@pytest.mark.skipif(not _has_matplotlib(), reason="matplotlib is not installed (the optional plot extra)")
def test_png_is_a_valid_png(held):
    data = held.png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, kinds = 8, []
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        (crc,) = struct.unpack(">I", data[pos + 8 + length : pos + 12 + length])
        assert zlib.crc32(kind + body) == crc, f"bad CRC in chunk {kind!r}"
        kinds.append(kind)
        if kind == b"IHDR":
            width, height = struct.unpack(">II", body[:8])
            assert width > 300 and height > 200
        pos += 12 + length
    assert kinds[0] == b"IHDR" and kinds[-1] == b"IEND" and b"IDAT" in kinds


# ---------------------------------------------------------------- tokens


def test_longest_tokens_first_merges_and_lengths(held):
    from toktoktok_stages.report.document import visible

    final = parse_tiktoken(held.output)
    by_rank = {r: t for t, r in final}
    for entry, slug in zip(held.doc["phases"], held.slugs):
        merges = read_arrow(held.work / "train" / slug / "merges.arrow").to_pydict()
        before = manifest(held.work / "train" / slug)["inputs"]["vocab_size_before"]
        new = [(r, t) for r, t in zip(merges["rank"], merges["bytes"]) if r >= before]
        assert (entry["first_rank"], entry["last_rank"]) == (new[0][0], new[-1][0]) == (before, before + len(new) - 1)
        longest = entry["longest_tokens"]
        assert len(longest) == 20
        assert longest[0]["bytes"] == max(len(t) for _, t in new)
        assert [t["bytes"] for t in longest] == sorted((t["bytes"] for t in longest), reverse=True)
        assert all(by_rank[t["rank"]] == bytes.fromhex(t["hex"]) for t in longest)
        first = entry["first_merges"]
        assert [m["rank"] for m in first] == merges["rank"][:20]
        assert [bytes.fromhex(m["hex"]) for m in first] == merges["bytes"][:20]
        assert [m["count"] for m in first] == merges["count"][:20]
        assert first[0]["left"] == visible(by_rank[merges["left"][0]])
        assert sum(c for _, c in entry["token_lengths"]) == len(new)
    lengths = held.doc["token_lengths"]
    assert sum(c for _, c in lengths["all"]) == len(final)
    assert dict(map(tuple, lengths["base"]))[1] == 256
    assert "## Token length distribution" in held.text
    assert "## Phase Shakespeare: tokens" in held.text and "## Phase Mixed: tokens" in held.text


def test_tokens_are_shown_escaped():
    from toktoktok_stages.report.document import visible
    from toktoktok_stages.report.markdown import _md_code

    assert visible(b" the\n") == "␣the\\n"
    assert visible(b"\t\r\\") == "\\t\\r\\\\"
    assert visible(b"\x00\x7f") == "\\x00\\x7f"
    assert visible(b"caf\xc3") == "caf\ufffd", "invalid UTF-8 decoded with errors='replace'"
    assert visible("␣".encode()) == "\\u2423", "a literal ␣ stays distinguishable from a space"
    assert _md_code("a|b") == "`a\\|b`" and _md_code("`x") == "`` `x ``"


# ---------------------------------------------------------------- held-out share 0 and determinism


def test_no_heldout_text_is_said_and_the_report_still_written(none_held):
    assert none_held.md.is_file() and none_held.json.is_file()
    assert not none_held.png.exists(), "nothing to draw"
    doc = json.loads(none_held.json.read_text(encoding="utf-8"))
    for row in doc["compression"]["rows"]:
        assert row["heldout_bytes"] == 0
        assert set(row["bytes_per_token"].values()) == {None}
    md = none_held.md.read_text(encoding="utf-8")
    rows = _table_rows(_section(md, "Compression on held-out text"))
    assert [r[0] for r in rows[1:]] == list(PHASES)
    for row in rows[1:]:
        assert row[1:] == ["no held-out text"] * (len(rows[0]) - 1)
    assert "no held-out text" in _section(md, "Compression as the vocabulary grows")


def _without_timings(md: str) -> str:
    section = _section(md, "Time and memory")
    return md.replace(section, "")


def test_report_is_deterministic_but_for_timings(held):
    before_png = held.png.read_bytes() if held.png.exists() else None
    result = toktok("export", "--force", "-c", held.config)
    assert result.code == 0, result.err
    again = json.loads(held.json.read_text(encoding="utf-8"))
    assert {k: v for k, v in again.items() if k != "timings"} == {k: v for k, v in held.doc.items() if k != "timings"}
    assert _without_timings(held.md.read_text(encoding="utf-8")) == _without_timings(held.text)
    if before_png is not None:
        assert held.png.read_bytes() == before_png


def test_heldout_share_is_of_units_when_large_documents_are_cut(tmp_path):
    """A phase of two large documents cut into many sampling units: the held-out
    count is of units, and so is the share (it was divided by the documents,
    giving a share of several hundred percent)."""
    data = tmp_path / "data"
    data.mkdir()
    line = "the quick brown fox jumps over the lazy dog, again and again.\n"
    (data / "big.txt").write_text(line * 4000 + "\n" + line * 4000, encoding="utf-8")
    config = write_config(tmp_path / "run", [{"name": "Big", "merges": 50, "sources": [{"path": str(data)}]}],
                          heldout_share=0.2, working_set_mb=1, threads=1)
    result = toktok("run", "-c", config)
    assert result.code == 0, result.err
    counts = manifest(work_of(config) / "ingest" / "01-big")["counts"]
    assert counts["documents"] == 2 and counts["units"] > 20
    doc = json.loads((tmp_path / "run" / "out" / "tok.report.json").read_text())
    share = doc["phases"][0]["heldout_share_documents"]
    assert share == round(counts["heldout_documents"] / counts["units"], 6)
    assert 0.05 < share < 0.5
