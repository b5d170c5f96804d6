"""Sampling units (``toktoktok.units``): the streamed splitter finds exactly the
units of the plain reference, however the file is read; units stay within the
bound where safe places allow; pieces over the units equal the pattern over the
whole document (cuts are at safe places).
"""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest
import regex

from toktoktok import units
from toktoktok.patterns import NAMED_PATTERNS, resolve_pattern
from toktoktok.sources import iter_txt_windows, txt_windows


def _bytes(seed: int, size: int) -> bytes:
    """Text with every kind of place the rule looks at: words, spaces, line breaks
    (\\n, \\r, blank lines, indented lines), Unicode white space, multi-byte letters,
    invalid bytes, special tokens, and long stretches without any safe place."""
    rng = random.Random(seed)
    atoms = [b"word", b" ", b" ", b"\n", b"\r\n", b"\n\n", b"\n\n ", b"  x", "\u3000é".encode(), "\u00a0".encode(),
             b"\xff", b"\xe2\x80", b"<|e|>", b"\r", b"\t", "ü".encode(), b"x" * 300, b"y" * 40]
    out = []
    while sum(map(len, out)) < size:
        out.append(rng.choice(atoms))
    return b"".join(out)[:size]


def _streamed(path: Path, bound: int, block: int, *, cut: bool, breaks: bool, spaces: bool = True, tokens=(),
              room: bool = False) -> tuple[list, int]:
    """The units the splitter finds reading ``path`` ``block`` bytes at a time;
    ``room``: it may put the bytes it holds in the room before each window."""
    split = units.Splitter(bound, cut=cut, breaks=breaks, spaces=spaces, special_tokens=tokens)
    ends: list[int] = []
    data = b""
    for w in iter_txt_windows(path, block_bytes=block):
        win = split.feed(w.data, w.ends, buffer=w.buffer, at=w.at) if room else split.feed(w.data, w.ends)
        assert win.start == len(data)
        data += bytes(win.data)
        ends += (win.ends + win.start).tolist()
    win = split.feed(b"", np.zeros(0, dtype=np.int64), final=True)
    data += bytes(win.data)
    ends += (win.ends + win.start).tolist()
    if len(data) and (not ends or ends[-1] != len(data)):
        ends.append(len(data))
    assert data == path.read_bytes()
    out = list(zip([0, *ends], ends))
    assert split.units == len(out)
    return out, split.over_bound


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize(("cut", "breaks", "spaces"), [(True, True, True), (True, False, True), (True, True, False),
                                                        (False, False, False)])
@pytest.mark.parametrize("room", [0, 8, 64, 1 << 16])
def test_the_splitter_finds_the_reference_units_for_any_read_size(tmp_path, monkeypatch, seed, cut, breaks, spaces,
                                                                  room):
    """Streamed units are the reference's for any read size, whether the bytes
    the splitter holds go in the room before a window (``room`` bytes: they fit
    it, or not, and then both are copied) or are always copied with it (0)."""
    if room:
        monkeypatch.setattr(txt_windows, "ROOM_BYTES", room)
    data = _bytes(seed, 6000)
    path = tmp_path / "a.txt"
    path.write_bytes(data)
    bound = [64, 200, 1000][seed % 3]
    tokens = ["<|e|>"] if seed % 2 else []
    want = units.reference_units(data, bound, cut=cut, breaks=breaks, spaces=spaces, tokens=tokens)
    assert len(want) > 3
    for block in (1, 7, 100, 1 << 20):
        got, over = _streamed(path, bound, block, cut=cut, breaks=breaks, spaces=spaces, tokens=tokens, room=room > 0)
        assert got == want, (block, room, got[:5], want[:5])
        assert over == sum(e - s > bound for s, e in want)


def test_a_window_is_not_copied_when_the_held_bytes_fit_its_room(tmp_path):
    path = tmp_path / "a.txt"
    path.write_bytes(b"\xef\xbb\xbf" + b"one\n\ntwo\n\n" * 5000)  # a byte order mark: it joins the room
    split = units.Splitter(1 << 20, cut=True, breaks=True)
    windows = list(iter_txt_windows(path, block_bytes=4096))
    windows = windows[:-1]  # the last (the final few bytes held for context) comes as bytes
    assert len(windows) > 10 and all(w.buffer is not None for w in windows)
    shared = [np.shares_memory(np.frombuffer(split.feed(w.data, w.ends, buffer=w.buffer, at=w.at).data, np.uint8),
                               w.buffer) for w in windows]
    assert all(shared)
    split = units.Splitter(1 << 20, cut=True, breaks=True)
    copied = [np.shares_memory(np.frombuffer(split.feed(w.data, w.ends).data, np.uint8), w.buffer) for w in windows]
    assert not any(copied)


def test_parts_are_within_the_bound_where_safe_places_allow():
    text = ("the quick brown fox jumps over the lazy dog. " * 5000).encode()
    bound = 4096
    got = units.reference_units(text, bound, cut=True, breaks=True)
    assert len(got) > 100 and max(e - s for s, e in got) <= bound // 8
    one_long_word = b"x" * 10_000
    assert units.reference_units(one_long_word, bound, cut=True, breaks=True) == [(0, 10_000)]


@pytest.mark.parametrize("name", list(NAMED_PATTERNS))
def test_pieces_over_the_parts_are_the_pieces_over_the_whole_document(name):
    pattern = resolve_pattern(name)
    rng = random.Random(name)
    words = ["the", "cat", "  ", " ", "\n", "\n\n", "\r\n", "'s", "123456", " 12", "!!", "\t", "é", "ü\u3000", "/", "\n/",
             "x\n ", " \n", "A", "Hello", "\u00a0"]
    for _ in range(20):
        text = "".join(rng.choice(words) for _ in range(3000))
        parts, _ = units.row_parts(text, 512, **pattern.cut_rule())
        assert len(parts) > 10
        assert "".join(p for _, p in parts) == text
        assert [o for o, _ in parts] == [len(text[: len("".join(p for _, p in parts[:k]))].encode())
                                         for k in range(len(parts))]
        compiled = regex.compile(pattern.python)
        assert [m for _, p in parts for m in compiled.findall(p)] == compiled.findall(text)
