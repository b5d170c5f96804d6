"""The training report: ``NAME.report.md``, ``.report.json`` and ``.report.png``.

What it holds: docs/outputs.md (The training report). The orchestrator
(``pipeline``) calls ``write_report`` once export has built the tokenizer and
it has passed its own validation, before the set is published. The report
reads only artifacts: the stage manifests, each phase's ``heldout.arrow`` and
``merges.arrow``, and the ``.meta.json``.

Compression is measured with tiktoken (``encode_ordinary``, each held-out
document on its own, no special tokens); the growth curve on a seeded sample
of at most ``CURVE_SAMPLE_BYTES`` of each phase's held-out text, drawn as
``NAME.report.png`` when matplotlib is installed (``pip install
'toktoktok[plot]'``). Tokens are decoded with ``errors="replace"`` and
escaped: ``␣`` is a space, ``\\n`` a line break.

Everything but the timings (seconds, peak RSS: ``timings`` in the JSON, the
"Time and memory" table in the Markdown) is a function of the artifacts, so
the same run gives the same report.
"""

from __future__ import annotations

import functools
import itertools
import json
import random
import unicodedata
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from operator import itemgetter
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import tiktoken

from toktoktok.atomic import atomic_path, atomic_write_bytes
from toktoktok.config import Config
from toktoktok.loading import split_name
from toktoktok.vocab import BYTE_ORDER

from . import workdir
from .workdir import Work, peak

REPORT_FORMAT = "toktoktok-report/1"
CURVE_SAMPLE_BYTES = 1_000_000  # held-out text per domain encoded at each checkpoint
CURVE_STEPS = 10  # checkpoints per phase
TOP = 20  # longest tokens and first merges shown per phase
GROUP_BYTES = 256_000  # documents handed to one encoding task
NO_HELDOUT = "no held-out text"
UNDERTRAINED_BELOW = 10  # a phase's new token produced fewer times than this by its own text is under-trained
SMALL_DOMAIN_BYTES, SMALL_DOMAIN_DOCUMENTS = 64 << 10, 10  # held-out text below either is too small to trust


# ---------------------------------------------------------------- text helpers


def visible(token: bytes) -> str:
    """Token bytes as readable text: UTF-8 with errors replaced, white space and
    control characters escaped.

    >>> visible(b" the\\n\\t")
    '␣the\\\\n\\\\t'
    >>> visible(b"\\xe4\\xb8")
    '�'
    """
    out = []
    for ch in token.decode("utf-8", errors="replace"):
        if ch == " ":
            out.append("␣")
        elif ch in "\\␣":
            out.append("\\\\" if ch == "\\" else "\\u2423")
        elif ch in "\n\r\t":
            out.append({"\n": "\\n", "\r": "\\r", "\t": "\\t"}[ch])
        elif unicodedata.category(ch)[0] in "CZ" and ch != "\ufffd":
            out.append(f"\\x{ord(ch):02x}" if ord(ch) < 0x100 else f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return "".join(out)


def _md_code(text: str) -> str:
    """A Markdown code span that survives inside a table cell."""
    text = text.replace("|", "\\|")
    return f"`` {text} ``" if "`" in text else f"`{text}`"


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|")


def _size(n: int) -> str:
    """Binary units, like all output: ``_size(18716) == '18.3 KiB'``."""
    from .workdir.progress import human_bytes

    return human_bytes(n)


def _share(part: int, whole: int) -> float | None:
    return round(part / whole, 6) if whole else None


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.2f}%"


def _clean(text: str) -> str:
    """What tiktoken encodes for ``text``: lone surrogates become U+FFFD."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


# ---------------------------------------------------------------- measuring


def _encoding(name: str, ranks: dict[bytes, int], cfg: Config) -> tiktoken.Encoding:
    return tiktoken.Encoding(name=name, pat_str=cfg.pattern.tiktoken, mergeable_ranks=ranks, special_tokens={})


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


class _Meter:
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


class _Domain:
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
    their original order; the document that crosses the cap is cut."""
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


def _ratio(nbytes: int, tokens: int | None) -> str:
    """Bytes per token for the Markdown, from the exact counts (not the rounded JSON)."""
    return f"{nbytes / tokens:.3f}" if tokens else "–"


# ---------------------------------------------------------------- vocabularies


