#!/usr/bin/env python3
"""Peak memory of ``toktok run`` against ``working_set_mb`` (SPEC §6), and whether sampling is representative.

    make bench-memory                                  # = .venv/bin/python benchmarks/bench_memory.py
    .venv/bin/python benchmarks/bench_memory.py --merges 2000 --report /tmp/MEMORY.md
    .venv/bin/python benchmarks/bench_memory.py --demo --report /tmp/MEMORY.md   # the fallback corpus

The promise measured: a run's peak resident memory stays at or below
``working_set_mb`` plus a fixed overhead, whatever the corpus size. Every run
is one whole ``toktok run -c CFG --force`` process in a fresh folder, one
after another (never two at once), measured by ``bench_runs.run_measured``:
``ru_maxrss`` from ``os.wait4`` (the largest single process), the sampled sum
over the process and its workers ("tree", the launcher left out), and each
stage's own peak (``peak_rss_mb`` of the ingest, train and export manifests;
each stage resets the peak when it starts). A run's peak is the largest of
them all: ``ru_maxrss`` alone sees only the last stage, because the reset
(``/proc/self/clear_refs``) also resets the high-water mark it reports.

0. numba's cache (a fresh ``NUMBA_CACHE_DIR``) is filled by two first runs,
   reported apart: the tiny corpus, then the corpus at the smallest budget
   (paths a tiny corpus never takes, such as merging count tables). Every
   run records how many files it added to the cache; later runs should add none.
1. The fixed overhead: a tiny corpus (about 200 KB: the first 50 KB of each
   training file, written in the same formats, so the same readers run),
   500 merges, at each budget. The tiny run at the smallest budget is the
   measured overhead: its text needs well under 1 MiB, so everything above
   that is what every run pays.
2. The budgets (64, 256 and 1,024 MiB by default) on one phase over the four
   training files of the shared corpora (english.txt.zst, code.txt.zst,
   german.txt.zst, mixed.parquet; never the held-out files), ``--merges``
   merges, ``threads: -1``, ``hardcoded_merges: false``, ``heldout_share: 0``.
   A run is within its budget when every peak (process, tree, each stage) is
   at most the budget plus the measured overhead.
3. Representativeness: a budget of a quarter of the corpus's text (MiB,
   rounded) against the largest budget (the whole corpus, no sampling): the
   held-out bytes per token of the two vocabularies must agree within 1%.
   A budget already run is not run again (same config, same seed, same output).

Every measured point (tiny or corpus, each budget) runs ``--reps`` times
(default 3); its highest peak is reported and judged, and the repetitions'
outputs are checked to be identical (same seed, same sample).

Held-out compression: ``toktoktok.load`` of each ``.tiktoken``, UTF-8 bytes
per token of ``encode_ordinary`` over the whole of
``{english,code,german}.heldout.txt.zst``, per domain and overall (all bytes
over all tokens).

Without the shared corpora (or with ``--demo``): the project's demo corpus
(bench_corpus: english and code, the last 5% of each held out), and the
budgets scaled down by its text over the shared corpora's
(``SHARED_TEXT_MIB``), at least 1 MiB each; the report says so.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import zstandard

import bench_corpus
import bench_report
from bench_corpus import SHARED_CORPORA
from bench_report import md_table, num
from bench_runs import Measured, run_measured
from bench_toktok import _manifests as stage_manifests
from bench_toktok import fresh, run_env, toktok_bin

HERE = Path(__file__).resolve().parent
TRAIN_FILES = ("english.txt.zst", "code.txt.zst", "german.txt.zst", "mixed.parquet")
DOMAINS = ("english", "code", "german")
BUDGETS = (64, 256, 1024)
SHARED_TEXT_MIB = 257.6  # text of TRAIN_FILES (sources.text_bytes), to scale the budgets for another corpus
TINY_FILE_BYTES = 50_000  # of each training file: about 200 KB in all
TINY_MERGES = 500
REPRESENTATIVE = 0.01  # largest relative difference of held-out bytes/token for a quarter sample
STAGES = ("ingest", "train", "export")
MIB = 1 << 20


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# --- the corpora -----------------------------------------------------------------


@dataclass
class Setup:
    """What the runs train on, the tiny corpus, and the held-out text per domain."""

    sources: list[Path]
    tiny: list[Path]
    heldout: dict[str, str]
    text_bytes: int
    budgets: list[int]
    notes: list[str]
    demo: bool = False

    @property
    def quarter(self) -> int:
        """The budget (MiB) that keeps about a quarter of the text."""
        return max(1, round(self.text_bytes / 4 / MIB))


def corpus_text_bytes(paths: list[Path]) -> int:
    """The text of ``paths`` as the trainer's sampling measures it."""
    from toktoktok.sources import text_bytes

    return sum(text_bytes(p) for p in paths)


