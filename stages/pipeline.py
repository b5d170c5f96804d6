"""The orchestrator: checks a config, then runs ingest -> train -> export, skipping
every stage whose inputs and settings did not change.

Each phase has its own ingest and train folder, so changing one phase's
sources redoes that phase's ingest and the training of that phase and every
later one (they start from its vocabulary), never an earlier phase. A lock
file in the work directory keeps two runs from writing there at once.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import os
from collections.abc import Iterator
from typing import Any

from stages.export import run_export
from stages.ingest import resolve_threads, run_ingest
from stages.progress import Progress
from stages.train import run_train
from toktoktok.config import Config, ConfigError, Phase
from toktoktok.sources import SourceError, list_source_files
from toktoktok.tiktoken_file import validate_special_tokens
from toktoktok.warm_start import load_base

NOT_YET = "is not yet supported by this version of toktoktok"


def check_ready(cfg: Config) -> list[str]:
    """Everything that can be checked before work starts; returns warnings.

    Raises ConfigError naming the key for a source with no readable file and
    for options this version refuses.
    """
    if cfg.warm_start is not None:
        try:
            base = load_base(cfg.warm_start.file, special_tokens=cfg.warm_start.special_tokens)
            new = [t for t in cfg.special_tokens if t not in base.special_tokens]
            top = len(base.vocab)
            validate_special_tokens({}, base.special_tokens | {t: top + i for i, t in enumerate(new)})
        except ValueError as exc:
            raise ConfigError(f"{cfg.path}: warm_start.file: {exc}") from exc
    warnings = list(cfg.warnings)
    for phase in cfg.phases:
        total = 0
        for j, src in enumerate(phase.sources):
            try:
                total += sum(p.stat().st_size for p in list_source_files(src))
            except (SourceError, OSError) as exc:
                raise ConfigError(f"{cfg.path}: phases[{phase.index - 1}].sources[{j}]: {exc}") from exc
        if total > cfg.working_set_mb << 20:
            warnings.append(f"phase '{phase.name}' has {total >> 20} MB of files, more than working_set_mb "
                            f"({cfg.working_set_mb}); sampling to the budget {NOT_YET}: the phase is read whole")
    return warnings


@contextlib.contextmanager
def locked(cfg: Config) -> Iterator[None]:
    """Hold the work directory's lock, or fail at once if another run holds it."""
    cfg.work_dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(cfg.work_dir / ".lock", os.O_CREAT | os.O_RDWR, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise RuntimeError(f"another toktoktok run is using {cfg.work_dir}; wait for it to finish") from None
        yield
    finally:
        os.close(fd)


def select_phases(cfg: Config, name: str | None) -> list[Phase]:
    """All phases, or the one called ``name`` (case-insensitive)."""
    if name is None:
        return list(cfg.phases)
    for phase in cfg.phases:
        if phase.name.lower() == name.lower() or phase.slug == name:
            return [phase]
    known = ", ".join(repr(p.name) for p in cfg.phases)
    raise ConfigError(f"{cfg.path}: no phase named {name!r} (phases: {known})")


def _prepare(cfg: Config, progress: Progress) -> None:
    for warning in check_ready(cfg):
        progress.note(f"warning: {warning}")
    import numba

    numba.set_num_threads(min(resolve_threads(cfg.threads), numba.config.NUMBA_NUM_THREADS))


def _report(progress: Progress, what: str, manifest: dict[str, Any]) -> None:
    if manifest.get("skipped"):
        progress.info(f"{what}: up to date, skipped")


def ingest(cfg: Config, *, phase: str | None = None, force: bool = False, progress: Progress) -> list[dict]:
    _prepare(cfg, progress)
    with locked(cfg):
        done = []
        for p in select_phases(cfg, phase):
            done.append(run_ingest(cfg, p, force=force, progress=progress))
            _report(progress, f"ingest {p.name}", done[-1])
        return done


def train(cfg: Config, *, phase: str | None = None, force: bool = False, progress: Progress) -> list[dict]:
    _prepare(cfg, progress)
    with locked(cfg):
        done = []
        for p in select_phases(cfg, phase):
            done.append(run_train(cfg, p, force=force, progress=progress))
            _report(progress, f"train {p.name}", done[-1])
        return done


def export(cfg: Config, *, force: bool = False, hf: bool = False, progress: Progress) -> dict:
    if hf:
        cfg = dataclasses.replace(cfg, export_hf=True)
    _prepare(cfg, progress)
    with locked(cfg):
        manifest = run_export(cfg, force=force, progress=progress)
        _report(progress, "export", manifest)
        return manifest


def run(cfg: Config, *, force: bool = False, progress: Progress) -> dict[str, Any]:
    """The whole pipeline; returns the manifests of every stage."""
    _prepare(cfg, progress)
    with locked(cfg):
        ingested = [run_ingest(cfg, p, force=force, progress=progress) for p in cfg.phases]
        for p, m in zip(cfg.phases, ingested):
            _report(progress, f"ingest {p.name}", m)
        trained = []
        for p in cfg.phases:
            trained.append(run_train(cfg, p, force=force, progress=progress))
            _report(progress, f"train {p.name}", trained[-1])
        exported = run_export(cfg, force=force, progress=progress)
        _report(progress, "export", exported)
        return {"ingest": ingested, "train": trained, "export": exported}


def summary(cfg: Config, result: dict[str, Any]) -> str:
    """A few lines for the user at the end of a run."""
    export = result["export"]["counts"]
    lines = [f"wrote {cfg.output} ({export['mergeable_ranks']} ranks + {export['special_tokens']} special tokens; "
             f"ids 0..{export['vocab_size'] - 1})"]
    for phase, ing, tr in zip(cfg.phases, result["ingest"], result["train"]):
        c, t = ing["counts"], tr["counts"]
        lines.append(f"  {phase.name}: {c['files']} files, {c['documents']} documents, {c['bytes_read'] / 1e6:.1f} MB, "
                     f"{t['distinct_pieces']} distinct pieces, {t['merges_made']}/{t['merges_requested']} merges"
                     + (" (skipped: up to date)" if tr.get("skipped") else ""))
    lines.append(f"  checked with tiktoken: {export['pieces_checked_with_tiktoken']} pieces, "
                 f"{export['pieces_differing_from_tiktoken']} differ; round trip ok")
    return "\n".join(lines)
