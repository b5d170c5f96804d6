"""The training report: ``NAME.report.md``, ``.report.json`` and ``.report.png``.

What it holds: docs/outputs.md (The training report). The orchestrator
(``pipeline``) calls ``write_report`` once export has built the tokenizer and
it has passed its own validation, before the set is published, with the
staged folder to write into. The report reads only artifacts: the stage
manifests, each phase's ``heldout.arrow`` and ``merges.arrow``, and the
``.meta.json``.

One module an idea:

- ``growth``: the vocabulary as it grows, base then each phase's new tokens;
- ``compression``: held-out compression per phase (the table) and as the
  vocabulary grows (the curve);
- ``usage``: how often the phase's text produces each token; the
  under-trained ones;
- ``document``: the JSON document (per phase: counts, longest tokens, first
  merges, token lengths; the timings);
- ``markdown``: the Markdown; ``picture``: the curve drawn with matplotlib.

Everything but the timings (seconds, peak RSS: ``timings`` in the JSON, the
"Time and memory" table in the Markdown) is a function of the artifacts, so
the same run gives the same report.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from toktoktok.atomic import atomic_write_bytes
from toktoktok.loading import split_name

from ..workdir import Work
from .document import build_report
from .markdown import render_markdown
from .picture import render_png


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
