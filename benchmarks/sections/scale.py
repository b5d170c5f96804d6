"""Scale: toktoktok, rustbpe and Hugging Face on 0.1, 0.3 and 1.2 GB of the Linux kernel's source, prose, and 5 GB.

    make bench-scale          # = .venv/bin/python benchmarks/run.py --section scale
    .venv/bin/python benchmarks/run.py --section scale --reps 1 --skip hf@full --out /tmp/SCALE.md
    .venv/bin/python benchmarks/run.py --section scale --sizes prose --prose FOLDER --out /tmp/SCALE.md

The corpora (``scale_corpus.py``, built under ``--data`` when absent): every
UTF-8 source and doc file of Debian's ``linux-source-6.1``, one file a
document, every 20th file held out; the training text at about 0.1 GB,
0.3 GB and all of it (1.2 GB), each a prefix of the next (the sizes
``0.1GB``, ``0.3GB``, ``full``). The size ``prose``: the largest real prose
here, the shared corpora's English text (``english.txt.zst``, 100 MB of
documentation and manuals, in ``--prose``, by default
``<project root>/../shared/corpora``), decompressed once into
``--data``/prose; its held-out text is the corpora's own split
(``english.heldout.txt.zst``). Without it the prose point is skipped, and the
report says so. The size ``5GB``: the next order of size, more text than one
package holds, from several Debian packages (``big_corpus.py``: two Linux
releases, two of GCC, OpenJDK, Rust, Go, the HTML manuals of several projects,
files of the same text taken once), with its own held-out files; there
Hugging Face is not run, and toktoktok runs once more with
``working_set_mb: 4096`` (``toktoktok-sampled``), whose held-out bytes/token
is compared with the run on all the text.

For each point (a ``--sizes`` name, a ``Point``), the trainers one after
another on the same ``.txt``, ``--reps`` times (trainers interleaved within a
repetition; not Ray at prose: ``--ray-sizes`` are kernel sizes), each a whole process measured
from outside (``benchkit.measure``: wall, CPU of the process tree, true peak
RSS = the larger of ``ru_maxrss`` and the sampled sum over the process tree
and every process carrying the run's token):

- ``toktoktok``: ``toktok run -c CFG --force`` in a fresh folder, ``--tokens``
  (default 65,536 = 256 bytes + 65,280 merges), ``hardcoded_merges: false``,
  ``heldout_share: 0``, ``min_frequency: 2``, the default pattern,
  ``working_set_mb`` large enough to keep all text (no sampling); its stage
  times come from its manifests;
- ``rustbpe``, ``hf``: rustbpe and Hugging Face ``tokenizers`` through
  ``peer_trainers.py --feed chunks`` (1 MiB chunks cut at a line end, as a
  user hands a big file to ``train_from_iterator``): the reference of the
  targets (``TARGET_WALL`` and the others);
- ``rustbpe-docs``: rustbpe fed the documents (``--feed documents``):
  rustbpe pulls 8,192 strings at a time, so 1 MiB strings make it hold up
  to the whole text, documents far less; both rows show what each feed costs;
- ``ray``: toktoktok with ``engine: ray`` on a local Ray instance of 2 CPUs
  that toktok starts and stops itself (``ray: {num_cpus: 2}``). By default
  only at the largest size run (``--ray-sizes``). Its ``.tiktoken`` is
  compared byte for byte (sha256) with the local engine's at the same size,
  and the reduce step's cost per row is timed on its inventory
  (``benchkit.reduce_cost``) for the cost model of 1 TB on 64 machines.

At the largest kernel size, after its trainers: the merge loop alone on 1
and on 2 threads (``merge_threads.measure``, ``--thread-reps`` fresh
processes each, on the inventory toktoktok's first run there ingested), its
ratios against the thread targets, and a projection of the loop to 8, 32 and
64 cores by Amdahl's law through the two medians.

Then each trained ``.tiktoken`` encodes its point's held-out file
(``heldout.txt``, the same for every kernel size; the English held-out text
for prose): UTF-8 bytes per token. Before the trainers: numba's
cache is filled by a warm-up run on a tiny corpus (the first 1 MB), a second
run on it is measured as toktoktok's fixed part, and the ``scanner`` section
measures the scanner's single-thread MB/s on the first ``--scanner-mb`` MB of
the smallest training text (the prose text when no kernel size runs): the
limit ingest works against.

How each cost grows: the exponent ``k`` of a least-squares fit
``cost ∝ bytes^k`` over the kernel sizes run (``benchkit.measure.exponent``);
prose, another kind of text, is left out of it and of the cost model.
The targets (``TARGET_WALL`` ... ``TARGET_BPT``) are checked at the largest
kernel size run (``targets``), from this run's figures only.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import math
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from benchkit import report as bench_report
from benchkit.corpus import DOC_BOUNDARY, SHARED_CORPORA, Corpus
from benchkit.measure import Measured, exponent, median_of
from benchkit.report import md_table, num
from benchkit.toktok import run_env, run_once, toktok_stages

from sections import big_corpus, merge_threads, scale_corpus
from sections.peers import read_ranks
from toktoktok.merge import PARALLEL_NODES

HERE = Path(__file__).resolve().parents[1]  # benchmarks/
KERNEL_SIZES = ("0.1GB", "0.3GB", "full")
PROSE = "prose"
BIG = "5GB"  # the next size: several packages' text (big_corpus)
SIZES = (*KERNEL_SIZES, PROSE, BIG)
SAMPLED_MB = 4096  # the working set of the sampled run at BIG
TRAINERS = ("toktoktok", "toktoktok-sampled", "ray", "rustbpe", "rustbpe-docs", "hf")
LABELS = {"toktoktok": "toktoktok", "toktoktok-sampled": f"toktoktok (`working_set_mb: {SAMPLED_MB}`)",
          "ray": "toktoktok (Ray)", "hf": "HF tokenizers (chunks)",
          "rustbpe": "rustbpe (chunks)", "rustbpe-docs": "rustbpe (documents)"}
# the trainer's name for benchkit.toktok.command: peers fed 1 MiB chunks unless said
COMMANDS = {"toktoktok": "toktoktok", "toktoktok-sampled": f"toktoktok:ws={SAMPLED_MB}", "ray": "ray",
            "rustbpe": "rustbpe:chunks", "hf": "hf:chunks", "rustbpe-docs": "rustbpe"}
ONLY_AT = {"toktoktok-sampled": (BIG,)}  # trainers run at these sizes only
NOT_AT = {"hf": (BIG,)}  # Hugging Face left out above 1.2 GB: hours at 5 GB, and no target is measured on it
TINY_BYTES = 1_000_000
SHAPES_HEADING = "## shapes"  # the shapes section's part of the same report, kept when this one rewrites it
MB = 1_000_000


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


@dataclass
class Cell:
    """Every run of one trainer at one size, and what its vocabulary achieves."""

    trainer: str
    size: str
    runs: list[Measured] = field(default_factory=list)
    out: Path | None = None
    stages: list[dict[str, float]] = field(default_factory=list)
    bytes_per_token: float | None = None
    digests: list[str] = field(default_factory=list)  # sha256 of every run's .tiktoken
    reduce: dict | None = None  # benchkit.reduce_cost on the (Ray) run's inventory

    @property
    def ok(self) -> list[Measured]:
        return [r for r in self.runs if r.returncode == 0]

    def med(self, attr: str) -> float | None:
        return median_of([getattr(r, attr) for r in self.ok])

    def stage(self, key: str) -> float | None:
        return median_of([s[key] for s in self.stages if key in s])


@dataclass(frozen=True)
class Point:
    """One point of the benchmark (a ``--sizes`` name): the text every trainer reads, the held-out
    text its vocabularies encode, and how the tables name it."""

    size: str
    train: Path
    nbytes: int
    heldout: Path
    label: str


def kernel_points(manifest: dict, folder: Path) -> dict[str, Point]:
    """The kernel's sizes, from ``scale_corpus.ensure``'s manifest; one held-out file for all."""
    return {s: Point(s, folder / f"train-{s}.txt", manifest["train"][s]["bytes"], folder / "heldout.txt",
                     f"{manifest['train'][s]['bytes'] / MB:,.0f} MB") for s in KERNEL_SIZES}


def prose_point(manifest: dict, folder: Path) -> Point:
    """The prose point, from ``scale_corpus.ensure_prose``'s manifest: its own held-out file.

        >>> prose_point({"train": {"bytes": 99_812_345}}, Path("p")).label
        '100 MB prose'
    """
    nbytes = manifest["train"]["bytes"]
    return Point(PROSE, folder / "train.txt", nbytes, folder / "heldout.txt", f"{nbytes / MB:,.0f} MB prose")


def corpus_of(point: Point) -> Corpus:
    """What ``benchkit.toktok.run_once`` trains on (its held-out text is encoded apart: ``heldout_of``)."""
    return Corpus(point.size, point.train, "", f"{point.size}: {point.nbytes / MB:,.1f} MB", point.nbytes, 0)


def tiny_corpus(source: Path, folder: Path) -> Path:
    """The first ``TINY_BYTES`` of ``source``, cut at a document boundary."""
    with source.open("rb") as fh:
        data = fh.read(TINY_BYTES)
    cut = data.rfind(b"\n\n")
    path = folder / "tiny.txt"
    path.write_bytes(data[: cut + 2] if cut > 0 else data)
    return path


def heldout_chunks(text: str, chunk_chars: int = 1 << 20) -> list[str]:
    """``text`` cut at document boundaries (``DOC_BOUNDARY``) into parts of about ``chunk_chars``.

    The boundary is a safe place of the default pattern (its pieces never
    cross it), so encoding the parts gives the tokens of the whole:

        >>> heldout_chunks("a\\n\\nb\\n\\nc", 3)
        ['a\\n\\n', 'b\\n\\n', 'c']
    """
    parts, start = [], 0
    for m in DOC_BOUNDARY.finditer(text):
        if m.end() - start >= chunk_chars:
            parts.append(text[start:m.end()])
            start = m.end()
    parts.append(text[start:])
    return [p for p in parts if p]


@functools.cache
def heldout_of(path: Path) -> list[str]:
    """The held-out file ``path`` in parts (``heldout_chunks``), read once however many points share it."""
    return heldout_chunks(path.read_text(encoding="utf-8"))


def bytes_per_token(tiktoken_path: Path, chunks: list[str], pattern: str) -> float:
    """UTF-8 bytes per token of the held-out chunks, encoded with the ranks in ``tiktoken_path``."""
    import tiktoken

    enc = tiktoken.Encoding(name=f"scale-{tiktoken_path.stem}", pat_str=pattern,
                            mergeable_ranks=read_ranks(tiktoken_path), special_tokens={})
    tokens = sum(len(t) for t in enc.encode_ordinary_batch(chunks, num_threads=os.cpu_count() or 1))
    return sum(len(c.encode("utf-8")) for c in chunks) / max(1, tokens)


def scanner_rates(text_file: Path, mb: int, folder: Path) -> dict[str, float]:
    """The ``scanner`` section's single-thread MB/s on the first ``mb`` MB of ``text_file``, as a process of its own."""
    out = folder / "scanner.json"
    cmd = [sys.executable, str(HERE / "run.py"), "--section", "scanner", "--file", str(text_file), "--mb", str(mb),
           "--repeat", "3", "--json", str(out)]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return json.loads(out.read_text())


