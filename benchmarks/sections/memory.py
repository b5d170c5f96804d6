"""Peak memory of ``toktok run`` against ``working_set_mb`` (docs/training.md), whether sampling is representative,
and whether one huge line or row group is streamed.

    make bench-memory                                  # = .venv/bin/python benchmarks/run.py --section memory
    .venv/bin/python benchmarks/run.py --section memory --merges 2000 --report /tmp/MEMORY.md
    .venv/bin/python benchmarks/run.py --section memory --demo --report /tmp/MEMORY.md   # the fallback corpus
    .venv/bin/python benchmarks/run.py --section memory --huge-mb 0 --report /tmp/MEMORY.md  # without the streaming checks

The promise measured: a run's peak resident memory stays at or below
``working_set_mb`` plus a fixed overhead, whatever the corpus size. Every run
is one whole ``toktok run -c CFG --force`` (or ``toktok ingest``) process in a
fresh folder, one after another (never two at once), measured from
outside by ``benchkit.measure.run_measured``: ``ru_maxrss`` from
``os.wait4`` (the largest single process) and the sampled sum over the
process and its workers ("tree", the launcher left out). A run's peak is the
larger of the two (``Measured.peak_mb``): ``ru_maxrss`` is the largest single
process's high-water mark, which toktoktok never resets (docs/guarantees.md, "Honest
memory figures"), and the tree adds the worker processes. Each stage's own account (``peak_rss_mb`` of the ingest, train
and export manifests, ``all_processes_peak_rss_mb`` when a stage had worker
processes) is shown beside it and also judged against the budget, but never
taken as the run's peak.

**The fixed overhead** is, by the project's definition, the peak of a run at
``working_set_mb: 1`` on the same corpus (the "floor"): everything that does
not grow with the budget or the corpus size: the interpreter and libraries,
numba's JIT and kernels, and the streaming buffers every real run fills (read
blocks, batches in flight per thread, parquet pages, allocator pools). A phase
keeps at most ``working_set_mb × TEXT_PER_BUDGET_BYTE`` bytes of text
(``toktoktok.sampling.capacity``), so at 1 MiB it keeps almost nothing.

0. numba's cache (a fresh ``NUMBA_CACHE_DIR``) is filled by two first runs,
   reported apart: the tiny corpus, then the corpus at the smallest budget
   (paths a tiny corpus never takes, such as merging count tables). Every
   run records how many files it added to the cache; later runs should add none.
1. The libraries' share: a tiny corpus (about 200 KB: the first 50 KB of each
   training file, written in the same formats, so the same readers run),
   500 merges, at each budget. It fills no streaming buffer to speak of, so its
   peak is the libraries alone; reported for information, not judged.
2. The floor: the four training files at ``working_set_mb: 1``, ``--merges``
   merges. Its run peak (the larger of process and tree, from outside, over
   ``--reps`` runs) is the fixed overhead.
3. The budgets (64, 256 and 1,024 MiB by default) on one phase over the four
   training files of the shared corpora (english.txt.zst, code.txt.zst,
   german.txt.zst, mixed.parquet; never the held-out files), ``--merges``
   merges, ``threads: -1``, ``hardcoded_merges: false``, ``heldout_share: 0``.
   A run is within its budget when every peak (process, tree, each stage) is
   at most the budget plus the overhead. If the largest budget cannot hold
   the whole corpus (``capacity`` below its text), a budget that can is added.
   What grows with the data: each stage's peak minus the floor's same stage.
4. Representativeness: the budget that keeps a quarter of the corpus's text,
   ``round(text / 4 / TEXT_PER_BUDGET_BYTE / MiB)``, against the largest
   budget (the whole corpus, no sampling: its share must be 1.0): the
   held-out bytes per token of the two vocabularies must agree within 1%.
   A budget already run is not run again (same config, same seed, same output).
5. Streaming (``--huge-mb``, default 1,024; 0 skips it): ``toktok ingest``
   alone at ``working_set_mb: 64``, ``heldout_share: 0``, ``--reps`` times each, on
   (a) ``--huge-mb`` MiB of English prose (english.txt.zst repeated) with every
   line break replaced by a space (one single line, one document, cut only at
   docs/pretokenization.md's safe places), against the same text with its line breaks; (b) a
   parquet file holding the English documents repeated to about ``--huge-mb``
   MiB of text in ONE row group, against the same rows in row groups of 10,000
   rows. Recorded from the ingest manifest: ``peak_rss_mb``, seconds,
   ``forced_cuts``, documents kept and the sample's share. The one-line
   document is kept or dropped whole by the sample: the config's ``seed`` is
   chosen so that it is kept (else nothing would be pre-tokenized), and the
   line-broken file uses the same seed. The generated files live under
   ``--out`` and are deleted when their runs are done.

Every measured point (tiny or corpus, each budget, each streaming input) runs
``--reps`` times (default 3); its highest peak is reported and judged, and the
repetitions' outputs are checked to be identical (same seed, same sample).

Held-out compression: ``toktoktok.load`` of each ``.tiktoken``, UTF-8 bytes
per token of ``encode_ordinary`` over the whole of
``{english,code,german}.heldout.txt.zst``, per domain and overall (all bytes
over all tokens).

Without the shared corpora (or with ``--demo``): the project's demo corpus
(bench_corpus: english and code, the last 5% of each held out), and the
budgets scaled down by its text over the shared corpora's
(``SHARED_TEXT_MIB``), at least 1 MiB each; the streaming checks use its
english training file and ``--huge-mb`` defaults to 64; the report says so.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import zstandard
from benchkit import corpus as bench_corpus
from benchkit import report as bench_report
from benchkit.corpus import SHARED_CORPORA
from benchkit.measure import Measured, run_measured
from benchkit.report import md_table, num
from benchkit.toktok import fresh, run_env, stage_manifests, toktok_bin

from toktoktok.sampling import TEXT_PER_BUDGET_BYTE, capacity

HERE = Path(__file__).resolve().parents[1]  # benchmarks/
TRAIN_FILES = ("english.txt.zst", "code.txt.zst", "german.txt.zst", "mixed.parquet")
DOMAINS = ("english", "code", "german")
BUDGETS = (64, 256, 1024)
FLOOR_BUDGET = 1  # MiB: the run that defines the fixed overhead
SHARED_TEXT_MIB = 257.6  # text of TRAIN_FILES (sources.text_bytes), to scale the budgets for another corpus
TINY_FILE_BYTES = 50_000  # of each training file: about 200 KB in all
TINY_MERGES = 500
REPRESENTATIVE = 0.01  # largest relative difference of held-out bytes/token for a quarter sample
STREAM_BUDGET = 64  # MiB: working_set_mb of the streaming checks
HUGE_MB = 1024  # MiB of text of each streaming input (--huge-mb)
DEMO_HUGE_MB = 64  # the same with the demo corpus
SMALL_ROW_GROUP_ROWS = 10_000
PHASE = "all"
STAGES = ("ingest", "train", "export")
MIB = 1 << 20


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# --- the corpora -----------------------------------------------------------------


@dataclass
class Setup:
    """What the runs train on, the tiny corpus, the held-out text per domain, and the prose of the
    streaming checks."""

    sources: list[Path]
    tiny: list[Path]
    heldout: dict[str, str]
    text_bytes: int
    budgets: list[int]
    notes: list[str]
    prose: Path
    demo: bool = False

    @property
    def quarter(self) -> int:
        """The budget (MiB) whose capacity is about a quarter of the text."""
        return max(1, round(self.text_bytes / 4 / TEXT_PER_BUDGET_BYTE / MIB))

    @property
    def whole(self) -> int:
        """The smallest budget (MiB) whose capacity holds all the text."""
        return max(1, math.ceil(self.text_bytes / TEXT_PER_BUDGET_BYTE / MIB))


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
    return Setup(sources, tiny, heldout, text, budgets, notes, SHARED_CORPORA / "english.txt.zst")


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
             "Its figures are not those of the shared corpora.**",
             *[f"{c.name}: {c.description}" for c in corpora],
             f"tiny corpus: the first {4 * TINY_FILE_BYTES // 1000} KB of the english training file"]
    return Setup(sources, tiny, {c.name: c.heldout_text for c in corpora}, text, scaled, notes, sources[0],
                 demo=True)


def hold_whole(setup: Setup) -> None:
    """Add a budget that holds the whole corpus when the largest one does not."""
    if capacity(max(setup.budgets)) < setup.text_bytes:
        setup.notes.append(f"budget {setup.whole:,} MiB added: the largest asked for, {max(setup.budgets):,} MiB, "
                           f"keeps at most {capacity(max(setup.budgets)) / MIB:.1f} MiB of text, less than the "
                           f"corpus's {setup.text_bytes / MIB:.1f} MiB")
        setup.budgets = sorted({*setup.budgets, setup.whole})


# --- the runs --------------------------------------------------------------------


def stage_peak_of(manifest: dict[str, Any]) -> float | None:
    """A stage's peak from its manifest: of all its processes when it had workers, else its own."""
    return manifest.get("all_processes_peak_rss_mb") or manifest.get("peak_rss_mb")


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
        """The whole run's peak as seen from outside: the larger of ``ru_maxrss`` and the sampled tree
        (which adds the worker processes)."""
        return self.measured.peak_mb

    def stage_peak(self, stage: str) -> float | None:
        return stage_peak_of(self.manifests.get(stage, {}))

    def ingest(self, part: str, key: str) -> Any:
        return self.manifests.get("ingest", {}).get(part, {}).get(key)

    def over(self, limit: float) -> dict[str, float]:
        """Every peak above ``limit``, by what: ru_maxrss (wait4), tree (sampled), each stage."""
        peaks = {"ru_maxrss": self.measured.rss_mb, "tree": self.measured.tree_mb,
                 **{s: self.stage_peak(s) or 0.0 for s in STAGES}}
        return {name: peak - limit for name, peak in peaks.items() if peak > limit}


