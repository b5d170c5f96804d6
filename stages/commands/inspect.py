"""``toktok inspect PATH``: a readable summary of any artifact or output.

What PATH may be (recognised by name, then by the Arrow schema), and what is
shown of it:

- an ingest chunk file ``chunk-NNNNN.arrow`` or phase folder (its chunks
  summed): the most frequent pieces with their counts and share, the totals;
- a held-out file ``heldout.arrow``: documents, bytes, the first documents;
- a merges file ``merges.arrow`` or a train phase folder: its phase, its rank
  range, the first and last merges with their counts and the tokens they join;
- a ``.tiktoken`` file, with its ``NAME.meta.json`` when present: the
  vocabulary's layout (single bytes, hardcoded merges or a warm start's base,
  each phase, special tokens) and the longest tokens;
- a training report ``NAME.report.json``: each of its tables.

The options (``--top``, ``--search``, ``--id``) are in docs/cli.md.

Decisions:

- Tokens are shown as double-quoted, escaped text (``show``), so spaces and
  line breaks are visible; ``--search`` reads the same escapes back.
- Every table is a polars DataFrame printed without shape and dtypes; counts
  are plain integers (no thousands separators), so they can be grepped.
- A path of a kind not listed above, or an option that does not apply to
  it (``--id`` on a chunk file), is a usage error (exit 2, ``UsageError``).
"""

from __future__ import annotations

import json
import re
import unicodedata
from pathlib import Path
from typing import Any, NoReturn

import polars as pl
import pyarrow as pa

from toktoktok.errors import DamagedArtifact, MissingInput, UsageError
from toktoktok.known_bases import recognise
from toktoktok.loading import check_companion, meta_path, read_meta, split_name
from toktoktok.tiktoken_file import read_tiktoken
from toktoktok.vocab import Vocab, hardcoded_merges

from ..workdir import StageFolder, artifacts
from .texts import table

DEFAULT_TOP = 20
_BYTES_AND_HARDCODED = 256 + 1161
_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t", "\\": "\\\\", '"': '\\"'}
_UNESCAPE = re.compile(r"\\(x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|[nrt\\\"])")


# ---------------------------------------------------------------- text helpers


def show(token: bytes | str) -> str:
    """A token as double-quoted, escaped text: bytes that are not valid UTF-8 as
    ``\\xNN``, control and other unprintable characters as ``\\n``, ``\\t``,
    ``\\uXXXX``, a backslash as ``\\\\``.

    >>> show(b" the"), show(b"\\n\\n"), show(b"\\xe2\\x80"), show("\\u00a0x")
    ('" the"', '"\\\\n\\\\n"', '"\\\\xe2\\\\x80"', '"\\\\u00a0x"')
    """
    text = token.decode("utf-8", "surrogateescape") if isinstance(token, bytes) else token
    out = []
    for ch in text:
        o = ord(ch)
        if 0xDC80 <= o <= 0xDCFF:
            out.append(f"\\x{o - 0xDC00:02x}")
        elif ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif ch.isprintable() and unicodedata.category(ch) not in ("Cs", "Co"):
            out.append(ch)
        elif o <= 0xFFFF:
            out.append(f"\\u{o:04x}")
        else:
            out.append(f"\\U{o:08x}")
    return '"' + "".join(out) + '"'


def parse_search(text: str) -> bytes:
    """The bytes a ``--search`` argument stands for (``\\xNN`` is one byte).

    >>> parse_search(r"\\xe2\\x80"), parse_search(r"a\\nb"), parse_search("é")
    (b'\\xe2\\x80', b'a\\nb', b'\\xc3\\xa9')
    """
    out = bytearray()
    pos = 0
    for m in _UNESCAPE.finditer(text):
        out += text[pos : m.start()].encode("utf-8", "surrogatepass")
        code = m.group(1)
        if code[0] == "x":
            out.append(int(code[1:], 16))
        elif code[0] in "uU":
            out += chr(int(code[1:], 16)).encode("utf-8", "surrogatepass")
        else:
            out += {"n": b"\n", "r": b"\r", "t": b"\t", "\\": b"\\", '"': b'"'}[code]
        pos = m.end()
    out += text[pos:].encode("utf-8", "surrogatepass")
    if not out:
        raise UsageError("--search: empty search text")
    return bytes(out)


