"""The byte kernel for .txt document ends against its regex reference.

``documents.doc_ends`` works on raw bytes; ``documents.reference_ends`` is the
rule as a regular expression on the decoded text. They must agree on every
input, including invalid UTF-8 and every white-space code point, and the
windowed reader (``sources.iter_txt_windows``) must find the same ends
however the file is cut into reads.
"""

from __future__ import annotations

import random

import numpy as np
import pytest
import regex

from toktoktok.documents import doc_ends, last_break_cut, reference_ends, space_at, valid_utf8
from toktoktok.sources import ReadStats, Utf8Decoder, iter_txt_windows

# line breaks, \s characters of every length, look-alikes, invalid and cut sequences
ALPHABET = [b"\n", b"\r", b"\n\n", b"\r\n", b" ", b"\t", b"\x0b", b"\x0c", b"\x1c", b"a", b"Z", b"#",
            "\u0085".encode(), "\u00a0".encode(), "\u1680".encode(), "\u2000".encode(), "\u200a".encode(),
            "\u200b".encode(), "\u2028".encode(), "\u202f".encode(), "\u205f".encode(), "\u3000".encode(),
            "\u3001".encode(), "é".encode(), "中".encode(), "😀".encode(), b"\xc2", b"\xe2\x80", b"\xe3\x80",
            b"\x85", b"\xff", "\ufeff".encode()]


def _byte_ends(data: bytes) -> list[int]:
    """The reference's character offsets, as offsets into the bytes.

    Ends follow a line break (ASCII, never part of a multi-byte sequence), so
    the bytes before an end decode on their own to the characters before it.
    """
    chars_to_byte = {len(data[:k].decode("utf-8", "replace")): k
                     for k in range(1, len(data) + 1) if data[k - 1] in b"\r\n"}
    return [chars_to_byte[end] for end in reference_ends(data.decode("utf-8", "replace"))]


def _random_bytes(rng: random.Random, n: int) -> bytes:
    return b"".join(rng.choice(ALPHABET) for _ in range(n))


def test_every_code_point_is_white_space_exactly_as_regex_says():
    """``space_at`` against ``regex``'s ``\\s`` for every code point (surrogates excluded)."""
    for cp in range(0x110000):
        if 0xD800 <= cp <= 0xDFFF:
            continue
        ch = chr(cp)
        data = np.frombuffer(ch.encode(), dtype=np.uint8)
        assert space_at(data, 0) == bool(regex.match(r"\s", ch)), hex(cp)


def test_kernel_equals_reference_on_random_bytes():
    rng = random.Random(7)
    checked = 0
    for _ in range(3000):
        data = _random_bytes(rng, rng.randint(0, 40))
        try:
            expected = _byte_ends(data)
        except UnicodeError:
            continue
        got = doc_ends(np.frombuffer(data, dtype=np.uint8), 0, len(data), True).tolist()
        assert got == expected, data
        checked += 1
    assert checked > 2500


def test_kernel_equals_reference_on_long_lines_at_any_alignment():
    """Long stretches without line breaks (the kernel skips 128 bytes at a time
    where no two breaks follow each other), at every alignment of the buffer,
    and parts of a buffer (``lo``, ``hi``, not ``final``)."""
    rng = random.Random(8)
    checked = 0
    for _ in range(1500):
        data = b"".join(rng.choice(ALPHABET) + b"x" * rng.choice([0, 0, 1, 7, 8, 9, 63, 64, 65, 150])
                        for _ in range(rng.randint(0, 12)))
        try:
            expected = _byte_ends(data)
        except UnicodeError:
            continue
        shift = rng.randrange(8)
        buf = np.frombuffer(b"-" * shift + data, dtype=np.uint8)[shift:]
        assert doc_ends(buf, 0, len(data), True).tolist() == expected, data
        lo = rng.randint(0, len(data))
        hi = rng.randint(lo, len(data))
        top = min(hi, len(data) - 3)
        got = doc_ends(buf, lo, hi, False).tolist()
        assert got == [e for e in expected if lo < e <= top], (data, lo, hi)
        checked += 1
    assert checked > 1000