def write_config(folder: Path, sources: list[Path], budget: int, merges: int, seed: int = 0) -> Path:
    """One phase over ``sources`` with ``working_set_mb: budget`` (JSON is YAML)."""
    cfg = {"output": str(folder / "toktoktok.tiktoken"), "working_set_mb": budget, "threads": -1,
           "hardcoded_merges": False, "heldout_share": 0, "seed": seed,
           "phases": [{"name": PHASE, "merges": merges, "sources": [{"file": str(p)} for p in sources]}]}
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
    worst.compiled = sum(r.compiled for r in runs)
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


# --- streaming: one huge line, one huge row group -----------------------------------


@dataclass
class Stream:
    """One streaming input and its ``toktok ingest`` runs."""

    label: str
    file_bytes: int
    text_bytes: int
    seed: int
    rows: int | None = None
    row_groups: int | None = None
    runs: list[tuple[Measured, dict[str, Any]]] = field(default_factory=list)
    compiled: int = 0

    @property
    def ok(self) -> bool:
        return bool(self.runs) and all(m.returncode == 0 and man for m, man in self.runs)

    @property
    def peaks(self) -> list[float]:
        """The peak of every run, from outside (``Measured.peak_mb``)."""
        return [m.peak_mb for m, _ in self.runs]

    @property
    def peak(self) -> float:
        return max(self.peaks, default=0.0)

    @property
    def worst(self) -> tuple[Measured, dict[str, Any]]:
        return max(self.runs, key=lambda r: r[0].peak_mb)

    def counts(self) -> dict[str, Any]:
        """The ingest manifest's counts of the run with the highest peak."""
        return self.worst[1].get("counts", {}) if self.runs else {}

    def kept_mib(self) -> float:
        return self.counts().get("kept_bytes", 0) / MIB

    def forced_cuts(self) -> int:
        return self.counts().get("forced_cuts", 0)

    def all_peaks(self) -> float:
        """The largest of every peak of every run: its ingest manifest's, ``ru_maxrss``, tree."""
        return max([self.peak, *[stage_peak_of(man) or 0.0 for _, man in self.runs]], default=0.0)


