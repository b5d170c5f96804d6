"""Benchmark toktoktok against Hugging Face ``tokenizers`` and ``rustbpe``.

    make bench              # = .venv/bin/python benchmarks/run.py --section peers
    .venv/bin/python benchmarks/run.py --section peers --quick --out /tmp/RESULTS.md   # small sizes, for development
    .venv/bin/python benchmarks/run.py --section peers --mb 5 --tokens 4096 --reps 1 --out /tmp/RESULTS.md

What is compared: the three trainers, one after another, on the same text
(one plain ``.txt`` per corpus, split into the same documents at blank lines),
with the same pre-tokenization pattern (toktoktok's default, docs/pretokenization.md) and the
same vocabulary size (``--tokens``, default 32,768 = 256 bytes + 32,512
merges; toktoktok with ``hardcoded_merges: false``, ``heldout_share: 0``,
``min_frequency: 2``, no special tokens; Hugging Face with ``min_frequency=2``;
rustbpe has no such option).

Corpora (benchkit/corpus.py): the first ``--mb`` MB of each shared corpus
(``/work/shared/corpora/NAME.txt.zst``, found relative to this file), held-out
text from ``NAME.heldout.txt.zst``; without the shared corpora, the project's
demo corpus with its last 5% of documents held out.

How (benchkit/measure.py): every trainer runs as a whole separate process, from
start-up to its ``.tiktoken`` on disk: toktoktok as ``toktok run -c CFG
--force`` in a fresh work folder, the peers as ``peer_trainers.py hf|rustbpe``.
Each run is measured from outside, every trainer alike: wall time, CPU time
(user + system, from ``os.wait4``) and true peak RSS, the larger of
``ru_maxrss`` and the sampled peak of the whole process tree (which counts
toktoktok's worker processes together, and sees every stage: toktoktok's
stages reset the kernel's high-water mark when they start, so its
``ru_maxrss`` alone sees only the last stage, export). The peaks toktoktok's
stage manifests record are shown apart, in its stage table. toktoktok's numba code
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

The parts of RESULTS.md, from the same invocation (``--parts``, default all):

- ``peers``: the comparison above (end-to-end wall, CPU, RSS, bytes/token);
- ``ingest`` (``sections/ingest.py``): toktoktok's ingest stage alone, ``threads``
  1 and 2, against a ``regex.findall`` + ``Counter`` loop (baseline_ingest.py),
  as stage seconds and as process wall time, per corpus;
- ``merges``: the merge-loop rate of the 32,512-merge runs (train manifests)
  and a ``--big-tokens`` (100,352: 100,096 merges) run on english (else the
  first corpus), which must finish (run with the scaling points when
  ``scaling`` is on);
- ``scaling`` (``sections/scaling.py``): time per stage against corpus size (10%,
  30%, 100% of ``--mb``) and against merges (8,192 / ``--tokens`` /
  ``--big-tokens`` vocabularies).

RESULTS.md opens with a summary block (``sections/targets.py``): each target,
the measured figure, met or not. ``--quick`` (5 MB, 8,192 tokens, 2
repetitions, no 100k run) is for development; its verdicts hold for its small
sizes only, not for the targets' 100 MB and 32,768 tokens.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import os
import shutil
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from benchkit import corpus as bench_corpus
from benchkit import report as bench_report
from benchkit.corpus import Corpus
from benchkit.measure import Measured, median_of
from benchkit.report import md_table, num
from benchkit.toktok import default_pattern, run_env, run_once, toktok_stages

from sections import ingest as bench_ingest
from sections import scaling as bench_scaling
from sections import targets as bench_targets
from sections.scaling import Point, Scaling

HERE = Path(__file__).resolve().parents[1]  # benchmarks/
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
        return median_of([getattr(r, attr) for r in self.ok])


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
                f"{measured.cpu:.1f} s CPU, {measured.peak_mb:.0f} MB true peak RSS, {status}")
    score(outcomes, corpus.heldout_text)
    return outcomes


def warm_up(corpus: Corpus, args: argparse.Namespace, work: Path, env: dict[str, str]) -> Measured:
    """One toktoktok run with an empty numba cache: it compiles and fills the cache."""
    log(f"  warm-up: toktoktok on {corpus.name} with an empty numba cache (compiles)")
    measured, _ = run_once("toktoktok", corpus, args.tokens, work / corpus.name / "toktoktok" / "warmup", env)
    log(f"  warm-up: {measured.wall:.1f} s wall, {measured.cpu:.1f} s CPU"
        + ("" if measured.returncode == 0 else f", FAILED (see {measured.log})"))
    return measured


def main_corpus(corpora: list[Corpus]) -> Corpus:
    """The corpus of the merge-rate and scaling runs: english when there, else the first."""
    return next((c for c in corpora if c.name == "english"), corpora[0])


def comparison_point(corpus: Corpus, args: argparse.Namespace, results: dict[str, dict[str, Outcome]]) -> Point | None:
    """toktoktok's runs of the comparison on ``corpus`` at ``--tokens``, as a Point."""
    outcome = results.get(corpus.name, {}).get("toktoktok")
    if outcome is None or not outcome.runs:
        return None
    return Point(corpus, args.tokens, runs=list(outcome.runs), stages=list(outcome.stages))


