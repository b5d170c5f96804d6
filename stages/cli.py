"""The command line: ``toktok run|ingest|train|export`` and ``toktoktok -c CFG``.

Exit codes (SPEC §7b): 0 done (warnings allowed), 1 a data or runtime
failure, 2 a usage or configuration error, 130 interrupted. Errors are one
line on stderr; ``--verbose`` adds the Python traceback.
"""

from __future__ import annotations

import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

import toktoktok
from stages import pipeline
from stages.progress import Progress

CONFIG_HELP = "the YAML configuration (SPEC §2)"


def _fail(message: str, code: int, verbose: bool) -> None:
    if verbose:
        traceback.print_exc()
    click.echo(f"error: {message}", err=True)
    sys.exit(code)


def _guarded(action: Callable[[], Any], verbose: bool) -> Any:
    """Run ``action`` and turn every failure into a message and an exit code."""
    from stages.export import ExportError
    from stages.train import MissingInput
    from toktoktok.config import ConfigError
    from toktoktok.sources import SourceError

    try:
        return action()
    except ConfigError as exc:
        _fail(str(exc), 2, verbose)
    except KeyboardInterrupt:
        click.echo("\ninterrupted: finished stages are kept, an unfinished one is redone on the next run",
                   err=True)
        sys.exit(130)
    except (MissingInput, SourceError, ExportError, OverflowError, RuntimeError, OSError, ValueError) as exc:
        _fail(str(exc), 1, verbose)
    except Exception as exc:  # noqa: BLE001 - a last resort, with the type for a bug report
        _fail(f"unexpected {type(exc).__name__}: {exc} (rerun with --verbose for the traceback)", 1, verbose)


def _load(config: Path, verbose: bool):
    from toktoktok.config import load_config

    cfg = _guarded(lambda: load_config(config), verbose)
    return cfg, Progress(verbose=verbose or cfg.verbose)


def _options(func: Callable) -> Callable:
    func = click.option("-v", "--verbose", is_flag=True, help="Progress lines in logs, tracebacks on errors.")(func)
    func = click.option("-c", "--config", "config", required=True, type=click.Path(path_type=Path),
                        help=CONFIG_HELP)(func)
    return func


def _force(func: Callable) -> Callable:
    return click.option("--force", is_flag=True, help="Redo the work even if its artifacts are up to date.")(func)


def _phase(func: Callable) -> Callable:
    return click.option("--phase", default=None, help="Only this phase (its name, or its NN-slug).")(func)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(toktoktok.__version__, prog_name="toktoktok")
def toktok() -> None:
    """Train byte-level BPE tokenizers for tiktoken, phase by phase.

    Stages write their artifacts under the config's work_dir (default
    OUTPUT_NAME.work/ beside the output); a stage whose inputs did not change
    is skipped.
    """


@toktok.command()
@_options
@_force
def run(config: Path, verbose: bool, force: bool) -> None:
    """The whole pipeline: ingest, train and export every phase.

    Reads the config's sources; writes WORK/ingest/, WORK/train/, WORK/export/
    and the outputs OUTPUT.tiktoken and OUTPUT.meta.json.
    """
    cfg, progress = _load(config, verbose)
    result = _guarded(lambda: pipeline.run(cfg, force=force, progress=progress), verbose)
    click.echo(pipeline.summary(cfg, result))


@toktok.command()
@_options
@_phase
@_force
def ingest(config: Path, verbose: bool, phase: str | None, force: bool) -> None:
    """Read, pre-tokenize and count each phase's sources.

    Reads the sources; writes WORK/ingest/NN-slug/chunk-*.arrow (piece,
    count), heldout.arrow (text) and manifest.json.
    """
    cfg, progress = _load(config, verbose)
    done = _guarded(lambda: pipeline.ingest(cfg, phase=phase, force=force, progress=progress), verbose)
    for m in done:
        c = m["counts"]
        click.echo(f"ingest {m['phase']}: {c['documents']} documents, {c['bytes_read'] / 1e6:.1f} MB, "
                   f"{c['pieces']} pieces in {c['chunks']} chunks" + (" (up to date)" if m.get("skipped") else ""))


@toktok.command()
@_options
@_phase
@_force
def train(config: Path, verbose: bool, phase: str | None, force: bool) -> None:
    """Learn each phase's merges on top of the phases before it.

    Reads WORK/ingest/NN-slug/chunk-*.arrow and earlier phases' merges; writes
    WORK/train/NN-slug/merges.arrow (rank, left, right, bytes, count) and
    manifest.json.
    """
    cfg, progress = _load(config, verbose)
    done = _guarded(lambda: pipeline.train(cfg, phase=phase, force=force, progress=progress), verbose)
    for m in done:
        c = m["counts"]
        click.echo(f"train {m['phase']}: {c['merges_made']}/{c['merges_requested']} merges, "
                   f"vocabulary {c['vocab_size_after']}" + (" (up to date)" if m.get("skipped") else ""))


@toktok.command()
@_options
@_force
@click.option("--hf", is_flag=True, help="Also write the Hugging Face export OUTPUT_NAME.hf/ (as export_hf: true).")
def export(config: Path, verbose: bool, force: bool, hf: bool) -> None:
    """Write and validate the .tiktoken file and its companion.

    Reads WORK/train/*/merges.arrow (and WORK/ingest/ for validation); writes
    OUTPUT.tiktoken, OUTPUT.meta.json, with --hf (or export_hf: true)
    OUTPUT_NAME.hf/tokenizer.json and its companions, and
    WORK/export/manifest.json.
    """
    cfg, progress = _load(config, verbose)
    m = _guarded(lambda: pipeline.export(cfg, force=force, hf=hf, progress=progress), verbose)
    c = m["counts"]
    click.echo(f"export: {cfg.output} ({c['vocab_size']} tokens; {c['pieces_differing_from_tiktoken']} of "
               f"{c['pieces_checked_with_tiktoken']} pieces differ from tiktoken)"
               + (" (up to date)" if m.get("skipped") else ""))


def main() -> None:
    """Entry point of ``toktok``."""
    toktok(prog_name="toktok")


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@_options
@_force
@click.version_option(toktoktok.__version__, prog_name="toktoktok")
def _legacy(config: Path, verbose: bool, force: bool) -> None:
    """Run the whole pipeline (the original command; same as `toktok run -c CFG`)."""
    run.callback(config=config, verbose=verbose, force=force)


def legacy_main() -> None:
    """Entry point of ``toktoktok``."""
    _legacy(prog_name="toktoktok")