def huge_txt(prose: Path, target: Path, size: int, one_line: bool) -> int:
    """``prose`` repeated to ``size`` bytes into ``target``: with every line break a space (one line), or as
    it is (the copies joined by a blank line); cut at a space or a line end. Returns the bytes written."""
    from toktoktok.sources import raw_chunks

    written = 0
    with target.open("wb") as out:
        while written < size:
            for chunk in raw_chunks(prose, 4 * MIB):
                if one_line:
                    chunk = chunk.replace(b"\r", b" ").replace(b"\n", b" ")
                room = size - written
                if len(chunk) >= room:
                    chunk = chunk[:room]
                    cut = chunk.rfind(b" " if one_line else b"\n")
                    chunk = chunk[:cut + 1] if cut >= 0 else chunk
                    out.write(chunk)
                    return written + len(chunk)
                out.write(chunk)
                written += len(chunk)
            separator = b" " if one_line else b"\n"
            out.write(separator)
            written += len(separator)
    return written


def prose_documents(prose: Path) -> pa.RecordBatch:
    """The documents of ``prose`` as the trainer splits a ``.txt`` file, as one batch of a ``text`` column."""
    from toktoktok.sources import iter_blocks

    docs, parts = [], []
    for block in iter_blocks(prose):
        parts.append(block.text)
        if block.end:
            docs.append("".join(parts))
            parts = []
    return pa.record_batch({"text": pa.array(docs, type=pa.string())})


def huge_parquet(docs: pa.RecordBatch, target: Path, size: int, row_group_rows: int | None) -> tuple[int, int, int]:
    """The documents repeated to about ``size`` bytes of text, in row groups of ``row_group_rows`` (None: one).

    The table repeats the same batch (no copy), and the writer writes it page by page, so this process
    holds about one copy of the documents, not ``size``. Returns rows, text bytes and row groups.
    """
    import pyarrow.compute as pc

    per = pc.sum(pc.binary_length(docs.column(0))).as_py()
    copies, rest = divmod(size, per)
    lengths = pc.binary_length(docs.column(0)).to_numpy().cumsum()
    tail = int((lengths < rest).sum()) + 1 if rest else 0
    table = pa.Table.from_batches([docs] * copies + ([docs.slice(0, tail)] if tail else []))
    text = per * copies + (int(lengths[tail - 1]) if tail else 0)
    with pq.ParquetWriter(target, table.schema, compression="zstd", use_dictionary=False,
                          write_statistics=False) as writer:
        writer.write_table(table, row_group_size=row_group_rows or table.num_rows)
    return table.num_rows, text, pq.ParquetFile(target).metadata.num_row_groups


def keeping_seed(cfg_path: Path, budget: int) -> int:
    """The smallest seed whose sample keeps the first document of the config's one file."""
    from toktoktok import sampling
    from toktoktok.config import load_config
    from toktoktok.sources import text_bytes

    cfg = load_config(cfg_path)
    phase = cfg.phases[0]
    path = phase.sources[0].path
    share = sampling.share(total=text_bytes(path), capacity=capacity(budget))
    return next(s for s in range(100_000) if sampling.chosen(s, phase.slug, 0, 0, share, salt=sampling.SAMPLE))


def ingest_runs(stream: Stream, path: Path, folder: Path, env: dict[str, str], reps: int) -> Stream:
    """``toktok ingest`` on ``path`` at ``STREAM_BUDGET``, ``reps`` times; logs a line each."""
    cache = Path(env["NUMBA_CACHE_DIR"])
    for i in range(1, reps + 1):
        run_folder = fresh(folder / f"rep{i}")
        cfg = write_config(run_folder, [path], STREAM_BUDGET, 1000, stream.seed)
        before = cache_files(cache)
        measured = run_measured([toktok_bin(), "ingest", "-c", str(cfg), "--force"], run_folder / "log.txt",
                                env=env)
        stream.compiled += cache_files(cache) - before
        found = stage_manifests(run_folder / "toktoktok.work", "ingest")
        manifest = found[0] if found else {}
        stream.runs.append((measured, manifest))
        counts = manifest.get("counts", {})
        status = "ok" if measured.returncode == 0 and manifest else f"FAILED (exit {measured.returncode}, see {measured.log})"
        log(f"  {stream.label}: {measured.wall:.1f} s, ingest peak {num(stage_peak_of(manifest), 0)} MiB "
            f"(ru_maxrss {measured.rss_mb:.0f}, tree {measured.tree_mb:.0f}), kept "
            f"{counts.get('kept_documents', 0):,} / {counts.get('documents', 0):,} documents, "
            f"{counts.get('forced_cuts', 0)} forced cuts, {status}")
    return stream


def run_streams(setup: Setup, huge_mb: int, work: Path, env: dict[str, str], reps: int) -> list[Stream]:
    """The streaming checks: one line against lines, one row group against small ones; each input is
    deleted once its runs are done (and the whole folder at the end)."""
    folder = fresh(work / "streaming")
    size = huge_mb * MIB
    streams = []
    try:
        log(f"streaming: {huge_mb} MiB of prose as one line and as lines (toktok ingest, {STREAM_BUDGET} MiB)")
        one, lines = folder / "one-line.txt", folder / "lines.txt"
        one_bytes, line_bytes = huge_txt(setup.prose, one, size, True), huge_txt(setup.prose, lines, size, False)
        probe = write_config(fresh(folder / "probe"), [one], STREAM_BUDGET, 1000)
        seed = keeping_seed(probe, STREAM_BUDGET)
        for label, path, written in ((f"one line of {huge_mb:,} MiB", one, one_bytes),
                                     ("the same text, line breaks kept", lines, line_bytes)):
            stream = Stream(label, path.stat().st_size, written, seed)
            streams.append(ingest_runs(stream, path, folder / path.stem, env, reps))
            path.unlink()
        log(f"streaming: about {huge_mb} MiB of documents in one parquet row group and in row groups of "
            f"{SMALL_ROW_GROUP_ROWS:,} rows")
        docs = prose_documents(setup.prose)
        for label, name, rows in (("parquet, one row group", "one-group.parquet", None),
                                  (f"parquet, row groups of {SMALL_ROW_GROUP_ROWS:,} rows", "small-groups.parquet",
                                   SMALL_ROW_GROUP_ROWS)):
            path = folder / name
            n, text, groups = huge_parquet(docs, path, size, rows)
            stream = Stream(label, path.stat().st_size, text, 0, n, groups)
            streams.append(ingest_runs(stream, path, folder / path.stem, env, reps))
            path.unlink()
    finally:
        for big in (*folder.glob("*.txt"), *folder.glob("*.parquet")):
            big.unlink()
    return streams


