r"""Spelling a tiktoken / Python ``regex`` pattern for Oniguruma, Hugging Face's engine.

Why apart from ``hf``: the export needs one string from here
(``onig_pattern(pattern)``, the ``Split`` pre-tokenizer's regex), and this
is a small compiler of its own: a one-pass translator over the pattern's
syntax (classes, escapes, groups, the flags in force) with the rules that
make Oniguruma split text as tiktoken's engine and ``regex`` do, and the
case-folding tables that prove a case-insensitive literal safe. It knows
nothing of vocabularies, byte-level alphabets or ``tokenizer.json``; the
export (``toktoktok.hf``) knows nothing of regex syntax. Each rule is proven
against ``tokenizers``, tiktoken and ``regex`` by ``tests/library/test_hf.py``.

    >>> print(onig_pattern(r"(?i:'s|'re)|\s+$"))
    (?i:'[s]|'re)|\s+\z
"""

from __future__ import annotations

import re
import unicodedata
from functools import cache

_CASE_PROPERTIES = frozenset(
    name.lower().replace("_", "").replace(" ", "")
    for name in ("Lu", "Ll", "Lt", "LC", "L&", "Uppercase_Letter", "Lowercase_Letter", "Titlecase_Letter",
                 "Cased_Letter", "Upper", "Lower", "Uppercase", "Lowercase", "Cased")
)
_UNCHECKED = "not checked to mean the same in Oniguruma and tiktoken's engine"
_NO_TRANSLATION = {
    "h": "a hex digit in Oniguruma but horizontal space in `regex`",
    "H": "the complement of \\h, which differs likewise",
    "K": _UNCHECKED,
    "G": _UNCHECKED,
    "R": _UNCHECKED,
    "X": _UNCHECKED,
}
_INTERVAL = re.compile(r"\{(?:\d+(?:,\d*)?|,\d+)\}")
_FLAG_GROUP = re.compile(r"\(\?([a-zA-Z]*)(?:-([a-zA-Z]*))?([:)])")
_GROUP_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@cache
def _multi_char_folds() -> frozenset[str]:
    """Characters whose full case folding is several characters (ß -> ss, ﬆ -> st, ...)."""
    return frozenset(chr(cp) for cp in range(0x110000) if len(chr(cp).casefold()) > 1)


@cache
def _fold_parts() -> frozenset[str]:
    """Characters that occur in some multi-character case folding (s, t, f, l, ...)."""
    return frozenset("".join(ch.casefold() for ch in _multi_char_folds()))


@cache
def _case_links() -> dict[str, set[str]]:
    """Each character's one-to-one lower and upper case mappings, both ways."""
    links: dict[str, set[str]] = {}
    for cp in range(0x110000):
        c = chr(cp)
        for other in (c.lower(), c.upper()):
            if len(other) == 1 and other != c:
                links.setdefault(c, set()).add(other)
                links.setdefault(other, set()).add(c)
    return links


@cache
def _simple_case_orbit(ch: str) -> tuple[str, ...]:
    """The characters one-to-one case mappings connect with ``ch`` (ß: ß, ẞ)."""
    links = _case_links()
    seen, todo = {ch}, [ch]
    while todo:
        for other in links.get(todo.pop(), ()):
            if other not in seen:
                seen.add(other)
                todo.append(other)
    return tuple(sorted(seen))


def _hex(cp: int) -> str:
    return f"\\x{{{cp:X}}}"


def _class_member(ch: str) -> str:
    """A character as a member of a character class, escaped where it must be."""
    return _hex(ord(ch)) if ch in "[]\\^-&:" or not ch.isprintable() or ch.isspace() else ch


