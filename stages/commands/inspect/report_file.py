"""``toktok inspect`` of a training report ``NAME.report.json``: its held-out
compression table and growth curve first (the report's own layout,
``toktoktok-report/1``), then every list of records and every flat record in
the JSON, as tables."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl

from toktoktok.errors import DamagedArtifact

from ..texts import table


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
