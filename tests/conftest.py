"""Shared helpers for the end-to-end tests (test_pipeline.py, test_cli.py).

Everything here is written from the docs, not from the code under test: the
vocabulary layout (docs/vocabulary.md), the .txt document rule (docs/pretokenization.md), the piece counts
(``regex.findall`` over each document after cutting out special tokens) and
the reading of a finished work directory.

Corpora: real text from ``/work/shared/data`` (tinyshakespeare, the
multilingual samples) when that folder exists; otherwise the docstrings and
source code of Python's own standard library, so the tests never depend on a
download.
"""

from __future__ import annotations

import base64
import binascii
import functools
import gzip
import hashlib
import inspect
import json
import os
import signal
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import regex
import tiktoken
import yaml

from tests.helpers import SHARED

# Nothing is ever fetched from a model hub: transformers loads only the folders the tests write.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

SHARED_DATA = SHARED / "data"


def pytest_sessionstart(session: pytest.Session) -> None:
    """numba's cache warmed once, before any test, if it is cold: ``toktok run`` on a
    cold cache prints what it compiles first (docs/cli.md, "Compiling, once"), which a
    test reading a command's stderr would otherwise see in whichever test runs first."""
    from toktoktok import jit_cache

    # a non-interactive shell starts its background jobs with Ctrl-C ignored, and the
    # commands keep an ignored Ctrl-C ignored: the interrupt tests need it delivered
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if jit_cache.cold_kernels():
        subprocess.run([str(Path(sys.executable).parent / "toktok"), "compile", "--quiet"], check=True)
BIN = Path(sys.executable).parent
TOKTOK = BIN / "toktok"
TOKTOKTOK = BIN / "toktoktok"

SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]

# docs/pretokenization.md, written out here rather than imported, so a change in the code shows.
SPEC_PATTERN = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"""
    r""" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
)



# ---------------------------------------------------------------- corpora


def have_shared() -> bool:
    return (SHARED_DATA / "tinyshakespeare.txt").is_file()


@functools.cache
def _stdlib_docstrings() -> str:
    """Docstrings of a few standard library modules, separated by blank lines."""
    import argparse
    import collections
    import email.message
    import json as json_mod
    import pathlib
    import shutil
    import textwrap

    docs: list[str] = []
    for module in (argparse, collections, email.message, json_mod, pathlib, shutil, textwrap):
        for _, obj in [("", module)] + inspect.getmembers(module):
            doc = inspect.getdoc(obj)
            if doc and doc not in docs and str(getattr(obj, "__module__", None) or module.__name__).startswith(module.__name__):
                docs.append(doc)
    return "\n\n".join(docs)


def english_text(chars: int, offset: int = 0) -> str:
    """Real English prose, about ``chars`` characters, ending at a line end."""
    if have_shared():
        text = (SHARED_DATA / "tinyshakespeare.txt").read_text(encoding="utf-8")
    else:
        text = _stdlib_docstrings()
        while len(text) < offset + chars:
            text += "\n\n" + text
    part = text[offset : offset + chars]
    return part[: part.rfind("\n") + 1] or part


_MULTILINGUAL = ("fr.txt", "python.txt", "json.txt", "zh.txt", "hindi.txt")
_FALLBACK_MIXED = {
    "fr.txt": "Le cœur a ses raisons que la raison ne connaît point.\n\nÀ l'école, élèves et maîtres s'écrient : « déjà ! »\n",
    "german.txt": "Grüße aus Köln: Straße, Mädchen, Übermut – „Anführungszeichen“.\n\nZwölf Boxkämpfer jagen Viktor quer über den großen Sylter Deich.\n",
    "zh.txt": "日本語のテキスト、中文文本。我们在这里测试分词器。\n\n今天天气很好，我们去公园散步吧。\n",
    "hindi.txt": "हिन्दी पाठ का एक छोटा उदाहरण। यह एक परीक्षण है।\n\nभारत एक विशाल देश है।\n",
}


def mixed_texts() -> dict[str, str]:
    """Several languages and some code: the multilingual samples or a stdlib stand-in."""
    if (SHARED_DATA / "multilingual").is_dir():
        found = {n: (SHARED_DATA / "multilingual" / n).read_text(encoding="utf-8") for n in _MULTILINGUAL
                 if (SHARED_DATA / "multilingual" / n).is_file()}
        if len(found) >= 3:
            return found
    import json as json_mod
    import textwrap

    out = {name: text * 8 for name, text in _FALLBACK_MIXED.items()}
    out["python.txt"] = inspect.getsource(textwrap)
    out["json.txt"] = inspect.getsource(json_mod)
    return out