# --- the report ----------------------------------------------------------------


def ratio(a: float | None, b: float | None) -> str:
    return f"{a / b:.2f}×" if a is not None and b else "–"


TRAINER_HEADERS = ["size", "trainer", "wall s", "CPU s", "true peak RSS MB", "ru_maxrss MB", "tree peak MB",
                   "held-out bytes/token", "wall ÷ rustbpe (chunks)", "CPU ÷ rustbpe (chunks)",
                   "peak ÷ rustbpe (chunks)", "peak ÷ rustbpe (documents)"]


def trainer_rows(cells: dict[tuple[str, str], Cell], sizes: list[str], labels: dict[str, str]) -> list[list[str]]:
    rows = []
    for size in sizes:
        base, docs = cells.get(("rustbpe", size)), cells.get(("rustbpe-docs", size))
        for trainer in TRAINERS:
            c = cells.get((trainer, size))
            if c is None:
                continue
            failed = len(c.runs) - len(c.ok)
            label = LABELS[trainer] + (f" ({failed} of {len(c.runs)} failed)" if failed else "")
            rows.append([labels[size], label, num(c.med("wall")), num(c.med("all_cpu")),
                         num(c.med("peak_mb"), 0), num(c.med("rss_mb"), 0), num(c.med("tree_mb"), 0),
                         num(c.bytes_per_token, 4), ratio(c.med("wall"), base and base.med("wall")),
                         ratio(c.med("all_cpu"), base and base.med("all_cpu")),
                         ratio(c.med("peak_mb"), base and base.med("peak_mb")),
                         ratio(c.med("peak_mb"), docs and docs.med("peak_mb"))])
    return rows


def loop_seconds(c: Cell) -> float | None:
    """The merge loop proper: the first 1,000 merges and the rest (``train_split_seconds``)."""
    early, later = c.stage("split_early_merges"), c.stage("split_later_merges")
    return early + later if early is not None and later is not None else None


def per_second(count: float | None, seconds: float | None) -> float | None:
    return count / seconds if count is not None and seconds else None


def ingest_rate(c: Cell) -> float | None:
    """Ingest MB/s: bytes read ÷ the ingest stage's ``seconds.total``."""
    ingest, nbytes = c.stage("ingest"), c.stage("ingest_bytes")
    return nbytes / MB / ingest if ingest and nbytes else None


STAGE_HEADERS = ["size", "documents", "distinct pieces", "ingest s", "ingest MB/s", "train stage s", "load s",
                 "segment s", "pairs s", "first 1,000 merges s", "later merges s", "check s", "merges",
                 "merges/s, loop proper", "merges/s, train_phase (seconds.train)", "export s", "rest of process s",
                 "process wall s", "stage peaks (manifests) MB"]


def stage_rows(cells: dict[tuple[str, str], Cell], sizes: list[str], labels: dict[str, str],
               trainer: str = "toktoktok") -> list[list[str]]:
    rows = []
    for size in sizes:
        c = cells.get((trainer, size))
        if c is None or not c.stages:
            continue
        parts = [c.stage("ingest"), c.stage("train"), c.stage("export")]
        wall = c.med("wall")
        rest = wall - sum(parts) if wall is not None and None not in parts else None  # type: ignore[arg-type]
        rows.append([labels[size], num(c.stage("documents"), 0), num(c.stage("distinct_pieces"), 0),
                     num(c.stage("ingest"), 2), num(ingest_rate(c), 0), num(c.stage("train"), 2),
                     num(c.stage("train_load"), 2),
                     *(num(c.stage(f"split_{k}"), 2) for k in ("segment", "pairs", "early_merges", "later_merges",
                                                               "check")),
                     num(c.stage("merges"), 0), num(per_second(c.stage("merges"), loop_seconds(c)), 0),
                     num(per_second(c.stage("merges"), c.stage("merge_loop")), 0), num(c.stage("export"), 2),
                     num(rest, 2), num(wall, 2), num(c.stage("peak_rss_mb"), 0)])
    return rows


GROWTH = {
    "wall": ("wall", None), "CPU": ("all_cpu", None), "true peak RSS": ("peak_mb", None),
    "toktoktok ingest": (None, "ingest"), "toktoktok train_phase (seconds.train)": (None, "merge_loop"),
    "toktoktok train stage": (None, "train"), "toktoktok export": (None, "export"),
    "toktoktok distinct pieces": (None, "distinct_pieces"),
}