class _Growth:
    """The vocabulary as it grows: base tokens, then every phase's new tokens in order."""

    def __init__(self, work: Work) -> None:
        cfg = work.cfg
        base = work.base_vocab()
        self.cfg = cfg
        self.base_ranks = base.ranks()
        self.next_rank = len(base)
        self.new: list[tuple[bytes, int]] = []  # (token, rank) of every phase, in order
        self.phase_new: list[tuple[int, int]] = []  # (start, end) in self.new, per phase
        self.merges: list[dict[str, list]] = []  # each phase's first TOP rows of merges.arrow, as columns
        self._final: tiktoken.Encoding | None = None
        for phase in cfg.phases:
            table = work.train(phase).merges()
            self.merges.append(table.slice(0, TOP).to_pydict())
            start = len(self.new)
            ranks = table["rank"].to_numpy().astype(np.int64)
            keep = workdir.new_token_rows(ranks, self.next_rank)
            kept = ranks[keep].tolist()
            self.new.extend(zip(table["bytes"].filter(pa.array(keep)).to_pylist(), kept))
            self.next_rank = kept[-1] + 1 if kept else self.next_rank
            self.phase_new.append((start, len(self.new)))

    def ranks(self, new_tokens: int) -> dict[bytes, int]:
        """The base and the first ``new_tokens`` learned tokens."""
        return self.base_ranks | dict(self.new[:new_tokens])

    def encoding(self, new_tokens: int | None) -> tiktoken.Encoding:
        """A tiktoken Encoding (no special tokens) of the base and the first
        ``new_tokens`` learned tokens (None: the 256 bytes only). The final
        vocabulary's, which the table, the curve and the usage count all
        measure with, is built once, not three times (building an Encoding of a
        large vocabulary takes time)."""
        if new_tokens is None:
            return _encoding("report-bytes", _bytes_ranks(), self.cfg)
        if new_tokens < len(self.new):
            return _encoding("report", self.ranks(new_tokens), self.cfg)
        if self._final is None:
            self._final = _encoding("report-final", self.ranks(new_tokens), self.cfg)
        return self._final

    @functools.cached_property
    def by_rank(self) -> dict[int, bytes]:
        base = dict(zip(self.base_ranks.values(), self.base_ranks))
        return base | dict(zip(map(itemgetter(1), self.new), map(itemgetter(0), self.new)))


def _base_label(cfg: Config) -> str | None:
    """The column of the vocabulary before the first phase (None: only the bytes)."""
    if cfg.warm_start is not None:
        return "warm start base"
    return "hardcoded merges" if cfg.hardcoded_merges else None


# ---------------------------------------------------------------- the document


