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

import io
import json
from collections import Counter
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from tests.conftest import english_text
from toktoktok import sampling
from toktoktok.config import load_config
from toktoktok_stages import ingest, workdir
from toktoktok_stages.ingest import routing, table_rows
from toktoktok_stages.workdir.progress import Progress

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


def _ingest(folder: Path, sources: list[dict], **settings) -> tuple[dict, Path]:
    doc = {"output": str(folder / "out" / "tok.tiktoken"), "heldout_share": 0.0,
           "phases": [{"name": "p", "merges": 10, "sources": sources}], **settings}
    folder.mkdir(parents=True, exist_ok=True)
    config = folder / "config.yaml"
    config.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    cfg = load_config(config)
    manifest = ingest.run_ingest(workdir.Work(cfg), cfg.phases[0], force=True, progress=Progress(stream=io.StringIO()))
    return manifest, workdir.ingest_dir(cfg, cfg.phases[0])


def _chunks(folder: Path) -> Counter[bytes]:
    counts: Counter[bytes] = Counter()
    for chunk in sorted(folder.glob("chunk-*.arrow")):
        df = pl.read_ipc(chunk)
        counts.update(dict(zip(df["piece"].to_list(), df["count"].to_list())))
    return counts


@pytest.mark.parametrize("shape", ["txt", "parquet", "jsonl"])
def test_the_kept_text_is_within_5_percent_of_max_bytes(tmp_path, shapes, shape):
    for seed in range(4):
        m, _ = _ingest(tmp_path / f"s{seed}", [{"file": str(shapes[shape]), "max_bytes": CAP}], seed=seed)
        (source,) = m["sample"]["sources"]
        assert m["sample"]["share"] == 1.0  # the capped text fits the budget: no phase sample
        assert source["max_bytes"] == CAP and 0.2 < source["cap_share"] < 0.3
        assert source["kept_bytes"] == m["counts"]["kept_bytes"]
        assert abs(m["counts"]["kept_bytes"] - CAP) <= 0.05 * CAP, (seed, m["counts"]["kept_bytes"])
        assert m["counts"]["sampled_out_documents"] > 0
