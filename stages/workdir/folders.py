"""One object per stage folder: its path, its key, its manifest, its checked reads.

``IngestFolder`` (a phase's chunk files and held-out text), ``TrainFolder``
(a phase's merges and usage) and ``ExportFolder`` (the export's manifest)
are made by a ``Work`` (``work``), one per folder, and remember what they
read: the manifest is read once, checked once against the files it lists
(``artifacts.damaged_output``), and the key computed once. A stage asks its
own folder and its upstream folders; a folder asks its upstream folders
through the ``Work``, so within one process no manifest is read or checked
twice.

``begin`` empties a folder (the manifest first) and starts measuring the
stage's memory (``peak``); ``finish`` writes the manifest last and keeps it
as written. Beginning a folder anew makes the ``Work`` forget the keys that
depended on it (later phases, the export). The data (chunk sums, merges,
held-out text) is read anew on each call, never kept: it can be large.

``StageFolder`` alone serves a folder known by its path (``toktok inspect``):

    >>> import tempfile
    >>> folder = StageFolder(Path(tempfile.mkdtemp()) / "train" / "01-english")
    >>> folder.recorded, folder.stale_reason("a key"), folder.finished()
    (None, 'not done yet', False)
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from toktoktok import counts, sampling
from toktoktok.config import Phase, Source
from toktoktok.errors import DamagedArtifact, MissingInput, StaleInput
from toktoktok.vocab import Vocab

from . import artifacts, keys, layout
from .peak import STAGE_PEAK, peak_rss_mb, release_memory

if TYPE_CHECKING:
    from .work import Work

NOT_DONE, CHANGED = "not done yet", "its inputs or settings changed"
_UNREAD: Any = object()  # a memo not filled yet (None is a value: no manifest, no damage)


def is_damage(reason: str | None) -> bool:
    """Whether a ``stale_reason`` is a damaged output (to be said when redoing)."""
    return reason not in (None, NOT_DONE, CHANGED)


class StageFolder:
    """A stage folder of the work folder: its manifest, read and checked once."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._recorded: dict[str, Any] | None = _UNREAD
        self._written: str | None = None  # the manifest's text as ``finish`` wrote it, parsed when asked
        self._damage: str | None = _UNREAD
        self._key: str | None = None  # the stage's key, once computed (by the subclass's ``key``)

    def forget_key(self) -> None:
        """Drop the key computed: a folder it was made from has begun anew."""
        self._key = None

    @property
    def recorded(self) -> dict[str, Any] | None:
        """The manifest as written (None: the stage never finished here), not checked."""
        if self._recorded is _UNREAD:
            written, self._written = self._written, None
            self._recorded = json.loads(written) if written is not None else artifacts.read_manifest(self.path)
        return self._recorded

    def damage(self) -> str | None:
        """Why an output the manifest lists is not as written (None: intact, or no manifest)."""
        if self._damage is _UNREAD:
            self._damage = None if self.recorded is None else artifacts.damaged_output(self.path, self.recorded)
        return self._damage

    def stale_reason(self, key: str) -> str | None:
        """Why the stage must be redone (None: it is current): ``NOT_DONE``,
        ``CHANGED``, or, for a finished stage with this key, which output is
        damaged (``is_damage``)."""
        if self.recorded is None:
            return NOT_DONE
        if self.recorded.get("key") != key:
            return CHANGED
        return self.damage()

    def checked(self, missing: str, redo: str) -> dict[str, Any]:
        """The manifest once every output it lists is intact: MissingInput(``missing``)
        without one, DamagedArtifact naming the command ``redo`` for a damaged output."""
        if self.recorded is None:
            raise MissingInput(missing)
        damage = self.damage()
        if damage is not None:
            raise DamagedArtifact(f"{damage}: run `{redo}` to make it anew")
        return self.recorded

    def require_key(self, manifest: dict[str, Any], key: str, what: str, redo: str) -> dict[str, Any]:
        """``manifest`` when it was made with ``key`` (what the config gives now),
        else StaleInput naming ``what`` (the phase and stage) and the command ``redo``."""
        if manifest.get("key") != key:
            raise StaleInput(f"{what} is out of date (made from other sources or settings than the config gives "
                             f"now, or it is another phase's folder): run `{redo}` first")
        return manifest

    def finished(self) -> bool:
        """Whether a finished stage is on disk now (read anew: what a Ctrl-C leaves)."""
        return artifacts.read_manifest(self.path) is not None

    def begin(self) -> None:
        """Make the folder empty and ready: the old manifest goes first. The
        stage's peak memory is measured from here (``peak.StagePeak``)."""
        (self.path / artifacts.MANIFEST).unlink(missing_ok=True)
        self._recorded = self._damage = self._written = None
        self._forget_dependents()
        if self.path.exists():
            shutil.rmtree(self.path)
        self.path.mkdir(parents=True)
        release_memory()
        STAGE_PEAK.start()

    def finish(self, manifest: dict[str, Any]) -> dict[str, Any]:
        """Write the manifest last (atomically), adding the format and peak RSS;
        the folder keeps it as written (its outputs were hashed as written)."""
        peak_kb, exact = STAGE_PEAK.peak_kb()
        manifest = {"format": artifacts.FORMAT, **manifest, "peak_rss_mb": round(peak_kb / 1024, 1),
                    "peak_rss_exact": exact, "process_peak_rss_mb": peak_rss_mb()}
        if manifest.get("workers_peak_rss_mb"):
            manifest["all_processes_peak_rss_mb"] = round(manifest["peak_rss_mb"] + manifest["workers_peak_rss_mb"], 1)
        # parsed only if asked: a manifest that lists every file of a large folder is slow to parse
        self._written, self._recorded, self._damage = artifacts.write_manifest(self.path, manifest), _UNREAD, None
        return manifest

    def _forget_dependents(self) -> None:
        """Called by ``begin``: what other folders derived from this one is no longer true."""