def build_report(work: Work, *, meta: dict[str, Any], export_seconds: float | None = None) -> dict[str, Any]:
    """The report as a JSON-ready dict (``write_report`` renders and writes it);
    ``meta``: the companion document of the tokenizer it describes."""
    cfg = work.cfg
    growth = _Growth(work)
    domains = [_Domain(work, phase) for phase in cfg.phases]
    meter = _Meter(workdir.resolve_threads(cfg.threads))
    try:
        compression = _compression(cfg, growth, domains, meter)
        curve = _curve(cfg, growth, domains, meter)
    finally:
        meter.close()
    phases, timings = [], []
    usage = _usage(work, growth, domains)
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
        "pattern": cfg.pattern.name,
        "seed": cfg.seed,
        "heldout_share": cfg.heldout_share,
        "vocab": {
            "base": _base_label(cfg) or "bytes",
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


def _phase_entry(cfg: Config, phase, domain: _Domain, growth: _Growth, start: int, end: int,
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
    }


def _undertrained(new: list[tuple[bytes, int]], ranks: np.ndarray, used: Any) -> dict[str, Any]:
    """The phase's new tokens that its own text (the inventory it trained on, each
    piece times its count, and its held-out text, encoded with the final
    vocabulary) produces fewer than ``UNDERTRAINED_BELOW`` times: tokens that are
    nearly always merged further, whose embedding a model barely trains (the
    "glitch tokens" of released models). The worst ``TOP`` are listed (``ranks``: those of ``new``)."""
    rare = [(int(used[new[i][1]]), new[i][1], new[i][0])
            for i in np.flatnonzero(used[ranks] < UNDERTRAINED_BELOW).tolist()]
    rare.sort(key=lambda x: (x[0], x[1]))
    return {"undertrained_tokens": len(rare), "undertrained_never_produced": sum(1 for u, _, _ in rare if u == 0),
            "undertrained": [{"rank": r, "produced": u, "bytes": len(t), "token": visible(t), "hex": t.hex()}
                             for u, r, t in rare[:TOP]]}


def _usage(work: Work, growth: _Growth, domains: list[_Domain]) -> list[Any]:
    """For each phase: how often each id of the final vocabulary is produced by the
    phase's inventory (segmented as tiktoken would, each piece times its count)
    and by its held-out text (encoded with tiktoken)."""
    from toktoktok.counts import inventory
    from toktoktok.segment import segment_pieces

    cfg = work.cfg
    vocab = work.vocab_after(len(cfg.phases))
    enc = growth.encoding(len(growth.new)) if any(domain.groups for domain in domains) else None
    size = max(growth.by_rank, default=-1) + 1
    out = []
    for phase, domain in zip(cfg.phases, domains):
        # the last phase's trainer segmented its pieces with this very vocabulary
        trained = work.train(phase).usage(len(vocab)) if phase is cfg.phases[-1] else None
        if trained is not None and len(trained) <= size:
            used = np.zeros(size, dtype=np.float64)
            used[: len(trained)] = trained
        else:
            buf, off, counts = inventory(work.ingest(phase).inventory())
            sym, lens = segment_pieces(vocab, buf, off)
            n = lens.astype(np.int64)
            within = np.arange(int(n.sum())) - np.repeat(np.cumsum(n) - n, n)
            ids = sym[np.repeat(off[:-1], n) + within]
            used = np.bincount(ids, weights=np.repeat(counts.astype(np.float64), n), minlength=size)
        for group in domain.groups:  # one count per group of documents, not an array per document
            ids = np.fromiter(itertools.chain.from_iterable(enc.encode_ordinary_batch(group)), dtype=np.int64)
            used += np.bincount(ids, minlength=size)[:size]
        out.append(used)
    return out


def _lengths(tokens) -> list[list[int]]:
    """``[[length, count], ...]`` by length."""
    return [[n, c] for n, c in sorted(Counter(map(len, tokens)).items())]


def _columns(cfg: Config, growth: _Growth) -> list[dict[str, Any]]:
    """The table's vocabularies: bytes, the base (if more than bytes), after each phase."""
    columns = [{"key": "bytes", "label": "bytes only", "tokens": 256, "new": None}]
    label = _base_label(cfg)
    if label is not None:
        columns.append({"key": "base", "label": label, "tokens": len(growth.base_ranks), "new": 0})
    for phase, (_, end) in zip(cfg.phases, growth.phase_new):
        columns.append({"key": f"after:{phase.slug}", "label": f"after {phase.name}",
                        "tokens": len(growth.base_ranks) + end, "new": end})
    return columns


def _bytes_ranks() -> dict[bytes, int]:
    return {bytes([b]): r for r, b in enumerate(BYTE_ORDER)}


def too_small(documents: int, nbytes: int) -> bool:
    """Held-out text too small for its compression to be trusted (but not none).

        >>> too_small(1, 31), too_small(500, 1 << 20), too_small(0, 0)
        (True, False, False)
    """
    return nbytes > 0 and (nbytes < SMALL_DOMAIN_BYTES or documents < SMALL_DOMAIN_DOCUMENTS)


def _compression(cfg: Config, growth: _Growth, domains: list[_Domain], meter: _Meter) -> dict[str, Any]:
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


def _checkpoints(cfg: Config, growth: _Growth) -> list[dict[str, Any]]:
    """Where the curve is measured: the 256 bytes (when the base has more, and is
    no warm start), the base, then about every tenth of each phase's new tokens."""
    points = []
    base = len(growth.base_ranks)
    if cfg.warm_start is None and base > 256:
        points.append({"label": "256 bytes", "phase": None, "new": None, "phase_new": 0, "tokens": 256})
    points.append({"label": _base_label(cfg) or "256 bytes", "phase": None, "new": 0, "phase_new": 0, "tokens": base})
    for phase, (start, end) in zip(cfg.phases, growth.phase_new):
        made = end - start
        for n in sorted({round(j * made / CURVE_STEPS) for j in range(1, CURVE_STEPS + 1)} - {0}):
            points.append({"label": f"{phase.name} +{n:,}", "phase": phase.name, "new": start + n,
                           "phase_new": n, "tokens": base + start + n})
    return points


def _curve(cfg: Config, growth: _Growth, domains: list[_Domain], meter: _Meter) -> dict[str, Any]:
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


# ---------------------------------------------------------------- Markdown


def _table(header: list[str], rows: list[list[str]], align: str | None = None) -> list[str]:
    align = align or "l" + "r" * (len(header) - 1)
    marks = {"l": "---", "r": "---:"}
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(marks[a] for a in align) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return lines


def render_markdown(doc: dict[str, Any], *, png: str | None) -> str:
    """The report as Markdown (``png``: the picture's file name, None if not drawn)."""
    v = doc["vocab"]
    out = [f"# Training report: {doc['name']}", ""]
    base = {"bytes": "the 256 bytes"}.get(v["base"], f"{v['base_tokens']:,} tokens ({v['base']})")
    out += [f"`{doc['output']}`: {v['mergeable_ranks']:,} mergeable ranks + {v['special_tokens']} special tokens"
            + (f" = {v['vocab_size']:,} ids" if v["vocab_size"] is not None else "")
            + f"; base: {base}; pattern `{doc['pattern']}`; heldout_share {doc['heldout_share']}, seed {doc['seed']}.",
            ""]
    out += _md_phases(doc) + [""] + _md_compression(doc) + [""] + _md_curve(doc, png) + [""] + _md_timings(doc)
    for phase in doc["phases"]:
        out += [""] + _md_phase_tokens(phase)
    out += [""] + _md_lengths(doc)
    return "\n".join(out) + "\n"


def _md_phases(doc: dict[str, Any]) -> list[str]:
    rows = []
    notes = []
    for p in doc["phases"]:
        made = f"{p['merges_made']:,} / {p['merges_requested']:,}" + (" ⚠" if p["early_stop"] else "")
        rows.append([_md_cell(p["name"]), f"{p['documents'] or 0:,}", _size(p["bytes_read"] or 0),
                     f"{p['heldout_documents']:,}", _size(p["heldout_bytes"]),
                     f"{_pct(p['heldout_share_documents'])} / {_pct(p['heldout_share_bytes'])}",
                     f"{p['distinct_pieces'] or 0:,}", made])
        if p["early_stop"]:
            notes.append(f"- ⚠ **{p['name']}** {p['early_stop']}.")
        if p["heldout_truncated"]:
            notes.append(f"- {p['name']}: the held-out text reached its cap; "
                         f"{p['heldout_truncated']} document cut.")
        if p["merges_into_existing_tokens"]:
            notes.append(f"- {p['name']}: {p['merges_into_existing_tokens']} merges joined into tokens that "
                         f"already existed (no new rank).")
    header = ["phase", "documents", "bytes read", "held out units", "held out bytes", "share held out (units / bytes)",
              "distinct pieces", "merges made / requested"]
    return ["## Phases", ""] + _table(header, rows) + ([""] + notes if notes else [])


def _md_compression(doc: dict[str, Any]) -> list[str]:
    comp = doc["compression"]
    header = ["held-out domain", "held-out text"] + [_md_cell(f"{c['label']} ({c['tokens']:,})") for c in comp["columns"]]
    rows = []
    for row in comp["rows"]:
        if not row["heldout_bytes"]:
            rows.append([_md_cell(row["phase"]), NO_HELDOUT] + [NO_HELDOUT] * len(comp["columns"]))
            continue
        cells = [_ratio(row["heldout_bytes"], row["tokens"][c["key"]]) for c in comp["columns"]]
        rows.append([_md_cell(row["phase"]), _size(row["heldout_bytes"]) + (" ⚠" if row.get("too_small") else "")]
                    + cells)
    return (["## Compression on held-out text", "",
             "UTF-8 bytes per token (higher is better), measured with tiktoken on each phase's held-out documents "
             "(never trained on), each document encoded on its own, without special tokens. Columns: the "
             "vocabulary (with its token count). A domain marked ⚠ has less than "
             f"{SMALL_DOMAIN_BYTES >> 10} KiB or {SMALL_DOMAIN_DOCUMENTS} documents of held-out text: too little "
             "to measure compression on.", ""]
            + _table(header, rows)
            + [f"\n- ⚠ **{r['phase']}**: too small to trust ({r['heldout_documents']} documents, "
               f"{_size(r['heldout_bytes'])} of held-out text)." for r in comp["rows"] if r.get("too_small")])


def _md_curve(doc: dict[str, Any], png: str | None) -> list[str]:
    curve = doc["curve"]
    names = [d["phase"] for d in curve["domains"] if d["sample_bytes"]]
    out = ["## Compression as the vocabulary grows", ""]
    if not names:
        return out + [f"No phase has held-out text ({NO_HELDOUT}): nothing to measure."]
    if png:
        out += [f"![held-out compression as the vocabulary grows]({png})", ""]
    else:
        out += ["(No picture: install the plotting extra, `pip install 'toktoktok[plot]'`, and re-export with "
                "`toktok export --force`.)", ""]
    samples = ", ".join(f"{d['phase']} {_size(d['sample_bytes'])}" for d in curve["domains"] if d["sample_bytes"])
    out += [f"Bytes per token on a seeded sample of each domain's held-out text (at most "
            f"{_size(curve['sample_cap_bytes'])}: {samples}).", ""]
    sample = {d["phase"]: d["sample_bytes"] for d in curve["domains"]}
    rows = []
    for p in curve["checkpoints"]:
        rows.append([f"{p['vocab_tokens']:,}", _md_cell(p["label"])]
                    + [_ratio(sample[n], p["tokens"].get(n)) for n in names])
    return out + _table(["vocabulary", "checkpoint"] + [_md_cell(n) for n in names], rows, "rl" + "r" * len(names))


def _md_timings(doc: dict[str, Any]) -> list[str]:
    def fmt(x: float | None, spec: str) -> str:
        return "–" if x is None else format(x, spec)

    rows = []
    for t in doc["timings"]["phases"]:
        rows.append([f"ingest {_md_cell(t['phase'])}", fmt(t["ingest_seconds"], ".2f"), fmt(t["ingest_peak_rss_mb"], ".0f")])
        rows.append([f"train {_md_cell(t['phase'])}", fmt(t["train_seconds"], ".2f"), fmt(t["train_peak_rss_mb"], ".0f")])
    ex = doc["timings"]["export"]
    rows.append(["export (before this report)", fmt(ex["seconds_before_report"], ".2f"), fmt(ex["peak_rss_mb"], ".0f")])
    return (["## Time and memory", "", "From the stage manifests (a stage skipped as up to date shows its last run). "
             "Peak RSS is the process's peak so far.", ""]
            + _table(["stage", "seconds", "peak RSS (MiB)"], rows))


def _md_phase_tokens(p: dict[str, Any]) -> list[str]:
    out = [f"## Phase {p['name']}: tokens", ""]
    if p["first_rank"] is not None:
        out += [f"New ranks {p['first_rank']:,}..{p['last_rank']:,}. Tokens shown decoded (invalid UTF-8 as �), "
                "`␣` = space, `\\n` = line break.", ""]
    else:
        out += ["No new tokens.", ""]
        return out
    out += [f"Longest {len(p['longest_tokens'])} tokens:", ""]
    out += _table(["rank", "bytes", "token"], [[str(t["rank"]), str(t["bytes"]), _md_code(t["token"])]
                                               for t in p["longest_tokens"]], "rrl")
    out += ["", f"First {len(p['first_merges'])} merges:", ""]
    rows = [[str(m["rank"]) + ("" if m["new"] else " (existing)"), _md_code(m["left"]), _md_code(m["right"]),
             _md_code(m["token"]), f"{m['count']:,}"] for m in p["first_merges"]]
    out += _table(["rank", "left", "right", "token", "count"], rows, "rlllr")
    out += ["", f"Under-trained tokens: {p['undertrained_tokens']:,} of the phase's new tokens are produced fewer "
            f"than {UNDERTRAINED_BELOW} times by its own text (its training pieces times their counts, and its "
            f"held-out text, encoded with the final vocabulary); {p['undertrained_never_produced']:,} never. "
            "They are nearly always merged into longer tokens, so a model barely trains their embeddings."]
    if p["undertrained"]:
        out += ["", f"The {len(p['undertrained'])} least produced:", ""]
        out += _table(["rank", "produced", "bytes", "token"],
                      [[str(t["rank"]), f"{t['produced']:,}", str(t["bytes"]), _md_code(t["token"])]
                       for t in p["undertrained"]], "rrrl")
    return out


def _md_lengths(doc: dict[str, Any]) -> list[str]:
    tl = doc["token_lengths"]
    columns = [("base", tl["base"])] + list(tl["phases"].items()) + [("all", tl["all"])]
    tables = [dict(map(tuple, c)) for _, c in columns]
    lengths = sorted({n for t in tables for n in t})
    rows = [[str(n)] + [f"{t.get(n, 0):,}" if t.get(n) else "" for t in tables] for n in lengths]
    return (["## Token length distribution", "", "Tokens per length in bytes: the base vocabulary, each phase's "
             "new tokens, and the whole vocabulary.", ""]
            + _table(["bytes"] + [_md_cell(n) for n, _ in columns], rows))


# ---------------------------------------------------------------- the picture


def render_png(doc: dict[str, Any], path: Path) -> bool:
    """Draw the curve with matplotlib (without pyplot's global state) into
    ``path``, atomically; False if matplotlib is absent or nothing was measured."""
    curve = doc["curve"]
    names = [d["phase"] for d in curve["domains"] if d["sample_bytes"]]
    if not names:  # decided before importing matplotlib, which is slow to import
        return False
    try:
        from matplotlib.figure import Figure
    except ImportError:
        return False
    fig = Figure(figsize=(9, 5.5), dpi=110, layout="constrained")
    ax = fig.subplots()
    points = curve["checkpoints"]
    for name in names:
        xs = [p["vocab_tokens"] for p in points if p["bytes_per_token"].get(name)]
        ys = [p["bytes_per_token"][name] for p in points if p["bytes_per_token"].get(name)]
        small = next((r.get("too_small") for r in doc["compression"]["rows"] if r["phase"] == name), False)
        ax.plot(xs, ys, marker="o", markersize=3, linewidth=1.5,
                label=f"{name} (held out{', too small to trust' if small else ''})", linestyle=":" if small else "-")
    top = max(v for p in points for v in p["bytes_per_token"].values() if v)
    ax.set_ylim(top=top * 1.12)
    first = curve["phase_starts"][0]["vocab_tokens"] if curve["phase_starts"] else None
    if points[0]["vocab_tokens"] == 256 and first and first > 256 and doc["vocab"]["base"] != "bytes":
        ax.axvspan(256, first, color="0.5", alpha=0.08, linewidth=0)
        ax.text((256 + first) / 2, top * 1.1, doc["vocab"]["base"], ha="center", va="top", fontsize=8, color="0.35")
    for start in curve["phase_starts"]:
        ax.axvline(start["vocab_tokens"], color="0.45", linestyle="--", linewidth=1)
        ax.text(start["vocab_tokens"], top * 1.1, f" {start['phase']}", rotation=90, va="top", ha="left",
                fontsize=9, color="0.3")
    ax.set_xlabel("vocabulary size (mergeable tokens)")
    ax.set_ylabel("UTF-8 bytes per token (higher is better)")
    ax.set_title(f"{doc['name']}: held-out compression as the vocabulary grows")
    ax.grid(True, alpha=0.3)
    ax.legend(loc="lower right")
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", metadata={"Software": None})
    return True


# ---------------------------------------------------------------- writing


def write_report(work: Work, folder: Path, *, meta: dict[str, Any], export_seconds: float | None = None) -> list[Path]:
    """Write ``NAME.report.md``, ``.json`` and (when matplotlib is there) ``.png``
    into ``folder`` (the export's staging folder); returns the files written.

    ``meta``: the companion document of the tokenizer the report describes.
    """
    name = split_name(work.cfg.output)[1]
    paths = {ext: folder / f"{name}.report.{ext}" for ext in ("md", "json", "png")}
    folder.mkdir(parents=True, exist_ok=True)
    doc = build_report(work, meta=meta, export_seconds=export_seconds)
    drawn = render_png(doc, paths["png"])
    atomic_write_bytes(paths["json"], (json.dumps(doc, indent=2, ensure_ascii=False) + "\n").encode())
    atomic_write_bytes(paths["md"], render_markdown(doc, png=paths["png"].name if drawn else None).encode())
    return [paths["md"], paths["json"]] + ([paths["png"]] if drawn else [])
