"""Superword: a subword phase up to a transition point, a superword phase after it, against one plain phase.

    make bench-superword
    .venv/bin/python benchmarks/run.py --section superword [--mb 100] [--tokens 65536]
        [--transitions 16384,32768,49152] [--reps 3] [--out results/SUPERWORD.md]

The text: the shared corpora's English prose (``english.txt.zst``, its first
``--mb`` MB; held out: ``english.heldout.txt.zst``, documents never trained
on). Every run is ``toktok run -c CFG --force`` as a whole process in a fresh
folder, measured from outside (``benchkit.measure``: wall, true peak RSS),
with ``heldout_share: 0``, ``hardcoded_merges: false``, a ``working_set_mb``
that keeps all text, and ``--tokens`` ranks in all:

- plain: one phase of ``tokens - 256`` merges, the default pattern;
- superword after T: a phase of ``T - 256`` merges with the default
  pattern, then one of ``tokens - T`` merges with ``pattern: superword`` and
  ``max_token_words: 4`` (SuperBPE's transition point T, its bound on words).

Before the measured runs, one superword run on 2 MB fills numba's cache and
one plain run reads the corpus, neither reported: the first run to read a
freshly written corpus was the slowest (a plain run took 3.3 s against
2.5 s after it), and with one run of each it was always plain's. The runs go
in rounds, one of each tokenizer a round, and a ratio to plain is the
median of the ratios within a round: this machine's speed drifts (the
plain run took 3.6 s in one bench and 4.9 s in the next, an hour later),
and rounds put every tokenizer under the same drift.

Each tokenizer then encodes the held-out text (``encode_ordinary``): tokens,
bytes per token, how many fewer tokens than plain, the share of tokens that
span more than one word, and the most used of those.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchkit import report as bench_report
from benchkit.corpus import SHARED_CORPORA, Corpus, shared_corpus
from benchkit.measure import Measured, median_of, run_measured
from benchkit.report import md_table, num
from benchkit.toktok import fresh, run_env, stage_manifests, toktok_bin

HERE = Path(__file__).resolve().parents[1]  # benchmarks/
MAX_WORDS = 4
TOP = 20


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


@dataclass
class Result:
    name: str
    transition: int | None
    measured: list[Measured]
    phases: list[dict[str, Any]]  # per phase: name, merges made, ingest s, train s, distinct pieces
    tokens: int
    heldout_bytes: int
    multi_share: float
    top: list[tuple[bytes, int]]


def config(corpus: Corpus, folder: Path, tokens: int, transition: int | None) -> Path:
    """One plain phase (``transition`` None), or a subword phase to ``transition`` and a superword one after."""
    source = [{"file": str(corpus.train)}]
    if transition is None:
        phases = [{"name": "words", "merges": tokens - 256, "sources": source}]
    else:
        phases = [{"name": "words", "merges": transition - 256, "sources": source},
                  {"name": "superwords", "merges": tokens - transition, "pattern": "superword",
                   "max_token_words": MAX_WORDS, "sources": source}]
    cfg = {"output": str(folder / "toktoktok.tiktoken"), "work_dir": str(folder / "toktoktok.work"),
           "working_set_mb": max(1024, 16 * (corpus.train_bytes >> 20)), "hardcoded_merges": False,
           "heldout_share": 0, "seed": 0, "phases": phases}
    path = folder / "bench.yaml"
    path.write_text(json.dumps(cfg, indent=2) + "\n", encoding="utf-8")  # JSON is YAML
    return path


def phases_of(folder: Path) -> list[dict[str, Any]]:
    """Per phase, from the stage manifests: merges made, ingest and train seconds, distinct pieces,
    and the train's steps (segmenting, counting pairs, merging, the check)."""
    work = folder / "toktoktok.work"
    ingest = stage_manifests(work, "ingest")
    train = stage_manifests(work, "train")
    return [{"name": t["phase"], "merges": t["counts"]["merges_made"], "ingest": i["seconds"]["total"],
             "train": t["seconds"]["total"], "distinct": t["counts"]["distinct_pieces"],
             "steps": t.get("train_split_seconds") or {}} for i, t in zip(ingest, train)]