# --- all the runs --------------------------------------------------------------------


@dataclass
class Findings:
    """Every run of one invocation."""

    cold: Run
    warmup: Run
    tiny: list[Run]
    floor: Run
    big: list[Run]
    quarter: Run
    streams: list[Stream] = field(default_factory=list)

    @property
    def overhead(self) -> float:
        """The fixed overhead: the floor's run peak (the corpus at ``FLOOR_BUDGET``)."""
        return self.floor.peak

    @property
    def libraries(self) -> float:
        """The libraries' share: the highest peak of the tiny runs."""
        return max(r.peak for r in self.tiny)

    @property
    def whole(self) -> Run:
        """The largest budget's run: the whole corpus."""
        return self.big[-1]

    def extra(self) -> list[Run]:
        """The quarter sample when it is not one of the budgets' runs."""
        return [] if self.quarter in self.big else [self.quarter]


def run_all(setup: Setup, merges: int, reps: int, work: Path, env: dict[str, str]) -> Findings:
    """The tiny run that compiles, a corpus run that compiles what the tiny one did not reach, the tiny
    runs at each budget, the floor, the budgets largest first, then the quarter sample (unless a budget
    was it); each measured point ``reps`` times, keeping its highest peak."""
    log("numba: the first runs compile into an empty cache")
    cold = train("tiny, first run (numba compiles)", setup.tiny, min(setup.budgets), TINY_MERGES,
                 work / "tiny-cold", env)
    warmup = train("corpus, first run (compiles what the tiny run did not reach)", setup.sources,
                   min(setup.budgets), merges, work / "corpus-warmup", env)
    log("the libraries' share: the tiny corpus at each budget")
    tiny = [repeat("tiny", setup.tiny, b, TINY_MERGES, work / f"tiny-{b}", env, reps) for b in setup.budgets]
    log(f"the fixed overhead: the corpus at working_set_mb {FLOOR_BUDGET}")
    floor = repeat("corpus, floor", setup.sources, FLOOR_BUDGET, merges, work / f"corpus-{FLOOR_BUDGET}", env, reps)
    log(f"budgets on the corpus ({setup.text_bytes / MIB:.1f} MiB of text), {merges} merges")
    big = []
    for budget in sorted(setup.budgets, reverse=True):
        big.append(floor if budget == FLOOR_BUDGET else
                   repeat("corpus", setup.sources, budget, merges, work / f"corpus-{budget}", env, reps))
        score(big[-1], setup.heldout)
    quarter = next((r for r in [*big, floor] if r.budget == setup.quarter), None)
    if quarter is None:
        quarter = repeat("corpus, quarter sample", setup.sources, setup.quarter, merges,
                         work / f"corpus-{setup.quarter}", env, reps)
    if not quarter.bytes_per_token:
        score(quarter, setup.heldout)
    return Findings(cold, warmup, tiny, floor, sorted(big, key=lambda r: r.budget), quarter)


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


def memory_row(run: Run, corpus: str, overhead: float, within: str | None = None) -> list[str]:
    limit = run.budget + overhead
    if within is None:
        within = "–" if not run.ok else ("yes" if not run.over(limit) else "**no**")
    return [corpus, f"{run.budget:,}", num(kept_mib(run)), f"{run.merges:,}", mib(run.measured.rss_mb),
            mib(run.measured.tree_mb), *[mib(run.stage_peak(s)) for s in STAGES], mib(run.peak),
            " / ".join(f"{p:.0f}" for p in run.peaks) or "–", mib(limit), excess(run, limit), within]


OVERHEAD_HEADERS = ["run", "budget MiB", "kept MiB", "ru_maxrss (wait4)", "tree (sampled)", "ingest", "train",
                    "export", "run peak", "run peak, every run"]


def overhead_rows(f: Findings, corpus: str) -> list[list[str]]:
    """The tiny run (libraries alone), the floor (libraries + streaming buffers), and their difference."""
    tiny, floor = max(f.tiny, key=lambda r: r.peak), f.floor

    def row(label: str, run: Run) -> list[str]:
        return [label, f"{run.budget:,}", num(kept_mib(run)), mib(run.measured.rss_mb), mib(run.measured.tree_mb),
                *[mib(run.stage_peak(s)) for s in STAGES], mib(run.peak),
                " / ".join(f"{p:.0f}" for p in run.peaks) or "–"]

    def diff(a: float | None, b: float | None) -> str:
        return "–" if a is None or b is None else f"{a - b:+.0f}"

    return [row("tiny corpus: the libraries alone", tiny),
            row(f"{corpus} at {FLOOR_BUDGET} MiB (floor): libraries + streaming buffers = **the overhead**", floor),
            ["floor − tiny: the streaming buffers", "", "", diff(floor.measured.rss_mb, tiny.measured.rss_mb),
             diff(floor.measured.tree_mb, tiny.measured.tree_mb),
             *[diff(floor.stage_peak(s), tiny.stage_peak(s)) for s in STAGES], diff(floor.peak, tiny.peak), ""]]


WORK_HEADERS = ["corpus", "budget MiB", "kept MiB", "ingest work", "train work", "export work",
                "largest ÷ budget", "largest ÷ kept text"]


def work_row(run: Run, corpus: str, floor: Run) -> list[str]:
    """What each stage holds above the same stage of the floor: the part that grows with the data."""
    work = {s: (run.stage_peak(s) or 0.0) - (floor.stage_peak(s) or 0.0) for s in STAGES}
    largest, kept = max(work.values()), kept_mib(run)
    return [corpus, f"{run.budget:,}", num(kept), *[mib(work[s]) for s in STAGES], num(largest / run.budget, 2),
            num(largest / kept if kept else None, 2)]