def run_scaling(corpus: Corpus, args: argparse.Namespace, work: Path, env: dict[str, str]) -> Scaling:
    """Every scaling point (and the big merge run), interleaved."""
    by_size = []
    for share in SCALING_SHARES:
        part = bench_corpus.head_of(corpus, args.mb * share, work / "corpora" / "scaling")
        if part.train_bytes < corpus.train_bytes:
            by_size.append(Point(part, args.tokens))
    main = Point(corpus, args.tokens)
    by_merges = [Point(corpus, t) for t in (args.small_tokens,) if t < args.tokens] + [main]
    if args.big_tokens:
        by_merges.append(Point(corpus, args.big_tokens))
    bench_scaling.run_points([*by_size, *by_merges], args.reps, work, env, log)
    return Scaling(by_size + [main], by_merges)


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
        rows.append([label, num(wall), o.spread("wall"), num(o.median("cpu")), num(o.median("peak_mb"), 0),
                     num(o.median("rss_mb"), 0), num(o.median("tree_mb"), 0), num(o.vocab, 0), num(o.bytes_per_token, 3), ratio,
                     first_equal, shared])
    if first is not None:
        rows.append(["toktoktok, first run (numba compile)", num(first.wall), "–", num(first.cpu), num(first.peak_mb, 0),
                     num(first.rss_mb, 0), num(first.tree_mb, 0), "–", "–", f"{first.wall / base:.2f}×" if base else "–", "–", "–"])
    return rows


TRAINER_HEADERS = ["trainer", "wall s", "wall min–max", "CPU s", "true peak RSS MB", "ru_maxrss MB", "tree peak MB",
                   "vocab",
                   "held-out bytes/token", "wall ÷ toktoktok", "first merges = toktoktok", "tokens shared"]
STAGE_HEADERS = ["corpus", "ingest s", "train: load s", "train: merge loop s", "train s", "export s",
                 "rest of process s", "process wall s", "share: ingest / train / export / rest", "merges",
                 "merges/s (loop)", "peak RSS MB (manifests)"]


def stage_row(name: str, outcome: Outcome) -> list[str]:
    def med(key: str) -> float | None:
        return median_of([s[key] for s in outcome.stages])

    wall = outcome.median("wall")
    parts = [med("ingest"), med("train"), med("export")]
    rest = wall - sum(parts) if wall is not None and None not in parts else None  # type: ignore[arg-type]
    share = ("–" if rest is None or not wall else
             " / ".join(f"{100 * x / wall:.0f}%" for x in [*parts, rest]))  # type: ignore[operator]
    return [name, num(med("ingest"), 2), num(med("train_load"), 2), num(med("merge_loop"), 2), num(med("train"), 2),
            num(med("export"), 2), num(rest, 2), num(wall, 2), share, num(med("merges"), 0),
            num(med("merges_per_second"), 0), num(med("peak_rss_mb"), 0)]


MERGE_HEADERS = ["run", "merges made / asked", "distinct pieces", "train: load s", "merge loop s",
                 "merges/s (loop)", "pieces visited", "per merge", "symbols scanned", "per merge", "process wall s"]


