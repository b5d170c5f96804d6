"""``toktoktok.train``: train a tokenizer from Python strings, get a ``tiktoken.Encoding``.

    >>> import toktoktok
    >>> docs = ["the cat sat on the mat. " * 20, "the dog sat on the log. " * 20]
    >>> enc = toktoktok.train(docs, merges=10, special_tokens=["<|endoftext|>"],
    ...                       hardcoded_merges=False, heldout_share=0, threads=1)
    >>> enc.n_vocab, enc.decode(enc.encode(" the cat"))
    (267, ' the cat')

``train`` runs the stages' steps in memory, with none of their files: it
never imports ``stages`` and writes nothing, so it works from any script,
notebook or stdin. It gives the ``.tiktoken`` that ``toktok run`` gives on the
jsonl file ``toktoktok_stages.pipeline.train_texts`` writes for the same
documents and options, one phase named ``train`` (``tests/library/test_api.py``
compares them). The steps: ``documents`` (each string one document),
``_fates`` (the held-out choice and the sample, keyed as that file's rows),
``count_documents`` (the pieces, as ingest counts them), ``_learn`` (each
phase's merges on the vocabulary so far; then the special tokens' ids) and
``encoding`` (checked as ``toktoktok.load`` checks a file). A column of Arrow
strings is ``api_columns``'s, several phases (``phases=``) ``api_phases``'.

Options are the config's top-level keys (docs/configuration.md), checked by
the config's own checks. Running a config or keeping the outputs is the
pipeline's (``toktoktok_stages.pipeline.train_config``, ``train_texts``):
``config=``, a config path and ``output=`` are refused, naming them.
"""

from __future__ import annotations

import contextlib
import difflib
import os
import re
import sys
import time
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

import tiktoken

from toktoktok import api_phases
from toktoktok.api_phases import PHASE_NAME, PHASE_SLUG
from toktoktok.config import MAX_MERGES, TOP_KEYS, check_settings
from toktoktok.errors import ConfigError, LayoutError, TooFewMerges, UsageError
from toktoktok.tuning import count_batch_chars, resolve_threads

if TYPE_CHECKING:  # numpy, numba and pyarrow load when train runs, not with ``import toktoktok``
    import numpy as np

READ_BLOCK_CHARS = 1 << 20  # ingest reads a jsonl or parquet document in blocks of this many characters
_NOT_OPTIONS = ("work_dir", "special_tokens")
_MOVED = {
    "config": "train(): config= moved: use toktoktok_stages.pipeline.train_config(PATH)",
    "output": "train(): output= moved: use toktoktok_stages.pipeline.train_texts(texts, output=PATH, merges=..., ...) "
              "(toktoktok.train keeps nothing on disk)",
}
_SURROGATE = re.compile("[\ud800-\udfff]")


