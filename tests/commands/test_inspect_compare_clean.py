"""The user commands ``toktok inspect``, ``encode``, ``compare`` and ``clean``.

Each runs on real artifacts made by a small real pipeline run (two phases on
real English text: tinyshakespeare when /work/shared/data has it, else stdlib
docstrings), and its output is checked against the artifacts read directly
(pyarrow, our strict ``.tiktoken`` reading) and against tiktoken itself.
"""

from __future__ import annotations

import json
import re
import shutil
import warnings
from collections import Counter
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
import tiktoken
from click.testing import CliRunner

import toktoktok
from tests.conftest import (
    SHARED_DATA,
    SPECIALS,
    english_text,
    manifest,
    parse_tiktoken,
    read_arrow,
    read_documents,
    toktok,
    work_of,
    write_config,
)
from toktoktok.patterns import NAMED_PATTERNS
from toktoktok.tiktoken_file import read_tiktoken, write_tiktoken
from toktoktok_stages.pipeline import train_texts

CL100K = SHARED_DATA / "reference" / "cl100k_base.tiktoken.gz"
O200K = SHARED_DATA / "reference" / "o200k_base.tiktoken.gz"


def one_line_error(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert "Traceback" not in err
    return lines[0]


def quoted(token: bytes) -> str:
    """How inspect shows a token of printable text: JSON's quoting and escapes (\\n, \\", \\\\)."""
    return json.dumps(token.decode("utf-8"), ensure_ascii=False)


def row_of(output: str, first_cell: str) -> list[str]:
    """The cells of the table row whose first cell is ``first_cell``."""
    for line in output.splitlines():
        cells = [c.strip() for c in re.split(r"[│┆|]", line)[1:-1]]
        if cells and cells[0] == first_cell:
            return cells
    raise AssertionError(f"no row {first_cell!r} in:\n{output}")


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A finished two-phase run: data/prose.txt (phase "Prose"), data/more/ (phase "More")."""
    root = tmp_path_factory.mktemp("trained")
    data = root / "data"
    (data / "more").mkdir(parents=True)
    (data / "prose.txt").write_text(english_text(30_000), encoding="utf-8")
    (data / "more" / "more.txt").write_text(english_text(15_000, offset=60_000), encoding="utf-8")
    paragraphs = [p for p in english_text(6_000, offset=90_000).split("\n\n") if p.strip()]
    rows = [{"text": f"{p}<|endoftext|>tail"} for p in paragraphs[:6]] + [{"text": ""}, {"text": paragraphs[-1]}]
    (data / "more" / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    phases = [
        {"name": "Prose", "merges": 150, "sources": [{"file": str(data / "prose.txt")}]},
        {"name": "More", "merges": 60, "sources": [{"path": str(data / "more")}]},
    ]
    config = write_config(root / "p", phases, heldout_share=0, threads=1, special_tokens=SPECIALS)
    r = toktok("run", "-c", config)
    assert r.code == 0, r.err
    out = root / "p" / "out" / "tok.tiktoken"
    return {"root": root, "data": data, "config": config, "out": out, "work": work_of(config),
            "enc": toktoktok.load(out), "meta": json.loads(out.with_name("tok.meta.json").read_text())}


def documents(*paths: Path) -> list[str]:
    """The documents of files (or folders, files in sorted relative order), read our own way."""
    docs = []
    for p in paths:
        files = sorted(f for f in p.rglob("*") if f.is_file()) if p.is_dir() else [p]
        for f in files:
            docs += read_documents(f)
    return docs


# ---------------------------------------------------------------- inspect


def test_inspect_chunk_shows_the_top_pieces_and_totals(trained):
    chunk = trained["work"] / "ingest" / "01-prose" / "chunk-00000.arrow"
    t = read_arrow(chunk)
    counts = dict(zip(t["piece"].to_pylist(), t["count"].to_pylist()))
    ranked = sorted(counts.items(), key=lambda pc: (-pc[1], pc[0]))
    r = toktok("inspect", chunk, "--top", "5")
    assert r.code == 0, r.err
    assert f"{len(counts)} distinct pieces, {sum(counts.values())} pieces in all" in r.out
    assert "01-prose (Prose)" in r.out
    for i, (piece, count) in enumerate(ranked[:5], 1):
        cells = row_of(r.out, str(i))
        assert cells[1] == quoted(piece) and int(cells[3]) == count, cells
    assert quoted(ranked[5][0]) not in r.out.split("top 5 pieces:")[1] or ranked[5][1] == ranked[4][1]
    folder = toktok("inspect", chunk.parent, "--top", "5")  # a phase folder sums its chunks
    assert folder.code == 0 and row_of(folder.out, "1") == row_of(r.out, "1")
    found = toktok("inspect", chunk, "--search", " the")
    expected = sum(1 for p in counts if b" the" in p)
    assert f"pieces containing \" the\": {expected}" in found.out


def test_inspect_merges_shows_phase_counts_and_parts(trained):
    merges = trained["work"] / "train" / "02-more" / "merges.arrow"
    t = read_arrow(merges)
    ranks, tokens, counts = t["rank"].to_pylist(), t["bytes"].to_pylist(), t["count"].to_pylist()
    r = toktok("inspect", merges, "--top", "3")
    assert r.code == 0, r.err
    assert f"phase 02-more (More): {len(ranks)} merges, ranks {ranks[0]}..{ranks[-1]}" in r.out
    first = row_of(r.out, str(ranks[0]))
    assert first[1] == quoted(tokens[0]) and int(first[4]) == counts[0]
    assert first[2][:-1] + first[3][1:] == quoted(tokens[0]), "left + right spell the token"
    assert row_of(r.out, str(ranks[-1]))[1] == quoted(tokens[-1]), "the last merges are shown too"
    found = toktok("inspect", merges, "--search", "e", "--top", "1000")
    assert f'merges whose token contains "e": {sum(1 for t in tokens if b"e" in t)}' in found.out
    one = toktok("inspect", merges, "--id", ranks[10])
    assert row_of(one.out, str(ranks[10]))[1] == quoted(tokens[10])
    assert toktok("inspect", merges, "--id", 5).code == 2  # a byte, not a merge of this phase


def test_inspect_tiktoken_breaks_the_vocabulary_down(trained):
    out, meta, enc = trained["out"], trained["meta"], trained["enc"]
    ranks = dict(parse_tiktoken(out))
    r = toktok("inspect", out, "--top", "4")
    assert r.code == 0, r.err
    assert row_of(r.out, "single bytes")[1:] == ["0", "255", "256"]
    assert row_of(r.out, "hardcoded merges")[1:] == ["256", "1416", "1161"]
    for p in meta["phases"]:
        assert row_of(r.out, f"phase {p['name']}")[1:] == [str(p["first_rank"]), str(p["last_rank"]),
                                                           str(p["merges_made"])]
    assert row_of(r.out, "special tokens")[1:] == [str(enc.n_vocab - 3), str(enc.n_vocab - 1), "3"]
    assert row_of(r.out, "total")[1:] == ["0", str(enc.n_vocab - 1), str(enc.n_vocab)]
    longest = max(ranks.items(), key=lambda tr: (len(tr[0]), -tr[1]))
    assert row_of(r.out.split("longest")[1], str(longest[1]))[1] == str(len(longest[0]))


def test_inspect_a_warm_started_tokenizer(trained, tmp_path):
    base = dict(parse_tiktoken(trained["out"]))
    out = tmp_path / "warm.tiktoken"
    docs = documents(trained["data"] / "more")
    train_texts(docs, output=out, merges=20, warm_start=trained["out"], special_tokens=["<|endoftext|>", "<|new|>"],
                heldout_share=0, threads=1)
    meta = json.loads(out.with_name("warm.meta.json").read_text())
    r = toktok("inspect", out.with_name("warm.meta.json"))  # the companion stands for its .tiktoken
    assert r.code == 0, r.err
    assert row_of(r.out, "warm start base (tok)")[1:] == ["256", str(max(base.values())), str(len(base) - 256)]
    phase = meta["phases"][0]
    assert row_of(r.out, "phase train")[1:] == [str(phase["first_rank"]), str(phase["last_rank"]),
                                                str(phase["merges_made"])]
    assert phase["first_rank"] > trained["enc"].max_token_value, "new merges above every base id"


def test_inspect_tiktoken_search_and_id(trained):
    out, enc = trained["out"], trained["enc"]
    ranks = dict(parse_tiktoken(out))
    r = toktok("inspect", out, "--search", " th", "--top", "100")
    expected = sorted(rank for tok, rank in ranks.items() if b" th" in tok)
    assert f"tokens containing \" th\": {len(expected)}" in r.out
    assert all(row_of(r.out, str(rank)) for rank in expected[:100])
    newline = toktok("inspect", out, "--search", r"\x0a")  # bytes as an escape
    with_newline = sum(1 for tok in ranks if b"\n" in tok)
    assert newline.out.splitlines()[1] == f'tokens containing "\\n": {with_newline}'
    merged = max(rank for tok, rank in ranks.items() if len(tok) > 3)
    token = next(tok for tok, rank in ranks.items() if rank == merged)
    one = toktok("inspect", out, "--id", merged)
    assert one.code == 0, one.err
    assert row_of(one.out, "text")[1] == quoted(token)
    parts = [int(x) for x in re.findall(r"(\d+) \"", row_of(one.out, "built from")[1])]
    assert b"".join(enc.decode_single_token_bytes(p) for p in parts) == token and len(parts) == 2
    assert all(p < merged for p in parts)
    special = toktok("inspect", out, "--id", enc.n_vocab - 1)
    assert row_of(special.out, "kind")[1] == "special token" and '"<|im_end|>"' in special.out
    missing = toktok("inspect", out, "--id", enc.n_vocab + 5)
    assert missing.code == 2 and "no token" in one_line_error(missing.err)


def test_inspect_config_output_and_usage_errors(trained, tmp_path):
    by_config = toktok("inspect", "-c", trained["config"], "--top", "2")
    assert by_config.code == 0 and by_config.out == toktok("inspect", trained["out"], "--top", "2").out
    (tmp_path / "notes.txt").write_text("hello")
    for args in (["inspect", tmp_path / "notes.txt"], ["inspect"], ["inspect", tmp_path / "nope.arrow"],
                 ["inspect", trained["work"] / "ingest" / "01-prose" / "chunk-00000.arrow", "--id", "3"]):
        r = toktok(*args, real=args == ["inspect"])
        assert r.code == 2, (args, r.out, r.err)
        one_line_error(r.err)
    other = tmp_path / "other.arrow"
    with pa.OSFile(str(other), "wb") as sink, pa.ipc.new_file(sink, pa.schema([("x", pa.int64())])) as w:
        w.write_table(pa.table({"x": [1]}))
    assert "not a toktoktok artifact" in toktok("inspect", other).err


def test_inspect_report_prints_its_tables(tmp_path):
    report = {
        "format": "toktoktok-report/1", "name": "tok",
        "compression": {
            "columns": [{"key": "bytes", "label": "bytes only"}, {"key": "after:01-a", "label": "after A"}],
            "rows": [{"phase": "A", "heldout_bytes": 1234, "bytes_per_token": {"bytes": 1.0, "after:01-a": 3.4567}},
                     {"phase": "B", "heldout_bytes": 999, "bytes_per_token": {"bytes": 1.0, "after:01-a": 2.25}}]},
        "curve": {"checkpoints": [{"vocab_tokens": 256, "label": "256 bytes", "bytes_per_token": {"A": 1.0, "B": 1.0}},
                                  {"vocab_tokens": 300, "label": "A +44", "bytes_per_token": {"A": 1.5, "B": 1.25}}]},
        "phases": [{"name": "A", "documents": 17, "merges_made": 44, "first_merges": [
            {"rank": 1417, "token": "th", "count": 99}, {"rank": 1418, "token": "he", "count": 98}]}],
    }
    path = tmp_path / "tok.report.json"
    path.write_text(json.dumps(report))
    r = toktok("inspect", path)
    assert r.code == 0, r.err
    assert row_of(r.out, "A")[1:] == ["1234", "1.0", "3.4567"]
    assert row_of(r.out, "B")[1:] == ["999", "1.0", "2.25"]
    assert row_of(r.out, "300")[1:] == ["A +44", "1.5", "1.25"]
    assert row_of(r.out, "documents")[1] == "17" and row_of(r.out, "1418")[1:] == ["he", "98"]


def test_inspect_warns_on_work_files_unlike_their_manifest(trained, tmp_path):
    """A chunk (alone or in its phase folder) or a merges file whose sha256 differs
    from its folder's manifest is shown with a warning naming it: inspect only
    looks, and the changed file is what the user wants to see."""
    for stage, phase, name in (("ingest", "01-prose", "chunk-00000.arrow"), ("train", "02-more", "merges.arrow")):
        folder = tmp_path / stage / phase
        shutil.copytree(trained["work"] / stage / phase, folder)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # intact: not a word
            assert toktok("inspect", folder / name).code == 0
        table = read_arrow(folder / name)
        changed = table.set_column(table.schema.get_field_index("count"), "count",
                                   pa.array([c * 2 for c in table["count"].to_pylist()], pa.uint64()))
        with pa.OSFile(str(folder / name), "wb") as sink, pa.ipc.new_file(sink, changed.schema) as w:
            w.write_table(changed)
        for path in (folder / name, folder):
            with pytest.warns(UserWarning, match=f"{name} .*manifest.json.* \\(damaged or changed\\)"):
                r = toktok("inspect", path)
            assert r.code == 0, r.err


def test_inspect_warns_on_a_report_unlike_its_companion(trained, tmp_path):
    for name in ("tok.tiktoken", "tok.meta.json", "tok.report.json"):
        shutil.copy(trained["out"].with_name(name), tmp_path / name)
    report = tmp_path / "tok.report.json"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert toktok("inspect", report).code == 0
    report.write_text(json.dumps({"format": "toktoktok-report/1", "phases": 5}))
    with pytest.warns(UserWarning, match="tok.report.json does not match the digest its companion .*tok.meta.json"):
        assert toktok("inspect", report).code == 0
    r = toktok("inspect", report, real=True)
    assert r.code == 0 and r.err.startswith("warning: ") and "tok.report.json" in r.err, r


def test_inspect_a_truncated_tiktoken_says_it_does_not_match_its_companion(trained, tmp_path):
    for name in ("tok.tiktoken", "tok.meta.json"):
        shutil.copy(trained["out"].with_name(name), tmp_path / name)
    tok = tmp_path / "tok.tiktoken"
    data = tok.read_bytes()
    tok.write_bytes(data[: data.rindex(b" ", 0, len(data) - 100) + 3])  # cut mid-line
    r = toktok("inspect", tok)
    assert r.code == 1
    line = one_line_error(r.err)
    assert "does not match its companion" in line and "tok.meta.json" in line and "duplicate" not in line


# ---------------------------------------------------------------- encode


def read_shards(folder: Path) -> tuple[dict, list[np.ndarray]]:
    index = json.loads((folder / "index.json").read_text())
    return index, [np.load(folder / s["file"], mmap_mode="r") for s in index["shards"]]


def test_encode_shards_decode_to_the_documents_and_separators(trained, tmp_path):
    enc, data = trained["enc"], trained["data"]
    out = tmp_path / "shards"
    r = toktok("encode", "--tokenizer", trained["out"], data / "prose.txt", data / "more", "--out", out,
               "--separator", "<|endoftext|>", "--shard-tokens", 4000, "--threads", 2)
    assert r.code == 0, r.err
    docs = documents(data / "prose.txt", data / "more")
    index, shards = read_shards(out)
    tokens = np.concatenate(shards)
    assert all(s.dtype == np.uint16 for s in shards) and index["dtype"] == "uint16"
    assert enc.decode(tokens.tolist()) == "".join(d + "<|endoftext|>" for d in docs)
    eot = enc.encode_single_token("<|endoftext|>")
    assert int((tokens == eot).sum()) == len(docs), "special tokens in the text stay text; one separator a document"
    expected = [t for d in docs for t in enc.encode_ordinary(d) + [eot]]
    assert tokens.tolist() == expected
    assert [len(s) for s in shards[:-1]] == [4000] * (len(shards) - 1) and 0 < len(shards[-1]) <= 4000
    assert [s["tokens"] for s in index["shards"]] == [len(s) for s in shards]
    assert index["tokens"] == len(tokens) and index["text_tokens"] == len(tokens) - len(docs)
    assert index["documents"] == len(docs) == sum(s["documents"] for s in index["shards"])
    ends = np.flatnonzero(tokens == eot) // 4000  # the shard each document ends in
    assert [s["documents"] for s in index["shards"]] == np.bincount(ends, minlength=len(shards)).tolist()
    nbytes = sum(len(d.encode()) for d in docs)
    assert index["bytes"] == nbytes == sum(i["bytes"] for i in index["inputs"])
    assert f"tokens: {len(tokens)}" in r.out and f"bytes: {nbytes}" in r.out
    assert f"bytes/token: {nbytes / (len(tokens) - len(docs)):.3f}" in r.out

    again = toktok("encode", "-c", trained["config"], data / "prose.txt", "--out", out, "--shard-tokens", 10**6)
    assert again.code == 0, again.err
    assert sorted(p.name for p in out.iterdir()) == [".encode.lock", "index.json", "shard-00000.npy"], \
        "stale shards removed"
    assert np.load(out / "shard-00000.npy").tolist() == [t for d in documents(data / "prose.txt")
                                                          for t in enc.encode_ordinary(d)]


def test_encode_allow_special_and_long_documents(trained, tmp_path):
    enc = trained["enc"]
    long_doc = english_text(30_000).replace("\n\n", "\n") * 80  # one document over 1 MiB: cut in parts
    rows = [{"text": "a<|im_start|>user\nhi<|im_end|><|endoftext|>"}, {"text": long_doc}, {"text": None}]
    src = tmp_path / "rows.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    r = toktok("encode", "-t", trained["out"], src, "-o", tmp_path / "o", "--allow-special")
    assert r.code == 0, r.err
    index, shards = read_shards(tmp_path / "o")
    expected = [t for row in rows[:2] for t in enc.encode(row["text"], allowed_special="all")]
    assert np.concatenate(shards).tolist() == expected
    assert index["documents"] == 2 and index["special_tokens_in_text"] == "ids" and index["forced_cuts"] == 0
    from toktoktok_stages.commands.texts import Reading, iter_parts

    parts = list(iter_parts([src], text_column="text", cut=True, special_tokens=SPECIALS, reading=Reading()))
    assert len(parts) > 2 and [end for _, end, _ in parts].count(True) == 2, "the long document came in parts"


def test_encode_uint16_or_uint32_by_the_highest_id(tmp_path):
    src = tmp_path / "t.txt"
    src.write_text("ab ab\n\nabc")
    base = {bytes([b]): b for b in range(256)}
    for top, dtype in ((65535, np.uint16), (65536, np.uint32)):
        tok = tmp_path / f"v{top}.tiktoken"
        write_tiktoken(tok, base | {b"ab": top})
        out = tmp_path / f"o{top}"
        r = toktok("encode", "-t", tok, src, "-o", out)
        assert r.code == 0, r.err
        index, shards = read_shards(out)
        assert shards[0].dtype == dtype and index["dtype"] == np.dtype(dtype).name
        assert shards[0].tolist() == [top, 32, top, 10, 10, top, 99] and index["documents"] == 2


def test_encode_usage_errors_exit_2(trained, tmp_path):
    data = trained["data"]
    bad_sep = toktok("encode", "-t", trained["out"], data / "prose.txt", "-o", tmp_path / "o1", "--separator", "</s>",
                     real=True)
    assert bad_sep.code == 2 and "not a special token" in one_line_error(bad_sep.err)
    assert not (tmp_path / "o1").exists()
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "notes.txt").write_text("mine")
    r = toktok("encode", "-t", trained["out"], data / "prose.txt", "-o", busy)
    assert r.code == 2 and "notes.txt" in one_line_error(r.err) and (busy / "notes.txt").read_text() == "mine"
    (tmp_path / "x.md").write_text("#")  # any suffix is text: encoded, not refused
    assert toktok("encode", "-t", trained["out"], tmp_path / "x.md", "-o", tmp_path / "o2").code == 0
    assert toktok("encode", data / "prose.txt", "-o", tmp_path / "o3").code == 2  # no tokenizer


def test_encode_with_the_installed_command(trained, tmp_path):
    r = toktok("encode", "-t", trained["out"], trained["data"] / "more", "-o", tmp_path / "o", "--separator",
               "<|endoftext|>", real=True)
    assert r.code == 0, r.err
    assert r.err == "", "no progress line when stderr is not a terminal"
    index, shards = read_shards(tmp_path / "o")
    assert index["tokens"] == sum(len(s) for s in shards) and f"tokens: {index['tokens']}" in r.out


# ---------------------------------------------------------------- compare


def test_compare_equals_tiktoken_counted_directly(trained, tmp_path):
    data = trained["data"]
    other = tmp_path / "bare.tiktoken"  # no .meta.json: takes --pattern
    if CL100K.is_file():
        shutil.copy(CL100K, tmp_path / "bare.tiktoken.gz")
        other = tmp_path / "bare.tiktoken.gz"
    else:
        shutil.copy(trained["out"], other)
    r = toktok("compare", trained["out"], other, "--text", data / "prose.txt", "--text", data / "more",
               "--pattern", "cl100k")
    assert r.code == 0, r.err
    encs = {"tok": trained["enc"], "bare": toktoktok.load(other, pattern="cl100k")}
    assert encs["bare"]._pat_str != trained["enc"]._pat_str
    totals = Counter()
    for text in (data / "prose.txt", data / "more"):
        docs = documents(text)
        nbytes = sum(len(d.encode()) for d in docs)
        cells = row_of(r.out, str(text))
        assert cells[1:3] == [str(len(docs)), str(nbytes)]
        totals["bytes"] += nbytes
        for i, (name, enc) in enumerate(encs.items()):
            tokens = sum(len(enc.encode_ordinary(d)) for d in docs)
            totals[name] += tokens
            assert cells[3 + i] == f"{nbytes / tokens:.3f}", (name, cells)
    total = row_of(r.out, "all")
    assert total[3:] == [f"{totals['bytes'] / totals[n]:.3f}" for n in encs]
    assert row_of(r.out, "bare")[2:4] == ["cl100k", str(totals["bare"])]
    assert row_of(r.out, "tok")[2] == "default", "the pattern of a file with a .meta.json is its own"


@pytest.mark.skipif(not CL100K.is_file(), reason="needs ../shared")
def test_inspect_a_published_file_shows_its_special_tokens(tmp_path):
    bare = tmp_path / "downloaded.tiktoken.gz"
    shutil.copy(CL100K, bare)
    r = toktok("inspect", bare, "--id", 100276)
    assert r.code == 0, r.err
    assert "100261 tokens (100256 ranks + 5 special), ids 0..100276, 16 unused ids" in r.out
    assert "OpenAI's cl100k_base" in r.out and "pattern cl100k" in r.out
    assert row_of(r.out, "kind")[1] == "special token" and '"<|endofprompt|>"' in r.out


@pytest.mark.skipif(not O200K.is_file(), reason="needs ../shared")
def test_compare_uses_a_published_files_own_pattern(trained, tmp_path):
    """o200k_base without a companion and no --pattern: counted with o200k's pattern,
    as tiktoken's own o200k_base counts, not with the default pattern."""
    bare = tmp_path / "downloaded.gz"  # any name: recognised by content
    shutil.copy(O200K, bare)
    text = trained["data"] / "prose.txt"
    r = toktok("compare", trained["out"], bare, "--text", text)
    assert r.code == 0, r.err
    assert row_of(r.out, "downloaded")[2] == "o200k"
    ranks = read_tiktoken(O200K)
    o200k = tiktoken.Encoding("o200k", pat_str=NAMED_PATTERNS["o200k"].tiktoken, mergeable_ranks=ranks,
                              special_tokens={})
    docs = documents(text)
    nbytes = sum(len(d.encode()) for d in docs)
    tokens = sum(len(o200k.encode_ordinary(d)) for d in docs)
    assert row_of(r.out, str(text))[4] == f"{nbytes / tokens:.3f}"


@pytest.mark.skipif(not CL100K.is_file(), reason="needs ../shared")
def test_encode_with_a_published_file_uses_its_special_tokens(trained, tmp_path):
    """cl100k_base without a companion: ``<|endoftext|>`` is its special token 100257 (a
    separator ``encode`` accepts), and the pattern is cl100k's."""
    bare = tmp_path / "cl100k_base.tiktoken.gz"
    shutil.copy(CL100K, bare)
    text = trained["data"] / "prose.txt"
    r = toktok("encode", "-t", bare, text, "-o", tmp_path / "shards", "--separator", "<|endoftext|>")
    assert r.code == 0, r.err
    index, shards = read_shards(tmp_path / "shards")
    assert (index["pattern"], index["separator_id"], index["dtype"]) == ("cl100k", 100257, "uint32")
    tokens = np.concatenate(shards)
    assert int((tokens == 100257).sum()) == len(documents(text))


# ---------------------------------------------------------------- clean


@pytest.fixture
def cleanable(tmp_path):
    """A config whose work directory holds stage folders (no pipeline needed)."""
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "a.txt").write_text("some text\n")
    config = write_config(tmp_path / "p", [{"name": "A", "merges": 5, "sources": [{"path": str(tmp_path / "data")}]}])
    work = work_of(config)
    for stage in ("ingest/01-a", "train/01-a", "export"):
        (work / stage).mkdir(parents=True)
        (work / stage / "manifest.json").write_text("{}")
    (work / ".lock").write_text("")
    output = tmp_path / "p" / "out" / "tok.tiktoken"
    output.write_text("kept")
    return config, work, output


