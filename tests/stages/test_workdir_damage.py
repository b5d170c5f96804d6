"""Nothing on disk is used unchecked: a work-folder artifact that does not match
its manifest is never used.

- ``toktok run`` redoes the stage that made the damaged file, saying which
  file, and ends with the same tokenizer as an undamaged run;
- a stage run alone exits 1 naming the file and the exact command that makes
  it anew;
- whatever byte is flipped, or however the file is cut, no process dies
  without a message (digests are checked before any value reaches a kernel).
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from tests.conftest import (
    SPECIALS,
    english_text,
    output_of,
    toktok,
    work_of,
    write_config,
)


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    root = tmp_path_factory.mktemp("damage")
    data = root / "data"
    data.mkdir()
    (data / "a.txt").write_text(english_text(80_000))
    (data / "b.txt").write_text(english_text(60_000, offset=90_000))
    config = write_config(root / "p", [{"name": "A", "merges": 60, "sources": [{"file": str(data / "a.txt")}]},
                                       {"name": "B", "merges": 40, "sources": [{"file": str(data / "b.txt")}]}],
                          threads=1, special_tokens=SPECIALS, heldout_share=0.05)
    r = toktok("run", "-c", config)
    assert r.code == 0, r.err
    return config, output_of(config).read_bytes()


def _flip(path: Path, rng: random.Random) -> int:
    data = bytearray(path.read_bytes())
    at = rng.randrange(len(data))
    data[at] ^= 1 << rng.randrange(8)
    path.write_bytes(bytes(data))
    return at


@pytest.mark.parametrize("damaged, stage, redo", [
    ("ingest/01-a/chunk-00000.arrow", ["train"], "toktok ingest"),
    ("ingest/02-b/heldout.arrow", ["export"], "toktok ingest"),
    ("train/01-a/merges.arrow", ["export"], "toktok train"),
    ("train/01-a/merges.arrow", ["train", "--phase", "B"], "toktok train"),
])
def test_a_flipped_byte_is_found_before_use(project, damaged, stage, redo):
    """A stage's input damaged: the stage alone refuses it; ``run`` makes it anew."""
    config, reference = project
    path = work_of(config) / damaged
    good = path.read_bytes()
    try:
        _flip(path, random.Random(damaged))
        r = toktok(*stage, "-c", config)
        assert r.code == 1, r
        line = r.err.strip().splitlines()[-1]
        assert str(path) in line and f"`{redo} -c {config} --phase '" in line and "--force`" in line, line
        r = toktok("run", "-c", config)
        assert r.code == 0, r.err
        assert str(path) in r.err and "again" in r.err, r.err
        assert output_of(config).read_bytes() == reference
        assert path.read_bytes() == good, "the stage made the same file anew"
    finally:
        path.write_bytes(good)


@pytest.mark.parametrize("damage", ["truncated", "garbage", "empty"])
def test_a_cut_or_replaced_artifact_is_named(project, damage):
    config, reference = project
    path = work_of(config) / "ingest/01-a/chunk-00000.arrow"
    good = path.read_bytes()
    try:
        path.write_bytes({"truncated": good[: len(good) // 2], "garbage": b"not arrow at all" * 100,
                          "empty": b""}[damage])
        r = toktok("train", "-c", config)
        assert r.code == 1 and str(path) in r.err and "--force" in r.err, r
        r = toktok("run", "-c", config)
        assert r.code == 0 and output_of(config).read_bytes() == reference, r.err
    finally:
        path.write_bytes(good)


def test_many_random_flips_never_crash(project):
    """Flips anywhere in any artifact: every command answers with exit 0 (after
    redoing) or 1 (naming the file), never a crash."""
    config, reference = project
    rng = random.Random(5)
    files = sorted(p for p in work_of(config).rglob("*.arrow"))
    for _ in range(8):
        path = rng.choice(files)
        good = path.read_bytes()
        try:
            _flip(path, rng)
            for stage in ("train", "export"):
                r = toktok(stage, "-c", config)
                assert r.code in (0, 1), r
                assert r.code == 0 or str(path) in r.err, r.err
        finally:
            path.write_bytes(good)
    r = toktok("run", "-c", config)
    assert r.code == 0 and output_of(config).read_bytes() == reference


def test_a_large_artifact_is_written_in_batches_and_read_back_whole(tmp_path):
    """``write_ipc`` cuts a table into record batches of ``BATCH_ROWS`` (compressed
    on Arrow's threads); ``read_ipc`` gives back the same rows, and the inventory
    the trainer takes from them is the table's."""
    import numpy as np
    import pyarrow as pa

    from toktoktok import counts
    from toktoktok_stages.workdir import artifacts

    rows = 2 * artifacts.BATCH_ROWS + 17
    pieces = [f"piece {i:07d}".encode() for i in range(rows)]
    table = counts.from_lists(pieces, list(range(1, rows + 1)))
    entry = artifacts.write_ipc(tmp_path / "chunk-00000.arrow", table)
    with pa.memory_map(str(tmp_path / "chunk-00000.arrow")) as source:
        assert pa.ipc.open_file(source).num_record_batches == 3
    back = artifacts.read_ipc(tmp_path / "chunk-00000.arrow")
    assert entry["rows"] == rows and back.equals(table)
    buf, off, n = counts.inventory(back)
    assert bytes(buf[off[-2] : off[-1]]) == pieces[-1] and np.array_equal(n, np.arange(1, rows + 1))