def growth_rows(cells: dict[tuple[str, str], Cell], sizes: list[str], size_bytes: dict[str, int]) -> list[list[str]]:
    rows = []
    for label, (attr, stage) in GROWTH.items():
        trainers = TRAINERS if attr else ("toktoktok",)
        for trainer in trainers:
            if sum((trainer, s) in cells for s in sizes) < 2:
                continue
            ys = [None if (trainer, s) not in cells else
                  cells[(trainer, s)].med(attr) if attr else cells[(trainer, s)].stage(stage) for s in sizes]
            k = exponent([size_bytes[s] for s in sizes], ys)
            name = f"{LABELS[trainer]} {label}" if attr else label
            rows.append([name, ", ".join("–" if y is None else f"{y:,.0f}" if y >= 1000 else f"{y:,.2f}" for y in ys),
                         num(k, 2)])
    return rows


def distinct_fit(cells: dict[tuple[str, str], Cell], sizes: list[str],
                 size_bytes: dict[str, int]) -> tuple[float, float, float] | None:
    """(k, bytes, distinct pieces) of toktoktok's largest size: distinct pieces ∝ bytes^k; None under 2 sizes."""
    pts = [(size_bytes[s], cells[("toktoktok", s)].stage("distinct_pieces")) for s in sizes
           if ("toktoktok", s) in cells and cells[("toktoktok", s)].stage("distinct_pieces")]
    k = exponent([x for x, _ in pts], [y for _, y in pts])
    if k is None:
        return None
    return k, pts[-1][0], pts[-1][1]  # type: ignore[return-value]


# --- the targets, at the largest size -------------------------------------------------

TARGET_WALL, TARGET_INGEST, TARGET_MERGES, TARGET_PEAK, TARGET_BPT = 0.12, 300.0, 25_000.0, 0.3, 0.001


def verdict(ok: bool | None) -> str:
    return "–" if ok is None else "**met**" if ok else "not met"


def target_rows(cells: dict[tuple[str, str], Cell], size: str, fixed: Measured | None,
                scanner: dict[str, float] | None) -> list[list[str]]:
    """Each target: what it asks, the value measured in this run, met or not ("–": a figure is missing).

    A run 10× faster than rustbpe misses the 0.12 target; one made of 1,744
    merges gets no verdict on the merge rate; a missing peer gives "–":

        >>> run = lambda wall, mb: Measured(wall, wall, mb, mb, 0, Path("log"))
        >>> ours = Cell("toktoktok", "full", [run(10.0, 300)], bytes_per_token=3.0, stages=[{
        ...     "ingest": 2.0, "ingest_bytes": 700e6, "merges": 1744, "split_early_merges": 0.5,
        ...     "split_later_merges": 0.5}])
        >>> cells = {("toktoktok", "full"): ours, ("rustbpe", "full"): Cell("rustbpe", "full", [run(100.0, 1500)],
        ...                                                                 bytes_per_token=3.003)}
        >>> for row in target_rows(cells, "full", None, None): print(row[1], "|", row[2])
        10.0 s ÷ 100.0 s = 0.100 | **met**
        350 MB/s | **met**
        1,744 merges in 1.00 s = 1,744 merges/s (not the target's 65,280 merges: no verdict) | –
        300 MB ÷ 1,500 MB = 0.200 | **met**
        3.0000 against 3.0030: -0.100% | **met**
        3.0000 against –: – | –
    """
    c, rb, hf = cells.get(("toktoktok", size)), cells.get(("rustbpe", size)), cells.get(("hf", size))
    rows = []
    wall = c and c.med("wall")
    base = rb and rb.med("wall")
    r = wall / base if wall and base else None
    rows.append([f"end-to-end wall ÷ rustbpe (chunks) ≤ {TARGET_WALL}",
                 f"{num(wall)} s ÷ {num(base)} s = {num(r, 3)}", verdict(None if r is None else r <= TARGET_WALL)])
    rate = c and ingest_rate(c)
    limit = (f"; the scanner alone, 1 thread, in this run: scan {scanner['scan_1']:,.0f}, scan + count "
             f"{scanner['count_1']:,.0f} MB/s" if scanner else "")
    rows.append([f"ingest ≥ {TARGET_INGEST:,.0f} MB/s (2 threads)", f"{num(rate, 0)} MB/s{limit}",
                 verdict(None if rate is None else rate >= TARGET_INGEST)])
    made = c and c.stage("merges")
    loop = c and loop_seconds(c)
    mps = per_second(made, loop)
    asked = made == 65_280  # the target's run: 65,536 tokens
    rows.append([f"merge loop ≥ {TARGET_MERGES:,.0f} merges/s (loop proper) over 65,280 merges",
                 f"{num(made, 0)} merges in {num(loop, 2)} s = {num(mps, 0)} merges/s"
                 + ("" if asked else " (not the target's 65,280 merges: no verdict)"),
                 verdict(None if mps is None or not asked else mps >= TARGET_MERGES)])
    peak, bpeak = c and c.med("peak_mb"), rb and rb.med("peak_mb")
    r = peak / bpeak if peak and bpeak else None
    extra = (f"; fixed part (tiny corpus) {fixed.peak_mb:,.0f} MB, the rest {peak - fixed.peak_mb:,.0f} MB = "
             f"{(peak - fixed.peak_mb) / bpeak:.3f} of rustbpe's" if fixed and peak and bpeak else "")
    rows.append([f"true peak RSS ÷ rustbpe (chunks) ≤ {TARGET_PEAK}",
                 f"{num(peak, 0)} MB ÷ {num(bpeak, 0)} MB = {num(r, 3)}{extra}",
                 verdict(None if r is None else r <= TARGET_PEAK)])
    for peer in (rb, hf):
        ours, theirs = c and c.bytes_per_token, peer and peer.bytes_per_token
        d = ours / theirs - 1 if ours and theirs else None
        name = LABELS[peer.trainer] if peer else "peer (not run)"
        rows.append([f"held-out bytes/token within {TARGET_BPT:.1%} of {name}",
                     f"{num(ours, 4)} against {num(theirs, 4)}: {'–' if d is None else f'{d:+.3%}'}",
                     verdict(None if d is None else abs(d) <= TARGET_BPT)])
    return rows


# --- the Ray engine -------------------------------------------------------------------


def sha_note(ray: Cell, local: Cell | None) -> str:
    if not ray.digests:
        return "no .tiktoken"
    if local is None or not local.digests:
        return "no local-engine run to compare with"
    same = set(ray.digests) == set(local.digests) and len(set(local.digests)) == 1
    return (f"identical to the local engine's (sha256 {local.digests[0][:16]}…, {len(ray.digests)} + "
            f"{len(local.digests)} runs)" if same else
            f"**differs** from the local engine's (Ray {sorted(set(ray.digests))}, local {sorted(set(local.digests))})")


RAY_HEADERS = ["size", "engine", "wall s", "CPU s", "true peak RSS MB", "processes at the peak", "ingest s",
               "ingest MB/s", "tasks", "recounted", "Ray start s", "counting s", "task seconds (sum / max)",
               "sum after counting s", "Ray stop s", ".tiktoken"]


