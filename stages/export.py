"""Stage 3, export: every phase's merges -> ``NAME.tiktoken`` and ``NAME.meta.json``.

Reads, through its ``Work``: ``WORK/train/*/merges.arrow`` (the vocabulary
after the last phase, and the warm start it began from), ``WORK/ingest/*/``
(held-out text and pieces, for validation).
Writes: the ``.tiktoken`` file and its companion (docs/outputs.md), atomically, then
``WORK/export/manifest.json`` (last).

Two steps, which the orchestrator calls with the report between them:
``build`` writes everything into ``WORK/export/staged`` and validates it
there; ``publish`` copies the staged files into place beside ``output:``.

Export proves what it wrote before it calls the run done:

1. it loads the file back with our own parser into a real
   ``tiktoken.Encoding`` (``toktoktok.load``);
2. it round-trips text through it: built-in samples in many scripts, some
   held-out text of every phase, each with special tokens in between, and
   checks every special token encodes to its single id;
3. it encodes the most frequent pieces of every phase with tiktoken and
   compares them with our own segmenter on the same vocabulary (the train
   stage already compared the trainer's segmentation with that segmenter),
   and reports how many differ (expected 0).
"""

from __future__ import annotations

import itertools
import json
import platform
import shutil
import time
import unicodedata
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import regex
import tiktoken

import toktoktok
from toktoktok import publish_journal
from toktoktok.atomic import atomic_write_bytes
from toktoktok.config import Config, HfSettings, config_fingerprint
from toktoktok.counts import inventory
from toktoktok.errors import ExportFailed
from toktoktok.hf import hf_roles, write_hf
from toktoktok.interrupts import uninterrupted
from toktoktok.loading import META_FORMAT, meta_path
from toktoktok.patterns import regex_unicode_version
from toktoktok.segment import load_segment_kernels
from toktoktok.segment_words import segment_after
from toktoktok.tiktoken_file import write_tiktoken
from toktoktok.vocab import Vocab
from toktoktok.vocab import special_ids as vocab_special_ids

from .workdir import IngestFolder, Work, artifacts, hf_dir, is_damage
from .workdir.progress import Progress

CHECKED_PIECES = 100_000  # most frequent pieces of each phase compared with tiktoken
HELDOUT_SAMPLE_CHARS = 200_000  # held-out text of each phase round-tripped
SAMPLES = [
    "Hello, world! It's 2026: naïve café, 3.14159 and 1,000,000 tokens.\n\n    indented\r\nCRLF\ttab",
    "Grüße aus Köln – „Anführungszeichen“ und ß. Ελληνικά. Русский текст. Čeština, Polski: zażółć gęślą jaźń.",
    "日本語のテキスト、中文文本。한국어 텍스트. ภาษาไทย. हिन्दी पाठ. العربية النص. עברית.",
    "emoji 👍🏽👨‍👩‍👧 and symbols ∑∫√∞ ≠ ≤; combining e\u0301 a\u0308; NBSP\u00a0here; zero\u200bwidth",
    "def f(x):\n    return x ** 2  # comment\n\n\nif __name__ == '__main__':\n\tprint(f(3))\n",
    "   leading spaces, trailing spaces   \n\n\n\n  ",
]


def hf_disagreements(folder: Path, enc: tiktoken.Encoding, texts: list[str], specials: dict[str, int]) -> int | None:
    """Texts whose Hugging Face ids differ from tiktoken's (None: tokenizers absent)."""
    try:
        from tokenizers import Tokenizer
    except ImportError:
        return None
    hf = Tokenizer.from_file(str(folder / "tokenizer.json"))
    joined = [t + tok for t, tok in zip(texts, itertools.cycle(specials))] if specials else []
    allowed = enc.special_tokens_set
    return sum(hf.encode(t).ids != enc.encode(t, allowed_special=allowed, disallowed_special=()) for t in texts + joined)


def special_ids(work: Work, vocab_size: int) -> dict[str, int]:
    """A warm start's special tokens keep their ids; the others come after all
    merges, in config order, then the padding tokens (``toktoktok.vocab.special_ids``)."""
    return vocab_special_ids(work.cfg.special_tokens, vocab_size, kept=work.base_special_tokens(),
                             pad_to=work.cfg.pad_to_multiple_of)


def vocab_size(vocab: Vocab, specials: dict[str, int]) -> int:
    """The number of ids: one more than the highest rank or special id."""
    return max(len(vocab), max(specials.values(), default=-1) + 1)