@dataclass(frozen=True)
class IngestInputs:
    """What a phase's ingest reads: its files, their fingerprints and text bytes, the share kept."""

    files: list[tuple[Source, Path]]
    fingerprints: layout.Fingerprints
    sizes: list[int | None]  # text bytes (None: unreadable)
    share: float
    skipped: list[dict[str, str]]  # broken symbolic links a folder scan passed by (on_bad_file: skip)
    guessed: tuple[int, ...] = ()  # files whose size is a guess, checked by ingest (``IngestFolder.inputs``)
    caps: tuple[float, ...] = ()  # each source's cap share (``layout.source_caps``); empty: no source sets max_bytes
    file_caps: tuple[float, ...] = ()  # each file's, by file index

    @property
    def shares(self) -> float | sampling.Shares:
        """What the engines are handed: the phase's share, with the files' cap shares if any source sets one."""
        return sampling.Shares(self.share, self.file_caps) if self.caps else self.share


class IngestFolder(StageFolder):
    """``WORK/ingest/NN-slug``: a phase's chunk files and held-out text."""

    def __init__(self, work: Work, phase: Phase) -> None:
        super().__init__(layout.ingest_dir(work.cfg, phase))
        self.work, self.phase = work, phase
        self._inputs: IngestInputs | None = None

    def inputs(self, *, exact: bool = False) -> IngestInputs:
        """The phase's files, measured (the text bytes an earlier ingest recorded reused).

        The local engine takes guesses where measuring would read the text
        (``layout.measure_text``) while they leave the whole text kept far below
        the capacity; ingest then records what it read (``measured``). ``exact``
        (``plan``, the Ray engine): every size measured.
        """
        if self._inputs is None or (exact and self._inputs.guessed):
            cfg = self.work.cfg
            skipped: list[dict[str, str]] = []
            files = layout.phase_files(self.phase, skipped=skipped if cfg.on_bad_file == "skip" else None,
                                       listed=self.work.listed)
            fingerprints = layout.fingerprints(files)
            estimate = not exact and cfg.engine == "local"
            sizes, guessed = layout.measure_text(cfg, files, fingerprints, self.recorded, estimate=estimate)
            caps = layout.source_caps(self.phase, files, sizes)  # capped sources are measured, never guessed
            capped = layout.file_caps(self.phase, files, caps)
            share = layout.phase_share(cfg, sizes, guessed, capped)
            if share is None:  # too near the capacity to trust the guesses: measure them
                sizes, guessed = layout.measure_text(cfg, files, fingerprints, self.recorded)
                share = layout.phase_share(cfg, sizes, (), capped)
            self._inputs = IngestInputs(files, fingerprints, sizes, share, skipped, guessed, caps, capped)
            self._key = None
        return self._inputs

    def measured(self, sizes: dict[int, int | None]) -> IngestInputs:
        """The inputs with the guessed sizes replaced by what ingest read (``sizes``:
        file index -> text bytes, None for a file skipped as bad); their share may
        then differ from the one the guesses gave (the caller ingests again)."""
        inputs = self.inputs()
        guessed = set(inputs.guessed)
        exact = [sizes.get(i, size) if i in guessed else size for i, size in enumerate(inputs.sizes)]
        share = layout.phase_share(self.work.cfg, exact, (), inputs.file_caps)
        self._inputs = replace(inputs, sizes=exact, share=share, guessed=())
        self._key = None
        return self._inputs

    def settings(self) -> dict[str, Any]:
        inputs = self.inputs()
        return keys.ingest_settings(self.work.cfg, self.phase, inputs.share, inputs.caps)

    def key(self) -> str:
        if self._key is None:
            inputs = self.inputs()
            self._key = keys.ingest_key(self.work.cfg, self.phase, inputs.fingerprints, inputs.share, inputs.caps)
        return self._key

    def manifest(self) -> dict[str, Any]:
        """The finished ingest's manifest, checked; MissingInput when it was never ingested."""
        cfg, name = self.work.cfg, self.phase.name
        return self.checked(f"phase '{name}' has not been ingested: run `toktok ingest -c {cfg.path}` first",
                            f"toktok ingest -c {cfg.path} --phase '{name}' --force")

    def current_manifest(self) -> dict[str, Any]:
        """The manifest, checked, if it was made from the phase's sources and
        settings as they are now (its key); else StaleInput naming the command."""
        cfg, name = self.work.cfg, self.phase.name
        return self.require_key(self.manifest(), self.key(), f"phase '{name}': its ingest",
                                f"toktok ingest -c {cfg.path} --phase '{name}'")

    def inventory(self) -> pa.Table:
        """The phase's distinct pieces and counts: the sum of the chunk files its
        manifest lists (rows in no particular order)."""
        chunks = [o["name"] for o in self.manifest()["outputs"] if o["name"].startswith("chunk-")]
        return sum_chunks([self.path / name for name in chunks])

    def heldout_texts(self) -> list[str]:
        """The phase's held-out documents (none when it has no held-out file)."""
        if not any(o["name"] == "heldout.arrow" for o in self.manifest()["outputs"]):
            return []
        return artifacts.read_ipc(self.path / "heldout.arrow")["text"].to_pylist()

    def _forget_dependents(self) -> None:
        self.work.forget_after(self.phase.index)