def ray_rows(cells: dict[tuple[str, str], Cell], sizes: list[str], labels: dict[str, str]) -> list[list[str]]:
    rows = []
    for size in sizes:
        ray, local = cells.get(("ray", size)), cells.get(("toktoktok", size))
        if ray is None:
            continue
        for name, c in (("local", local), ("Ray, local instance of 2 CPUs", ray)):
            if c is None:
                continue
            peak_run = max(c.ok, key=lambda r: r.peak_mb, default=None)
            procs = (f"{len(peak_run.commands)}" + (f" ({peak_run.outside} outside the tree)" if peak_run.outside
                                                    else "")) if peak_run else "–"
            is_ray = c is ray
            rows.append([labels[size], name, num(c.med("wall")), num(c.med("all_cpu")),
                         num(c.med("peak_mb"), 0), procs, num(c.stage("ingest"), 2), num(ingest_rate(c), 0),
                         *((num(c.stage("engine_tasks"), 0), num(c.stage("engine_recounted"), 0),
                            num(c.stage("engine_ray_start"), 2), num(c.stage("engine_count"), 2),
                            f"{num(c.stage('engine_tasks_sum'), 2)} / {num(c.stage('engine_tasks_max'), 2)}",
                            num(c.stage("engine_sum"), 2), num(c.stage("engine_ray_stop"), 2))
                           if is_ray else ["–"] * 7),
                         sha_note(ray, local) if is_ray else "the reference"])
    return rows


def ray_processes(cells: dict[tuple[str, str], Cell], sizes: list[str]) -> str:
    """The processes summed at the Ray run's peak, by name, at the largest size it ran."""
    for size in reversed(sizes):
        c = cells.get(("ray", size))
        run = c and max(c.ok, key=lambda r: r.peak_mb, default=None)
        if run:
            names: dict[str, int] = {}
            for name in run.commands:
                names[name] = names.get(name, 0) + 1
            found = ", ".join(f"`{n}`" + (f" ×{k}" if k > 1 else "") for n, k in sorted(names.items()))
            return found + (f" ({run.outside} process(es) found only through the run's token, outside the tree)"
                            if run.outside else " (all of them in the process tree of `toktok`: none was found only "
                            "through the run's token)")
    return ""


# --- 1 TB on 64 machines: a cost model from this run's figures ---------------------------

TB = 1e12
MACHINES, CPUS_PER_MACHINE = 64, 2
NET_GBPS = 10.0  # assumed network bandwidth per machine, Gbit/s
RANGE_BYTES, FAN_IN = 64 << 20, 8  # stages/ray_engine's task size and reduce fan-in (read from it when it imports)


def engine_constants() -> tuple[int, int]:
    try:
        from toktoktok_stages.ingest import ray_engine
        return int(ray_engine.RANGE_BYTES), int(ray_engine.FAN_IN)
    except Exception:  # noqa: BLE001 - the stated values stand in
        return RANGE_BYTES, FAN_IN