SAMPLE_HEADERS = ["corpus", "budget MiB", "text MiB", "capacity MiB", "share", "documents kept / read",
                  "kept MiB", "sampled out", "wall s", "ingest s", "train s", "numba compiled"]


def sample_row(run: Run, corpus: str) -> list[str]:
    counts = run.manifests.get("ingest", {}).get("counts", {})
    text, cap = run.ingest("sample", "text_bytes"), run.ingest("sample", "capacity_bytes")
    train_s = run.manifests.get("train", {}).get("seconds", {}).get("total")
    return [corpus, f"{run.budget:,}", num(text / MIB if text is not None else None),
            num(cap / MIB if cap is not None else None, 1), num(run.ingest("sample", "share"), 3),
            f"{counts.get('kept_documents', 0):,} / {counts.get('documents', 0):,}",
            num(counts["kept_bytes"] / MIB if "kept_bytes" in counts else None),
            f"{counts.get('sampled_out_documents', 0):,}", num(run.measured.wall),
            num(run.manifests.get("ingest", {}).get("seconds", {}).get("total")), num(train_s, 2),
            f"yes ({run.compiled} files)" if run.compiled else "no"]


def compression_row(run: Run, domains: list[str]) -> list[str]:
    share = run.ingest("sample", "share")
    return [f"{run.budget:,}", num(share, 3), num(kept_mib(run)),
            *[num(run.bytes_per_token.get(d), 3) for d in [*domains, "overall"]]]


def representativeness(f: Findings, domains: list[str]) -> tuple[list[list[str]], bool | None]:
    """Rows comparing the quarter sample with the whole corpus, and whether overall is within 1%."""
    whole, quarter = f.whole, f.quarter
    if quarter is whole or not whole.bytes_per_token or not quarter.bytes_per_token:
        return [], None
    rows, verdict = [], None
    for d in [*domains, "overall"]:
        w, q = whole.bytes_per_token[d], quarter.bytes_per_token[d]
        diff = (q - w) / w
        within = abs(diff) <= REPRESENTATIVE
        verdict = within if d == "overall" else verdict
        rows.append([d, f"{w:.3f}", f"{q:.3f}", f"{100 * diff:+.2f}%", "yes" if within else "**no**"])
    return rows, verdict


def whole_is_whole(f: Findings) -> bool:
    """Whether the largest budget kept every document (share 1.0, nothing sampled out)."""
    return (f.whole.ingest("sample", "share") == 1.0
            and f.whole.manifests.get("ingest", {}).get("counts", {}).get("sampled_out_documents", 1) == 0)


def quarter_words(f: Findings, setup: Setup) -> str:
    q = f.quarter
    kept = kept_mib(q)
    return (f"budget {q.budget:,} MiB (= round({setup.text_bytes / MIB:.1f} MiB of text / 4 / "
            f"TEXT_PER_BUDGET_BYTE {TEXT_PER_BUDGET_BYTE:g})), share {num(q.ingest('sample', 'share'), 3)}, kept "
            f"{num(kept)} MiB ({num(100 * kept * MIB / setup.text_bytes if kept is not None else None)}% of the text)")


def whole_words(f: Findings) -> str:
    w = f.whole
    cap, text = w.ingest("sample", "capacity_bytes") or 0, w.ingest("sample", "text_bytes") or 0
    return (f"budget {w.budget:,} MiB (capacity {cap / MIB:.0f} MiB for {text / MIB:.1f} MiB of text), share "
            f"{num(w.ingest('sample', 'share'), 3)}, kept {num(kept_mib(w))} MiB: the whole corpus, no sampling: "
            + ("yes" if whole_is_whole(f) else "**no**"))


def verdicts(f: Findings, setup: Setup, rep: bool | None) -> list[str]:
    """The summary: the overhead, each budget's verdict, representativeness, streaming."""
    from toktoktok.memory import FIXED_OVERHEAD_MB

    o, lib = f.overhead, f.libraries
    lines = [f"- **fixed overhead: {o:.1f} MiB** = the peak of the corpus run at working_set_mb {FLOOR_BUDGET} "
             f"(the floor: the libraries and the streaming buffers). The libraries alone (tiny corpus): "
             f"{lib:.1f} MiB; the streaming buffers add {o - lib:.0f} MiB. toktoktok/memory.py says "
             f"FIXED_OVERHEAD_MB = {FIXED_OVERHEAD_MB}"
             + (f" (**{o - FIXED_OVERHEAD_MB:.0f} MiB below the measured overhead**)" if o > FIXED_OVERHEAD_MB else "")
             + f". A first run, which compiles the numba code, is not covered: the tiny one peaked at "
             f"{f.cold.peak:.0f} MiB (Notes)"]
    for run in f.big:
        if run is f.floor:
            continue
        limit = run.budget + o
        verdict = "yes" if run.ok and not run.over(limit) else "**no**"
        lines.append(f"- budget {run.budget:,} MiB, whole corpus: peak {run.peak:.0f} MiB, limit "
                     f"{limit:.0f} MiB (budget + overhead): within: {verdict}"
                     + ("" if verdict == "yes" else f" (over by: {excess(run, limit)})"))
    for run in f.extra():
        limit = run.budget + o
        verdict = "yes" if run.ok and not run.over(limit) else "**no**"
        lines.append(f"- budget {run.budget:,} MiB (the quarter sample): peak {run.peak:.0f} MiB, limit "
                     f"{limit:.0f} MiB: within: {verdict}"
                     + ("" if verdict == "yes" else f" (over by: {excess(run, limit)})"))
    if rep is not None:
        d = (f.quarter.bytes_per_token["overall"] / f.whole.bytes_per_token["overall"] - 1) * 100
        lines.append(f"- quarter sample, {quarter_words(f, setup)}, against the largest budget, {whole_words(f)}: "
                     f"held-out bytes/token {d:+.2f}% overall: within 1%: {'yes' if rep else '**no**'}")
    for whole, parts, what in stream_pairs(f):
        lines.append(f"- streaming: {what}: ingest peak {whole.peak:.0f} MiB against {parts.peak:.0f} MiB in "
                     f"parts: {whole.peak - parts.peak:+.0f} MiB for {whole.text_bytes / MIB:,.0f} MiB of text "
                     f"({whole.kept_mib():,.0f} MiB kept, {whole.forced_cuts()} forced cuts); within "
                     f"{STREAM_BUDGET} MiB + overhead: " + ("yes" if whole.all_peaks() <= STREAM_BUDGET + o
                                                             else "**no**"))
    return lines


