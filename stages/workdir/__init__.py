"""The work folder: where every stage's artifacts live, what each stage's key
is made of, and the reading of upstream artifacts, in one place.

The stages (``ingest``, ``train``, ``export``) never import each other: they
meet here and in the files this module names. ``WORK`` is the config's
``work_dir`` (default ``DIR/NAME.work`` beside ``output: DIR/NAME.tiktoken``)::

    WORK/ingest/NN-slug/chunk-00000.arrow ...   piece: binary, count: uint64
    WORK/ingest/NN-slug/heldout.arrow           text: large_string
    WORK/train/NN-slug/merges.arrow             rank, left, right: uint32, bytes, count: uint64
    WORK/export/                                the export's manifest (and its staged outputs)
    each stage folder: manifest.json            written last (``stages.artifacts``)

The outputs beside ``output:`` (``output_set``) are the ``.tiktoken``, its
``.meta.json``, the report files and, when exported, ``NAME.hf/``.

    >>> resolve_threads(3)
    3

Importing this module loads numpy, pyarrow and the source readers: the
orchestrator imports it inside its functions, so that ``--help`` and a bad
config are answered at once.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from toktoktok import counts, sampling
from toktoktok.config import (
    Config,
    ConfigError,
    Phase,
    Source,
    config_error,
    default_work_dir,
    preflight,
)
from toktoktok.tuning import resolve_threads as resolve_threads  # re-exported: the stages take it from here
from toktoktok.errors import DamagedArtifact, MissingInput
from toktoktok.loading import meta_path, split_name
from toktoktok.sources import SourceError, list_source_files, text_bytes
from toktoktok.vocab import Vocab
from toktoktok.warm_start import load_base

from . import artifacts


def _verified(cfg: Config, folder: Path, manifest: dict[str, Any], redo: str) -> dict[str, Any]:
    """``manifest``, once every output it lists is as written; else DamagedArtifact."""
    damage = artifacts.damaged_output(folder, manifest)
    if damage is not None:
        raise DamagedArtifact(f"{damage}: run `{redo}` to make it anew")
    return manifest


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


def hf_dir(cfg: Config) -> Path:
    """``DIR/NAME.hf`` for ``output: DIR/NAME.tiktoken``."""
    return cfg.output.with_name(cfg.output.name.removesuffix(".tiktoken") + ".hf")


def report_paths(cfg: Config) -> dict[str, Path]:
    """``DIR/NAME.report.{md,json,png}`` for ``output: DIR/NAME.tiktoken``."""
    folder, name = split_name(cfg.output)
    return {ext: folder / f"{name}.report.{ext}" for ext in ("md", "json", "png")}


HF_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")


def output_set(cfg: Config) -> list[Path]:
    """Every file an export writes outside the work folder: the ``.tiktoken``, its
    ``.meta.json``, the reports, the Hugging Face files."""
    return [cfg.output, meta_path(cfg.output), *report_paths(cfg).values(), *(hf_dir(cfg) / f for f in HF_FILES)]


# ---------------------------------------------------------------- threads


# ---------------------------------------------------------------- a phase's inputs


def phase_files(phase: Phase, *, skipped: list[dict[str, str]] | None = None) -> list[tuple[Source, Path]]:
    """Every (source, file) of a phase, in config then path order; ``skipped``
    collects what a folder scan passed by (broken symbolic links)."""
    return [(src, path) for src in phase.sources for path in list_source_files(src, skipped=skipped)]


def fingerprint(src: Source, path: Path) -> dict[str, Any]:
    """What ingest's key records of an input file: path, size, mtime, column, weight."""
    st = path.stat()
    return {
        "path": str(path),
        "size": st.st_size,
        "mtime_ns": st.st_mtime_ns,
        "text_column": src.text_column,
        "weight": src.weight,
    }


