"""Where a config's files go, and what a phase reads: functions of the config alone.

The places (``ingest_dir``, ``train_dir``, ``export_dir``, ``publish_journal``,
``lock_path``, the outputs beside ``output:`` and their ``output_lock``) and a phase's inputs (its files,
their fingerprints, their text bytes, the share of them a phase keeps). They
open no manifest: the stage folder objects (``folders``) read those, and hand
``measure_text`` the sizes an earlier ingest recorded.

    >>> sorted(STAGE_FOLDERS), LOCK
    (['export', 'ingest', 'train'], '.lock')
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from toktoktok import sampling
from toktoktok.config import Config, ConfigError, Phase, Source
from toktoktok.loading import meta_path, split_name
from toktoktok.sources import ReadStats, SourceError, file_format, list_source_files, text_bytes, text_bytes_estimate
from toktoktok.sources.row_batches import iter_jsonl_batches

STAGE_FOLDERS = ("ingest", "train", "export")  # the folders of WORK, one a stage
LOCK = ".lock"  # WORK/.lock: held by the run using the work folder
HF_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")


# ---------------------------------------------------------------- places


def ingest_dir(cfg: Config, phase: Phase) -> Path:
    """``WORK/ingest/NN-slug``: a phase's chunk files and held-out text."""
    return cfg.work_dir / "ingest" / phase.slug


def train_dir(cfg: Config, phase: Phase) -> Path:
    """``WORK/train/NN-slug``: a phase's merges."""
    return cfg.work_dir / "train" / phase.slug


def export_dir(cfg: Config) -> Path:
    """``WORK/export``: the export's manifest."""
    return cfg.work_dir / "export"


def publish_journal(cfg: Config) -> Path:
    """``WORK/export/publish.json``: the record of a publish under way
    (``toktoktok.publish_journal``), which the next run finishes or undoes first."""
    return export_dir(cfg) / "publish.json"


def lock_path(cfg: Config) -> Path:
    """``WORK/.lock``: the file a run locks while it uses the work folder."""
    return cfg.work_dir / LOCK


def output_lock(cfg: Config) -> Path:
    """``DIR/.NAME.lock`` for ``output: DIR/NAME.tiktoken``: the file an export locks
    while it publishes, so that two configs never publish to one output at once."""
    folder, name = split_name(cfg.output)
    return folder / f".{name}.lock"


def hf_dir(cfg: Config) -> Path:
    """``DIR/NAME.hf`` for ``output: DIR/NAME.tiktoken``."""
    return cfg.output.with_name(cfg.output.name.removesuffix(".tiktoken") + ".hf")


def report_paths(cfg: Config) -> dict[str, Path]:
    """``DIR/NAME.report.{md,json,png}`` for ``output: DIR/NAME.tiktoken``."""
    folder, name = split_name(cfg.output)
    return {ext: folder / f"{name}.report.{ext}" for ext in ("md", "json", "png")}


def output_set(cfg: Config) -> list[Path]:
    """Every file an export writes outside the work folder: the ``.tiktoken``, its
    ``.meta.json``, the reports, the Hugging Face files."""
    return [cfg.output, meta_path(cfg.output), *report_paths(cfg).values(), *(hf_dir(cfg) / f for f in HF_FILES)]


def select_phases(cfg: Config, name: str | None) -> list[Phase]:
    """All phases, or the one called ``name`` (case-insensitive)."""
    if name is None:
        return list(cfg.phases)
    for phase in cfg.phases:
        if phase.name.lower() == name.lower() or phase.slug == name:
            return [phase]
    known = ", ".join(repr(p.name) for p in cfg.phases)
    raise ConfigError(f"{cfg.path}: no phase named {name!r} (phases: {known})")


# ---------------------------------------------------------------- a phase's inputs