def working_tree() -> str:
    """The tracked files changed since the commit, if any (other work may share the checkout)."""
    changed = bench_report.git("status", "--porcelain", "--untracked-files=no")
    files = [line.split(maxsplit=1)[1] for line in (changed or "").splitlines() if line.strip()]
    return f"; changed in the working tree at the start: {', '.join(files)}" if files else ""


# --- the streaming report ----------------------------------------------------------


def stream_pairs(f: Findings) -> list[tuple[Stream, Stream, str]]:
    """(whole, in parts, what) for each streaming check that ran."""
    s = f.streams
    pairs = []
    if len(s) >= 2:
        pairs.append((s[0], s[1], f"one line of {s[0].text_bytes / MIB:,.0f} MiB of prose vs the same text with "
                                  "its line breaks"))
    if len(s) >= 4:
        pairs.append((s[2], s[3], f"one parquet row group of {s[2].text_bytes / MIB:,.0f} MiB of text vs row "
                                  f"groups of {SMALL_ROW_GROUP_ROWS:,} rows"))
    return pairs


STREAM_HEADERS = ["input", "file MiB", "text MiB", "rows / row groups", "seed", "documents kept / read",
                  "share (sample)", "kept MiB", "kept ÷ text", "forced cuts", "ingest s",
                  "ingest peak (manifest)", "run peak, every run", "ru_maxrss (wait4)", "tree (sampled)",
                  "budget + overhead", "within"]


def stream_row(stream: Stream, overhead: float) -> list[str]:
    measured, manifest = stream.worst
    counts = manifest.get("counts", {})
    kept = counts.get("kept_bytes")
    limit = STREAM_BUDGET + overhead
    within = "–" if not stream.ok else ("yes" if stream.all_peaks() <= limit else "**no**")
    return [stream.label, f"{stream.file_bytes / MIB:,.1f}", f"{stream.text_bytes / MIB:,.1f}",
            "–" if stream.rows is None else f"{stream.rows:,} / {stream.row_groups:,}", str(stream.seed),
            f"{counts.get('kept_documents', 0):,} / {counts.get('documents', 0):,}",
            num(manifest.get("sample", {}).get("share"), 3), num(kept / MIB if kept is not None else None),
            num(kept / stream.text_bytes if kept is not None and stream.text_bytes else None, 3),
            f"{counts.get('forced_cuts', 0):,}", num(manifest.get("seconds", {}).get("total")), mib(stage_peak_of(manifest)),
            " / ".join(f"{p:.0f}" for p in stream.peaks), mib(measured.rss_mb), mib(measured.tree_mb), mib(limit),
            within]


def stream_section(f: Findings, huge_mb: int) -> list[str]:
    if not f.streams:
        return []
    o = f.overhead
    pair_rows = [[what, f"{whole.peak:.0f}", f"{parts.peak:.0f}", f"{whole.peak - parts.peak:+.0f}",
                  f"{whole.text_bytes / MIB:,.0f}", f"{whole.kept_mib():,.0f} / {parts.kept_mib():,.0f}"]
                 for whole, parts, what in stream_pairs(f)]
    compiled = sum(s.compiled for s in f.streams)
    return [
        "## Streaming: one huge line, one huge row group", "",
        f"`toktok ingest` alone, `working_set_mb: {STREAM_BUDGET}`, `heldout_share: 0`, each input "
        f"{len(f.streams[0].runs)} time(s) (the row is the run with the highest peak from outside). The text inputs: "
        f"english prose repeated to {huge_mb:,} MiB, once with every line break replaced by a space (one line, "
        "hence one document, which pre-tokenization may cut only at docs/pretokenization.md's safe places, here the spaces) and "
        "once as it is. The sample keeps or drops a document whole: the config's `seed` was chosen so that the "
        "one-line document is kept (the line-broken file uses the same seed and keeps about the sample's share). "
        f"The parquet inputs: the english documents repeated to about {huge_mb:,} MiB of text in one row group, "
        f"and the same rows in row groups of {SMALL_ROW_GROUP_ROWS:,} rows (zstd, no dictionary; both sampled "
        f"alike, seed 0). ingest peak = the ingest manifest's `peak_rss_mb`; within = every peak (manifest, "
        f"ru_maxrss, tree) at most {STREAM_BUDGET} MiB + the overhead ({o:.0f} MiB). The generated files were "
        "deleted after their runs." + (f" These runs compiled numba code ({compiled} cache files)." if compiled
                                       else ""), "",
        md_table(STREAM_HEADERS, [stream_row(s, o) for s in f.streams]), "",
        md_table(["check", "ingest peak, whole", "ingest peak, in parts", "difference MiB", "text MiB",
                  "kept MiB, whole / in parts"], pair_rows), "",
    ]


def stream_notes(f: Findings) -> list[str]:
    """What the streaming runs' manifests say beyond their peaks."""
    s, out = f.streams, []
    if len(s) >= 2:
        one, lines = s[0], s[1]
        out.append(f"- Streaming, text: the one-line document was kept whole ({one.kept_mib():,.0f} MiB counted, "
                   f"{one.counts().get('chunks', 0)} count-table chunks written, "
                   f"{one.counts().get('pieces', 0):,} pieces) while the line-broken file kept "
                   f"{lines.kept_mib():,.0f} MiB ({lines.counts().get('chunks', 0)} chunk(s)): the "
                   f"{one.peak - lines.peak:+.0f} MiB between them is the line and counting "
                   f"{one.kept_mib() / max(lines.kept_mib(), 1e-9):.0f}× as much text together.")
    if len(s) >= 4:
        out.append(f"- Streaming, parquet against text: with about the same text kept ({s[2].kept_mib():,.0f} and "
                   f"{s[3].kept_mib():,.0f} MiB against {s[1].kept_mib():,.0f} MiB), reading "
                   f"{s[2].text_bytes / MIB:,.0f} MiB of text from parquet peaks at {s[2].peak:.0f} (one row group) "
                   f"and {s[3].peak:.0f} MiB (row groups of {SMALL_ROW_GROUP_ROWS:,} rows), against "
                   f"{s[1].peak:.0f} MiB from the .txt: the row group's size "
                   + ("does not explain it" if abs(s[2].peak - s[3].peak) < 32 else "matters")
                   + "; the parquet reading itself costs the difference.")
    return out


