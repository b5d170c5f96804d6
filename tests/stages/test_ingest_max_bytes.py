"""``max_bytes:`` on a source: a seeded cap on its training text.

- The kept text of a capped source is within 5% of ``max_bytes`` for a large
  source, for several seeds, as a ``.txt``, a parquet file and a ``.jsonl``.
- The choice is the same for threads 1 and 2 and for tiny reads.
- The cap's draw does not depend on ``working_set_mb``: the units trained under
  a cap and a phase sample are those both hashes keep.
- A capped source beside an uncapped one: only the capped one is thinned,
  and the phase's sample is measured on the text the caps keep.
- A config without ``max_bytes`` keeps its key; changing ``max_bytes`` re-ingests.
"""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from tests.conftest import chunk_counts, english_text, ingest_here
from toktoktok import sampling
from toktoktok.config import load_config
from toktoktok_stages import workdir
from toktoktok_stages.ingest import routing, table_rows

SIZE = 1_200_000  # bytes of each corpus
CAP = 300_000  # a quarter of it


def _documents() -> list[str]:
    text, offset = "", 0
    while len(text.encode()) < SIZE:
        text += english_text(400_000, offset=offset)
        offset = (offset + 123_457) % 600_000
    text = text.encode()[:SIZE].decode("utf-8", "ignore")
    words = text.split()
    docs, at = [], 0
    while at < len(words):  # documents of 5 to 35 words: many units next to the cap
        size = 5 + (at * 7919) % 31
        docs.append(" ".join(words[at : at + size]))
        at += size
    return docs


@pytest.fixture(scope="module")
def shapes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("capped")
    docs = _documents()
    txt = root / "docs.txt"
    txt.write_text("\n\n".join(docs) + "\n", encoding="utf-8")
    table = root / "docs.parquet"
    pq.write_table(pa.table({"text": docs}), table, row_group_size=1000)
    lines = root / "docs.jsonl"
    lines.write_text("".join(json.dumps({"text": d}) + "\n" for d in docs), encoding="utf-8")
    small = root / "small.txt"
    small.write_text("\n\n".join(docs[:300]) + "\n", encoding="utf-8")
    return {"txt": txt, "parquet": table, "jsonl": lines, "small": small}


@pytest.mark.parametrize("shape", ["txt", "parquet", "jsonl"])
def test_the_kept_text_is_within_5_percent_of_max_bytes(tmp_path, shapes, shape):
    for seed in range(4):
        m, _ = ingest_here(tmp_path / f"s{seed}", [{"file": str(shapes[shape]), "max_bytes": CAP}], seed=seed)
        (source,) = m["sample"]["sources"]
        assert m["sample"]["share"] == 1.0  # the capped text fits the budget: no phase sample
        assert source["max_bytes"] == CAP and 0.2 < source["cap_share"] < 0.3
        assert source["kept_bytes"] == m["counts"]["kept_bytes"]
        assert abs(m["counts"]["kept_bytes"] - CAP) <= 0.05 * CAP, (seed, m["counts"]["kept_bytes"])
        assert m["counts"]["sampled_out_documents"] > 0


@pytest.mark.parametrize("shape", ["txt", "parquet", "jsonl"])
def test_the_choice_does_not_depend_on_read_size_or_threads(tmp_path, shapes, shape, monkeypatch):
    source = [{"file": str(shapes[shape]), "max_bytes": CAP}]
    settings = {"heldout_share": 0.05, "seed": 1}
    base, folder = ingest_here(tmp_path / "base", source, threads=2, **settings)
    want = (chunk_counts(folder), pl.read_ipc(folder / "heldout.arrow")["text"].to_list())
    assert base["counts"]["heldout_documents"] > 10 and base["counts"]["sampled_out_documents"] > 1000
    monkeypatch.setattr(routing, "TXT_READ_BYTES", 997)
    from toktoktok.sources import row_batches

    for name in ("iter_row_batches", "iter_jsonl_batches"):  # tables and JSON lines in batches of a few rows
        read = getattr(row_batches, name)
        monkeypatch.setattr(table_rows, name, lambda *args, read=read: read(*args, batch_bytes=997))
    small, folder = ingest_here(tmp_path / "small", source, threads=1, **settings)
    assert (chunk_counts(folder), pl.read_ipc(folder / "heldout.arrow")["text"].to_list()) == want
    assert {k: small["counts"][k] for k in ("units", "kept_bytes", "heldout_bytes", "kept_documents")} == \
        {k: base["counts"][k] for k in ("units", "kept_bytes", "heldout_bytes", "kept_documents")}