def train(
    texts: Any = None,
    *,
    merges: int | None = None,
    special_tokens: Iterable[str] = (),
    phases: list[dict[str, Any]] | None = None,
    text_column: str = "text",
    config: Any = None,
    **options: Any,
) -> tiktoken.Encoding:
    """Train a tokenizer on ``texts`` in memory and return it as a ``tiktoken.Encoding``.

    ``texts``: an iterable of strings, each one document; or a ``pyarrow``
    ``Table`` (its ``text_column``), ``ChunkedArray`` or ``Array`` of strings,
    or a ``datasets.Dataset`` (``api_columns``: no Python string a row).
    ``merges``: the number of new tokens to learn. ``phases``: instead of
    ``texts`` and ``merges``, a list of ``{"name", "merges", "texts"}`` (and
    ``text_column``, ``pattern``, ``max_token_words``), trained one after
    another as a config's phases (the last phase's pattern is the tokenizer's).
    ``special_tokens``: added after the merges, in this order. ``**options``:
    any other top-level config option (``hardcoded_merges``, ``heldout_share``,
    ``pattern``, ``seed``, ``min_frequency``, ``max_token_bytes``, ``max_token_words``,
    ``pad_to_multiple_of``, ``warm_start``, ``threads``, ``working_set_mb``,
    ``max_piece_bytes``, ``vocab_size``, ``verbose``). ``export_hf`` and
    ``on_bad_file`` change nothing here; ``verbose=True`` prints a summary.

    Raises ``UsageError`` (a ``ValueError``) for a configuration problem, its
    message starting ``train():`` (and for ``config=`` or ``output=``, which are
    ``toktoktok_stages.pipeline``'s), ``TypeError`` for an item of ``texts``
    that is not a string.
    """
    _refuse_moved(texts, config, options)
    vocab_size = options.pop("vocab_size", None)
    plan = api_phases.plan(texts, merges, phases, text_column, vocab_size)
    settings = _settings(0, special_tokens, options)
    if vocab_size is not None:
        fitted = _merges_for(vocab_size, [p["merges"] for p in plan], settings)
        plan = [{**p, "merges": m} for p, m in zip(plan, fitted)]
    started = time.perf_counter()
    vocab, kept = _base(settings)
    # memory: a phase at a time: its documents (strings: the caller's, copied only where
    # a surrogate is replaced; a column: Arrow's buffers), a batch of text per thread in
    # flight and the summed piece counts; then what the merge loop needs, as in the train stage
    with _numba_threads(resolve_threads(settings["threads"])):
        for phase in plan:
            own = {**settings, "pattern": phase.get("pattern") or settings["pattern"],  # the phase's own, if given
                   "max_token_words": (phase["max_token_words"] if phase.get("max_token_words") is not None
                                       else settings["max_token_words"])}
            table, tally, share = _phase_counts(phase, own)
            result = _learn(vocab, table, phase["merges"], own)
            if vocab_size is not None and result.made < phase["merges"]:
                raise TooFewMerges(f"train(): {_phase_name(phase, phases)}made {result.made} of the "
                                   f"{phase['merges']} merges that vocab_size {vocab_size} needs: "
                                   "give more text, lower min_frequency, or a smaller vocab_size")
            if settings["verbose"]:
                _summary(phase, tally, share, table, result, time.perf_counter() - started)
            del table
            vocab = result.vocab
    from toktoktok.vocab import special_ids

    specials = special_ids(settings["special_tokens"], len(vocab), kept=kept, pad_to=settings["pad_to_multiple_of"])
    name = plan[-1]["name"] if phases is not None else PHASE_NAME
    last = plan[-1].get("pattern") or settings["pattern"]  # the last phase's pattern is the tokenizer's
    return encoding(vocab.ranks(), specials, last.tiktoken, name=name)


def _phase_name(phase: dict[str, Any], phases: Any) -> str:
    return f"phase {phase['name']!r} " if phases is not None else ""


def _phase_counts(phase: dict[str, Any], settings: dict[str, Any]) -> tuple[Any, np.ndarray, float]:
    """A phase's piece counts, its units' tally (trained, held out, left out) and its sample's share."""
    import numpy as np

    from toktoktok import api_columns, sampling

    texts, slug = phase["texts"], phase["slug"]
    if api_columns.is_column(texts):
        col = api_columns.column(texts, phase["text_column"])
        share = sampling.share(total=col.total, capacity=sampling.capacity(settings["working_set_mb"]))
        units = api_columns.ColumnUnits(settings, slug, share, _cutter(settings), count_batch_chars(settings["working_set_mb"]))
        table = count_jobs(units.jobs(col), settings)
        return table, units.tally, share
    if isinstance(texts, str):
        raise UsageError("train(): a single string is not a list of documents: pass [text] for one document")
    docs, sizes = documents(texts)  # read once into a list: the sample needs the total before its first choice
    docs, fates, share = _fates(docs, sizes, settings, slug)  # held-out text is not kept: nothing here measures it
    table = count_documents(docs, fates, settings)
    return table, np.bincount(fates, minlength=3)[:3], share


def _refuse_moved(texts: Any, config: Any, options: dict[str, Any]) -> None:
    """``config=``, a config path as ``texts`` and ``output=`` ran the pipeline:
    say the one-line replacement."""
    if config is not None:
        raise UsageError(_MOVED["config"])
    if isinstance(texts, os.PathLike) or (isinstance(texts, str) and _is_file(texts)):
        raise UsageError(_MOVED["config"] + " (a path as the only argument)")
    if isinstance(texts, str):
        raise UsageError("train(): a single string is not a list of documents: pass [text] for one document")
    if "output" in options:
        raise UsageError(_MOVED["output"])


def _is_file(text: str) -> bool:
    try:
        return Path(text).is_file()
    except (OSError, ValueError):  # a document too long for a path, or with a NUL
        return False


