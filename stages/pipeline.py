"""The orchestrator: checks a config, then runs ingest -> train -> export, skipping
every stage whose inputs and settings did not change.

Each phase has its own ingest and train folder, so changing one phase's
sources redoes that phase's ingest and the training of that phase and every
later one (they start from its vocabulary), never an earlier phase. A lock
file in the work directory keeps two runs from writing there at once, and one
beside the output (``DIR/.NAME.lock``) two configs from exporting to it at
once. Each command makes one ``workdir.Work`` for every stage it runs, so a
key is computed, and a manifest read and checked, once a command.

The orchestrator, not the export stage, writes the report: ``export.build``
writes and validates the tokenizer in the work folder, ``report.write_report``
adds the report beside it, and ``export.publish`` moves the set into place.

Robustness: ``Work.check_ready`` finds before any work starts what can be
found then (each a ``ConfigError``, exit 2, naming the key and its YAML line).
Ctrl-C raises ``Interrupted`` whose message says which stages finished (kept
and reused) and which one was cut short. The outputs are one set, published
all or nothing (``toktoktok.publish_journal``): an export that fails or is
interrupted leaves the previous set as it was, and says so; after a kill -9
in a publish, the next run (any stage command, under the lock, first) undoes
or finishes it from ``WORK/export/publish.json``, and the readers meanwhile
refuse the mixed pair by its digests. Temporary files that a killed export
left beside the outputs are swept before the next export.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
from collections.abc import Callable, Iterator
from glob import escape as glob_escape
from pathlib import Path
from typing import TYPE_CHECKING, Any

from toktoktok.config import Config
from toktoktok.errors import ConfigError, ExportFailed, Interrupted, MissingInput, UsageError
from toktoktok.interrupts import interrupt_as
from toktoktok.tuning import resolve_threads

from .workdir.locks import hold
from .workdir.progress import Progress

if TYPE_CHECKING:
    from .workdir import Work

# The stages (numba, polars, pyarrow) are imported inside the functions that run
# them, not with this module (which the CLI imports): a bad config or `--help`
# is then answered in a tenth of a second instead of most of a second.



@contextlib.contextmanager
def locked(work: Work) -> Iterator[None]:
    """Hold the work directory's lock, or fail at once if another run holds it."""
    with hold(work.lock, lambda who: f"another toktoktok run is using {work.cfg.work_dir} ({who} holds "
                                     f"{work.lock}); wait for it to finish"):
        yield


@contextlib.contextmanager
def output_locked(work: Work) -> Iterator[None]:
    """Hold the output set's lock (``DIR/.NAME.lock``, removed on release), or fail
    at once naming it and its holder: configs with their own work folders may
    share an ``output:``, and two publishes into one set would mix it."""
    lock = work.output_lock
    with hold(lock, lambda who: f"another toktoktok export is publishing to {work.cfg.output} ({who} holds "
                                f"{lock}); wait for it to finish", remove=True):
        yield


def _import_stages() -> tuple[Any, Any]:
    """Import numba and every stage's module; returns numba and ``stages.workdir``."""
    import numba

    from . import export, ingest, report, train, workdir  # noqa: F401 - imported here, under the hold

    return numba, workdir


def _prepare(cfg: Config, progress: Progress) -> Work:
    """Check what can be checked before work starts; returns the ``Work`` every
    stage of the command then uses, each phase's merges known (``vocab_size`` fitted)."""
    from toktoktok.interrupts import uninterrupted

    # a Ctrl-C inside an import can leave a module half made (numba's own import code
    # swallows it): it is held until the imports are done
    numba, workdir = uninterrupted(_import_stages)
    work, warnings = workdir.Work(cfg).check_ready()
    from .ingest import check_engine

    uninterrupted(lambda: check_engine(work.cfg))  # Ray imported, if chosen: held as the imports above
    for warning in warnings:
        progress.note(f"warning: {warning}")
    numba.set_num_threads(min(resolve_threads(cfg.threads), numba.config.NUMBA_NUM_THREADS))
    return work


def _report(progress: Progress, what: str, manifest: dict[str, Any]) -> None:
    if manifest.get("skipped"):
        progress.info(f"{what}: up to date, skipped")