def _check_top(top: int) -> int:
    if top < 1:
        raise UsageError(f"--top must be at least 1, got {top}")
    return top


# ---------------------------------------------------------------- command arguments


def refuse(message: str) -> NoReturn:
    """A usage error (exit 2 on the command line)."""
    raise UsageError(message)


def config_output(config: Path) -> Path:
    """The ``.tiktoken`` a config writes (its ``output:``); it must exist."""
    from toktoktok.config import load_config


    cfg = load_config(config)
    if not cfg.output.is_file():
        raise MissingInput(f"{cfg.output} does not exist yet: run `toktok run -c {config}` first")
    return cfg.output


def path_or_output(path: Path | None, config: Path | None, what: str) -> Path:
    """``path``, or the output of ``config``: exactly one of them must be given."""
    if (path is None) == (config is None):
        refuse(f"give {what} or -c CONFIG (one of them)")
    return path if path is not None else config_output(config)


# ---------------------------------------------------------------- dispatch


def kind_of(path: Path) -> str:
    """chunks | heldout | merges | tiktoken | report; UsageError for anything else."""
    name = path.name
    if path.is_dir():
        if list(path.glob("chunk-*.arrow")):
            return "chunks"
        if (path / "merges.arrow").is_file():
            return "merges"
        raise UsageError(f"{path}: a folder that is neither an ingest phase folder (chunk-*.arrow) nor a train "
                          f"phase folder (merges.arrow); give a file to inspect")
    if not path.is_file():
        raise UsageError(f"{path}: no such file or folder")
    if name.endswith((".tiktoken", ".tiktoken.gz")):
        return "tiktoken"
    if name.endswith(".report.json"):
        return "report"
    if name.endswith(".arrow"):
        try:
            columns = set(artifacts.read_ipc(path).schema.names)
        except (OSError, pa.ArrowException) as exc:
            raise UsageError(f"{path}: not an Arrow IPC file ({exc})") from exc
        if {"piece", "count"} <= columns:
            return "chunks"
        if {"rank", "left", "right", "bytes", "count"} <= columns:
            return "merges"
        if columns == {"text"}:
            return "heldout"
        raise UsageError(f"{path}: an Arrow file with columns {sorted(columns)}, not a toktoktok artifact")
    raise UsageError(f"{path}: unknown kind of file: expected a chunk, held-out or merges .arrow file, a "
                      f".tiktoken file, or a .report.json")


def inspect_path(path: Path, *, top: int = DEFAULT_TOP, search: str | None = None, token_id: int | None = None) -> str:
    """The printed summary of ``path`` (see the module docstring)."""
    path = Path(path)
    top = _check_top(top)
    if path.name.endswith(".meta.json") and path.is_file():  # the companion stands for its .tiktoken
        name = path.name[: -len(".meta.json")]
        beside = [path.with_name(name + s) for s in (".tiktoken", ".tiktoken.gz") if path.with_name(name + s).is_file()]
        if not beside:
            raise UsageError(f"{path}: a companion file without its {name}.tiktoken; inspect the .tiktoken")
        path = beside[0]
    kind = kind_of(path)
    needle = parse_search(search) if search is not None else None
    if token_id is not None and kind not in ("tiktoken", "merges"):
        raise UsageError(f"--id applies to a .tiktoken or a merges file, not to a {kind} file")
    if needle is not None and kind in ("heldout", "report"):
        raise UsageError(f"--search applies to chunk, merges and .tiktoken files, not to a {kind} file")
    if kind == "chunks":
        return inspect_chunks(path, top=top, needle=needle)
    if kind == "heldout":
        return inspect_heldout(path, top=top)
    if kind == "merges":
        return inspect_merges(path, top=top, needle=needle, token_id=token_id)
    if kind == "tiktoken":
        return inspect_tiktoken(path, top=top, needle=needle, token_id=token_id)
    return inspect_report(path)


