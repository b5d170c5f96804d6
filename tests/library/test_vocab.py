"""docs/vocabulary.md: the byte order and the 1,161 hardcoded merges, rank by rank."""

from toktoktok.vocab import BYTE_ORDER, Vocab, hardcoded_merges


def test_byte_order_is_cl100k_order():
    assert sorted(BYTE_ORDER) == list(range(256))
    assert BYTE_ORDER[:94] == tuple(range(33, 127))
    assert BYTE_ORDER[94:106] == tuple(range(161, 173))
    assert BYTE_ORDER[106:188] == tuple(range(174, 256))
    rest = [b for b in range(256) if b < 33 or 127 <= b <= 160 or b == 173]
    assert list(BYTE_ORDER[188:]) == rest
    assert bytes([BYTE_ORDER[0]]) == b"!"


def test_hardcoded_ranks_and_bytes():
    v = Vocab.initial(hardcoded=True)
    assert len(v) == 256 + 1161
    tokens = [v.token(r) for r in range(len(v))]
    assert tokens[256:356] == [f"{n:02d}".encode() for n in range(100)]
    assert tokens[356:1356] == [f"{n:03d}".encode() for n in range(1000)]
    assert tokens[1356:1387] == [b" " * n for n in range(2, 33)]
    assert tokens[1387:1394] == [b"\n" * n for n in range(2, 9)]
    assert tokens[1394] == b"\r\n"
    ops = "== != <= >= += -= *= /= -> => :: // /* */ && || ++ -- << >>".split()
    assert tokens[1395:1415] == [o.encode() for o in ops]
    assert tokens[1415:1417] == [b"..", b"..."]
    assert len(set(tokens)) == len(tokens)


def test_each_hardcoded_merge_joins_two_earlier_tokens():
    v = Vocab.initial(hardcoded=True)
    ranks = v.ranks()
    for i, (left, right) in enumerate(hardcoded_merges()):
        rank = 256 + i
        assert v.token(rank) == left + right
        assert ranks[left] < rank and ranks[right] < rank
    # the split rule of runs: spaces(n//2) + spaces(n - n//2)
    assert hardcoded_merges()[1100 + 5] == (b" " * 3, b" " * 4)


def test_without_hardcoded_merges_only_bytes():
    v = Vocab.initial(hardcoded=False)
    assert len(v) == 256
    assert v.ranks() == {bytes([b]): r for r, b in enumerate(BYTE_ORDER)}


def test_from_ranks_keeps_gaps_and_extended_appends():
    ranks = {bytes([b]): b for b in range(256)} | {b"ab": 300}
    v = Vocab.from_ranks(ranks)
    assert len(v) == 301 and v.token(280) == b"" and v.ranks() == ranks
    w = v.extended([b"abc", b"xyz"])
    assert w.token(301) == b"abc" and w.token(302) == b"xyz" and len(w) == 303
