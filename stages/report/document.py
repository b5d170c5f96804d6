"""The report as a JSON-ready document (``NAME.report.json``): per phase its
counts, longest tokens, first merges, token lengths, under-trained tokens and
tokens that span words;
the held-out compression table and curve; the timings.

Tokens are shown decoded with ``errors="replace"`` and escaped
(``toktoktok.readable``): ``␣`` is a space, ``\\n`` a line break.
Everything but the timings (seconds, peak RSS) is a function of the
artifacts, so the same run gives the same document.
"""

from __future__ import annotations

from collections import Counter
from operator import itemgetter
from typing import Any

import numpy as np

from toktoktok.config import Config
from toktoktok.loading import split_name
from toktoktok.readable import readable
from toktoktok.tuning import resolve_threads

from ..workdir import Work, peak
from .compression import Domain, Meter, compression_curve, compression_table
from .growth import TOP, Growth, base_label
from .superwords import superword_entry
from .usage import token_usage, undertrained

REPORT_FORMAT = "toktoktok-report/1"


def visible(token: bytes) -> str:
    """Token bytes as the report shows them: UTF-8 with errors replaced, a space as
    ``␣`` (a literal ``␣`` as ``\\u2423``), white space and control characters escaped.

    >>> visible(b" the\\n\\t")
    '␣the\\\\n\\\\t'
    >>> visible(b"\\xe4\\xb8")
    '�'
    """
    return readable(token, invalid="replace", space="␣", escape="unprintable", also="␣")


def build_report(work: Work, *, meta: dict[str, Any], export_seconds: float | None = None) -> dict[str, Any]:
    """The report as a JSON-ready dict (``write_report`` renders and writes it);
    ``meta``: the companion document of the tokenizer it describes."""
    cfg = work.cfg
    growth = Growth(work)
    domains = [Domain(work, phase) for phase in cfg.phases]
    meter = Meter(resolve_threads(cfg.threads))
    try:
        compression = compression_table(cfg, growth, domains, meter)
        curve = compression_curve(cfg, growth, domains, meter)
    finally:
        meter.close()
    phases, timings = [], []
    usage = token_usage(work, growth, domains)
    for phase, domain, (start, end), merges, used in zip(cfg.phases, domains, growth.phase_new, growth.merges, usage):
        ingest = work.ingest(phase).recorded or {}
        train = work.train(phase).recorded or {}
        phases.append(_phase_entry(cfg, phase, domain, growth, start, end, merges, ingest, train, used))
        train_seconds = train.get("seconds", {})
        ingest_seconds = ingest.get("seconds")
        timings.append({
            "phase": phase.name,
            "ingest_seconds": ingest_seconds.get("total") if isinstance(ingest_seconds, dict) else ingest_seconds,
            "ingest_peak_rss_mb": ingest.get("peak_rss_mb"),
            "train_seconds": train_seconds.get("total") if isinstance(train_seconds, dict) else train_seconds,
            "train_peak_rss_mb": train.get("peak_rss_mb"),
        })
    all_tokens = [*growth.base_ranks, *map(itemgetter(0), growth.new)]
    return {
        "format": REPORT_FORMAT,
        "name": split_name(cfg.output)[1],
        "output": str(cfg.output),
        "config_fingerprint": meta.get("config_fingerprint"),
        "pattern": cfg.tokenizer_pattern.name,
        "seed": cfg.seed,
        "heldout_share": cfg.heldout_share,
        "vocab": {
            "base": base_label(cfg) or "bytes",
            "base_tokens": len(growth.base_ranks),
            "mergeable_ranks": len(all_tokens),
            "special_tokens": len(meta.get("special_tokens", {})),
            "vocab_size": meta.get("vocab_size"),
        },
        "phases": phases,
        "compression": compression,
        "curve": curve,
        "token_lengths": {
            "base": _lengths(growth.base_ranks),
            "phases": {p["name"]: p["token_lengths"] for p in phases},
            "all": _lengths(all_tokens),
        },
        "timings": {"phases": timings, "export": {"seconds_before_report": export_seconds,
                                                   "peak_rss_mb": peak.stage_peak_rss_mb()}},
    }