def tree_rows(tasks: int, fan_in: int, rows_of: Callable[[int], float]) -> tuple[int, float, float]:
    """The tree of sums over ``tasks`` tables, ``fan_in`` at a time, as ``ray_engine.tree``
    builds it: (levels, rows of every table that goes into a sum, rows into
    the sums on one path from the last level of tasks to the root).
    ``rows_of(n)``: the rows of a table covering ``n`` tasks' text.

    64 tasks of 10 rows each, sums of 8 whose output has as many rows
    (the same pieces everywhere): 64 + 8 tables in, 8 + 8 of them on a path:

        >>> tree_rows(64, 8, lambda n: 10)
        (2, 720, 160)
        >>> tree_rows(1, 8, lambda n: 10)
        (0, 0, 0)
    """
    levels, n, covered, shipped, tail = 0, tasks, 1, 0, 0
    while n > 1:
        rows = rows_of(covered)
        shipped += n * rows
        tail += min(fan_in, n) * rows
        n, covered, levels = -(-n // fan_in), covered * fan_in, levels + 1
    return levels, shipped, tail


def cost_model(cells: dict[tuple[str, str], Cell], sizes: list[str], size_bytes: dict[str, int]) -> list[str]:
    """The section's lines: assumptions, the figures of this run it uses, and the estimate (or what is missing)."""
    size = next((s for s in reversed(sizes) if ("ray", s) in cells and cells[("ray", s)].stages), None)
    if size is None:
        return ["No Ray run in this run: no cost model (run with `--trainers ...,ray`)."]
    ray, local = cells[("ray", size)], cells.get(("toktoktok", size))
    range_bytes, fan_in = engine_constants()
    nbytes, task_s = ray.stage("ingest_bytes"), ray.stage("engine_tasks_sum")
    start, stop = ray.stage("engine_ray_start"), ray.stage("engine_ray_stop")
    fit = distinct_fit(cells, sizes, size_bytes)
    reduce = ray.reduce
    missing = []
    if not nbytes or not task_s:
        missing.append("per-task throughput (`engine.seconds.tasks_sum`)")
    if fit is None:
        missing.append("the growth of distinct pieces (toktoktok at 2 sizes or more)")
    if not reduce or not reduce.get("points") or not reduce.get("bytes_per_row"):
        missing.append("the reduce step's cost (`benchkit.reduce_cost` on the Ray run's inventory)")
    if missing:
        return ["Missing for the cost model: " + "; ".join(missing) + "."]
    assert nbytes and task_s and fit and reduce
    rate = nbytes / MB / task_s  # MB/s of one task (one CPU)
    k, x0, d0 = fit

    def distinct(x: float) -> float:
        return d0 * (x / x0) ** k

    pts = reduce["points"]
    per_row = max(p["seconds"] / p["input_rows"] for p in pts if p["input_rows"])  # the worst seen
    row_bytes = reduce["bytes_per_row"]
    cpus = MACHINES * CPUS_PER_MACHINE
    tasks = math.ceil(TB / range_bytes)
    count_s = TB / MB / (rate * cpus)
    levels, shipped, tail = tree_rows(tasks, fan_in, lambda covered: min(distinct(covered * range_bytes), distinct(TB)))
    traffic, reduce_cpu = shipped * row_bytes, shipped * per_row  # every table shipped once, summed once
    tail_cpu, tail_net = tail * per_row, tail * row_bytes / (NET_GBPS * 1e9 / 8)
    root = distinct(TB)
    local_rate = local and ingest_rate(local)
    read_s = TB / (MACHINES * NET_GBPS * 1e9 / 8)  # the text itself, if it comes over the network
    total = (start or 0) + max(count_s, read_s) + tail_cpu + tail_net + (stop or 0)
    reduce_fit = exponent([p["input_rows"] for p in pts], [p["seconds"] for p in pts])
    return [
        "Assumptions (stated, not measured): 1 TB (10^12 bytes) of text like this corpus, in plain `.txt` files on "
        f"storage every machine reads while it counts (from its disk cache, or at the network's speed, whichever "
        f"binds); {MACHINES} machines like this one, "
        f"{CPUS_PER_MACHINE} CPUs each ({cpus} tasks at once, one scanner thread each, as `threads: -1` under Ray); "
        f"tasks of {range_bytes >> 20} MiB ranges and sums of {fan_in} tables (stages/ray_engine at this commit); "
        f"network {NET_GBPS:g} Gbit/s per machine, every table shipped once across it; distinct pieces growing "
        f"as this run's fit says, also past the sizes run; start-up and stop as measured here for a local "
        "instance (joining a running cluster skips the start). Training (the merge loop) is not distributed and "
        "is left out.", "",
        "Figures of this run it uses:", "",
        f"- per-task throughput: {nbytes / MB:,.0f} MB in {task_s:,.2f} task-seconds = **{rate:,.1f} MB/s per task** "
        f"(Ray run at {nbytes / MB:,.0f} MB, `engine.seconds.tasks_sum`)",
        f"- distinct pieces ∝ bytes^{k:.2f} (toktoktok's inventories over the sizes run), {d0:,.0f} at "
        f"{x0 / MB:,.0f} MB: {distinct(range_bytes):,.0f} in a {range_bytes >> 20} MiB task, "
        f"{root:,.0f} at 1 TB",
        f"- the reduce step (`counts.sum_tables` of {reduce['fan_in']} tables, timed on the Ray run's inventory of "
        f"{reduce['rows']:,} rows): " + ", ".join(f"{p['input_rows']:,} rows in {p['seconds'] * 1e3:,.1f} ms"
                                                   for p in pts)
        + f" (cost ∝ rows^{num(reduce_fit, 2)}); taken as {per_row * 1e9:,.0f} ns per input row, the worst of these; "
        f"{row_bytes:,.1f} bytes per row (`counts.table_bytes`)",
        f"- start-up {num(start, 2)} s and stop {num(stop, 2)} s of the local instance (`engine.seconds`)", "",
        "Estimate:", "",
        md_table(["part", "figure"], [
            ["tasks", f"{tasks:,}"],
            ["counting, all CPUs busy", f"{count_s:,.0f} s ({count_s / 3600:,.2f} h)"],
            ["reading the text over the network (object storage), at the same time",
             f"{read_s:,.0f} s: {'counting' if count_s >= read_s else 'the network'} binds"],
            ["tree of sums", f"{levels} levels, {reduce_cpu:,.0f} CPU-s in all (spread over the machines while "
                             "counting runs)"],
            ["object-store traffic (count tables shipped)", f"{traffic / 1e9:,.1f} GB"],
            ["after the last count: the sums on the path to the root", f"{tail_cpu:,.1f} s CPU + "
                                                                         f"{tail_net:,.1f} s network"],
            ["the summed inventory at the driver", f"{root:,.0f} rows, {root * row_bytes / 1e9:,.1f} GB"],
            ["start + stop", f"{(start or 0) + (stop or 0):,.1f} s"],
            ["**total (ingest)**", f"**{total:,.0f} s ({total / 3600:,.2f} h)**"],
            ["one machine, local engine, at this run's ingest rate",
             f"{TB / MB / local_rate:,.0f} s ({TB / MB / local_rate / 3600:,.1f} h)" if local_rate else "–"],
        ]),
    ]


def kernel_line(manifest: dict | None) -> str:
    """The report's line on the kernel corpus (``scale_corpus.ensure``'s manifest; None: no kernel size run)."""
    if manifest is None:
        return "- corpus: the kernel's source was not run (no kernel size in `--sizes`)"
    return (f"- corpus: Debian's `{manifest['package']}` {manifest['version']} (`apt-get download`), built by "
            f"`benchmarks/sections/scale_corpus.py`: {manifest['files']['kept']:,} UTF-8 files "
            f"({', '.join(manifest['suffixes'])}, {', '.join(manifest['names'])}) in the order of a hash of their "
            f"path, one file a document (stripped, then a blank line); every {manifest['hold_out_every']}th file "
            f"held out ({manifest['files']['heldout_files']:,} files, {manifest['heldout_bytes'] / MB:,.1f} MB); "
            "training prefixes: " + ", ".join(f"{manifest['train'][s]['bytes'] / MB:,.1f} MB "
                                              f"({manifest['train'][s]['files']:,} files)" for s in KERNEL_SIZES))


def big_line(manifest: dict) -> str:
    """The report's line on the 5 GB corpus (``big_corpus.ensure``'s manifest)."""
    packages = ", ".join(f"`{name}` {p['version']} ({p['kept']:,} files, {p['bytes'] / 1e9:,.2f} GB"
                         + (f"; {p['same_text_as_before']:,} dropped, their text already taken" if
                            p["same_text_as_before"] else "") + ")" for name, p in manifest["packages"].items())
    return (f"- {BIG}: built by `benchmarks/sections/big_corpus.py` from Debian's {packages}; one UTF-8 file a "
            "document (stripped, then a blank line), files whose text an earlier package already gave dropped, in "
            f"the order of a hash of package and path, every {manifest['hold_out_every']}th file held out "
            f"({manifest['heldout']['files']:,} files, {manifest['heldout']['bytes'] / MB:,.1f} MB); training text "
            f"{manifest['train']['bytes'] / 1e9:,.2f} GB ({manifest['train']['files']:,} files). Hugging Face is "
            "not run at this size (hours on this machine; no target is measured on it).")


TARGET_BIG_WALL, TARGET_BIG_PEAK, TARGET_BIG_BPT = 0.10, 0.30, 0.01


def big_target_rows(cells: dict[tuple[str, str], Cell]) -> list[list[str]]:
    """The targets at the 5 GB point: wall and peak against rustbpe, and the sampled run's held-out bytes/token.

        >>> run = lambda wall, mb: Measured(wall, wall, mb, mb, 0, Path("log"))
        >>> cells = {("toktoktok", BIG): Cell("toktoktok", BIG, [run(50.0, 2000)], bytes_per_token=3.0),
        ...          ("toktoktok-sampled", BIG): Cell("toktoktok-sampled", BIG, [run(30.0, 900)], bytes_per_token=2.98),
        ...          ("rustbpe", BIG): Cell("rustbpe", BIG, [run(600.0, 9000)]),
        ...          ("rustbpe-docs", BIG): Cell("rustbpe-docs", BIG, [run(600.0, 3000)])}
        >>> for row in big_target_rows(cells): print(row[1], "|", row[2])
        50.0 s ÷ 600.0 s = 0.083 | **met**
        2,000 MB ÷ 9,000 MB = 0.222 | **met**
        2,000 MB ÷ 3,000 MB = 0.667 | **met**
        2.9800 against 3.0000: -0.667% | **met**
    """
    c, sampled = cells.get(("toktoktok", BIG)), cells.get(("toktoktok-sampled", BIG))
    rb, docs = cells.get(("rustbpe", BIG)), cells.get(("rustbpe-docs", BIG))
    wall, base = c and c.med("wall"), rb and rb.med("wall")
    peak, bpeak, dpeak = c and c.med("peak_mb"), rb and rb.med("peak_mb"), docs and docs.med("peak_mb")
    r = wall / base if wall and base else None
    p = peak / bpeak if peak and bpeak else None
    d = peak / dpeak if peak and dpeak else None
    ours, theirs = sampled and sampled.bytes_per_token, c and c.bytes_per_token
    off = (ours - theirs) / theirs if ours and theirs else None
    return [
        [f"end-to-end wall ÷ rustbpe (chunks) ≤ {TARGET_BIG_WALL}", f"{num(wall)} s ÷ {num(base)} s = {num(r, 3)}",
         verdict(None if r is None else r <= TARGET_BIG_WALL)],
        [f"true peak RSS ÷ rustbpe (chunks) ≤ {TARGET_BIG_PEAK}", f"{num(peak, 0)} MB ÷ {num(bpeak, 0)} MB = "
         f"{num(p, 3)}", verdict(None if p is None else p <= TARGET_BIG_PEAK)],
        ["true peak RSS ≤ rustbpe (documents)", f"{num(peak, 0)} MB ÷ {num(dpeak, 0)} MB = {num(d, 3)}",
         verdict(None if d is None else d <= 1)],
        [f"held-out bytes/token with `working_set_mb: {SAMPLED_MB}` within {TARGET_BIG_BPT:.0%} of all text",
         f"{num(ours, 4)} against {num(theirs, 4)}: " + ("–" if off is None else f"{off:+.3%}"),
         verdict(None if off is None else abs(off) <= TARGET_BIG_BPT)],
    ]


def prose_line(manifest: dict | None, source: Path) -> str:
    """The report's line on the prose corpus (``scale_corpus.ensure_prose``'s manifest; None: not in ``source``).

        >>> print(prose_line(None, Path("/x/corpora")))
        - prose: **skipped**, no `english.txt.zst` and `english.heldout.txt.zst` in /x/corpora (`--prose`)
    """
    train, heldout = (f"{scale_corpus.PROSE_NAME}{part}.txt.zst" for part in ("", ".heldout"))
    if manifest is None:
        return f"- prose: **skipped**, no `{train}` and `{heldout}` in {source} (`--prose`)"
    what = f", in their README's words \"{manifest['what']}\"" if manifest.get("what") else ""
    return (f"- prose: `{train}` of the shared corpora ({source}){what}; decompressed by "
            f"`benchmarks/sections/scale_corpus.py` (`zstandard`): {manifest['train']['bytes'] / MB:,.1f} MB, "
            f"{manifest['train']['documents']:,} documents (one blank line between documents); held out: the "
            f"corpora's own split `{heldout}`, {manifest['heldout']['bytes'] / MB:,.1f} MB, "
            f"{manifest['heldout']['documents']:,} documents never in the training text")


def report(args: argparse.Namespace, facts: dict[str, object], points: dict[str, Point],
           cells: dict[tuple[str, str], Cell], fixed: Measured | None, warm: Measured | None,
           scanner: dict[str, float] | None) -> str:
    sizes = [s for s in args.sizes if any((t, s) in cells for t in TRAINERS)]
    kernel = [s for s in sizes if s in KERNEL_SIZES]  # the growth fit, the targets, the cost model
    labels = {s: p.label for s, p in points.items()}
    size_bytes = {s: p.nbytes for s, p in points.items()}
    command = shlex.join(["benchmarks/run.py", *facts["argv"]])  # type: ignore[list-item]
    lines = [
        "# toktoktok at scale: the Linux kernel's source, 0.1 to 1.2 GB, English prose, and 5 GB of several packages", "",
        *([f"**{args.note}**", ""] if args.note else []),
        f"Run {facts['date']}, commit {facts['commit']}, `{command}`.", "",
        "## The run", "",
        f"- machine: {facts['machine']}",
        f"- load average (1 / 5 / 15 min): {facts['load']} at start, {bench_report.load_average()} at the end",
        f"- versions: {bench_report.versions()}",
        kernel_line(facts["corpus"]),  # type: ignore[arg-type]
        *([prose_line(facts["prose"], args.prose)] if PROSE in args.sizes else []),  # type: ignore[arg-type]
        *([big_line(args.big)] if BIG in args.sizes and getattr(args, "big", None) else []),
        f"- settings: vocabulary {args.tokens:,} = 256 bytes + {args.tokens - 256:,} merges, toktoktok's default "
        "pattern for every trainer, no special tokens, min_frequency 2 (toktoktok, HF; rustbpe has none); toktoktok "
        "`hardcoded_merges: false`, `heldout_share: 0`, `threads: -1`, a `working_set_mb` that keeps all text; "
        f"{args.reps} run(s) per point" + (f" ({point_reps(BIG, args)} at {BIG})" if BIG in args.sizes else "")
        + ", medians shown" + (f"; not run: {', '.join(sorted(args.skip))}" if args.skip else "")
        + f"; Ray at: {', '.join(labels[s] for s in ray_sizes(args) if s in labels) or 'no size'}",
        "",
        "Each trainer is one whole process (start-up, reading, training, writing its `.tiktoken`), measured from "
        "outside (`benchkit.measure`): CPU = user + system of it and of every process it started (the larger of "
        "what `wait4` reports and the sum sampled from `/proc`, which also sees processes nobody waited for, as "
        "Ray's); true peak RSS = the larger of the process's own `ru_maxrss` (the kernel's high-water mark, which "
        "no stage resets) and the largest sum of resident sets over it and every process it started, sampled "
        "from `/proc` every 50 ms: its descendants, and any process whose environment carries the run's token "
        "(with their descendants), so that processes which leave the tree still count. Pages shared between "
        "processes count once per process, so the sum can overstate a multi-process run (Ray's); a single "
        "process's figure is exact. Held-out bytes/token: each `.tiktoken` with the default pattern in tiktoken, "
        "on the whole held-out file of its corpus (higher is better).", "",
        "How the peers are fed: rustbpe and Hugging Face get the text as 1 MiB chunks cut at a line end "
        "(`peer_trainers.py --feed chunks`), as a user hands a big file to `train_from_iterator`; this is the "
        "reference of the targets below. rustbpe pulls 8,192 strings from the iterator before it counts them, "
        "so with 1 MiB strings it holds up to 8 GiB of text at once, here the whole corpus: its peak is mostly the "
        "text. Fed whole documents (`--feed documents`, the row \"rustbpe (documents)\") it holds 8,192 "
        "documents at a time, far less; the last column compares every peak with that figure too.", "",
        "## Trainers", "",
        md_table(TRAINER_HEADERS, trainer_rows(cells, sizes, labels)), "",
    ]
    srows = stage_rows(cells, sizes, labels)
    if srows:
        lines += ["## Where toktoktok's time goes (its manifests)", "",
                  "ingest MB/s = bytes read ÷ the ingest stage's seconds (`seconds.total`, numba's cache load "
                  "included). The train stage (`seconds.total` of the train manifest): `load` reads the "
                  "inventory, then `train_phase` (`seconds.train`) is split by `train_split_seconds`: `segment` "
                  "cuts the pieces into byte symbols, `pairs` counts the pairs and builds the lists, the merge loop "
                  "proper = the first 1,000 merges + the later merges, `check` segments the pieces again with the "
                  "new vocabulary. Two rates: merges ÷ the loop proper, and merges ÷ all of `train_phase` "
                  "(`seconds.train`). rest = process wall − the three stages: start-up, imports, the config. "
                  "Stage peaks: the largest `peak_rss_mb` the stages record themselves (for comparison with the "
                  "outside figure above). \"–\": a manifest without that figure (one written before "
                  "`train_split_seconds` existed).", "",
                  md_table(STAGE_HEADERS, srows), ""]
    if scanner:
        lines += ["## The limit ingest works against", "",
                  f"The scanner alone on the first {scanner['mb']:.0f} MB of the {facts['base']} training text, "
                  "one thread, "
                  f"best of {scanner['repeat']} (`run.py --section scanner`, in this run): piece ends only "
                  f"(`scan`) **{scanner['scan_1']:,.0f} MB/s**; scan and count distinct pieces (`RunningSum.count`, "
                  f"the work of ingest's counting threads, in 512 KiB batches) **{scanner['count_1']:,.0f} MB/s**; "
                  f"`span_table.count_pieces` {scanner.get('count_pieces_1', 0):,.0f} MB/s, and on 2 threads with "
                  f"`merge_counts` {scanner['count_2']:,.0f} MB/s.", ""]
    largest = kernel[-1] if kernel else None
    if largest and ("toktoktok", largest) in cells:
        lines += [f"## The targets at {labels[largest]}", "",
                  f"Computed from the figures above ({args.reps} run(s), medians); the fixed part is the tiny-corpus "
                  "run below.", "",
                  md_table(["target", "measured", ""], target_rows(cells, largest, fixed, scanner)), ""]
    at, threads = facts.get("threads") or (None, None)  # type: ignore[misc]
    if at in labels and threads:
        early, _, loop = merge_threads.ratios(threads, 2)
        lines += [f"## The merge loop on threads at {labels[at]}", "",
                  "The merge loop alone, in fresh processes that load the inventory toktoktok's first run above "
                  "ingested and train it with `train_phase` on 1 and on 2 threads (`numba.set_num_threads`), the "
                  "kernels loaded before the clock starts, the thread counts alternating (`benchmarks/sections/"
                  "merge_threads.py`; `run.py --section merge-threads` does the same on any config). A merge whose "
                  f"pair's list holds {PARALLEL_NODES} entries or more is made in parts, one a thread.", "",
                  *merge_threads.thread_lines(threads, args.thread_reps), "",
                  md_table(["target", "measured", ""],
                           [["first 1,000 merges on 2 threads ≤ 0.6x of 1 thread", f"{early:.3f}x",
                             verdict(early <= 0.6)],
                            ["the loop on 2 threads ≤ 0.85x of 1 thread", f"{loop:.3f}x", verdict(loop <= 0.85)]]),
                  ""]
    if ("toktoktok", BIG) in cells:
        lines += [f"## The targets at {labels[BIG]}", "",
                  f"From the figures above ({point_reps(BIG, args)} run(s), medians); the sampled run is the same "
                  f"config with `working_set_mb: {SAMPLED_MB}`, so that ingest keeps a seeded sample of the text. "
                  "Hugging Face is not run at this size: no target is measured on it.", "",
                  md_table(["target", "measured", ""], big_target_rows(cells)), ""]
    rrows = ray_rows(cells, kernel, labels)
    if rrows:
        lines += ["## Ingest on Ray against the local engine", "",
                  "toktoktok (Ray) is the same config with `engine: ray` and `ray: {num_cpus: 2}`: toktok starts "
                  "a local Ray instance of 2 CPUs itself and stops it at the end of ingest. Its true peak is the "
                  "sum over every process of the run (see above): at its peak "
                  + ray_processes(cells, kernel) + ". From the ingest manifest's `engine` entry: tasks run "
                  "(files and byte ranges, plus any recounted), the seconds to start Ray, to count (the driver's "
                  "wall while tasks ran), the tasks' own seconds (sum over tasks / the longest), the sums left "
                  "after the last count, and the stop.", "",
                  md_table(RAY_HEADERS, rrows), ""]
        lines += ["## 1 TB on 64 machines: a cost model", "",
                  *cost_model(cells, kernel, size_bytes), ""]
    grows = growth_rows(cells, kernel, size_bytes)
    if grows and BIG in sizes:  # a second fit that takes the 5 GB point in: the next order of size
        wide = {row[0]: row for row in growth_rows(cells, [*kernel, BIG], size_bytes)}
        grows = [[*row, *(wide[row[0]][1:] if row[0] in wide else ["–", "–"])] for row in grows]
    if grows:
        lines += ["## How each cost grows with size", "",
                  "k of a least-squares fit cost ∝ bytes^k over the kernel sizes above (k = 1: linear)."
                  + (" The prose point is left out of this fit and of the 1 TB cost model: it is another kind of "
                     "text, whose costs need not lie on the kernel's curve." if PROSE in sizes else ""), "",
                  *([f"The last two columns fit the kernel sizes and {labels[BIG]} together: the next order of "
                     "size, though its text is another mix (the kernel's C, and C++, Java, Rust, Go and HTML).", ""]
                    if BIG in sizes else []),
                  md_table(["cost", "at " + " / ".join(labels[s] for s in kernel), "k",
                            *(["at " + " / ".join(labels[s] for s in [*kernel, BIG]), f"k with {BIG}"]
                              if BIG in sizes else [])], grows), ""]
    if fixed is not None:
        lines += [f"toktoktok's fixed part: a run on the first {TINY_BYTES / MB:.0f} MB of the {facts['base']} text "
                  f"(same config, numba's cache warm): {fixed.wall:.1f} s wall, {fixed.cpu:.1f} s CPU, true peak "
                  f"RSS {fixed.peak_mb:,.0f} MB."
                  + (f" The warm-up before it (numba compiles into an empty cache): {warm.wall:.1f} s wall." if warm
                     else ""), ""]
    lines += [f"All figures were measured in this run by `{command}`; none are copied from earlier runs.", ""]
    return "\n".join(lines)


# --- running it ----------------------------------------------------------------


def ray_sizes(args: argparse.Namespace) -> list[str]:
    """The kernel sizes the ``ray`` trainer runs at (``--ray-sizes``: ``largest`` of ``--sizes``, ``all``, or a list).

    Never prose: Ray's rows compare engines on the kernel's text.

        >>> ray_sizes(argparse.Namespace(sizes=["0.3GB", "0.1GB", "prose"], ray_sizes="largest"))
        ['0.3GB']
        >>> ray_sizes(argparse.Namespace(sizes=["0.1GB", "full"], ray_sizes="0.1GB"))
        ['0.1GB']
        >>> ray_sizes(argparse.Namespace(sizes=["prose"], ray_sizes="all"))
        []
    """
    kernel = [s for s in args.sizes if s in KERNEL_SIZES]
    if args.ray_sizes == "largest":
        return [max(kernel, key=SIZES.index)] if kernel else []
    if args.ray_sizes == "all":
        return kernel
    return [s for s in args.ray_sizes.split(",") if s]


def reduce_cost(run_folder: Path, env: dict[str, str]) -> dict | None:
    """``benchkit.reduce_cost`` on the inventory of the toktok run in ``run_folder`` (a process of its own)."""
    found = sorted((run_folder / "toktoktok.work" / "ingest").glob("*/manifest.json"))
    if not found:
        return None
    done = subprocess.run([sys.executable, str(HERE / "benchkit" / "reduce_cost.py"), str(found[-1].parent)],
                          env=env, capture_output=True, text=True)
    if done.returncode:
        log(f"  reduce cost failed: {done.stderr.strip()[-500:]}")
        return None
    return json.loads(done.stdout)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data", type=Path, default=scale_corpus.DEFAULT_OUT,
                        help="folder of the .deb and corpora (built when absent)")
    parser.add_argument("--sizes", default=",".join(SIZES),
                        help=f"comma-separated: {','.join(SIZES)} (prose: the shared corpora's English text)")
    parser.add_argument("--prose", type=Path, default=SHARED_CORPORA,
                        help=f"folder of {scale_corpus.PROSE_NAME}.txt.zst and its .heldout.txt.zst "
                             "(default: the shared corpora beside the checkout; absent: the prose point is skipped)")
    parser.add_argument("--trainers", default=",".join(TRAINERS),
                        help=f"comma-separated: {','.join(TRAINERS)} (rustbpe, hf: fed 1 MiB chunks; "
                             "rustbpe-docs: rustbpe fed documents; ray: toktoktok ingesting on Ray)")
    parser.add_argument("--ray-sizes", default="largest",
                        help="sizes the ray trainer runs at: largest (the largest of --sizes), all, or a list")
    parser.add_argument("--skip", default="", help="TRAINER@SIZE pairs not to run, e.g. hf@full")
    parser.add_argument("--reps", type=int, default=3, help="runs per point; medians are reported")
    parser.add_argument("--big-reps", type=int, default=1,
                        help=f"runs of the {BIG} point at most (its peers take minutes a run)")
    parser.add_argument("--thread-reps", type=int, default=5,
                        help="runs of the merge loop alone on 1 and on 2 threads at the largest kernel size, "
                             "0 to skip")
    parser.add_argument("--tokens", type=int, default=65536, help="vocabulary size incl. 256 bytes")
    parser.add_argument("--scanner-mb", type=int, default=100, help="MB of text for the scanner's rate, 0 to skip")
    parser.add_argument("--note", default="", help="a line printed in bold at the top of the report")
    parser.add_argument("--out", type=Path, default=HERE / "results" / "SCALE.md", help="the Markdown report")
    parser.add_argument("--work", type=Path, default=None, help="bench folder (default: a temp folder, removed)")


