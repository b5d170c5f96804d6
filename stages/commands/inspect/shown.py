"""How ``toktok inspect`` shows what it finds: a token as double-quoted, escaped
text, and a phase folder by its phase's name; and the ``--search`` text, read
with the same escapes.

A token is ``toktoktok.readable`` with inspect's options (``show``), so
spaces and line breaks are visible; ``--search`` reads the same escapes back.
"""

from __future__ import annotations

import re
from pathlib import Path

from toktoktok.errors import UsageError
from toktoktok.readable import readable

from ...workdir import StageFolder

_UNESCAPE = re.compile(r"\\(x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|[nrt\\\"])")


def show(token: bytes | str) -> str:
    """A token as double-quoted, escaped text: bytes that are not valid UTF-8 as
    ``\\xNN``, control and other unprintable characters as ``\\n``, ``\\t``,
    ``\\uXXXX``, a backslash as ``\\\\``.

    >>> show(b" the"), show(b"\\n\\n"), show(b"\\xe2\\x80"), show("\\u00a0x")
    ('" the"', '"\\\\n\\\\n"', '"\\\\xe2\\\\x80"', '"\\\\u00a0x"')
    """
    return readable(token, escape="unprintable", codes="u", quote='"')


def parse_search(text: str) -> bytes:
    """The bytes a ``--search`` argument stands for (``\\xNN`` is one byte).

    >>> parse_search(r"\\xe2\\x80"), parse_search(r"a\\nb"), parse_search("é")
    (b'\\xe2\\x80', b'a\\nb', b'\\xc3\\xa9')
    """
    out = bytearray()
    pos = 0
    for m in _UNESCAPE.finditer(text):
        out += text[pos : m.start()].encode("utf-8", "surrogatepass")
        code = m.group(1)
        if code[0] == "x":
            out.append(int(code[1:], 16))
        elif code[0] in "uU":
            out += chr(int(code[1:], 16)).encode("utf-8", "surrogatepass")
        else:
            out += {"n": b"\n", "r": b"\r", "t": b"\t", "\\": b"\\", '"': b'"'}[code]
        pos = m.end()
    out += text[pos:].encode("utf-8", "surrogatepass")
    if not out:
        raise UsageError("--search: empty search text")
    return bytes(out)


def phase_of(folder: Path) -> str:
    """``01-english`` -> ``01-english (English)`` when the manifest names the phase."""
    manifest = StageFolder(folder).recorded or {}
    name = manifest.get("phase")
    return f"{folder.name} ({name})" if name else folder.name