@pytest.mark.parametrize("block_bytes", [1, 2, 3, 4, 5, 7, 63, 64, 65, 97, 130, 1 << 20])
def test_windows_find_the_same_ends_and_bytes_for_any_read_size(tmp_path, block_bytes):
    """However the file is cut into reads, the windows concatenate to the file
    (BOM dropped) and their ends are the reference's (reads of 64 bytes and more
    are windowed where they lie, their seams apart: files of many such reads)."""
    rng = random.Random(block_bytes)
    for case in range(60):
        data = _random_bytes(rng, rng.randint(0, 80 if block_bytes < 63 else 900))
        if case % 5 == 0:
            data = b"\xef\xbb\xbf" + data
        path = tmp_path / f"{case}.txt"
        path.write_bytes(data)
        body = data.removeprefix(b"\xef\xbb\xbf")
        seen, ends = b"", []
        stats = ReadStats()
        for window in iter_txt_windows(path, block_bytes=block_bytes, stats=stats):
            ends += [len(seen) + e for e in window.ends.tolist()]
            seen += bytes(window.data)
        assert seen == body
        assert ends == _byte_ends(body)
        assert stats.bytes_read == len(data)  # the byte order mark counts as read


def test_decoder_in_slices_equals_decoding_whole():
    rng = random.Random(3)
    for _ in range(300):
        data = _random_bytes(rng, rng.randint(0, 30))
        stats = ReadStats()
        decoder = Utf8Decoder(stats)
        cuts = sorted(rng.sample(range(len(data) + 1), min(3, len(data) + 1)))
        pieces = [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)])]
        sized = [decoder.decode_sized(p) for p in pieces] + [decoder.decode_sized(b"", final=True)]
        text = "".join(t for t, _ in sized)
        whole = data.decode("utf-8", "replace")
        assert text == whole
        assert [size for _, size in sized] == [len(t.encode()) for t, _ in sized]
        assert stats.replaced_chars == whole.count("\ufffd") - data.count("\ufffd".encode())


def test_valid_utf8_agrees_with_pythons_strict_decoder():
    rng = random.Random(11)
    special = [b"\xed\xa0\x80", b"\xed\x9f\xbf", b"\xf4\x90\x80\x80", b"\xf4\x8f\xbf\xbf", b"\xe0\x9f\xbf",
               b"\xe0\xa0\x80", b"\xf0\x8f\xbf\xbf", b"\xf0\x90\x80\x80", b"\xc0\x80", b"\xc1\xbf", b"\xc2\x80",
               b"\xf5\x80\x80\x80", b"\xff"]
    for _ in range(20000):
        parts = [rng.choice(ALPHABET + special) for _ in range(rng.randint(0, 6))]
        if rng.random() < 0.3:
            parts.append(bytes([rng.randrange(256) for _ in range(rng.randint(1, 4))]))
        if rng.random() < 0.5:  # ASCII runs, which the kernel skips 8 and 128 bytes at a time from an aligned byte
            parts = [p + b"a" * rng.choice([rng.randint(0, 40), rng.randint(120, 400)]) for p in parts]
        data = b"".join(parts)
        try:
            data.decode("utf-8")
            ok = True
        except UnicodeDecodeError:
            ok = False
        shift = rng.randrange(8)  # the bytes at any alignment
        buf = np.frombuffer(b"-" * shift + data, dtype=np.uint8)[shift:]
        assert valid_utf8(buf) == ok, data


def test_last_break_cut_is_the_line_break_rule_of_safe_places():
    """``last_break_cut`` finds the last place ``pretokenize``'s line-break rule
    (``[\\r\\n](?=\\S)``) allows, on random bytes of valid text."""
    rng = random.Random(5)
    for _ in range(3000):
        data = _random_bytes(rng, rng.randint(0, 30))
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            continue
        places = [len(text[: m.start() + 1].encode()) for m in regex.finditer(r"[\r\n](?=\S)", text)]
        got = last_break_cut(np.frombuffer(data, dtype=np.uint8), 0, len(data))
        assert got == (places[-1] if places else -1), data