class _OnigTranslator:
    """One pass over a tiktoken / Python-regex pattern, writing Oniguruma's spelling.

    Tracks what it must: character classes (nested, as tiktoken's engine and
    Oniguruma nest them), escapes, groups, and the flags in force (``i``,
    ``m``, ``s``), which decide how ``^``, ``$`` and literals are written.
    """

    def __init__(self, pattern: str) -> None:
        self.p = pattern
        self.i = 0

    def fail(self, problem: str) -> ValueError:
        return ValueError(f"pattern {self.p!r}: {problem} (at offset {self.i}); no faithful Oniguruma spelling")

    def translate(self) -> str:
        out = self.alternation(frozenset())
        if self.i != len(self.p):
            raise self.fail("unbalanced ')'")
        return out

    # -- structure

    def alternation(self, flags: frozenset[str]) -> str:
        """Alternatives up to a closing ``)`` (left unread) or the end.

        A bare ``(?i)`` inside one alternative rules the rest of the group in
        tiktoken's engine (and the `regex` module), later alternatives too;
        Oniguruma instead makes the rest of the group, ``|`` included, its
        body. Each alternative is therefore written with its flags spelled out.
        """
        alts = []
        current = flags
        while True:
            start = current
            text, current = self.sequence(current)
            alts.append(self.scoped(flags, start, text))
            if self.i < len(self.p) and self.p[self.i] == "|":
                self.i += 1
                continue
            return "|".join(alts)

    @staticmethod
    def scoped(outer: frozenset[str], inner: frozenset[str], text: str) -> str:
        """``text`` under flags ``inner`` when ``outer`` are in force around it."""
        on = "".join(_ONIG_FLAG[f] for f in sorted(inner - outer) if _ONIG_FLAG[f])
        off = "".join(_ONIG_FLAG[f] for f in sorted(outer - inner) if _ONIG_FLAG[f])
        if not on and not off:
            return text
        return f"(?{on}{'-' + off if off else ''}:{text})"

    def sequence(self, flags: frozenset[str]) -> tuple[str, frozenset[str]]:
        """Items up to ``|``, ``)`` or the end; returns the text and the flags at its end."""
        parts: list[str] = []
        p = self.p
        while self.i < len(p):
            c = p[self.i]
            if c in "|)":
                break
            if c == "(":
                flag_group = _FLAG_GROUP.match(p, self.i)
                if flag_group and flag_group.group(3) == ")":
                    self.i = flag_group.end()
                    inner = self.new_flags(flags, flag_group)
                    rest, end_flags = self.sequence(inner)
                    parts.append(self.scoped(flags, inner, rest))
                    return "".join(parts), end_flags
                parts.append(self.group(flags))
            elif c == "[":
                parts.append(self.char_class(flags))
            elif c == "\\":
                parts.append(self.escape(flags, in_class=False)[0])
            elif c == "$":
                self.i += 1
                parts.append("$" if "m" in flags else r"\z")
            elif c == "^":
                self.i += 1
                parts.append("^" if "m" in flags else r"\A")
            elif c in "*+?" or (c == "{" and _INTERVAL.match(p, self.i)):
                if not parts:
                    raise self.fail("nothing to repeat")
                parts[-1] = self.quantified(parts[-1])
            elif c == ".":
                self.i += 1
                parts.append(".")
            else:
                self.i += 1
                parts.append(self.literal(c, "\\" + c if c in "{}" else c, flags))
        return "".join(parts), flags

    def quantified(self, atom: str) -> str:
        """``atom`` with the quantifier at the cursor.

        ``*+``, ``++`` and ``?+`` are possessive in Oniguruma as in tiktoken's
        engine and stay; ``{n,m}+`` is not (Oniguruma reads "{n,m}, then one
        or more times"), so it becomes the atomic group ``(?>atom{n,m})``.
        """
        p = self.p
        interval = _INTERVAL.match(p, self.i)
        if interval:
            q = interval.group()
            self.i = interval.end()
        else:
            q = p[self.i]
            self.i += 1
        modifier = p[self.i] if self.i < len(p) and p[self.i] in "+?" else ""
        self.i += len(modifier)
        if interval and modifier == "+":
            return f"(?>{atom}{q})"
        return atom + q + modifier

    def new_flags(self, flags: frozenset[str], match: re.Match[str]) -> frozenset[str]:
        on, off = set(match.group(1)), set(match.group(2) or "")
        for f in on | off:
            if f not in _ONIG_FLAG:
                raise self.fail(f"flag {f!r} (only i, m, s and u are translated)")
        return frozenset((flags | on) - off - {"u"})

    def group(self, flags: frozenset[str]) -> str:
        p = self.p
        start = self.i
        if p.startswith("(?#", start):
            end = p.find(")", start)
            if end < 0:
                raise self.fail("unterminated comment")
            self.i = end + 1
            return ""
        if p.startswith("(?P=", start):
            name = _GROUP_NAME.match(p, start + 4)
            if not name or p[name.end() : name.end() + 1] != ")":
                raise self.fail("bad (?P=name)")
            self.i = name.end() + 1
            return f"\\k<{name.group()}>"
        flag_group = _FLAG_GROUP.match(p, start)
        if flag_group:  # (?flags:...)
            self.i = flag_group.end()
            inner = self.new_flags(flags, flag_group)
            body = self.alternation(inner)
            self.close_group()
            scoped = self.scoped(flags, inner, body)
            return scoped if scoped is not body else f"(?:{body})"
        for prefix, written in (("(?P<", "(?<"), ("(?<", "(?<"), ("(?'", "(?<")):
            name = _GROUP_NAME.match(p, start + len(prefix)) if p.startswith(prefix, start) else None
            if name and p[name.end() : name.end() + 1] == (">" if prefix != "(?'" else "'"):
                self.i = name.end() + 1
                body = self.alternation(flags)
                self.close_group()
                return f"{written}{name.group()}>{body})"
        for prefix in ("(?:", "(?=", "(?!", "(?<=", "(?<!", "(?>", "("):
            if p.startswith(prefix, start) and (prefix != "(" or not p.startswith("(?", start)):
                self.i = start + len(prefix)
                body = self.alternation(flags)
                self.close_group()
                return f"{prefix}{body})"
        raise self.fail("unknown group syntax")

    def close_group(self) -> None:
        if self.i >= len(self.p) or self.p[self.i] != ")":
            raise self.fail("missing ')'")
        self.i += 1

    # -- atoms

    def literal(self, ch: str, written: str, flags: frozenset[str]) -> str:
        """One literal character.

        Case-insensitively, Oniguruma also matches multi-character case
        foldings: ``(?i:ss)`` matches "ß", ``(?i:ß)`` matches "ss",
        ``(?i:st)`` matches "ﬆ"; tiktoken's engine and `regex` do not. A
        character whose folding is several characters becomes the class of
        its one-to-one case variants with ``i`` off (``(?-i:[ßẞ])``); a
        character that occurs in such a folding becomes a one-character class
        (``[s]``), since Oniguruma never folds across separate classes.
        """
        if "i" in flags:
            if ch in _multi_char_folds():
                return "(?-i:[" + "".join(_class_member(c) for c in _simple_case_orbit(ch)) + "])"
            if any(c in _fold_parts() for c in ch.casefold()):
                return "[" + _class_member(ch) + "]"
        return written

    def escape(self, flags: frozenset[str], *, in_class: bool) -> tuple[str, int | None]:
        """The escape at the cursor: its Oniguruma text, and its code point if it is one character."""
        p = self.p
        if self.i + 1 >= len(p):
            raise self.fail("trailing backslash")
        c = p[self.i + 1]
        self.i += 2
        if c in "xuU":
            cp = self.code_point(c)
            if in_class:
                return _hex(cp), cp
            return self.literal(chr(cp), _hex(cp), flags), cp
        if c == "N" and self.i < len(p) and p[self.i] == "{":
            end = p.find("}", self.i)
            if end < 0:
                raise self.fail("unterminated \\N{...}")
            try:
                cp = ord(unicodedata.lookup(p[self.i + 1 : end]))
            except KeyError:
                raise self.fail(f"unknown character name {p[self.i + 1 : end]!r}") from None
            self.i = end + 1
            return (_hex(cp) if in_class else self.literal(chr(cp), _hex(cp), flags)), cp
        if c in "pP":
            if self.i < len(p) and p[self.i] == "{":
                end = p.find("}", self.i)
                if end < 0:
                    raise self.fail("unterminated \\p{...}")
                name = p[self.i + 1 : end]
                self.i = end + 1
            elif self.i < len(p):
                name = p[self.i]
                self.i += 1
            else:
                raise self.fail("trailing \\p")
            if "i" in flags and name.lstrip("^").lower().replace("_", "").replace(" ", "") in _CASE_PROPERTIES:
                raise self.fail(f"case-insensitive \\{c}{{{name}}} (Oniguruma ignores the flag for it)")
            return f"\\{c}{{{name}}}", None
        if c in _NO_TRANSLATION:
            raise self.fail(f"\\{c} is {_NO_TRANSLATION[c]}")
        if c == "Z" and not in_class:
            return r"\z", None
        if c == "k" and not in_class:
            end = p.find(">", self.i)
            if not p.startswith("<", self.i) or end < 0:
                raise self.fail("bad \\k<name>")
            text = p[self.i - 2 : end + 1]
            self.i = end + 1
            return text, None
        if c.isalnum() or c == "_":  # classes (\s, \d, \w, ...), anchors, control escapes, back references
            return "\\" + c, None
        written = "\\" + c
        if in_class:
            return written, ord(c)
        return self.literal(c, written, flags), ord(c)

    def code_point(self, kind: str) -> int:
        """The code point of ``\\xhh``, ``\\uhhhh``, ``\\Uhhhhhhhh`` or ``\\x{...}`` / ``\\u{...}``.

        Written back as ``\\x{...}``: Oniguruma reads ``\\xhh`` as a raw byte
        (an error above 0x7f in UTF-8) and has no ``\\U``.
        """
        p = self.p
        if self.i < len(p) and p[self.i] == "{":
            end = p.find("}", self.i)
            digits = p[self.i + 1 : end] if end > 0 else ""
            self.i = end + 1
        else:
            size = {"x": 2, "u": 4, "U": 8}[kind]
            digits = p[self.i : self.i + size]
            if len(digits) != size:
                raise self.fail(f"bad \\{kind} escape")
            self.i += size
        try:
            cp = int(digits, 16)
        except ValueError:
            raise self.fail(f"bad \\{kind} escape") from None
        if not 0 <= cp <= 0x10FFFF:
            raise self.fail(f"code point {digits} out of range")
        return cp

    def char_class(self, flags: frozenset[str]) -> str:
        """A bracketed class, copied with its escapes translated.

        Case-insensitively, a class holding a character with a multi-character
        case folding (``[ß]``, a range across U+00DF) matches that folding in
        Oniguruma ("ss"); it has no faithful spelling and raises.
        """
        p = self.p
        out = ["["]
        self.i += 1
        if p.startswith("^", self.i):
            out.append("^")
            self.i += 1
        first = True
        while True:
            if self.i >= len(p):
                raise self.fail("unterminated character class")
            c = p[self.i]
            if c == "]" and not first:
                self.i += 1
                out.append("]")
                return "".join(out)
            first = False
            if p.startswith("[:", self.i):
                end = p.find(":]", self.i)
                if end < 0:
                    raise self.fail("unterminated POSIX class")
                out.append(p[self.i : end + 2])
                self.i = end + 2
                continue
            if c == "[":
                out.append(self.char_class(flags))
                continue
            low_text, low = self.class_atom(flags)
            if p.startswith("-", self.i) and low is not None and self.i + 1 < len(p) and p[self.i + 1] != "]":
                self.i += 1
                high_text, high = self.class_atom(flags)
                if high is None:
                    raise self.fail("bad range in character class")
                self.check_folds(flags, low, high)
                out.append(f"{low_text}-{high_text}")
            else:
                if low is not None:
                    self.check_folds(flags, low, low)
                out.append(low_text)

    def class_atom(self, flags: frozenset[str]) -> tuple[str, int | None]:
        c = self.p[self.i]
        if c == "\\":
            return self.escape(flags, in_class=True)
        self.i += 1
        return c, ord(c)

    def check_folds(self, flags: frozenset[str], low: int, high: int) -> None:
        if "i" not in flags:
            return
        for ch in _multi_char_folds():
            if low <= ord(ch) <= high:
                raise self.fail(f"case-insensitive class containing {ch!r}, "
                                f"which Oniguruma also matches as {ch.casefold()!r}")