def read_zst(path: Path) -> str:
    """A whole ``.zst`` file, decompressed as a stream."""
    with path.open("rb") as fh, zstandard.ZstdDecompressor().stream_reader(fh) as reader:
        return reader.read().decode("utf-8", errors="replace")


def tiny_zst(source: Path, target: Path) -> Path:
    """The first ``TINY_FILE_BYTES`` of ``source`` as ``.zst``, with the shared files' 4 MiB window and no
    content size, so that decompressing it takes the same buffers as the real file."""
    data, _ = bench_corpus.zst_head(source, TINY_FILE_BYTES)
    params = zstandard.ZstdCompressionParameters.from_level(3, window_log=22, write_content_size=0)
    target.write_bytes(zstandard.ZstdCompressor(compression_params=params).compress(data))
    return target


def tiny_parquet(source: Path, target: Path) -> Path:
    """The first rows of ``source`` holding about ``TINY_FILE_BYTES`` of text, as parquet."""
    rows, size = [], 0
    for batch in pq.ParquetFile(source).iter_batches(batch_size=16, columns=["text"]):
        for text in batch.column(0).to_pylist():
            rows.append(text)
            size += len(text.encode("utf-8"))
            if size >= TINY_FILE_BYTES:
                pq.write_table(pa.table({"text": rows}), target, compression="zstd")
                return target
    pq.write_table(pa.table({"text": rows}), target, compression="zstd")
    return target


def tiny_head(source: Path, target: Path) -> Path:
    """The first ``4 * TINY_FILE_BYTES`` of a plain text file, cut after a line end."""
    data = source.read_bytes()[:4 * TINY_FILE_BYTES]
    target.write_bytes(data[:data.rindex(b"\n") + 1] if b"\n" in data else data)
    return target


def shared_setup(work: Path, budgets: list[int]) -> Setup:
    """The four training files of the shared corpora, their tiny copies, and the held-out files."""
    sources = [SHARED_CORPORA / name for name in TRAIN_FILES]
    folder = fresh(work / "tiny")
    tiny = [tiny_parquet(p, folder / p.name) if p.suffix == ".parquet" else tiny_zst(p, folder / p.name)
            for p in sources]
    heldout = {d: read_zst(SHARED_CORPORA / f"{d}.heldout.txt.zst") for d in DOMAINS}
    text = corpus_text_bytes(sources)
    notes = [f"training files: {', '.join(TRAIN_FILES)} from {SHARED_CORPORA} ({text / 1e6:.1f} MB = "
             f"{text / MIB:.1f} MiB of text, as the trainer measures it), one phase",
             "held-out: the whole of " + ", ".join(f"{d}.heldout.txt.zst ({len(heldout[d].encode()) / 1e6:.1f} MB)"
                                                   for d in DOMAINS),
             f"tiny corpus: the first {TINY_FILE_BYTES // 1000} KB of text of each training file in the same "
             f"format ({sum(p.stat().st_size for p in tiny) / 1000:.0f} KB on disk)"]
    return Setup(sources, tiny, heldout, text, budgets, notes)