def merge_row(label: str, p: Point) -> list[str]:
    made, asked = p.med("merges"), p.med("merges_requested")
    visited, scanned = p.med("pieces_visited"), p.med("symbols_scanned")
    failed = f" ({p.failed} of {len(p.runs)} runs failed)" if p.failed else ""
    return [label + failed, f"{num(made, 0)} / {num(asked, 0)}", num(p.med("distinct_pieces"), 0),
            num(p.med("train_load"), 2), num(p.med("merge_loop"), 2), num(p.med("merges_per_second"), 0),
            num(visited, 0), num(visited / made if visited and made else None, 1), num(scanned, 0),
            num(scanned / made if scanned and made else None, 1), num(p.wall(), 2)]


def merge_section(f: "Findings", reps: int) -> list[str]:
    points = []
    if f.main is not None:
        points.append((f"{f.main.corpus.name} {f.main.mb:.1f} MB, {f.main.tokens:,} tokens"
                       + (" (the comparison's runs)" if f.main_from_comparison else ""), f.main))
    if f.scaling is not None and f.main_from_comparison:
        again = next((p for p in f.scaling.by_merges if p.tokens == f.main.tokens), None)  # type: ignore[union-attr]
        if again is not None:
            points.append((f"{again.corpus.name} {again.mb:.1f} MB, {again.tokens:,} tokens (the scaling runs)", again))
    if f.big is not None:
        points.append((f"{f.big.corpus.name} {f.big.mb:.1f} MB, {f.big.tokens:,} tokens", f.big))
    if not points:
        return []
    return ["## Merge-loop rate (train manifests)", "",
            f"Medians of {reps} repetition(s). merges/s = merges made ÷ the merge loop's seconds (the train "
            "manifest's `seconds.train`; loading the inventory is `train: load`). Pieces visited and symbols "
            "scanned are the merge loop's own counters (`counts.merge_loop_pieces_visited`, "
            "`merge_loop_symbols_scanned`): the words it touched, summed over all merges.", "",
            md_table(MERGE_HEADERS, [merge_row(label, p) for label, p in points]), ""]


def determinism(outcomes: dict[str, Outcome]) -> str:
    parts = []
    for name, o in outcomes.items():
        if len(o.files) > 1:
            parts.append(f"{LABELS[name]} {'identical' if same_files(o.files) else 'DIFFERENT'}")
    return ("Output files across repetitions: " + ", ".join(parts) + ".") if parts else ""


@dataclass
class Findings:
    """Everything one invocation measured."""

    corpora: list[Corpus]
    results: dict[str, dict[str, Outcome]]
    first: Measured | None = None
    ingest: list[bench_ingest.IngestResult] = field(default_factory=list)
    main: Point | None = None
    main_from_comparison: bool = False
    big: Point | None = None
    scaling: Scaling | None = None


def targets(args: argparse.Namespace, f: Findings) -> list[bench_targets.Target]:
    found = bench_targets.end_to_end(f.results) + bench_targets.ingest(f.ingest)
    if f.main is not None:
        found += bench_targets.merge_rate(f.main.corpus.name, f.main, f.big,
                                          f.scaling.by_merges if f.scaling is not None else None)
    found += bench_targets.compression(f.results)
    if f.scaling is not None and f.scaling.by_size:
        found += bench_targets.scaling(bench_scaling.verdicts(f.scaling))
    if f.first is not None and f.main is not None:
        found += bench_targets.numba(f.first, f.main.wall())
    return found


def caveat(args: argparse.Namespace, facts: dict[str, str]) -> str:
    notes = [f"Load average at the start {facts['load']} on {os.cpu_count()} CPUs (the machine is shared with other "
             "sessions: wall times and the thread scaling suffer when it is busy; CPU times less)."]
    if args.quick or args.mb != 100 or args.tokens != 32768:
        notes.insert(0, f"**This run used {args.mb:g} MB per corpus and {args.tokens:,} tokens"
                     + (" (`--quick`)" if args.quick else "")
                     + ", not the benchmark's 100 MB and 32,768 tokens: its verdicts are about these sizes only.**")
    return " ".join(notes)