def prepare_points(args: argparse.Namespace) -> tuple[dict[str, Point], dict | None, dict | None]:
    """The points of ``--sizes`` whose text is here, and the kernel's and prose's manifests.

    The kernel's corpora are built when a kernel size is asked for and they are
    absent; the prose is decompressed when asked for and found in ``--prose``,
    else skipped (its manifest None).
    """
    points: dict[str, Point] = {}
    kernel = prose = None
    if set(args.sizes) & set(KERNEL_SIZES):
        kernel = scale_corpus.ensure(args.data)
        points.update(kernel_points(kernel, args.data / "kernel"))
    if BIG in args.sizes:
        big = big_corpus.ensure(args.data)
        nbytes = big["train"]["bytes"]
        points[BIG] = Point(BIG, args.data / "big" / "train.txt", nbytes, args.data / "big" / "heldout.txt",
                            f"{nbytes / 1e9:,.1f} GB, {len(big['packages'])} packages")
        args.big = big
    if PROSE in args.sizes:
        prose = scale_corpus.ensure_prose(args.prose, args.data)
        if prose is None:
            log(f"no prose corpus in {args.prose}: the prose point is skipped")
        else:
            points[PROSE] = prose_point(prose, args.data / "prose")
    return points, kernel, prose


def point_reps(size: str, args: argparse.Namespace) -> int:
    """How many times ``size`` runs: ``--reps``, but at most ``--big-reps`` at the 5 GB point, where one
    run of the peers takes minutes and the issue's targets ask for one.

        >>> args = argparse.Namespace(reps=3, big_reps=1)
        >>> point_reps("full", args), point_reps(BIG, args)
        (3, 1)
    """
    return min(args.reps, args.big_reps) if size == BIG else args.reps