def demo_setup(work: Path, budgets: list[int]) -> Setup:
    """The demo corpus (english and code, 5% held out) and budgets scaled down to its size."""
    folder = work / "corpora"
    folder.mkdir(parents=True, exist_ok=True)
    corpora = [bench_corpus.demo_corpus(name, 1e6, work, folder) for name in ("english", "code")]
    sources = [c.train for c in corpora]
    text = corpus_text_bytes(sources)
    scale = text / MIB / SHARED_TEXT_MIB
    scaled = sorted({max(1, round(b * scale)) for b in budgets})
    tiny = [tiny_head(sources[0], fresh(work / "tiny") / "english.txt")]
    notes = ["**No shared corpora were found: this run used the project's demo corpus and budgets scaled down "
             f"by its size ({text / MIB:.1f} MiB of text over the shared corpora's {SHARED_TEXT_MIB} MiB: "
             f"budgets {', '.join(map(str, budgets))} MiB became {', '.join(map(str, scaled))} MiB). "
             "Its figures are not the issue's.**",
             *[f"{c.name}: {c.description}" for c in corpora],
             f"tiny corpus: the first {4 * TINY_FILE_BYTES // 1000} KB of the english training file"]
    return Setup(sources, tiny, {c.name: c.heldout_text for c in corpora}, text, scaled, notes, demo=True)


# --- the runs --------------------------------------------------------------------


@dataclass
class Run:
    """One ``toktok run``: what it cost, what its manifests say, how well its vocabulary compresses."""

    label: str
    budget: int
    merges: int
    measured: Measured
    manifests: dict[str, dict[str, Any]]
    folder: Path
    compiled: int = 0  # numba cache files the run added (0 = nothing compiled)
    bytes_per_token: dict[str, float] = field(default_factory=dict)
    peaks: list[float] = field(default_factory=list)  # the run peak of every repetition (``repeat``)
    identical: bool = True  # whether every repetition wrote the same .tiktoken

    @property
    def ok(self) -> bool:
        return self.measured.returncode == 0 and set(self.manifests) == set(STAGES)

    @property
    def peak(self) -> float:
        """The whole run's peak: the largest of ``ru_maxrss``, the sampled tree and every stage's peak
        (``ru_maxrss`` alone sees only the last stage: see the module's notes)."""
        return max(self.measured.rss_mb, self.measured.tree_mb, *[self.stage_peak(s) or 0.0 for s in STAGES])

    def stage_peak(self, stage: str) -> float | None:
        """A stage's peak from its manifest: of all its processes when it had workers, else its own."""
        manifest = self.manifests.get(stage, {})
        return manifest.get("all_processes_peak_rss_mb") or manifest.get("peak_rss_mb")

    def ingest(self, part: str, key: str) -> Any:
        return self.manifests.get("ingest", {}).get(part, {}).get(key)

    def over(self, limit: float) -> dict[str, float]:
        """Every peak above ``limit``, by what: ru_maxrss (wait4), tree (sampled), each stage."""
        peaks = {"ru_maxrss": self.measured.rss_mb, "tree": self.measured.tree_mb,
                 **{s: self.stage_peak(s) or 0.0 for s in STAGES}}
        return {name: peak - limit for name, peak in peaks.items() if peak > limit}


def write_config(folder: Path, sources: list[Path], budget: int, merges: int) -> Path:
    """One phase over ``sources`` with ``working_set_mb: budget`` (JSON is YAML)."""
    cfg = {"output": str(folder / "toktoktok.tiktoken"), "working_set_mb": budget, "threads": -1,
           "hardcoded_merges": False, "heldout_share": 0, "seed": 0,
           "phases": [{"name": "all", "merges": merges, "sources": [{"file": str(p)} for p in sources]}]}
    path = folder / "memory.yaml"
    path.write_text(json.dumps(cfg, indent=2) + "\n", encoding="utf-8")
    return path


def read_manifests(folder: Path) -> dict[str, dict[str, Any]]:
    """The ingest, train and export manifests of the one phase run in ``folder``."""
    work = folder / "toktoktok.work"
    found = {s: m[0] for s in ("ingest", "train") if (m := stage_manifests(work, s))}
    export = work / "export" / "manifest.json"
    if export.exists():
        found["export"] = json.loads(export.read_text())
    return found


def cache_files(cache: Path) -> int:
    return sum(1 for _ in cache.rglob("*.nbc")) if cache.exists() else 0