def report(args: argparse.Namespace, f: Findings, facts: dict[str, str]) -> str:
    """The Markdown report; ``facts`` (date, machine, load) were taken at the start."""
    started, corpora, results, first = facts["date"], f.corpora, f.results, f.first
    lines = [
        "# toktoktok benchmark", "",
        f"Run {started}, commit {bench_report.commit()}, `{' '.join(['benchmarks/run.py', *sys.argv[1:]])}`; "
        "machine and settings below.", "",
        *bench_targets.block(targets(args, f), caveat(args, facts)),
        "## The run", "",
        f"- date: {started}",
        f"- commit: {bench_report.commit()}",
        f"- machine: {facts['machine']}",
        f"- load average (1 / 5 / 15 min): {facts['load']} at start, {bench_report.load_average()} at the end "
        "(other work on the machine makes wall times noisier than CPU times)",
        f"- versions: {bench_report.versions()}",
        f"- command: `{' '.join(['benchmarks/run.py', *sys.argv[1:]])}`",
        f"- settings: vocabulary {args.tokens:,} = 256 bytes + {args.tokens - 256:,} merges, toktoktok's default "
        "pattern for every trainer, no special tokens, min_frequency 2 (toktoktok, HF; rustbpe has none), "
        "toktoktok `hardcoded_merges: false`, `heldout_share: 0`, `threads: -1`; "
        f"{args.reps} repetition(s), medians shown; parts: {', '.join(args.parts)}",
        "- corpora:",
        *[f"  - {c.name}: {c.description}" for c in corpora], "",
    ]
    if results:
        lines += [
            "Each trainer is one whole process (start-up, reading, training, writing its `.tiktoken`). "
            "CPU s = user + system of the process and its waited-for children; true peak RSS = the larger of "
            "`ru_maxrss` (largest single process) and the tree peak (largest sum over the process and its live "
            "children, sampled from `/proc` every 50 ms), measured from outside for every trainer alike (toktoktok's "
            "stages reset the high-water mark that `ru_maxrss` reports, so for it the tree peak is the figure). Held-out bytes/token: tiktoken with the default pattern "
            "(higher is better). wall ÷ toktoktok > 1 means slower than toktoktok.", ""]
    for corpus in corpora:
        outcomes = results.get(corpus.name)
        if not outcomes:
            continue
        lines += [f"## {corpus.name}", "", md_table(TRAINER_HEADERS, trainer_rows(
            outcomes, first if corpus is corpora[0] else None)), ""]
        note = determinism(outcomes)
        if note:
            lines += [note, ""]
    stage_rows = [stage_row(c.name, results[c.name]["toktoktok"]) for c in corpora
                  if "toktoktok" in results.get(c.name, {}) and results[c.name]["toktoktok"].stages]
    if stage_rows:
        lines += ["## Where toktoktok's time goes (stages, from its manifests, medians)", "",
                  "rest of process = process wall − (ingest + train + export): Python start-up, imports, "
                  "loading numba's compiled code from its cache, reading the config.", "",
                  md_table(STAGE_HEADERS, stage_rows), ""]
    lines += bench_ingest.section(f.ingest, args.reps)
    lines += merge_section(f, args.reps)
    if f.scaling is not None:
        lines += bench_scaling.section(f.scaling, args.reps)
    if first is not None:
        lines += [f"First run (numba compile, empty `NUMBA_CACHE_DIR`, on {corpora[0].name}): "
                  f"{first.wall:.1f} s wall, {first.cpu:.1f} s CPU; later runs load the compiled code from "
                  "that cache.", ""]
    lines += [f"All figures above were measured in this run ({started}, commit {bench_report.commit()}) by "
              "benchmarks/run.py --section peers; none are copied from earlier runs.", ""]
    return "\n".join(lines)


# --- command line ------------------------------------------------------------------