def encode_heldout(tiktoken_file: Path, text: str) -> tuple[int, float, list[tuple[bytes, int]]]:
    """Held-out tokens, the share of them spanning more than one word, the most used such tokens."""
    import toktoktok

    enc = toktoktok.load(tiktoken_file)
    ids = enc.encode_ordinary(text)
    used = Counter(ids)
    multi = [(enc.decode_single_token_bytes(i), n) for i, n in used.most_common()
             if len(enc.decode_single_token_bytes(i).split()) > 1]
    return len(ids), sum(n for _, n in multi) / max(1, len(ids)), multi[:TOP]


def run_once(corpus: Corpus, work: Path, tokens: int, transition: int | None, rep: int, reps: int,
             env: dict[str, str]) -> tuple[Measured, Path]:
    """Run ``rep`` of one tokenizer: a whole ``toktok run`` in a fresh folder."""
    name = label(transition)
    folder = fresh(work / (name.replace(" ", "-").replace(",", "") + f"-{rep}"))
    log(f"  {name}, run {rep + 1} of {reps}")
    m = run_measured([toktok_bin(), "run", "-c", str(config(corpus, folder, tokens, transition)), "--force"],
                     folder / "log.txt", env=env)
    if m.returncode:
        raise SystemExit(f"{name} failed: see {m.log}")
    return m, folder


def label(transition: int | None) -> str:
    return "plain" if transition is None else f"superword after {transition:,}"


def run_rounds(corpus: Corpus, work: Path, tokens: int, transitions: list[int | None], reps: int,
               env: dict[str, str]) -> list[Result]:
    """``reps`` rounds, each one run of every tokenizer in turn, so that a machine
    whose speed drifts during the bench slows every tokenizer alike (runs of
    one tokenizer after another put the drift between them)."""
    measured: dict[int | None, list[Measured]] = {t: [] for t in transitions}
    last: dict[int | None, Path] = {}
    for rep in range(reps):
        for t in transitions:
            m, last[t] = run_once(corpus, work, tokens, t, rep, reps, env)
            measured[t].append(m)
    results = []
    for t in transitions:
        count, share, top = encode_heldout(last[t] / "toktoktok.tiktoken", corpus.heldout_text)
        results.append(Result(label(t), t, measured[t], phases_of(last[t]), count, len(corpus.heldout_text.encode()),
                              share, top))
    return results


def paired(values: list[float], base: list[float]) -> float:
    """The median of the ratios of the same round's figures."""
    return median_of([v / b for v, b in zip(values, base)])