def train(label: str, sources: list[Path], budget: int, merges: int, folder: Path, env: dict[str, str]) -> Run:
    """``toktok run`` in a fresh ``folder``, measured; logs a line."""
    cfg = write_config(fresh(folder), sources, budget, merges)
    cache = Path(env["NUMBA_CACHE_DIR"])
    before = cache_files(cache)
    measured = run_measured([toktok_bin(), "run", "-c", str(cfg), "--force"], folder / "log.txt", env=env)
    run = Run(label, budget, merges, measured, read_manifests(folder), folder, cache_files(cache) - before)
    status = "ok" if run.ok else f"FAILED (exit {measured.returncode}, see {measured.log})"
    log(f"  {label}, budget {budget} MiB: {measured.wall:.1f} s, peak {measured.rss_mb:.0f} MiB "
        f"(tree {measured.tree_mb:.0f}), stages " + " / ".join(num(run.stage_peak(s), 0) for s in STAGES)
        + f", {status}")
    return run


def repeat(label: str, sources: list[Path], budget: int, merges: int, folder: Path, env: dict[str, str],
           reps: int) -> Run:
    """``train`` ``reps`` times in ``folder/repN``: the run with the highest peak, with every run's peak."""
    runs = [train(label, sources, budget, merges, folder / f"rep{i}", env) for i in range(1, reps + 1)]
    worst = max(runs, key=lambda r: (not r.ok, r.peak))
    worst.peaks = [r.peak for r in runs]
    worst.identical = len({(r.folder / "toktoktok.tiktoken").read_bytes() for r in runs if r.ok}) <= 1
    return worst


def score(run: Run, heldout: dict[str, str]) -> None:
    """Held-out UTF-8 bytes per token of ``run``'s vocabulary, per domain and overall."""
    import toktoktok

    if not run.ok:
        return
    enc = toktoktok.load(run.folder / "toktoktok.tiktoken")
    sizes = {d: len(text.encode("utf-8")) for d, text in heldout.items()}
    tokens = {d: len(enc.encode_ordinary(text)) for d, text in heldout.items()}
    run.bytes_per_token = {d: sizes[d] / max(1, tokens[d]) for d in heldout}
    run.bytes_per_token["overall"] = sum(sizes.values()) / max(1, sum(tokens.values()))


@dataclass
class Findings:
    """Every run of one invocation."""

    cold: Run
    warmup: Run
    tiny: list[Run]
    big: list[Run]
    quarter: Run | None

    @property
    def overhead(self) -> float:
        """The measured fixed overhead: the warm tiny run at the smallest budget."""
        return min(self.tiny, key=lambda r: r.budget).peak


def run_all(setup: Setup, merges: int, reps: int, work: Path, env: dict[str, str]) -> Findings:
    """The tiny run that compiles, a corpus run that compiles what the tiny one did not reach, the tiny
    runs at each budget, the budgets largest first, then the quarter sample (unless a budget was it);
    each measured point ``reps`` times, keeping its highest peak."""
    log("numba: the first runs compile into an empty cache")
    cold = train("tiny, first run (numba compiles)", setup.tiny, min(setup.budgets), TINY_MERGES,
                 work / "tiny-cold", env)
    warmup = train("corpus, first run (compiles what the tiny run did not reach)", setup.sources,
                   min(setup.budgets), merges, work / "corpus-warmup", env)
    log("fixed overhead: the tiny corpus at each budget")
    tiny = [repeat("tiny", setup.tiny, b, TINY_MERGES, work / f"tiny-{b}", env, reps) for b in setup.budgets]
    log(f"budgets on the corpus ({setup.text_bytes / MIB:.1f} MiB of text), {merges} merges")
    big = []
    for budget in sorted(setup.budgets, reverse=True):
        big.append(repeat("corpus", setup.sources, budget, merges, work / f"corpus-{budget}", env, reps))
        score(big[-1], setup.heldout)
    quarter = next((r for r in big if r.budget == setup.quarter), None)
    if quarter is None:
        quarter = repeat("corpus, quarter sample", setup.sources, setup.quarter, merges,
                         work / f"corpus-{setup.quarter}", env, reps)
        score(quarter, setup.heldout)
    return Findings(cold, warmup, tiny, sorted(big, key=lambda r: r.budget), quarter)


