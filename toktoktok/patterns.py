"""Pre-tokenization patterns: the default one and the named ones.

A pattern has two spellings: the string tiktoken is given (``tiktoken``), and
the string the Python ``regex`` module runs (``python``), which is our
reference engine. They differ only where the engines read a construct
differently: tiktoken's engine reads ``$`` as end of text, ``regex`` reads it
as "end of text or before a final newline", so ``$`` becomes ``\\Z``.

Each named pattern is one row of ``_TABLE``; its ``-digits`` variant takes
one number at a time (``\\p{N}`` for ``\\p{N}{1,3}``), as Qwen2's pattern does.

    >>> resolve_pattern("cl100k").name
    'cl100k'
    >>> resolve_pattern(None).name
    'default'
    >>> resolve_pattern(DEFAULT_DIGITS_PATTERN).name   # a string equal to a named one
    'default-digits'
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from toktoktok.errors import PatternError, UnsafePattern

DEFAULT_PATTERN = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"""
    r""" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
)

CL100K_PATTERN = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+|"""
    r""" ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
)

O200K_PATTERN = "|".join(
    [
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]
)

GPT2_PATTERN = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s"""

# The longest run of text between isolated pieces that is one superword piece.
SUPERWORD_RUN = 1024

# SuperBPE's stage-2 rule (Liu et al., 2025): numbers, runs of two or more
# punctuation characters and spaces before white space are isolated, and the
# text between them is one piece, spaces and all. Written to cover every
# character, as tiktoken needs: the fourth alternative is "the text between",
# a character at a time while no other alternative starts; it stops at a line
# break, so that a line break before a non-space is a safe place to cut, and
# after SUPERWORD_RUN characters, since tiktoken's engine keeps a backtracking
# state for each character of it and gives up on a long run. SuperBPE's ``[\r\n/]*``
# loses its slash for the same safe places (o200k's is why its line breaks
# are not safe).
SUPERWORD_PATTERN = "|".join(
    [
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]{2,}[\r\n]*""",
        r""" +(?!\S)""",
        r"""(?:(?!\p{N}| ?[^\s\p{L}\p{N}]{2}| +(?!\S))[^\r\n]){1,%d}[\r\n]*""" % SUPERWORD_RUN,
        r"""[\r\n]+""",
    ]
)


def _single_digits(pattern: str, run: str, one: str) -> str:
    """``pattern`` with its one number alternative ``run`` written ``one``."""
    if pattern.count(run) != 1:  # pragma: no cover - the patterns above are fixed
        raise AssertionError(f"{run!r} is not once in {pattern!r}")
    return pattern.replace(run, one)


# One number at a time: Qwen2's pattern is DEFAULT_DIGITS_PATTERN. gpt2's
# optional space stays with the first digit (`` ?\p{N}``), as it stays with
# a run of letters or punctuation.
DEFAULT_DIGITS_PATTERN = _single_digits(DEFAULT_PATTERN, r"\p{N}{1,3}", r"\p{N}")
CL100K_DIGITS_PATTERN = _single_digits(CL100K_PATTERN, r"\p{N}{1,3}+", r"\p{N}")
O200K_DIGITS_PATTERN = _single_digits(O200K_PATTERN, r"\p{N}{1,3}", r"\p{N}")
GPT2_DIGITS_PATTERN = _single_digits(GPT2_PATTERN, r" ?\p{N}++", r" ?\p{N}")
SUPERWORD_DIGITS_PATTERN = _single_digits(SUPERWORD_PATTERN, r"\p{N}{1,3}|", r"\p{N}|")


@dataclass(frozen=True)
class Pattern:
    """A pre-tokenization pattern in both engines' spelling.

    ``cut_at_safe_places`` says whether a text may be cut at docs/pretokenization.md's safe
    places (after a line break before a non-space, or after a non-space
    before a space) without changing what the pattern finds.
    ``cut_at_spaces`` says whether the second kind alone is safe: true for
    o200k and gpt2 (and their ``-digits`` variants) too, whose matches never run from a non-space into a
    following space (a space only ever starts a match), but whose line
    breaks are not safe (o200k's punctuation run swallows ``/`` after line
    breaks, gpt2's ``\\s++$`` ends differently at the end of a text).
    ``cut_at_breaks`` (a property) says whether the first kind is safe: true
    for superword too, whose pieces run across spaces but end at line breaks.
    A pattern with no safe place is matched over whole documents.

        >>> NAMED_PATTERNS["superword"].cut_rule()
        {'cut': True, 'breaks': True, 'spaces': False}
    """

    name: str
    tiktoken: str
    python: str
    cut_at_safe_places: bool
    cut_at_spaces: bool = False

    @property
    def cut_at_breaks(self) -> bool:
        """Whether a place after a line break before a non-space is safe (a
        property, not a field: the config's fingerprint holds the fields)."""
        return self.cut_at_safe_places or self.name in _BREAKS_ONLY

    def cut_rule(self) -> dict[str, bool]:
        """The cutters' keywords for this pattern (``units.Splitter``, ``pretokenize.PartCutter``):
        ``cut`` (any place is safe), ``breaks`` and ``spaces`` (which kinds are)."""
        breaks = self.cut_at_breaks
        spaces = self.cut_at_safe_places or self.cut_at_spaces
        return {"cut": breaks or spaces, "breaks": breaks, "spaces": spaces}


def _python_spelling(tiktoken_pattern: str) -> str:
    """tiktoken's ``$`` is end of text; ``regex`` needs ``\\Z`` for that."""
    return tiktoken_pattern.replace("$", r"\Z")


# The numba scanner's rules (``toktoktok.scanner``), chosen at run time by one
# int, so that a new named pattern adds no compiled kernel: a base rule, plus
# SCAN_SINGLE_DIGITS for one number a piece.
SCAN_DEFAULT, SCAN_CL100K, SCAN_O200K, SCAN_GPT2, SCAN_SUPERWORD = 0, 1, 2, 3, 8
SCAN_SINGLE_DIGITS = 4

# Every named pattern, the one place that lists them: name, tiktoken's
# spelling, the places where its text may be cut (both kinds, spaces or
# breaks; why each is safe: the comment at the top of ``pretokenize``), the
# scanner's rule. A new one is a row here
# and, when no rule fits, a SCAN_ value that ``scanner.piece_end`` branches on;
# the tests that prove the scanner, the cuts and the Hugging Face export run
# over this table, so they take the row in too.
_TABLE = (
    ("default", DEFAULT_PATTERN, "both", SCAN_DEFAULT),
    ("cl100k", CL100K_PATTERN, "both", SCAN_CL100K),
    ("o200k", O200K_PATTERN, "spaces", SCAN_O200K),
    ("gpt2", GPT2_PATTERN, "spaces", SCAN_GPT2),
    ("default-digits", DEFAULT_DIGITS_PATTERN, "both", SCAN_DEFAULT | SCAN_SINGLE_DIGITS),
    ("cl100k-digits", CL100K_DIGITS_PATTERN, "both", SCAN_CL100K | SCAN_SINGLE_DIGITS),
    ("o200k-digits", O200K_DIGITS_PATTERN, "spaces", SCAN_O200K | SCAN_SINGLE_DIGITS),
    ("gpt2-digits", GPT2_DIGITS_PATTERN, "spaces", SCAN_GPT2 | SCAN_SINGLE_DIGITS),
    ("superword", SUPERWORD_PATTERN, "breaks", SCAN_SUPERWORD),
    ("superword-digits", SUPERWORD_DIGITS_PATTERN, "breaks", SCAN_SUPERWORD | SCAN_SINGLE_DIGITS),
)
NAMED_PATTERNS: dict[str, Pattern] = {
    name: Pattern(name, spelling, _python_spelling(spelling), places == "both", places != "breaks")
    for name, spelling, places, _ in _TABLE
}
_BREAKS_ONLY = frozenset(name for name, _, places, _ in _TABLE if places == "breaks")
# The scanner's rule for each named pattern (a custom regex has none).
SCANNER_RULES: dict[str, int] = {name: rule for name, *_, rule in _TABLE}


def resolve_pattern(value: str | None) -> Pattern:
    """Map a config's ``pattern:`` value (None, a name, or a regex) to a Pattern.

    A string equal to a named pattern's tiktoken spelling is that pattern. A
    custom regex is used as written by both engines and matched over whole
    documents. Raises ``PatternError`` (a ``ValueError``) when a custom regex does not compile, and
    ``UnsafePattern`` (a ``ValueError``) when ``probe_pattern`` finds it can
    match the empty string or leave a character unmatched.

        >>> try:
        ...     resolve_pattern(r"\\w+|\\s+")
        ... except UnsafePattern as exc:
        ...     print(str(exc).split(" in ")[0])
        leaves ',' (U+002C, category Po) unmatched
    """
    if value is None:
        return NAMED_PATTERNS["default"]
    if value in NAMED_PATTERNS:
        return NAMED_PATTERNS[value]
    for named in NAMED_PATTERNS.values():  # a named pattern's own string (Qwen2's, Llama 3's): it runs fast
        if value == named.tiktoken:
            return named
    import regex

    try:
        compiled = regex.compile(value)
    except regex.error as exc:
        raise PatternError(f"pattern does not compile: {exc}") from exc
    problem = probe_pattern(compiled)
    if problem:
        raise UnsafePattern(problem)
    return Pattern("custom", value, value, False)


# Characters of every Unicode general category but Cs (a surrogate is never
# UTF-8 text), a few for the big ones (each checked by the tests).
PROBE_CHARACTERS = {
    "Lu": "AÄΣЖ", "Ll": "aßσж", "Lt": "ǅ", "Lm": "ʰー", "Lo": "あ中אاก", "Mn": "\u0301\u0308", "Mc": "\u0903",
    "Me": "\u20dd", "Nd": "0٣०", "Nl": "Ⅻ", "No": "²½", "Pc": "_", "Pd": "-–", "Ps": "(「", "Pe": ")」",
    "Pi": "«“", "Pf": "»”", "Po": "!,.'\"。", "Sm": "+∑", "Sc": "$€", "Sk": "^`", "So": "©👍",
    "Zs": " \u00a0\u3000", "Zl": "\u2028", "Zp": "\u2029", "Cc": "\t\n\r\x00\x0b\x0c\x85",
    "Cf": "\u200b\u200d\ufeff", "Co": "\ue000", "Cn": "\uffff",
}
# Line-break and space contexts, where patterns differ most (lookaheads, \s*).
PROBE_CONTEXTS = (
    "", "\n", "\r\n", " \n", "a \n b", "a  ", "   ", "\n\n", "a\r\nb", "\t\n ", "x\r", "a\n", " a",
    "Hello, world! It's 2026:  naïve café,\n\n    3.14159\r\n\tend  ", "1234567 89", "x  \n  y\n",
)


def probe_texts() -> list[str]:
    """The texts ``probe_pattern`` runs the pattern over: the contexts, and each
    probe character alone, doubled, and after and before a letter, a space and
    a line break (about 600 short texts).

        >>> "a\u0301" in probe_texts() and "\u2028 " in probe_texts()
        True
    """
    texts = list(PROBE_CONTEXTS)
    for chars in PROBE_CHARACTERS.values():
        for c in chars:
            texts += [c, c + c, "a" + c, c + "a", " " + c, c + " ", "\n" + c, c + "\n"]
    return texts


def probe_pattern(compiled) -> str | None:
    r"""Why a pattern cannot be used, or None: tiktoken panics on a match of the
    empty string, and silently drops the text between two matches. So every
    probe text must be covered exactly by non-empty matches, one after another.

    A probe is not a proof (a pattern may still fail on text the probes do not
    hold); ingest checks every document again (``first_miss``) and stops at the
    first such place. A compiled ``regex`` pattern or a string.

        >>> probe_pattern(r"\S+|\s+") is None
        True
        >>> probe_pattern(r"\w*|\s")
        "matches the empty string (in '', at character 0): tiktoken would panic on it; make every alternative take at least one character (+ rather than *)"
    """
    import regex

    compiled = regex.compile(compiled) if isinstance(compiled, str) else compiled
    for text in probe_texts():
        miss = first_miss(compiled, text)
        if miss is not None:
            return describe_miss(text, *miss)
    return None


def first_miss(compiled, text: str) -> tuple[int, int] | None:
    r"""``(offset, end)`` of the first empty match (``end == offset``) or the first
    run of text no match covers, or None when the matches tile ``text``.

        >>> import regex
        >>> first_miss(regex.compile(r"a+"), "aab a"), first_miss(regex.compile(r"b?"), "bc")
        ((2, 4), (1, 1))
    """
    at = 0
    for m in compiled.finditer(text):
        start, end = m.span()
        if start > at:
            return at, start
        if end == start:
            return start, start
        at = end
    return (at, len(text)) if at < len(text) else None


def describe_miss(text: str, offset: int, end: int) -> str:
    """The problem ``first_miss`` found, in words (character offsets into ``text``).

        >>> print(describe_miss("ab", 1, 2))
        leaves 'b' (U+0062, category Ll) unmatched in 'ab': tiktoken silently drops the text a pattern does not match; end the pattern with an alternative that takes any character, such as |\\S+|\\s+
    """
    shown = repr(text if len(text) <= 40 else text[:40] + "...")
    if end == offset:
        return (f"{miss_words(text, offset, end)} (in {shown}, at character {offset}): tiktoken would panic on "
                "it; make every alternative take at least one character (+ rather than *)")
    return (f"{miss_words(text, offset, end)} in {shown}: tiktoken silently drops the text a pattern does not "
            r"match; end the pattern with an alternative that takes any character, such as |\S+|\s+")


def miss_words(text: str, offset: int, end: int) -> str:
    """What went wrong at ``text[offset:end]``, in a few words.

        >>> miss_words("ab", 1, 1), miss_words("a\u0301", 1, 2)
        ('matches the empty string', "leaves '\u0301' (U+0301, category Mn) unmatched")
    """
    import unicodedata

    if end == offset:
        return "matches the empty string"
    char = text[offset]
    return f"leaves {char!r} (U+{ord(char):04X}, category {unicodedata.category(char)}) unmatched"


def tiktoken_rejects(pattern: str) -> str | None:
    """Why tiktoken's engine (fancy-regex, not ``regex``) cannot use ``pattern``, or None:
    it is tried on the 256 bytes, so a construct only ``regex`` knows fails here,
    not at export time.

        >>> tiktoken_rejects(r"\\S+|\\s+") is None, tiktoken_rejects(r"\\X+|\\s+") is None
        (True, False)
    """
    try:
        import tiktoken
    except ImportError:  # pragma: no cover - tiktoken is a dependency
        return None
    ranks = {bytes([b]): b for b in range(256)}
    try:
        tiktoken.Encoding("toktoktok-check", pat_str=pattern, mergeable_ranks=ranks, special_tokens={})
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:  # pyo3 panics are BaseExceptions
        return " ".join(str(exc).split()) or type(exc).__name__
    return None


def checked_pattern(value: str) -> Pattern:
    """A ``--pattern`` or ``pattern=`` value (a name or a regex) as a Pattern, checked as
    a config's ``pattern:`` is: it compiles in both engines and passes ``probe_pattern``.
    Raises ``PatternError`` (``UnsafePattern`` for the probe) saying why.

        >>> checked_pattern("o200k").name
        'o200k'
    """
    try:
        pattern = resolve_pattern(value)
    except UnsafePattern as exc:
        raise UnsafePattern(f"the pattern is refused: it {exc}") from None
    problem = tiktoken_rejects(pattern.tiktoken) if pattern.name == "custom" else None
    if problem:
        raise PatternError(f"pattern is a regex tiktoken cannot use: {problem}")
    return pattern


# A letter first assigned in each Unicode version, newest first: the newest one
# the ``regex`` module calls a letter tells which tables it carries.
_UNICODE_PROBES = (
    ("17.0", "\U00011db0"),  # Tolong Siki
    ("16.0", "\U000105c0"),  # Todhri
    ("15.1", "\U0002ebf0"),  # CJK Unified Ideographs Extension I
    ("15.0", "\U0001e4d0"),  # Nag Mundari
    ("14.0", "\U00010570"),  # Vithkuqi
    ("13.0", "\U00010e80"),  # Yezidi
)


def regex_unicode_version() -> str:
    """The Unicode version of the ``regex`` module's tables (probed, at least 13.0).

    >>> regex_unicode_version() >= "13.0"
    True
    """
    import regex

    for version, letter in _UNICODE_PROBES:
        if regex.match(r"\p{L}", letter):
            return version
    return "older than 13.0"


def joined_example(coarse: Pattern, fine: Pattern, pieces: Iterable[bytes]) -> str | None:
    """A piece of ``coarse`` (one of ``pieces``, counted with it) that ``fine``
    cuts into several, else None: there ``coarse`` joins what ``fine`` keeps
    apart, so tokens learned on ``fine``'s pieces are used inside longer ones.
    Looked for on a sample of real pieces (a later phase's, against an earlier
    phase's pattern): it says what happens on that text, for any two patterns.

        >>> joined_example(NAMED_PATTERNS["cl100k"], NAMED_PATTERNS["cl100k-digits"], [b" hello", b"2024"])
        '2024'
        >>> joined_example(NAMED_PATTERNS["cl100k-digits"], NAMED_PATTERNS["cl100k"], [b"2"]) is None
        True
    """
    import regex

    compiled = regex.compile(fine.python)
    for piece in pieces:
        text = piece.decode("utf-8", "replace")
        if len(compiled.findall(text)) > 1:
            return text
    return None