def meta_document(cfg: Config, vocab: Vocab, specials: dict[str, int], train_manifests: list[dict]) -> dict:
    """The companion file: what the ``.tiktoken`` cannot hold."""
    phases = []
    for phase, manifest in zip(cfg.phases, train_manifests):
        counts = manifest["counts"]
        first = manifest["inputs"]["vocab_size_before"]
        phases.append({"name": phase.name, "merges_requested": phase.merges, "merges_made": counts["merges_made"],
                       "first_rank": first, "last_rank": first + counts["merges_made"] - 1})
    return {
        "format": META_FORMAT,
        "name": cfg.output.name.removesuffix(".tiktoken"),
        "pattern": {"name": cfg.tokenizer_pattern.name, "tiktoken": cfg.tokenizer_pattern.tiktoken,
                    "python": cfg.tokenizer_pattern.python},
        "special_tokens": specials,
        "vocab_size": vocab_size(vocab, specials),
        "mergeable_ranks": vocab.count(),
        "hardcoded_merges": cfg.hardcoded_merges and cfg.warm_start is None,
        "warm_start": str(cfg.warm_start.file) if cfg.warm_start else None,
        "phases": phases,
        "versions": {
            "toktoktok": toktoktok.__version__,
            "regex": regex.__version__,
            "tiktoken": tiktoken.__version__ if hasattr(tiktoken, "__version__") else _dist_version("tiktoken"),
            "unicode_regex": regex_unicode_version(),
            "unicode_python": unicodedata.unidata_version,
            "python": platform.python_version(),
        },
        "config_fingerprint": config_fingerprint(cfg),
    }


def _dist_version(name: str) -> str:
    from importlib.metadata import version

    return version(name)


def round_trip_failures(enc: tiktoken.Encoding, texts: list[str], specials: dict[str, int]) -> list[str]:
    """Texts that do not decode back to themselves, or special tokens not atomic.

    The special tokens are checked in one call, on all of them written one
    after the other (none is inside another, so they can only split one way):
    tiktoken's ``encode`` with special tokens allowed costs time in proportion
    to the number of special tokens on every call (it copies the allowed set),
    so one call per token was quadratic: 65,536 padding tokens took hours.
    """
    failures = [t[:60] for t in texts if enc.decode(enc.encode_ordinary(t)) != t]
    allowed = enc.special_tokens_set
    got = enc.encode("".join(specials), allowed_special=allowed, disallowed_special=()) if specials else []
    ids, tokens = list(specials.values()), list(specials)
    if got != ids:
        first = next((i for i, (a, b) in enumerate(zip(got, ids)) if a != b), min(len(got), len(ids) - 1))
        failures.append(f"special token {tokens[first]!r} does not encode to [{ids[first]}]")
    joined = "".join(f"{t}{tok}" for t, tok in zip(texts, itertools.cycle(specials))) if specials else ""
    if specials and enc.decode(enc.encode(joined, allowed_special=allowed, disallowed_special=())) != joined:
        failures.append("text with special tokens does not round-trip")
    return failures