# --- the report ------------------------------------------------------------------


def mib(value: float | None) -> str:
    return num(value, 0)


def excess(run: Run, limit: float) -> str:
    """What went over ``limit`` and by how much, or "–"."""
    over = run.over(limit)
    return ", ".join(f"{name} +{value:.0f}" for name, value in over.items()) if over else "–"


MEMORY_HEADERS = ["corpus", "budget MiB", "kept MiB", "merges", "ru_maxrss (wait4)", "tree (sampled)",
                  "ingest", "train", "export", "run peak", "run peak, every run", "budget + overhead",
                  "over it by (MiB)", "within"]


def kept_mib(run: Run) -> float | None:
    kept = run.manifests.get("ingest", {}).get("counts", {}).get("kept_bytes")
    return None if kept is None else kept / MIB


def memory_row(run: Run, corpus: str, overhead: float) -> list[str]:
    limit = run.budget + overhead
    within = "–" if not run.ok else ("yes" if not run.over(limit) else "**no**")
    return [corpus, f"{run.budget:,}", num(kept_mib(run)), f"{run.merges:,}", mib(run.measured.rss_mb),
            mib(run.measured.tree_mb), *[mib(run.stage_peak(s)) for s in STAGES], mib(run.peak),
            " / ".join(f"{p:.0f}" for p in run.peaks) or "–", mib(limit), excess(run, limit), within]


WORK_HEADERS = ["corpus", "budget MiB", "kept MiB", "ingest work", "train work", "export work",
                "largest ÷ budget", "largest ÷ kept text"]


def work_row(run: Run, corpus: str, tiny: Run) -> list[str]:
    """What each stage holds above the same stage of a tiny run: the part that grows with the data."""
    work = {s: (run.stage_peak(s) or 0.0) - (tiny.stage_peak(s) or 0.0) for s in STAGES}
    largest, kept = max(work.values()), kept_mib(run)
    return [corpus, f"{run.budget:,}", num(kept), *[mib(work[s]) for s in STAGES], num(largest / run.budget, 2),
            num(largest / kept if kept else None, 2)]


SAMPLE_HEADERS = ["corpus", "budget MiB", "text MiB", "capacity MiB", "share", "documents kept / read",
                  "kept MiB", "sampled out", "wall s", "ingest s", "train s", "numba compiled"]


def sample_row(run: Run, corpus: str) -> list[str]:
    counts = run.manifests.get("ingest", {}).get("counts", {})
    text, capacity = run.ingest("sample", "text_bytes"), run.ingest("sample", "capacity_bytes")
    train_s = run.manifests.get("train", {}).get("seconds", {}).get("total")
    return [corpus, f"{run.budget:,}", num(text / MIB if text is not None else None),
            num(capacity / MIB if capacity is not None else None, 0), num(run.ingest("sample", "share"), 3),
            f"{counts.get('kept_documents', 0):,} / {counts.get('documents', 0):,}",
            num(counts["kept_bytes"] / MIB if "kept_bytes" in counts else None),
            f"{counts.get('sampled_out_documents', 0):,}", num(run.measured.wall),
            num(run.manifests.get("ingest", {}).get("seconds")), num(train_s, 2),
            f"yes ({run.compiled} files)" if run.compiled else "no"]


def compression_row(run: Run, domains: list[str]) -> list[str]:
    share = run.ingest("sample", "share")
    return [f"{run.budget:,}", num(share, 3), *[num(run.bytes_per_token.get(d), 3) for d in [*domains, "overall"]]]


def tiny_at(f: Findings, budget: int) -> Run:
    """The tiny run at ``budget``, else at the smallest budget."""
    return next((r for r in f.tiny if r.budget == budget), min(f.tiny, key=lambda r: r.budget))