def phase_files(phase: Phase, *, skipped: list[dict[str, str]] | None = None,
                listed: dict[Source, list[Path]] | None = None) -> list[tuple[Source, Path]]:
    """Every (source, file) of a phase, in config then path order; ``skipped``
    collects what a folder scan passed by (broken symbolic links); ``listed``:
    sources listed already, moments ago, by the checks before the run."""
    listed = listed or {}
    return [(src, path) for src in phase.sources
            for path in (listed[src] if src in listed else list_source_files(src, skipped=skipped))]


@dataclass(frozen=True)
class Fingerprints:
    """What ingest's key records of a phase's files, a list a field (a dict a file,
    encoded one by one in the key and the manifest, was much of a large folder's
    time): ``path``, ``size`` and ``mtime_ns`` as listed, and the source's
    ``text_column``, ``weight`` and ``documents`` rule (None where it sets none).

        >>> import tempfile
        >>> f = Path(tempfile.mkdtemp()) / "a.txt"
        >>> _ = f.write_text("héllo")
        >>> fps = fingerprints([(Source(f, False), f)])
        >>> len(fps), fps.columns["size"], sorted(fps[0])
        (1, [6], ['mtime_ns', 'path', 'size', 'text_column', 'weight'])
    """

    columns: dict[str, list[Any]]

    def __len__(self) -> int:
        return len(self.columns["path"])

    def __getitem__(self, index: int) -> dict[str, Any]:
        """File ``index``'s fingerprint as a dict (``documents`` left out where the source sets none)."""
        return {name: values[index] for name, values in self.columns.items()
                if name != "documents" or values[index] is not None}


def fingerprints(files: list[tuple[Source, Path]]) -> Fingerprints:
    """The ``Fingerprints`` of ``files`` (each asked of the system once, by its path as a string)."""
    paths = [str(path) for _, path in files]
    sizes, mtimes = [], []
    for name, (_, path) in zip(paths, files):
        # one stat at a time: a list of 70,000 of them raised the peak for good (the
        # allocator keeps the pages its small objects were on)
        st = os.stat(name) if isinstance(path, Path) else path.stat()  # a remote file: through pyarrow.fs
        sizes.append(st.st_size)
        mtimes.append(st.st_mtime_ns)
    sources = [src for src, _ in files]
    return Fingerprints({
        "path": paths,
        "size": sizes,
        "mtime_ns": mtimes,
        "text_column": [src.text_column for src in sources],
        "weight": [src.weight for src in sources],
        "documents": [src.documents for src in sources],
    })


def fingerprint(src: Source, path: Path) -> dict[str, Any]:
    """One file's fingerprint (``Fingerprints``) as a dict."""
    return fingerprints([(src, path)])[0]


def measure_text(cfg: Config, files: list[tuple[Source, Path]], fingerprints: Fingerprints,
                 recorded: dict[str, Any] | None, *, estimate: bool = False) -> tuple[list[int | None], tuple[int, ...]]:
    """Each file's text bytes (None: unreadable, left to ingest to report), and the
    files whose size is a guess (``estimate``: ``sources.text_bytes_estimate``
    where measuring would read the text; ingest checks them: ``phase_share``).

    Sizes ``recorded`` by the last ingest of the phase (its manifest, as
    written) are reused while a file's fingerprint is unchanged, so a rerun
    reads nothing twice.
    """
    known = _recorded_sizes(recorded)
    columns = fingerprints.columns
    sizes: list[int | None] = []
    guessed: list[int] = []
    for index, (src, path) in enumerate(files):
        if src.max_bytes is not None and file_format(path)[0] == "jsonl":
            try:  # a capped source's JSON lines: the text itself, not the lines (never a recorded size)
                sizes.append(jsonl_text_bytes(path, src.text_column))
                continue
            except (SourceError, OSError):
                pass  # measured as any file below, which reports what is wrong
        size = columns["size"][index]
        if known and (recorded_size := known.get((columns["path"][index], size, columns["mtime_ns"][index],
                                                  src.text_column), _UNKNOWN)) is not _UNKNOWN:
            sizes.append(recorded_size)
            continue
        try:
            if estimate and src.max_bytes is None:  # a capped source's share needs its exact size
                size, exact = text_bytes_estimate(path, text_column=src.text_column, size=size)
                sizes.append(size)
                if not exact:
                    guessed.append(index)
            else:
                sizes.append(text_bytes(path, text_column=src.text_column))
        except (SourceError, OSError) as exc:
            if cfg.on_bad_file == "fail":
                raise SourceError(f"{path}: {exc.strerror or exc}") if isinstance(exc, OSError) else exc
            sizes.append(None)
    return sizes, tuple(guessed)


