"""``toktok decode`` and ``toktok show``: what the tokenizer does,
checked against tiktoken built here from the same files."""

from __future__ import annotations

import os
import re
import shutil
import struct
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from tests.commands.test_encode import BOS, EOT, encoding, make_tokenizer
from tests.conftest import english_text, toktok, write_config


@pytest.fixture(scope="module")
def tok(tmp_path_factory):
    root = tmp_path_factory.mktemp("decode")
    path = make_tokenizer(root)
    return {"root": root, "tok": path, "enc": encoding(path)}


def invoke(*args, input: bytes | None = None):
    from toktoktok_stages.cli.app import toktok as group

    return CliRunner().invoke(group, [str(a) for a in args], input=input, catch_exceptions=False)


# ---------------------------------------------------------------- decode


def test_decode_ids_from_arguments(tok):
    enc = tok["enc"]
    text = "the end of the song, and ünïcödé"
    ids = enc.encode_ordinary(text)
    r = toktok("decode", "-t", tok["tok"], *ids)
    assert r.code == 0, r.err
    assert r.out == text + "\n"
    pasted = toktok("decode", "-t", tok["tok"], str(ids))  # a list pasted from Python
    assert pasted.code == 0 and pasted.out == r.out
    special = toktok("decode", "-t", tok["tok"], enc.encode_single_token(BOS), *enc.encode_ordinary("hi"),
                     enc.encode_single_token(EOT))
    assert special.out == f"{BOS}hi{EOT}\n"


def test_decode_bytes_that_are_not_utf8(tok):
    cut = list("é".encode())  # the two bytes of é, each one token
    r = invoke("decode", "-t", tok["tok"], cut[0])
    assert r.exit_code == 0 and r.stdout_bytes == "\ufffd\n".encode()
    raw = invoke("decode", "-t", tok["tok"], "--bytes", cut[0])
    assert raw.stdout_bytes == bytes([cut[0]]), "raw bytes, no newline"
    both = invoke("decode", "-t", tok["tok"], *cut)
    assert both.stdout == "é\n", "a character split across tokens is decoded whole"


def test_decode_token_files(tok, tmp_path):
    enc = tok["enc"]
    src = tmp_path / "t.txt"
    src.write_text(english_text(8_000), encoding="utf-8")
    docs = [d for d in re.split(r"(?<=\n\n)(?=\S)", src.read_text())]
    expected_all = "".join(f"{BOS}{d}{EOT}" for d in docs)
    for fmt in ("npy", "bin", "megatron"):
        out = tmp_path / fmt
        r = toktok("encode", "-t", tok["tok"], src, "-o", out, "--format", fmt, "--bos", BOS, "--separator", EOT,
                   "--val-share", 0)
        assert r.code == 0, r.err
        data = {"npy": "shard-00000.npy", "bin": "train.bin", "megatron": "train_text_document.bin"}[fmt]
        whole = toktok("decode", "-t", tok["tok"], "--from", out / data)
        assert whole.code == 0, whole.err
        assert whole.out == expected_all + "\n", fmt
    mg = tmp_path / "megatron" / "train_text_document.bin"
    for n in (0, 3, len(docs) - 1):
        r = toktok("decode", "-t", tok["tok"], "--from", mg, "--document", n)
        assert r.code == 0 and r.out == f"{BOS}{docs[n]}{EOT}\n", n
    past = toktok("decode", "-t", tok["tok"], "--from", mg, "--document", len(docs))
    assert past.code == 2 and f"has {len(docs)} documents" in past.err
    flat = toktok("decode", "-t", tok["tok"], "--from", tmp_path / "bin" / "train.bin", "--document", 0)
    assert flat.code == 2 and "no document boundaries" in flat.err
    wide = tmp_path / "wide.bin"  # a nanoGPT file of uint32 ids
    np.array(enc.encode_ordinary("wide ids"), dtype="<u4").tofile(wide)
    assert toktok("decode", "-t", tok["tok"], "--from", wide, "--dtype", "uint32").out == "wide ids\n"


def test_decode_errors_exit_2(tok, tmp_path):
    top = tok["enc"].max_token_value
    r = toktok("decode", "-t", tok["tok"], 5, top + 1, real=True)
    assert r.code == 2 and f"id {top + 1} is not in the vocabulary" in r.err and "Traceback" not in r.err
    assert toktok("decode", "-t", tok["tok"], "x1").code == 2
    assert toktok("decode", "-t", tok["tok"]).code == 2, "no ids"
    assert toktok("decode", "1", "2").code == 2, "no tokenizer"
    (tmp_path / "a.txt").write_text("x")
    assert toktok("decode", "-t", tok["tok"], "--from", tmp_path / "a.txt").code == 2