def representativeness(f: Findings, domains: list[str]) -> tuple[list[list[str]], bool | None]:
    """Rows comparing the quarter sample with the whole corpus, and whether overall is within 1%."""
    whole, quarter = f.big[-1], f.quarter
    if quarter is None or not whole.bytes_per_token or not quarter.bytes_per_token:
        return [], None
    rows, verdict = [], None
    for d in [*domains, "overall"]:
        w, q = whole.bytes_per_token[d], quarter.bytes_per_token[d]
        diff = (q - w) / w
        within = abs(diff) <= REPRESENTATIVE
        verdict = within if d == "overall" else verdict
        rows.append([d, f"{w:.3f}", f"{q:.3f}", f"{100 * diff:+.2f}%", "yes" if within else "**no**"])
    return rows, verdict


def verdicts(f: Findings, setup: Setup, rep: bool | None) -> list[str]:
    """The summary: the overhead, each budget's verdict, representativeness."""
    from toktoktok.memory import FIXED_OVERHEAD_MB

    o = f.overhead
    lines = [f"- **measured fixed overhead: {o:.1f} MiB** (peak of the tiny run at {min(setup.budgets)} MiB; "
             f"toktoktok/memory.py says FIXED_OVERHEAD_MB = {FIXED_OVERHEAD_MB}); a first run, which compiles the "
             f"numba code, is not covered: the tiny one peaked at {f.cold.peak:.0f} MiB (Notes)"]
    for run in f.big:
        limit = run.budget + o
        verdict = "yes" if run.ok and not run.over(limit) else "**no**"
        lines.append(f"- budget {run.budget:,} MiB, whole corpus: peak {run.peak:.0f} MiB, limit "
                     f"{limit:.0f} MiB (budget + overhead): within: {verdict}"
                     + ("" if verdict == "yes" else f" (over by: {excess(run, limit)})"))
    if rep is not None:
        d = (f.quarter.bytes_per_token["overall"] / f.big[-1].bytes_per_token["overall"] - 1) * 100
        lines.append(f"- quarter sample ({f.quarter.budget} MiB) vs whole corpus ({f.big[-1].budget:,} MiB): held-out "
                     f"bytes/token {d:+.2f}% overall: within 1%: {'yes' if rep else '**no**'}")
    return lines


def working_tree() -> str:
    """The tracked files changed since the commit, if any (other work may share the checkout)."""
    changed = bench_report._git("status", "--porcelain", "--untracked-files=no")
    files = [line.split(maxsplit=1)[1] for line in (changed or "").splitlines() if line.strip()]
    return f"; changed in the working tree at the start: {', '.join(files)}" if files else ""


