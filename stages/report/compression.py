"""Compression of each phase's held-out text, in UTF-8 bytes per token (higher
is better), measured with tiktoken (``encode_ordinary``, each held-out
document on its own, no special tokens).

- The table: all of each phase's held-out text, for the 256-byte baseline,
  the vocabulary before the first phase (the hardcoded merges, or a warm
  start's base) and the vocabulary after each phase.
- The curve: at about every tenth of each phase's new tokens, on a seeded
  sample of at most ``CURVE_SAMPLE_BYTES`` of each phase's held-out text.

Documents are encoded in groups of about ``GROUP_BYTES`` on a pool of threads
(tiktoken releases the GIL while it encodes).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import tiktoken

from toktoktok.config import Config

from ..workdir import Work
from .growth import Growth, base_label

CURVE_SAMPLE_BYTES = 1_000_000  # held-out text per domain encoded at each checkpoint
CURVE_STEPS = 10  # checkpoints per phase
GROUP_BYTES = 256_000  # documents handed to one encoding task
SMALL_DOMAIN_BYTES, SMALL_DOMAIN_DOCUMENTS = 64 << 10, 10  # held-out text below either is too small to trust


def _clean(text: str) -> str:
    """What tiktoken encodes for ``text``: lone surrogates become U+FFFD."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def _groups(docs: Sequence[str]) -> list[list[str]]:
    """Consecutive documents in groups of about GROUP_BYTES (one task each)."""
    groups: list[list[str]] = []
    size = GROUP_BYTES
    for doc in docs:
        if size >= GROUP_BYTES:
            groups.append([])
            size = 0
        groups[-1].append(doc)
        size += len(doc)
    return groups


class Meter:
    """Counts tokens of documents with tiktoken on a pool of threads (tiktoken
    releases the GIL while it encodes)."""

    def __init__(self, threads: int) -> None:
        self.pool = ThreadPoolExecutor(max(1, threads))

    def tokens(self, enc: tiktoken.Encoding, groups: list[list[str]]) -> int:
        def count(group: list[str]) -> int:
            return sum(len(enc.encode_ordinary(doc)) for doc in group)

        return sum(self.pool.map(count, groups))

    def close(self) -> None:
        self.pool.shutdown()


class Domain:
    """One phase's held-out text: all of it (the table) and a capped sample (the curve)."""

    def __init__(self, work: Work, phase) -> None:
        cfg = work.cfg
        docs = [_clean(d) for d in work.ingest(phase).heldout_texts() if d]
        self.name = phase.name
        self.documents = len(docs)
        self.bytes = sum(len(d.encode("utf-8")) for d in docs)
        self.groups = _groups(docs)
        sample = _sample(docs, CURVE_SAMPLE_BYTES, f"{cfg.seed}/{phase.slug}/report")
        self.sample_documents = len(sample)
        self.sample_bytes = sum(len(d.encode("utf-8")) for d in sample)
        self.sample_groups = _groups(sample)


def _sample(docs: list[str], cap: int, seed: str) -> list[str]:
    """Up to ``cap`` bytes of documents, chosen in a seeded order and kept in
    their original order; the document that crosses the cap is cut.

        >>> _sample(["aaaa", "bbbb", "cccc"], 6, "s")
        ['aaaa', 'cc']
    """
    if sum(len(d.encode("utf-8")) for d in docs) <= cap:
        return docs
    order = list(range(len(docs)))
    random.Random(seed).shuffle(order)
    chosen: dict[int, str] = {}
    room = cap
    for i in order:
        data = docs[i].encode("utf-8")
        if len(data) > room:
            chosen[i] = data[:room].decode("utf-8", "ignore")
            break
        chosen[i] = docs[i]
        room -= len(data)
    return [chosen[i] for i in sorted(chosen) if chosen[i]]


def _bpt(nbytes: int, tokens: int) -> float | None:
    return round(nbytes / tokens, 4) if tokens else None


def too_small(documents: int, nbytes: int) -> bool:
    """Held-out text too small for its compression to be trusted (but not none).

        >>> too_small(1, 31), too_small(500, 1 << 20), too_small(0, 0)
        (True, False, False)
    """
    return nbytes > 0 and (nbytes < SMALL_DOMAIN_BYTES or documents < SMALL_DOMAIN_DOCUMENTS)


