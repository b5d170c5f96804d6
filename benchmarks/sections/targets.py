"""The summary block at the top of RESULTS.md: each target below, what this run measured, met or not.

Every figure is a ratio or a rate from the runs of the same invocation
(the peers section), medians over its repetitions. Peak RSS compares, for every
trainer alike, the larger of ``ru_maxrss`` and the sampled tree peak.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from benchkit.report import md_table


@dataclass
class Target:
    target: str
    measured: str
    met: bool | None  # None: not measured in this run

    def cells(self) -> list[str]:
        verdict = {True: "met", False: "**not met**", None: "not measured"}[self.met]
        return [self.target, self.measured, verdict]


def _rss(outcome: Any) -> float | None:
    values = [max(r.rss_mb, r.tree_mb) for r in outcome.ok]
    return sorted(values)[len(values) // 2] if values else None


def _stage(outcome: Any, key: str) -> float | None:
    values = sorted(s[key] for s in outcome.stages)
    if not values:
        return None
    mid = len(values) // 2
    return values[mid] if len(values) % 2 else (values[mid - 1] + values[mid]) / 2


def end_to_end(results: dict[str, dict[str, Any]]) -> list[Target]:
    out = []
    for name, outcomes in results.items():
        me = outcomes.get("toktoktok")
        if me is None:
            continue
        wall, rss = me.median("wall"), _rss(me)
        for peer, limit, what in (("rustbpe", 1.0, "≤ 1.0 × rustbpe's"), ("hf", 0.3, "about ≤ 0.3 × Hugging Face's")):
            other = outcomes.get(peer)
            theirs = other.median("wall") if other else None
            if wall is None or theirs is None:
                out.append(Target(f"{name}: end-to-end wall {what}", "–", None))
                continue
            ratio = wall / theirs
            out.append(Target(f"{name}: end-to-end wall {what}",
                              f"{wall:.1f} s ÷ {theirs:.1f} s = {ratio:.2f}×", ratio <= limit))
        for peer, what in (("hf", "≤ Hugging Face's"), ("rustbpe", "≤ rustbpe's (the goal beyond)")):
            other = outcomes.get(peer)
            theirs = _rss(other) if other else None
            if rss is None or theirs is None:
                out.append(Target(f"{name}: peak RSS {what}", "–", None))
                continue
            out.append(Target(f"{name}: peak RSS {what}", f"{rss:.0f} MB vs {theirs:.0f} MB = {rss / theirs:.2f}×",
                              rss <= theirs))
    return out


def ingest(results: list[Any]) -> list[Target]:
    out = []
    for r in results:
        name = r.corpus.name
        for other, need, what, digits in (
                ("baseline", 10, "ingest (threads 2) ≥ 10 × `regex.findall` + `Counter` throughput", 1),
                ("threads 1", 1.7, "ingest threads 2 ÷ threads 1 ≥ 1.7×", 2)):
            for how, label in (("stage", "stage seconds"), ("wall", "process wall")):
                ratio = r.ratio("threads 2", other, how)
                mine, theirs = r.mb_per_s("threads 2", how), r.mb_per_s(other, how)
                out.append(Target(f"{name}: {what}, {label}",
                                  "–" if ratio is None else f"{mine:.1f} ÷ {theirs:.1f} MB/s = {ratio:.{digits}f}×",
                                  None if ratio is None else ratio >= need))
    return out


def merge_rate(name: str, main: Any, big: Any, by_merges: list[Any] | None = None) -> list[Target]:
    """The 30,000 merges/s target and the big run; ``by_merges`` (the scaling points) adds the marginal rate."""
    out = []
    later = ""
    if by_merges:
        pts = [p for p in by_merges if p.stages]
        for a, b in zip(pts, pts[1:]):
            if b.tokens == main.tokens and b.med("merge_loop") > a.med("merge_loop"):
                rate = (b.med("merges") - a.med("merges")) / (b.med("merge_loop") - a.med("merge_loop"))
                later = f"; merges {a.med('merges'):,.0f}–{b.med('merges'):,.0f} alone: {rate:,.0f}/s (scaling runs)"
    if main is not None and main.stages:
        rate, made = _stage(main, "merges_per_second"), _stage(main, "merges")
        loop, visited = _stage(main, "merge_loop"), _stage(main, "pieces_visited")
        distinct = _stage(main, "distinct_pieces")
        out.append(Target(f"{name}: ≥ 30,000 merges/s over the {made:,.0f} merges (train manifest)",
                          f"{rate:,.0f} merges/s ({loop:.2f} s merge loop; {visited / made:,.1f} pieces visited "
                          f"per merge of {distinct:,.0f} distinct{later})", rate >= 30000))
    else:
        out.append(Target("≥ 30,000 merges/s over 32,512 merges", "–", None))
    if big is not None:
        finished = big.stages and not big.failed and all(s["merges"] == s["merges_requested"] for s in big.stages)
        rate, made = big.med("merges_per_second"), big.med("merges")
        loop, wall = big.med("merge_loop"), big.wall()
        measured = (f"{made:,.0f} of {big.tokens - 256:,} merges in {loop:.1f} s merge loop "
                    f"({wall:.1f} s process): {rate:,.0f} merges/s" if big.stages
                    else f"failed ({big.failed} of {len(big.runs)} runs)")
        out.append(Target(f"{big.corpus.name}: {big.tokens - 256:,} merges finish, rate reported", measured,
                          bool(finished)))
    else:
        out.append(Target("100,000 merges finish, rate reported", "skipped in this run", None))
    return out


def compression(results: dict[str, dict[str, Any]]) -> list[Target]:
    out = []
    for name, outcomes in results.items():
        me, hf = outcomes.get("toktoktok"), outcomes.get("hf")
        if me is None or hf is None or not me.bytes_per_token or not hf.bytes_per_token:
            out.append(Target(f"{name}: held-out bytes/token within 0.1% of Hugging Face's", "–", None))
            continue
        ratio = me.bytes_per_token / hf.bytes_per_token
        out.append(Target(f"{name}: held-out bytes/token within 0.1% of Hugging Face's",
                          f"{me.bytes_per_token:.4f} ÷ {hf.bytes_per_token:.4f} = {ratio:.5f} "
                          f"({100 * (ratio - 1):+.3f}%)", abs(ratio - 1) <= 0.001))
    return out


def scaling(verdicts: dict[str, tuple[str, bool | None]]) -> list[Target]:
    return [Target({"ingest": "scaling: ingest grows linearly with bytes (no worse)",
                    "train": "scaling: train grows sub-linearly with bytes"}[key], text, ok)
            for key, (text, ok) in verdicts.items()]


def numba(first: Any, later: float | None) -> list[Target]:
    if first is None or later is None:
        return []
    return [Target("numba compilation cached (`cache=True`) and reported apart",
                   f"first run {first.wall:.1f} s (empty cache), later runs {later:.1f} s", first.returncode == 0)]


def block(targets: list[Target], caveat: str | None) -> list[str]:
    met = sum(1 for t in targets if t.met)
    measured = sum(1 for t in targets if t.met is not None)
    lines = ["## Summary: the targets in this run", ""]
    if caveat:
        lines += [caveat, ""]
    lines += [md_table(["target", "measured (this run)", "verdict"], [t.cells() for t in targets]), "",
              f"{met} of {measured} measured targets met.", ""]
    return lines
