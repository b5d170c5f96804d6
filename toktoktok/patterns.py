"""Pre-tokenization patterns: the default one and the named ones.

A pattern has two spellings: the string tiktoken is given (``tiktoken``), and
the string the Python ``regex`` module runs (``python``), which is our
reference engine. They differ only where the engines read a construct
differently: tiktoken's engine reads ``$`` as end of text, ``regex`` reads it
as "end of text or before a final newline", so ``$`` becomes ``\\Z``.

    >>> resolve_pattern("cl100k").name
    'cl100k'
    >>> resolve_pattern(None).name
    'default'
"""

from __future__ import annotations

from dataclasses import dataclass

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


@dataclass(frozen=True)
class Pattern:
    """A pre-tokenization pattern in both engines' spelling.

    ``cut_at_safe_places`` says whether a text may be cut at docs/pretokenization.md's safe
    places (after a line break before a non-space, or after a non-space
    before a space) without changing what the pattern finds.
    ``cut_at_spaces`` says whether the second kind alone is safe: true for
    o200k and gpt2 too, whose matches never run from a non-space into a
    following space (a space only ever starts a match), but whose line
    breaks are not safe (o200k's punctuation run swallows ``/`` after line
    breaks, gpt2's ``\\s++$`` ends differently at the end of a text). A
    pattern with neither is matched over whole documents.
    """

    name: str
    tiktoken: str
    python: str
    cut_at_safe_places: bool
    cut_at_spaces: bool = False


def _python_spelling(tiktoken_pattern: str) -> str:
    """tiktoken's ``$`` is end of text; ``regex`` needs ``\\Z`` for that."""
    return tiktoken_pattern.replace("$", r"\Z")


NAMED_PATTERNS: dict[str, Pattern] = {
    "default": Pattern("default", DEFAULT_PATTERN, DEFAULT_PATTERN, True, True),
    "cl100k": Pattern("cl100k", CL100K_PATTERN, _python_spelling(CL100K_PATTERN), True, True),
    "o200k": Pattern("o200k", O200K_PATTERN, O200K_PATTERN, False, True),
    "gpt2": Pattern("gpt2", GPT2_PATTERN, _python_spelling(GPT2_PATTERN), False, True),
}


def resolve_pattern(value: str | None) -> Pattern:
    """Map a config's ``pattern:`` value (None, a name, or a regex) to a Pattern.

    A custom regex is used as written by both engines and matched over whole
    documents. Raises ``ValueError`` when a custom regex does not compile.
    """
    if value is None:
        return NAMED_PATTERNS["default"]
    if value in NAMED_PATTERNS:
        return NAMED_PATTERNS[value]
    import regex

    try:
        regex.compile(value)
    except regex.error as exc:
        raise ValueError(f"pattern does not compile: {exc}") from exc
    return Pattern("custom", value, value, False)


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
