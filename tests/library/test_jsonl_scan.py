"""The numba ``.jsonl`` scanner against the reader it stands in for.

``rows.jsonl_blocks`` (a line at a time, ``json.loads``) is the reference:
``jsonl_documents`` must give the same documents, counts and errors on any
bytes, and ``scan_jsonl`` must only decide (kind 0 or 1) lines it gets
right; everything else it leaves to Python (kind 2). Typical lines must
never reach Python.
"""

from __future__ import annotations

import json
import random
import shutil
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toktoktok.sources import ReadStats, SourceError, jsonl_documents
from toktoktok.sources.jsonl_scan import DOCUMENT, NO_DOCUMENT, TO_PYTHON, scan_jsonl
from toktoktok.sources.rows import jsonl_blocks

FOLDER = Path(tempfile.mkdtemp(prefix="jsonl_scan_"))
PATH = FOLDER / "t.jsonl"


def teardown_module() -> None:
    shutil.rmtree(FOLDER, ignore_errors=True)  # made at import, for the reference reader's file


Result = tuple[dict[int, str], int, int] | str


def reference(data: bytes, column: str = "text", first_line: int = 1) -> Result:
    """``jsonl_blocks``'s documents of ``data`` ({line's byte offset: text}), the
    documents and replaced characters it counted, or its error message; ``data``'s first line is number ``first_line``
    (blank lines put before it)."""
    pad = first_line - 1
    PATH.write_bytes(b"\n" * pad + data)
    stats, docs = ReadStats(), {}
    try:
        for block in jsonl_blocks(PATH, column, 1 << 30, stats):
            docs[block.offset - pad] = docs.get(block.offset - pad, "") + block.text
    except SourceError as exc:
        return str(exc)
    return docs, stats.documents, stats.replaced_chars


def scanned(data: bytes, column: str = "text", first_line: int = 1) -> Result:
    """``jsonl_documents``'s answer, in ``reference``'s form."""
    stats = ReadStats()
    try:
        out, offsets, starts, present = jsonl_documents(data, column, path=PATH, first_line=first_line,
                                                        at_file_start=first_line == 1, stats=stats)
    except SourceError as exc:
        return str(exc)
    assert len(offsets) == len(starts) + 1 == len(present) + 1 and offsets[0] == 0 and offsets[-1] == len(out)
    assert all(offsets[i] == offsets[i + 1] for i in np.flatnonzero(~present))
    docs = {int(starts[i]): bytes(out[offsets[i]:offsets[i + 1]]).decode() for i in np.flatnonzero(present)}
    return docs, stats.documents, stats.replaced_chars


def kernel(data: bytes, column: str = "text") -> tuple[list[bytes], list[int], list[int]]:
    """``scan_jsonl``'s texts, line starts and kinds."""
    out, offsets, starts, kind = scan_jsonl(np.frombuffer(data, dtype=np.uint8),
                                            np.frombuffer(column.encode(), dtype=np.uint8))
    assert out.dtype == np.uint8 and offsets.dtype == starts.dtype == np.int64 and kind.dtype == np.int8
    texts = [bytes(out[offsets[i]:offsets[i + 1]]) for i in range(len(kind))]
    return texts, starts.tolist(), kind.tolist()


def same_as_reference(data: bytes, column: str = "text") -> None:
    """The wrapper equals the reference on ``data`` (and on its tail from each line
    on), and every line the kernel decides alone is the reference's."""
    assert scanned(data, column) == reference(data, column)
    texts, starts, kinds = kernel(data, column)
    assert starts == ([0] if data else []) + [i + 1 for i, b in enumerate(data[:-1]) if b == 10]
    for i, (start, kind) in enumerate(zip(starts, kinds)):
        line = data[start:].split(b"\n", 1)[0]
        if i:  # the tail from line i, numbered as in the file
            assert scanned(data[start:], column, i + 1) == reference(data[start:], column, i + 1)
        if kind == TO_PYTHON:
            continue
        alone = reference(line, column, i + 1)
        assert isinstance(alone, tuple) and alone[2] == 0, (line, alone)
        if kind == DOCUMENT:
            assert alone[0] == {0: texts[i].decode()}, line
        else:
            assert kind == NO_DOCUMENT and alone[0] == {} and texts[i] == b"", line