def report(f: Findings, setup: Setup, args: argparse.Namespace, facts: dict[str, str]) -> str:
    """MEMORY.md."""
    command = " ".join(["benchmarks/run.py", *sys.argv[1:]])
    domains = list(setup.heldout)
    corpus = "demo corpus" if setup.demo else "shared corpora (4 files)"
    rep_rows, rep = representativeness(f, domains)
    o, lib = f.overhead, f.libraries
    budgets = [r for r in f.big if r is not f.floor]
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
        "`hardcoded_merges: false`, `heldout_share: 0`, `seed: 0`, default pattern; runs one after another; "
        f"a phase keeps at most `working_set_mb` × {TEXT_PER_BUDGET_BYTE:g} of text "
        "(`toktoktok.sampling.TEXT_PER_BUDGET_BYTE`)",
        *[f"- {note}" for note in setup.notes], "",
        "## The fixed overhead", "",
        f"By the project's definition the fixed overhead is the peak of a run at `working_set_mb: {FLOOR_BUDGET}` "
        f"on the same corpus (it keeps {num(kept_mib(f.floor))} MiB of text): everything a run holds that does "
        "not grow with the budget or the corpus size: the interpreter and its libraries (numpy, pyarrow, regex, "
        "zstandard), numba's JIT and its compiled kernels, the Unicode tables, and the streaming buffers every "
        "real run fills (read blocks, the batches in flight per thread, parquet pages, allocator pools). "
        f"**Overhead = {o:.1f} MiB** (the highest peak of the floor's {len(f.floor.peaks)} runs: process, tree "
        f"and every stage). The tiny corpus (about 200 KB) fills no streaming buffer to speak of: its "
        f"{lib:.1f} MiB are the libraries alone, reported for information; the difference, {o - lib:.0f} MiB, is "
        "what streaming real files costs.", "",
        md_table(OVERHEAD_HEADERS, overhead_rows(f, corpus)), "",
        "## Peak RSS against budget + overhead", "",
        "MiB throughout. ru_maxrss = `ru_maxrss` of `toktok run` from `os.wait4` (the largest single process; "
        "it sees only the last stage, see Notes); tree = the largest sum of resident sets of the process and its "
        "workers, sampled every 50 ms; ingest / train / export = each stage's own `peak_rss_mb` from its "
        "manifest (the stage's own account); run peak = the larger of ru_maxrss and tree, measured from outside. "
        f"Overhead = {o:.1f} MiB (the floor). Each point ran {args.reps} time(s); its row is the run with the "
        "highest peak (every run's in its own column). within = every one of these peaks is at most budget + "
        "overhead. The first two rows fill numba's empty cache (compiling) and are not judged by the summary; "
        "the tiny rows are the libraries alone; the floor row defines the overhead.", "",
        md_table(MEMORY_HEADERS, [memory_row(f.cold, "tiny, first run (numba compiles)", o),
                                  memory_row(f.warmup, corpus + ", first run", o)]
                 + [memory_row(r, "tiny", o) for r in f.tiny]
                 + [memory_row(f.floor, corpus + ", floor", o, "(the overhead)")]
                 + [memory_row(r, corpus, o) for r in budgets]
                 + [memory_row(r, corpus + ", quarter sample", o) for r in f.extra()]),
        "",
        "## What grows with the data", "",
        "Each stage's peak minus the same stage's peak in the floor run (the corpus at "
        f"{FLOOR_BUDGET} MiB: ingest {mib(f.floor.stage_peak('ingest'))}, train {mib(f.floor.stage_peak('train'))}, "
        f"export {mib(f.floor.stage_peak('export'))} MiB): what the stage holds for the text it kept, as against "
        "what it holds anyway. (A run is judged against budget + the floor's run peak, which is above some of the "
        "floor's stage peaks, so a stage's work here may exceed the budget by that gap and still be within.)", "",
        md_table(WORK_HEADERS, [work_row(r, corpus, f.floor) for r in budgets]
                 + [work_row(r, corpus + ", quarter sample", f.floor) for r in f.extra()]),
        "",
        "## What each run read and kept", "",
        "From the ingest manifest (`sample`, `counts`): capacity = the text the budget buys (working_set_mb × "
        f"{TEXT_PER_BUDGET_BYTE:g}); share = the chance each document is kept; numba compiled = whether the run "
        "(any of its repetitions) added files to the numba cache (only the first runs should).", "",
        md_table(SAMPLE_HEADERS, [sample_row(f.cold, "tiny, first run"), sample_row(f.warmup, corpus + ", first run")]
                 + [sample_row(r, "tiny") for r in f.tiny]
                 + [sample_row(f.floor, corpus + ", floor")]
                 + [sample_row(r, corpus) for r in budgets]
                 + [sample_row(r, "quarter sample") for r in f.extra()]),
        "",
        "## Held-out compression (UTF-8 bytes per token, higher is better)", "",
        md_table(["budget MiB", "share", "kept MiB", *domains, "overall"],
                 [compression_row(r, domains) for r in sorted([*budgets, *f.extra()], key=lambda r: r.budget)]),
        "",
    ]
    if rep_rows:
        lines += ["## Representativeness: a quarter sample against the whole corpus", "",
                  f"The quarter sample: {quarter_words(f, setup)}"
                  + (", the same run as its budget's row above" if f.quarter in f.big else "")
                  + f". The whole corpus: {whole_words(f)}. Target: held-out bytes per token within 1%.", "",
                  md_table(["held-out", "whole corpus", "quarter sample", "difference", "within 1%"], rep_rows), ""]
    lines += stream_section(f, args.huge_mb)
    lines += ["## Notes", "", *notes(f, setup), "",
              f"All figures above were measured in this run ({facts['date']}) by benchmarks/run.py --section memory.", ""]
    return "\n".join(lines)


