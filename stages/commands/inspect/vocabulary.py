"""``toktok inspect`` of a ``.tiktoken`` (or ``.tiktoken.gz``) file, with its
``NAME.meta.json`` when present: the vocabulary size broken down into single
bytes, hardcoded merges, a warm start's base, each phase's merges (from the
meta's ``phases``) and special tokens; the longest tokens; the tokens
containing a text; one token by id and the two tokens it is built from
(``_built_from``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl

from toktoktok.errors import UsageError
from toktoktok.known_bases import recognise
from toktoktok.loading import meta_path, read_checked, split_name
from toktoktok.vocab import hardcoded_merges

from ..texts import table
from .shown import show

_BYTES_AND_HARDCODED = 256 + 1161


def _is_hardcoded(by_rank: dict[int, bytes]) -> bool:
    """Ranks 256..1416 hold docs/vocabulary.md's hardcoded merges, in order."""
    return all(by_rank.get(256 + i) == a + b for i, (a, b) in enumerate(hardcoded_merges()))


def _segments(ranks: dict[bytes, int], meta: dict[str, Any], by_rank: dict[int, bytes]) -> list[dict[str, Any]]:
    """Rows of the vocabulary breakdown: what each range of ranks is.

    Without a companion file the hardcoded merges are recognised by their
    bytes (docs/vocabulary.md) and everything else is "merges".
    """
    singles = [r for t, r in ranks.items() if len(t) == 1]
    rows: list[dict[str, Any]] = [{"part": "single bytes", "first": min(singles), "last": max(singles),
                                   "tokens": len(singles)}]
    phases = meta.get("phases") or []
    made = [p for p in phases if int(p.get("merges_made", 1))]
    first_phase = min((int(p["first_rank"]) for p in made), default=max(by_rank) + 1)
    start = 256
    if meta.get("warm_start"):
        base = [r for r, t in by_rank.items() if r < first_phase and len(t) > 1]
        rows.append({"part": f"warm start base ({split_name(meta['warm_start'])[1]})",
                     "first": min(base, default=None), "last": max(base, default=None), "tokens": len(base)})
        start = first_phase
    elif meta.get("hardcoded_merges") if meta else _is_hardcoded(by_rank):
        rows.append({"part": "hardcoded merges", "first": 256, "last": _BYTES_AND_HARDCODED - 1,
                     "tokens": sum(1 for r in range(256, _BYTES_AND_HARDCODED) if r in by_rank)})
        start = _BYTES_AND_HARDCODED
    for p in phases:
        n = int(p.get("merges_made", int(p["last_rank"]) - int(p["first_rank"]) + 1))
        rows.append({"part": f"phase {p['name']}", "first": int(p["first_rank"]) if n else None,
                     "last": int(p["last_rank"]) if n else None, "tokens": n})
        if n:
            start = max(start, int(p["last_rank"]) + 1)
    rest = [r for r, t in by_rank.items() if r >= start and len(t) > 1]
    if rest:
        rows.append({"part": "other merges" if len(rows) > 1 else "merges", "first": min(rest), "last": max(rest),
                     "tokens": len(rest)})
    return rows


def _built_from(token: bytes, rank: int, ranks: dict[bytes, int]) -> list[int]:
    """How tiktoken would encode ``token`` with only the ranks below ``rank``: the
    two tokens it is built from (for a vocabulary trained by BPE, the merge
    that made it)."""
    from toktoktok.segment import segment_reference

    if len(token) == 1:
        return []
    below = {t: r for t, r in ranks.items() if r < rank}
    return segment_reference(token, below)


def _kind_of_rank(rank: int, rows: list[dict[str, Any]]) -> str:
    for row in reversed(rows):
        if row["first"] is not None and row["first"] <= rank <= row["last"]:
            return row["part"]
    return "single byte" if rank < 256 else "merge"