def interrupted_message(cfg: Config, doing: str | None) -> str:
    """What Ctrl-C leaves: e.g. ``kept ingest 'A' (finished, in WORK); train 'A' was cut short ...``."""
    from . import workdir

    kept = workdir.Work(cfg).finished_stages()  # what is on disk now
    text = (f"kept {', '.join(kept)} (finished, in {cfg.work_dir})" if kept
            else "no stage had finished, nothing is kept")
    if doing:
        text += f"; {doing} was cut short and is redone by the next run"
    return text + "; rerun the same command to go on"


class _Steps:
    """Runs the stages one by one, remembering which one is running."""

    def __init__(self) -> None:
        self.doing: str | None = None

    def __call__(self, what: str, action: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        self.doing = what
        result = action(*args, **kwargs)
        self.doing = None
        return result


@contextlib.contextmanager
def _interruptible(cfg: Config) -> Iterator[_Steps]:
    """Turn Ctrl-C into ``Interrupted`` with the message of ``interrupted_message``."""
    steps = _Steps()
    with interrupt_as(lambda: interrupted_message(cfg, steps.doing)):
        yield steps


def _sweep_temporary_files(paths: list[Path]) -> None:
    """Remove what a killed export left beside its outputs: ``.NAME.XXXXXXXXXXXX.tmp``
    files (``toktoktok.atomic``'s temporary names). The work directory needs no
    sweep: a stage folder without a manifest is emptied when the stage is redone."""
    for path in paths:
        if path.parent.is_dir():
            for stray in path.parent.glob(f".{glob_escape(path.name)}.*.tmp"):
                if re.fullmatch(rf"\.{re.escape(path.name)}\.[0-9a-f]{{12}}\.tmp", stray.name):
                    with contextlib.suppress(OSError):
                        stray.unlink()


@dataclasses.dataclass
class _Outputs:
    """The output set as an export found it, and the companion it publishes, so a
    message after a failure can say what is on disk then (``_on_disk``)."""

    before: tuple[str | None, bytes | None]  # the .tiktoken's sha256 and the companion's bytes
    new_meta: dict[str, Any] | None = None  # the companion this export publishes, once built


def _pair(cfg: Config) -> tuple[str | None, bytes | None]:
    from toktoktok.loading import file_sha256, meta_path

    companion = meta_path(cfg.output)
    return (file_sha256(cfg.output) if cfg.output.is_file() else None,
            companion.read_bytes() if companion.is_file() else None)


def _on_disk(work: Work, seen: _Outputs) -> str:
    """What an export that failed or was interrupted leaves beside ``output:``, read
    from the disk now: the previous set, this export's, nothing, a publish left half
    done, or a set another process put there meanwhile."""
    import json

    cfg, journal = work.cfg, work.publish_journal
    try:
        state = json.loads(journal.read_text(encoding="utf-8")).get("state") if journal.is_file() else None
        now = _pair(cfg)
    except (OSError, ValueError, AttributeError):
        return f"the outputs ({cfg.output} and its companions) could not be read to say what they are"
    if state == "prepared":
        return (f"a publish was left half done ({journal}): the next toktok command puts the previous outputs "
                "back; until then readers refuse the mixed set")
    new = seen.new_meta
    if new is not None and now[1] is not None and now[0] == new["tiktoken"]["sha256"] \
            and _json_or_none(now[1]) == new:
        cleaning = "; the next toktok command removes what the publish left beside them" if state else ""
        return (f"this export's outputs ({cfg.output} and its companions) are in place{cleaning}; they are not "
                f"recorded in {work.export.path / 'manifest.json'}: the next `toktok export` exports again")
    if now == seen.before:
        return (f"the previous outputs ({cfg.output} and its companions) are kept as they were" if now[0]
                else f"no output was written ({cfg.output})")
    return (f"{cfg.output} and its companion are neither the previous outputs nor this export's: another "
            "process changed them meanwhile, they are left as found")


def _json_or_none(data: bytes) -> Any:
    import json

    try:
        return json.loads(data)
    except ValueError:
        return None


def _export_and_report(work: Work, seen: _Outputs, *, force: bool, progress: Progress) -> dict[str, Any]:
    """Export unless current: build and validate (``export.build``), write the
    report beside the staged files (``report.write_report``), publish."""
    import time

    from . import export, report

    key = work.export.key()
    if not force and (manifest := export.up_to_date(work, key, progress)) is not None:
        return manifest
    built = export.build(work, key=key, progress=progress)
    seen.new_meta = built.meta  # the same dict the publish seals and writes as the companion
    report.write_report(work, built.folder, meta=built.meta,
                        export_seconds=round(time.perf_counter() - built.started, 3))
    return export.publish(work, built, progress=progress)


def _export(work: Work, *, force: bool, progress: Progress) -> dict[str, Any]:
    """``_export_and_report``, with a word on the outputs if it fails.

    Nothing beside ``output:`` changes until the publish, which is all or
    nothing (``toktoktok.publish_journal``). A failure or Ctrl-C says what is
    on disk at that moment (``_on_disk``): before the publish commits, the
    previous outputs; after it (cleaning up, the export manifest), the new ones.
    """
    from toktoktok.errors import PublishError

    cfg = work.cfg
    _sweep_temporary_files(work.output_set())
    seen = _Outputs(before=_pair(cfg))
    try:
        with interrupt_as(lambda: f"{interrupted_message(cfg, 'export')}; {_on_disk(work, seen)}"):
            return _export_and_report(work, seen, force=force, progress=progress)
    except (ConfigError, MissingInput, Interrupted):
        raise
    except PublishError as exc:  # its own sentence knows the publish, not the export manifest or the rest
        raise PublishError(exc.errno, f"{exc.reason or exc.strerror}; {_on_disk(work, seen)}") from exc
    except OSError as exc:
        raise OSError(exc.errno, f"{exc.strerror or exc}; {_on_disk(work, seen)}", exc.filename) from exc
    except Exception as exc:
        raise ExportFailed(f"{exc}; {_on_disk(work, seen)}") from exc


@contextlib.contextmanager
def _work_folder(work: Work, progress: Progress) -> Iterator[None]:
    """Hold the work folder's lock; first finish or undo a publish a killed run left."""
    from toktoktok import publish_journal

    with locked(work):
        with output_locked(work) if work.publish_journal.exists() else contextlib.nullcontext():
            done = publish_journal.recover(work.publish_journal)
        if done:
            progress.note(f"{done} ({work.cfg.output})")
        yield


def _per_phase(stage: str, run_one: Callable, cfg: Config, phase: str | None, force: bool,
               progress: Progress) -> list[dict]:
    """Run one stage for every selected phase, under the lock, interruptibly."""
    with _interruptible(cfg) as step:
        work = _prepare(cfg, progress)
        with _work_folder(work, progress):
            done = []
            for p in work.phases(phase):
                done.append(step(f"{stage} {p.name!r}", run_one, work, p, force=force, progress=progress))
                _report(progress, f"{stage} {p.name}", done[-1])
            return done


def ingest(cfg: Config, *, phase: str | None = None, force: bool = False, progress: Progress) -> list[dict]:
    from .ingest import run_ingest

    return _per_phase("ingest", run_ingest, cfg, phase, force, progress)


def train(cfg: Config, *, phase: str | None = None, force: bool = False, progress: Progress) -> list[dict]:
    from .train import run_train

    return _per_phase("train", run_train, cfg, phase, force, progress)


def export(cfg: Config, *, force: bool = False, hf: bool = False, progress: Progress) -> dict:
    if hf:
        cfg = dataclasses.replace(cfg, export_hf=True)
    with _interruptible(cfg) as step:
        work = _prepare(cfg, progress)
        with _work_folder(work, progress):
            with output_locked(work):
                manifest = step("export", _export, work, force=force, progress=progress)
            _report(progress, "export", manifest)
            return manifest


def run(cfg: Config, *, force: bool = False, progress: Progress) -> dict[str, Any]:
    """The whole pipeline; returns the manifests of every stage."""
    from .ingest import run_ingest
    from .train import run_train

    with _interruptible(cfg) as step:
        work = _prepare(cfg, progress)
        with _work_folder(work, progress):
            phases = work.phases()
            ingested = [step(f"ingest {p.name!r}", run_ingest, work, p, force=force, progress=progress)
                        for p in phases]
            for p, m in zip(phases, ingested):
                _report(progress, f"ingest {p.name}", m)
            trained = []
            for p in phases:
                trained.append(step(f"train {p.name!r}", run_train, work, p, force=force, progress=progress))
                _report(progress, f"train {p.name}", trained[-1])
            with output_locked(work):
                exported = step("export", _export, work, force=force, progress=progress)
            _report(progress, "export", exported)
            return {"ingest": ingested, "train": trained, "export": exported}


def summary(cfg: Config, result: dict[str, Any]) -> str:
    """A few lines for the user at the end of a run."""
    from .workdir.progress import human_bytes

    export = result["export"]["counts"]
    size = export["vocab_size"]
    exact = " = vocab_size" if cfg.vocab_size is not None else ""
    lines = [f"{_written(result)} {cfg.output}: vocabulary size {size}{exact} (ids 0..{size - 1}: "
             f"{export['mergeable_ranks']} ranks + {export['special_tokens']} special tokens)"]
    for phase, ing, tr in zip(cfg.phases, result["ingest"], result["train"]):
        c, t = ing["counts"], tr["counts"]
        lines.append(f"  {phase.name}: {c['files']} files, {c['documents']} documents, {human_bytes(c['bytes_read'])}, "
                     f"{t['distinct_pieces']} distinct pieces, {t['merges_made']}/{t['merges_requested']} merges"
                     + (" (skipped: up to date)" if tr.get("skipped") else ""))
        found = {t: n for t, n in c.get("special_tokens_found", {}).items() if n}
        if found:
            lines.append("    special tokens cut out of its text: "
                         + ", ".join(f"{t} {n} times" for t, n in found.items()))
        if c.get("bad_files"):
            lines.append(f"    skipped {len(c['bad_files'])} bad files (listed in the ingest manifest)")
        if c.get("recoded_files"):
            lines.append(f"    {c['recoded_files']} files read as UTF-16/UTF-32 (their byte order mark)")
    short = sum(t["counts"]["merges_requested"] - t["counts"]["merges_made"] for t in result["train"])
    if short:
        lines.append(f"  warning: phases made {short} merges fewer than asked: the vocabulary size is {size}, "
                     f"not {size + short} (special token ids moved down by {short})")
    lines.append(f"  checked with tiktoken: {export['pieces_checked_with_tiktoken']} pieces, "
                 f"{export['pieces_differing_from_tiktoken']} differ; round trip ok")
    hf = result["export"].get("hf")
    if hf:
        lines.append(f"  Hugging Face: {hf['folder']}/ ({hf_roles_line(hf)})")
    return "\n".join(lines)


def _written(result: dict[str, Any]) -> str:
    """How a run's summary starts: ``wrote``, or, for an output export found current,
    ``up to date, nothing written:`` (every stage skipped) or ``up to date, not rewritten:``
    (an earlier stage was redone, to the same merges)."""
    if not result["export"].get("skipped"):
        return "wrote"
    stages = result["ingest"] + result["train"]
    return "up to date, " + ("nothing written:" if all(m.get("skipped") for m in stages) else "not rewritten:")


def hf_roles_line(hf: dict[str, Any]) -> str:
    """Which special token got which role, e.g. ``bos_token and eos_token <|endoftext|> (1419), no pad_token``."""
    by_token: dict[str, list[str]] = {}
    for role, entry in hf["roles"].items():
        by_token.setdefault(f"{entry['token']} ({entry['id']})", []).append(role)
    parts = [f"{' and '.join(roles)} {token}" for token, roles in by_token.items()]
    if "pad_token" not in hf["roles"]:
        parts.append("no pad_token: padding=True fails; declare <|pad|> or set hf.pad_token")
    if hf.get("chat_template"):
        parts.append("chat template")
    return "; ".join(parts) or "no roles"


# --- the whole pipeline from Python (what ``toktoktok.train(config=..., output=...)`` did) ---------

def train_config(config: str | os.PathLike[str], *, verbose: bool = False) -> Any:
    """Run a YAML config as ``toktok run -c CONFIG`` does and return its tokenizer
    (a ``tiktoken.Encoding``). A configuration problem is a ``ValueError``.

    This replaces ``toktoktok.train(config=PATH)``: the library trains in
    memory and never runs the pipeline.
    """
    from toktoktok.config import load_config
    from toktoktok.loading import load

    try:
        cfg = load_config(Path(config))
        if verbose:
            cfg = dataclasses.replace(cfg, verbose=True)
        run(cfg, progress=Progress(verbose=cfg.verbose))
    except ConfigError as exc:
        raise UsageError(str(exc)) from exc
    return load(cfg.output)


def train_texts(texts: Any, *, output: str | os.PathLike[str], merges: int, special_tokens: Any = (),
                **options: Any) -> Any:
    """Train on in-memory documents through the whole pipeline, keeping every
    output at ``output`` (the ``.tiktoken``, its ``.meta.json``, the reports and
    the work folder beside it), and return the tokenizer.

    This replaces ``toktoktok.train(texts, output=PATH, ...)``. The documents
    are written, streamed, to ``NAME.input/texts.jsonl`` beside the output (one
    ``{"text": ...}`` a line, ASCII-escaped so lone surrogates survive as
    U+FFFD), with the config beside them (``NAME.input/config.yaml``); ``options`` are top-level config
    options (``hardcoded_merges``, ``heldout_share``, ``pattern``, ...). The arguments
    are checked before anything is written (``UsageError``), and a call that fails
    leaves no ``NAME.input/`` it made.
    """
    import json
    import shutil

    import yaml

    from toktoktok.config import TOP_KEYS, check_settings

    out = Path(output).expanduser().absolute()
    folder = out.with_name(out.name.removesuffix(".tiktoken") + ".input")
    data, config_file = folder / "texts.jsonl", folder / "config.yaml"
    for key in options:
        if key not in TOP_KEYS or key in ("phases", "output", "special_tokens"):
            raise UsageError(f"train_texts(): {key!r} is not an option here")
    if not out.name.endswith(".tiktoken") or out.name == ".tiktoken" or out.is_dir():
        raise UsageError(f"train_texts(): output must be a file name ending in .tiktoken, got {str(output)!r}")
    if isinstance(merges, bool) or not isinstance(merges, int) or merges < 1:
        raise UsageError(f"train_texts(): merges must be an integer >= 1, got {merges!r}")
    if isinstance(special_tokens, str):
        raise UsageError(f"train_texts(): special_tokens must be a list of strings, got one string {special_tokens!r}")
    doc: dict[str, Any] = {"output": str(out), **options}
    if isinstance(doc.get("warm_start"), (str, os.PathLike)):
        doc["warm_start"] = {"file": doc["warm_start"]}
    if isinstance(doc.get("warm_start"), dict) and isinstance(doc["warm_start"].get("file"), (str, os.PathLike)):
        doc["warm_start"] = {**doc["warm_start"], "file": str(Path(doc["warm_start"]["file"]).expanduser().absolute())}
    if special_tokens:
        doc["special_tokens"] = list(special_tokens)
    try:
        check_settings({k: v for k, v in doc.items() if k != "output"}, where="train_texts()")
    except ConfigError as exc:
        raise UsageError(str(exc)) from None
    doc["phases"] = [{"name": "train", "merges": merges, "sources": [{"file": str(data)}]}]
    made = not folder.exists()
    folder.mkdir(parents=True, exist_ok=True)
    try:
        with open(data, "w", encoding="ascii") as fh:
            for count, text in enumerate(texts):
                if not isinstance(text, str):
                    raise TypeError(f"train_texts(): texts[{count}] is {type(text).__name__}, expected a string")
                fh.write(json.dumps({"text": text}, ensure_ascii=True) + "\n")
        config_file.write_text(yaml.safe_dump(doc, allow_unicode=True, sort_keys=False), encoding="utf-8")
        return train_config(config_file)
    except BaseException:
        if made:  # refused or failed: the folder this call made goes with it
            shutil.rmtree(folder, ignore_errors=True)
        raise