# Lines the kernel must decide alone, each with what it gives.
DECIDED = [
    (b'{"text": "plain"}', "plain"),
    (b'{"text": ""}', ""),
    (b'{"text": null}', None),
    (b'  \t\r', None),
    (b"", None),
    (br'{"text": "\" \\ \/ \b \f \n \r \t"}', "\" \\ / \b \f \n \r \t"),
    (br'{"text": "\u0041\u00e9\u4e2d\uFFFD\u0000\u001f"}', "A\u00e9\u4e2d\ufffd\x00\x1f"),
    (br'{"text": "\ud83d\ude00 \uD83D\uDE00"}', "\U0001f600 \U0001f600"),
    ('{"text": "é中😀\u2028\x7f"}'.encode(), "é中😀\u2028\x7f"),
    (b' \t{ \r"text"\t:\r "a" \t}\t \r', "a"),
    (b'{"text": "crlf"}\r', "crlf"),
    (b'{"id": 1, "n": -0.5e+10, "m": 0, "e": 1E3, "t": true, "f": false, "z": null, "text": "x"}', "x"),
    (b'{"meta": {"a": [1, [2, {"b": "}]\\""}], {}], "c": {}}, "l": [], "text": "y", "after": [{"x": [null]}]}',
     "y"),
    ('{"ключ": "значение", "text": "z", "键": "\\ud800"}'.encode(), "z"),
    (b'{"m": {"\\u0074ext": 1}, "text": "w"}', "w"),  # an escaped key in a nested object is skipped
    (b'{"textx": 1, "tex": 2, "text": "v", "Text": 3}', "v"),
]

# Lines the kernel must leave to Python.
LEFT = [
    b'{"t\\u0065xt": "escaped key"}', b'{"text": "a", "text": "b"}', b'{"text": "lone \\ud83d"}',
    b'{"text": "lone \\ude00"}', b'{"text": "bad \\ud83d\\u0041"}', b'{"text": "raw \t tab"}',
    b'{"text": "bad \\x"}', b'{"text": "\\u12g4"}', b'{"text": 5}', b'{"text": ["a"]}', b'{"text": "\xff"}',
    b'{"text": "\xed\xa0\x80"}', b'{"text": "\xc0\x80"}', b'{"id": "\xff", "text": "a"}', b"\xef\xbb\xbf{\"text\": \"a\"}",
    b"[1]", b'"text"', b"null", b"{}", b'{"other": 1}', b'{"text": "a"', b'{"text": "a"} x', b'{"text": "a",}',
    b'{"x": NaN, "text": "a"}', b'{"x": 01, "text": "a"}', b'{"x": 1., "text": "a"}', b'{"x": tru, "text": "a"}',
    b'{"x": ' + b"[" * 70 + b"]" * 70 + b', "text": "a"}', b'{"x": ' + b"9" * 300 + b', "text": "a"}',
    "\u00a0".encode(), "\u2003 ".encode(), b"\x0b", b"\x1c", b'\x0c{"text": "a"}',
]


@pytest.mark.parametrize("line, text", DECIDED, ids=[repr(d[0][:30]) for d in DECIDED])
def test_the_kernel_decides_common_lines(line, text):
    texts, _, kinds = kernel(line + b"\n")
    assert kinds == [NO_DOCUMENT if text is None else DOCUMENT]
    assert texts[0] == (b"" if text is None else text.encode())
    same_as_reference(line + b"\n")


@pytest.mark.parametrize("line", LEFT, ids=[repr(line[:30]) for line in LEFT])
def test_the_kernel_leaves_unusual_lines_to_python(line):
    assert kernel(line)[2] == [TO_PYTHON]
    same_as_reference(line)
    same_as_reference(b'{"text": "before"}\n' + line + b'\n{"text": "after"}')


