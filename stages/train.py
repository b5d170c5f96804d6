"""Stage 2, train: a phase's piece counts -> its merges, on top of every earlier phase.

Reads (through its ``Work``: the phase's ingest folder and the vocabulary
after the phase before): ``WORK/ingest/NN-slug/chunk-*.arrow`` (this phase's
pieces) and ``WORK/train/MM-slug/merges.arrow`` of every earlier phase.
Writes, in ``WORK/train/NN-slug/``:

- ``merges.arrow``: ``rank, left, right: uint32`` (ranks of the merged token
  and of its two parts), ``bytes: binary``, ``count: uint64`` (the pair's
  count when it was merged), in the order learned. A merge whose bytes were
  already a token repeats that token's rank (docs/training.md) and adds no rank;
- ``usage.arrow``: ``id: uint32, count: uint64``: how often each id of the
  vocabulary after the phase occurs when the phase's pieces are segmented with
  it (as tiktoken would; each piece times its count), ids that occur only. The
  trainer has that segmentation at hand from its own check; the report reads
  the last phase's instead of segmenting the inventory again;
- ``manifest.json``: inputs' digests, counts, rate, timings (last).
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import pyarrow as pa

from toktoktok import memory
from toktoktok.config import Config, Phase
from toktoktok.counts import inventory
from toktoktok.errors import TooFewMerges
from toktoktok.interrupts import uninterrupted
from toktoktok.merge import PhaseResult, load_merge_kernels, train_phase
from toktoktok.patterns import Pattern, joined_example
from toktoktok.piece_order import pieces_sorted, sorted_arrays

from .workdir import Work, artifacts, is_damage
from .workdir.progress import Progress

MERGES_SCHEMA = pa.schema(
    [("rank", pa.uint32()), ("left", pa.uint32()), ("right", pa.uint32()), ("bytes", pa.binary()), ("count", pa.uint64())]
)


def merges_table(result: PhaseResult) -> pa.Table:
    return pa.table(
        {
            "rank": result.rank.astype(np.uint32),
            "left": result.left.astype(np.uint32),
            "right": result.right.astype(np.uint32),
            "bytes": pa.array(result.merged_bytes(), type=pa.binary()),
            "count": result.count.astype(np.uint64),
        },
        schema=MERGES_SCHEMA,
    )


def too_few_merges(cfg: Config, phase: Phase, made: int) -> str:
    """Why a run with ``vocab_size`` stops: the phase, what it made and needed, the fixes.

    Without ``vocab_size`` a phase that runs out of pairs only warns: the
    vocabulary is smaller and every special token's id moves down. With it,
    the size is a promise to the model, so the run fails instead.
    """
    short = phase.merges - made
    fixes = [f"give phase {phase.name!r} more text", f"lower min_frequency (now {cfg.min_frequency})"]
    if cfg.max_token_bytes is not None:
        fixes.append(f"raise max_token_bytes (now {cfg.max_token_bytes})")
    smaller = "a smaller vocab_size" + ("" if phase.gets_rest else f" with fewer merges in phase {phase.name!r}")
    fixes.append(f"{smaller} (at least {short:,} fewer)")
    return (f"phase {phase.name!r} made {made:,} of the {phase.merges:,} merges that vocab_size: {cfg.vocab_size:,} "
            f"needs of it: no pair left is seen at least {cfg.min_frequency} times; " + ", or ".join(fixes))


JOINED_SAMPLE = 20_000  # a phase's most frequent pieces, looked at for pieces an earlier pattern cuts


def coarser_pattern_notes(cfg: Config, phase: Phase, buf: np.ndarray, off: np.ndarray,
                          counts: np.ndarray) -> list[str]:
    """One line for each earlier phase whose pattern cuts pieces this phase's
    pattern keeps whole (``patterns.joined_example``, on this phase's most
    frequent pieces): what that means for the earlier phase's tokens."""
    own = cfg.pattern_of(phase)
    others: dict[str, tuple[Phase, Pattern]] = {}  # each other pattern of an earlier phase, its first phase
    for earlier in cfg.phases[: phase.index - 1]:
        others.setdefault(cfg.pattern_of(earlier).tiktoken, (earlier, cfg.pattern_of(earlier)))
    others.pop(own.tiktoken, None)
    if not others:  # one pattern throughout (the usual case): nothing to look at
        return []
    top = np.argsort(counts, kind="stable")[::-1][:JOINED_SAMPLE].tolist()
    pieces = [buf[off[i] : off[i + 1]].tobytes() for i in top]
    notes = []
    for earlier, theirs in others.values():
        if (example := joined_example(own, theirs, pieces)) is not None:
            notes.append(f"phase '{phase.name}' counts with pattern {_shown(own)}, which keeps whole pieces that "
                         f"phase '{earlier.name}''s {_shown(theirs)} cuts (such as {example!r}): the earlier phase's "
                         f"tokens will be applied inside these longer pieces")
    return notes