SECTIONS = ("peers", "ingest", "merges", "scaling")
SCALING_SHARES = (0.1, 0.3)  # of --mb; the whole corpus is the third point
DEFAULTS = {"mb": 100.0, "tokens": 32768, "reps": 3, "small_tokens": 8192, "big_tokens": 100352}
QUICK = {"mb": 5.0, "tokens": 8192, "reps": 2, "small_tokens": 2048, "big_tokens": 0}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="run.py --section peers",
                                     description="Benchmark toktoktok against HF tokenizers and rustbpe.")
    parser.add_argument("--quick", action="store_true",
                        help="small sizes for development: 5 MB, 8,192 tokens, 2 reps, no 100k run")
    parser.add_argument("--mb", type=float, default=None, help="MB of each corpus to train on (default 100)")
    parser.add_argument("--tokens", type=int, default=None, help="vocabulary size incl. 256 bytes (default 32768)")
    parser.add_argument("--reps", type=int, default=None, help="repetitions; medians are reported (default 3)")
    parser.add_argument("--small-tokens", type=int, default=None,
                        help="the scaling table's smallest vocabulary (default 8192)")
    parser.add_argument("--big-tokens", type=int, default=None,
                        help="the big merge run's vocabulary, 0 to skip (default 100352 = 100,096 merges)")
    parser.add_argument("--parts", default=",".join(SECTIONS), help=f"comma-separated: {','.join(SECTIONS)}")
    parser.add_argument("--corpora", default="english,code", help="comma-separated corpus names")
    parser.add_argument("--only", default=",".join(TRAINERS), help="comma-separated: toktoktok,hf,rustbpe")
    parser.add_argument("--out", type=Path, default=HERE / "results" / "RESULTS.md", help="the Markdown report")
    parser.add_argument("--work", type=Path, default=None, help="bench folder (default: a temp folder, removed)")
    parser.add_argument("--keep", action="store_true", help="keep the bench folder")
    args = parser.parse_args(argv)
    for key, value in (QUICK if args.quick else DEFAULTS).items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    args.only = [t.strip() for t in args.only.split(",") if t.strip()]
    unknown = set(args.only) - set(TRAINERS)
    if unknown or not args.only:
        parser.error(f"--only takes {','.join(TRAINERS)}; got {','.join(sorted(unknown)) or 'nothing'}")
    args.parts = [t.strip() for t in args.parts.split(",") if t.strip()]
    unknown = set(args.parts) - set(SECTIONS)
    if unknown or not args.parts:
        parser.error(f"--parts takes {','.join(SECTIONS)}; got {','.join(sorted(unknown)) or 'nothing'}")
    args.corpora = [c.strip() for c in args.corpora.split(",") if c.strip()]
    if args.tokens <= 256 or args.reps < 1 or args.mb <= 0 or args.small_tokens <= 256:
        parser.error("--tokens and --small-tokens must be > 256, --reps >= 1, --mb > 0")
    if args.big_tokens and args.big_tokens <= 256:
        parser.error("--big-tokens must be > 256, or 0 to skip")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    facts = {"date": bench_report.now(), "machine": bench_report.machine(), "load": bench_report.load_average()}
    work = args.work or Path(tempfile.mkdtemp(prefix="toktok-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    numba_cache = work / "numba-cache"
    shutil.rmtree(numba_cache, ignore_errors=True)  # the warm-up must compile
    env = run_env(numba_cache)
    try:
        log(f"preparing corpora in {work}")
        corpora = bench_corpus.prepare(args.corpora, args.mb, work)
        needs_toktok = "toktoktok" in args.only or set(args.parts) - {"peers"}
        f = Findings(corpora, {})
        f.first = warm_up(corpora[0], args, work, env) if needs_toktok else None
        if "peers" in args.parts:
            f.results = {c.name: run_corpus(c, args, work, env) for c in corpora}
        if "ingest" in args.parts:
            f.ingest = [bench_ingest.run_corpus(c, args.reps, work, env, log) for c in corpora]
        main_c = main_corpus(corpora)
        if "scaling" in args.parts:
            f.scaling = run_scaling(main_c, args, work, env)
            f.big = next((p for p in f.scaling.by_merges if p.tokens == args.big_tokens), None)
        elif "merges" in args.parts and args.big_tokens:
            f.big = bench_scaling.run_points([Point(main_c, args.big_tokens)], args.reps, work, env, log)[0]
        f.main = comparison_point(main_c, args, f.results)
        f.main_from_comparison = f.main is not None
        if f.main is None and f.scaling is not None:
            f.main = next(p for p in f.scaling.by_merges if p.tokens == args.tokens)
        elif f.main is None and "merges" in args.parts:
            f.main = bench_scaling.run_points([Point(main_c, args.tokens)], args.reps, work, env, log)[0]
        text = bench_report.portable(report(args, f, facts), args)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text, encoding="utf-8")
        print(text)
        log(f"wrote {args.out}")
    finally:
        if args.work is None and not args.keep:
            shutil.rmtree(work, ignore_errors=True)