def run_point(point: Point, args: argparse.Namespace, work: Path, env: dict[str, str],
              cells: dict[tuple[str, str], Cell]) -> None:
    """Every trainer at ``point``, ``--reps`` times (trainers interleaved), then their held-out bytes/token."""
    size, corpus = point.size, corpus_of(point)
    todo = [t for t in args.trainers if f"{t}@{size}" not in args.skip and (t != "ray" or size in ray_sizes(args))
            and size in ONLY_AT.get(t, (size,)) and size not in NOT_AT.get(t, ())]
    reps = point_reps(size, args)
    for rep in range(1, reps + 1):
        for trainer in todo:
            cell = cells.setdefault((trainer, size), Cell(trainer, size))
            run_folder = work / size / trainer / f"rep{rep}"
            measured, out = run_once(COMMANDS[trainer], corpus, args.tokens, run_folder, env)
            cell.runs.append(measured)
            if measured.returncode == 0 and out.exists():
                cell.out = out
                cell.digests.append(hashlib.sha256(out.read_bytes()).hexdigest())
                if trainer in ("toktoktok", "ray"):
                    cell.stages.append(toktok_stages(run_folder))
                if trainer == "ray":
                    cell.reduce = reduce_cost(run_folder, env) or cell.reduce
            log(f"{size} rep {rep}/{reps} {trainer}: {measured.wall:.1f} s wall, {measured.all_cpu:.1f} s "
                f"CPU, {measured.peak_mb:.0f} MB true peak ({len(measured.commands)} processes)"
                + ("" if measured.returncode == 0 else f", FAILED (see {measured.log})"))
    for trainer in todo:
        cell = cells[(trainer, size)]
        if cell.out is not None:
            from benchkit.toktok import default_pattern

            cell.bytes_per_token = bytes_per_token(cell.out, heldout_of(point.heldout), default_pattern())
            log(f"{size} {trainer}: held-out {cell.bytes_per_token:.4f} bytes/token")