def notes(f: Findings, setup: Setup) -> list[str]:
    """Short remarks computed from the runs: the overhead's spread, the worst stage, the compile runs."""
    o = f.overhead
    spread = [r.peak for r in f.tiny]
    out = [f"- The tiny runs (libraries alone) peak at {min(spread):.0f}–{max(spread):.0f} MiB whatever the budget "
           f"({', '.join(f'{r.budget}: {r.peak:.0f}' for r in f.tiny)}): they "
           + ("do not depend on the budget." if max(spread) - min(spread) < 16 else "grow with the budget."),
           f"- The floor ({FLOOR_BUDGET} MiB) against the tiny corpus, stage by stage: "
           + ", ".join(f"{s} {num(f.floor.stage_peak(s), 0)} vs {num(max(f.tiny, key=lambda r: r.peak).stage_peak(s), 0)}"
                       for s in STAGES)
           + " MiB (each stage's peak starts from what the process already holds when the stage begins)."]
    budgets = [r for r in f.big if r is not f.floor]
    worst = [(r, s, (r.stage_peak(s) or 0) - r.budget - o) for r in [*budgets, *f.extra()] for s in STAGES]
    if worst:
        run, stage, by = max(worst, key=lambda t: t[2])
        out.append(f"- Largest stage peak against its limit: {stage} at budget {run.budget:,} MiB, "
                   f"{run.stage_peak(stage):.0f} MiB ({by:+.0f} MiB against budget + overhead).")
    compiled = [r for r in [*f.tiny, f.floor, *budgets, *f.extra()] if r.compiled]
    if compiled:
        out.append("- These measured runs still compiled numba code (their peak includes LLVM): "
                   + ", ".join(f"{r.label} at {r.budget} MiB" for r in compiled) + ".")
    out.append("- The run peak is the larger of `ru_maxrss` from `os.wait4` (the kernel's high-water mark of the "
               "process, which toktoktok never resets) and the sampled tree of its processes; the stages' own "
               "peaks are shown beside it.")
    out += stream_notes(f)
    w = f.warmup
    measured = [f.floor, *budgets, *f.extra()]
    widest = max(measured, key=lambda r: max(r.peaks) - min(r.peaks))
    out.append(f"- Run to run, the same configuration's peak varies (threads' timing): by up to "
               f"{max(widest.peaks) - min(widest.peaks):.0f} MiB at {widest.budget:,} MiB "
               f"({' / '.join(f'{p:.0f}' for p in widest.peaks)}); the tables show each point's highest. "
               "Repetitions wrote identical vocabularies: "
               + ("yes." if all(r.identical for r in [*f.tiny, *measured]) else "**no**."))
    also = (f" and the corpus at {w.budget} MiB, which compiled {w.compiled} more, at {w.peak:.0f} MiB "
            f"({w.peak - w.budget - o:+.0f} MiB against budget + overhead)") if w.compiled else ""
    out.append(f"- Compiling costs memory: with an empty numba cache the tiny run ({f.cold.compiled} cache files "
               f"written) peaks at {f.cold.peak:.0f} MiB ({f.cold.peak - o:+.0f} MiB against the overhead){also}. "
               "numba caches the code beside the package, so an install pays this once, on its first run.")
    return out


# --- command line ----------------------------------------------------------------


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="run.py --section memory",
                                     description="Peak RSS of toktok run against working_set_mb, and sampling.")
    parser.add_argument("--merges", type=int, default=8000, help="merges of the corpus runs (default 8000)")
    parser.add_argument("--budgets", default=",".join(map(str, BUDGETS)),
                        help="comma-separated working_set_mb values in MiB (default 64,256,1024)")
    parser.add_argument("--reps", type=int, default=3,
                        help="runs of each measured point; the highest peak is reported (default 3)")
    parser.add_argument("--huge-mb", type=int, default=None,
                        help=f"MiB of text of each streaming check's input, 0 to skip them (default {HUGE_MB}; "
                             f"{DEMO_HUGE_MB} with the demo corpus)")
    parser.add_argument("--out", type=Path, default=HERE / ".work" / "memory",
                        help="work folder, emptied first (default benchmarks/.work/memory, ignored by git)")
    parser.add_argument("--report", type=Path, default=HERE / "results" / "MEMORY.md", help="the Markdown report")
    parser.add_argument("--demo", action="store_true", help="use the demo corpus even if the shared corpora exist")
    args = parser.parse_args(argv)
    args.budgets = sorted({int(b) for b in args.budgets.split(",") if b.strip()})
    if args.merges < 1 or args.reps < 1 or not args.budgets or args.budgets[0] < 1:
        parser.error("--merges, --reps and every budget must be >= 1")
    if args.huge_mb is not None and args.huge_mb < 0:
        parser.error("--huge-mb must be >= 0")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    facts = {"date": bench_report.now(), "machine": bench_report.machine(), "commit": bench_report.commit(),
             "tree": working_tree(),
             "load": " / ".join(f"{x:.2f}" for x in os.getloadavg())}
    shutil.rmtree(args.out, ignore_errors=True)
    args.out.mkdir(parents=True)
    demo = args.demo or not SHARED_CORPORA.is_dir()
    if args.huge_mb is None:
        args.huge_mb = DEMO_HUGE_MB if demo else HUGE_MB
    log(f"preparing the corpus in {args.out}" + (" (demo corpus)" if demo else ""))
    setup = (demo_setup if demo else shared_setup)(args.out, args.budgets)
    hold_whole(setup)
    env = run_env(args.out / "numba-cache")  # empty: the first tiny run compiles
    findings = run_all(setup, args.merges, args.reps, args.out, env)
    if args.huge_mb:
        findings.streams = run_streams(setup, args.huge_mb, args.out, env, args.reps)
    text = bench_report.portable(report(findings, setup, args, facts), args)
    args.report.parent.mkdir(parents=True, exist_ok=True)
    args.report.write_text(text, encoding="utf-8")
    print(text)
    log(f"wrote {args.report}")
