"""Running toktoktok from the benchmark: its config, its commands, its manifests.

Every toktoktok run is a whole ``toktok`` process in a fresh folder (config,
work folder and ``.tiktoken`` inside it), timed by ``benchkit.measure.run_measured``.
What each stage did and how long it took comes from the stage manifests
(``WORK/{ingest,train}/NN-slug/manifest.json``, ``WORK/export/manifest.json``):
the ``seconds`` there are measured inside the process, so they leave out
Python's start-up, imports and loading numba's compiled code from its cache.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

from benchkit.corpus import Corpus
from benchkit.measure import Measured, run_measured

HERE = Path(__file__).resolve().parents[1]  # benchmarks/


@functools.cache
def default_pattern() -> str:
    """toktoktok's default pattern, as its public loader gives it to a ``.tiktoken`` without a companion.

    (The loader's rule: no ``NAME.meta.json`` and no ``pattern=``, the default pattern.)
    """
    import base64
    import tempfile

    import toktoktok

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bytes.tiktoken"
        path.write_bytes(b"".join(base64.b64encode(bytes([b])) + b" %d\n" % b for b in range(256)))
        return toktoktok.load(path)._pat_str


def toktok_bin() -> str:
    beside = Path(sys.executable).parent / "toktok"
    return str(beside) if beside.exists() else (shutil.which("toktok") or "toktok")


def toktok_config(corpus: Corpus, tokens: int, folder: Path, threads: int | None = None,
                  ray_cpus: int | None = None, working_set_mb: int | None = None) -> Path:
    """A config training ``corpus`` in one phase of ``tokens - 256`` merges (``threads``: -1 when None).

    ``ray_cpus``: ingest on Ray instead (``engine: ray``), on a local instance of
    that many CPUs that toktok starts and stops itself (``ray: {num_cpus: N}``).
    ``working_set_mb``: that budget (a sample of the text when it is too small
    for all of it); None: one that keeps all text.
    """
    cfg: dict[str, Any] = {
        "output": str(folder / "toktoktok.tiktoken"),
        "work_dir": str(folder / "toktoktok.work"),
        "working_set_mb": working_set_mb or max(1024, 8 * (corpus.train_bytes >> 20)),
        "hardcoded_merges": False,
        "heldout_share": 0,
        "min_frequency": 2,
        "seed": 0,
        "phases": [{"name": corpus.name, "merges": tokens - 256, "sources": [{"file": str(corpus.train)}]}],
    }
    if threads is not None:
        cfg["threads"] = threads
    if ray_cpus is not None:
        cfg["engine"] = "ray"
        cfg["ray"] = {"num_cpus": ray_cpus}
    path = folder / "bench.yaml"
    path.write_text(json.dumps(cfg, indent=2) + "\n", encoding="utf-8")  # JSON is YAML
    return path


RAY_CPUS = 2  # the local Ray instance of trainer "ray": this machine's 2 cores


def command(trainer: str, corpus: Corpus, tokens: int, folder: Path) -> tuple[list[str], Path]:
    """The command that trains ``trainer`` in ``folder``, and the .tiktoken it writes.

    Trainers: ``toktoktok``; ``toktoktok:ws=N`` (``working_set_mb: N``, a
    sample of a text too large for it); ``ray`` (toktoktok, ingest on a local Ray
    instance of ``RAY_CPUS`` CPUs); ``hf`` and ``rustbpe`` (``peer_trainers.py``,
    fed the documents); ``hf:chunks``, ``rustbpe:chunks`` (fed 1 MiB chunks
    cut at a line end: ``peer_trainers.py --feed chunks``).
    """
    if trainer in ("toktoktok", "ray") or trainer.startswith("toktoktok:ws="):
        budget = int(trainer.partition("=")[2]) if "=" in trainer else None
        cfg = toktok_config(corpus, tokens, folder, ray_cpus=RAY_CPUS if trainer == "ray" else None,
                            working_set_mb=budget)
        return [toktok_bin(), "run", "-c", str(cfg), "--force"], folder / "toktoktok.tiktoken"
    peer, _, feed = trainer.partition(":")
    out = folder / f"{peer}.tiktoken"
    return [sys.executable, str(HERE / "sections" / "peer_trainers.py"), peer, "--corpus", str(corpus.train), "--tokens",
            str(tokens), "--pattern", default_pattern(), "--out", str(out), "--feed", feed or "documents"], out


def run_env(numba_cache: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["NUMBA_CACHE_DIR"] = str(numba_cache)
    return env


def fresh(folder: Path) -> Path:
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    return folder


def run_once(trainer: str, corpus: Corpus, tokens: int, folder: Path, env: dict[str, str]) -> tuple[Measured, Path]:
    """One whole run of ``trainer`` in a fresh ``folder``, measured from outside (``Measured``).

    Every trainer is measured alike: its true peak is ``Measured.peak_mb``. The
    peaks toktoktok's stage manifests record are its own account and are shown
    apart (``toktok_stages``), never mixed into the outside figure.
    """
    cmd, out = command(trainer, corpus, tokens, fresh(folder))
    return run_measured(cmd, folder / "log.txt", env=env), out


def run_ingest(corpus: Corpus, threads: int, folder: Path, env: dict[str, str]) -> Measured:
    """``toktok ingest -c CFG --force`` with ``threads``, as a whole process in a fresh ``folder``."""
    cfg = toktok_config(corpus, 32768, fresh(folder), threads=threads)
    return run_measured([toktok_bin(), "ingest", "-c", str(cfg), "--force"], folder / "log.txt", env=env)


def stage_manifests(work: Path, stage: str) -> list[dict[str, Any]]:
    """The manifests of every phase of ``stage`` (``ingest``, ``train``) in the work folder ``work``."""
    return [json.loads(p.read_text()) for p in sorted((work / stage).glob("*/manifest.json"))]


def ingest_manifest(folder: Path) -> dict[str, float]:
    """Seconds, pieces and distinct pieces of the ingest stage run in ``folder``."""
    found = stage_manifests(folder / "toktoktok.work", "ingest")
    return {
        "seconds": sum(m["seconds"]["ingest"] for m in found),  # without loading numba's code
        "kernels": sum(m["seconds"]["kernels"] for m in found),
        "bytes": sum(m["counts"]["bytes_read"] for m in found),
        "pieces": sum(m["counts"]["pieces"] for m in found),
        "distinct": sum(o["rows"] for m in found for o in m["outputs"] if o["name"].startswith("chunk-")),
        "peak_rss_mb": max(m.get("peak_rss_mb", 0) for m in found),
    }


# the train manifest's ``train_split_seconds``: segmenting the pieces, counting pairs,
# the first 1,000 merges, the rest of the merges, checking the result
TRAIN_SPLIT = ("segment", "pairs", "early_merges", "later_merges", "check")
# the ingest manifest's ``engine.seconds`` under Ray (stages/ingest/ray_engine.py)
RAY_SECONDS = ("ray_start", "count", "tasks_sum", "tasks_max", "sum", "ray_stop")


def toktok_stages(folder: Path) -> dict[str, float]:
    """Seconds per stage, merges made and the merge-loop rate, from the manifests.

    Keys ``split_*`` (``TRAIN_SPLIT``) only when every train manifest has
    ``train_split_seconds``; ``engine_*`` only when ingest ran on Ray.
    """
    work = folder / "toktoktok.work"
    ingest = stage_manifests(work, "ingest")
    train = stage_manifests(work, "train")
    export = json.loads((work / "export" / "manifest.json").read_text())
    made = sum(m["counts"]["merges_made"] for m in train)
    loop = sum(m["seconds"]["train"] for m in train)
    split = {key: sum(m["train_split_seconds"][key] for m in train) for key in TRAIN_SPLIT
             if train and all(key in m.get("train_split_seconds", {}) for m in train)}
    engines = [m["engine"] for m in ingest if isinstance(m.get("engine"), dict)]
    ray_seconds = {f"engine_{key}": sum(e["seconds"].get(key, 0) for e in engines)
                   for key in RAY_SECONDS if engines and all("seconds" in e for e in engines)}
    if engines and all("tasks" in e for e in engines):
        ray_seconds["engine_tasks"] = sum(e["tasks"] for e in engines)
        ray_seconds["engine_recounted"] = sum(e.get("recounted", 0) for e in engines)
    return {
        **{f"split_{key}": value for key, value in split.items()},
        **ray_seconds,
        "ingest_only": sum(m["seconds"].get("ingest", 0) for m in ingest),
        "ingest": sum(m["seconds"]["total"] for m in ingest),
        "ingest_kernels": sum(m["seconds"].get("kernels", 0) for m in ingest),
        "ingest_bytes": sum(m["counts"]["bytes_read"] for m in ingest),
        "documents": sum(m["counts"]["documents"] for m in ingest),
        "train_kernels": sum(m["seconds"].get("kernels", 0) for m in train),
        "train_load": sum(m["seconds"]["load"] for m in train),
        "merge_loop": loop,
        "train": sum(m["seconds"]["total"] for m in train),
        "export": sum(export["seconds"].values()),
        "merges": made,
        "merges_requested": sum(m["counts"]["merges_requested"] for m in train),
        "merges_per_second": made / max(loop, 1e-9),
        "distinct_pieces": sum(m["counts"]["distinct_pieces"] for m in train),
        "pieces_visited": sum(m["counts"].get("merge_loop_pieces_visited", 0) for m in train),
        "symbols_scanned": sum(m["counts"].get("merge_loop_symbols_scanned", 0) for m in train),
        "peak_rss_mb": max(m.get("peak_rss_mb", 0) for m in [*ingest, *train, export]),
    }
