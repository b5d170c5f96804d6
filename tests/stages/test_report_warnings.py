"""The report warns where it should and says what no trainer reports; one unit system.

- A held-out domain under 64 KiB or 10 documents is marked too small.
- Under-trained tokens: a phase's new tokens its own text (its pieces times
  their counts, and its held-out text) produces fewer than 10 times with the
  final vocabulary, checked against tiktoken encoding every piece itself.
- Progress in a log (verbose, no terminal): a line every few seconds.
- Sizes in binary units everywhere.
"""

from __future__ import annotations

import io
import json
from collections import Counter

import polars as pl

import toktoktok
from tests.conftest import english_text, output_of, toktok, work_of, write_config
from toktoktok_stages.workdir import progress as progress_module
from toktoktok_stages.workdir.progress import Progress, human_bytes


def test_too_small_domain_and_undertrained_tokens(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "big.txt").write_text(english_text(400_000))
    (data / "tiny.txt").write_text("one short document about a cat on a mat\n")
    config = write_config(tmp_path / "p", [{"name": "Big", "merges": 400, "sources": [{"file": str(data / "big.txt")}]},
                                           {"name": "Tiny", "merges": 5, "sources": [{"file": str(data / "tiny.txt")}]}],
                          threads=1, heldout_share=0.3, min_frequency=1)
    r = toktok("run", "-c", config)
    assert r.code == 0, r.err
    out = output_of(config)
    report = json.loads(out.with_name("tok.report.json").read_text())
    rows = {row["phase"]: row for row in report["compression"]["rows"]}
    big = rows["Big"]
    assert big["too_small"] == (big["heldout_bytes"] < 64 << 10 or big["heldout_documents"] < 10)
    md = out.with_name("tok.report.md").read_text()
    for name, row in rows.items():
        assert (f"**{name}**: too small to trust" in md) == bool(row["too_small"])
    # under-trained tokens of phase Big, recomputed with tiktoken from the artifacts
    enc = toktoktok.load(out)
    chunks = sorted((work_of(config) / "ingest" / "01-big").glob("chunk-*.arrow"))
    inventory = pl.concat([pl.read_ipc(c) for c in chunks])
    produced: Counter[int] = Counter()
    for piece, count in zip(inventory["piece"].to_list(), inventory["count"].to_list()):
        for token in enc._core_bpe.encode_single_piece(piece):
            produced[token] += count
    held = pl.read_ipc(work_of(config) / "ingest" / "01-big" / "heldout.arrow")["text"].to_list()
    for doc in held:
        produced.update(enc.encode_ordinary(doc))
    entry = next(p for p in report["phases"] if p["name"] == "Big")
    new = range(entry["first_rank"], entry["last_rank"] + 1)
    expected = sorted((produced[r], r) for r in new if produced[r] < 10)
    assert entry["undertrained_tokens"] == len(expected)
    assert entry["undertrained_never_produced"] == sum(1 for u, _ in expected if u == 0)
    assert [(t["produced"], t["rank"]) for t in entry["undertrained"]] == expected[: len(entry["undertrained"])]
    assert "Under-trained tokens:" in md
    shown = toktok("inspect", str(out.with_name("tok.report.json")))
    assert shown.code == 0 and "undertrained" in shown.out


def test_progress_lines_in_a_log(monkeypatch):
    monkeypatch.setattr(progress_module, "LOG_EVERY", 0.0)
    stream = io.StringIO()
    p = Progress(verbose=True, stream=stream)
    p.start("ingest A", total=3 << 20, unit="B")
    p.set(1 << 20)
    p.set(2 << 20)
    p.done()
    lines = stream.getvalue().splitlines()
    assert len(lines) == 3 and lines[0].startswith("ingest A: 1.0 MiB of 3.0 MiB, ") and "s left" in lines[0]
    quiet = io.StringIO()
    q = Progress(verbose=False, stream=quiet)
    q.start("x", total=10, unit="merges")
    q.set(5)
    assert quiet.getvalue() == ""


def test_one_unit_system():
    assert [human_bytes(n) for n in (1023, 1024, 1536, 5 << 20, 3 << 30)] == \
        ["1023 B", "1.0 KiB", "1.5 KiB", "5.0 MiB", "3.0 GiB"]
