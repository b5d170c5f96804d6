"""Token bytes as readable text: one rule, with the options its readers need.

A token is shown as its UTF-8 text, with what would vanish or mislead made
visible: a line break as ``\\n`` (``\\r``, ``\\t`` likewise), a backslash as
``\\\\`` (so every escape reads back one way), other invisible characters as
a code. The options say what differs between the places that show tokens:

- ``invalid``: bytes that are not UTF-8 on their own, ``"hex"`` (each as
  ``\\xNN``) or ``"replace"`` (each bad stretch as one U+FFFD, as
  ``errors="replace"`` decodes);
- ``space``: what a space is shown as (``" "``, ``"·"``, ``"␣"``);
- ``escape``: ``"controls"`` (ASCII control characters only) or
  ``"unprintable"`` (every character of Unicode's Other and Separator
  categories, as ``str.isprintable`` decides);
- ``codes``: ``"x"`` (``\\xNN`` below 256, else ``\\uNNNN``) or ``"u"``
  (``\\uNNNN``, and ``\\UNNNNNNNN`` beyond 16 bits, as Python spells them);
- ``also``: characters always written as codes (a space mark of one's own);
- ``quote``: a quote put around the text, and escaped with a backslash in it.

    >>> readable(b" the\\n\\xe2\\x80")
    ' the\\\\n\\\\xe2\\\\x80'
    >>> readable(b" \\xc2\\xa0\\xe2\\x80", invalid="replace", space="␣", escape="unprintable")
    '␣\\\\xa0�'
    >>> readable(b'"\\x00', escape="unprintable", codes="u", quote='"')
    '"\\\\"\\\\u0000"'
"""

from __future__ import annotations

_NAMED = {"\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t"}
_INVALID = {"hex": "surrogateescape", "replace": "replace"}


def readable(token: bytes | str, *, invalid: str = "hex", space: str = " ", escape: str = "controls",
             codes: str = "x", also: str = "", quote: str = "") -> str:
    """``token`` (bytes, or text where U+DC80..U+DCFF stand for bytes that are not
    UTF-8, as ``errors="surrogateescape"`` decodes them) as readable text;
    the options are the module's.

        >>> readable(b"a\\tb c", space="\\u00b7"), readable("caf\\udcc3")
        ('a\\\\tb·c', 'caf\\\\xc3')
    """
    if invalid not in _INVALID or escape not in ("controls", "unprintable") or codes not in ("x", "u"):
        raise ValueError(f"invalid={invalid!r}, escape={escape!r}, codes={codes!r}: not options of readable")
    text = token.decode("utf-8", _INVALID[invalid]) if isinstance(token, bytes) else token
    unprintable = escape == "unprintable"
    out = []
    for ch in text:
        o = ord(ch)
        if 0xDC80 <= o <= 0xDCFF:  # a byte that is not UTF-8, kept by surrogateescape
            out.append(f"\\x{o - 0xDC00:02x}")
        elif ch == " ":
            out.append(space)
        elif ch in _NAMED:
            out.append(_NAMED[ch])
        elif quote and ch == quote:
            out.append("\\" + ch)
        elif ch in also or (not ch.isprintable() if unprintable else o < 0x20 or o == 0x7F):
            out.append(_code(o, codes))
        else:
            out.append(ch)
    return quote + "".join(out) + quote


def _code(o: int, codes: str) -> str:
    """A character's code point as an escape.

        >>> _code(0x85, "x"), _code(0x85, "u"), _code(0x1F600, "x"), _code(0x1F600, "u")
        ('\\\\x85', '\\\\u0085', '\\\\u1f600', '\\\\U0001f600')
    """
    if codes == "x":
        return f"\\x{o:02x}" if o < 0x100 else f"\\u{o:04x}"
    return f"\\u{o:04x}" if o <= 0xFFFF else f"\\U{o:08x}"