def inspect_tiktoken(path: Path, *, top: int, needle: bytes | None, token_id: int | None) -> str:
    ranks, meta = read_checked(path)
    companion = meta_path(path)
    known = recognise(path) if not meta else None
    specials: dict[str, int] = dict(meta.get("special_tokens") or (known.special_tokens if known else {}))
    by_rank = {r: t for t, r in ranks.items()}
    rows = _segments(ranks, meta, by_rank)
    name = split_name(path)[1]
    top_id = max([*by_rank, *specials.values()])
    gaps = top_id + 1 - len(ranks) - len(specials)
    head = (f"{path.name}: {len(ranks) + len(specials)} tokens ({len(ranks)} ranks + {len(specials)} special), "
            f"ids 0..{top_id}" + (f", {gaps} unused ids" if gaps else ""))
    if known is not None:
        head += f"; OpenAI's {known.name} (recognised by content: its special tokens); pattern {known.pattern}"
    else:
        head += f"; companion {companion.name}" if meta else "; no companion .meta.json (no phases, no special tokens)"
    if meta.get("pattern"):
        head += f"; pattern {meta['pattern'].get('name', 'custom')}"
    lines = [head]

    if token_id is not None:
        lines.append(_token_view(token_id, ranks, by_rank, specials, rows))
        return "\n".join(lines)
    if needle is not None:
        found = sorted((r, t) for r, t in by_rank.items() if needle in t)
        found_specials = sorted((i, s) for s, i in specials.items() if needle in s.encode())
        lines.append(f"tokens containing {show(needle)}: {len(found)}"
                     + (f" (+ {len(found_specials)} special)" if found_specials else ""))
        shown = [(r, show(t), len(t), _kind_of_rank(r, rows)) for r, t in found[:top]]
        shown += [(i, s, len(s.encode()), "special token") for i, s in found_specials[: max(0, top - len(shown))]]
        lines.append(table(pl.DataFrame({
            "id": [s[0] for s in shown], "token": [s[1] for s in shown],
            "bytes": [s[2] for s in shown], "part": [s[3] for s in shown],
        }, schema={"id": pl.Int64, "token": pl.String, "bytes": pl.Int64, "part": pl.String})))
        return "\n".join(lines)

    breakdown = list(rows)
    if specials:
        breakdown.append({"part": "special tokens", "first": min(specials.values()), "last": max(specials.values()),
                          "tokens": len(specials)})
    breakdown.append({"part": "total", "first": 0, "last": top_id, "tokens": len(ranks) + len(specials)})
    lines.append(f"vocabulary of {name}:")
    lines.append(table(pl.DataFrame(breakdown, schema={"part": pl.String, "first": pl.Int64,
                                                        "last": pl.Int64, "tokens": pl.Int64})))
    if specials:
        lines.append("special tokens:")
        lines.append(table(pl.DataFrame({"id": list(specials.values()), "token": list(specials)})))
    longest = sorted(by_rank.items(), key=lambda rt: (-len(rt[1]), rt[0]))[:top]
    lines.append(f"longest {len(longest)} tokens:")
    lines.append(table(pl.DataFrame({
        "id": [r for r, _ in longest], "bytes": [len(t) for _, t in longest],
        "token": [show(t) for _, t in longest], "part": [_kind_of_rank(r, rows) for r, _ in longest],
    })))
    return "\n".join(lines)


def _token_view(token_id: int, ranks: dict[bytes, int], by_rank: dict[int, bytes], specials: dict[str, int],
                rows: list[dict[str, Any]]) -> str:
    for tok, sid in specials.items():
        if sid == token_id:
            return table(pl.DataFrame({"field": ["id", "kind", "text", "bytes"],
                                       "value": [str(sid), "special token", show(tok), str(len(tok.encode()))]}))
    if token_id not in by_rank:
        top_id = max([*by_rank, *specials.values()])
        raise UsageError(f"--id {token_id}: no token has this id (ids 0..{top_id})")
    token = by_rank[token_id]
    parts = _built_from(token, token_id, ranks)
    fields = ["id", "kind", "text", "bytes", "hex"]
    values = [str(token_id), _kind_of_rank(token_id, rows), show(token), str(len(token)),
              token[:32].hex(" ") + (" ..." if len(token) > 32 else "")]
    if parts:
        fields.append("built from")
        values.append(" + ".join(f"{p} {show(by_rank[p])}" for p in parts))
    return table(pl.DataFrame({"field": fields, "value": values}))