def loop_on_threads(size: str, args: argparse.Namespace, work: Path, env: dict[str, str],
                    cells: dict[tuple[str, str], Cell]) -> dict[int, list[dict]] | None:
    """The merge loop alone on 1 and 2 threads (``merge_threads.measure``), ``--thread-reps``
    times each, on the inventory toktoktok's first run at ``size`` ingested; None if it did not."""
    cell = cells.get(("toktoktok", size))
    config = work / size / "toktoktok" / "rep1" / "bench.yaml"
    if cell is None or not cell.runs or cell.runs[0].returncode != 0 or not config.exists():
        return None
    log(f"{size}: the merge loop alone on 1 and 2 threads, {args.thread_reps} runs each")
    try:
        return merge_threads.measure(config, [1, 2], args.thread_reps, args.tokens - 256, env,
                                     say=lambda line: log(f"  {line}"))
    except subprocess.CalledProcessError as exc:
        log(f"  the merge loop alone FAILED: {exc.stderr.strip().splitlines()[-1:] if exc.stderr else exc}")
        return None


def write_report(out: Path, text: str, done: list[str], args: argparse.Namespace) -> str:
    """``text`` into ``out`` without this machine's paths (``portable``), keeping the
    ``## shapes`` part the shapes section wrote there (at the end)."""
    text = bench_report.portable(text, args)
    kept = bench_report.split_part(out.read_text(encoding="utf-8"), SHAPES_HEADING)[1] if out.exists() else ""
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text.rstrip("\n") + "\n\n" + kept if kept else text, encoding="utf-8")
    log(f"wrote {out} (sizes so far: {', '.join(done) or 'none'})")
    return text


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="run.py --section scale", description=__doc__.split("\n", 1)[0])
    add_arguments(parser)
    args = parser.parse_args(argv)
    argv = ["--section", "scale", *argv]
    args.sizes = [s for s in args.sizes.split(",") if s]
    args.trainers = [t for t in args.trainers.split(",") if t]
    args.skip = {s for s in args.skip.split(",") if s}
    if (set(args.sizes) - set(SIZES) or set(args.trainers) - set(TRAINERS) or args.reps < 1 or args.big_reps < 1
            or set(ray_sizes(args)) - set(KERNEL_SIZES)):
        sys.exit(f"--sizes takes {','.join(SIZES)}, --ray-sizes {','.join(KERNEL_SIZES)}, "
                 f"--trainers {','.join(TRAINERS)}, --reps and --big-reps >= 1")
    points, kernel, prose = prepare_points(args)
    # the tiny corpus and the scanner's text: the smallest kernel text, else the prose, else the 5 GB text
    base = points.get(KERNEL_SIZES[0]) if kernel else points.get(PROSE) or points.get(BIG)
    facts: dict[str, object] = {"date": bench_report.now(), "commit": bench_report.commit(), "argv": argv,
                                "machine": bench_report.machine(), "load": bench_report.load_average(),
                                "corpus": kernel, "prose": prose, "base": base.label if base else "–"}
    work = args.work or Path(tempfile.mkdtemp(prefix="toktok-scale-"))
    work.mkdir(parents=True, exist_ok=True)
    env = run_env(work / "numba-cache")
    shutil.rmtree(work / "numba-cache", ignore_errors=True)
    try:
        warm = fixed = scanner = None
        if base and "toktoktok" in args.trainers:
            tiny = corpus_of(Point("tiny", tiny_corpus(base.train, work), TINY_BYTES, base.heldout, "tiny"))
            log(f"warm-up: toktoktok on the tiny corpus (first {TINY_BYTES / MB:.0f} MB of {base.label}), "
                "empty numba cache (compiles)")
            warm, _ = run_once("toktoktok", tiny, args.tokens, work / "tiny" / "warmup", env)
            fixed, _ = run_once("toktoktok", tiny, args.tokens, work / "tiny" / "fixed", env)
            log(f"  fixed part: {fixed.wall:.1f} s, {fixed.peak_mb:.0f} MB")
        if base and args.scanner_mb:
            log(f"scanner: first {args.scanner_mb} MB of the {base.label} text")
            scanner = scanner_rates(base.train, args.scanner_mb, work)
            log(f"  {scanner}")
        cells: dict[tuple[str, str], Cell] = {}
        done: list[str] = []
        largest = max((s for s in args.sizes if s in points and s in KERNEL_SIZES), key=SIZES.index, default=None)
        for size in [s for s in args.sizes if s in points]:
            run_point(points[size], args, work, env, cells)
            if size == largest and args.thread_reps:
                facts["threads"] = (size, loop_on_threads(size, args, work, env, cells))
            done.append(size)
            # the report so far after every size: an hour-long run stopped late still leaves its figures
            text = write_report(args.out, report(args, facts, points, cells, fixed, warm, scanner), done, args)
        if not done:  # nothing to run (the prose point skipped): the report still says why
            text = write_report(args.out, report(args, facts, points, cells, fixed, warm, scanner), done, args)
        print(text)
    finally:
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)
