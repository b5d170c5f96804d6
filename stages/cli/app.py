"""The command line: ``toktok run|ingest|train|export|plan|...`` and ``toktoktok -c CFG``.

The click commands, each a thin layer over the pipeline (``pipeline``) or a
user command (``commands``): their options and help texts, and what they
print. The options several commands share and the loading of a config or a
tokenizer are in ``options``; how a command ends (one line and an exit code,
docs/cli.md) is ``guard``'s.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

import toktoktok

from .. import pipeline
from ..workdir.progress import Progress, human_bytes
from .compile_ahead import compile_kernels, ensure_compiled
from .guard import guarded, start
from .options import (
    check_pattern,
    config_of,
    config_options,
    engine_option,
    force_option,
    phase_option,
    tokenizer_of,
    tokenizer_options,
)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(toktoktok.__version__, prog_name="toktoktok")
def toktok() -> None:
    """Train byte-level BPE tokenizers for tiktoken, phase by phase.

    Stages write their artifacts under the config's work_dir (default
    OUTPUT_NAME.work/ beside the output); a stage whose inputs did not change
    is skipped.
    """


@toktok.command()
@config_options
@force_option
@engine_option
def run(config: Path, verbose: bool, force: bool, engine: str | None) -> None:
    """The whole pipeline: ingest, train and export every phase.

    Reads the config's sources; writes WORK/ingest/, WORK/train/, WORK/export/
    and the outputs OUTPUT.tiktoken and OUTPUT.meta.json.
    """
    cfg, progress = config_of(config, verbose, engine)
    guarded(ensure_compiled, verbose)
    result = guarded(lambda: pipeline.run(cfg, force=force, progress=progress), verbose, writes=True)
    click.echo(pipeline.summary(cfg, result))


@toktok.command()
@config_options
@phase_option
@force_option
@engine_option
def ingest(config: Path, verbose: bool, phase: str | None, force: bool, engine: str | None) -> None:
    """Read, pre-tokenize and count each phase's sources.

    Reads the sources; writes WORK/ingest/NN-slug/chunk-*.arrow (piece,
    count), heldout.arrow (text) and manifest.json.
    """
    cfg, progress = config_of(config, verbose, engine)
    guarded(ensure_compiled, verbose)
    done = guarded(lambda: pipeline.ingest(cfg, phase=phase, force=force, progress=progress), verbose, writes=True)
    for m in done:
        c = m["counts"]
        click.echo(f"ingest {m['phase']}: {c['documents']} documents, {human_bytes(c['bytes_read'])}, "
                   f"{c['pieces']} pieces in {c['chunks']} chunks" + (" (up to date)" if m.get("skipped") else ""))


@toktok.command()
@config_options
@phase_option
@force_option
def train(config: Path, verbose: bool, phase: str | None, force: bool) -> None:
    """Learn each phase's merges on top of the phases before it.

    Reads WORK/ingest/NN-slug/chunk-*.arrow and earlier phases' merges; writes
    WORK/train/NN-slug/merges.arrow (rank, left, right, bytes, count) and
    manifest.json.
    """
    cfg, progress = config_of(config, verbose)
    guarded(ensure_compiled, verbose)
    done = guarded(lambda: pipeline.train(cfg, phase=phase, force=force, progress=progress), verbose, writes=True)
    for m in done:
        c = m["counts"]
        click.echo(f"train {m['phase']}: {c['merges_made']}/{c['merges_requested']} merges, "
                   f"vocabulary {c['vocab_size_after']}" + (" (up to date)" if m.get("skipped") else ""))


@toktok.command("compile")
@click.option("-q", "--quiet", is_flag=True, help="Print nothing (how run, ingest and train call it).")
@click.option("-v", "--verbose", is_flag=True, help="Tracebacks on errors.")
def compile_command(quiet: bool, verbose: bool) -> None:
    """Compile every numba kernel into numba's cache, so the next run starts warm.

    Reads no config: runs tiny inputs of every source kind, and
    toktoktok.train, in a temporary folder; writes only numba's cache
    (__pycache__ beside the package's sources, or $NUMBA_CACHE_DIR) and prints
    what it compiled. run, ingest and train do this first when the cache is cold.
    """
    import resource
    import time

    began = time.monotonic()
    compiled, loaded = guarded(compile_kernels, verbose)
    if not quiet:
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        click.echo(f"compiled {compiled} kernel signatures, loaded {loaded} from numba's cache, "
                   f"in {time.monotonic() - began:.1f} s (peak {peak:.0f} MiB)")


@toktok.command()
@config_options
@force_option
@click.option("--hf", is_flag=True, help="Also write the Hugging Face export OUTPUT_NAME.hf/ (as export_hf: true).")
def export(config: Path, verbose: bool, force: bool, hf: bool) -> None:
    """Write and validate the .tiktoken file and its companion.

    Reads WORK/train/*/merges.arrow (and WORK/ingest/ for validation); writes
    OUTPUT.tiktoken, OUTPUT.meta.json, with --hf (or export_hf: true)
    OUTPUT_NAME.hf/tokenizer.json and its companions, and
    WORK/export/manifest.json.
    """
    cfg, progress = config_of(config, verbose)
    m = guarded(lambda: pipeline.export(cfg, force=force, hf=hf, progress=progress), verbose, writes=True)
    c = m["counts"]
    click.echo(f"export: {'up to date, nothing written: ' if m.get('skipped') else ''}{cfg.output} "
               f"({c['vocab_size']} tokens; {c['pieces_differing_from_tiktoken']} of "
               f"{c['pieces_checked_with_tiktoken']} pieces differ from tiktoken)")
    if m.get("hf"):
        click.echo(f"export: {m['hf']['folder']}/ ({pipeline.hf_roles_line(m['hf'])})")


@toktok.command()
@config_options
@click.option("--json", "as_json", is_flag=True, help="Print the plan as one JSON object (sizes in bytes).")
def plan(config: Path, verbose: bool, as_json: bool) -> None:
    """Show what a run would do, before any work starts.

    Reads the config and its sources (compressed files are decompressed as a
    stream to measure their text). Writes nothing: no output or work folder,
    no lock. Prints the effective configuration as YAML, a config that loads
    as it is (defaults filled in, paths absolute); the id layout (bytes, hardcoded merges or the warm
    start's base, each phase, special tokens, padding: first and last id of
    each); per phase, its files with format, size on disk and
    text bytes, the totals, whether the phase will be sampled and at what
    share, and its expected peak memory; then the run's expected peak memory.
    """
    import json

    from ..commands import plan as planning

    cfg, _ = config_of(config, verbose)
    result = guarded(lambda: planning.make_plan(cfg), verbose)
    for warning in result["warnings"]:
        click.echo(f"warning: {warning}", err=True)
    click.echo(json.dumps(result, indent=2, ensure_ascii=False) if as_json else planning.render(result))


@toktok.command()
@click.argument("path", required=False, type=click.Path(path_type=Path))
@click.option("-c", "--config", "config", type=click.Path(path_type=Path), default=None,
              help="Inspect this config's output .tiktoken (instead of PATH).")
@click.option("--top", type=click.IntRange(min=1), default=20, show_default=True, help="Rows in each table.")
@click.option("--search", default=None, metavar="TEXT",
              help=r"Tokens (pieces, merges) containing TEXT; bytes may be written as \xNN escapes.")
@click.option("--id", "token_id", type=int, default=None, metavar="N",
              help="Show token N of a .tiktoken (or merge N of a merges file) decoded.")
@click.option("-v", "--verbose", is_flag=True, help="Tracebacks on errors.")
def inspect(path: Path | None, config: Path | None, top: int, search: str | None, token_id: int | None,
            verbose: bool) -> None:
    """Print a readable summary of an artifact or output.

    Reads PATH: an ingest chunk file (WORK/ingest/NN-slug/chunk-*.arrow) or
    phase folder, heldout.arrow, a merges file (WORK/train/NN-slug/merges.arrow),
    a .tiktoken (with its .meta.json), or a NAME.report.json; with -c, the
    config's output .tiktoken. Writes nothing; prints tables: top pieces
    and counts, merges with counts and phase, the vocabulary size breakdown
    and longest tokens, token search (--search) and a decoded token (--id).
    """
    from ..commands.inspect import inspect_path, path_or_output

    path = guarded(lambda: path_or_output(path, config, "PATH"), verbose)
    click.echo(guarded(lambda: inspect_path(path, top=top, search=search, token_id=token_id), verbose))


@toktok.command()
@click.argument("inputs", nargs=-1, required=True, type=click.Path(exists=True, allow_dash=True, path_type=Path))
@tokenizer_options
@click.option("-o", "--out", required=True, type=click.Path(file_okay=False, path_type=Path),
              help="The folder for the token files and index.json (new, empty, or an earlier encode output).")
@click.option("--format", "fmt", type=click.Choice(["npy", "bin", "megatron"]), default="npy", show_default=True,
              help="npy: shard-NNNNN.npy + index.json; bin: nanoGPT's train.bin and val.bin; megatron: "
                   "Megatron-LM's train_text_document.bin/.idx (and val_text_document.* with --val-share).")
@click.option("--dtype", type=click.Choice(["uint16", "uint32"]), default=None,
              help="Ids of npy and bin files. bin: uint16 unless given (a vocabulary with an id over 65,535 is "
                   "refused); npy: uint16 when the ids fit, else uint32. megatron: uint16 below 65,500 ids, "
                   "else int32 (not settable).")
@click.option("--separator", default=None, metavar="TOKEN",
              help="A special token of the tokenizer put after every document, e.g. '<|endoftext|>'.")
@click.option("--bos", default=None, metavar="TOKEN",
              help="A special token of the tokenizer put before every document, e.g. '<|bos|>'.")
@click.option("--documents", default=None, metavar="RULE",
              help="How text inputs split into documents: blank-line (after a blank line followed by a non-space "
                   "character), line (every non-empty line, its line break left out), file (the whole file) or "
                   "split-on:STRING (the text between occurrences of STRING). Default: blank-line for .txt and "
                   "standard input, file for text files of other suffixes.")
@click.option("--val-share", type=click.FloatRange(0, 1, max_open=True), default=None, metavar="F",
              help="The share of documents written to the validation split, chosen by a seeded hash of each "
                   "document's place. Default 0.0005 for bin, else 0.")
@click.option("--seed", type=int, default=0, show_default=True, help="The seed of the validation split.")
@click.option("--shard-tokens", type=click.IntRange(min=1), default=100_000_000, show_default=True,
              help="npy: tokens per shard (the last shard holds the rest).")
@click.option("--text-column", default="text", show_default=True, help="The text column of .jsonl and .parquet inputs.")
@click.option("--threads", type=int, default=-1, show_default=True, help="Encoding threads; -1 = all cores.")
@click.option("--allow-special", is_flag=True,
              help="Encode the tokenizer's special tokens written in the text as their ids (default: as text).")
@click.option("--strip", is_flag=True,
              help="Drop each document's trailing white space (Unicode White_Space, the patterns' \\s) before "
                   "its separator (default: the text as read).")
@click.option("-v", "--verbose", is_flag=True, help="A progress line in logs, tracebacks on errors.")
def encode(inputs: tuple[Path, ...], tokenizer: str | None, config: Path | None, pattern: str | None, out: Path,
           fmt: str, dtype: str | None, separator: str | None, bos: str | None, documents: str | None,
           val_share: float | None, seed: int, shard_tokens: int, text_column: str, threads: int,
           allow_special: bool, strip: bool, verbose: bool) -> None:
    """Encode text into token files for model training.

    Reads INPUTS (files: .txt, .jsonl, .parquet, .arrow, .txt/.jsonl as .zst
    or .gz, any other file as text; folders: the files of those suffixes;
    documents as in a config's sources, text files by --documents;
    - is standard input, read as text) and the tokenizer (--tokenizer, or -c
    for the config's output). Writes, in OUT, --format npy: shard-NNNNN.npy
    (--shard-tokens tokens each; val-shard-NNNNN.npy for the validation
    split); bin: train.bin and val.bin (raw ids, as nanoGPT reads them) and
    nanoGPT's meta.pkl (its vocab_size); megatron: train_text_document.bin/.idx
    (Megatron-LM's indexed dataset, one sequence per document) and
    val_text_document.bin/.idx with --val-share. Every file is written
    under a temporary name and renamed when complete, indexes after their
    data, OUT/index.json (what was written: files, documents, tokens, bytes)
    last. Prints the tokens, bytes and bytes per token. Special tokens
    written in the text are encoded as ordinary text unless --allow-special.
    """
    from ..commands import encode as encoding
    from ..commands.texts import tokenizer_path

    tokenizer = guarded(lambda: tokenizer_path(tokenizer, config), verbose)
    index = guarded(lambda: encoding.encode_corpus(
        tokenizer, list(inputs), out, separator=separator, shard_tokens=shard_tokens, text_column=text_column,
        threads=threads, allow_special=allow_special, pattern=pattern, progress=Progress(verbose=verbose),
        fmt=fmt, dtype=dtype, bos=bos, val_share=val_share, seed=seed, documents=documents, strip=strip),
        verbose, writes=True)
    click.echo(encoding.summary(index, out))


@toktok.command()
@click.argument("ids", nargs=-1)
@tokenizer_options
@click.option("--from", "source", type=click.Path(dir_okay=False, path_type=Path), default=None, metavar="FILE",
              help="Decode a token file instead of IDS: a .npy shard, a nanoGPT .bin, or a Megatron-LM .bin "
                   "(with its .idx beside it).")
@click.option("--dtype", type=click.Choice(["uint16", "uint32", "int32"]), default=None,
              help="The ids of a nanoGPT .bin (default uint16).")
@click.option("--document", type=click.IntRange(min=0), default=None, metavar="N",
              help="Only document N (0-based) of a Megatron-LM file.")
@click.option("--bytes", "raw", is_flag=True, help="Write the raw bytes to standard output (no replacement, no "
                                                     "newline added).")
@click.option("-v", "--verbose", is_flag=True, help="Tracebacks on errors.")
def decode(ids: tuple[str, ...], tokenizer: str | None, config: Path | None, pattern: str | None,
           source: Path | None, dtype: str | None, document: int | None, raw: bool, verbose: bool) -> None:
    """Turn token ids back into text.

    Reads the tokenizer (--tokenizer, or -c for the config's output) and the
    ids: IDS as arguments (15496 995, or a pasted list [15496, 995]), or
    --from FILE written by `toktok encode`. Writes nothing; prints the text
    (bytes that are not UTF-8 as U+FFFD), or with --bytes writes its raw
    bytes. Special tokens print as their text.
    """
    from ..commands import decode as decoding

    if (source is None) == (not ids):
        guarded(lambda: decoding.refuse("give the ids as arguments or --from FILE (one of them)"), verbose)
    enc = tokenizer_of(tokenizer, config, pattern, verbose)
    if source is not None:
        values = guarded(lambda: decoding.ids_of_file(source, dtype=dtype, document=document), verbose)
    else:
        if dtype is not None or document is not None:
            guarded(lambda: decoding.refuse("--dtype and --document are for --from FILE"), verbose)
        values = guarded(lambda: decoding.parse_ids(ids), verbose)
    data = guarded(lambda: decoding.decode_ids(enc, values), verbose)
    if raw:
        sys.stdout.flush()
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
    else:
        click.echo(data.decode("utf-8", "replace"))


@toktok.command()
@click.argument("text", required=False)
@tokenizer_options
@click.option("--color", type=click.Choice(["auto", "always", "never"]), default="auto", show_default=True,
              help="Alternating background colours for the tokens (auto: when standard output is a terminal "
                   "and NO_COLOR is not set); without colour each token is in [brackets].")
@click.option("--dots", is_flag=True, help="Show each space as a middle dot (·).")
@click.option("--allow-special", is_flag=True,
              help="Encode the tokenizer's special tokens written in the text as their ids (default: as text).")
@click.option("-v", "--verbose", is_flag=True, help="Tracebacks on errors.")
def show(text: str | None, tokenizer: str | None, config: Path | None, pattern: str | None, color: str,
         dots: bool, allow_special: bool, verbose: bool) -> None:
    """Show how the tokenizer cuts a text: token boundaries and ids.

    Reads TEXT (an argument; - or nothing reads standard input as UTF-8) and
    the tokenizer (--tokenizer, or -c for the config's output). Writes
    nothing; prints the text with each token marked (coloured on a terminal,
    [bracketed] otherwise; a line break in a token as \\n, a backslash as
    \\\\, other control characters and bytes that are not UTF-8 on their own
    as \\xNN), then the ids and the counts.
    """
    import os

    from ..commands import show as showing

    enc = tokenizer_of(tokenizer, config, pattern, verbose)
    if text is None or text == "-":
        text = sys.stdin.buffer.read().decode("utf-8", "replace")
    ids = showing.encode_text(enc, text, allow_special=allow_special)
    coloured = color == "always" or (color == "auto" and sys.stdout.isatty() and not os.environ.get("NO_COLOR"))
    click.echo(showing.render(enc, ids, color=coloured, dots=dots), color=coloured)


@toktok.command()
@click.argument("tokenizers", nargs=-1)
@click.option("--text", "texts", multiple=True, required=True, type=click.Path(exists=True, path_type=Path),
              help="A text file or folder to measure on; repeat for several (one row each).")
@click.option("-c", "--config", "configs", multiple=True, type=click.Path(path_type=Path),
              help="Also compare this config's output .tiktoken; repeatable.")
@click.option("--pattern", default=None, callback=check_pattern,
              help="Pattern for a .tiktoken without .meta.json: a name (cl100k, o200k, gpt2, default, each also "
                   "NAME-digits) or a regex (default: cl100k_base's and o200k_base's own, else the default pattern).")
@click.option("--text-column", default="text", show_default=True, help="The text column of .jsonl and .parquet texts.")
@click.option("--threads", type=int, default=-1, show_default=True, help="Encoding threads; -1 = all cores.")
@click.option("-v", "--verbose", is_flag=True, help="A progress line in logs, tracebacks on errors.")
def compare(tokenizers: tuple[str, ...], texts: tuple[Path, ...], configs: tuple[Path, ...], pattern: str | None,
            text_column: str, threads: int, verbose: bool) -> None:
    """Compare tokenizers' compression on the same texts.

    Reads each TOKENIZER (a .tiktoken, e.g. cl100k_base.tiktoken.gz, with the
    pattern of its .meta.json, else --pattern, else its own for OpenAI's
    cl100k_base and o200k_base, else the default; a tokenizer.json or NAME.hf/
    folder, with its pre-tokenizer's pattern; a config; a stock name such as
    cl100k_base, from tiktoken's cache) and the --text files or folders. Writes nothing; prints UTF-8 bytes per token of each
    tokenizer on each text, side by side (higher is better).
    """
    from ..commands import compare as comparing
    from ..commands.inspect import config_output
    from ..commands.texts import tokenizer_path

    paths = [guarded(lambda t=t: tokenizer_path(t), verbose) for t in tokenizers]
    paths += [guarded(lambda c=c: config_output(c), verbose) for c in configs]
    result = guarded(lambda: comparing.compare(paths, list(texts), pattern=pattern, text_column=text_column,
                                                threads=threads, progress=Progress(verbose=verbose)), verbose)
    click.echo(comparing.render(result))


@toktok.command()
@config_options
@click.option("-y", "--yes", is_flag=True, help="Do not ask for confirmation.")
def clean(config: Path, verbose: bool, yes: bool) -> None:
    """Remove the config's work directory (all stage artifacts).

    Reads the config (its work_dir, default OUTPUT_NAME.work/); removes that
    folder only if it holds nothing but ingest/, train/, export/ and .lock,
    after asking (unless --yes). The outputs (.tiktoken, .meta.json, reports)
    are kept; the lock file beside them (.NAME.lock) that a killed export
    left is removed, a held one never. Prints what was removed.
    """
    from ..commands.clean import remove_output_lock, remove_work_dir, work_dir_contents
    from ..commands.inspect import refuse
    from ..workdir import Work

    cfg, _ = config_of(config, verbose)
    work = cfg.work_dir
    if not work.exists():
        click.echo(f"nothing to clean: {work} does not exist")
        if note := remove_output_lock(Work(cfg)):
            click.echo(note)
        return
    files, size = guarded(lambda: work_dir_contents(work), verbose)
    if not yes:
        try:
            confirmed = click.confirm(f"remove {work} ({files} files, {human_bytes(size)})?", default=False)
        except click.Abort:
            guarded(lambda: refuse(f"no answer to the confirmation; nothing removed (use --yes to remove {work})"),
                     verbose)
        if not confirmed:
            click.echo(f"kept {work}")
            return
    from ..workdir import Work

    guarded(lambda: remove_work_dir(Work(cfg)), verbose, writes=True)
    click.echo(f"removed {work} ({files} files, {human_bytes(size)})")
    if note := remove_output_lock(Work(cfg)):
        click.echo(note)


def main() -> None:
    """Entry point of ``toktok``."""
    start(toktok, "toktok")


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@config_options
@force_option
@click.version_option(toktoktok.__version__, prog_name="toktoktok")
def _legacy(config: Path, verbose: bool, force: bool) -> None:
    """Run the whole pipeline (the original command; same as `toktok run -c CFG`)."""
    run.callback(config=config, verbose=verbose, force=force, engine=None)


def legacy_main() -> None:
    """Entry point of ``toktoktok``."""
    start(_legacy, "toktoktok")