def _recorded_sizes(recorded: dict[str, Any] | None) -> dict[tuple[Any, ...], int | None]:
    """The text bytes a finished ingest's manifest records, by (path, size, mtime, text
    column); none from a manifest of another form (an older one lists a dict a file)."""
    inputs = (recorded or {}).get("inputs")
    if not isinstance(inputs, dict):
        return {}
    try:
        fields = [inputs[name] for name in ("path", "size", "mtime_ns", "text_column", "text_bytes")]
    except KeyError:
        return {}
    if not all(isinstance(values, list) and len(values) == len(fields[0]) for values in fields):
        return {}
    return dict(zip(zip(*fields[:4]), fields[4]))


def jsonl_text_bytes(path: Path, column: str) -> int:
    """The UTF-8 bytes of a ``.jsonl`` file's text field (escapes decoded), read
    through: what a capped source's share is measured on (``text_bytes`` counts
    whole lines, keys and quoting too)."""
    stats = ReadStats()
    return sum(batch.text_bytes() for batch in iter_jsonl_batches(path, column, stats))


_UNKNOWN = object()  # no size recorded (a recorded size may be None: the file was bad)


ESTIMATE_MARGIN = 0.5  # guessed sizes are trusted to keep the whole text only this far below the capacity


def source_caps(phase: Phase, files: list[tuple[Source, Path]], sizes: list[int | None]) -> tuple[float, ...]:
    """Each source's cap share, in the phase's order: ``max_bytes`` over the text of
    its files (``sizes``, measured), at most 1; 1.0 for a source without a cap.
    Empty when no source of the phase sets ``max_bytes`` (nothing changes then).

        >>> src = Source(Path("a.txt"), False, max_bytes=250)
        >>> source_caps(Phase("p", 1, (src,), 1, "01-p"), [(src, Path("a.txt"))] * 2, [600, 400])
        (0.25,)
    """
    if all(src.max_bytes is None for src in phase.sources):
        return ()
    text = [0] * len(phase.sources)
    place = {id(src): i for i, src in enumerate(phase.sources)}
    for (src, _), size in zip(files, sizes):
        text[place[id(src)]] += size or 0
    return tuple(1.0 if src.max_bytes is None else sampling.share(total=total, capacity=src.max_bytes)
                 for src, total in zip(phase.sources, text))


def file_caps(phase: Phase, files: list[tuple[Source, Path]], caps: tuple[float, ...]) -> tuple[float, ...]:
    """Each file's cap share: its source's (``source_caps``), by file index."""
    place = {id(src): i for i, src in enumerate(phase.sources)}
    return tuple(caps[place[id(src)]] for src, _ in files) if caps else ()


def phase_share(cfg: Config, sizes: list[int | None], guessed: tuple[int, ...] = (),
                capped: tuple[float, ...] = ()) -> float | None:
    """The share of documents this phase keeps (1.0: no sampling); None when some
    sizes are guesses and the total is too near the capacity to trust them
    (measure those files: ``measure_text``). Whole text kept on guessed sizes is
    checked by ingest against the bytes it read. ``capped``: each file's cap
    share (``file_caps``), when a source sets ``max_bytes``: the total is then
    the text the caps keep, each source counting at most its ``max_bytes``."""
    capacity = sampling.capacity(cfg.working_set_mb)
    total = sum(s or 0 for s in sizes)
    if capped:
        total = sum((s or 0) * cap for s, cap in zip(sizes, capped))
    if guessed and total > capacity * ESTIMATE_MARGIN:
        return None
    return sampling.share(total=total, capacity=capacity)
