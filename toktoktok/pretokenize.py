"""Pre-tokenization: special tokens, safe cut places, and pieces (docs/pretokenization.md).

Three pure text tools, shared by ingest and by the tests:

- ``split_special`` cuts the special tokens out of a text (they are never
  counted), leaving the segments the pattern runs over.
- ``safe_cut`` and ``PartCutter`` split one document into bounded parts at
  the pattern's safe places (docs/pretokenization.md, Safe cut places), so
  that running the pattern part by part finds exactly the pieces it finds
  over the whole document.
- ``pieces`` runs the pattern (the ``regex`` module is the reference engine).

    >>> split_special("a<|e|>b", ["<|e|>"])
    ['a', 'b']
    >>> safe_cut("hello world")
    5
    >>> from toktoktok.patterns import resolve_pattern
    >>> pieces("Hi there<|e|>!", resolve_pattern(None), ["<|e|>"])
    ['Hi', ' there', '!']
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from functools import lru_cache

import regex

from toktoktok.errors import PatternMiss
from toktoktok.patterns import Pattern

# Why the safe places are safe for the default and cl100k patterns and their -digits
# variants ("white space" is regex's \s, the class the patterns use; a variant differs
# only in taking one number, \p{N}, where \p{N}{1,3} took up to three, an alternative
# that holds no white space and reads nothing beyond its match either way):
# - no alternative can match across one: letters, digits and contractions hold no
#   white space; the punctuation alternative may end in line breaks but never
#   continues past them; the white space alternatives stop at \S; and no
#   alternative starts with a line break or ends with a non-space followed by a space;
# - the only context a match reads beyond itself is (?!\S) and cl100k's \s++$. Before
#   a place after a line break, a white space run ending in a line break is taken
#   whole by \s*[\r\n]+ (or cl100k's \s*[\r\n]) with or without the text after it,
#   which is what \s++$ takes at the end of a part; before a place before a space,
#   no match ends in white space.
# Before a space alone (cut_at_spaces) is safe for o200k and gpt2 and their -digits
# variants too: a space only ever starts a match there (their optional first space or
# character, gpt2's `` ?\p{N}`` included, which takes one space and one number), so
# no match runs from a non-space into a following space; and (?!\S) and \s++$ are
# read only at the end of a white space run, which a cut before the run's first space
# leaves whole in the part after the cut.
# After a line break alone (cut_at_breaks) is safe for superword and superword-digits:
# a line break is never inside a match, only at its end, in a run ([\r\n]*, [\r\n]+)
# that takes every line break there is, so a match holding one ends before the next
# non-space; and what a match reads beyond itself (a character or two of lookahead:
# digits, punctuation, spaces, white space) never reads past a line break.
# A cut must also not fall strictly inside an occurrence of a special token (of any
# token, at any position, overlapping ones included): then the special tokens found
# part by part are the ones found in the whole text.
#
# A safe place p is the index of a space preceded by non white space ...
_SPACE_AFTER_WORD = regex.compile(r"(?<=\S) ")
_SPACE_AFTER_WORD_REV = regex.compile(r"(?r)(?<=\S) ")
# ... or the index after a line break followed by non white space.
_BREAK_BEFORE_WORD = regex.compile(r"[\r\n](?=\S)")
_BREAK_BEFORE_WORD_REV = regex.compile(r"(?r)[\r\n](?=\S)")


@lru_cache(maxsize=64)
def _special_regex(tokens: tuple[str, ...], as_bytes: bool = False) -> regex.Pattern:
    """One alternation of the escaped tokens, longest first (leftmost-longest);
    ``as_bytes``: of their UTF-8 bytes, to split UTF-8 text the same way."""
    ordered = sorted(set(tokens), key=lambda t: (-len(t), t))
    if as_bytes:
        return regex.compile(b"|".join(regex.escape(t.encode("utf-8")) for t in ordered))
    return regex.compile("|".join(regex.escape(t) for t in ordered))


@lru_cache(maxsize=64)
def _compiled(pattern: str) -> regex.Pattern[str]:
    return regex.compile(pattern)


def split_special(text: str | bytes, special_tokens: Sequence[str]) -> list:
    """The non-empty segments of ``text`` between special token occurrences.

    Tokens are matched left to right, the longest one at a position first
    (as tiktoken does when no token is inside another); they are dropped.
    UTF-8 ``bytes`` are split at the same places as the text they spell.

        >>> split_special("<|a|><|a|>x<|a|", ["<|a|>"])
        ['x<|a|']
        >>> split_special("é<|a|>ü".encode(), ["<|a|>"])
        [b'\\xc3\\xa9', b'\\xc3\\xbc']
    """
    tokens = tuple(t for t in special_tokens if t)
    if not tokens:
        return [text] if text else []
    return [seg for seg in _special_regex(tokens, isinstance(text, bytes)).split(text) if seg]


def pieces(text: str, pattern: Pattern, special_tokens: Sequence[str] = (), *,
           timeout: float | None = None) -> list[str]:
    """The pattern's matches over each segment between special tokens.

        >>> from toktoktok.patterns import resolve_pattern
        >>> pieces("it's 2024\\n", resolve_pattern(None))
        ['it', "'s", ' ', '202', '4', '\\n']
    """
    compiled = _compiled(pattern.python)
    out: list[str] = []
    for seg in split_special(text, special_tokens):
        if compiled.groups:  # a custom regex with groups: keep whole matches
            out.extend(m.group() for m in compiled.finditer(seg, timeout=timeout))
        else:
            out.extend(compiled.findall(seg, timeout=timeout))
    return out


def special_occurrences(texts: Sequence[str | bytes], special_tokens: Sequence[str]) -> dict[str, int]:
    """How often each special token occurs in ``texts`` (str or UTF-8 bytes): they
    are cut out of the training text, so a token that is also an ordinary word is
    worth a warning (ingest counts them).

        >>> special_occurrences(["a<|e|>b<|e|>", b"<|e|>"], ("<|e|>", "<|x|>"))
        {'<|e|>': 3, '<|x|>': 0}
    """
    found = dict.fromkeys(special_tokens, 0)
    encoded = {tok: tok.encode("utf-8") for tok in special_tokens}
    for text in texts:
        for tok in special_tokens:
            found[tok] += text.count(encoded[tok] if isinstance(text, bytes) else tok)
    return found


def count_with_regex(texts: Sequence[str], pattern: Pattern, special_tokens: Sequence[str] = (), *,
                timeout: float | None = None) -> tuple[list[bytes], list[int]]:
    """Distinct pieces of ``texts`` as UTF-8 and their counts (order of first occurrence).

    This runs in ingest's worker processes for patterns without the numba
    scanner: the module imports only ``regex``, so a worker stays small.
    The config's probe (``patterns.probe_pattern``) cannot prove a custom
    pattern covers every text, so the batch is checked here: no piece may be
    empty, and the pieces' lengths (each distinct piece's length times its
    count) must add up to the segments' (the matches never overlap, so then
    they tile every segment). That costs a pass over the distinct pieces, not
    over every match; only a batch that fails is searched again for the first
    place, which ``PatternMiss`` names.

        >>> from toktoktok.patterns import resolve_pattern
        >>> count_with_regex(["a a a"], resolve_pattern(None))
        ([b'a', b' a'], [1, 2])
    """
    compiled = _compiled(pattern.python)
    counted: Counter[str] = Counter()
    covered = 0
    for text in texts:
        for seg in split_special(text, special_tokens):
            covered += len(seg)
            if compiled.groups:  # a custom regex with groups: keep whole matches
                counted.update(m.group() for m in compiled.finditer(seg, timeout=timeout))
            else:
                counted.update(compiled.findall(seg, timeout=timeout))
    if "" in counted or sum(len(p) * n for p, n in counted.items()) != covered:
        misses = (_miss(compiled, text, special_tokens, i) for i, text in enumerate(texts))
        raise next((m for m in misses if m is not None), PatternMiss("the pattern does not tile a batch"))
    return [p.encode("utf-8", "surrogatepass") for p in counted], list(counted.values())


def _miss(compiled: regex.Pattern[str], text: str, special_tokens: Sequence[str], index: int = 0) -> PatternMiss | None:
    """The first place in ``text`` (special tokens left out) the pattern does not tile, or None.

        >>> miss = _miss(regex.compile(r"[a-z]+|\\s+"), "ok <|e|>fine, no", ["<|e|>"])
        >>> print(miss, miss.offset)
        the pattern leaves ',' (U+002C, category Po) unmatched, after 'ok <|e|>fine': tiktoken would drop that text 12
    """
    from toktoktok.patterns import first_miss, miss_words

    tokens = tuple(t for t in special_tokens if t)
    bounds = [0]
    if tokens:
        for m in _special_regex(tokens).finditer(text):
            bounds += [m.start(), m.end()]
    bounds.append(len(text))
    for start, end in zip(bounds[::2], bounds[1::2]):
        miss = first_miss(compiled, text[start:end])
        if miss is None:
            continue
        at = start + miss[0]
        what = miss_words(text[start:end], *miss)
        harm = "panic there" if miss[0] == miss[1] else "drop that text"
        return PatternMiss(f"the pattern {what}, after {text[max(0, at - 30):at]!r}: tiktoken would {harm}",
                           index=index, offset=at)
    return None


def _inside_special(text: str, p: int, special_tokens: Sequence[str]) -> bool:
    """Whether some occurrence of a special token starts before p and ends after it.

    Any occurrence lying within ``text[p-len+1 : p+len-1]`` covers p strictly.
    """
    for tok in special_tokens:
        n = len(tok)
        if n > 1 and tok in text[max(0, p - n + 1) : p + n - 1]:
            return True
    return False


def _last_char_safe(text: str, lo: int, hi: int, breaks: bool = True, spaces: bool = True) -> int:
    """The last p with lo < p < hi meeting the character rule, else 0.

    ``breaks=False`` uses the space rule alone (o200k, gpt2), ``spaces=False``
    the line-break rule alone (superword)."""
    m = _BREAK_BEFORE_WORD_REV.search(text, lo, hi) if breaks else None
    best = m.start() + 1 if m else 0
    m = _SPACE_AFTER_WORD_REV.search(text, max(lo + 1, best + 1), hi) if spaces else None
    return m.start() if m else best


def _first_char_safe(text: str, lo: int, hi: int, breaks: bool = True, spaces: bool = True) -> int:
    """The first p with lo < p < hi meeting the character rule, else 0."""
    m = _BREAK_BEFORE_WORD.search(text, lo, hi) if breaks else None
    best = m.start() + 1 if m else 0
    m = _SPACE_AFTER_WORD.search(text, lo + 1, best if best else hi) if spaces else None
    return m.start() if m else best


def _last_safe(text: str, lo: int, hi: int, special_tokens: Sequence[str], breaks: bool = True,
               spaces: bool = True) -> int:
    """The last safe p with lo < p < hi (0 if none)."""
    while lo + 1 < hi:
        p = _last_char_safe(text, lo, hi, breaks, spaces)
        if not p or not _inside_special(text, p, special_tokens):
            return p
        hi = p
    return 0


def _first_safe(text: str, lo: int, hi: int, special_tokens: Sequence[str], breaks: bool = True,
                spaces: bool = True) -> int:
    """The first safe p with lo < p < hi (0 if none)."""
    while lo + 1 < hi:
        p = _first_char_safe(text, lo, hi, breaks, spaces)
        if not p or not _inside_special(text, p, special_tokens):
            return p
        lo = p
    return 0


def safe_cut(text: str, special_tokens: Sequence[str] = ()) -> int:
    """The last index 0 < p < len(text) where text may be cut, or 0 if none.

    Safe: after a line break before non white space, or after non white space
    before a space, and never strictly inside a special token.

        >>> safe_cut("a b\\nc")
        4
        >>> safe_cut("<|x y|>", ["<|x y|>"])
        0
    """
    return _last_safe(text, 0, len(text), tuple(special_tokens))


class PartCutter:
    """Cuts one document, fed as blocks of text, into parts at safe places.

    ``feed`` returns the parts completed so far (each ends at a safe place
    and is about ``part_chars`` long, longer when safe places are rare);
    ``finish`` returns the rest and makes the cutter ready for the next
    document. The parts concatenate to the document. With ``cut=False``
    (patterns matched over whole documents) the document is one part.

    Safe places are searched backwards with two small regexes (one starting
    with a literal space, one with a line break), which the engine skips to
    quickly. The cutter remembers how far it has found no safe place, so a
    long run without one is scanned once, not once per block. A run with no
    safe place at all longer than ``part_chars + max_piece_chars`` is cut
    anyway (counted in ``forced_cuts``): the one place where the memory bound
    wins over exactness.

        >>> c = PartCutter(cut=True, part_chars=4)
        >>> c.feed("one two ") + c.feed("three") + c.finish()
        ['one', ' two', ' three']
    """

    def __init__(
        self,
        *,
        cut: bool,
        breaks: bool = True,
        spaces: bool = True,
        special_tokens: Sequence[str] = (),
        part_chars: int = 1 << 20,
        max_piece_chars: int = 1 << 20,
    ) -> None:
        self.cut = cut
        self.breaks = breaks  # False: only the space rule is safe (o200k, gpt2)
        self.spaces = spaces  # False: only the line-break rule is safe (superword)
        self.special_tokens = tuple(t for t in special_tokens if t)
        self.part_chars = max(1, part_chars)
        self.max_piece_chars = max(1, max_piece_chars)
        self.forced_cuts = 0
        # A place p < len - hold is safe or not for good: every token
        # occurrence that could cover it already lies inside the carried text.
        self._hold = max((len(t) for t in self.special_tokens), default=0) - 2
        self._hold = max(0, self._hold)
        self._carry: list[str] = []
        self._size = 0
        self._clean = 0  # no safe place p with 0 < p <= _clean in the carry
        self._dry = False  # the carry holds no safe place below its hold-back
        self._tail = ""  # the carry's last (_hold + 2) characters, when dry

    def feed(self, block: str) -> list[str]:
        """Add a block of the document; return the parts now complete."""
        if not block:
            return []
        self._carry.append(block)
        self._size += len(block)
        if not self.cut or self._size <= self.part_chars:
            return []
        if self._dry and not self._may_cut(block):
            return []
        return self._cut(final=False)

    def finish(self) -> list[str]:
        """Return the rest of the document as parts; reset for the next one."""
        parts = self._cut(final=True) if self.cut and self._size > self.part_chars else []
        rest = self.take_rest()
        if rest:
            parts.append(rest)
        return parts

    def take_rest(self) -> str:
        """The text fed but not yet returned as parts (it starts at a safe place),
        which the caller now owns; the document goes on, the cutter is empty."""
        rest = "".join(self._carry)
        self._carry, self._size, self._clean, self._dry, self._tail = [], 0, 0, False, ""
        return rest

    def _may_cut(self, block: str) -> bool:
        """After a dry search: can this block make a cut possible?

        Only a place near or in the new block can be newly safe, so a quick
        look at the character rule there saves joining the carry again.
        """
        window = self._tail + block
        self._tail = window[-(self._hold + 2) :]
        if self._size > self.part_chars + self.max_piece_chars:
            return True
        return _first_char_safe(window, 0, len(window), self.breaks, self.spaces) > 0

    def _cut(self, *, final: bool) -> list[str]:
        """Cut complete parts off the carried text, keeping the remainder."""
        text = "".join(self._carry)
        hi = len(text) if final else len(text) - self._hold
        parts: list[str] = []
        start = 0
        while len(text) - start > self.part_chars:
            end = self._next_end(text, start, hi, final=final)
            if not end:
                break
            parts.append(text[start:end])
            start = end
        rest = text[start:]
        self._carry = [rest] if rest else []
        self._size = len(rest)
        self._clean = max(0, self._clean - start)
        self._dry = self._clean >= hi - start - 1
        self._tail = text[-(self._hold + 2) :]
        return parts

    def _next_end(self, text: str, start: int, hi: int, *, final: bool) -> int:
        """Where the part starting at ``start`` ends; 0 if not known yet.

        Prefers the last safe place within ``part_chars``, else the first one
        after; with none, forces a cut once the carry is too long.
        """
        lo = max(start, self._clean)
        window = min(start + self.part_chars + 1, hi)
        end = _last_safe(text, lo, window, self.special_tokens, self.breaks, self.spaces)
        if end:
            self._clean = max(self._clean, window - 1)
            return end
        end = _first_safe(text, max(lo, window - 1), hi, self.special_tokens, self.breaks, self.spaces)
        if end:
            return end
        self._clean = max(self._clean, hi - 1)
        if not final and len(text) - start > self.part_chars + self.max_piece_chars:
            self.forced_cuts += 1
            return len(text)
        return 0