def measure_text(cfg: Config, phase: Phase, files: list[tuple[Source, Path]],
                 fingerprints: list[dict[str, Any]]) -> list[int | None]:
    """Each file's text bytes (None: unreadable, left to ingest to report).

    Sizes recorded by the last ingest of this phase are reused while a file's
    fingerprint is unchanged, so a rerun reads nothing twice.
    """
    known = {}
    manifest = artifacts.read_manifest(ingest_dir(cfg, phase))
    for entry in (manifest or {}).get("inputs", []):
        if isinstance(entry, dict) and "text_bytes" in entry:
            known[_fingerprint_key(entry)] = entry["text_bytes"]
    sizes: list[int | None] = []
    for (src, path), fp in zip(files, fingerprints):
        if _fingerprint_key(fp) in known:
            sizes.append(known[_fingerprint_key(fp)])
            continue
        try:
            sizes.append(text_bytes(path, text_column=src.text_column))
        except (SourceError, OSError) as exc:
            if cfg.on_bad_file == "fail":
                raise SourceError(f"{path}: {exc.strerror or exc}") if isinstance(exc, OSError) else exc
            sizes.append(None)
    return sizes


def _fingerprint_key(fp: dict[str, Any]) -> tuple[Any, ...]:
    return (fp.get("path"), fp.get("size"), fp.get("mtime_ns"), fp.get("text_column"))


def phase_share(cfg: Config, sizes: list[int | None]) -> float:
    """The share of documents this phase keeps (1.0: no sampling)."""
    return sampling.share(total=sum(s or 0 for s in sizes), capacity=sampling.capacity(cfg.working_set_mb))


# ---------------------------------------------------------------- keys


def ingest_settings(cfg: Config, phase: Phase, share: float = 1.0) -> dict[str, Any]:
    """The settings a phase's ingest depends on (recorded in its manifest)."""
    return {
        "sample_share": share,
        "choice_rule": sampling.RULE,  # of the sample and of the held-out documents
        "stage": "ingest",
        "phase": phase.slug,
        "pattern": cfg.pattern.python,
        "cut_at_safe_places": cfg.pattern.cut_at_safe_places,
        "cut_at_spaces": cfg.pattern.cut_at_spaces,
        "special_tokens": list(cfg.special_tokens),
        "seed": cfg.seed,
        "heldout_share": cfg.heldout_share,
        "max_piece_bytes": cfg.max_piece_bytes,
        "on_bad_file": cfg.on_bad_file,
    }


def ingest_key(cfg: Config, phase: Phase, fingerprints: list[dict[str, Any]], share: float = 1.0) -> str:
    """What the ingest of a phase depends on: settings, file fingerprints, the sample's share."""
    return artifacts.key_of({**ingest_settings(cfg, phase, share), "files": fingerprints})


def base_description(cfg: Config) -> dict[str, Any]:
    """What the starting vocabulary depends on, for the stages' keys.

    A warm start's special tokens are the ones it resolves to (config,
    companion, or a published base's own), not only the config's: where
    they sit decides where new merges start, so a work folder trained when
    they were read otherwise (before cl100k_base was recognised, or with
    another companion) is never taken as current.
    """
    if cfg.warm_start is None:
        return {"hardcoded_merges": cfg.hardcoded_merges}
    return {"warm_start": artifacts.file_digest(cfg.warm_start.file),
            "warm_start_special_tokens": base_special_tokens(cfg)}


def train_settings(cfg: Config, phase: Phase) -> dict[str, Any]:
    """The settings a phase's training depends on (recorded in its manifest)."""
    if phase.merges is None:  # a caller that skipped check_ready, which fits vocab_size
        raise RuntimeError(f"phase '{phase.name}': its merges (the rest of vocab_size) are not known yet")
    return {
        "stage": "train",
        "phase": phase.slug,
        "base": base_description(cfg),
        "merges": phase.merges,
        "min_frequency": cfg.min_frequency,
        "max_token_bytes": cfg.max_token_bytes,
    }


def ingest_manifest(cfg: Config, phase: Phase) -> dict[str, Any]:
    """A phase's finished ingest manifest; MissingInput when it was never ingested."""
    manifest = artifacts.read_manifest(ingest_dir(cfg, phase))
    if manifest is None:
        raise MissingInput(f"phase '{phase.name}' has not been ingested: run `toktok ingest -c {cfg.path}` first")
    return _verified(cfg, ingest_dir(cfg, phase), manifest,
                     f"toktok ingest -c {cfg.path} --phase '{phase.name}' --force")