def report(f: Findings, setup: Setup, args: argparse.Namespace, facts: dict[str, str]) -> str:
    """MEMORY.md."""
    command = " ".join(["benchmarks/bench_memory.py", *sys.argv[1:]])
    domains = list(setup.heldout)
    corpus = "demo corpus" if setup.demo else "shared corpora (4 files)"
    rep_rows, rep = representativeness(f, domains)
    o = f.overhead
    lines = [
        "# toktoktok memory benchmark", "",
        f"Run {facts['date']}, commit {facts['commit']}, `{command}`.", "",
        "## Summary", "", *verdicts(f, setup, rep), "",
        "## The run", "",
        f"- date: {facts['date']}",
        f"- commit: {facts['commit']}{facts['tree']}",
        f"- machine: {facts['machine']}",
        f"- load average (1 / 5 / 15 min) at start: {facts['load']} (other work may share the machine; "
        "it changes times, not memory)",
        f"- versions: {bench_report.versions()}",
        f"- command: `{command}`",
        f"- settings: one phase, {args.merges:,} merges ({TINY_MERGES} on the tiny corpus), `threads: -1`, "
        "`hardcoded_merges: false`, `heldout_share: 0`, `seed: 0`, default pattern; runs one after another",
        *[f"- {note}" for note in setup.notes], "",
        "## Peak RSS against budget + overhead", "",
        "MiB throughout. ru_maxrss = `ru_maxrss` of `toktok run` from `os.wait4` (the largest single process; "
        "it sees only the last stage, see Notes); tree = the largest sum of resident sets of the process and its "
        "workers, sampled every 50 ms; ingest / train / export = each stage's own `peak_rss_mb` from its "
        "manifest; run peak = the largest of these. "
        f"Overhead = {o:.1f} MiB, measured (the tiny run at the smallest budget). Each point ran "
        f"{args.reps} time(s); its row is the run with the highest peak (every run's in its own column). "
        "within = every one of these peaks is at most budget + overhead. The first two rows fill numba's empty "
        "cache (compiling) and are not judged by the summary.", "",
        md_table(MEMORY_HEADERS, [memory_row(f.cold, "tiny, first run (numba compiles)", o),
                                  memory_row(f.warmup, corpus + ", first run", o)]
                 + [memory_row(r, "tiny", o) for r in f.tiny]
                 + [memory_row(r, corpus, o) for r in f.big]
                 + ([memory_row(f.quarter, corpus + ", quarter sample", o)] if f.quarter not in f.big else [])),
        "",
        "## What grows with the data", "",
        "Each stage's peak minus the same stage's peak in the tiny run at the same budget (MiB): what the stage "
        "holds for the text it kept, as against what it holds anyway.", "",
        md_table(WORK_HEADERS, [work_row(r, corpus, tiny_at(f, r.budget)) for r in f.big]
                 + ([work_row(f.quarter, corpus + ", quarter sample", tiny_at(f, f.quarter.budget))]
                    if f.quarter not in f.big else [])),
        "",
        "## What each run read and kept", "",
        "From the ingest manifest (`sample`, `counts`): capacity = the text the budget buys; share = the "
        "chance each document is kept; numba compiled = whether the run added files to the numba cache "
        "(only the first run should).", "",
        md_table(SAMPLE_HEADERS, [sample_row(f.cold, "tiny, first run"), sample_row(f.warmup, corpus + ", first run")]
                 + [sample_row(r, "tiny") for r in f.tiny]
                 + [sample_row(r, corpus) for r in f.big]
                 + ([sample_row(f.quarter, "quarter sample")] if f.quarter not in f.big else [])),
        "",
        "## Held-out compression (UTF-8 bytes per token, higher is better)", "",
        md_table(["budget MiB", "share", *domains, "overall"], [compression_row(r, domains) for r in f.big]
                 + ([compression_row(f.quarter, domains)] if f.quarter not in f.big else [])),
        "",
    ]
    if rep_rows:
        lines += ["## Representativeness: a quarter sample against the whole corpus", "",
                  f"Budget {f.quarter.budget} MiB = a quarter of the {setup.text_bytes / MIB:.1f} MiB of text "
                  f"(share {f.quarter.ingest('sample', 'share'):.3f})"
                  + (", the same run as its row above" if f.quarter in f.big else "")
                  + f", against budget {f.big[-1].budget:,} MiB (share "
                  f"{f.big[-1].ingest('sample', 'share'):.3f}, the whole corpus). Target: within 1%.", "",
                  md_table(["held-out", "whole corpus", "quarter sample", "difference", "within 1%"], rep_rows), ""]
    lines += ["## Notes", "", *notes(f, setup), "",
              f"All figures above were measured in this run ({facts['date']}) by benchmarks/bench_memory.py.", ""]
    return "\n".join(lines)


