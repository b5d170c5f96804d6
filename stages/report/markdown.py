"""The report as Markdown (``NAME.report.md``), rendered from its JSON document."""

from __future__ import annotations

from typing import Any

from ..workdir.progress import human_bytes
from .compression import SMALL_DOMAIN_BYTES, SMALL_DOMAIN_DOCUMENTS
from .usage import UNDERTRAINED_BELOW

NO_HELDOUT = "no held-out text"


def render_markdown(doc: dict[str, Any], *, png: str | None) -> str:
    """The report as Markdown (``png``: the picture's file name, None if not drawn)."""
    v = doc["vocab"]
    out = [f"# Training report: {doc['name']}", ""]
    base = {"bytes": "the 256 bytes"}.get(v["base"], f"{v['base_tokens']:,} tokens ({v['base']})")
    out += [f"`{doc['output']}`: {v['mergeable_ranks']:,} mergeable ranks + {v['special_tokens']} special tokens"
            + (f" = {v['vocab_size']:,} ids" if v["vocab_size"] is not None else "")
            + f"; base: {base}; pattern `{doc['pattern']}`; heldout_share {doc['heldout_share']}, seed {doc['seed']}.",
            ""]
    if any(p.get("pattern", doc["pattern"]) != doc["pattern"] for p in doc["phases"]):
        own = ", ".join(f"{p['name']} `{p['pattern']}`" for p in doc["phases"])
        out += [f"Each phase counted its pieces with its own pattern ({own}): a column \"after\" a phase "
                f"encodes the held-out text with that phase's pattern, the base column with the first phase's, "
                f"the final vocabulary with the tokenizer's (`{doc['pattern']}`, the last phase's).", ""]
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
    return out + _md_superwords(p)


def _md_superwords(p: dict[str, Any]) -> list[str]:
    s = p.get("superwords")
    if not s:
        return []
    spans = ", ".join(f"{n} words: {c:,}" for n, c in s["new_by_words"].items())
    out = ["", f"Tokens across words: {s['new_spanning_words']:,} of the phase's new tokens span more than one "
           f"word ({spans}); {_pct(s['produced_share'])} of the tokens its own text produces (its training pieces "
           "times their counts, and its held-out text, encoded with the final vocabulary) do. The compression table "
           f"above gives its held-out bytes per token before and after it."]
    if s["most_produced"]:
        out += ["", f"The {len(s['most_produced'])} most produced tokens that span words:", ""]
        out += _table(["rank", "produced", "words", "token"],
                      [[str(t["rank"]), f"{t['produced']:,}", str(t["words"]), _md_code(t["token"])]
                       for t in s["most_produced"]], "rrrl")
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


def _table(header: list[str], rows: list[list[str]], align: str | None = None) -> list[str]:
    align = align or "l" + "r" * (len(header) - 1)
    marks = {"l": "---", "r": "---:"}
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(marks[a] for a in align) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return lines


def _md_code(text: str) -> str:
    """A Markdown code span that survives inside a table cell."""
    text = text.replace("|", "\\|")
    return f"`` {text} ``" if "`" in text else f"`{text}`"


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|")


def _size(n: int) -> str:
    """Binary units, like all output: ``_size(18716) == '18.3 KiB'``."""
    return human_bytes(n)


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.2f}%"


def _ratio(nbytes: int, tokens: int | None) -> str:
    """Bytes per token for the Markdown, from the exact counts (not the rounded JSON)."""
    return f"{nbytes / tokens:.3f}" if tokens else "–"