# ---------------------------------------------------------------- chunks


def _chunk_files(path: Path) -> list[Path]:
    return sorted(path.glob("chunk-*.arrow")) if path.is_dir() else [path]


def _phase_of(folder: Path) -> str:
    """``01-english`` -> ``01-english (English)`` when the manifest names the phase."""
    manifest = StageFolder(folder).recorded or {}
    name = manifest.get("phase")
    return f"{folder.name} ({name})" if name else folder.name


def inspect_chunks(path: Path, *, top: int, needle: bytes | None) -> str:
    files = _chunk_files(path)
    frames = [pl.read_ipc(f).select("piece", "count") for f in files]
    df = pl.concat(frames) if len(frames) > 1 else frames[0]
    if len(frames) > 1:
        df = df.group_by("piece").agg(pl.col("count").sum())
    folder = path if path.is_dir() else path.parent
    total = int(df["count"].sum() or 0)
    distinct = df.height
    piece_bytes = int((df["piece"].bin.size() * df["count"]).sum() or 0) if distinct else 0
    what = f"{len(files)} chunk file{'s' if len(files) != 1 else ''}" if path.is_dir() else path.name
    lines = [f"{what} of ingest phase {_phase_of(folder)}: {distinct} distinct pieces, {total} pieces in all, "
             f"{piece_bytes} bytes of text in pieces"]
    df = df.sort(["count", "piece"], descending=[True, False])
    if needle is not None:
        df = df.filter(pl.col("piece").bin.contains(needle))
        lines.append(f"pieces containing {show(needle)}: {df.height}")
    else:
        lines.append(f"top {min(top, distinct)} pieces:")
    shown = df.head(top)
    counts = shown["count"].to_list()
    lines.append(table(pl.DataFrame({
        "#": list(range(1, shown.height + 1)),
        "piece": [show(p) for p in shown["piece"].to_list()],
        "bytes": [len(p) for p in shown["piece"].to_list()],
        "count": pl.Series(counts, dtype=pl.UInt64),
        "share %": [round(100 * c / total, 3) if total else 0.0 for c in counts],
    })))
    return "\n".join(lines)


# ---------------------------------------------------------------- held-out text


def inspect_heldout(path: Path, *, top: int) -> str:
    texts = artifacts.read_ipc(path)["text"].to_pylist()
    size = sum(len(t.encode("utf-8", "surrogatepass")) for t in texts)
    lines = [f"{path.name} of ingest phase {_phase_of(path.parent)}: {len(texts)} held-out documents, {size} bytes"]
    if texts:
        lines.append(f"first {min(top, len(texts))} documents:")
        lines.append(table(pl.DataFrame({
            "#": list(range(1, min(top, len(texts)) + 1)),
            "bytes": [len(t.encode("utf-8", "surrogatepass")) for t in texts[:top]],
            "text": [show(t[:80]) + ("..." if len(t) > 80 else "") for t in texts[:top]],
        })))
    return "\n".join(lines)


# ---------------------------------------------------------------- merges


def _known_tokens(folder: Path) -> dict[int, bytes]:
    """Token bytes by rank for what came before a phase: the base (bytes and, if the
    manifest says so, the hardcoded merges) and the earlier phases' merges files."""
    known: dict[int, bytes] = {}
    manifest = StageFolder(folder).recorded or {}
    base = (manifest.get("settings") or {}).get("base") or {}
    if "warm_start" not in base:
        vocab = Vocab.initial(hardcoded=bool(base.get("hardcoded_merges", True)))
        known.update((r, vocab.token(r)) for r in range(len(vocab)))
    for earlier in sorted(folder.parent.glob("*/merges.arrow")):
        if earlier.parent.name < folder.name:
            t = artifacts.read_ipc(earlier)
            known.update(zip(t["rank"].to_pylist(), t["bytes"].to_pylist()))
    return known