def write_corpus(root: Path) -> dict[str, Path]:
    """Two phases' sources under ``root``: ``english/`` and ``mixed/`` (directories).

    english/: two .txt files of prose and a .jsonl of chat-like rows holding
    special tokens; mixed/: the multilingual samples (code included), one of
    them with special tokens inside.
    """
    english = root / "english"
    mixed = root / "mixed"
    english.mkdir(parents=True)
    mixed.mkdir(parents=True)
    prose = english_text(18_000)
    half = prose.find("\n\n", len(prose) // 2) + 2 or len(prose) // 2
    (english / "prose-0.txt").write_text(prose[:half], encoding="utf-8")
    (english / "prose-1.txt").write_text(prose[half:], encoding="utf-8")
    paragraphs = [p for p in english_text(4_000, offset=40_000).split("\n\n") if p.strip()]
    rows = []
    for i in range(0, len(paragraphs) - 1, 2):
        rows.append({"text": f"<|im_start|>user\n{paragraphs[i]}<|im_end|>\n<|im_start|>assistant\n"
                             f"{paragraphs[i + 1]}<|im_end|><|endoftext|>"})
    (english / "chat.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows),
                                        encoding="utf-8")
    # a parquet file: one document per row, a null row is no document
    rows = [p for p in english_text(3_000, offset=50_000).split("\n\n") if p.strip()] + [None]
    pq.write_table(pa.table({"text": pa.array(rows, type=pa.string())}), english / "scenes.parquet")
    texts = sorted(mixed_texts().items())
    for i, (name, text) in enumerate(texts):
        if i == 0:
            text = text.replace("\n\n", "\n\n<|endoftext|>", 3)
        if i == len(texts) - 1:  # compressed sources are read like plain ones
            (mixed / (name + ".gz")).write_bytes(gzip.compress(text.encode("utf-8"), mtime=0))
        else:
            (mixed / name).write_text(text, encoding="utf-8")
    return {"english": english, "mixed": mixed}


# ---------------------------------------------------------------- configs


def write_config(folder: Path, phases: list[dict[str, Any]], **settings: Any) -> Path:
    """A YAML config in ``folder`` (output ``folder/out/tok.tiktoken`` unless given)."""
    folder.mkdir(parents=True, exist_ok=True)
    doc: dict[str, Any] = {"output": str(folder / "out" / "tok.tiktoken")}
    doc.update(settings)
    doc["phases"] = phases
    path = folder / "config.yaml"
    path.write_text(yaml.safe_dump(doc, allow_unicode=True, sort_keys=False), encoding="utf-8")
    return path


def cli_encoding(folder: Path, phases: list[dict[str, Any]], **settings: Any) -> tiktoken.Encoding:
    """``toktok run`` on a config of ``phases`` written in ``folder``; its tokenizer, loaded."""
    import toktoktok

    r = toktok("run", "-c", write_config(folder, phases, **settings))
    assert r.code == 0, r.err
    return toktoktok.load(folder / "out" / "tok.tiktoken")


def same_tokenizer(a: tiktoken.Encoding, b: tiktoken.Encoding) -> None:
    assert a._mergeable_ranks == b._mergeable_ranks
    assert a._special_tokens == b._special_tokens
    assert a._pat_str == b._pat_str


def config_doc(path: Path) -> dict[str, Any]:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def output_of(config: Path) -> Path:
    out = Path(config_doc(config)["output"])
    return out if out.is_absolute() else (config.parent / out).resolve()


def work_of(config: Path) -> Path:
    doc = config_doc(config)
    if doc.get("work_dir"):
        return Path(doc["work_dir"])
    out = output_of(config)
    return out.with_name(out.name.removesuffix(".tiktoken") + ".work")


# ---------------------------------------------------------------- running the CLI


@dataclass
class Run:
    code: int
    out: str
    err: str


def toktok(*args: Any, real: bool = False, legacy: bool = False, cwd: Path | None = None) -> Run:
    """Run ``toktok ARGS`` (``toktoktok ARGS`` if legacy): in-process with click's
    CliRunner, or as the installed entry point in a subprocess when ``real``."""
    argv = [str(a) for a in args]
    if real:
        exe = TOKTOKTOK if legacy else TOKTOK
        env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
        proc = subprocess.run([str(exe), *argv], capture_output=True, text=True, cwd=cwd, env=env, timeout=300)
        return Run(proc.returncode, proc.stdout, proc.stderr)
    from click.testing import CliRunner

    from toktoktok_stages.cli.app import _legacy
    from toktoktok_stages.cli.app import toktok as group

    result = CliRunner().invoke(_legacy if legacy else group, argv, catch_exceptions=False)
    return Run(result.exit_code, result.stdout, result.stderr)


# ---------------------------------------------------------------- docs/vocabulary.md layout


def spec_byte_order() -> list[int]:
    first = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    return first + [b for b in range(256) if b not in set(first)]


def spec_base_tokens(hardcoded: bool = True) -> list[bytes]:
    """Rank order of docs/vocabulary.md: the 256 bytes, then (if on) the 1,161 hardcoded merges."""
    tokens = [bytes([b]) for b in spec_byte_order()]
    if hardcoded:
        tokens += [f"{n:02d}".encode() for n in range(100)]
        tokens += [f"{n:03d}".encode() for n in range(1000)]
        tokens += [b" " * n for n in range(2, 33)]
        tokens += [b"\n" * n for n in range(2, 9)]
        tokens += [b"\r\n"]
        tokens += [op.encode() for op in "== != <= >= += -= *= /= -> => :: // /* */ && || ++ -- << >>".split()]
        tokens += [b"..", b"..."]
    return tokens


def spec_base_ranks(hardcoded: bool = True) -> dict[bytes, int]:
    return {t: r for r, t in enumerate(spec_base_tokens(hardcoded))}


# ---------------------------------------------------------------- documents and pieces

_BREAK = r"(?:\r\n|\r(?!\n)|\n)"
_DOC_END = regex.compile(_BREAK + _BREAK + r"(?=\S)")


def split_txt_documents(text: str) -> list[str]:
    """docs/pretokenization.md: a .txt splits after a blank line followed by a non-white-space character."""
    docs, start = [], 0
    for m in _DOC_END.finditer(text):
        docs.append(text[start : m.end()])
        start = m.end()
    if start < len(text):
        docs.append(text[start:])
    return docs


def read_documents(path: Path, text_column: str = "text") -> list[str]:
    """The documents of one source file, read our own way."""
    name = path.name
    data = path.read_bytes() if not name.endswith(".parquet") else b""
    if name.endswith(".gz"):
        name, data = name[:-3], gzip.decompress(data)
    elif name.endswith(".zst"):
        import zstandard

        name, data = name[:-4], zstandard.ZstdDecompressor().decompressobj().decompress(data)
    if name.endswith(".txt"):
        text = data.decode("utf-8", "replace").removeprefix("\ufeff")
        return split_txt_documents(text)
    if name.endswith(".jsonl"):
        out = []
        for line in data.decode("utf-8").split("\n"):
            if line.strip():
                value = json.loads(line)[text_column]
                if value is not None:
                    out.append(value)
        return out
    if name.endswith(".parquet"):
        return [t for t in pq.read_table(path, columns=[text_column])[text_column].to_pylist() if t is not None]
    raise ValueError(f"no reader for {path}")


def source_files(folder: Path) -> list[Path]:
    suffixes = (".txt", ".jsonl", ".parquet", ".txt.gz", ".txt.zst", ".jsonl.gz", ".jsonl.zst")
    return sorted(p for p in folder.rglob("*") if p.is_file() and p.name.endswith(suffixes))


def cut_specials(text: str, specials: list[str]) -> list[str]:
    """Segments of ``text`` between special tokens (longest token first at a position)."""
    if not specials:
        return [text]
    alternation = "|".join(regex.escape(t) for t in sorted(specials, key=len, reverse=True))
    return [s for s in regex.split(alternation, text) if s]


def piece_counts(documents: list[str], specials: list[str], pattern: str = SPEC_PATTERN) -> Counter[bytes]:
    """``regex.findall(pattern, segment)`` over each document's segments, as UTF-8 bytes."""
    counts: Counter[bytes] = Counter()
    compiled = regex.compile(pattern)
    for doc in documents:
        for segment in cut_specials(doc, specials):
            counts.update(p.encode("utf-8") for p in compiled.findall(segment))
    return counts


def folder_documents(folder: Path) -> list[str]:
    return [d for f in source_files(folder) for d in read_documents(f)]


# ---------------------------------------------------------------- reading artifacts


def read_arrow(path: Path) -> pa.Table:
    with pa.memory_map(str(path)) as src:
        return pa.ipc.open_file(src).read_all()


def ingest_here(folder: Path, sources: list[dict[str, Any]], printed: Any = None,
                **settings: Any) -> tuple[dict[str, Any], Path]:
    """Ingest one phase of ``sources`` in this process (``heldout_share: 0`` unless given,
    so that monkeypatched sizes apply): its manifest and its folder; ``printed``: a
    stream that gets what the stage prints."""
    import io

    from toktoktok.config import load_config
    from toktoktok_stages import ingest, workdir
    from toktoktok_stages.workdir.progress import Progress

    doc = {"output": str(folder / "out" / "tok.tiktoken"), "heldout_share": 0.0,
           "phases": [{"name": "p", "merges": 10, "sources": sources}], **settings}
    folder.mkdir(parents=True, exist_ok=True)
    config = folder / "config.yaml"
    config.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    cfg = load_config(config)
    progress = Progress(stream=printed if printed is not None else io.StringIO())
    manifest = ingest.run_ingest(workdir.Work(cfg), cfg.phases[0], force=True, progress=progress)
    return manifest, workdir.ingest_dir(cfg, cfg.phases[0])


def chunk_counts(phase_dir: Path) -> Counter[bytes]:
    """Summed (piece, count) of every chunk file of an ingest phase folder."""
    total: Counter[bytes] = Counter()
    for chunk in sorted(phase_dir.glob("chunk-*.arrow")):
        t = read_arrow(chunk)
        for piece, count in zip(t["piece"].to_pylist(), t["count"].to_pylist()):
            total[piece] += count
    return total


def merges_rows(path: Path) -> list[tuple[int, int, int, bytes, int]]:
    import polars as pl

    df = pl.read_ipc(path)
    return list(zip(df["rank"].to_list(), df["left"].to_list(), df["right"].to_list(),
                    df["bytes"].to_list(), df["count"].to_list()))


def manifest(folder: Path) -> dict[str, Any]:
    return json.loads((folder / "manifest.json").read_text())


def parse_tiktoken(path: Path) -> list[tuple[bytes, int]]:
    """Strict reading of docs/outputs.md's format: padded base64, one space, decimal rank, \\n."""
    data = path.read_bytes()
    assert data.endswith(b"\n"), "the last line must end with \\n"
    out = []
    for i, line in enumerate(data.split(b"\n")[:-1], 1):
        assert regex.fullmatch(rb"[A-Za-z0-9+/]+={0,2} (0|[1-9][0-9]*)", line), f"line {i}: {line!r}"
        b64, rank = line.split(b" ")
        try:
            token = base64.b64decode(b64, validate=True)
        except binascii.Error as exc:  # pragma: no cover - reported by the assert below
            raise AssertionError(f"line {i}: bad base64 {b64!r}") from exc
        assert base64.b64encode(token) == b64, f"line {i}: not the standard padded base64"
        out.append((token, int(rank)))
    return out


def snapshot(*roots: Path) -> dict[str, tuple[int, str]]:
    """Every file under (or at) the roots: path -> (mtime_ns, sha256 of its bytes)."""
    found: dict[str, tuple[int, str]] = {}
    for root in roots:
        files = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file())
        for f in files:
            if f.name == ".lock":
                continue
            found[str(f)] = (f.stat().st_mtime_ns, hashlib.sha256(f.read_bytes()).hexdigest())
    return found


