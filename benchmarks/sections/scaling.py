"""toktoktok's time per stage against corpus size and against merges (the scaling table of RESULTS.md).

Points (whole ``toktok run`` processes, ``--reps`` each, medians; stage
seconds from the manifests):

- corpus size: the first 10%, 30% and 100% of the first corpus (english when
  present; 10, 30 and 100 MB by default) at ``--tokens``;
- merges: on the whole of it, at 8,192, ``--tokens`` and ``--big-tokens``
  vocabulary sizes (7,936, 32,512 and 100,096 merges by default).

All points are run here, interleaved repetition by repetition (the whole
corpus at ``--tokens`` again too, rather than borrowing the comparison's
runs, which ran at another time under another load); the ``--big-tokens``
point is also the merge-rate section's 100k run. How a stage's time grows: the exponent ``k`` of a
least-squares fit ``seconds ∝ size^k`` on log-log axes over the points
(k = 1 linear, k < 1 sub-linear).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from benchkit.corpus import MB, Corpus
from benchkit.measure import Measured, exponent, median_of
from benchkit.report import md_table, num
from benchkit.toktok import run_once, toktok_stages


@dataclass
class Point:
    """toktoktok runs at one corpus size and one vocabulary size."""

    corpus: Corpus
    tokens: int
    runs: list[Measured] = field(default_factory=list)
    stages: list[dict[str, float]] = field(default_factory=list)

    @property
    def failed(self) -> int:
        return sum(1 for r in self.runs if r.returncode != 0)

    @property
    def mb(self) -> float:
        return self.corpus.train_bytes / MB

    def med(self, key: str) -> float | None:
        return median_of([s[key] for s in self.stages])

    def wall(self) -> float | None:
        return median_of([r.wall for r in self.runs if r.returncode == 0])

    def rss(self) -> float | None:
        return median_of([max(r.rss_mb, r.tree_mb) for r in self.runs if r.returncode == 0])

    def rest(self) -> float | None:
        """Process wall time outside the three stages: start-up, imports, numba cache load, config."""
        wall, parts = self.wall(), [self.med(k) for k in ("ingest", "train", "export")]
        return wall - sum(parts) if wall is not None and None not in parts else None  # type: ignore[arg-type]


def run_rep(point: Point, rep: int, reps: int, work: Path, env: dict[str, str], log: Callable[[str], None]) -> None:
    """One more whole ``toktok run`` at ``point``."""
    folder = work / "scaling" / f"{point.mb:g}mb-{point.tokens}" / f"rep{rep}"
    measured, out = run_once("toktoktok", point.corpus, point.tokens, folder, env)
    point.runs.append(measured)
    stages = None
    if measured.returncode == 0 and out.exists():
        try:
            stages = toktok_stages(folder)
            point.stages.append(stages)
        except (OSError, KeyError, TypeError, ValueError) as exc:
            log(f"  cannot read toktoktok's manifests in {folder}: {exc!r}")
    what = (f"{stages['merges']:,.0f} merges, {stages['merges_per_second']:,.0f} merges/s"
            if stages else f"FAILED (see {measured.log})")
    log(f"  toktoktok {point.mb:.1f} MB, {point.tokens:,} tokens, rep {rep}/{reps}: {measured.wall:.1f} s wall, "
        f"{measured.cpu:.1f} s CPU, {what}")


def run_points(points: list[Point], reps: int, work: Path, env: dict[str, str],
               log: Callable[[str], None]) -> list[Point]:
    """``reps`` runs of every point, interleaved (rep 1 of each, then rep 2 ...), so that the machine's
    load falls alike on all of them."""
    for rep in range(1, reps + 1):
        for point in points:
            run_rep(point, rep, reps, work, env, log)
    return points


HEADERS = ["corpus MB", "merges", "distinct pieces", "ingest s", "ingest MB/s", "train: load s",
           "train: merge loop s", "train s", "export s", "rest of process s", "process wall s", "CPU s",
           "peak RSS MB", "merges/s (loop)", "pieces visited per merge"]
MARGINAL = {"by_size": "ingest MB/s, marginal (Δ MB ÷ Δ ingest s from the row above)",
            "by_merges": "merges/s, marginal (Δ merges ÷ Δ merge loop s from the row above)"}


def marginal(points: list[Point], x: Callable[[Point], float | None], key: str) -> list[str]:
    """Δx ÷ Δ(stage seconds) between each row and the one above: the rate once fixed costs are paid."""
    out = ["–"]
    for a, b in zip(points, points[1:]):
        xa, xb, ya, yb = x(a), x(b), a.med(key), b.med(key)
        ok = None not in (xa, xb, ya, yb) and yb > ya  # type: ignore[operator]
        out.append(num((xb - xa) / (yb - ya), 0) if ok else "–")  # type: ignore[operator]
    return out


def row(p: Point) -> list[str]:
    ingest = p.med("ingest")
    merges = p.med("merges")
    visited = p.med("pieces_visited")
    cpu = [r.cpu for r in p.runs if r.returncode == 0]
    label = f"{p.mb:.1f}" + (f" ({p.failed} of {len(p.runs)} runs failed)" if p.failed else "")
    return [label, num(merges, 0), num(p.med("distinct_pieces"), 0), num(ingest, 2),
            num(p.mb / ingest if ingest else None, 1), num(p.med("train_load"), 2), num(p.med("merge_loop"), 2),
            num(p.med("train"), 2), num(p.med("export"), 2), num(p.rest(), 2), num(p.wall(), 2),
            num(median_of(cpu), 2), num(p.rss(), 0),
            num(p.med("merges_per_second"), 0), num(visited / merges if visited and merges else None, 1)]


@dataclass
class Scaling:
    by_size: list[Point]
    by_merges: list[Point]

    def marginal_ingest(self) -> float | None:
        """MB/s of ingest between the two largest corpus sizes."""
        if len(self.by_size) < 2:
            return None
        a, b = self.by_size[-2], self.by_size[-1]
        ya, yb = a.med("ingest"), b.med("ingest")
        return (b.mb - a.mb) / (yb - ya) if ya is not None and yb is not None and yb > ya else None

    def size_exponents(self) -> dict[str, float | None]:
        xs = [p.mb for p in self.by_size]
        return {k: exponent(xs, [p.med(k) for p in self.by_size])
                for k in ("ingest", "train", "merge_loop", "export", "distinct_pieces")}

    def merge_exponents(self) -> dict[str, float | None]:
        xs = [p.med("merges") or p.tokens - 256 for p in self.by_merges]
        return {k: exponent(xs, [p.med(k) for p in self.by_merges]) for k in ("train", "merge_loop", "export")}


def verdicts(s: Scaling) -> dict[str, tuple[str, bool | None]]:
    """The scaling statements RESULTS.md checks: (the sentence, whether it holds)."""
    e = s.size_exponents()
    out: dict[str, tuple[str, bool | None]] = {}
    k = e["ingest"]
    if k is None:
        out["ingest"] = ("ingest against bytes: not measured", None)
    else:
        shape = "linearly" if 0.85 <= k <= 1.15 else ("sub-linearly" if k < 0.85 else "super-linearly")
        m = s.marginal_ingest()
        extra = "" if m is None else (f"; {m:.0f} MB/s marginal from {s.by_size[-2].mb:.3g} to "
                                      f"{s.by_size[-1].mb:.3g} MB, fixed costs weigh on the small sizes")
        out["ingest"] = (f"ingest grows {shape} with bytes (k = {k:.2f}{extra})", k <= 1.15)
    k = e["train"]
    if k is None:
        out["train"] = ("train against bytes: not measured", None)
    else:
        shape = "sub-linearly" if k < 0.95 else ("linearly" if k <= 1.05 else "super-linearly")
        out["train"] = (f"train grows {shape} with bytes (k = {k:.2f}; distinct pieces k = "
                        f"{e['distinct_pieces']:.2f})" if e["distinct_pieces"] is not None else
                        f"train grows {shape} with bytes (k = {k:.2f})", k < 0.95)
    return out


def section(s: Scaling, reps: int) -> list[str]:
    if not s.by_size and not s.by_merges:
        return []
    lines = ["## Scaling: toktoktok's time per stage", "",
             f"Whole `toktok run` processes, medians of {reps} repetition(s); stage seconds from the manifests; "
             "\"rest of process\" = process wall − (ingest + train + export): Python start-up, imports, loading "
             "numba's compiled code, reading the config. Exponent k: least-squares fit of seconds ∝ size^k over "
             "the rows (k = 1 linear).", ""]
    if s.by_size:
        e = s.size_exponents()
        lines += [f"### Against corpus size ({s.by_size[0].corpus.name}, {s.by_size[0].tokens:,} tokens)", "",
                  md_table(HEADERS + [MARGINAL["by_size"]],
                           [row(p) + [m] for p, m in zip(s.by_size, marginal(s.by_size, lambda p: p.mb, "ingest"))]),
                  "",
                  "Exponents against bytes: " + ", ".join(f"{k} {num(v, 2)}" for k, v in e.items()) + ".", ""]
        lines += [f"- {text}: {'yes' if ok else ('no' if ok is False else '–')}" for text, ok in
                  verdicts(s).values()]
        lines += [""]
    if s.by_merges:
        e = s.merge_exponents()
        lines += [f"### Against merges ({s.by_merges[0].corpus.name}, {s.by_merges[0].mb:.1f} MB)", "",
                  md_table(HEADERS + [MARGINAL["by_merges"]],
                           [row(p) + [m] for p, m in zip(s.by_merges, marginal(s.by_merges, lambda p: p.med("merges"),
                                                                               "merge_loop"))]), "",
                  "Exponents against merges: " + ", ".join(f"{k} {num(v, 2)}" for k, v in e.items()) + ".", "",
                  "The merge loop's seconds (`seconds.train` of the train manifest) hold the segmentation of the "
                  "inventory into bytes, the initial pair count and heap, the merges, and a check that "
                  "re-segments every piece with the new vocabulary; the early merges, whose pairs occur in the "
                  "most pieces, cost the most: the marginal rate is the cost of the later merges alone.", ""]
    return lines
