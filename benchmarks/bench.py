#!/usr/bin/env python3
"""Benchmark toktoktok against Hugging Face ``tokenizers`` and ``rustbpe``.

    make bench                                   # = .venv/bin/python benchmarks/bench.py
    .venv/bin/python benchmarks/bench.py --mb 5 --tokens 4096 --reps 1 --out /tmp/RESULTS.md

What is compared: the three trainers, one after another, on the same text
(one plain ``.txt`` per corpus, split into the same documents at blank lines),
with the same pre-tokenization pattern (toktoktok's default, SPEC §4) and the
same vocabulary size (``--tokens``, default 32,768 = 256 bytes + 32,512
merges; toktoktok with ``hardcoded_merges: false``, ``heldout_share: 0``,
``min_frequency: 2``, no special tokens; Hugging Face with ``min_frequency=2``;
rustbpe has no such option).

Corpora (bench_corpus.py): the first ``--mb`` MB of each shared corpus
(``/work/shared/corpora/NAME.txt.zst``, found relative to this file), held-out
text from ``NAME.heldout.txt.zst``; without the shared corpora, the project's
demo corpus with its last 5% of documents held out.

How (bench_runs.py): every trainer runs as a whole separate process, from
start-up to its ``.tiktoken`` on disk: toktoktok as ``toktok run -c CFG
--force`` in a fresh work folder, the peers as ``peers.py hf|rustbpe``. Each
run is timed for wall time, CPU time (user + system, from ``os.wait4``) and
peak RSS (``ru_maxrss``; also the sampled peak of the whole process tree,
which counts toktoktok's worker processes together). toktoktok's numba code
is compiled once into a fresh ``NUMBA_CACHE_DIR`` by a warm-up run, reported
apart as "first run (numba compile)"; the timed runs load it from that cache.
Runs are repeated ``--reps`` times (trainers interleaved) and medians are
reported. toktoktok's per-stage seconds and merge-loop rate come from its
stage manifests.

Compression: each ``.tiktoken`` becomes a ``tiktoken.Encoding`` with the
default pattern; UTF-8 bytes per token on the held-out text (higher is
better). "first merges equal" counts how many of a peer's merges, in order,
match toktoktok's before the first difference; "tokens shared" is the share
of its tokens that toktoktok's vocabulary also has.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import os
import shutil
import statistics
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import bench_corpus
import bench_report
from bench_corpus import Corpus
from bench_report import md_table, num
from bench_runs import Measured, run_measured

HERE = Path(__file__).resolve().parent
TRAINERS = ("toktoktok", "hf", "rustbpe")
LABELS = {"toktoktok": "toktoktok", "hf": "HF tokenizers", "rustbpe": "rustbpe"}


@dataclass
class Outcome:
    """All runs of one trainer on one corpus, and what its vocabulary achieves."""

    trainer: str
    runs: list[Measured] = field(default_factory=list)
    files: list[Path] = field(default_factory=list)
    stages: list[dict[str, float]] = field(default_factory=list)
    bytes_per_token: float | None = None
    vocab: int | None = None
    first_equal: int | None = None
    shared: float | None = None

    @property
    def ok(self) -> list[Measured]:
        return [r for r in self.runs if r.returncode == 0]

    def spread(self, attr: str) -> str:
        values = [getattr(r, attr) for r in self.ok]
        return f"{min(values):.1f}–{max(values):.1f}" if len(values) > 1 else "–"

    def median(self, attr: str) -> float | None:
        values = [getattr(r, attr) for r in self.ok]
        return statistics.median(values) if values else None


# --- the trainers' commands ------------------------------------------------


def default_pattern() -> str:
    from toktoktok.patterns import NAMED_PATTERNS

    return NAMED_PATTERNS["default"].tiktoken


def toktok_bin() -> str:
    beside = Path(sys.executable).parent / "toktok"
    return str(beside) if beside.exists() else (shutil.which("toktok") or "toktok")


def toktok_config(corpus: Corpus, tokens: int, folder: Path) -> Path:
    """A config training ``corpus`` in one phase of ``tokens - 256`` merges."""
    cfg = {
        "output": str(folder / "toktoktok.tiktoken"),
        "work_dir": str(folder / "toktoktok.work"),
        "working_set_mb": max(1024, 8 * (corpus.train_bytes >> 20)),
        "hardcoded_merges": False,
        "heldout_share": 0,
        "min_frequency": 2,
        "seed": 0,
        "phases": [{"name": corpus.name, "merges": tokens - 256, "sources": [{"file": str(corpus.train)}]}],
    }
    path = folder / "bench.yaml"
    path.write_text(json.dumps(cfg, indent=2) + "\n", encoding="utf-8")  # JSON is YAML
    return path


def command(trainer: str, corpus: Corpus, tokens: int, folder: Path) -> tuple[list[str], Path]:
    """The command that trains ``trainer`` in ``folder``, and the .tiktoken it writes."""
    if trainer == "toktoktok":
        cfg = toktok_config(corpus, tokens, folder)
        return [toktok_bin(), "run", "-c", str(cfg), "--force"], folder / "toktoktok.tiktoken"
    out = folder / f"{trainer}.tiktoken"
    return [sys.executable, str(HERE / "peers.py"), trainer, "--corpus", str(corpus.train), "--tokens",
            str(tokens), "--pattern", default_pattern(), "--out", str(out)], out


def run_env(numba_cache: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["NUMBA_CACHE_DIR"] = str(numba_cache)
    return env


def run_once(trainer: str, corpus: Corpus, tokens: int, folder: Path, env: dict[str, str]) -> tuple[Measured, Path]:
    """One whole run of ``trainer`` in a fresh ``folder``."""
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    cmd, out = command(trainer, corpus, tokens, folder)
    measured = run_measured(cmd, folder / "log.txt", env=env)
    return measured, out


# --- what toktoktok's manifests say ----------------------------------------


def _manifests(work: Path, stage: str) -> list[dict[str, Any]]:
    return [json.loads(p.read_text()) for p in sorted((work / stage).glob("*/manifest.json"))]


def toktok_stages(folder: Path) -> dict[str, float]:
    """Seconds per stage, merges made and the merge-loop rate, from the manifests."""
    work = folder / "toktoktok.work"
    ingest = _manifests(work, "ingest")
    train = _manifests(work, "train")
    export = json.loads((work / "export" / "manifest.json").read_text())
    return {
        "ingest": sum(m["seconds"] for m in ingest),
        "train_load": sum(m["seconds"]["load"] for m in train),
        "merge_loop": sum(m["seconds"]["train"] for m in train),
        "train": sum(m["seconds"]["total"] for m in train),
        "export": sum(export["seconds"].values()),
        "merges": sum(m["counts"]["merges_made"] for m in train),
        "merges_per_second": sum(m["counts"]["merges_made"] for m in train)
        / max(sum(m["seconds"]["train"] for m in train), 1e-9),
        "peak_rss_mb": max(m.get("peak_rss_mb", 0) for m in [*ingest, *train, export]),
    }


# --- the vocabularies --------------------------------------------------------


def read_ranks(path: Path) -> dict[bytes, int]:
    """A .tiktoken file read by hand (tiktoken's loader caches by path)."""
    ranks = {}
    for line in path.read_bytes().splitlines():
        if line.strip():
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    return ranks


def bytes_per_token(ranks: dict[bytes, int], text: str) -> float:
    """UTF-8 bytes per token of ``text`` encoded with ``ranks`` and the default pattern."""
    import tiktoken

    enc = tiktoken.Encoding(name=f"bench-{id(ranks)}", pat_str=default_pattern(), mergeable_ranks=ranks,
                            special_tokens={})
    return len(text.encode("utf-8")) / max(1, len(enc.encode_ordinary(text)))


def merges_in_order(ranks: dict[bytes, int]) -> list[bytes]:
    return [token for token, _ in sorted(ranks.items(), key=lambda item: item[1]) if len(token) > 1]


def compare_merges(mine: list[bytes], theirs: list[bytes]) -> tuple[int, float]:
    """How many leading merges agree, and the share of ``theirs`` that ``mine`` also has."""
    first = 0
    for a, b in zip(mine, theirs):
        if a != b:
            break
        first += 1
    shared = len(set(mine) & set(theirs)) / max(1, len(theirs))
    return first, shared


def same_files(paths: list[Path]) -> bool:
    digests = {hashlib.sha256(p.read_bytes()).hexdigest() for p in paths}
    return len(digests) == 1


def score(outcomes: dict[str, Outcome], heldout: str) -> None:
    """Fill in compression and merge agreement from each trainer's last output."""
    merges: dict[str, list[bytes]] = {}
    for name, outcome in outcomes.items():
        if not outcome.files:
            continue
        ranks = read_ranks(outcome.files[-1])
        outcome.vocab = len(ranks)
        outcome.bytes_per_token = bytes_per_token(ranks, heldout)
        merges[name] = merges_in_order(ranks)
    if "toktoktok" in merges:
        for name, outcome in outcomes.items():
            if name in merges:
                outcome.first_equal, outcome.shared = compare_merges(merges["toktoktok"], merges[name])


# --- running it all ------------------------------------------------------------


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def run_corpus(corpus: Corpus, args: argparse.Namespace, work: Path, env: dict[str, str]) -> dict[str, Outcome]:
    """Every trainer ``args.reps`` times on ``corpus``, interleaved."""
    outcomes = {t: Outcome(t) for t in args.only}
    for rep in range(1, args.reps + 1):
        for trainer in args.only:
            folder = work / corpus.name / trainer / f"rep{rep}"
            measured, out = run_once(trainer, corpus, args.tokens, folder, env)
            outcome = outcomes[trainer]
            outcome.runs.append(measured)
            if measured.returncode == 0 and out.exists():
                outcome.files.append(out)
                if trainer == "toktoktok":
                    try:
                        outcome.stages.append(toktok_stages(folder))
                    except (OSError, KeyError, TypeError, ValueError) as exc:
                        log(f"  cannot read toktoktok's manifests in {folder}: {exc!r}")
            status = "ok" if measured.returncode == 0 else f"FAILED (exit {measured.returncode}, see {measured.log})"
            log(f"  {corpus.name} rep {rep}/{args.reps} {trainer}: {measured.wall:.1f} s wall, "
                f"{measured.cpu:.1f} s CPU, {measured.rss_mb:.0f} MB peak RSS, {status}")
    score(outcomes, corpus.heldout_text)
    return outcomes


def warm_up(corpus: Corpus, args: argparse.Namespace, work: Path, env: dict[str, str]) -> Measured:
    """One toktoktok run with an empty numba cache: it compiles and fills the cache."""
    log(f"  warm-up: toktoktok on {corpus.name} with an empty numba cache (compiles)")
    measured, _ = run_once("toktoktok", corpus, args.tokens, work / corpus.name / "toktoktok" / "warmup", env)
    log(f"  warm-up: {measured.wall:.1f} s wall, {measured.cpu:.1f} s CPU"
        + ("" if measured.returncode == 0 else f", FAILED (see {measured.log})"))
    return measured


# --- the report ------------------------------------------------------------------


def trainer_rows(outcomes: dict[str, Outcome], first: Measured | None) -> list[list[str]]:
    base = outcomes["toktoktok"].median("wall") if "toktoktok" in outcomes else None
    rows = []
    for name, o in outcomes.items():
        wall = o.median("wall")
        failed = len(o.runs) - len(o.ok)
        label = LABELS[name] + (f" ({failed} of {len(o.runs)} runs failed)" if failed else "")
        ratio = f"{wall / base:.2f}×" if wall is not None and base else "–"
        first_equal = "–" if o.first_equal is None or name == "toktoktok" else f"{o.first_equal:,}"
        shared = "–" if o.shared is None or name == "toktoktok" else f"{100 * o.shared:.1f}%"
        rows.append([label, num(wall), o.spread("wall"), num(o.median("cpu")), num(o.median("rss_mb"), 0),
                     num(o.median("tree_mb"), 0), num(o.vocab, 0), num(o.bytes_per_token, 3), ratio,
                     first_equal, shared])
    if first is not None:
        rows.append(["toktoktok, first run (numba compile)", num(first.wall), "–", num(first.cpu), num(first.rss_mb, 0),
                     num(first.tree_mb, 0), "–", "–", f"{first.wall / base:.2f}×" if base else "–", "–", "–"])
    return rows


TRAINER_HEADERS = ["trainer", "wall s", "wall min–max", "CPU s", "peak RSS MB", "tree peak MB", "vocab",
                   "held-out bytes/token", "wall ÷ toktoktok", "first merges = toktoktok", "tokens shared"]
STAGE_HEADERS = ["corpus", "ingest s", "train: load s", "train: merge loop s", "train s", "export s",
                 "process wall s", "merges", "merges/s (loop)", "peak RSS MB (manifests)"]


def stage_row(name: str, outcome: Outcome) -> list[str]:
    def med(key: str) -> float | None:
        values = [s[key] for s in outcome.stages]
        return statistics.median(values) if values else None

    return [name, num(med("ingest"), 2), num(med("train_load"), 2), num(med("merge_loop"), 2), num(med("train"), 2),
            num(med("export"), 2), num(outcome.median("wall"), 2), num(med("merges"), 0),
            num(med("merges_per_second"), 0), num(med("peak_rss_mb"), 0)]


def determinism(outcomes: dict[str, Outcome]) -> str:
    parts = []
    for name, o in outcomes.items():
        if len(o.files) > 1:
            parts.append(f"{LABELS[name]} {'identical' if same_files(o.files) else 'DIFFERENT'}")
    return ("Output files across repetitions: " + ", ".join(parts) + ".") if parts else ""


def load_average() -> str:
    return " / ".join(f"{x:.2f}" for x in os.getloadavg())


def report(args: argparse.Namespace, corpora: list[Corpus], results: dict[str, dict[str, Outcome]],
           first: Measured | None, facts: dict[str, str]) -> str:
    """The Markdown report; ``facts`` (date, machine, load) were taken at the start."""
    started = facts["date"]
    lines = [
        "# toktoktok benchmark", "",
        f"- date: {started}",
        f"- commit: {bench_report.commit()}",
        f"- machine: {facts['machine']}",
        f"- load average (1 / 5 / 15 min): {facts['load']} at start, {load_average()} at the end "
        "(other work on the machine makes wall times noisier than CPU times)",
        f"- versions: {bench_report.versions()}",
        f"- command: `{' '.join(['benchmarks/bench.py', *sys.argv[1:]])}`",
        f"- settings: vocabulary {args.tokens:,} = 256 bytes + {args.tokens - 256:,} merges, toktoktok's default "
        "pattern for every trainer, no special tokens, min_frequency 2 (toktoktok, HF; rustbpe has none), "
        "toktoktok `hardcoded_merges: false`, `heldout_share: 0`, `threads: -1`; "
        f"{args.reps} repetition(s), medians shown",
        "- corpora:",
        *[f"  - {c.name}: {c.description}" for c in corpora], "",
        "Each trainer is one whole process (start-up, reading, training, writing its `.tiktoken`). "
        "CPU s = user + system of the process and its waited-for children; peak RSS = `ru_maxrss` "
        "(largest single process); tree peak = largest sampled sum over the process and its live "
        "children (toktoktok's ingest workers). Held-out bytes/token: tiktoken with the default pattern "
        "(higher is better). wall ÷ toktoktok > 1 means slower than toktoktok.", "",
    ]
    for corpus in corpora:
        outcomes = results[corpus.name]
        lines += [f"## {corpus.name}", "", md_table(TRAINER_HEADERS, trainer_rows(
            outcomes, first if corpus is corpora[0] else None)), ""]
        note = determinism(outcomes)
        if note:
            lines += [note, ""]
    stage_rows = [stage_row(c.name, results[c.name]["toktoktok"]) for c in corpora
                  if "toktoktok" in results[c.name] and results[c.name]["toktoktok"].stages]
    if stage_rows:
        lines += ["## toktoktok stages (from its manifests, medians)", "", md_table(STAGE_HEADERS, stage_rows), ""]
    if first is not None:
        lines += [f"First run (numba compile, empty `NUMBA_CACHE_DIR`, on {corpora[0].name}): "
                  f"{first.wall:.1f} s wall, {first.cpu:.1f} s CPU; later runs load the compiled code from "
                  "that cache.", ""]
    lines += [f"All figures above were measured in this run ({started}, commit {bench_report.commit()}) by "
              "benchmarks/bench.py; none are copied from earlier runs.", ""]
    return "\n".join(lines)


# --- command line ------------------------------------------------------------------


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Benchmark toktoktok against HF tokenizers and rustbpe.")
    parser.add_argument("--mb", type=float, default=100, help="MB of each corpus to train on (default 100)")
    parser.add_argument("--tokens", type=int, default=32768, help="vocabulary size incl. 256 bytes (default 32768)")
    parser.add_argument("--reps", type=int, default=3, help="repetitions; medians are reported (default 3)")
    parser.add_argument("--corpora", default="english,code", help="comma-separated corpus names")
    parser.add_argument("--only", default=",".join(TRAINERS), help="comma-separated: toktoktok,hf,rustbpe")
    parser.add_argument("--out", type=Path, default=HERE / "RESULTS.md", help="the Markdown report")
    parser.add_argument("--work", type=Path, default=None, help="bench folder (default: a temp folder, removed)")
    parser.add_argument("--keep", action="store_true", help="keep the bench folder")
    args = parser.parse_args(argv)
    args.only = [t.strip() for t in args.only.split(",") if t.strip()]
    unknown = set(args.only) - set(TRAINERS)
    if unknown or not args.only:
        parser.error(f"--only takes {','.join(TRAINERS)}; got {','.join(sorted(unknown)) or 'nothing'}")
    args.corpora = [c.strip() for c in args.corpora.split(",") if c.strip()]
    if args.tokens <= 256 or args.reps < 1 or args.mb <= 0:
        parser.error("--tokens must be > 256, --reps >= 1, --mb > 0")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    facts = {"date": bench_report.now(), "machine": bench_report.machine(), "load": load_average()}
    work = args.work or Path(tempfile.mkdtemp(prefix="toktok-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    numba_cache = work / "numba-cache"
    shutil.rmtree(numba_cache, ignore_errors=True)  # the warm-up must compile
    env = run_env(numba_cache)
    try:
        log(f"preparing corpora in {work}")
        corpora = bench_corpus.prepare(args.corpora, args.mb, work)
        first = warm_up(corpora[0], args, work, env) if "toktoktok" in args.only else None
        results = {c.name: run_corpus(c, args, work, env) for c in corpora}
        text = report(args, corpora, results, first, facts)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text, encoding="utf-8")
        print(text)
        log(f"wrote {args.out}")
    finally:
        if args.work is None and not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
