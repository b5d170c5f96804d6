"""Ingest alone: toktoktok's ingest stage against a ``regex.findall`` + ``Counter`` loop.

For each corpus and each repetition, interleaved, three whole processes on the
same ``.txt``:

- the baseline, ``baseline_ingest.py`` (one Python process, ``regex.findall``
  per document into a ``collections.Counter``);
- ``toktok ingest -c CFG --force`` with ``threads: 1``;
- the same with ``threads: 2``.

Each is measured two ways: the process's wall time (start-up, imports and
numba's cache load included) and the stage's own seconds, timed inside the
process (toktoktok's ingest manifest ``seconds.ingest``, without loading
numba's code, ``seconds.kernels``; the baseline's own report, from opening
the file to the last count). MB/s = the corpus's bytes (decimal MB) over the
median seconds. The baseline's piece total and distinct-piece count are
checked against toktoktok's manifest (same pieces found).
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from benchkit.corpus import MB, Corpus
from benchkit.measure import Measured, median_of, run_measured
from benchkit.report import md_table, num
from benchkit.toktok import HERE, default_pattern, fresh, ingest_manifest, run_ingest

KINDS = ("baseline", "threads 1", "threads 2")
LABELS = {"baseline": "regex.findall + Counter (1 process)", "threads 1": "toktoktok ingest, threads: 1",
          "threads 2": "toktoktok ingest, threads: 2"}


@dataclass
class IngestRuns:
    """The runs of one kind (baseline or a thread count) on one corpus."""

    kind: str
    runs: list[Measured] = field(default_factory=list)
    stage: list[dict[str, float]] = field(default_factory=list)  # seconds, pieces, distinct (from inside)

    @property
    def failed(self) -> int:
        return sum(1 for r in self.runs if r.returncode != 0)

    def wall(self) -> float | None:
        return median_of([r.wall for r in self.runs if r.returncode == 0])

    def cpu(self) -> float | None:
        return median_of([r.cpu for r in self.runs if r.returncode == 0])

    def rss(self) -> float | None:
        return median_of([max(r.rss_mb, r.tree_mb) for r in self.runs if r.returncode == 0])

    def seconds(self) -> float | None:
        return median_of([s["seconds"] for s in self.stage])

    def spread(self) -> str:
        values = [s["seconds"] for s in self.stage]
        return f"{min(values):.2f}–{max(values):.2f}" if len(values) > 1 else "–"


@dataclass
class IngestResult:
    corpus: Corpus
    kinds: dict[str, IngestRuns]

    def mb_per_s(self, kind: str, how: str) -> float | None:
        runs = self.kinds[kind]
        seconds = runs.seconds() if how == "stage" else runs.wall()
        return self.corpus.train_bytes / MB / seconds if seconds else None

    def ratio(self, kind: str, over: str, how: str) -> float | None:
        a, b = self.mb_per_s(kind, how), self.mb_per_s(over, how)
        return a / b if a and b else None

    def same_pieces(self) -> str:
        base = self.kinds["baseline"].stage
        mine = [s for k in ("threads 1", "threads 2") for s in self.kinds[k].stage]
        if not base or not mine:
            return "–"
        want = (base[-1]["pieces"], base[-1]["distinct"])
        return "yes" if all((s["pieces"], s["distinct"]) == want for s in mine) else "NO"


def run_baseline(corpus: Corpus, folder: Path) -> tuple[Measured, dict[str, float] | None]:
    out = fresh(folder) / "baseline.json"
    cmd = [sys.executable, str(HERE / "sections" / "baseline_ingest.py"), "--corpus", str(corpus.train), "--pattern",
           default_pattern(), "--out", str(out)]
    measured = run_measured(cmd, folder / "log.txt")
    got = json.loads(out.read_text()) if measured.returncode == 0 and out.exists() else None
    return measured, got


def run_corpus(corpus: Corpus, reps: int, work: Path, env: dict[str, str],
               log: Callable[[str], None]) -> IngestResult:
    """Baseline, threads 1 and threads 2, ``reps`` times, interleaved."""
    kinds = {k: IngestRuns(k) for k in KINDS}
    for rep in range(1, reps + 1):
        for kind in KINDS:
            folder = work / "ingest" / corpus.name / kind.replace(" ", "") / f"rep{rep}"
            if kind == "baseline":
                measured, stage = run_baseline(corpus, folder)
            else:
                measured = run_ingest(corpus, int(kind.split()[1]), folder, env)
                stage = None
                if measured.returncode == 0:
                    try:
                        stage = ingest_manifest(folder)
                    except (OSError, KeyError, TypeError, ValueError) as exc:
                        log(f"  cannot read the ingest manifest in {folder}: {exc!r}")
            kinds[kind].runs.append(measured)
            if stage is not None:
                kinds[kind].stage.append(stage)
            inside = f"{stage['seconds']:.2f} s inside" if stage else f"FAILED (see {measured.log})"
            log(f"  ingest {corpus.name} rep {rep}/{reps} {kind}: {measured.wall:.2f} s wall, "
                f"{measured.cpu:.2f} s CPU, {inside}")
    return IngestResult(corpus, kinds)


HEADERS = ["corpus", "ingest by", "stage s (inside)", "min–max", "stage MB/s", "× baseline (stage)",
           "process wall s", "process MB/s", "× baseline (process)", "CPU s", "peak RSS MB"]


def rows(result: IngestResult) -> list[list[str]]:
    out = []
    for kind, runs in result.kinds.items():
        label = LABELS[kind] + (f" ({runs.failed} of {len(runs.runs)} runs failed)" if runs.failed else "")
        ratio_stage = result.ratio(kind, "baseline", "stage")
        ratio_wall = result.ratio(kind, "baseline", "wall")
        out.append([result.corpus.name, label, num(runs.seconds(), 2), runs.spread(),
                    num(result.mb_per_s(kind, "stage"), 1), "–" if ratio_stage is None else f"{ratio_stage:.1f}×",
                    num(runs.wall(), 2), num(result.mb_per_s(kind, "wall"), 1),
                    "–" if ratio_wall is None else f"{ratio_wall:.1f}×", num(runs.cpu(), 2), num(runs.rss(), 0)])
    return out


def scaling_rows(results: list[IngestResult]) -> list[list[str]]:
    out = []
    for r in results:
        stage, wall = r.ratio("threads 2", "threads 1", "stage"), r.ratio("threads 2", "threads 1", "wall")
        out.append([r.corpus.name, "–" if stage is None else f"{stage:.2f}×", "–" if wall is None else f"{wall:.2f}×",
                    r.same_pieces()])
    return out


def section(results: list[IngestResult], reps: int) -> list[str]:
    """The report's ingest section."""
    if not results:
        return []
    lines = [
        "## Ingest alone: toktoktok against `regex.findall` + `Counter`", "",
        "Whole processes on the same `.txt`, interleaved, medians of "
        f"{reps} repetition(s). \"stage s (inside)\" is timed inside the process: toktoktok's ingest "
        "manifest `seconds.ingest` (read, cut, pre-tokenize, count, write the chunk files; loading numba's "
        "compiled code from its cache, `seconds.kernels`, is timed apart, as the train stage does); the "
        "baseline's own "
        "clock from opening the file to the last count (`benchmarks/sections/baseline_ingest.py`: "
        "`Counter.update(regex.findall(DEFAULT_PATTERN, doc))` per document). \"process wall\" adds "
        "Python's start-up and imports (and, for toktoktok, loading numba's compiled code from its cache). "
        "MB = 10^6 bytes of the training file. Peak RSS = max(`ru_maxrss`, sampled tree).", "",
        md_table(HEADERS, [row for r in results for row in rows(r)]), "",
        md_table(["corpus", "threads 2 ÷ threads 1 (stage MB/s)", "threads 2 ÷ threads 1 (process MB/s)",
                  "same pieces and distinct pieces as the baseline"], scaling_rows(results)), "",
    ]
    return lines
