"""The merge loop on 1 and more threads, on one phase's pieces: times, identity, and a projection.

    .venv/bin/python benchmarks/run.py --section merge-threads --config CONFIG [--threads 1,2] [--reps 3]

``CONFIG`` is a toktok config; its first phase is ingested (``toktok ingest``,
skipped when up to date) and its inventory trained with ``train_phase`` in a
fresh process per run (``numba.set_num_threads(t)``, the kernels loaded before
the clock starts), ``merges:`` of that phase or ``--merges``. Reported: the
loop proper (the first 1,000 merges, the later ones) at each thread count,
medians of ``--reps``, against 1 thread; whether every run learned the same
merges (sha256 of rank, left, right and count); and a projection of the loop
to more cores by Amdahl's law fitted to the 1- and 2-thread medians:
T(n) = S + P / n with P = 2 (T1 - T2) and S = T1 - P. The fit counts in S
whatever did not halve on 2 cores (the loop's serial steps, and the parallel
steps' own loss to memory and to starting threads), so it is a model, not a
measurement, of a machine with more cores.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from statistics import median

from benchkit.report import commit, load_average, machine, md_table, now, portable, versions
from benchkit.toktok import toktok_bin

HERE = Path(__file__).resolve().parents[1]
PROJECTED = (8, 32, 64)

CHILD = """
import hashlib, json, sys, time
import numba
import numpy as np
from toktoktok.config import load_config
from toktoktok.counts import inventory
from toktoktok.merge import load_merge_kernels, train_phase
from toktoktok.vocab import Vocab
from toktoktok_stages.workdir import Work

config, threads, merges = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
numba.set_num_threads(threads)
cfg = load_config(config)
phase = cfg.phases[0]
buf, off, counts = inventory(Work(cfg).ingest(phase).inventory())
load_merge_kernels()
began = time.perf_counter()
result = train_phase(Vocab.initial(hardcoded=cfg.hardcoded_merges), buf, off, counts, merges=merges or phase.merges,
                     min_frequency=cfg.min_frequency, max_token_bytes=cfg.max_token_bytes,
                     max_token_words=cfg.max_token_words_of(phase))
seconds = dict(result.seconds, whole=time.perf_counter() - began)
digest = hashlib.sha256()
for part in (result.rank, result.left, result.right, result.count):
    digest.update(np.ascontiguousarray(part).tobytes())
print(json.dumps({"seconds": seconds, "sha": digest.hexdigest()[:16], "merges": int(len(result.rank)),
                  "pieces": int(len(counts))}))
"""


def run_child(config: Path, threads: int, merges: int, env: dict[str, str] | None = None) -> dict:
    """One fresh process training ``config``'s first phase, ingested already, on ``threads`` threads."""
    done = subprocess.run([sys.executable, "-c", CHILD, str(config), str(threads), str(merges)],
                          capture_output=True, text=True, check=True, env=env)
    return json.loads(done.stdout.strip().splitlines()[-1])


def measure(config: Path, counts: list[int], reps: int, merges: int, env: dict[str, str] | None = None,
            say: Callable[[str], None] = print) -> dict[int, list[dict]]:
    """``reps`` runs at each of ``counts`` threads, the counts alternating, so that a slow spell of the
    machine hits each alike."""
    runs: dict[int, list[dict]] = {t: [] for t in counts}
    for rep in range(reps):
        for threads in counts:
            began = time.monotonic()
            runs[threads].append(run_child(config, threads, merges, env))
            say(f"rep {rep + 1}, {threads} thread(s): loop {loop_seconds(runs[threads][-1])[2]:.3f} s "
                f"({time.monotonic() - began:.0f} s in all)")
    return runs


def loop_seconds(run: dict) -> tuple[float, float, float]:
    s = run["seconds"]
    return s["early_merges"], s["later_merges"], s["early_merges"] + s["later_merges"]


