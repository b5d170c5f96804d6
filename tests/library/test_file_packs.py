"""``read_pack`` against the Python reader it stands in for.

``local.whole_file`` and ``local.whole_is_utf8`` (one file at a time, in
Python) are the reference: a file the pack reads must be one they read
whole as plain UTF-8, with the same text after its byte order mark and the
documents ``doc_ends`` finds; every other file must be left to Python, and
a file that does not fit must be left for the next pack, never cut.
"""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest

from toktoktok import documents
from toktoktok.sources.decoding import SNIFF_BYTES
from toktoktok.sources.file_packs import NOT_READ, READ, TO_PYTHON, read_pack
from toktoktok_stages.ingest.local import whole_file, whole_is_utf8

PIECES = [b"int x;", b"\n", b"\n\n", b"\r\n\r\n", b" ", b"\t", "é".encode(), "日本".encode(), "🙂".encode(),
          b"\xef\xbb\xbf", b"\xff\xfe", b"\x00", b"\xc3", b"\xed\xa0\x80", b"\n\n ", b"a" * 300]


def _random_file(rng: random.Random) -> bytes:
    head = rng.choice([b"", b"", b"\xef\xbb\xbf", b"\xff\xfe", b"\x00\x00\xfe\xff"])
    return head + b"".join(rng.choice(PIECES[:9] if rng.random() < 0.7 else PIECES) for _ in range(rng.randrange(40)))


def _documents(text: bytes, blank: bool) -> int:
    if not text:
        return 0
    if not blank:
        return 1
    ends = documents.doc_ends(np.frombuffer(text, np.uint8), 0, len(text), True)
    return len(ends) + (not len(ends) or int(ends[-1]) < len(text))


@pytest.mark.parametrize("seed", range(6))
def test_read_pack_reads_what_python_reads(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    paths, blank = [], []
    for i in range(120):
        path = tmp_path / f"f{i:03d}{rng.choice(['.txt', '.c', ''])}"
        data = _random_file(rng)
        if rng.random() < 0.05:
            data = b"x" * 5000  # over max_file below: left to Python, read as it goes
        if rng.random() < 0.03:
            data += b"\x00"  # a NUL past the sniffed head: read
            data = b"y" * SNIFF_BYTES + data
        path.write_bytes(data)
        paths.append(path)
        blank.append(rng.random() < 0.5)
    if seed == 0:
        paths.append(tmp_path / "missing.txt")  # cannot be opened: Python says why
        blank.append(False)
    start, seen = 0, 0
    while start < len(paths):
        pack = read_pack(paths[start:], blank=blank[start:], max_file=4096 + SNIFF_BYTES + 1, capacity=1)
        count = int(np.count_nonzero(pack.status != NOT_READ))
        assert count >= 1 and (pack.status[count:] == NOT_READ).all()
        if count < len(pack.status):  # it stopped where the next file did not fit: that one is whole and plain
            assert whole_file(paths[start + count]) is not None
        for k in range(count):
            path = paths[start + k]
            if not path.exists():
                assert pack.status[k] == TO_PYTHON
                continue
            data = path.read_bytes()
            plain = (len(data) <= 4096 + SNIFF_BYTES + 1 and whole_is_utf8(data)
                     and data.find(b"\x00", 0, SNIFF_BYTES + (3 if data.startswith(b"\xef\xbb\xbf") else 0)) < 0)
            assert pack.status[k] == (READ if plain else TO_PYTHON), path.name
            if plain:
                text = data[3:] if data.startswith(b"\xef\xbb\xbf") else data
                assert bytes(pack.text(k)) == text
                assert pack.sizes[k] == len(data)
                assert pack.documents[k] == _documents(text, blank[start + k])
        start += count
        seen += 1
    assert seen > 1  # the capacity made several packs


def test_a_file_that_grew_is_left_to_python(tmp_path: Path) -> None:
    """A file is read up to one byte past the size it had when opened: one that has
    more is left to Python (which reads on to its end), never cut."""
    path = tmp_path / "a.txt"
    path.write_bytes(b"one two")
    pack = read_pack([path], blank=[False])
    assert pack.status.tolist() == [READ] and bytes(pack.text(0)) == b"one two"
    big = tmp_path / "big.txt"
    big.write_bytes(b"z" * 100)
    assert read_pack([big], blank=[False], max_file=99).status.tolist() == [TO_PYTHON]
    assert read_pack([big], blank=[False], max_file=100).status.tolist() == [READ]
