"""Token files a trainer takes as they are: ``--format bin`` writes nanoGPT's
``meta.pkl`` beside ``train.bin`` (read back with ``pickle``, as nanoGPT's
``train.py`` reads it), and ``--strip`` drops each document's trailing white
space before its separator, for every input kind and format, while the
default keeps the text as read.

White space is the patterns' ``\\s`` (the ``regex`` module's, Unicode
White_Space), computed here from ``regex`` over every code point; the
expected ids are tiktoken's encoding of each document, read here our own way.
"""

from __future__ import annotations

import json
import pickle
import random
import sys

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import regex
import tiktoken

from tests.commands.test_encode import EOT, encoding, make_tokenizer, megatron_sequences
from tests.conftest import english_text, split_txt_documents, toktok
from toktoktok.patterns import NAMED_PATTERNS
from toktoktok.pretokenize import PartCutter
from toktoktok_stages.commands.texts import strip_ends

SPACE = "".join(c for c in map(chr, range(sys.maxunicode + 1)) if regex.fullmatch(r"\s", c))
ENDS = ["\n\n", "  \n", " ", "\t\u3000\n", "\u00a0", "\r\n\r\n", ""]  # what documents end with here


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    """A .txt of blank-line documents, a .jsonl and a .parquet whose rows end in white space
    (one row all white space, one ending in U+001C, which the patterns take as punctuation)."""
    root = tmp_path_factory.mktemp("strip")
    tok = make_tokenizer(root)
    txt = root / "a.txt"
    txt.write_text(english_text(6_000) + "\n \n\t\n", encoding="utf-8")
    paragraphs = [p for p in english_text(8_000, offset=9_000).split("\n\n") if p.strip()]
    rows = [p + ENDS[i % len(ENDS)] for i, p in enumerate(paragraphs)] + [" \n\u2028 ", "unit\x1c"]
    jsonl = root / "b.jsonl"
    jsonl.write_text("".join(json.dumps({"text": r}) + "\n" for r in rows[::2]), encoding="utf-8")
    parquet = root / "c.parquet"
    pq.write_table(pa.table({"text": rows[1::2]}), parquet)
    docs = split_txt_documents(txt.read_text(encoding="utf-8")) + rows[::2] + rows[1::2]
    return {"tok": tok, "enc": encoding(tok), "files": [txt, jsonl, parquet], "docs": docs}


def documents_of(out, fmt: str, eot: int) -> list[list[int]]:
    """Each document's ids, separator included: Megatron's sequences, or the stream cut after each separator."""
    if fmt == "megatron":
        return megatron_sequences(out / "train_text_document")[1]
    import numpy as np

    ids = np.load(out / "shard-00000.npy").tolist() if fmt == "npy" else \
        np.memmap(out / "train.bin", dtype=np.uint16, mode="r").tolist()
    docs, start = [], 0
    for i, t in enumerate(ids):
        if t == eot:
            docs.append(ids[start : i + 1])
            start = i + 1
    assert start == len(ids), "the last document ends in its separator"
    return docs


@pytest.mark.parametrize("fmt", ["npy", "bin", "megatron"])
def test_strip_drops_each_documents_trailing_white_space(inputs, tmp_path, fmt):
    enc, docs = inputs["enc"], inputs["docs"]
    eot = enc.encode_single_token(EOT)
    common = ["encode", "-t", inputs["tok"], *inputs["files"], "--format", fmt, "--separator", EOT,
              "--val-share", 0, "-o", tmp_path / "out"]
    plain = toktok(*common)
    assert plain.code == 0, plain.err
    as_read = documents_of(tmp_path / "out", fmt, eot)
    assert as_read == [enc.encode_ordinary(d) + [eot] for d in docs], "by default the text is encoded as read"
    assert sum(d != d.rstrip(SPACE) for d in docs) > 10, "the inputs end documents in white space"

    stripped = toktok(*common, "--strip")  # into the same folder: the run after one without re-encodes
    assert stripped.code == 0, stripped.err
    got = documents_of(tmp_path / "out", fmt, eot)
    assert got == [enc.encode_ordinary(d.rstrip(SPACE)) + [eot] for d in docs]
    for ids, doc in zip(got, docs):
        assert enc.decode(ids[:-1]) == doc.rstrip(SPACE)
        if len(ids) > 1:  # the token before the separator ends in text, not white space
            last = enc.decode_single_token_bytes(ids[-2]).decode("utf-8", "replace")
            assert last[-1] not in SPACE, (doc[-20:], last)
    assert docs[-1] == "unit\x1c" and enc.decode(got[-1][:-1]) == "unit\x1c", "U+001C is kept: not \\s"
    index = json.loads((tmp_path / "out" / "index.json").read_text())
    assert index["strip"] is True and index["documents"] == len(docs)
    assert index["bytes"] == sum(len(d.rstrip(SPACE).encode()) for d in docs)