def _refused(tok, path: Path, *args, code: int = 1) -> str:
    """``decode --from PATH ARGS``: exits ``code`` with one line naming the file (or the
    ``.idx`` beside it); the line."""
    r = toktok("decode", "-t", tok["tok"], "--from", path, *args)
    assert r.code == code, (path.name, args, r.out[:200], r.err)
    assert len(r.err.strip().splitlines()) == 1 and str(path.with_suffix("")) + "." in r.err and "unexpected" not in r.err, r.err
    return r.err


def test_decode_checks_a_megatron_file_against_its_index(tok, tmp_path):
    src = tmp_path / "t.txt"
    src.write_text(english_text(8_000), encoding="utf-8")
    made = tmp_path / "made"
    assert toktok("encode", "-t", tok["tok"], src, "-o", made, "--format", "megatron", "--separator", EOT,
                  "--val-share", 0.3).code == 0
    train, val = made / "train_text_document", made / "val_text_document"
    sequences = struct.unpack_from("<Q", train.with_suffix(".idx").read_bytes(), 18)[0]
    assert toktok("decode", "-t", tok["tok"], "--from", train.with_suffix(".bin"), "--document", sequences - 1).code == 0

    def case(name: str, change) -> Path:
        folder = tmp_path / name
        shutil.copytree(made, folder)
        change(folder / "train_text_document")
        return folder / "train_text_document.bin"

    def patch(prefix: Path, offset: int, value: bytes) -> None:
        data = bytearray(prefix.with_suffix(".idx").read_bytes())
        data[offset : offset + len(value)] = value
        prefix.with_suffix(".idx").write_bytes(bytes(data))

    def cut(prefix: Path) -> None:
        os.truncate(prefix.with_suffix(".bin"), prefix.with_suffix(".bin").stat().st_size - 4)

    def longer(prefix: Path) -> None:
        with open(prefix.with_suffix(".bin"), "ab") as fh:
            fh.write(bytes(6))

    pointers, documents = 34 + 4 * sequences, 34 + 12 * sequences
    broken = {
        "truncated": cut,
        "longer": longer,
        "other-index": lambda p: shutil.copy(val.with_suffix(".idx"), p.with_suffix(".idx")),
        "pointer": lambda p: patch(p, pointers + 8, struct.pack("<q", 2)),
        "size": lambda p: patch(p, 34, struct.pack("<i", -1)),
        "document-index": lambda p: patch(p, documents + 8, struct.pack("<q", sequences + 5)),
        "float32": lambda p: patch(p, 17, bytes([7])),
        "float64": lambda p: patch(p, 17, bytes([6])),
    }
    for name, change in broken.items():
        data = case(name, change)
        for args in ((), ("--document", 0), ("--document", sequences - 1)):
            _refused(tok, data, *args)
    assert "float" in _refused(tok, tmp_path / "float32" / "train_text_document.bin")


def test_decode_checks_a_npy_file(tok, tmp_path):
    text = tmp_path / "junk.npy"
    text.write_text("not npy")
    assert "pickle" not in _refused(tok, text)
    objects = tmp_path / "objects.npy"
    np.save(objects, np.array([1, "a", None], dtype=object), allow_pickle=True)
    _refused(tok, objects)
    empty = tmp_path / "empty.npy"
    empty.write_bytes(b"")
    _refused(tok, empty)
    shard = tmp_path / "shard.npy"
    np.save(shard, np.arange(5000, dtype=np.uint16) % 256)
    assert toktok("decode", "-t", tok["tok"], "--from", shard).code == 0
    os.truncate(shard, 1000)
    _refused(tok, shard)
    np.save(shard, np.array([5, 2**64 - 1], dtype=np.uint64))
    r = toktok("decode", "-t", tok["tok"], "--from", shard)
    assert r.code == 2 and f"id {2**64 - 1} is not in the vocabulary" in r.err, r.err


def test_decode_of_an_id_past_64_bits_is_an_unknown_id(tok):
    for big in ("99999999999999999999999999", "-99999999999999999999999999", f"[5, {2**70}]"):
        r = toktok("decode", "-t", tok["tok"], "--", big)
        assert r.code == 2 and "is not in the vocabulary" in r.err and "unexpected" not in r.err, r.err