def _parts(token: bytes, left: int, right: int, known: dict[int, bytes]) -> tuple[str, str]:
    """The shown bytes of the two ranks a merge joins (``#N`` when unknown)."""
    lb, rb = known.get(left), known.get(right)
    if lb is None and rb is not None and token.endswith(rb):
        lb = token[: len(token) - len(rb)]
    if rb is None and lb is not None and token.startswith(lb):
        rb = token[len(lb) :]
    return (show(lb) if lb is not None else f"#{left}"), (show(rb) if rb is not None else f"#{right}")


def inspect_merges(path: Path, *, top: int, needle: bytes | None, token_id: int | None) -> str:
    file = path / "merges.arrow" if path.is_dir() else path
    folder = file.parent
    df = pl.read_ipc(file).select("rank", "left", "right", "bytes", "count")
    known = _known_tokens(folder)
    known.update(zip(df["rank"].to_list(), df["bytes"].to_list()))
    phase = _phase_of(folder)
    if df.height:
        first, last = int(df["rank"].min()), int(df["rank"].max())
        lines = [f"{file.name} of phase {phase}: {df.height} merges, ranks {first}..{last}"]
    else:
        lines = [f"{file.name} of phase {phase}: no merges"]

    def render(rows: pl.DataFrame) -> str:
        tokens = rows["bytes"].to_list()
        lefts, rights = rows["left"].to_list(), rows["right"].to_list()
        pairs = [_parts(t, lft, rgt, known) for t, lft, rgt in zip(tokens, lefts, rights)]
        return table(pl.DataFrame({
            "rank": rows["rank"],
            "token": [show(t) for t in tokens],
            "left": [p[0] for p in pairs],
            "right": [p[1] for p in pairs],
            "count": rows["count"],
        }))

    if token_id is not None:
        row = df.filter(pl.col("rank") == token_id)
        if row.height == 0:
            raise UsageError(f"--id {token_id}: no merge of rank {token_id} in {file} "
                              f"(its ranks are {lines[0].rsplit('ranks ', 1)[-1]})")
        lines.append(render(row))
        return "\n".join(lines)
    if needle is not None:
        found = df.filter(pl.col("bytes").bin.contains(needle))
        lines.append(f"merges whose token contains {show(needle)}: {found.height}")
        lines.append(render(found.head(top)))
        return "\n".join(lines)
    lines.append(f"first {min(top, df.height)} merges:")
    lines.append(render(df.head(top)))
    if df.height > top:
        lines.append(f"last {min(top, df.height - top)} merges:")
        lines.append(render(df.tail(min(top, df.height - top))))
    return "\n".join(lines)


# ---------------------------------------------------------------- .tiktoken


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
    ranks = read_tiktoken(path)
    companion = meta_path(path)
    meta = read_meta(companion) if companion.is_file() else {}
    if meta:
        check_companion(path, meta, ranks)
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


# ---------------------------------------------------------------- report


def _scalar(value: Any) -> bool:
    return not isinstance(value, (dict, list))


def _flat_row(row: dict[str, Any]) -> dict[str, Any]:
    """One level of nesting flattened: ``{"tokens": {"a": 1}}`` -> ``{"tokens.a": 1}``."""
    out: dict[str, Any] = {}
    for key, value in row.items():
        if isinstance(value, dict) and all(_scalar(v) for v in value.values()):
            out.update((f"{key}.{k}", v) for k, v in value.items())
        elif isinstance(value, list) and all(_scalar(v) for v in value):
            out[key] = ", ".join(str(_cell(v)) for v in value)
        else:
            out[key] = value if _scalar(value) else json.dumps(value, ensure_ascii=False)
    return out


def _flat_enough(value: Any) -> bool:
    """A value a table cell can hold: a scalar, a short list of scalars, a flat mapping."""
    if isinstance(value, dict):
        return all(_scalar(v) for v in value.values())
    if isinstance(value, list):
        return len(value) <= 4 and all(_scalar(v) for v in value)
    return True


