"""Hugging Face byte-level BPE: its alphabet, reading a ``tokenizer.json``, and the export.

The export (``write_hf``, ``tokenizer_json``) writes a tokenizer that
``tokenizers`` and ``transformers`` load and that gives exactly tiktoken's ids
(``encode(text, allowed_special="all")``): the pattern respelled for
Oniguruma (``onig_pattern``), and one merge per token, derived the way
tiktoken's encoder builds it (``bpe_merges``).

Hugging Face's ByteLevel step writes each byte as one printable character:
the bytes 33-126, 161-172 and 174-255 as themselves, the 68 others as
``chr(256 + k)`` in byte order. Sorted by code point, that alphabet is the
byte order of SPEC §3, which is why our rank order and its ids agree.

    >>> decode = byte_decoder()
    >>> decode["!"], decode["Ġ"], decode["Ċ"]
    (33, 32, 10)
    >>> token_bytes("Ġhello")
    b' hello'
"""

from __future__ import annotations

import json
import re
import unicodedata
from functools import cache
from pathlib import Path

from toktoktok.vocab import BYTE_ORDER


@cache
def byte_decoder() -> dict[str, int]:
    """ByteLevel character -> byte."""
    printable = BYTE_ORDER[:188]
    others = sorted(set(range(256)) - set(printable))
    return {chr(b): b for b in printable} | {chr(256 + k): b for k, b in enumerate(others)}


@cache
def byte_encoder() -> dict[int, str]:
    """Byte -> ByteLevel character."""
    return {b: ch for ch, b in byte_decoder().items()}


def token_bytes(text: str) -> bytes:
    """The bytes a ByteLevel token string stands for (KeyError if it is not one)."""
    decode = byte_decoder()
    return bytes(decode[ch] for ch in text)


def token_text(data: bytes) -> str:
    """The ByteLevel string of some bytes: ``token_text(b" hi") == "Ġhi"``."""
    encode = byte_encoder()
    return "".join(encode[b] for b in data)


def read_hf_tokenizer(path: Path) -> tuple[dict[bytes, int], dict[str, int]]:
    """Ranks and special tokens of a byte-level BPE ``tokenizer.json``.

    The ranks are the model's ids (tiktoken merges by rank; for a tokenizer
    trained by ``BpeTrainer`` ids follow merge order, so both encode alike).
    Added tokens become special tokens. Raises ValueError naming the file.
    """
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path}: cannot read the tokenizer.json ({exc})") from exc
    model = doc.get("model") if isinstance(doc, dict) else None
    if not isinstance(model, dict) or model.get("type") != "BPE" or not isinstance(model.get("vocab"), dict):
        raise ValueError(f"{path}: not a BPE tokenizer.json (model.type must be 'BPE' with a vocab)")
    added = {t["content"]: int(t["id"]) for t in doc.get("added_tokens") or []}
    ranks: dict[bytes, int] = {}
    for text, rank in model["vocab"].items():
        if text in added:
            continue
        try:
            ranks[token_bytes(text)] = int(rank)
        except KeyError:
            raise ValueError(f"{path}: vocab entry {text!r} is not byte-level (ByteLevel alphabet)") from None
    return ranks, added


# ---------------------------------------------------------------------------
# The pattern, spelled for Oniguruma.

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
    proven by ``tests/test_hf_export.py``:

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


# ---------------------------------------------------------------------------
# The export: tokenizer.json and its companions.


def _bpe_parts(token: bytes, ranks: dict[bytes, int]) -> list[bytes]:
    """tiktoken's rule on ``token``'s own bytes, stopped when two parts are left.

    Join the adjacent pair whose joined bytes have the lowest rank (leftmost
    on ties), never the whole token itself. Returns the two parts, or the
    parts it got stuck at.
    """
    parts = [token[k : k + 1] for k in range(len(token))]
    while len(parts) > 2:
        best_rank, best = None, -1
        for k in range(len(parts) - 1):
            rank = ranks.get(parts[k] + parts[k + 1])
            if rank is not None and (best_rank is None or rank < best_rank):
                best_rank, best = rank, k
        if best_rank is None:
            break
        parts[best : best + 2] = [parts[best] + parts[best + 1]]
    return parts


def bpe_merges(ranks: dict[bytes, int]) -> list[tuple[bytes, bytes]]:
    """The merges Hugging Face's BPE needs to encode like tiktoken, in rank order.

    tiktoken joins, anywhere in a piece, the adjacent pair whose joined
    bytes have the lowest rank. When it builds a token ``t`` that way, the
    parts it joins are fully inside ``t``'s span and were built there by the
    same rule, so they are exactly what the rule makes of ``t``'s bytes
    alone: one pair per token, found by ``_bpe_parts``. Hugging Face applies
    its merges by priority (position in the list), so listing each token's
    pair in rank order makes it join the same pairs in the same order.

    A token whose own bytes never come together into two parts (possible in
    vocabularies made elsewhere) is never built by tiktoken's merging either;
    tiktoken emits it only when a whole piece equals it, which is what
    ``ignore_merges`` makes Hugging Face do, so it simply gets no merge.
    """
    merges: list[tuple[bytes, bytes]] = []
    for token, _rank in sorted(ranks.items(), key=lambda item: item[1]):
        if len(token) > 1:
            parts = _bpe_parts(token, ranks)
            if len(parts) == 2:
                merges.append((parts[0], parts[1]))
    return merges