def train_manifest(cfg: Config, phase: Phase) -> dict[str, Any]:
    """A phase's finished train manifest, its merges verified; MissingInput when it
    was never trained."""
    manifest = artifacts.read_manifest(train_dir(cfg, phase))
    if manifest is None:
        raise MissingInput(f"phase '{phase.name}' has not been trained: run `toktok train -c {cfg.path}` first")
    return _verified(cfg, train_dir(cfg, phase), manifest,
                     f"toktok train -c {cfg.path} --phase '{phase.name}' --force")


def train_key(cfg: Config, phase: Phase) -> str:
    """What a phase's merges depend on: its pieces, the earlier phases, settings."""
    before = []
    for earlier in cfg.phases[: phase.index - 1]:
        before.append(artifacts.outputs_key(train_manifest(cfg, earlier)))
    pieces = artifacts.outputs_key(ingest_manifest(cfg, phase))
    return artifacts.key_of({**train_settings(cfg, phase), "pieces": pieces, "before": before})


def current_train_manifest(cfg: Config, phase: Phase) -> dict[str, Any]:
    """A phase's train manifest, if it matches its inputs now; else MissingInput."""
    manifest = train_manifest(cfg, phase)
    if manifest.get("key") != train_key(cfg, phase):
        raise MissingInput(f"phase '{phase.name}' is not trained on its current inputs (an earlier phase or its "
                           f"settings changed): run `toktok train -c {cfg.path}` first")
    return manifest


# ---------------------------------------------------------------- upstream artifacts


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


def phase_inventory(cfg: Config, phase: Phase, manifest: dict[str, Any] | None = None) -> pa.Table:
    """A phase's distinct pieces and counts: the sum of the chunk files its ingest
    manifest lists (rows in no particular order)."""
    manifest = manifest if manifest is not None else ingest_manifest(cfg, phase)
    chunks = [o["name"] for o in manifest["outputs"] if o["name"].startswith("chunk-")]
    return sum_chunks([ingest_dir(cfg, phase) / name for name in chunks])


def heldout_texts(cfg: Config, phase: Phase) -> list[str]:
    """A phase's held-out documents (none when it has no held-out file), verified
    against its ingest manifest."""
    manifest = ingest_manifest(cfg, phase)
    if not any(o["name"] == "heldout.arrow" for o in manifest["outputs"]):
        return []
    return artifacts.read_ipc(ingest_dir(cfg, phase) / "heldout.arrow")["text"].to_pylist()


def phase_merges(cfg: Config, phase: Phase) -> pa.Table:
    """A phase's ``merges.arrow``: rank, left, right, bytes, count (verified
    against its train manifest)."""
    train_manifest(cfg, phase)
    return artifacts.read_ipc(train_dir(cfg, phase) / "merges.arrow")


def phase_usage(cfg: Config, phase: Phase, size: int) -> np.ndarray | None:
    """How often each id below ``size`` occurs in the phase's pieces segmented with
    the vocabulary after the phase (its ``usage.arrow``, verified against its
    train manifest); None when the file is absent (an older work folder)."""
    manifest = train_manifest(cfg, phase)
    if not any(o["name"] == "usage.arrow" for o in manifest["outputs"]):
        return None
    table = artifacts.read_ipc(train_dir(cfg, phase) / "usage.arrow")
    used = np.zeros(size, dtype=np.int64)
    ids = table["id"].to_numpy().astype(np.int64)
    if len(ids) and ids.max() >= size:
        return None  # a vocabulary of another size: not this one's usage
    used[ids] = table["count"].to_numpy().astype(np.int64)
    return used


def base_vocab(cfg: Config) -> Vocab:
    """The vocabulary before the first phase: the warm start's, or the bytes and
    (if on) the hardcoded merges."""
    if cfg.warm_start is not None:
        return load_base(cfg.warm_start.file, special_tokens=cfg.warm_start.special_tokens).vocab
    return Vocab.initial(hardcoded=cfg.hardcoded_merges)