def _is_rows(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(
        isinstance(v, dict) and all(_flat_enough(x) for x in v.values()) for v in value)


def _is_record(value: Any) -> bool:
    return isinstance(value, dict) and bool(value) and all(_scalar(v) for v in value.values())


def _frame(rows: list[dict[str, Any]]) -> pl.DataFrame:
    rows = [_flat_row(r) for r in rows]
    columns: list[str] = []
    for row in rows:
        columns += [k for k in row if k not in columns]
    data = {c: [_cell(row.get(c)) for row in rows] for c in columns}
    return pl.DataFrame(data, strict=False)


def _cell(value: Any) -> Any:
    if isinstance(value, float):
        return round(value, 4)
    return value if value is None or isinstance(value, (int, float, bool)) else str(value)


def _key_values(record: dict[str, Any]) -> pl.DataFrame:
    return pl.DataFrame({"key": list(record), "value": [str(_cell(v)) for v in record.values()]})


def _report_tables(title: str, value: Any, out: list[str]) -> None:
    """Every list of records and every flat record in the JSON, as tables."""
    label = title or "report"
    if _is_rows(value):
        out.append(f"{label}:")
        out.append(table(_frame(value)))
    elif _is_record(value):
        out.append(f"{label}:")
        out.append(table(_key_values(value)))
    elif isinstance(value, dict):
        scalars = {k: v for k, v in value.items() if _scalar(v) or v == []}
        if scalars:
            out.append(f"{label}:")
            out.append(table(_key_values({k: ("" if v == [] else v) for k, v in scalars.items()})))
        for key, sub in value.items():
            if not _scalar(sub) and sub != []:
                _report_tables(f"{title}.{key}" if title else str(key), sub, out)
    elif isinstance(value, list) and value:
        if all(_scalar(v) for v in value):
            out.append(f"{label}: " + ", ".join(str(_cell(v)) for v in value))
        elif all(isinstance(v, list) and all(_scalar(x) for x in v) for v in value):
            width = max(len(v) for v in value)
            out.append(f"{label}:")
            out.append(table(pl.DataFrame({f"{i + 1}": [_cell(v[i]) if i < len(v) else None for v in value]
                                           for i in range(width)}, strict=False)))
        else:
            for i, sub in enumerate(value):
                name = sub.get("name") if isinstance(sub, dict) and isinstance(sub.get("name"), str) else str(i)
                _report_tables(f"{label}[{name}]", sub, out)


def _compression_tables(report: dict[str, Any], out: list[str]) -> bool:
    """The training report's own layout (``toktoktok-report/1``): held-out compression
    (rows = held-out domain, columns = vocabulary) and the growth curve."""
    try:
        comp = report["compression"]
        columns = comp["columns"]
        data: dict[str, list[Any]] = {"held-out text": [r["phase"] for r in comp["rows"]],
                                      "bytes": [r.get("heldout_bytes") for r in comp["rows"]]}
        for c in columns:
            data[str(c["label"])] = [_cell(r["bytes_per_token"].get(c["key"])) for r in comp["rows"]]
        out.append("compression, UTF-8 bytes per token of each phase's held-out text (columns: the vocabulary):")
        out.append(table(pl.DataFrame(data, strict=False)))
        curve = report.get("curve") or {}
        points = curve.get("checkpoints") or []
        if points:
            domains = list(points[0]["bytes_per_token"])
            rows = {"vocab tokens": [p["vocab_tokens"] for p in points], "point": [str(p.get("label")) for p in points]}
            for d in domains:
                rows[str(d)] = [_cell(p["bytes_per_token"].get(d)) for p in points]
            out.append("compression as the vocabulary grows (bytes per token on each domain's held-out sample):")
            out.append(table(pl.DataFrame(rows, strict=False)))
        return True
    except (KeyError, TypeError, AttributeError, IndexError, pl.exceptions.PolarsError):
        return False


def inspect_report(path: Path) -> str:
    try:
        report = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DamagedArtifact(f"{path}: cannot read the report ({exc})") from exc
    out = [f"{path.name}:"]
    if isinstance(report, dict) and _compression_tables(report, out):
        report = {k: v for k, v in report.items() if k not in ("compression", "curve")}
    _report_tables("", report, out)
    return "\n".join(out)
