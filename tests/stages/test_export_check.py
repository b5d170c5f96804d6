"""The export's check against tiktoken: all pieces at once, and piece by piece only where they differ.

``tiktoken_disagreements`` has tiktoken encode a phase's pieces joined by a
separator none of them holds (two large calls, on two threads) and compares
the whole token list with ours; the pieces are encoded one by one, to count
the ones that differ, only when the lists differ or a piece is not UTF-8.
"""

from __future__ import annotations

import numpy as np
import pytest
import tiktoken

import toktoktok_stages.export as export
from tests.conftest import english_text, toktok, write_config
from toktoktok.config import load_config
from toktoktok.patterns import DEFAULT_PATTERN
from toktoktok.vocab import Vocab
from toktoktok_stages.workdir import Work


def _encoding() -> tiktoken.Encoding:
    vocab = Vocab.initial(hardcoded=False).extended([b"th", b"the", b" th", b" the", b"in", b" in", b"\xee\x80"])
    return tiktoken.Encoding(name="t", pat_str=DEFAULT_PATTERN, mergeable_ranks=vocab.ranks(), special_tokens={})


def _inventory(pieces: list[bytes]) -> tuple[np.ndarray, np.ndarray]:
    off = np.zeros(len(pieces) + 1, dtype=np.int64)
    off[1:] = np.cumsum([len(p) for p in pieces])
    return np.frombuffer(b"".join(pieces), dtype=np.uint8), off


@pytest.mark.parametrize("extra", [[], ["\ue000".encode()], [chr(c).encode() for c in range(0xE000, 0xE020)]])
def test_all_pieces_at_once_give_each_piece_s_tokens(extra):
    """The joined pieces give tiktoken's tokens of each piece in turn, also when the
    first separators occur in the pieces (the next one free is taken), and with
    empty pieces among them."""
    enc = _encoding()
    pieces = [b" the", b"", b"in the", b" then\n", b"\xe2\x82\xac the", *extra, b"the" * 50, b" "]
    buf, off = _inventory(pieces)
    with export.ThreadPoolExecutor(2) as pool:
        flat = export._tiktoken_flat(enc, buf, off, pool)
    one_by_one, _ = export._tiktoken_pieces(enc, buf.tobytes(), off, None, 0)
    assert flat is not None and flat.tolist() == one_by_one.tolist()


def test_pieces_that_are_not_utf8_or_hold_every_separator_go_one_by_one():
    enc = _encoding()
    with export.ThreadPoolExecutor(2) as pool:
        assert export._tiktoken_flat(enc, *_inventory([b" the", b"\xff\xfe"]), pool) is None
        every = "".join(export._SEPARATORS).encode()
        assert export._tiktoken_flat(enc, *_inventory([b" the", every]), pool) is None


def test_a_piece_segmented_otherwise_is_counted(tmp_path, monkeypatch):
    """With our segmentation of some pieces changed, the check counts exactly those."""
    cfg = write_config(tmp_path, [{"name": "all", "merges": 200, "sources": [{"file": str(tmp_path / "a.txt")}]}],
                       heldout_share=0)
    (tmp_path / "a.txt").write_text(english_text(60_000), encoding="utf-8")
    assert toktok("run", "-c", cfg).code == 0
    work = Work(load_config(cfg))
    vocab = work.vocab_after(1)
    enc = tiktoken.Encoding(name="t", pat_str=DEFAULT_PATTERN, mergeable_ranks=vocab.ranks(), special_tokens={})
    checked, differing = export.tiktoken_disagreements(enc, vocab, work)
    assert checked > 100 and differing == 0
    real = export.segment_after

    def changed(before, after, buf, off):
        sym, lens = real(before, after, buf, off)
        many = np.flatnonzero(lens > 1)[:3]  # three pieces of several tokens: their first token altered
        sym[off[many]] = (sym[off[many]] + 1) % 256
        return sym, lens

    monkeypatch.setattr(export, "segment_after", changed)
    assert export.tiktoken_disagreements(enc, vocab, work) == (checked, 3)