def _check_exportable(ranks: dict[bytes, int], special_tokens: dict[str, int]) -> None:
    """What tiktoken would reject, and what Hugging Face would silently get wrong."""
    from toktoktok.tiktoken_file import validate_ranks, validate_special_tokens

    validate_ranks(ranks)  # repeated tokens or ranks, a missing single byte
    validate_special_tokens(ranks, special_tokens)
    encode = byte_encoder()
    texts = {"".join(encode[b] for b in token) for token in ranks}
    for special in special_tokens:
        if special in texts:
            raise ValueError(f"special token {special!r} is spelled like a vocabulary token in Hugging Face's "
                             "ByteLevel alphabet; tokenizers would give it that token's id")


def _byte_level(add_prefix_space: bool = False) -> dict:
    return {"type": "ByteLevel", "add_prefix_space": add_prefix_space, "trim_offsets": False, "use_regex": False}


def tokenizer_json(ranks: dict[bytes, int], special_tokens: dict[str, int], pattern: str) -> dict:
    """A byte-level BPE ``tokenizer.json`` document that encodes exactly like tiktoken.

    ``pattern`` is the tiktoken spelling (a name is not resolved here). Ids
    are the ranks (gaps allowed) and the special tokens' ids. Raises
    ValueError for a vocabulary tiktoken itself would reject.

    Decisions, each checked against tokenizers and tiktoken in the tests:

    - pre-tokenizer: ``Split`` with ``onig_pattern(pattern)``, behaviour
      ``Removed`` with ``invert: true``, i.e. the matches are the pieces and
      text the pattern does not cover is dropped, as tiktoken drops it (with
      ``Isolated`` that text would become pieces of its own; for the named
      patterns, which cover all text, the two are the same); then
      ``ByteLevel`` with no prefix space and no regex of its own.
    - model: BPE, merges from ``bpe_merges`` as ``"left right"`` strings
      (ByteLevel strings never hold a space, and every tokenizers version
      reads them), ``ignore_merges: true`` (tiktoken, too, takes a piece that
      is a token whole before merging anything).
    - special tokens: added tokens, not normalized, ``special: true``, and
      also entries of the model's vocab: tokenizers ignores an added token's
      ``id`` when it is not in the vocab and numbers it from the vocab's size
      (cl100k_base's ``<|endoftext|>`` would get 100256, not 100257).
    - no normalizer and no post-processor: nothing is added to the ids
      (tiktoken adds no BOS) and offsets are the ByteLevel pre-tokenizer's,
      untrimmed.
    """
    ranks = dict(ranks)
    special_tokens = dict(special_tokens)
    _check_exportable(ranks, special_tokens)
    encode = byte_encoder()

    def text(data: bytes) -> str:
        return "".join(encode[b] for b in data)

    ids = [(text(token), rank) for token, rank in ranks.items()] + list(special_tokens.items())
    vocab = dict(sorted(ids, key=lambda item: item[1]))
    merges = [f"{text(left)} {text(right)}" for left, right in bpe_merges(ranks)]
    added = [
        {"id": tid, "content": token, "single_word": False, "lstrip": False, "rstrip": False,
         "normalized": False, "special": True}
        for token, tid in sorted(special_tokens.items(), key=lambda item: item[1])
    ]
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": None,
        "pre_tokenizer": {
            "type": "Sequence",
            "pretokenizers": [
                {"type": "Split", "pattern": {"Regex": onig_pattern(pattern)}, "behavior": "Removed", "invert": True},
                _byte_level(),
            ],
        },
        "post_processor": None,
        "decoder": _byte_level(),
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": None,
            "continuing_subword_prefix": None,
            "end_of_word_suffix": None,
            "fuse_unk": False,
            "byte_fallback": False,
            "ignore_merges": True,
            "vocab": vocab,
            "merges": merges,
        },
    }


# transformers' VERY_LARGE_INTEGER: "no maximum length", what it assumes when none is given.
NO_MAX_LENGTH = int(1e30)


def _json_bytes(doc: dict, *, sort_keys: bool) -> bytes:
    return (json.dumps(doc, ensure_ascii=False, indent=2, sort_keys=sort_keys) + "\n").encode("utf-8")


def write_hf(
    folder: Path,
    ranks: dict[bytes, int],
    special_tokens: dict[str, int],
    pattern: str,
    *,
    model_max_length: int = NO_MAX_LENGTH,
) -> None:
    """Write ``folder/tokenizer.json``, ``tokenizer_config.json`` and ``special_tokens_map.json``.

    ``transformers.PreTrainedTokenizerFast.from_pretrained(folder)`` loads
    them. ``<|endoftext|>``, when present, is both the BOS and the EOS token
    (as in GPT-2 and cl100k_base); the other special tokens are listed as
    additional special tokens. Each file is written atomically; the JSON is
    UTF-8 (``ensure_ascii=False``) and byte-for-byte reproducible.
    """
    from toktoktok.atomic import atomic_write_bytes

    folder = Path(folder)
    doc = tokenizer_json(ranks, special_tokens, pattern)
    by_id = sorted(special_tokens.items(), key=lambda item: item[1])
    named: dict[str, str] = {}
    if "<|endoftext|>" in special_tokens:
        named = {"bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>"}
    extra = [token for token, _ in by_id if token not in named.values()]
    special_map: dict = dict(named)
    if extra:
        special_map["additional_special_tokens"] = extra
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "model_max_length": model_max_length,
        "clean_up_tokenization_spaces": False,
        "model_input_names": ["input_ids", "attention_mask"],
        "added_tokens_decoder": {
            str(t["id"]): {k: t[k] for k in ("content", "lstrip", "normalized", "rstrip", "single_word", "special")}
            for t in doc["added_tokens"]
        },
        **special_map,
    }
    folder.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(folder / "tokenizer.json", _json_bytes(doc, sort_keys=False))
    atomic_write_bytes(folder / "tokenizer_config.json", _json_bytes(config, sort_keys=True))
    atomic_write_bytes(folder / "special_tokens_map.json", _json_bytes(special_map, sort_keys=True))