# ---------------------------------------------------------------- show


def unmark(line: str) -> list[str]:
    """The tokens of a plain ``show`` line: ``[a][ b]`` -> ``["a", " b"]``."""
    assert line.startswith("[") and line.endswith("]"), line
    return line[1:-1].split("][")


def test_show_plain_marks_every_token(tok):
    enc = tok["enc"]
    text = "the ring, and the song of the tower"
    r = toktok("show", "-t", tok["tok"], text)
    assert r.code == 0, r.err
    marked, ids, counts = r.out.splitlines()
    expected = enc.encode_ordinary(text)
    assert unmark(marked) == [enc.decode_single_token_bytes(t).decode() for t in expected]
    assert ids == f"ids: {expected}"
    assert counts == f"{len(expected)} tokens, {len(text)} bytes, {len(text)} characters"
    assert "\x1b[" not in r.out, "no colour when not a terminal"


def test_show_whitespace_and_bytes_visible(tok):
    enc = tok["enc"]
    text = "a\\b\tc\n\n  the é"
    r = invoke("show", "-t", tok["tok"], "--dots", input=text.encode())  # no TEXT: standard input
    assert r.exit_code == 0, r.output
    lines = r.stdout.splitlines()
    expected = enc.encode_ordinary(text)
    shown = [enc.decode_single_token_bytes(t) for t in expected]
    escaped = []
    for b in shown:
        if b in (b"\xc3", b"\xa9"):
            escaped.append(f"\\x{b[0]:02x}")
        else:
            escaped.append(b.decode().replace("\\", "\\\\").replace("\n", "\\n").replace("\t", "\\t")
                           .replace(" ", "·"))
    breaks = sum(1 for b in shown if b"\n" in b)
    marked = lines[: breaks + 1] if not shown[-1].endswith(b"\n") else lines[:breaks]
    assert [t for line in marked for t in unmark(line)] == escaped
    assert lines[len(marked)] == f"ids: {expected}"
    dash = invoke("show", "-t", tok["tok"], "-", "--dots", input=text.encode())
    assert dash.stdout == r.stdout


def test_show_colour_and_special_tokens(tok):
    enc = tok["enc"]
    text = f"the end{EOT}"
    plain = toktok("show", "-t", tok["tok"], text)
    assert f"ids: {enc.encode_ordinary(text)}" in plain.out, "special tokens are text by default"
    special = toktok("show", "-t", tok["tok"], "--allow-special", text)
    ids = enc.encode(text, allowed_special="all")
    assert ids[-1] == enc.encode_single_token(EOT) and f"ids: {ids}" in special.out
    assert special.out.splitlines()[0].endswith(f"[{EOT}]")
    coloured = toktok("show", "-t", tok["tok"], "--color", "always", "--allow-special", text)
    first = coloured.out.splitlines()[0]
    spans = re.findall(r"\x1b\[([0-9;]+)m(.*?)\x1b\[0m", first)
    assert [s[1] for s in spans] == [enc.decode_single_token_bytes(t).decode() for t in ids]
    assert len({s[0] for s in spans[:2]}) == 2, "neighbours on different backgrounds"
    assert re.sub(r"\x1b\[[0-9;]*m", "", first) == text
    never = toktok("show", "-t", tok["tok"], "--color", "never", text)
    assert never.out == plain.out


def test_show_and_decode_with_a_config(tok, tmp_path):
    src = tmp_path / "src.txt"
    src.write_text("the end")
    config = write_config(tmp_path / "cfg", [{"name": "P", "merges": 5, "sources": [{"file": str(src)}]}],
                          output=str(tok["tok"]))
    a = toktok("show", "-c", config, "the end")
    assert a.code == 0, a.err
    assert a.out == toktok("show", "-t", tok["tok"], "the end").out
    ids = tok["enc"].encode_ordinary("the end")
    assert toktok("decode", "-c", config, *ids).out == "the end\n"
    both = toktok("show", "-c", config, "-t", tok["tok"], "x")
    assert both.code == 2


def test_help_texts():
    d = " ".join(toktok("decode", "--help").out.split())
    for words in ("--from FILE", ".npy shard", "Megatron-LM", "--document N", "--bytes", "--dtype"):
        assert words in d, words
    s = " ".join(toktok("show", "--help").out.split())
    for words in ("--color [auto|always|never]", "--dots", "--allow-special", "standard input", "[bracketed]"):
        assert words in s, words
    top = toktok("--help").out
    assert "decode" in top and "show" in top