def report(args: argparse.Namespace, run: dict[str, str], corpus: Corpus, results: list[Result]) -> str:
    plain = results[0]
    walls0 = [m.wall for m in plain.measured]
    peaks0 = [m.peak_mb for m in plain.measured]
    rows = []
    for r in results:
        walls = [m.wall for m in r.measured]
        peaks = [m.peak_mb for m in r.measured]
        rows.append([r.name, f"{r.tokens:,}", num(r.heldout_bytes / r.tokens, 3),
                     f"{(1 - r.tokens / plain.tokens) * 100:.1f}%", f"{r.multi_share * 100:.1f}%",
                     num(median_of(walls), 2), num(paired(walls, walls0), 2), num(median_of(peaks), 0),
                     num(paired(peaks, peaks0), 2)])
    def steps(p: dict[str, Any]) -> list[str]:
        s = p["steps"]
        merging = s.get("early_merges", 0) + s.get("later_merges", 0)
        return [num(s.get("segment", 0), 2), num(s.get("pairs", 0), 2), num(merging, 2), num(s.get("check", 0), 2)]

    phase_rows = [[r.name, p["name"], f"{p['merges']:,}", f"{p['distinct']:,}", num(p["ingest"], 2), num(p["train"], 2),
                   *steps(p)] for r in results for p in r.phases]
    best = min(results[1:], key=lambda r: r.tokens) if len(results) > 1 else None
    text = corpus.description.replace(str(SHARED_CORPORA) + "/", "the shared corpora's ")
    lines = [
        "# Superword phases", "",
        f"Run {run['date']}, commit {run['commit']}, `{run['command']}`.", "",
        f"- machine: {run['machine']}; load average at start {run['load']}",
        f"- versions: {run['versions']}",
        f"- text: {text}",
        f"- {args.tokens:,} ranks in all (no special tokens); `max_token_words: {MAX_WORDS}` in the superword phase; "
        f"{args.reps} round(s) after an unreported plain run, each one run of every tokenizer in this order; "
        "medians", "",
        "Held-out: the held-out English encoded with `encode_ordinary`. Fewer: held-out tokens fewer than plain's. "
        "Multi-word: the share of held-out tokens that span more than one word (a word: a run of non-space bytes). "
        "Wall and peak: the whole `toktok run` process (ingest of every phase, training, export and its checks), "
        "measured from outside; × plain: the median over rounds of the run's figure divided by the plain run's "
        "of the same round.", "",
        md_table(["run", "held-out tokens", "bytes/token", "fewer", "multi-word", "wall s", "× plain", "peak MB",
                  "× plain"], rows), "",
        "Per phase, from the stage manifests of the last run of each (seconds inside the process; the train's "
        "steps: segmenting the pieces with the vocabulary so far, counting their pairs, the merge loop, the check "
        "that tiktoken's rule gives the trainer's tokens):", "",
        md_table(["run", "phase", "merges", "distinct pieces", "ingest s", "train s", "segment", "pairs", "merging",
                  "check"], phase_rows), "",
    ]
    if best is not None:
        tops = ", ".join(f"`{t.decode('utf-8', 'replace')!r}` ({n:,})" for t, n in best.top)
        lines += [f"The {TOP} most used multi-word tokens of {best.name} on the held-out text: {tops}.", ""]
    return "\n".join(lines)


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="run.py --section superword", description=__doc__.split("\n", 1)[0])
    parser.add_argument("--mb", type=float, default=100, help="the first MB (2^20 bytes) of the English text")
    parser.add_argument("--tokens", type=int, default=65536, help="ranks in all")
    parser.add_argument("--transitions", default="16384,32768,49152",
                        help="comma-separated vocabulary sizes where the superword phase starts")
    parser.add_argument("--reps", type=int, default=3, help="runs of each; medians are reported")
    parser.add_argument("--out", type=Path, default=HERE / "results" / "SUPERWORD.md")
    parser.add_argument("--work", type=Path, default=None, help="bench folder (default: a temp folder, removed)")
    args = parser.parse_args(argv)
    transitions = [int(t) for t in args.transitions.split(",") if t]
    if args.reps < 1 or any(not 256 < t < args.tokens for t in transitions):
        sys.exit("--reps takes 1 or more; each transition lies between 256 and --tokens")
    run = {"date": bench_report.now(), "commit": bench_report.commit(), "machine": bench_report.machine(),
           "load": bench_report.load_average(), "versions": bench_report.versions(),
           "command": " ".join(["benchmarks/run.py", "--section", "superword", *argv])}
    work = args.work or Path(tempfile.mkdtemp(prefix="toktok-superword-"))
    work.mkdir(parents=True, exist_ok=True)
    env = run_env(work / "numba-cache")
    try:
        corpus = shared_corpus("english", args.mb, fresh(work / "corpus"))
        log(f"superword: {corpus.description}")
        log("warm-up: the first superword run with an empty numba cache (compiles), not reported")
        shutil.rmtree(work / "numba-cache", ignore_errors=True)
        small = shared_corpus("english", 2, fresh(work / "small"))
        run_once(small, work / "warmup", 4096, 2048, 0, 1, env)
        log("warm-up: one plain run on the corpus, not reported (the first run to read it took 0.7 s more)")
        run_once(corpus, work / "warmup", args.tokens, None, 0, 1, env)
        results = run_rounds(corpus, work, args.tokens, [None, *transitions], args.reps, env)
        block = bench_report.portable(report(args, run, corpus, results), args)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(block, encoding="utf-8")
        log(f"wrote {args.out}")
        print(block)
    finally:
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)