def _phase_entry(cfg: Config, phase, domain: Domain, growth: Growth, start: int, end: int,
                 merges: dict[str, list], ingest: dict, train: dict, used: Any) -> dict[str, Any]:
    ic, tc = ingest.get("counts", {}), train.get("counts", {})
    requested = tc.get("merges_requested", phase.merges)
    made = tc.get("merges_made", end - start)
    new = growth.new[start:end]
    lengths = np.fromiter(map(len, map(itemgetter(0), new)), dtype=np.int64, count=len(new))
    ranks = np.fromiter(map(itemgetter(1), new), dtype=np.int64, count=len(new))
    longest = [new[i] for i in np.lexsort((ranks, -lengths))[:TOP].tolist()]  # by (-length, rank)
    by_rank = growth.by_rank
    first_rank = new[0][1] if new else None
    first = []
    for i in range(min(TOP, len(merges["rank"]))):
        rank, token = merges["rank"][i], merges["bytes"][i]
        first.append({"rank": rank, "left": visible(by_rank.get(merges["left"][i], b"")),
                      "right": visible(by_rank.get(merges["right"][i], b"")), "token": visible(token),
                      "hex": token.hex(), "count": merges["count"][i],
                      "new": first_rank is not None and rank >= first_rank})
    early = None
    if made < requested:
        early = (f"stopped early: {made:,} of {requested:,} merges made (no pair left seen at least "
                 f"{cfg.min_frequency} times{'' if cfg.max_token_bytes is None else ' within max_token_bytes'})")
    return {
        "name": phase.name,
        "slug": phase.slug,
        "pattern": cfg.pattern_of(phase).name,  # its columns are measured with it (``Growth.pattern_at``)
        "files": ic.get("files"),
        "documents": ic.get("documents"),
        "bytes_read": ic.get("bytes_read"),
        "heldout_documents": ic.get("heldout_documents", domain.documents),
        "heldout_bytes": ic.get("heldout_bytes", domain.bytes),
        "units": ic.get("units", ic.get("documents")),
        # held-out "documents" are sampling units (documents, or parts of large ones): a share of the units
        "heldout_share_documents": _share(ic.get("heldout_documents", 0), ic.get("units", ic.get("documents")) or 0),
        "heldout_share_bytes": _share(ic.get("heldout_bytes", 0), ic.get("bytes_read") or 0),
        "heldout_truncated": ic.get("heldout_truncated", 0),
        "pieces": ic.get("pieces"),
        "distinct_pieces": tc.get("distinct_pieces"),
        "merges_requested": requested,
        "merges_made": made,
        "merges_into_existing_tokens": tc.get("merges_into_existing_tokens", 0),
        "first_rank": first_rank,
        "last_rank": new[-1][1] if new else None,
        "early_stop": early,
        "warnings": list(train.get("warnings", [])),
        "longest_tokens": [{"rank": r, "bytes": len(t), "token": visible(t), "hex": t.hex()} for t, r in longest],
        "first_merges": first,
        "token_lengths": _lengths(map(itemgetter(0), new)),
        **_undertrained(new, ranks, used),
        "superwords": superword_entry(new, used, by_rank, visible),
    }


def _undertrained(new: list[tuple[bytes, int]], ranks: np.ndarray, used: Any) -> dict[str, Any]:
    """The phase entry's under-trained tokens (``usage.undertrained``): how many,
    how many never produced, and the worst ``TOP``."""
    rare = undertrained(new, ranks, used)
    return {"undertrained_tokens": len(rare), "undertrained_never_produced": sum(1 for u, _, _ in rare if u == 0),
            "undertrained": [{"rank": r, "produced": u, "bytes": len(t), "token": visible(t), "hex": t.hex()}
                             for u, r, t in rare[:TOP]]}


def _share(part: int, whole: int) -> float | None:
    return round(part / whole, 6) if whole else None


def _lengths(tokens) -> list[list[int]]:
    """``[[length, count], ...]`` by length."""
    return [[n, c] for n, c in sorted(Counter(map(len, tokens)).items())]