def _settings(merges: Any, special_tokens: Iterable[str], options: dict[str, Any]) -> dict[str, Any]:
    """The options checked by the config's own checks, as ``Config`` fields."""
    allowed = [k for k in TOP_KEYS if k not in _NOT_OPTIONS and k not in ("output", "phases")]
    for key in options:
        if key not in allowed:
            close = difflib.get_close_matches(key, ["merges", "special_tokens", *allowed], n=1)
            why = ("cannot be given: train() has no work folder" if key in _NOT_OPTIONS
                   else f"is not an option{f' (did you mean {close[0]!r}?)' if close else ''}")
            raise UsageError(f"train(): {key!r} {why} (options: merges, special_tokens, {', '.join(allowed)})")
    if not isinstance(merges, int) or isinstance(merges, bool) or not 0 <= merges <= MAX_MERGES:
        raise UsageError(f"train(): merges must be an integer from 0 to {MAX_MERGES}, got {merges!r}")
    if isinstance(special_tokens, str):
        raise UsageError(f"train(): special_tokens must be a list of strings, got one string {special_tokens!r}")
    doc = dict(options)
    warm = doc.get("warm_start")
    if isinstance(warm, (str, os.PathLike)):
        warm = doc["warm_start"] = {"file": warm}
    if isinstance(warm, dict) and isinstance(warm.get("file"), os.PathLike):
        doc["warm_start"] = {**warm, "file": os.fspath(warm["file"])}
    doc["special_tokens"] = list(special_tokens)
    try:
        return check_settings(doc, where="train()")
    except ConfigError as exc:
        raise UsageError(str(exc)) from None


def documents(texts: Iterable[str]) -> tuple[list[str], np.ndarray]:
    """The documents as a list, and each one's UTF-8 bytes.

    Lone surrogates become U+FFFD and surrogate pairs their character, as
    when the text goes through JSON (``sources`` reads a jsonl so).

        >>> documents(["ab", "é", "\\ud83d\\ude00\\ud800"])
        (['ab', 'é', '😀�'], array([2, 2, 7]))
    """
    import numpy as np

    docs: list[str] = []
    sizes: list[int] = []
    for i, text in enumerate(texts):
        if not isinstance(text, str):
            raise TypeError(f"train(): texts[{i}] is {type(text).__name__}, expected a string (one document)")
        if text.isascii():
            size = len(text)
        else:
            try:
                size = len(text.encode("utf-8"))
            except UnicodeEncodeError:
                text = text.encode("utf-16", "surrogatepass").decode("utf-16", "surrogatepass")
                text = _SURROGATE.sub("\ufffd", text)
                size = len(text.encode("utf-8"))
        docs.append(text)
        sizes.append(size)
    return docs, np.array(sizes, dtype=np.int64)


def _fates(docs: list[str], sizes: np.ndarray, settings: dict[str, Any],
           slug: str = PHASE_SLUG) -> tuple[list[str], np.ndarray, float]:
    """The documents' units (``units.row_parts``: a document, or parts of one
    larger than the bound) and each unit's fate as ingest decides it for the
    rows of the jsonl file ``toktoktok_stages.pipeline.train_texts`` writes (keyed by
    the line's byte offset plus the unit's offset in the text; the share
    measured against the file's size: ``sampling.jsonl_offsets``); the
    sample's share. A phase that would train on nothing trains on its last
    held-out unit (as kept: cut at the cap)."""
    import numpy as np

    from toktoktok import sampling, units

    pattern = settings["pattern"]
    bound = units.bound(settings["working_set_mb"])
    lines = sampling.jsonl_offsets(docs)
    texts: list[str] = []
    offsets: list[int] = []
    unit_sizes: list[int] = []
    for line, doc, size in zip(lines.tolist(), docs, sizes.tolist()):
        if size <= bound:
            texts.append(doc)
            offsets.append(line)
            unit_sizes.append(size)
            continue
        parts, _ = units.row_parts(doc, bound, **pattern.cut_rule(), special_tokens=settings["special_tokens"])
        for offset, part in parts:
            texts.append(part)
            offsets.append(line + offset)
            unit_sizes.append(len(part.encode("utf-8")))
    share = sampling.share(total=int(lines[-1]), capacity=sampling.capacity(settings["working_set_mb"]))
    fates, _ = sampling.unit_fates(unit_sizes, offsets, seed=settings["seed"], slug=slug,
                                   file_index=0, heldout_share=settings["heldout_share"], sample_share=share)
    held = np.flatnonzero(fates == sampling.HELD)
    if len(held) and not np.any(fates == sampling.TRAIN):
        last = int(held[-1])
        room = sampling.HELDOUT_CAP_BYTES - sum(unit_sizes[i] for i in held[:-1].tolist())
        if unit_sizes[last] > room:
            texts[last] = texts[last].encode("utf-8")[:room].decode("utf-8", "ignore")
        fates[last] = sampling.TRAIN
    return texts, fates, share