def _shown(pattern: Pattern) -> str:
    return pattern.name if pattern.name != "custom" else f"(a custom regex) {pattern.tiktoken!r}"


def run_train(work: Work, phase: Phase, *, force: bool = False, progress: Progress) -> dict[str, Any]:
    """Train one phase unless its merges are current; returns its manifest."""
    cfg, folder, pieces = work.cfg, work.train(phase), work.ingest(phase)
    key = folder.key()
    stale = folder.stale_reason(key)
    if not force and stale is None:
        return {**folder.recorded, "skipped": True}
    if is_damage(stale):
        progress.note(f"warning: {stale}: training phase '{phase.name}' again")
    started = time.perf_counter()
    folder.begin()
    ingest_manifest = pieces.manifest()
    table = pieces.inventory()
    # pieces in byte order: pieces that share a pair sit close together, so the
    # merge loop's visits hit the cache (a sort that costs less than it saves)
    buf, off, counts = inventory(table)
    del table  # the arrays hold what training needs (the counts as a copy)
    vocab = work.vocab_after(phase.index - 1)
    warnings = []
    need = memory.train_estimate_mb(distinct_pieces=len(counts), piece_bytes=len(buf))
    if need > max(cfg.working_set_mb, memory.TRAIN_SLACK_MB):
        warnings.append(f"phase '{phase.name}' has {len(counts)} distinct pieces: training them needs about "
                        f"{need:.0f} MiB, more than working_set_mb ({cfg.working_set_mb} MiB); text with this many "
                        "distinct pieces per byte needs a larger budget")
        progress.note(f"warning: {warnings[-1]}")
    read = time.perf_counter()
    uninterrupted(load_merge_kernels)  # numba's compiled code, from its cache: timed apart from the merge loop
    loaded = time.perf_counter()
    # after the kernels are loaded (the sort's among them): a Ctrl-C while numba loads
    # code is held off, and one in LLVM's callback crashed the process
    if not pieces_sorted(buf, off):  # one chunk file is (ingest writes its rows sorted)
        buf, off, counts = sorted_arrays(buf, off, counts)
    progress.start(f"train {phase.name}", total=phase.merges, unit="merges")
    result = train_phase(vocab, buf, off, counts, merges=phase.merges, min_frequency=cfg.min_frequency,
                         max_token_bytes=cfg.max_token_bytes, max_token_words=cfg.max_token_words_of(phase),
                         on_progress=progress.set)
    trained = time.perf_counter()
    progress.done(f"{result.made} new tokens")
    if result.made < phase.merges and cfg.vocab_size is not None:
        raise TooFewMerges(too_few_merges(cfg, phase, result.made))
    if result.made < phase.merges:
        warnings.append(f"phase '{phase.name}' ran out of pairs seen at least {cfg.min_frequency} times: "
                        f"{result.made} of {phase.merges} merges made")
    warnings += coarser_pattern_notes(cfg, phase, buf, off, counts)
    for warning in warnings[1 if need > max(cfg.working_set_mb, memory.TRAIN_SLACK_MB) else 0:]:
        progress.note(f"warning: {warning}")
    output = artifacts.write_ipc(folder.path / "merges.arrow", merges_table(result))
    used = np.flatnonzero(result.usage)
    usage = artifacts.write_ipc(folder.path / "usage.arrow", pa.table({
        "id": pa.array(used.astype(np.uint32)), "count": pa.array(result.usage[used].astype(np.uint64))}))
    return folder.finish({
        "stage": "train",
        "phase": phase.name,
        "key": key,
        "settings": folder.settings(),
        "inputs": {"pieces": ingest_manifest["outputs"], "vocab_size_before": len(vocab)},
        "outputs": [output, usage],
        "counts": {
            "distinct_pieces": len(counts),
            "pieces": int(counts.sum()),
            "merges_requested": phase.merges,
            "merges_made": result.made,
            "merges_into_existing_tokens": len(result.rank) - result.made,
            "vocab_size_after": len(result.vocab),
            "differing_pieces": result.differing_pieces,
            "differing_weight": result.differing_weight,
            "merge_loop_pieces_visited": result.visited_pieces,
            "merge_loop_symbols_scanned": result.scanned_symbols,
        },
        "warnings": warnings,
        "seconds": {"load": round(read - started, 3), "kernels": round(loaded - read, 3),
                    "train": round(trained - loaded, 3),
                    "total": round(time.perf_counter() - started, 3)},
        "merges_per_second": round(result.made / max(trained - loaded, 1e-9), 1),
        # inside train: segmenting, counting pairs, the first 1,000 merges, the rest, the check
        "train_split_seconds": result.seconds,
    })