class TrainFolder(StageFolder):
    """``WORK/train/NN-slug``: a phase's merges and the usage of its vocabulary."""

    def __init__(self, work: Work, phase: Phase) -> None:
        super().__init__(layout.train_dir(work.cfg, phase))
        self.work, self.phase = work, phase

    def settings(self) -> dict[str, Any]:
        keys.known_merges(self.phase)  # said before the base is read
        return keys.train_settings(self.work.cfg, self.phase, self.work.base_description())

    def key(self) -> str:
        """What the merges depend on: the earlier phases' merges, this phase's pieces, settings.
        Each upstream artifact must be current (``current_manifest``): a stage run
        alone never trains on pieces or merges made with other inputs (StaleInput)."""
        if self._key is None:
            earlier = self.work.cfg.phases[: self.phase.index - 1]
            before = [artifacts.outputs_key(self.work.train(p).current_manifest()) for p in earlier]
            pieces = artifacts.outputs_key(self.work.ingest(self.phase).current_manifest())
            self._key = keys.train_key(self.settings(), pieces=pieces, before=before)
        return self._key

    def manifest(self) -> dict[str, Any]:
        """The finished training's manifest, checked; MissingInput when it was never trained."""
        cfg, name = self.work.cfg, self.phase.name
        return self.checked(f"phase '{name}' has not been trained: run `toktok train -c {cfg.path}` first",
                            f"toktok train -c {cfg.path} --phase '{name}' --force")

    def current_manifest(self) -> dict[str, Any]:
        """The manifest, checked, if it matches the phase's inputs now (its
        ingest, the earlier phases' merges, settings); else StaleInput naming the command."""
        cfg, name = self.work.cfg, self.phase.name
        return self.require_key(self.manifest(), self.key(), f"phase '{name}': its training",
                                f"toktok train -c {cfg.path} --phase '{name}'")

    def merges(self) -> pa.Table:
        """``merges.arrow``: rank, left, right, bytes, count."""
        self.manifest()
        return artifacts.read_ipc(self.path / "merges.arrow")

    def usage(self, size: int) -> np.ndarray | None:
        """How often each id below ``size`` occurs in the phase's pieces segmented with
        the vocabulary after the phase (``usage.arrow``); None when the file is
        absent (an older work folder) or is of another vocabulary size."""
        if not any(o["name"] == "usage.arrow" for o in self.manifest()["outputs"]):
            return None
        table = artifacts.read_ipc(self.path / "usage.arrow")
        used = np.zeros(size, dtype=np.int64)
        ids = table["id"].to_numpy().astype(np.int64)
        if len(ids) and ids.max() >= size:
            return None
        used[ids] = table["count"].to_numpy().astype(np.int64)
        return used

    def _forget_dependents(self) -> None:
        self.work.forget_after(self.phase.index + 1, vocab_from=self.phase.index)