def count_documents(docs: list[str], fates: np.ndarray, settings: dict[str, Any]) -> Any:
    """The distinct pieces of the documents whose fate is ``TRAIN``, with their counts
    (a ``counts`` table), in batches of parts (``count_jobs``)."""
    import numpy as np

    from toktoktok import sampling

    trained = np.flatnonzero(fates == sampling.TRAIN)
    return count_jobs(_batches(docs, trained, _cutter(settings), count_batch_chars(settings["working_set_mb"])),
                      settings)


def _cutter(settings: dict[str, Any]) -> Any:
    """Ingest's part cutter for the pattern (None for a pattern that is never cut)."""
    from toktoktok.pretokenize import PartCutter

    pattern = settings["pattern"]
    if not pattern.cut_rule()["cut"]:
        return None
    return PartCutter(**pattern.cut_rule(), special_tokens=settings["special_tokens"],
                      max_piece_chars=settings["max_piece_bytes"])  # its part size: ingest's, the default


def count_jobs(jobs: Iterable[Any], settings: dict[str, Any]) -> Any:
    """The pieces of ``jobs`` (each a list of strings, or ``Segments`` of rows holding
    no special token) summed into a ``counts`` table, on ``threads`` threads for the scanner."""
    from toktoktok import scanner, unicode_classes
    from toktoktok.summing import RunningSum

    pattern, specials = settings["pattern"], settings["special_tokens"]
    # the numba scanner in threads (it releases the GIL); a custom pattern's ``regex`` in
    # this thread: no worker processes, so a caller needs no ``if __name__ == "__main__"``
    workers = resolve_threads(settings["threads"]) if pattern.name in scanner.PATTERN_IDS else 1
    summed = RunningSum()  # each batch's table added as it comes: memory is the sum and the batches in flight
    with contextlib.ExitStack() as stack:
        pool = None
        if workers > 1:
            unicode_classes.unicode_tables()  # build or load the tables once, before the threads
            pool = stack.enter_context(ThreadPoolExecutor(workers))
        inflight: list[Future[Any] | Any] = []
        for job in jobs:
            inflight.append(pool.submit(_count, job, pattern, specials) if pool else _count(job, pattern, specials))
            while len(inflight) > (workers + 1 if pool else 0):  # bounded memory in flight
                done = inflight.pop(0)
                summed.add(done.result() if isinstance(done, Future) else done)
        for done in inflight:
            summed.add(done.result() if isinstance(done, Future) else done)
    from toktoktok import counts

    table, _ = counts.cut_long_pieces(summed.table(), settings["max_piece_bytes"])  # as ingest does, per piece
    return table


def _count(job: Any, pattern: Any, specials: Any) -> Any:
    """One job's count table: ``Segments`` scanned where they lie, strings as ``counts.count_texts``."""
    from toktoktok import counts
    from toktoktok.text_segments import Segments

    if isinstance(job, Segments):
        from toktoktok.scanner import PATTERN_IDS

        return counts.count_segments(job.data, job.bounds, PATTERN_IDS[pattern.name])
    return counts.count_texts(job, pattern, specials)


def _batches(docs: list[str], trained: np.ndarray, cutter: Any, chars_per_batch: int) -> Iterator[list[str]]:
    """The trained documents' parts, in order, in batches of about ``chars_per_batch``."""
    batch: list[str] = []
    chars = 0
    for i in trained.tolist():
        for part in ingest_parts(docs[i], cutter):
            batch.append(part)
            chars += len(part)
        if chars >= chars_per_batch:
            yield batch
            batch, chars = [], 0
    if batch:
        yield batch


def ingest_parts(text: str, cutter: Any) -> list[str]:
    """One document as ingest sends it: whole, unless it is long enough for the
    cutter to force a cut (then cut as ingest cuts it, fed in read blocks)."""
    if cutter is None or len(text) <= cutter.part_chars + cutter.max_piece_chars:
        return [text]  # cut only at safe places, the pieces are those of the whole
    parts: list[str] = []
    for start in range(0, len(text), READ_BLOCK_CHARS):
        parts += cutter.feed(text[start : start + READ_BLOCK_CHARS])
    return parts + cutter.finish()