def base_special_tokens(cfg: Config) -> dict[str, int]:
    """The warm start's special tokens with their ids (none without a warm start)."""
    if cfg.warm_start is None:
        return {}
    return load_base(cfg.warm_start.file, special_tokens=cfg.warm_start.special_tokens).special_tokens


def vocab_after(cfg: Config, last: int) -> Vocab:
    """The vocabulary after phases 1..last, rebuilt from their merges files."""
    vocab = base_vocab(cfg)
    for phase in cfg.phases[:last]:
        table = phase_merges(cfg, phase)
        new = new_token_rows(table["rank"].to_numpy().astype(np.int64), len(vocab))
        vocab = vocab.extended_spans(*counts.binary_spans(table["bytes"].filter(pa.array(new))))
    return vocab


def new_token_rows(ranks: np.ndarray, next_rank: int) -> np.ndarray:
    """Which rows of a merges file made a new token, its first rank being
    ``next_rank``: a row whose rank is above every rank before it (the others
    joined into a token that already had a rank, before the phase or in it).

        >>> new_token_rows(np.array([300, 301, 40, 302, 302, 305]), 300).tolist()
        [True, True, False, True, False, True]
    """
    before = np.maximum.accumulate(np.concatenate([[next_rank - 1], ranks]))[:-1]
    return ranks > before


# ---------------------------------------------------------------- before any work


def check_ready(cfg: Config) -> tuple[Config, list[str]]:
    """Everything that can be checked before work starts; returns the config
    with every phase's merges known, and warnings.

    ``toktoktok.config.preflight`` checks what needs the config's files (the
    warm start, from the read ``load_config`` made; ``vocab_size`` fitted to
    it; ``hf:`` roles; every source lists its files); then the output and
    work folders must be writable. Each problem is a ConfigError naming the
    key and its YAML line.
    """
    cfg, warnings = preflight(cfg)
    _check_writable(cfg)
    return cfg, warnings


def _check_writable(cfg: Config) -> None:
    """The output's folder and the work directory must be writable (or creatable)."""
    work_key = "output" if cfg.work_dir == default_work_dir(cfg.output) else "work_dir"
    for key, folder in (("output", cfg.output.parent), (work_key, cfg.work_dir)):
        problem = _unwritable(folder)
        if problem:
            raise config_error(cfg.path, (key,), problem)


def _unwritable(folder: Path) -> str | None:
    """Why files cannot be written in ``folder`` (created if need be), or None.

    Checked on the nearest folder that exists, with ``os.access`` (which
    knows read-only file systems) so nothing is created here.
    """
    existing = folder
    try:
        while not existing.exists() and existing != existing.parent:
            existing = existing.parent
        is_dir = existing.is_dir()
    except OSError as exc:  # a parent that cannot be searched
        return f"cannot be written: {exc.filename}: {exc.strerror}"
    if not is_dir:
        return f"needs the folder {folder}, but {existing} is a file"
    if os.access(existing, os.W_OK | os.X_OK):
        return None
    try:
        read_only = bool(os.statvfs(existing).f_flag & os.ST_RDONLY)
    except OSError:
        read_only = False
    why = "a read-only file system" if read_only else "permission denied"
    return f"cannot be written: the folder {existing} is not writable ({why})"


def select_phases(cfg: Config, name: str | None) -> list[Phase]:
    """All phases, or the one called ``name`` (case-insensitive)."""
    if name is None:
        return list(cfg.phases)
    for phase in cfg.phases:
        if phase.name.lower() == name.lower() or phase.slug == name:
            return [phase]
    known = ", ".join(repr(p.name) for p in cfg.phases)
    raise ConfigError(f"{cfg.path}: no phase named {name!r} (phases: {known})")


def finished_stages(cfg: Config) -> list[str]:
    """The stages with a manifest in the work directory (their artifacts are complete)."""
    done = []
    for stage, folder_of in (("ingest", ingest_dir), ("train", train_dir)):
        done += [f"{stage} {p.name!r}" for p in cfg.phases if artifacts.read_manifest(folder_of(cfg, p)) is not None]
    if artifacts.read_manifest(export_dir(cfg)) is not None:
        done.append("export")
    return done