def test_errors_name_the_file_and_the_line():
    data = b'{"text": "a"}\n\n{"text": 1}\n{"text"}\n'
    assert scanned(data) == f"{PATH}: line 3: 'text' is int, expected a string"
    assert scanned(data, first_line=10) == f"{PATH}: line 12: 'text' is int, expected a string"
    same_as_reference(data)
    # a last line cut short: its newline is no part of it (else json.loads reports another place)
    assert scanned(b'{"text": "a"}\n{"text": "b" \n') == f"{PATH}: line 2: invalid JSON (Expecting ',' delimiter, column 14)"
    same_as_reference(b'{"text": "a"}\n{"text": "b" \n')
    same_as_reference(b'{"text": "a"}\n{"text": "b\n')


def test_a_bom_is_dropped_only_at_the_start_of_the_file():
    data = '\ufeff{"text": "a"}\n\ufeff{"text": "b"}\n'.encode()
    assert scanned(data.split(b"\n", 1)[0]) == ({0: "a"}, 1, 0)
    assert "line 2: invalid JSON" in scanned(data)
    assert "line 2: invalid JSON" in scanned(data.split(b"\n", 1)[1], first_line=2)  # not the file's start: kept
    same_as_reference(data)


def test_replaced_characters_are_counted_as_the_reference_counts_them():
    data = b'{"text": "a\xffb"}\n{"text": "\\ud83d\\ud83d", "x": "\\udc00"}\n{"text": "\xef\xbf\xbd \\ufffd"}\n'
    docs, documents, replaced = scanned(data)
    assert list(docs.values()) == ["a\ufffdb", "\ufffd\ufffd", "\ufffd \ufffd"]
    assert (documents, replaced) == (3, 3)
    same_as_reference(data)


def test_lines_read_the_same_wherever_they_fall_among_words():
    """Plain text is read 8 bytes at a time, from the buffer's start: lines moved
    by 0 to 7 bytes (white space before the first), or a buffer starting
    anywhere in memory, read the same."""
    data = typical_lines(random.Random(5), 50)
    field = np.frombuffer(b"text", dtype=np.uint8)
    out, offsets, starts, kinds = scan_jsonl(np.frombuffer(data, dtype=np.uint8), field)
    assert kinds.tolist().count(DOCUMENT) == 49
    for shift in range(8):
        moved = np.frombuffer(b" " * shift + data, dtype=np.uint8)
        for buf in (moved, np.frombuffer(b"." * shift + moved.tobytes(), dtype=np.uint8)[shift:]):
            got = scan_jsonl(buf, field)
            assert bytes(got[0]) == bytes(out) and got[1].tolist() == offsets.tolist()
            assert got[2].tolist() == [0] + (starts[1:] + shift).tolist() and got[3].tolist() == kinds.tolist()


def test_a_stop_at_every_place_of_a_word_reads_as_json_loads():
    """Plain runs are copied 8 bytes at a time from any index: a character that
    ends a run (an escape, a quote, a multi-byte one, a bad byte) at each
    place of a word, after runs of 0 to 19 bytes, the string's end 0 to 9
    bytes from the buffer's end, read as ``json.loads`` reads them."""
    lines = []
    for run in range(20):
        for char in CHARS + LONE:
            for ascii_only in (True, False):
                text = "x" * run + char + "y" * (run % 7)
                raw = json.dumps({"text": text}, ensure_ascii=ascii_only).encode("utf-8", "surrogatepass")
                lines.append(raw)
        lines.append(b'{"text": "' + b"z" * run + b'\\x41"}')  # an escape json.loads refuses
        lines.append(b'{"text": "' + b"z" * run + b'\xff"}')  # invalid UTF-8
    same_as_reference(b"\n".join(lines) + b"\n")
    for tail in range(10):  # the closing quote near the buffer's end, no newline after it
        same_as_reference(b'{"text": "' + b"a" * (20 + tail) + b'\\n' + b"b" * tail + b'"}')


def test_another_column_and_unencodable_names():
    same_as_reference(b'{"text": "a", "body": "b"}\n{"body": null}\n', "body")
    same_as_reference('{"é": "a"}\n'.encode(), "é")
    assert scanned(b'{"text": "a"}\n', "\ud800") == f"{PATH}: line 1: no '\\ud800' field"