def notes(f: Findings, setup: Setup) -> list[str]:
    """Short remarks computed from the runs: the overhead's spread, the worst stage, the compile runs."""
    o = f.overhead
    spread = [r.peak for r in f.tiny]
    out = [f"- The tiny runs peak at {min(spread):.0f}–{max(spread):.0f} MiB whatever the budget "
           f"({', '.join(f'{r.budget}: {r.peak:.0f}' for r in f.tiny)}): the overhead does "
           + ("not depend on the budget." if max(spread) - min(spread) < 16 else "grow with the budget.")]
    worst = [(r, s, (r.stage_peak(s) or 0) - r.budget - o) for r in f.big for s in STAGES]
    run, stage, by = max(worst, key=lambda t: t[2])
    out.append(f"- Largest stage peak against its limit: {stage} at budget {run.budget:,} MiB, "
               f"{run.stage_peak(stage):.0f} MiB ({by:+.0f} MiB against budget + overhead).")
    compiled = [r for r in [*f.tiny, *f.big] if r.compiled]
    if compiled:
        out.append("- These measured runs still compiled numba code (their peak includes LLVM): "
                   + ", ".join(f"{r.label} at {r.budget} MiB" for r in compiled) + ".")
    out.append("- `ru_maxrss` from `os.wait4` sees only the last stage (export): each stage starts by resetting the "
               "process's peak (`/proc/self/clear_refs` 5, stages/artifacts.py), and that resets the very high-water "
               "mark the kernel reports as `ru_maxrss` at exit. The run peak here therefore also takes the stage "
               "manifests and the sampled tree; benchmarks that read `ru_maxrss` alone understate a toktoktok run.")
    w = f.warmup
    widest = max(f.big, key=lambda r: max(r.peaks) - min(r.peaks))
    out.append(f"- Run to run, the same configuration's peak varies (threads' timing): by up to "
               f"{max(widest.peaks) - min(widest.peaks):.0f} MiB at {widest.budget:,} MiB "
               f"({' / '.join(f'{p:.0f}' for p in widest.peaks)}); the tables show each point's highest. "
               "Repetitions wrote identical vocabularies: "
               + ("yes." if all(r.identical for r in [*f.tiny, *f.big]) else "**no**."))
    also = (f" and the corpus at {w.budget} MiB, which compiled {w.compiled} more, at {w.peak:.0f} MiB "
            f"({w.peak - w.budget - o:+.0f} MiB against budget + overhead)") if w.compiled else ""
    out.append(f"- Compiling costs memory: with an empty numba cache the tiny run ({f.cold.compiled} cache files "
               f"written) peaks at {f.cold.peak:.0f} MiB ({f.cold.peak - o:+.0f} MiB against the overhead){also}. "
               "numba caches the code beside the package, so an install pays this once, on its first run.")
    return out


# --- command line ----------------------------------------------------------------


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Peak RSS of toktok run against working_set_mb, and sampling.")
    parser.add_argument("--merges", type=int, default=8000, help="merges of the corpus runs (default 8000)")
    parser.add_argument("--budgets", default=",".join(map(str, BUDGETS)),
                        help="comma-separated working_set_mb values in MiB (default 64,256,1024)")
    parser.add_argument("--reps", type=int, default=3,
                        help="runs of each measured point; the highest peak is reported (default 3)")
    parser.add_argument("--out", type=Path, default=HERE / ".work" / "memory",
                        help="work folder, emptied first (default benchmarks/.work/memory, ignored by git)")
    parser.add_argument("--report", type=Path, default=HERE / "MEMORY.md", help="the Markdown report")
    parser.add_argument("--demo", action="store_true", help="use the demo corpus even if the shared corpora exist")
    args = parser.parse_args(argv)
    args.budgets = sorted({int(b) for b in args.budgets.split(",") if b.strip()})
    if args.merges < 1 or args.reps < 1 or not args.budgets or args.budgets[0] < 1:
        parser.error("--merges, --reps and every budget must be >= 1")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    facts = {"date": bench_report.now(), "machine": bench_report.machine(), "commit": bench_report.commit(),
             "tree": working_tree(),
             "load": " / ".join(f"{x:.2f}" for x in os.getloadavg())}
    shutil.rmtree(args.out, ignore_errors=True)
    args.out.mkdir(parents=True)
    demo = args.demo or not SHARED_CORPORA.is_dir()
    log(f"preparing the corpus in {args.out}" + (" (demo corpus)" if demo else ""))
    setup = (demo_setup if demo else shared_setup)(args.out, args.budgets)
    env = run_env(args.out / "numba-cache")  # empty: the first tiny run compiles
    findings = run_all(setup, args.merges, args.reps, args.out, env)
    text = report(findings, setup, args, facts)
    args.report.parent.mkdir(parents=True, exist_ok=True)
    args.report.write_text(text, encoding="utf-8")
    print(text)
    log(f"wrote {args.report}")


if __name__ == "__main__":
    main()