def _merges_for(vocab_size: Any, merges: list[int | None], settings: dict[str, Any]) -> list[int]:
    """Each phase's merges such that the ids number exactly ``vocab_size``
    (``toktoktok.id_layout``): the base, the merges (None: the phase that gets the
    rest), the new special tokens and the padding."""
    from toktoktok import id_layout
    from toktoktok.warm_start import load_base

    if not isinstance(vocab_size, int) or isinstance(vocab_size, bool) or vocab_size <= id_layout.BYTES:
        raise UsageError(f"train(): vocab_size must be an integer above {id_layout.BYTES}, got {vocab_size!r}")
    warm, kept = settings["warm_start"], {}
    if warm is not None:
        base = load_base(warm.file, special_tokens=warm.special_tokens)
        kept = base.special_tokens
        size = max(len(base.vocab), max(kept.values(), default=-1) + 1)
    else:
        size = id_layout.BYTES + (id_layout.HARDCODED_MERGES if settings["hardcoded_merges"] else 0)
    new = [t for t in settings["special_tokens"] if t not in kept]
    try:
        return id_layout.fit_merges(vocab_size, base=size, merges=list(merges), specials=len(new),
                                    pad_to=settings["pad_to_multiple_of"])
    except LayoutError as exc:
        raise UsageError(f"train(): vocab_size {exc.problem}") from None


def _base(settings: dict[str, Any]) -> tuple[Any, dict[str, int]]:
    """The vocabulary before the first phase and the special tokens it keeps."""
    from toktoktok.vocab import Vocab
    from toktoktok.warm_start import load_base

    warm = settings["warm_start"]
    if warm is not None:
        base = load_base(warm.file, special_tokens=warm.special_tokens)
        return base.vocab, base.special_tokens
    return Vocab.initial(hardcoded=settings["hardcoded_merges"]), {}


def _learn(vocab: Any, table: Any, merges: int, settings: dict[str, Any]) -> Any:
    """A phase's merges on top of ``vocab``, on the inventory sorted by piece (as
    the train stage sorts it: pieces that share a pair sit close together)."""
    from toktoktok.counts import inventory
    from toktoktok.merge import train_phase
    from toktoktok.piece_order import sorted_arrays

    buf, off, counts = sorted_arrays(*inventory(table))
    return train_phase(vocab, buf, off, counts, merges=merges, min_frequency=settings["min_frequency"],
                       max_token_bytes=settings["max_token_bytes"], max_token_words=settings["max_token_words"])


def encoding(ranks: dict[bytes, int], specials: dict[str, int], pat_str: str,
             name: str = PHASE_NAME) -> tiktoken.Encoding:
    """A ``tiktoken.Encoding``, checked first as ``toktoktok.load`` checks a file
    (tiktoken panics, or accepts wrongly, what ``validate_special_tokens`` refuses)."""
    from toktoktok.tiktoken_file import validate_special_tokens

    validate_special_tokens(ranks, specials)
    return tiktoken.Encoding(name=name, pat_str=pat_str, mergeable_ranks=ranks, special_tokens=specials)


@contextlib.contextmanager
def _numba_threads(threads: int) -> Iterator[None]:
    """numba's threads (the segmenter's parallel loops) set to ``threads`` for a while."""
    import numba

    before = numba.get_num_threads()
    numba.set_num_threads(max(1, min(threads, numba.config.NUMBA_NUM_THREADS)))
    try:
        yield
    finally:
        numba.set_num_threads(before)


def _summary(phase: dict[str, Any], tally: np.ndarray, share: float, table: Any, result: Any,
             seconds: float) -> None:
    import numpy as np

    from toktoktok import sampling

    pieces = int(np.asarray(table["count"]).sum()) if len(table) else 0
    print(f"train(): phase {phase['name']!r}: {int(tally.sum())} units (documents, or parts of large ones): "
          f"{tally[sampling.TRAIN]} trained, {tally[sampling.HELD]} held out, "
          f"{tally[sampling.LEFT_OUT]} left out of the sample (share {share:.1%}); {pieces} pieces, "
          f"{len(table)} distinct; {result.made} of {phase['merges']} merges made; {seconds:.2f} s", file=sys.stderr)