# characters JSON escapes or spells raw: controls, quotes, multi-byte, astral, lone
# surrogates (json.dumps writes them escaped, or raw and then invalid UTF-8)
CHARS = list("ab \"\\/\b\f\n\r\t\x00\x1f\x7fé中\u2028\ufeff\ufffd😀") + ["\ud800\udc00"]
LONE = ["\ud83d", "\ude00"]
KEYS = ["text", "id", "meta", "ключ", "键", "tex", "textx", "Text", "", "ext"]
SPACES = ["", "", " ", "\t", "\r", "  \r\t"]
ODD_LINES = [b"", b"  \t\r", b"\xc2\xa0", b"\x0b", b"null", b"[1]", b'"text"', b"{}", b"\xef\xbb\xbf",
             b'\xef\xbb\xbf{"text": "bom"}', b"\r", b"\x1c", "\u2003".encode()]
# bytes a mutation puts into a line: JSON's syntax, bad escapes, invalid UTF-8, other white space
NOISE = [b"\\", b'"', b"{", b"}", b"[", b"]", b",", b":", b"-", b".", b"e", b"0", b"\x00", b"\x1f", b"\xff", b"\xc3",
         b"\xed\xa0\x80", b"\\ud83d", b"\\ude00", b"\\u00e9", b"\\x", b"NaN", b"\xef\xbb\xbf", b"\xc2\xa0", b"\x0b",
         b"\x1c", b"\r", b"true", b"null", b"1e5", b"[[[["]


def random_text(rng: random.Random) -> str:
    if rng.random() < 0.3:
        return "".join(chr(rng.choice([rng.randrange(0x80), rng.randrange(0x800), rng.randrange(0x110000)]))
                       for _ in range(rng.randrange(8)))
    return "".join(rng.choice(LONE if rng.random() < 0.01 else CHARS) for _ in range(rng.randrange(8)))


def random_value(rng: random.Random, depth: int = 0) -> object:
    pick = rng.randrange(9 if depth < 3 else 7)
    if pick < 5:
        return [None, True, False, rng.randint(-10**20, 10**20), rng.uniform(-1e300, 1e300)][pick]
    if pick < 7:
        return random_text(rng)
    if pick == 7:
        return [random_value(rng, depth + 1) for _ in range(rng.randrange(3))]
    return {rng.choice(KEYS) if rng.random() < 0.5 else random_text(rng): random_value(rng, depth + 1)
            for _ in range(rng.randrange(3))}


def random_line(rng: random.Random) -> bytes:
    """A line: mostly an object of a few fields with ``text`` among them (maybe
    twice, escaped, null or not a string), in any spacing, ASCII-only or UTF-8;
    else something odd; some mutated."""
    if rng.random() < 0.1:
        return rng.choice(ODD_LINES)
    fields = [(rng.choice(KEYS) if rng.random() < 0.9 else random_text(rng), random_value(rng))
              for _ in range(rng.randrange(4))]
    fields.insert(rng.randrange(len(fields) + 1), ("text", random_text(rng) if rng.random() < 0.8 else random_value(rng)))
    ascii_only, space = rng.random() < 0.5, rng.choice(SPACES)

    def encode(value: object, space: str) -> bytes:
        text = json.dumps(value, ensure_ascii=ascii_only, separators=(space + "," + space, space + ":" + space))
        return text.encode("utf-8", "surrogatepass")

    parts = []
    for key, value in fields:
        raw_key = b'"t\\u0065xt"' if key == "text" and rng.random() < 0.05 else encode(key, "")
        parts.append(rng.choice(SPACES).encode() + raw_key + space.encode() + b":" + space.encode()
                     + encode(value, rng.choice(SPACES)) + rng.choice(SPACES).encode())
    line = rng.choice(SPACES).encode() + b"{" + b",".join(parts) + b"}" + rng.choice(SPACES).encode()
    for _ in range(rng.randint(1, 2) if rng.random() < 0.2 else 0):
        at, cut = rng.randrange(len(line) + 1), rng.randrange(2)
        line = line[:at] + (b"" if cut else rng.choice(NOISE)) + line[at + cut:]
    return line