def test_strip_keeps_every_cut_of_a_long_document_exact():
    """Documents cut into parts at safe places, then stripped: each document's parts join to
    it without its trailing white space, and encoded part by part give its ids whole."""
    pattern = NAMED_PATTERNS["default"]
    enc = tiktoken.Encoding("t", pat_str=pattern.tiktoken, mergeable_ranks={bytes([b]): b for b in range(256)},
                            special_tokens={})
    rng = random.Random(5)
    atoms = ["word", " ", "  ", "\n", "\n\n", "\t", "\u3000", ".", "x1", "\r\n", " \n "]
    for trial in range(300):
        docs = ["".join(rng.choice(atoms) for _ in range(rng.randrange(0, 40))) for _ in range(rng.randrange(1, 4))]
        parts = []
        for index, doc in enumerate(docs):
            cutter = PartCutter(cut=True, part_chars=rng.randrange(1, 8))
            at = 0
            while at < len(doc):  # fed in blocks, as files are read
                step = rng.randrange(1, 10)
                parts += [(p, False, index) for p in cutter.feed(doc[at : at + step])]
                at += step
            last = cutter.finish() or [""]
            parts += [(p, i == len(last) - 1, index) for i, p in enumerate(last)]
        out = list(strip_ends(parts))
        for index, doc in enumerate(docs):
            mine = [p for p, _, i in out if i == index]
            assert [end for _, end, i in out if i == index][-1], "the document still ends"
            assert "".join(mine) == doc.rstrip(SPACE), (trial, doc, mine)
            assert [t for p in mine for t in enc.encode_ordinary(p)] == enc.encode_ordinary(doc.rstrip(SPACE)), \
                (trial, doc, mine)


def test_bin_writes_nanogpts_meta_pkl_in_the_set(inputs, tmp_path):
    out = tmp_path / "bin"
    common = ["encode", "-t", inputs["tok"], *inputs["files"], "--format", "bin", "--separator", EOT, "-o", out]
    r = toktok(*common)
    assert r.code == 0, r.err
    assert sorted(p.name for p in out.iterdir()) == [".encode.lock", "index.json", "meta.pkl", "train.bin", "val.bin"]
    with open(out / "meta.pkl", "rb") as f:  # as nanoGPT's train.py reads it
        meta = pickle.load(f)
    assert meta["vocab_size"] == inputs["enc"].n_vocab == inputs["enc"].max_token_value + 1
    assert "meta.pkl" in r.out.splitlines()[0]
    first = (out / "meta.pkl").read_bytes()
    assert toktok(*common).code == 0 and (out / "meta.pkl").read_bytes() == first, "a rerun leaves it equal"

    bigger = make_tokenizer(tmp_path / "big", top=40_000)  # another tokenizer: another vocab_size
    assert toktok("encode", "-t", bigger, *inputs["files"], "--format", "bin", "-o", out).code == 0
    assert pickle.loads((out / "meta.pkl").read_bytes()) == {"vocab_size": 40_003}

    npy = toktok("encode", "-t", inputs["tok"], inputs["files"][0], "-o", out)  # another format: the set goes
    assert npy.code == 0, npy.err
    assert not (out / "meta.pkl").exists() and "meta.pkl" in json.loads((out / "index.json").read_text())["removed"]


def test_strip_reads_standard_input_and_long_documents_alike(inputs, tmp_path):
    """Standard input takes --strip as files do; a document of over a part (1 MiB), cut at
    safe places and ending in a long run of white space, comes out as the stripped document."""
    from click.testing import CliRunner

    from toktoktok_stages.cli.app import toktok as group

    enc = inputs["enc"]
    eot = enc.encode_single_token(EOT)
    long = ("word and more words, " * 60_000) + "end." + " \n" * 3_000
    text = "first document  \n\n" + long
    piped = CliRunner().invoke(group, ["encode", "-t", str(inputs["tok"]), "-", "-o", str(tmp_path / "in"),
                                       "--format", "megatron", "--separator", EOT, "--strip"], input=text.encode())
    assert piped.exit_code == 0, piped.output
    seqs = megatron_sequences(tmp_path / "in" / "train_text_document")[1]
    assert seqs == [enc.encode_ordinary("first document") + [eot], enc.encode_ordinary(long.rstrip()) + [eot]]
