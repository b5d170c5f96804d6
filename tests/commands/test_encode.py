"""``toktok encode --format npy|bin|megatron``, read back by readers
written here from each format's description, not from the code under test:

- nanoGPT's ``train.bin`` / ``val.bin``: raw little-endian ids, no header, what
  ``np.memmap(path, dtype=np.uint16, mode="r")`` reads;
- Megatron-LM's indexed dataset: ``PREFIX.bin`` (raw ids) and ``PREFIX.idx``:
  ``MMIDIDX\\x00\\x00``, version 1 (uint64), dtype code (uint8: 8 uint16, 4 int32),
  sequence count (uint64), document-index entries (uint64), then int32 sizes,
  int64 byte pointers and int64 document indices.

The ids must equal tiktoken's encoding of each document, with ``--bos`` before
and ``--separator`` after it; documents come from the test's own reading of
the inputs (``conftest.split_txt_documents`` for the blank-line rule).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import struct
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest
import tiktoken
from click.testing import CliRunner

from tests.conftest import TOKTOK, english_text, split_txt_documents, toktok
from toktoktok.patterns import NAMED_PATTERNS
from toktoktok.sampling import chosen_many, file_key
from toktoktok.tiktoken_file import write_tiktoken


def chosen(seed: int, slug: str, file_index: int, doc: int, share: float, *, salt: str) -> bool:
    """encode's validation split: document numbers hashed by ``sampling.chosen_many``
    (ingest keys its units by byte offset instead)."""
    return bool(chosen_many(file_key(seed, slug, file_index, salt), doc, 1, share)[0])


EOT, BOS = "<|endoftext|>", "<|bos|>"
MERGES = [b"th", b"he", b"the", b" t", b" the", b"in", b"ng", b"ing", b"er", b"an", b"nd", b" a", b" an", b" and",
          b"ou", b"or", b"is", b"es", b" o", b" of", b"at", b"on", b"en", b"re", b" s", b" w", b"ed", b"to", b" to"]


def make_tokenizer(folder: Path, name: str = "tok", top: int | None = None) -> Path:
    """A .tiktoken (256 bytes + a few merges, or one token at id ``top``) and its
    .meta.json (default pattern, special tokens after the ranks)."""
    folder.mkdir(parents=True, exist_ok=True)
    ranks = {bytes([b]): b for b in range(256)}
    if top is None:
        ranks |= {m: 256 + i for i, m in enumerate(MERGES)}
    else:
        ranks[b"th"] = top
    path = folder / f"{name}.tiktoken"
    write_tiktoken(path, ranks)
    first = max(ranks.values()) + 1
    meta = {"format": "toktoktok-meta/2", "pattern": {"tiktoken": NAMED_PATTERNS["default"].tiktoken},
            "special_tokens": {EOT: first, BOS: first + 1},
            "tiktoken": {"sha256": hashlib.sha256(path.read_bytes()).hexdigest(), "ranks": len(ranks),
                         "bytes": path.stat().st_size}}
    path.with_name(f"{name}.meta.json").write_text(json.dumps(meta))
    return path


def encoding(tok: Path) -> tiktoken.Encoding:
    """The tokenizer as tiktoken builds it from the same ranks (read here, not by the code under test)."""
    import base64

    ranks = {}
    for line in tok.read_text().splitlines():
        token, rank = line.split()
        ranks[base64.b64decode(token)] = int(rank)
    meta = json.loads(tok.with_name(tok.name.replace(".tiktoken", ".meta.json")).read_text())
    return tiktoken.Encoding("t", pat_str=meta["pattern"]["tiktoken"], mergeable_ranks=ranks,
                             special_tokens=meta["special_tokens"])


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    root = tmp_path_factory.mktemp("tokfiles")
    tok = make_tokenizer(root)
    a, b = root / "a.txt", root / "b.txt"
    a.write_text(english_text(40_000), encoding="utf-8")
    b.write_text(english_text(20_000, offset=50_000), encoding="utf-8")
    return {"root": root, "tok": tok, "enc": encoding(tok), "files": [a, b]}


def file_documents(files: list[Path]) -> list[tuple[int, int, str]]:
    """(file index, document number, text) of every document, blank-line rule."""
    return [(i, d, text) for i, f in enumerate(files)
            for d, text in enumerate(split_txt_documents(f.read_text(encoding="utf-8")))]


def ids_of(enc: tiktoken.Encoding, text: str, bos: bool = True, sep: bool = True) -> list[int]:
    return ([enc.encode_single_token(BOS)] if bos else []) + enc.encode_ordinary(text) + \
        ([enc.encode_single_token(EOT)] if sep else [])


def read_idx(path: Path) -> dict:
    """A Megatron-LM index read from its description (struct and numpy only)."""
    data = path.read_bytes()
    magic, version, code, sequences, entries = struct.unpack_from("<9sQBQQ", data, 0)
    assert magic == b"MMIDIDX\x00\x00" and version == 1
    offset = 9 + 8 + 1 + 8 + 8
    sizes = np.frombuffer(data, dtype="<i4", count=sequences, offset=offset)
    offset += 4 * sequences
    pointers = np.frombuffer(data, dtype="<i8", count=sequences, offset=offset)
    offset += 8 * sequences
    documents = np.frombuffer(data, dtype="<i8", count=entries, offset=offset)
    offset += 8 * entries
    assert offset == len(data), "nothing after the document index"
    return {"code": code, "dtype": {8: np.dtype("<u2"), 4: np.dtype("<i4")}[code], "sizes": sizes,
            "pointers": pointers, "documents": documents}


def megatron_sequences(prefix: Path) -> tuple[dict, list[list[int]]]:
    idx = read_idx(prefix.with_suffix(".idx"))
    data = np.memmap(prefix.with_suffix(".bin"), dtype=idx["dtype"], mode="r")
    seqs = [data[p // idx["dtype"].itemsize: p // idx["dtype"].itemsize + n].tolist()
            for p, n in zip(idx["pointers"].tolist(), idx["sizes"].tolist())]
    return idx, seqs


# ---------------------------------------------------------------- the formats


def test_bin_is_what_nanogpt_memmaps(corpus, tmp_path):
    enc, files = corpus["enc"], corpus["files"]
    out = tmp_path / "bin"
    r = toktok("encode", "-t", corpus["tok"], *files, "-o", out, "--format", "bin", "--separator", EOT, "--bos", BOS,
               "--val-share", 0.2, "--seed", 3, "--threads", 2)
    assert r.code == 0, r.err
    assert sorted(p.name for p in out.iterdir()) == [".encode.lock", "index.json", "meta.pkl", "train.bin", "val.bin"]
    docs = file_documents(files)
    val = [chosen(3, "encode", i, d, 0.2, salt="val") for i, d, _ in docs]
    assert 0.1 < sum(val) / len(val) < 0.3, "about the share"
    expected = {"train": [], "val": []}
    for (_, _, text), v in zip(docs, val):
        expected["val" if v else "train"] += ids_of(enc, text)
    for split in ("train", "val"):
        raw = (out / f"{split}.bin").read_bytes()
        assert raw == np.array(expected[split], dtype="<u2").tobytes(), "raw little-endian uint16, no header"
        assert np.memmap(out / f"{split}.bin", dtype=np.uint16, mode="r").tolist() == expected[split]
    index = json.loads((out / "index.json").read_text())
    assert index["val_documents"] == sum(val) and index["train_documents"] == len(docs) - sum(val)
    assert index["tokens"] == len(expected["train"]) + len(expected["val"])
    assert index["text_tokens"] == index["tokens"] - 2 * len(docs)
    assert f"validation: {sum(val)} documents, {len(expected['val'])} tokens" in r.out


def test_megatron_index_and_data_read_back(corpus, tmp_path):
    enc, files = corpus["enc"], corpus["files"]
    out = tmp_path / "mg"
    r = toktok("encode", "-t", corpus["tok"], *files, "-o", out, "--format", "megatron", "--separator", EOT,
               "--bos", BOS, "--val-share", 0.1)
    assert r.code == 0, r.err
    assert sorted(p.name for p in out.iterdir()) == [".encode.lock", "index.json", "train_text_document.bin",
                                                    "train_text_document.idx", "val_text_document.bin",
                                                    "val_text_document.idx"]
    docs = file_documents(files)
    val = [chosen(0, "encode", i, d, 0.1, salt="val") for i, d, _ in docs]
    for split, wanted in (("train", False), ("val", True)):
        idx, seqs = megatron_sequences(out / f"{split}_text_document")
        texts = [t for (_, _, t), v in zip(docs, val) if v == wanted]
        assert idx["code"] == 8, "uint16 below 65,500 ids"
        assert seqs == [ids_of(enc, t) for t in texts], "one sequence per document: bos, text, separator"
        n = len(texts)
        assert idx["documents"].tolist() == list(range(n + 1)), "document indices 0..n (count field = n + 1)"
        assert idx["sizes"].tolist() == [len(s) for s in seqs]
        assert idx["pointers"].tolist() == np.concatenate([[0], np.cumsum(idx["sizes"][:-1]) * 2]).tolist()
        assert (out / f"{split}_text_document.bin").stat().st_size == 2 * int(idx["sizes"].sum())
    train_only = tmp_path / "mg0"  # --val-share defaults to 0 for megatron: no val files
    assert toktok("encode", "-t", corpus["tok"], files[1], "-o", train_only, "--format", "megatron").code == 0
    assert sorted(p.name for p in train_only.iterdir()) == [".encode.lock", "index.json", "train_text_document.bin",
                                                           "train_text_document.idx"]
    idx, seqs = megatron_sequences(train_only / "train_text_document")
    assert seqs == [enc.encode_ordinary(t) for _, _, t in file_documents([files[1]])]


@pytest.mark.parametrize(("top", "code", "dtype"), [(65_496, 8, "<u2"), (65_497, 4, "<i4")])
def test_megatron_dtype_follows_the_vocabulary(tmp_path, top, code, dtype):
    tok = make_tokenizer(tmp_path, top=top)  # ids 0..top, then 2 special tokens: 65,499 or 65,500 ids
    src = tmp_path / "t.txt"
    src.write_text("the cat\n\nthe end")
    enc = encoding(tok)
    vocab = top + 3
    r = toktok("encode", "-t", tok, src, "-o", tmp_path / "o", "--format", "megatron", "--separator", EOT)
    assert r.code == 0, r.err
    idx, seqs = megatron_sequences(tmp_path / "o" / "train_text_document")
    assert idx["code"] == (8 if vocab < 65_500 else 4) == code and idx["dtype"] == np.dtype(dtype)
    assert seqs == [enc.encode_ordinary("the cat\n\n") + [top + 1], enc.encode_ordinary("the end") + [top + 1]]
    assert toktok("encode", "-t", tok, src, "-o", tmp_path / "o2", "--format", "megatron", "--dtype",
                  "uint32").code == 2


def test_npy_shards_with_a_validation_split(corpus, tmp_path):
    enc, files = corpus["enc"], corpus["files"]
    out = tmp_path / "npy"
    r = toktok("encode", "-t", corpus["tok"], *files, "-o", out, "--separator", EOT, "--val-share", 0.25,
               "--shard-tokens", 3000)
    assert r.code == 0, r.err
    index = json.loads((out / "index.json").read_text())
    docs = file_documents(files)
    val = [chosen(0, "encode", i, d, 0.25, salt="val") for i, d, _ in docs]
    for key, wanted in (("shards", False), ("val_shards", True)):
        tokens = np.concatenate([np.load(out / s["file"]) for s in index[key]]).tolist()
        assert tokens == [t for (_, _, text), v in zip(docs, val) if v == wanted
                          for t in ids_of(enc, text, bos=False)]
    assert index["val_shards"][0]["file"] == "val-shard-00000.npy"
    assert sum(s["documents"] for s in index["val_shards"]) == sum(val)


def test_bin_dtype_refused_above_uint16_unless_uint32(tmp_path):
    src = tmp_path / "t.txt"
    src.write_text("the cat\n\nthe end")
    tok = make_tokenizer(tmp_path, top=65_535)  # specials at 65,536 and 65,537: ids over uint16
    r = toktok("encode", "-t", tok, src, "-o", tmp_path / "refused", "--format", "bin", real=True)
    assert r.code == 2 and "--dtype uint32" in r.err and "65,537" in r.err, r.err
    assert not (tmp_path / "refused").exists()
    r = toktok("encode", "-t", tok, src, "-o", tmp_path / "wide", "--format", "bin", "--dtype", "uint32",
               "--separator", EOT)
    assert r.code == 0, r.err
    enc = encoding(tok)
    expected = enc.encode_ordinary("the cat\n\n") + [65_536] + enc.encode_ordinary("the end") + [65_536]
    assert 65_535 in expected and np.fromfile(tmp_path / "wide" / "train.bin", dtype="<u4").tolist() == expected
    small = make_tokenizer(tmp_path / "s")  # fits: uint16 by default
    assert toktok("encode", "-t", small, src, "-o", tmp_path / "narrow", "--format", "bin").code == 0
    assert (tmp_path / "narrow" / "train.bin").stat().st_size == 2 * len(encoding(small).encode_ordinary(
        "the cat\n\nthe end"))


def test_val_split_is_seeded_and_stable(corpus, tmp_path):
    files = corpus["files"]

    def val_bin(name: str, *args) -> bytes:
        r = toktok("encode", "-t", corpus["tok"], *args, "-o", tmp_path / name, "--format", "bin",
                   "--separator", EOT, "--val-share", 0.3)
        assert r.code == 0, r.err
        return (tmp_path / name / "val.bin").read_bytes()

    first = val_bin("a", files[0], "--seed", 7, "--threads", 1)
    assert val_bin("b", files[0], "--seed", 7, "--threads", 2) == first, "same seed: same split, whatever the threads"
    assert val_bin("c", files[0], "--seed", 8) != first, "another seed: another split"
    both = val_bin("d", files[0], files[1], "--seed", 7)
    assert both.startswith(first) and len(both) > len(first), "a file added after the others moves none of theirs"
    default = tmp_path / "default"  # bin's default share: 0.0005
    r = toktok("encode", "-t", corpus["tok"], files[0], "-o", default, "--format", "bin")
    assert r.code == 0
    index = json.loads((default / "index.json").read_text())
    assert index["val_share"] == 0.0005
    assert index["val_tokens"] <= 1024 and "warning: " in r.out and "raise --val-share" in r.out, \
        "a val.bin too short for nanoGPT's default block_size is said"


# ---------------------------------------------------------------- documents and standard input


TRICKY = "One line\r\nTwo  lines\n\n\nThree\n\n  indented\rlast\n\nfinal without break"


@pytest.mark.parametrize(("rule", "expected"), [
    ("blank-line", split_txt_documents(TRICKY)),
    ("line", [line for line in re.split(r"\r\n|\r|\n", TRICKY) if line]),
    ("file", [TRICKY]),
    ("split-on:\n\n", [d for d in TRICKY.split("\n\n") if d]),
    ("split-on:in", [d for d in TRICKY.split("in") if d]),
])
def test_the_document_rules(corpus, tmp_path, rule, expected):
    src = tmp_path / "t.txt"
    src.write_bytes(TRICKY.encode())
    out = tmp_path / "o"
    r = toktok("encode", "-t", corpus["tok"], src, "-o", out, "--format", "megatron", "--documents", rule,
               "--separator", EOT)
    assert r.code == 0, r.err
    _, seqs = megatron_sequences(out / "train_text_document")
    assert seqs == [ids_of(corpus["enc"], d, bos=False) for d in expected]
    assert json.loads((out / "index.json").read_text())["documents_rule"] == rule


def test_text_files_of_other_suffixes(corpus, tmp_path):
    """A .py is one document unless --documents says otherwise; a binary file is refused (exit 1)."""
    src = tmp_path / "t.py"
    src.write_bytes(TRICKY.encode())
    for rule, expected in ((None, [TRICKY]), ("line", [line for line in re.split(r"\r\n|\r|\n", TRICKY) if line])):
        out = tmp_path / f"o-{rule}"
        r = toktok("encode", "-t", corpus["tok"], src, "-o", out, "--format", "megatron", "--separator", EOT,
                   *(["--documents", rule] if rule else []))
        assert r.code == 0, r.err
        assert megatron_sequences(out / "train_text_document")[1] == [ids_of(corpus["enc"], d, bos=False) for d in expected]
    blob = tmp_path / "blob.bin"
    blob.write_bytes(b"\x00" * 100)
    r = toktok("encode", "-t", corpus["tok"], blob, "-o", tmp_path / "blob")
    assert r.code == 1 and "blob.bin: not a text file (it holds a NUL byte)" in r.err


@pytest.mark.parametrize("rule", ["paragraph", "split-on:"])
def test_an_unknown_document_rule_is_refused(corpus, tmp_path, rule):
    r = toktok("encode", "-t", corpus["tok"], corpus["files"][0], "-o", tmp_path / "o", "--documents", rule)
    assert r.code == 2 and f"--documents must be one of blank-line, line, file or split-on:STRING, got {rule!r}" in r.err


def test_standard_input_is_read_as_text(corpus, tmp_path):
    src = corpus["files"][1]
    from toktoktok_stages.cli.app import toktok as group

    runner = CliRunner()
    for rule in ("blank-line", "line"):
        piped = runner.invoke(group, ["encode", "-t", str(corpus["tok"]), "-", "-o", str(tmp_path / f"in-{rule}"),
                                      "--format", "bin", "--documents", rule, "--separator", EOT, "--val-share", 0],
                              input=src.read_bytes())
        assert piped.exit_code == 0, piped.output
        r = toktok("encode", "-t", corpus["tok"], src, "-o", tmp_path / f"file-{rule}", "--format", "bin",
                   "--documents", rule, "--separator", EOT, "--val-share", 0)
        assert r.code == 0
        assert (tmp_path / f"in-{rule}" / "train.bin").read_bytes() == \
            (tmp_path / f"file-{rule}" / "train.bin").read_bytes()
    lines = src.read_text().splitlines()
    expected = [t for line in lines if line for t in corpus["enc"].encode_ordinary(line) + [corpus["enc"].encode_single_token(EOT)]]
    assert np.fromfile(tmp_path / "in-line" / "train.bin", dtype="<u2").tolist() == expected
    proc = subprocess.run([str(TOKTOK), "encode", "-t", str(corpus["tok"]), "-", "-o", str(tmp_path / "real"),
                           "--format", "megatron", "--documents", "file"], input=b"\xef\xbb\xbfhello world",
                          capture_output=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert megatron_sequences(tmp_path / "real" / "train_text_document")[1] == \
        [corpus["enc"].encode_ordinary("hello world")], "BOM dropped, one document"


# ---------------------------------------------------------------- never half-written


def _final_names(folder: Path) -> list[str]:
    """The files under their final names (temporary files and the lock left out)."""
    return sorted(p.name for p in folder.iterdir()
                  if not p.name.endswith(".tmp") and p.name != ".encode.lock") if folder.exists() else []


def _killed_at(args: list[str], out: Path, ready, sig: int) -> int:
    """Run ``toktok encode ARGS -o OUT``, send ``sig`` once ``ready(out)``; the exit code."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    proc = subprocess.Popen([str(TOKTOK), "encode", *args, "-o", str(out)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while proc.poll() is None and time.monotonic() < deadline:
        if out.exists() and ready(out):
            proc.send_signal(sig)
            break
        time.sleep(0.005)
    return proc.wait(timeout=120)