_ONIG_FLAG = {"i": "i", "s": "m", "m": "", "u": ""}


def onig_pattern(pattern: str) -> str:
    r"""A tiktoken / Python-regex pattern spelled for Oniguruma, Hugging Face's engine.

    Each rule below was found by running the construct through
    ``tokenizers.pre_tokenizers.Split`` against tiktoken and `regex`, and is
    proven by ``tests/library/test_hf.py``:

    - ``$`` -> ``\z``: Oniguruma's ``$`` is end of *line* (before any
      ``\n``), tiktoken's is end of text. ``^`` -> ``\A`` likewise.
      Under the ``m`` flag both engines mean line anchors and they stay.
      (cl100k's and gpt2's ``\s++$`` happen to split alike either way: a
      possessive run of white space stops only before a non-space or at the
      end, never before a ``\n``. Any other ``$`` differs.)
    - ``\Z`` -> ``\z``: `regex`'s ``\Z`` is end of text; Oniguruma's also
      matches before a final ``\n``.
    - ``{n,m}+`` -> ``(?>X{n,m})`` (same for ``{n}+``, ``{n,}+``):
      Oniguruma does not read ``{n,m}+`` as possessive but as "``{n,m}``,
      then one or more times", so ``\p{N}{1,3}+`` would take any run of
      digits. ``*+``, ``++``, ``?+`` are possessive in Oniguruma too and stay.
    - ``\xhh``, ``\uhhhh``, ``\Uhhhhhhhh``, ``\u{...}``, ``\N{name}`` ->
      ``\x{...}``: Oniguruma reads ``\xhh`` as a raw byte and has no ``\U``.
    - ``\pL`` -> ``\p{L}`` (Oniguruma wants the braces); ``(?P<n>`` ->
      ``(?<n>``, ``(?P=n)`` -> ``\k<n>``; comments ``(?#...)`` dropped.
    - Flags: ``s`` (dot matches newline) is Oniguruma's ``m``; ``m`` is
      handled by the anchor rule above; ``u`` is dropped (Unicode is the
      default everywhere); others raise. A bare ``(?i)`` is written as a
      scoped group over the rest of its alternative and each later one,
      because Oniguruma would instead swallow the following ``|`` into it.
    - Case-insensitive literals: Oniguruma applies multi-character case
      foldings (``(?i:ss)`` matches "ß", ``(?i:st)`` "ﬆ"), the others do
      not. A character with such a folding becomes its one-to-one case class
      with ``i`` off; a character occurring in one (``s``, ``t``, ``l``...)
      becomes a one-character class, across which Oniguruma never folds. So
      ``(?i:'s|'t|'re|'ve|'m|'ll|'d)`` becomes
      ``(?i:'[s]|'[t]|'re|'ve|'m|'[l][l]|'d)`` (a precaution there: no
      text splits differently with the raw group). A case-insensitive class
      holding such a character, and ``(?i)\p{Lu}`` (Oniguruma ignores the
      flag there), raise ``ValueError``.
    - ``\h`` and ``\H`` mean hex digits in Oniguruma and horizontal space
      in `regex`; ``\K \G \R \X`` are not known to agree: ``ValueError``.

    Unchanged and checked equal: ``\s`` (the same 25 white-space
    characters), ``\d``, ``\w``, ``\b``, ``.`` (all but ``\n``),
    ``\p{...}`` classes, lookarounds, lazy quantifiers, nested classes.
    Not a spelling matter: Oniguruma's Unicode tables may be older than
    `regex`'s (see the tests), so recently assigned characters can split
    differently.

        >>> onig_pattern(r"\p{N}{1,3}+|\s++$|\s+(?!\S)")
        '(?>\\p{N}{1,3})|\\s++\\z|\\s+(?!\\S)'
    """
    return _OnigTranslator(pattern).translate()
