"""The growth curve as a picture (``NAME.report.png``), drawn with matplotlib when
it is installed (``pip install 'toktoktok[plot]'``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from toktoktok.atomic import atomic_path


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