def test_the_caps_draw_does_not_depend_on_the_phase_sample(tmp_path, shapes):
    """A unit trains when its cap hash (salt ``CAP``) and its sample hash both keep
    it: under a phase sample, the trained units are exactly those, so the cap's
    own draw is the one it makes without a sample (it does not read working_set_mb)."""
    path = shapes["txt"]
    offsets, at = [], 0
    for doc in path.read_bytes().split(b"\n\n"):
        offsets.append(at)
        at += len(doc) + 2
    source = [{"file": str(path), "max_bytes": 600_000}]
    alone, _ = ingest_here(tmp_path / "alone", source, seed=7, working_set_mb=2)
    cap = alone["sample"]["sources"][0]["cap_share"]
    assert 0.45 < cap < 0.55 and alone["sample"]["share"] == 1.0
    keep_cap = [sampling.chosen(7, "01-p", 0, o, cap, salt=sampling.CAP) for o in offsets]
    assert alone["counts"]["kept_documents"] == sum(keep_cap)
    sampled, _ = ingest_here(tmp_path / "sampled", source, seed=7, working_set_mb=1)
    share = sampled["sample"]["share"]
    assert 0.6 < share < 0.8 and sampled["sample"]["sources"][0]["cap_share"] == cap
    keep = [c and sampling.chosen(7, "01-p", 0, o, share, salt=sampling.SAMPLE) for c, o in zip(keep_cap, offsets)]
    assert sampled["counts"]["kept_documents"] == sum(keep) < sum(keep_cap)


def test_a_capped_source_beside_an_uncapped_one(tmp_path, shapes):
    """Only the capped source is thinned; the phase's sample is measured on the
    text the caps keep, so it samples less than the whole text would make it."""
    sources = [{"file": str(shapes["txt"]), "max_bytes": CAP}, {"file": str(shapes["parquet"])}]
    m, _ = ingest_here(tmp_path / "both", sources, seed=2)
    capped, free = m["sample"]["sources"]
    assert capped["max_bytes"] == CAP and free["max_bytes"] is None and free["cap_share"] == 1.0
    assert abs(capped["kept_bytes"] - CAP) <= 0.05 * CAP
    assert free["kept_bytes"] == free["text_bytes"]  # the uncapped source whole
    # a budget that holds the capped text but not the whole: the phase keeps all of it
    budget = 4  # MiB: capacity above capped + free, below the whole text
    assert capped["text_bytes"] + free["text_bytes"] > sampling.capacity(budget) > CAP + free["text_bytes"]
    m2, _ = ingest_here(tmp_path / "budget", sources, seed=2, working_set_mb=budget)
    assert m2["sample"]["share"] == 1.0 and m2["sample"]["sources"] == m["sample"]["sources"]
    m3, _ = ingest_here(tmp_path / "tight", sources, seed=2, working_set_mb=3)  # less: the phase samples the capped text
    want = sampling.capacity(3) / (capped["text_bytes"] * capped["cap_share"] + free["text_bytes"])
    assert m3["sample"]["share"] == pytest.approx(want) and 0.5 < want < 1


def test_keys_without_and_with_max_bytes(tmp_path, shapes):
    """No max_bytes: the key and settings a config always had. A change of max_bytes re-ingests."""
    from toktoktok_stages.workdir import keys

    def inputs(sources: list[dict]) -> tuple:
        doc = {"output": str(tmp_path / "out" / "tok.tiktoken"),
               "phases": [{"name": "p", "merges": 10, "sources": sources}]}
        (tmp_path / "c.yaml").write_text(yaml.safe_dump(doc), encoding="utf-8")
        cfg = load_config(tmp_path / "c.yaml")
        folder = workdir.Work(cfg).ingest(cfg.phases[0])
        return cfg, folder

    cfg, folder = inputs([{"file": str(shapes["small"])}])
    assert "source_caps" not in folder.settings() and folder.inputs().caps == ()
    assert folder.key() == keys.key_of({**keys.ingest_settings(cfg, cfg.phases[0], 1.0),
                                        "files": folder.inputs().fingerprints.columns})
    keys_seen = {folder.key()}
    for cap in (10_000, 20_000, 10**12):
        _, folder = inputs([{"file": str(shapes["small"]), "max_bytes": cap}])
        assert folder.settings()["source_caps"][0]["max_bytes"] == cap
        keys_seen.add(folder.key())
    assert len(keys_seen) == 4


def test_plan_shows_each_source_before_and_after_its_cap(tmp_path, shapes):
    from toktoktok_stages.commands import plan

    doc = {"output": str(tmp_path / "out" / "tok.tiktoken"), "working_set_mb": 1,
           "phases": [{"name": "p", "merges": 10, "sources": [{"file": str(shapes["txt"]), "max_bytes": CAP},
                                                               {"file": str(shapes["small"])}]}]}
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(doc), encoding="utf-8")
    made = plan.make_plan(load_config(tmp_path / "c.yaml"))
    (p,) = made["phases"]
    capped, free = p["sources"]
    text = shapes["txt"].stat().st_size
    assert capped == {"source": str(shapes["txt"]), "text_bytes": text, "max_bytes": CAP,
                      "cap_share": CAP / text, "kept_text_bytes": CAP}
    assert free["max_bytes"] is None and free["kept_text_bytes"] == free["text_bytes"]
    assert p["capped_text_bytes"] == CAP + free["text_bytes"] and p["share"] == 1.0
    shown = plan.render(made)
    assert f"source {shapes['txt']}: " in shown
    assert f"max_bytes 293.0 KiB: keeping {CAP / text:.1%} (about 293.0 KiB)" in shown  # the share of this text
    assert "after the caps: " in shown and f"source {shapes['small']}: " in shown and "no max_bytes" in shown