def projection(t1: float, t2: float) -> list[tuple[int, float]]:
    """Amdahl's law through the 1- and 2-thread times (see the module's docstring).

        >>> projection(1.0, 0.75)
        [(8, 0.5625), (32, 0.515625), (64, 0.5078125)]
    """
    parallel = 2 * (t1 - t2)
    serial = t1 - parallel
    return [(n, serial + parallel / n) for n in PROJECTED]


def medians(runs: dict[int, list[dict]], threads: int) -> list[float]:
    """The medians at ``threads``: the first 1,000 merges, the later ones, the loop."""
    return [median(loop_seconds(r)[i] for r in runs[threads]) for i in range(3)]


def ratios(runs: dict[int, list[dict]], threads: int) -> tuple[float, float, float]:
    """The medians at ``threads`` against 1 thread: the first 1,000 merges, the later ones, the loop."""
    return tuple(t / o for t, o in zip(medians(runs, threads), medians(runs, 1)))  # type: ignore[return-value]


def thread_lines(runs: dict[int, list[dict]], reps: int) -> list[str]:
    """The table of loop times against 1 thread, whether the merges were identical, and the projection."""
    rows = [[str(threads)] + [f"{t:.3f}" for t in medians(runs, threads)] + [f"{x:.2f}" for x in ratios(runs, threads)]
            for threads in runs]
    shas = {r["sha"] for done in runs.values() for r in done}
    lines = [
        "Seconds of the loop proper (`train_split_seconds`: the first 1,000 merges, the later ones), medians of "
        f"{reps} runs, each in a fresh process; × 1: against 1 thread.",
        "",
        md_table(["threads", "first 1,000", "later", "loop", "first 1,000 × 1", "later × 1", "loop × 1"], rows),
        "",
        f"Merges: {'identical in every run' if len(shas) == 1 else 'DIFFERENT: ' + ', '.join(sorted(shas))} "
        f"(sha256 of rank, left, right, count: {sorted(shas)[0]}).",
    ]
    if 2 in runs:
        t1, t2 = medians(runs, 1)[2], medians(runs, 2)[2]
        parallel = 2 * (t1 - t2)
        lines += ["", "Projection of the loop (Amdahl's law through the 1- and 2-thread medians: "
                  f"T(n) = S + P / n, S = {t1 - parallel:.3f} s, P = {parallel:.3f} s; a model, not a measurement):",
                  "", md_table(["cores", "loop s", "× 1 thread"],
                               [[str(n), f"{t:.3f}", f"{t / t1:.2f}"] for n, t in projection(t1, t2)])]
    return lines


def report(args: argparse.Namespace, runs: dict[int, list[dict]]) -> str:
    first = runs[1][0]
    lines = [
        "# The merge loop on threads",
        "",
        f"Run {now()}, commit {commit()}, `benchmarks/run.py --section merge-threads "
        f"--threads {args.threads} --reps {args.reps}`.",
        "",
        f"- machine: {machine()}; load average at start {load_average()}",
        f"- versions: {versions()}",
        f"- inventory: the first phase of the config ({first['pieces']:,} distinct pieces), "
        f"{first['merges']:,} merges; {args.note}",
        "",
        *thread_lines(runs, args.reps),
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="run.py --section merge-threads", description=__doc__.split("\n", 1)[0])
    parser.add_argument("--config", type=Path, required=True, help="a toktok config; its first phase is measured")
    parser.add_argument("--threads", default="1,2", help="thread counts, 1 first")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--merges", type=int, default=0, help="merges (default: the phase's)")
    parser.add_argument("--note", default="", help="what the corpus is, for the report")
    parser.add_argument("--out", type=Path, default=HERE / "results" / "MERGE-THREADS.md")
    args = parser.parse_args(argv)
    counts = [int(t) for t in args.threads.split(",")]
    if counts[0] != 1:
        sys.exit("--threads must start with 1")
    subprocess.run([toktok_bin(), "ingest", "-c", str(args.config)], check=True, stdout=subprocess.DEVNULL)
    runs = measure(args.config, counts, args.reps, args.merges, say=lambda line: print(line, flush=True))
    text = portable(report(args, runs), args)
    args.out.write_text(text)
    print(text)