def _columns(cfg: Config, growth: Growth) -> list[dict[str, Any]]:
    """The table's vocabularies: bytes, the base (if more than bytes), after each phase."""
    columns = [{"key": "bytes", "label": "bytes only", "tokens": 256, "new": None}]
    label = base_label(cfg)
    if label is not None:
        columns.append({"key": "base", "label": label, "tokens": len(growth.base_ranks), "new": 0})
    for phase, (_, end) in zip(cfg.phases, growth.phase_new):
        columns.append({"key": f"after:{phase.slug}", "label": f"after {phase.name}",
                        "tokens": len(growth.base_ranks) + end, "new": end})
    return columns


def compression_table(cfg: Config, growth: Growth, domains: list[Domain], meter: Meter) -> dict[str, Any]:
    """The table (``compression`` in the JSON): each domain's tokens and bytes per
    token with each vocabulary of ``_columns``."""
    columns = _columns(cfg, growth)
    rows = [{"phase": d.name, "heldout_documents": d.documents, "heldout_bytes": d.bytes, "tokens": {},
             "bytes_per_token": {}, "too_small": too_small(d.documents, d.bytes)} for d in domains]
    for col in columns:
        enc = growth.encoding(col["new"]) if any(d.bytes for d in domains) else None
        for row, domain in zip(rows, domains):
            tokens = meter.tokens(enc, domain.groups) if domain.bytes else None
            row["tokens"][col["key"]] = tokens
            row["bytes_per_token"][col["key"]] = _bpt(domain.bytes, tokens) if tokens else None
    return {"unit": "UTF-8 bytes per token", "columns": [{k: c[k] for k in ("key", "label", "tokens")} for c in columns],
            "rows": rows}


def _checkpoints(cfg: Config, growth: Growth) -> list[dict[str, Any]]:
    """Where the curve is measured: the 256 bytes (when the base has more, and is
    no warm start), the base, then about every tenth of each phase's new tokens."""
    points = []
    base = len(growth.base_ranks)
    if cfg.warm_start is None and base > 256:
        points.append({"label": "256 bytes", "phase": None, "new": None, "phase_new": 0, "tokens": 256})
    points.append({"label": base_label(cfg) or "256 bytes", "phase": None, "new": 0, "phase_new": 0, "tokens": base})
    for phase, (start, end) in zip(cfg.phases, growth.phase_new):
        made = end - start
        for n in sorted({round(j * made / CURVE_STEPS) for j in range(1, CURVE_STEPS + 1)} - {0}):
            points.append({"label": f"{phase.name} +{n:,}", "phase": phase.name, "new": start + n,
                           "phase_new": n, "tokens": base + start + n})
    return points


def compression_curve(cfg: Config, growth: Growth, domains: list[Domain], meter: Meter) -> dict[str, Any]:
    """The curve (``curve`` in the JSON): each domain's sample measured at every
    checkpoint of ``_checkpoints``, and where each phase starts."""
    measured = [d for d in domains if d.sample_bytes]
    points = []
    for point in _checkpoints(cfg, growth):
        enc = growth.encoding(point["new"]) if measured else None
        tokens = {d.name: meter.tokens(enc, d.sample_groups) for d in measured}
        points.append({"vocab_tokens": point["tokens"], "label": point["label"], "phase": point["phase"],
                       "phase_merges": point["phase_new"], "tokens": tokens,
                       "bytes_per_token": {d.name: _bpt(d.sample_bytes, tokens[d.name]) for d in measured}})
    boundaries = [{"phase": phase.name, "vocab_tokens": len(growth.base_ranks) + start}
                  for phase, (start, _) in zip(cfg.phases, growth.phase_new)]
    return {
        "sample_cap_bytes": CURVE_SAMPLE_BYTES,
        "domains": [{"phase": d.name, "sample_documents": d.sample_documents, "sample_bytes": d.sample_bytes}
                    for d in domains],
        "phase_starts": boundaries,
        "checkpoints": points,
    }
