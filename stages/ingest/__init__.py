"""Stage 1, ingest: a phase's sources -> distinct-piece chunk files and held-out text.

Reads: every file of the phase's sources (streamed, never whole).
Writes, in ``WORK/ingest/NN-slug/``:

- ``chunk-00000.arrow`` ...: ``piece: binary, count: uint64``, distinct
  pieces with their counts, a chunk written whenever the summed table passes
  1/16 of ``working_set_mb`` (rows sorted by piece);
- ``heldout.arrow``: ``text: large_string``, the held-out documents;
- ``manifest.json``: files and their fingerprints, counts, timings (last).

The phase's text is measured first (``sources.text_bytes``); if it is more
than the budget buys (``sampling.capacity``), each document is kept with the
share capacity / total. The main process reads files, cuts them into
sampling units (documents, and parts of large ones: ``toktoktok.units``),
decides for each unit whether it is held out or left out of the sample
(seeded hashes of its byte offset, so the choice depends neither on timing,
threads nor the way the file is read), cuts units into parts at the
pattern's safe places and sends batches of parts
to workers, which cut out special tokens, find the pieces and count them.
For the named patterns (default, cl100k, o200k, gpt2) the workers are threads
running the numba scanner (``toktoktok.scanner``, proven piece for piece
against ``regex``), which releases the GIL. For a custom pattern they are processes
running ``regex.findall`` (``stages.ingest_worker``, which imports nothing
heavier): ``regex`` holds the GIL while it builds match objects, so threads
would not scale. Scanner threads count each batch straight into their own
table of its group of batches (``batching.GroupTables``), and the main thread
sums a group's tables into the running sums (``toktoktok.summing``) once every
batch of it is counted; a custom pattern's counts come back per batch, in
order. Chunk files hold their rows sorted by piece and are cut at fixed
places in the data, so they are the same for any ``threads``.

A ``.txt`` file is read as windows of raw bytes whose document ends a numba
kernel finds (``toktoktok.documents``). For the default and cl100k patterns
the training bytes skip the text path altogether: the main thread cuts them
at their last line break before non-white-space and checks they are UTF-8,
and the workers scan them as they are (``routing.Router.train_bytes``). The text
path (decode, ``PartCutter``, encode in the worker) is kept for other
patterns, rows, held-out text, and bytes that are not UTF-8. On 100 MB with
two threads this took ingest from 0.62 s (0.88 s on code) to 0.41 s (0.47 s):
the main thread had been the bottleneck, decoding, splitting and cutting
while holding the GIL.

Inside: ``routing`` (documents' fates, the held-out text), ``batching`` (the
workers and the order of their results), ``chunking`` (summing and writing
chunk files); this module runs them for a phase and writes the manifest.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pyarrow as pa

from toktoktok import sampling
from toktoktok.config import Config, Phase
from toktoktok.errors import PatternMiss, PatternTimeout
from toktoktok.interrupts import uninterrupted

from .. import workdir
from ..workdir import artifacts
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


def engine(cfg: Config) -> Callable[..., Batcher]:
    """The engine's ``read_all``: this process's threads (``local``), or Ray tasks over
    files and byte ranges whose sums meet in a tree (``ray_engine``, imported only
    when chosen: it loads Ray)."""
    if cfg.engine == "ray":
        from .ray_engine import read_all
    else:
        from .local import read_all
    return read_all


def run_ingest(cfg: Config, phase: Phase, *, force: bool = False, progress: Progress) -> dict[str, Any]:
    """Ingest one phase unless its artifacts are current; returns its manifest."""
    folder = workdir.ingest_dir(cfg, phase)
    skipped_links: list[dict[str, str]] = []  # broken symbolic links a folder scan passed by
    files = workdir.phase_files(phase, skipped=skipped_links if cfg.on_bad_file == "skip" else None)
    fingerprints = [workdir.fingerprint(src, path) for src, path in files]
    started = time.perf_counter()
    sizes = workdir.measure_text(cfg, phase, files, fingerprints)
    share = workdir.phase_share(cfg, sizes)
    key = workdir.ingest_key(cfg, phase, fingerprints, share)
    stale = artifacts.stale_reason(folder, key)
    if not force and stale is None:
        return {**artifacts.read_manifest(folder), "skipped": True}
    if artifacts.is_damage(stale):
        progress.note(f"warning: {stale}: ingesting phase '{phase.name}' again")
    if share < 1:
        progress.note(f"phase '{phase.name}' has {sum(s or 0 for s in sizes) / 2**20:.0f} MiB of text, more than "
                      f"working_set_mb ({cfg.working_set_mb} MiB) buys: sampling {share:.1%} of its text")
    artifacts.begin(folder)
    loading = time.perf_counter()
    uninterrupted(lambda: load_ingest_kernels(cfg))  # numba's compiled code, from its cache: timed apart, as train does
    loaded = time.perf_counter()
    tally, heldout = Tally(), []
    chunker = Chunker(folder, chunk_bytes(cfg))
    total = sum(fp["size"] for fp in fingerprints)  # sizes as listed: a file may vanish later
    progress.start(f"ingest {phase.name}", total=total, unit="B")
    try:
        batcher = engine(cfg)(cfg, phase, files, chunker, tally, heldout, progress, share)
    except PatternMiss as exc:  # a custom pattern: exit 1 whatever on_bad_file says (tiktoken would panic or drop text)
        raise PatternMiss(exc.words, file=files[exc.file][1], offset=exc.offset) from None
    except PatternTimeout as exc:  # a tokenizer must not depend on the machine's load
        raise PatternTimeout(exc.seconds, file=files[exc.file][1], offset=exc.offset,
                             per_mib=cfg.pattern_timeout_s) from None
    tally.forced_cuts += batcher.forced_cuts
    tally.bad_files[:0] = skipped_links
    warnings = special_token_warnings(cfg, phase, batcher.specials_found, tally.documents)
    for warning in warnings:
        progress.note(f"warning: {warning}")
    chunker.flush()
    progress.done()
    held_table = pa.table({"text": pa.array(heldout, type=pa.large_string())})
    outputs = chunker.outputs + [artifacts.write_ipc(folder / "heldout.arrow", held_table)]
    return artifacts.finish(folder, {
        "stage": "ingest",
        "phase": phase.name,
        "key": key,
        "settings": workdir.ingest_settings(cfg, phase, share),
        "inputs": [{**fp, "text_bytes": size} for fp, size in zip(fingerprints, sizes)],
        "sample": {"working_set_mb": cfg.working_set_mb, "capacity_bytes": sampling.capacity(cfg.working_set_mb),
                   "text_bytes": sum(s or 0 for s in sizes), "share": share},
        "outputs": outputs,
        "counts": {**tally.__dict__, "pieces": chunker.pieces, "chunks": len(chunker.outputs),
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

