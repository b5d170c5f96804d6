"""A quarter sample trains as well as the whole, benchmark-style.

About 24 MB of the shared corpora (8 MB each of english, code and german, as
three ``.txt`` files of one phase) train 2,000 merges once whole and, at a
``working_set_mb`` whose capacity is a quarter of the text, with seeds 0-4.
The held-out bytes/token overall (the first 1 MB of each corpus's held-out
file, never trained on) of the median quarter run is within 1% of the whole
run's. Skipped when the shared corpora are absent. This is the small check;
``benchmarks/run.py --section memory`` measures the same on 257 MiB.
"""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest
import yaml

from tests.conftest import toktok
from tests.helpers import SHARED
from toktoktok import sampling
from toktoktok.loading import load

CORPORA = SHARED / "corpora"
DOMAINS = ("english", "code", "german")
PER_DOMAIN = 8_000_000
HELDOUT = 1_000_000

pytestmark = pytest.mark.skipif(not (CORPORA / "english.txt.zst").exists(), reason="no shared corpora")


def _head(path: Path, size: int) -> bytes:
    import zstandard

    with path.open("rb") as fh, zstandard.ZstdDecompressor().stream_reader(fh) as reader:
        data = reader.read(size)
    return data[: data.rfind(b"\n\n") + 2]  # whole documents


def _train(root: Path, files: list[Path], working_set_mb: int, seed: int) -> Path:
    root.mkdir(parents=True)
    out = root / "tok.tiktoken"
    config = root / "config.yaml"
    config.write_text(yaml.safe_dump({
        "output": str(out), "working_set_mb": working_set_mb, "seed": seed, "threads": 2,
        "hardcoded_merges": False, "heldout_share": 0,
        "phases": [{"name": "all", "merges": 2000, "sources": [{"file": str(f)} for f in files]}]}))
    run = toktok("run", "-c", config)
    assert run.code == 0, run.err
    return out


def test_a_quarter_sample_compresses_held_out_text_within_1_percent_of_the_whole(tmp_path):
    files = []
    for d in DOMAINS:
        f = tmp_path / f"{d}.txt"
        f.write_bytes(_head(CORPORA / f"{d}.txt.zst", PER_DOMAIN))
        files.append(f)
    heldout = "".join(_head(CORPORA / f"{d}.heldout.txt.zst", HELDOUT).decode("utf-8", "replace") for d in DOMAINS)
    size = len(heldout.encode())
    total = sum(f.stat().st_size for f in files)

    def bytes_per_token(path: Path) -> float:
        return size / len(load(path).encode_ordinary(heldout))

    whole = bytes_per_token(_train(tmp_path / "whole", files, 1024, 0))
    quarter_mb = round(total / 4 / sampling.TEXT_PER_BUDGET_BYTE / 2**20)
    assert 0.2 < sampling.capacity(quarter_mb) / total < 0.3
    quarters = [bytes_per_token(_train(tmp_path / f"q{seed}", files, quarter_mb, seed)) for seed in range(5)]
    median = statistics.median(quarters)
    print(f"whole {whole:.4f}, quarters {[round(q, 4) for q in quarters]}, median {median / whole - 1:+.2%}")
    assert abs(median / whole - 1) < 0.01