def test_a_file_never_appears_under_its_final_name_half_written(corpus, tmp_path):
    big = tmp_path / "big.txt"
    big.write_text(english_text(400_000) * 12, encoding="utf-8")  # about 5 MB, 1.3 M tokens
    common = ["-t", str(corpus["tok"]), str(big), "--threads", "1", "--separator", EOT]
    npy = [*common, "--shard-tokens", "50000", "--val-share", "0.01"]
    megatron = [*common, "--format", "megatron", "--val-share", "0.01"]
    refs = {}
    for name, args in (("npy", npy), ("megatron", megatron)):
        refs[name] = tmp_path / f"ref-{name}"
        assert _killed_at(args, refs[name], lambda o: False, signal.SIGKILL) == 0

    def complete(out: Path, ref: Path) -> None:
        """Every final name holds exactly what the finished run wrote (index.json: a whole document)."""
        for name in _final_names(out):
            if name == "index.json":
                assert json.loads((out / name).read_text())["tokens"] > 0
                assert _final_names(out) == _final_names(ref), "index.json comes last"
            else:
                assert (out / name).read_bytes() == (ref / name).read_bytes(), name

    def shards(n):
        """Ready when ``n`` shards are final and the next one is being written."""
        def ready(o: Path) -> bool:
            names = [p.name for p in o.iterdir()]
            return (sum(1 for name in names if re.fullmatch(r"shard-\d+\.npy", name)) >= n
                    and any(name.startswith(".shard-") and name.endswith(".tmp") for name in names))
        return ready

    caught_mid_shard = False
    for i, n in enumerate((1, 3, 8)):
        out = tmp_path / f"kill-npy-{i}"
        assert _killed_at(npy, out, shards(n), signal.SIGKILL) == -signal.SIGKILL
        complete(out, refs["npy"])
        assert "index.json" not in _final_names(out)
        caught_mid_shard |= any(p.name.endswith(".tmp") for p in out.iterdir())
    assert caught_mid_shard, "a kill landed while a shard was being written"

    def writing(o: Path) -> bool:
        return any(p.name.endswith(".tmp") and p.stat().st_size > 100_000 for p in o.iterdir())

    out = tmp_path / "kill-megatron"
    assert _killed_at(megatron, out, writing, signal.SIGKILL) == -signal.SIGKILL
    complete(out, refs["megatron"])
    assert not any(n.endswith(".idx") for n in _final_names(out)), "no index before its data"
    again = toktok("encode", *megatron, "-o", out)  # the same folder: stray temporary files cleared
    assert again.code == 0 and _final_names(out) == _final_names(refs["megatron"])
    assert not any(p.name.endswith(".tmp") for p in out.iterdir())
    complete(out, refs["megatron"])

    out = tmp_path / "interrupt"
    assert _killed_at(npy, out, shards(2), signal.SIGINT) == 130
    assert not any(p.name.endswith(".tmp") for p in out.iterdir()), "Ctrl-C removes the file being written"
    complete(out, refs["npy"])


# ---------------------------------------------------------------- help


def test_help_texts_name_the_formats_and_options():
    r = toktok("encode", "--help")
    assert r.code == 0
    text = " ".join(r.out.split())
    for words in ("--format [npy|bin|megatron]", "train.bin and val.bin", "train_text_document.bin/.idx",
                  "--bos TOKEN", "--val-share F", "--documents RULE", "standard input",
                  "--dtype [uint16|uint32]", "--seed", "meta.pkl", "--strip"):
        assert words in text, words