def _phase_pieces(folder: IngestFolder) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The most frequent pieces of a phase (up to CHECKED_PIECES; ties at the
    threshold go to the smallest pieces), as flat arrays."""
    table = folder.inventory()
    return inventory(_most_frequent(table, CHECKED_PIECES))


def _most_frequent(table: pa.Table, k: int) -> pa.Table:
    """The ``k`` rows of highest count, ties broken by the smaller piece (the set of
    ``select_k_unstable`` on (count descending, piece ascending), but faster:
    only the threshold's ties are sorted), in table order.

        >>> t = pa.table({"piece": [b"b", b"a", b"c", b"d"], "count": pa.array([2, 2, 5, 1], pa.uint64())})
        >>> _most_frequent(t, 2)["piece"].to_pylist()
        [b'a', b'c']
    """
    if table.num_rows <= k:
        return table
    counts = table["count"].to_numpy()
    threshold = np.partition(counts, table.num_rows - k)[table.num_rows - k]
    above = np.flatnonzero(counts > threshold)
    ties = np.flatnonzero(counts == threshold)
    order = pc.sort_indices(table["piece"].take(ties)).to_numpy()[: k - len(above)]
    return table.take(np.sort(np.concatenate([above, ties[order]])))


def tiktoken_disagreements(enc: tiktoken.Encoding, vocab: Vocab, work: Work,
                           progress: Progress | None = None) -> tuple[int, int]:
    """(pieces checked, pieces where tiktoken and our segmenter differ).

    Each phase's pieces are segmented as ``segment_pieces`` would with the final
    vocabulary, by ``segment_after`` from the phase's own start: a superword
    phase's pieces, whole lines, go a word at a time and are continued. Ours
    runs in a thread while tiktoken encodes the pieces (``_tiktoken_flat``);
    only when the two differ somewhere are the pieces encoded one by one, to
    count those that differ."""
    checked = differing = 0
    with ThreadPoolExecutor(2) as pool:
        for k, phase in enumerate(work.cfg.phases):
            buf, off, _ = _phase_pieces(work.ingest(phase))
            ours = pool.submit(segment_after, work.vocab_after(k), vocab, buf, off)
            flat = _tiktoken_flat(enc, buf, off, pool)
            sym, lens = ours.result()
            if flat is None or not np.array_equal(flat, _runs(sym, off[:-1], lens)):
                theirs, their_lens = _tiktoken_pieces(enc, buf.tobytes(), off, progress, checked)
                differing += _count_unequal(sym, off, lens, theirs, their_lens)
            checked += len(off) - 1
            if progress is not None:
                progress.set(checked)
    return checked, differing


# characters looked for, in turn, as the one no piece holds (private use)
_SEPARATORS = [chr(c) for c in range(0xE000, 0xE040)]


def _tiktoken_flat(enc: tiktoken.Encoding, buf: np.ndarray, off: np.ndarray,
                   pool: ThreadPoolExecutor) -> np.ndarray | None:
    """tiktoken's tokens of every piece ``buf[off[w]:off[w+1]]``, one piece after
    another; None where a piece is not UTF-8, or every separator occurs.

    The pieces are joined by a character none of them holds, and an encoding of
    the same ranks whose pattern matches each run between separators (the
    separators themselves match nothing, so tiktoken skips them) encodes each
    piece as one match: as ``encode_single_piece`` does, from two large calls,
    on two threads (tiktoken releases the GIL for a text, not for a piece; a
    call a piece held it throughout). Equal token lists mean equal pieces: a
    token never runs across the end of a piece, in either."""
    data = buf.tobytes()
    sep = next((c for c in _SEPARATORS if c.encode() not in data), None)
    if sep is None:
        return None
    try:
        text = _with_separators(buf, off, np.frombuffer(sep.encode(), np.uint8)).decode("utf-8")
    except UnicodeDecodeError:
        return None
    whole = tiktoken.Encoding(name="pieces", pat_str=f"[^{sep}]+", mergeable_ranks=enc._mergeable_ranks,
                              special_tokens={})
    middle = text.find(sep, len(text) // 2)
    middle = len(text) if middle < 0 else middle
    first = pool.submit(whole.encode_ordinary, text[:middle])
    second = whole.encode_ordinary(text[middle:])
    return np.array(first.result() + second, dtype=np.int64)


def _with_separators(buf: np.ndarray, off: np.ndarray, sep: np.ndarray) -> bytes:
    """The pieces ``buf[off[w]:off[w+1]]`` with ``sep`` after each.

        >>> _with_separators(np.frombuffer(b"abc", np.uint8), np.array([0, 1, 3]), np.frombuffer(b"|", np.uint8))
        b'a|bc|'
    """
    n, k = len(off) - 1, len(sep)
    return np.insert(buf[off[0] : off[-1]], np.repeat(off[1:] - off[0], k), np.tile(sep, n)).tobytes()


def _runs(values: np.ndarray, starts: np.ndarray, n: np.ndarray) -> np.ndarray:
    """``values[starts[i] : starts[i] + n[i]]`` for each i, one after another (int64).

        >>> _runs(np.array([1, 2, 3, 4]), np.array([0, 2]), np.array([1, 2])).tolist()
        [1, 3, 4]
    """
    n = n.astype(np.int64)
    return values[np.repeat(starts, n) + np.arange(int(n.sum())) - np.repeat(np.cumsum(n) - n, n)].astype(np.int64)


def _tiktoken_pieces(enc: tiktoken.Encoding, data: bytes, off: np.ndarray, progress: Progress | None,
                     done: int) -> tuple[np.ndarray, np.ndarray]:
    """tiktoken's tokens of each piece ``data[off[w]:off[w+1]]``, flat, and their counts."""
    encode = enc._core_bpe.encode_single_piece  # what Encoding._encode_single_piece calls on bytes
    flat: list[int] = []
    lens = np.empty(len(off) - 1, dtype=np.int64)
    bounds = off.tolist()
    for w in range(len(bounds) - 1):
        tokens = encode(data[bounds[w] : bounds[w + 1]]) if bounds[w + 1] > bounds[w] else []  # tiktoken panics on b""
        lens[w] = len(tokens)
        flat.extend(tokens)
        if progress is not None and w % 10_000 == 0:
            progress.set(done + w)
    return np.array(flat, dtype=np.int64), lens


def _count_unequal(sym: np.ndarray, off: np.ndarray, lens: np.ndarray, theirs: np.ndarray,
                   their_lens: np.ndarray) -> int:
    """How many pieces ``w`` have ``sym[off[w]:off[w]+lens[w]]`` unlike their slice of ``theirs``.

        >>> _count_unequal(np.array([1, 2, 3, 4]), np.array([0, 2, 4]), np.array([2, 1]),
        ...                np.array([1, 2, 4]), np.array([2, 1]))
        1
    """
    same_len = np.flatnonzero(their_lens == lens)
    n = lens[same_len]
    their_start = np.cumsum(their_lens) - their_lens
    ours, their = _runs(sym, off[:-1][same_len], n), _runs(theirs, their_start[same_len], n)
    wrong = np.bincount(np.repeat(np.arange(len(same_len)), n), weights=ours != their, minlength=len(same_len))
    return int(len(lens) - len(same_len) + np.count_nonzero(wrong))


def _heldout_samples(work: Work) -> list[str]:
    texts = ["".join(work.ingest(phase).heldout_texts())[:HELDOUT_SAMPLE_CHARS] for phase in work.cfg.phases]
    return [t for t in texts if t]


@dataclass
class Built:
    """An export written and validated in ``WORK/export/staged``, not yet published."""

    key: str
    folder: Path  # WORK/export/staged: NAME.tiktoken, NAME.meta.json, NAME.hf/ ...
    meta: dict[str, Any]
    manifest: dict[str, Any]  # the export manifest but its outputs (``publish`` adds them)
    started: float


def up_to_date(work: Work, key: str, progress: Progress) -> dict[str, Any] | None:
    """The export's manifest when its outputs are current with ``key`` (else None;
    an output changed since, a damaged one say, is said)."""
    folder = work.export
    stale = folder.stale_reason(key)
    if stale is None:
        return {**folder.recorded, "skipped": True}
    if is_damage(stale):
        progress.note(f"warning: {stale}: exporting again")
    return None


def build(work: Work, *, key: str, progress: Progress) -> Built:
    """Write the tokenizer into ``WORK/export/staged`` and prove it there.

    Nothing beside ``output:`` changes: ``publish`` moves the staged files into
    place once the orchestrator has added the report.
    """
    cfg, folder = work.cfg, work.export
    started = time.perf_counter()
    uninterrupted(load_segment_kernels)  # numba may start here (export alone): Ctrl-C waits for it
    folder.begin()
    train_manifests = [work.train(p).manifest() for p in cfg.phases]
    vocab = work.vocab_after(len(cfg.phases))
    specials = special_ids(work, len(vocab))
    if cfg.vocab_size is not None and vocab_size(vocab, specials) != cfg.vocab_size:
        raise ExportFailed(f"the vocabulary has {vocab_size(vocab, specials):,} ids, not vocab_size: "
                          f"{cfg.vocab_size:,} (trained with other settings? rerun `toktok train`)")
    meta = meta_document(cfg, vocab, specials, train_manifests)
    staged = folder.staged
    staged.mkdir()
    tiktoken_file = staged / cfg.output.name
    write_tiktoken(tiktoken_file, vocab.ranks())
    meta["tiktoken"] = {"sha256": artifacts.file_digest(tiktoken_file), "ranks": vocab.count(),
                        "bytes": tiktoken_file.stat().st_size}
    atomic_write_bytes(meta_path(tiktoken_file), (json.dumps(meta, indent=2, ensure_ascii=False) + "\n").encode())
    written = time.perf_counter()
    progress.start("export: pieces checked with tiktoken", unit="pieces")
    enc = toktoktok.load(tiktoken_file)
    texts = SAMPLES + _heldout_samples(work)
    failures = round_trip_failures(enc, texts, specials)
    checked, differing = tiktoken_disagreements(enc, vocab, work, progress)
    progress.set(checked)
    progress.done()
    if failures:
        raise ExportFailed(f"the exported tokenizer does not round-trip: {failures[:3]}")
    hf_differing = hf_manifest = None
    if cfg.export_hf:
        hf_folder = staged / hf_dir(cfg).name
        hf = cfg.hf or HfSettings()
        roles = hf_roles(specials, hf.roles)
        write_hf(hf_folder, vocab.ranks(), specials, cfg.tokenizer_pattern.tiktoken, roles=roles,
                 model_max_length=hf.model_max_length, chat_template=hf.chat_template)
        hf_manifest = {"folder": str(hf_dir(cfg)),
                       "roles": {role: {"token": token, "id": specials[token]} for role, token in roles.items()},
                       "chat_template": hf.chat_template is not None, "model_max_length": hf.model_max_length}
        hf_differing = hf_disagreements(hf_folder, enc, texts, specials)
        if hf_differing:
            raise ExportFailed(f"the Hugging Face export gives other ids than tiktoken on {hf_differing} texts")
    trainer_differing = sum(m["counts"]["differing_pieces"] for m in train_manifests)
    if differing or trainer_differing:
        progress.note(f"warning: {differing} of {checked} pieces encode differently in tiktoken; "
                      f"{trainer_differing} pieces end training segmented unlike tiktoken's rule")
    manifest = {
        "stage": "export",
        "key": key,
        "settings": folder.settings(),
        "inputs": {"trained": [m["outputs"] for m in train_manifests]},
        "counts": {
            "mergeable_ranks": vocab.count(),
            "special_tokens": len(specials),
            "vocab_size": vocab_size(vocab, specials),
            "pieces_checked_with_tiktoken": checked,
            "pieces_differing_from_tiktoken": differing,
            "pieces_trainer_differing": trainer_differing,
            "round_trip_texts": len(texts),
            "hf_texts_differing": hf_differing,
        },
        "hf": hf_manifest,
        "seconds": {"write": round(written - started, 3), "validate": round(time.perf_counter() - written, 3)},
    }
    return Built(key=key, folder=staged, meta=meta, manifest=manifest, started=started)


def seal(cfg: Config, built: Built) -> None:
    """Record in the staged companion the digest of every other member of the set
    (the report and the Hugging Face files are staged by now)."""
    companion = meta_path(built.folder / cfg.output.name)
    members = {}
    for path in sorted(built.folder.rglob("*")):
        if path.is_file() and path not in (companion, built.folder / cfg.output.name):
            members[str(path.relative_to(built.folder))] = artifacts.file_digest(path)
    built.meta["members"] = members
    atomic_write_bytes(companion, (json.dumps(built.meta, indent=2, ensure_ascii=False) + "\n").encode())


def publish(work: Work, built: Built, *, progress: Progress) -> dict[str, Any]:
    """Put the staged set in place beside ``output:`` as one change
    (``toktoktok.publish_journal.publish``: a member of the old set this export
    did not make, such as a Hugging Face folder not exported now, is removed
    and said so; then the other files, the companion, the ``.tiktoken`` last);
    then write the export manifest.

    A failure or Ctrl-C before the publish commits restores the previous set; the
    orchestrator says what is on disk (``pipeline._export``).
    """
    cfg = work.cfg
    seal(cfg, built)
    staged = {cfg.output.parent / path.relative_to(built.folder): path
              for path in sorted(built.folder.rglob("*")) if path.is_file()}
    # False sorts first: the rest, then the companion, the .tiktoken last, so a reader never finds a
    # .tiktoken without the companion that describes it
    order = sorted(staged, key=lambda p: (p == cfg.output, p == meta_path(cfg.output)))
    stale = [p for p in work.output_set() if p not in staged and p.is_file()]
    # what this export staged, not what is at the path afterwards: another config's
    # export to the same output must never be recorded as this one's
    outputs = [_output_entry(t, staged[t]) for t in order]
    publish_journal.publish([(staged[t], t) for t in order], remove=stale, journal=work.publish_journal)
    for path in stale:
        progress.note(f"removed {path}: left by an earlier export, it does not match this one")
    shutil.rmtree(built.folder)
    return work.export.finish({**built.manifest, "outputs": outputs})


def _output_entry(path: Path, staged: Path) -> dict[str, Any]:
    """The manifest's entry of the output ``path``, from the file ``staged`` for it."""
    return {"name": path.name, "path": str(path), "bytes": staged.stat().st_size,
            "sha256": artifacts.file_digest(staged)}