def test_clean_yes_removes_only_the_work_dir(cleanable):
    config, work, output = cleanable
    r = toktok("clean", "-c", config, "--yes", real=True)
    assert r.code == 0, r.err
    assert not work.exists() and str(work) in r.out
    assert output.read_text() == "kept" and config.is_file() and (config.parent.parent / "data" / "a.txt").is_file()
    again = toktok("clean", "-c", config, "--yes")
    assert again.code == 0 and "nothing to clean" in again.out


def test_clean_asks_first(cleanable):
    from toktoktok_stages.cli.app import toktok as group

    config, work, _ = cleanable
    no = CliRunner().invoke(group, ["clean", "-c", str(config)], input="n\n")
    assert no.exit_code == 0 and work.is_dir() and "kept" in no.output
    silent = CliRunner().invoke(group, ["clean", "-c", str(config)], input="")
    assert silent.exit_code == 2 and work.is_dir() and "--yes" in silent.stderr
    yes = CliRunner().invoke(group, ["clean", "-c", str(config)], input="y\n")
    assert yes.exit_code == 0 and not work.exists()


def test_clean_refuses_a_folder_that_is_not_ours(cleanable):
    config, work, _ = cleanable
    (work / "notes.txt").write_text("mine")
    r = toktok("clean", "-c", config, "--yes")
    assert r.code == 2 and "notes.txt" in one_line_error(r.err)
    assert (work / "notes.txt").read_text() == "mine" and (work / "train" / "01-a" / "manifest.json").is_file()


def test_clean_removes_the_work_dir_of_a_real_run(trained, tmp_path):
    root = tmp_path / "copy"
    shutil.copytree(trained["root"], root)
    config = root / "p" / "config.yaml"
    config.write_text(config.read_text().replace(str(trained["root"]), str(root)))
    assert manifest(work_of(config) / "export")
    assert toktok("clean", "-c", config, "--yes").code == 0
    assert not work_of(config).exists() and (root / "p" / "out" / "tok.tiktoken").is_file()