class ExportFolder(StageFolder):
    """``WORK/export``: the export's manifest and its staged set (``staged``)."""

    def __init__(self, work: Work) -> None:
        super().__init__(layout.export_dir(work.cfg))
        self.work = work
        self.staged = self.path / "staged"

    def settings(self) -> dict[str, Any]:
        return keys.export_settings(self.work.cfg, self.work.base_description())

    def key(self) -> str:
        """Export depends on every phase's merges, each current with its own inputs."""
        if self._key is None:
            cfg = self.work.cfg
            for phase in cfg.phases:
                if self.work.train(phase).recorded is None:
                    raise MissingInput(f"phase '{phase.name}' has not been trained: run `toktok train -c {cfg.path}` "
                                       "first")
            trained = [artifacts.outputs_key(self.work.train(p).current_manifest()) for p in cfg.phases]
            self._key = keys.export_key(self.settings(), trained)
        return self._key


# ---------------------------------------------------------------- reading artifacts


def sum_chunks(paths: list[Path]) -> pa.Table:
    """The sum of chunk files, read one at a time (memory: the sum and one chunk).
    One chunk is returned as it is (its rows sorted by piece)."""
    from toktoktok.summing import RunningSum  # numba: loaded only when there is work

    if len(paths) == 1:
        return artifacts.read_ipc(paths[0]).cast(counts.SCHEMA)
    total = RunningSum()
    for path in paths:
        total.add(artifacts.read_ipc(path))
    return total.table()


def new_token_rows(ranks: np.ndarray, next_rank: int) -> np.ndarray:
    """Which rows of a merges file made a new token, its first rank being
    ``next_rank``: a row whose rank is above every rank before it (the others
    joined into a token that already had a rank, before the phase or in it).

        >>> new_token_rows(np.array([300, 301, 40, 302, 302, 305]), 300).tolist()
        [True, True, False, True, False, True]
    """
    before = np.maximum.accumulate(np.concatenate([[next_rank - 1], ranks]))[:-1]
    return ranks > before


def extend_vocab(vocab: Vocab, merges: pa.Table) -> Vocab:
    """``vocab`` with the new tokens of a phase's merges table appended."""
    new = new_token_rows(merges["rank"].to_numpy().astype(np.int64), len(vocab))
    return vocab.extended_spans(*counts.binary_spans(merges["bytes"].filter(pa.array(new))))