def random_buffer(rng: random.Random) -> bytes:
    return b"\n".join(random_line(rng) for _ in range(rng.randint(1, 4))) + rng.choice([b"", b"\n"])


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rng=st.randoms(use_true_random=False))
def test_random_lines_read_as_the_reference_reads_them(rng):
    same_as_reference(random_buffer(rng))


def test_seeded_random_lines_read_as_the_reference_reads_them():
    rng = random.Random(11)
    kinds = []
    for _ in range(400):
        data = random_buffer(rng)
        same_as_reference(data)
        kinds += kernel(data)[2]
    # the kernel decides most lines itself, and leaves some to Python
    assert kinds.count(DOCUMENT) > len(kinds) / 4 and kinds.count(TO_PYTHON) > len(kinds) / 10


def typical_lines(rng: random.Random, n: int) -> bytes:
    """``n`` lines as datasets write them: ids, nested metadata, the text before or
    after the rest, ASCII-only escapes or UTF-8, a few null texts."""
    words = ["the", "tokenizer", "données", "中文", "😀", "a\tb", 'say "hi"', "C:\\path", "line\nbreak", "</tag>",
             "x" * 40, "\u2028", "café"]
    out = []
    for i in range(n):
        text = None if i % 97 == 0 else " ".join(rng.choice(words) for _ in range(rng.randint(0, 60)))
        meta = {"url": f"https://example.org/{i}", "score": rng.random(), "tags": ["a", "b"], "ok": True,
                "lang": {"id": "en", "p": -1.5e-3}}
        row = {"id": i, "text": text, "meta": meta} if i % 2 else {"meta": meta, "id": i, "text": text}
        out.append(json.dumps(row, ensure_ascii=i % 3 == 0, indent=None, separators=(", ", ": ") if i % 5 else (",", ":")))
    return ("\n".join(out) + "\n").encode()


def test_typical_lines_never_reach_python():
    data = typical_lines(random.Random(3), 20_000)
    kinds = np.array(kernel(data)[2])
    assert np.count_nonzero(kinds == TO_PYTHON) == 0
    assert np.count_nonzero(kinds == NO_DOCUMENT) == len(range(0, 20_000, 97))
    assert scanned(data) == reference(data)
    crlf = data.replace(b"\n", b"\r\n")
    assert np.count_nonzero(np.array(kernel(crlf)[2]) == TO_PYTHON) == 0
    assert scanned(crlf) == reference(crlf)


@pytest.mark.parametrize("batch_bytes", [1, 7, 64, 1 << 20])
def test_batches_of_any_size_give_the_same_rows(tmp_path: Path, batch_bytes: int) -> None:
    """``iter_jsonl_batches`` reads the file in chunks and carries a line that crosses
    one into a batch of its own: whatever the chunk size, the rows, their keys (byte
    offsets) and the documents counted are those of one batch of the whole file."""
    from toktoktok.sources.row_batches import iter_jsonl_batches

    rng = random.Random(batch_bytes)
    lines = []
    for i in range(60):
        choice = rng.random()
        if choice < 0.1:
            lines.append("")
        elif choice < 0.15:
            lines.append('{"text": null}')
        else:
            lines.append(json.dumps({"id": i, "text": "x\n\"é\" " * rng.randrange(0, 40)}, ensure_ascii=i % 2 == 0))
    path = tmp_path / "rows.jsonl"
    path.write_text("\n".join(lines) + ("\n" if batch_bytes % 2 else ""), encoding="utf-8")

    def rows(size: int) -> tuple[list[tuple[int, bytes | None]], int]:
        stats, out = ReadStats(), []
        for batch in iter_jsonl_batches(path, "text", stats, batch_bytes=size):
            for r in range(batch.rows):
                text = bytes(batch.data[batch.offsets[r]:batch.offsets[r + 1]]) if batch.present[r] else None
                out.append((int(batch.starts[r]), text))
        return out, stats.documents

    assert rows(batch_bytes) == rows(1 << 30)
