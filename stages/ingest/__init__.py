"""Stage 1, ingest: a phase's sources -> distinct-piece chunk files and held-out text.

Reads every file of the phase's sources (streamed, never whole); writes
``chunk-NNNNN.arrow``, ``heldout.arrow`` and, last, ``manifest.json`` in
``WORK/ingest/NN-slug/`` (docs/outputs.md, The work folder).

The phase's text is measured first (``sources.text_bytes``; where that
would read the text, a guess far below the budget will do, checked against
what ingest then reads: ``IngestFolder.inputs``); if it is more than the
budget buys (``sampling.capacity``), each unit is kept with the share
capacity / total. The main process reads files, cuts them into
sampling units (``toktoktok.units``), decides each unit's fate (held out,
left out of the sample or trained: ``routing``), cuts the trained text at the
pattern's safe places and sends batches of it to workers (``batching``),
which cut out special tokens, find the pieces and count them; the counts
are summed into chunk files (``chunking``), their rows sorted by piece and
cut at fixed places in the data, so they are the same for any ``threads``.

For the named patterns the workers are threads running the numba scanner,
which releases the GIL; for a custom pattern, processes running
``regex.findall`` (``regex_worker``), since ``regex`` holds the GIL while it
builds match objects. For the default and cl100k patterns a ``.txt`` file's
training bytes skip the text path (``routing.Router.train_bytes``), on which
the main thread, decoding, splitting and cutting while holding the GIL, is
the bottleneck. ``engine`` chooses the local engine or Ray's.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import Any

import pyarrow as pa

from toktoktok import sampling
from toktoktok.config import Config, Phase
from toktoktok.errors import PatternMiss, PatternTimeout
from toktoktok.interrupts import uninterrupted

from ..workdir import Work, artifacts, is_damage
from ..workdir.progress import Progress
from .batching import Batcher, load_ingest_kernels
from .chunking import Chunker, chunk_bytes
from .routing import Tally

SPECIAL_WARN_SHARE = 0.001  # a special token found this often per document, if also a word, is warned about


def special_token_warnings(cfg: Config, phase: Phase, found: dict[str, int], documents: int) -> list[str]:
    """Special tokens cut out of the text that look like ordinary text: the pattern
    returns one as a single piece (``"the"``, ``" "``) and it occurs at least
    ``SPECIAL_WARN_SHARE`` times per document of the phase. (Occurrences, not
    documents holding them, are counted: a bound from above, decided so that
    counting stays one pass in the workers.)"""
    from toktoktok.pretokenize import pieces

    out = []
    for tok, n in found.items():
        if n and n >= SPECIAL_WARN_SHARE * max(documents, 1) and pieces(tok, cfg.pattern) == [tok]:
            out.append(f"special token {tok!r} occurs {n} times in phase '{phase.name}' ({documents} documents): "
                       "the pattern reads it as an ordinary piece of text, and every occurrence is cut out of "
                       "the training text; is it meant to be a special token?")
    return out


def check_engine(cfg: Config) -> None:
    """``engine: ray`` needs Ray importable: a ``ConfigError`` (exit 2) before any
    work otherwise, the same for ``toktok plan`` as for the stage commands."""
    if cfg.engine == "ray":
        from .ray_engine import import_ray

        import_ray(cfg)


def engine(cfg: Config) -> Callable[..., Batcher]:
    """The engine's ``read_all``: this process's threads (``local``), or Ray tasks over
    files and byte ranges whose sums meet in a tree (``ray_engine``, imported only
    when chosen: it loads Ray)."""
    if cfg.engine == "ray":
        from .ray_engine import read_all
    else:
        from .local import read_all
    return read_all


def run_ingest(work: Work, phase: Phase, *, force: bool = False, progress: Progress) -> dict[str, Any]:
    """Ingest one phase unless its artifacts are current; returns its manifest."""
    cfg, folder = work.cfg, work.ingest(phase)
    cfg = dataclasses.replace(cfg, pattern=cfg.pattern_of(phase))  # the engines count with the phase's pattern
    started = time.perf_counter()
    inputs = folder.inputs()
    files, fingerprints, sizes, share = inputs.files, inputs.fingerprints, inputs.sizes, inputs.share
    key = folder.key()
    stale = folder.stale_reason(key)
    if not force and stale is None:
        return {**folder.recorded, "skipped": True}
    if is_damage(stale):
        progress.note(f"warning: {stale}: ingesting phase '{phase.name}' again")
    for src, cap in zip(phase.sources, inputs.caps):
        if cap < 1:
            progress.note(f"phase '{phase.name}': {src.path} is capped at max_bytes: {src.max_bytes:,}: "
                          f"keeping {cap:.1%} of its text")
    if share < 1:
        progress.note(f"phase '{phase.name}' has {sum(s or 0 for s in sizes) / 2**20:.0f} MiB of text, more than "
                      f"working_set_mb ({cfg.working_set_mb} MiB) buys: sampling {share:.1%} of its text")
    folder.begin()
    loading = time.perf_counter()
    uninterrupted(lambda: load_ingest_kernels(cfg))  # numba's compiled code, from its cache: timed apart, as train does
    loaded = time.perf_counter()
    tally, heldout = Tally(), []
    chunker = Chunker(folder.path, chunk_bytes(cfg), separate_files=cfg.on_bad_file == "skip")
    total = sum(fingerprints.columns["size"])  # sizes as listed: a file may vanish later
    progress.start(f"ingest {phase.name}", total=total, unit="B")
    try:
        batcher = engine(cfg)(cfg, phase, files, chunker, tally, heldout, progress, inputs.shares)
    except PatternMiss as exc:  # a custom pattern: exit 1 whatever on_bad_file says (tiktoken would panic or drop text)
        raise PatternMiss(exc.words, file=files[exc.file][1], offset=exc.offset) from None
    except PatternTimeout as exc:  # a tokenizer must not depend on the machine's load
        raise PatternTimeout(exc.seconds, file=files[exc.file][1], offset=exc.offset,
                             per_mib=cfg.pattern_timeout_s) from None
    if inputs.guessed:  # sizes were guesses: what was read is the truth, and may want a sample after all
        measured = folder.measured(batcher.text_bytes)
        if measured.share != share:
            progress.done()
            return run_ingest(work, phase, force=True, progress=progress)
        sizes = measured.sizes
    tally.forced_cuts += batcher.forced_cuts
    tally.bad_files[:0] = inputs.skipped
    warnings = special_token_warnings(cfg, phase, batcher.specials_found, tally.documents)
    for warning in warnings:
        progress.note(f"warning: {warning}")
    chunker.flush()
    progress.done()
    held_table = pa.table({"text": pa.array(heldout, type=pa.large_string())})
    outputs = chunker.outputs + [artifacts.write_ipc(folder.path / "heldout.arrow", held_table)]
    return folder.finish({
        "stage": "ingest",
        "phase": phase.name,
        "key": key,
        "settings": folder.settings(),
        "inputs": {**fingerprints.columns, "text_bytes": sizes},  # a list a field, as the key has them
        "sample": {"working_set_mb": cfg.working_set_mb, "capacity_bytes": sampling.capacity(cfg.working_set_mb),
                   "text_bytes": sum(s or 0 for s in sizes), "share": share,
                   **source_caps(phase, files, sizes, inputs.caps, tally)},
        "outputs": outputs,
        "counts": {**counted(tally), "pieces": chunker.pieces, "chunks": len(chunker.outputs),
                   "special_tokens_found": batcher.specials_found},
        "warnings": warnings,
        "engine": {"name": cfg.engine, **({"tasks": batcher.tasks, "recounted": batcher.recounted,
                                           "seconds": batcher.seconds} if cfg.engine == "ray" else {})},
        # kernels: loading numba's code; ingest: reading, cutting, counting, writing
        "seconds": {"kernels": round(loaded - loading, 3),
                    "ingest": round(time.perf_counter() - started - (loaded - loading), 3),
                    "total": round(time.perf_counter() - started, 3)},
        # worker processes (regex path) run side by side: their peaks add up
        "workers_peak_rss_mb": round(sum(batcher.worker_peaks_kb.values()) / 1024, 1),
    })



def counted(tally: Tally) -> dict[str, Any]:
    """The tally as the manifest's ``counts`` (the kept bytes by file go to ``source_caps``)."""
    return {name: value for name, value in tally.__dict__.items() if name != "kept_by_file"}


def source_caps(phase: Phase, files: list, sizes: list[int | None], caps: tuple[float, ...],
                tally: Tally) -> dict[str, Any]:
    """The manifest's ``sample.sources`` when a source of the phase sets ``max_bytes``
    (nothing otherwise): each source's text bytes, cap, cap share and the training
    bytes kept of it."""
    if not caps:
        return {}
    place = {id(src): i for i, src in enumerate(phase.sources)}
    text, kept = [0] * len(caps), [0] * len(caps)
    for index, ((src, _), size) in enumerate(zip(files, sizes)):
        text[place[id(src)]] += size or 0
        kept[place[id(src)]] += tally.kept_by_file.get(index, 0)
    return {"sources": [{"path": str(src.path), "text_bytes": text[i], "max_bytes": src.max_bytes,
                         "cap_share": caps[i], "kept_bytes": kept[i]} for i, src in enumerate(phase.sources)]}