# ---------------------------------------------------------------- the trainer's replay


def replace_pair(syms: list[int], a: int, b: int, rank: int) -> list[int]:
    """Replace each (a, b) in ``syms``, left to right, by ``rank`` (docs/training.md's merge step)."""
    out, i = [], 0
    while i < len(syms):
        if i + 1 < len(syms) and syms[i] == a and syms[i + 1] == b:
            out.append(rank)
            i += 2
        else:
            out.append(syms[i])
            i += 1
    return out


def replay(piece: bytes, ranks_before: dict[bytes, int], merges: list[tuple[int, int, int, bytes, int]]) -> list[int]:
    """The trainer's final segmentation of ``piece``: tiktoken's segmentation with the
    phase-start vocabulary, then every merge of the phase in order."""
    from toktoktok.segment import segment_reference

    syms = segment_reference(piece, ranks_before)
    for rank, left, right, _, _ in merges:
        if len(syms) < 2:
            break
        if left in syms:
            syms = replace_pair(syms, left, right, rank)
    return syms


# ---------------------------------------------------------------- Ray

# stages.ray_engine.LOCAL_ENV, set now: Ray reads it when imported, and test modules
# import ray when collected (pytest.importorskip), before any fixture runs. Without
# it the tests' instance would listen on every interface (test_ray checks the copy).
RAY_LOCAL_ENV = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "disabled"}
for _key, _value in RAY_LOCAL_ENV.items():
    os.environ.setdefault(_key, _value)


@pytest.fixture(scope="session")
def ray_local():
    """One local Ray instance (2 CPUs) for every Ray test of the session, started
    as the engine starts its own (loopback only, guarded) and shut down at the end:
    the engine uses an instance already initialised in this process and leaves it
    running. Skipped where the ``ray`` extra is not installed."""
    pytest.importorskip("ray")
    from types import SimpleNamespace

    from toktoktok.config import RayOptions
    from toktoktok_stages.ingest.ray_engine import Session

    session = Session(SimpleNamespace(ray=RayOptions(num_cpus=2), working_set_mb=256))
    yield session.ray
    session.close()
