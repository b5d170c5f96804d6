"""Scale: toktoktok, rustbpe and Hugging Face on 0.1, 0.3 and 1.2 GB of the Linux kernel's source.

    make bench-scale          # = .venv/bin/python benchmarks/run.py --section scale
    .venv/bin/python benchmarks/run.py --section scale --reps 1 --skip hf@full --out /tmp/SCALE.md

The corpora (``scale_corpus.py``, built under ``--data`` when absent): every
UTF-8 source and doc file of Debian's ``linux-source-6.1``, one file a
document, every 20th file held out; the training text at about 0.1 GB,
0.3 GB and all of it (1.2 GB), each a prefix of the next.

For each size, one after another on the same ``.txt``, ``--reps`` times
(trainers interleaved within a repetition), each a whole process measured
from outside (``benchkit.measure``: wall, CPU of the process tree, true peak
RSS = the larger of ``ru_maxrss`` and the sampled sum over the process tree):

- toktoktok: ``toktok run -c CFG --force`` in a fresh folder, ``--tokens``
  (default 65,536 = 256 bytes + 65,280 merges), ``hardcoded_merges: false``,
  ``heldout_share: 0``, ``min_frequency: 2``, the default pattern,
  ``working_set_mb`` large enough to keep all text (no sampling); its stage
  times come from its manifests;
- rustbpe and Hugging Face ``tokenizers`` through ``peer_trainers.py`` (the
  same pattern and vocabulary size, the documents of the same file, as the
  ``peers`` section feeds them).

Then each trained ``.tiktoken`` encodes the held-out file (``heldout.txt``,
the same for every size): UTF-8 bytes per token. Before the trainers: numba's
cache is filled by a warm-up run on a tiny corpus (the first 1 MB), a second
run on it is measured as toktoktok's fixed part, and the ``scanner`` section
measures the scanner's single-thread MB/s on the first ``--scanner-mb`` MB of
the smallest training text: the limit ingest works against.

How each cost grows: the exponent ``k`` of a least-squares fit
``cost ∝ bytes^k`` over the sizes run (``benchkit.measure.exponent``).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import scale_corpus
from benchkit import report as bench_report
from benchkit.corpus import DOC_BOUNDARY, Corpus
from benchkit.measure import Measured, exponent, median_of
from benchkit.report import md_table, num
from benchkit.toktok import run_env, run_once, toktok_stages
from sections.peers import read_ranks

HERE = Path(__file__).resolve().parents[1]  # benchmarks/
SIZES = ("0.1GB", "0.3GB", "full")
TRAINERS = ("toktoktok", "rustbpe", "hf")
LABELS = {"toktoktok": "toktoktok", "hf": "HF tokenizers", "rustbpe": "rustbpe"}
TINY_BYTES = 1_000_000
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

    @property
    def ok(self) -> list[Measured]:
        return [r for r in self.runs if r.returncode == 0]

    def med(self, attr: str) -> float | None:
        return median_of([getattr(r, attr) for r in self.ok])

    def stage(self, key: str) -> float | None:
        return median_of([s[key] for s in self.stages if key in s])


def corpus_of(path: Path, name: str, heldout: str, size: int) -> Corpus:
    return Corpus(name, path, heldout, f"{name}: {size / MB:,.1f} MB", size, 0)


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
                   "held-out bytes/token", "wall ÷ rustbpe", "CPU ÷ rustbpe", "peak ÷ rustbpe"]


def trainer_rows(cells: dict[tuple[str, str], Cell], sizes: list[str], mb: dict[str, float]) -> list[list[str]]:
    rows = []
    for size in sizes:
        base = cells.get(("rustbpe", size))
        for trainer in TRAINERS:
            c = cells.get((trainer, size))
            if c is None:
                continue
            failed = len(c.runs) - len(c.ok)
            label = LABELS[trainer] + (f" ({failed} of {len(c.runs)} failed)" if failed else "")
            rows.append([f"{mb[size]:,.0f} MB", label, num(c.med("wall")), num(c.med("cpu")), num(c.med("peak_mb"), 0),
                         num(c.med("rss_mb"), 0), num(c.med("tree_mb"), 0), num(c.bytes_per_token, 4),
                         ratio(c.med("wall"), base and base.med("wall")), ratio(c.med("cpu"), base and base.med("cpu")),
                         ratio(c.med("peak_mb"), base and base.med("peak_mb"))])
    return rows


STAGE_HEADERS = ["size", "documents", "distinct pieces", "ingest s", "ingest MB/s", "train s", "train: load s",
                 "merge loop s", "merges", "merges/s (loop)", "export s", "rest of process s", "process wall s",
                 "stage peaks (manifests) MB"]


def stage_rows(cells: dict[tuple[str, str], Cell], sizes: list[str], mb: dict[str, float]) -> list[list[str]]:
    rows = []
    for size in sizes:
        c = cells.get(("toktoktok", size))
        if c is None or not c.stages:
            continue
        parts = [c.stage("ingest"), c.stage("train"), c.stage("export")]
        wall = c.med("wall")
        rest = wall - sum(parts) if wall is not None and None not in parts else None  # type: ignore[arg-type]
        ingest, nbytes = c.stage("ingest"), c.stage("ingest_bytes")
        rows.append([f"{mb[size]:,.0f} MB", num(c.stage("documents"), 0), num(c.stage("distinct_pieces"), 0),
                     num(ingest, 2), num(nbytes / MB / ingest if ingest and nbytes else None, 0), num(c.stage("train"), 2),
                     num(c.stage("train_load"), 2), num(c.stage("merge_loop"), 2), num(c.stage("merges"), 0),
                     num(c.stage("merges_per_second"), 0), num(c.stage("export"), 2), num(rest, 2), num(wall, 2),
                     num(c.stage("peak_rss_mb"), 0)])
    return rows


GROWTH = {
    "wall": ("wall", None), "CPU": ("cpu", None), "true peak RSS": ("peak_mb", None),
    "toktoktok ingest": (None, "ingest"), "toktoktok merge loop": (None, "merge_loop"),
    "toktoktok train (load + loop)": (None, "train"), "toktoktok export": (None, "export"),
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


def report(args: argparse.Namespace, facts: dict[str, object], cells: dict[tuple[str, str], Cell],
           fixed: Measured | None, warm: Measured | None, scanner: dict[str, float] | None) -> str:
    manifest = facts["corpus"]
    assert isinstance(manifest, dict)
    sizes = [s for s in args.sizes if any((t, s) in cells for t in TRAINERS)]
    mb = {s: manifest["train"][s]["bytes"] / MB for s in SIZES}
    size_bytes = {s: manifest["train"][s]["bytes"] for s in SIZES}
    command = shlex.join(["benchmarks/run.py", *facts["argv"]])  # type: ignore[list-item]
    lines = [
        "# toktoktok at scale: the Linux kernel's source, 0.1 to 1.2 GB", "",
        *([f"**{args.note}**", ""] if args.note else []),
        f"Run {facts['date']}, commit {facts['commit']}, `{command}`.", "",
        "## The run", "",
        f"- machine: {facts['machine']}",
        f"- load average (1 / 5 / 15 min): {facts['load']} at start, {bench_report.load_average()} at the end",
        f"- versions: {bench_report.versions()}",
        f"- corpus: Debian's `{manifest['package']}` {manifest['version']} (`apt-get download`), built by "
        f"`benchmarks/scale_corpus.py`: {manifest['files']['kept']:,} UTF-8 files ({', '.join(manifest['suffixes'])}, "
        f"{', '.join(manifest['names'])}) in the order of a hash of their path, one file a document (stripped, "
        f"then a blank line); every {manifest['hold_out_every']}th file held out "
        f"({manifest['files']['heldout_files']:,} files, {manifest['heldout_bytes'] / MB:,.1f} MB); "
        "training prefixes: " + ", ".join(
            f"{manifest['train'][s]['bytes'] / MB:,.1f} MB ({manifest['train'][s]['files']:,} files)" for s in SIZES),
        f"- settings: vocabulary {args.tokens:,} = 256 bytes + {args.tokens - 256:,} merges, toktoktok's default "
        "pattern for every trainer, no special tokens, min_frequency 2 (toktoktok, HF; rustbpe has none); toktoktok "
        "`hardcoded_merges: false`, `heldout_share: 0`, `threads: -1`, a `working_set_mb` that keeps all text; "
        f"{args.reps} run(s) per point, medians shown" + (f"; not run: {', '.join(sorted(args.skip))}" if args.skip else ""),
        "",
        "Each trainer is one whole process (start-up, reading, training, writing its `.tiktoken`), measured from "
        "outside: CPU = user + system of it and its children; true peak RSS = the larger of `ru_maxrss` and the "
        "largest sum of resident sets over the process and its children, sampled from `/proc` every 50 ms "
        "(toktoktok's stages reset the kernel's high-water mark, so its `ru_maxrss` sees only the last stage; the "
        "sample catches the others). Held-out bytes/token: each `.tiktoken` with the default pattern in tiktoken, "
        "on the whole held-out file (higher is better).", "",
        "## Trainers", "",
        md_table(TRAINER_HEADERS, trainer_rows(cells, sizes, mb)), "",
    ]
    srows = stage_rows(cells, sizes, mb)
    if srows:
        lines += ["## Where toktoktok's time goes (its manifests)", "",
                  "ingest MB/s = bytes read ÷ the ingest stage's seconds (`seconds.total`, numba's cache load "
                  "included); merges/s = merges made ÷ the merge loop's seconds (`seconds.train` of the train "
                  "manifest; `train: load` reads the inventory). rest = process wall − the three stages: start-up, "
                  "imports, the config. Stage peaks: the largest `peak_rss_mb` the stages record themselves "
                  "(for comparison with the outside figure above).", "",
                  md_table(STAGE_HEADERS, srows), ""]
    if scanner:
        lines += ["## The limit ingest works against", "",
                  f"The scanner alone on the first {scanner['mb']:.0f} MB of the 0.1 GB training text, one thread, "
                  f"best of {scanner['repeat']} (`run.py --section scanner`, in this run): piece ends only "
                  f"(`scan`) **{scanner['scan_1']:,.0f} MB/s**; scan and count distinct pieces (`count_pieces`, "
                  f"what ingest does per batch) **{scanner['count_1']:,.0f} MB/s**; 2 threads + merge "
                  f"{scanner['count_2']:,.0f} MB/s.", ""]
    grows = growth_rows(cells, sizes, size_bytes)
    if grows:
        lines += ["## How each cost grows with size", "",
                  "k of a least-squares fit cost ∝ bytes^k over the sizes above (k = 1: linear).", "",
                  md_table(["cost", "at " + " / ".join(f"{mb[s]:,.0f} MB" for s in sizes), "k"], grows), ""]
    if fixed is not None:
        lines += [f"toktoktok's fixed part: a run on the first {TINY_BYTES / MB:.0f} MB of the smallest text "
                  f"(same config, numba's cache warm): {fixed.wall:.1f} s wall, {fixed.cpu:.1f} s CPU, true peak "
                  f"RSS {fixed.peak_mb:,.0f} MB."
                  + (f" The warm-up before it (numba compiles into an empty cache): {warm.wall:.1f} s wall." if warm
                     else ""), ""]
    lines += [f"All figures were measured in this run by `{command}`; none are copied from earlier runs.", ""]
    return "\n".join(lines)


# --- running it ----------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data", type=Path, default=scale_corpus.DEFAULT_OUT,
                        help="folder of the .deb and corpora (built when absent)")
    parser.add_argument("--sizes", default=",".join(SIZES), help=f"comma-separated: {','.join(SIZES)}")
    parser.add_argument("--trainers", default=",".join(TRAINERS), help="comma-separated: toktoktok,rustbpe,hf")
    parser.add_argument("--skip", default="", help="TRAINER@SIZE pairs not to run, e.g. hf@full")
    parser.add_argument("--reps", type=int, default=3, help="runs per point; medians are reported")
    parser.add_argument("--tokens", type=int, default=65536, help="vocabulary size incl. 256 bytes")
    parser.add_argument("--scanner-mb", type=int, default=100, help="MB of text for the scanner's rate, 0 to skip")
    parser.add_argument("--note", default="", help="a line printed in bold at the top of the report")
    parser.add_argument("--out", type=Path, default=HERE / "SCALE.md", help="the Markdown report")
    parser.add_argument("--work", type=Path, default=None, help="bench folder (default: a temp folder, removed)")


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="run.py --section scale", description=__doc__.split("\n", 1)[0])
    add_arguments(parser)
    args = parser.parse_args(argv)
    argv = ["--section", "scale", *argv]
    args.sizes = [s for s in args.sizes.split(",") if s]
    args.trainers = [t for t in args.trainers.split(",") if t]
    args.skip = {s for s in args.skip.split(",") if s}
    if set(args.sizes) - set(SIZES) or set(args.trainers) - set(TRAINERS) or args.reps < 1:
        sys.exit(f"--sizes takes {','.join(SIZES)}, --trainers {','.join(TRAINERS)}, --reps >= 1")
    manifest = scale_corpus.ensure(args.data)
    folder = args.data / "kernel"
    facts: dict[str, object] = {"date": bench_report.now(), "commit": bench_report.commit(), "argv": argv,
                                "machine": bench_report.machine(), "load": bench_report.load_average(),
                                "corpus": manifest}
    work = args.work or Path(tempfile.mkdtemp(prefix="toktok-scale-"))
    work.mkdir(parents=True, exist_ok=True)
    env = run_env(work / "numba-cache")
    shutil.rmtree(work / "numba-cache", ignore_errors=True)
    try:
        heldout = (folder / "heldout.txt").read_text(encoding="utf-8")
        chunks = heldout_chunks(heldout)
        tiny = corpus_of(tiny_corpus(folder / "train-0.1GB.txt", work), "tiny", heldout, TINY_BYTES)
        warm = fixed = None
        if "toktoktok" in args.trainers:
            log("warm-up: toktoktok on the tiny corpus, empty numba cache (compiles)")
            warm, _ = run_once("toktoktok", tiny, args.tokens, work / "tiny" / "warmup", env)
            fixed, _ = run_once("toktoktok", tiny, args.tokens, work / "tiny" / "fixed", env)
            log(f"  fixed part: {fixed.wall:.1f} s, {fixed.peak_mb:.0f} MB")
        scanner = None
        if args.scanner_mb:
            log(f"scanner: first {args.scanner_mb} MB of the 0.1 GB text")
            scanner = scanner_rates(folder / "train-0.1GB.txt", args.scanner_mb, work)
            log(f"  {scanner}")
        cells: dict[tuple[str, str], Cell] = {}
        text = ""
        for size in args.sizes:
            path = folder / f"train-{size}.txt"
            corpus = corpus_of(path, size, heldout, manifest["train"][size]["bytes"])
            todo = [t for t in args.trainers if f"{t}@{size}" not in args.skip]
            for rep in range(1, args.reps + 1):
                for trainer in todo:
                    cell = cells.setdefault((trainer, size), Cell(trainer, size))
                    run_folder = work / size / trainer / f"rep{rep}"
                    measured, out = run_once(trainer, corpus, args.tokens, run_folder, env)
                    cell.runs.append(measured)
                    if measured.returncode == 0 and out.exists():
                        cell.out = out
                        if trainer == "toktoktok":
                            cell.stages.append(toktok_stages(run_folder))
                    log(f"{size} rep {rep}/{args.reps} {trainer}: {measured.wall:.1f} s wall, {measured.cpu:.1f} s "
                        f"CPU, {measured.peak_mb:.0f} MB true peak"
                        + ("" if measured.returncode == 0 else f", FAILED (see {measured.log})"))
            for trainer in todo:
                cell = cells[(trainer, size)]
                if cell.out is not None:
                    from benchkit.toktok import default_pattern

                    cell.bytes_per_token = bytes_per_token(cell.out, chunks, default_pattern())
                    log(f"{size} {trainer}: held-out {cell.bytes_per_token:.4f} bytes/token")
            # the report so far after every size: an hour-long run stopped late still leaves its figures
            text = report(args, facts, cells, fixed, warm, scanner)
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(text, encoding="utf-8")
            log(f"wrote {args.out} (sizes so far: {', '.join(args.sizes[:args.sizes.index(size) + 1])})")
        print(text)
    finally:
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)
