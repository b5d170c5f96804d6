"""Decoding a source's bytes: byte order marks and UTF-8 (docs/pretokenization.md#documents).

- Text is decoded as UTF-8 with invalid bytes replaced by U+FFFD, counted in
  ``ReadStats.replaced_chars``: U+FFFD in the output minus those spelled
  validly in the input (``Utf8Decoder``; ``decode_line`` for a whole line).
- A UTF-8 byte order mark at the start of a file is dropped (by the readers:
  ``txt_windows``, ``blocks``, ``rows``).
- A file whose byte order mark says UTF-16 or UTF-32 (``WIDE_BOMS``) is
  decoded as such and given on as UTF-8 (``recoded``): such a text must never
  be trained on as bytes (every other byte 0).
- A file of any other suffix than the known ones is read as text only if
  its first ``SNIFF_BYTES`` (after recoding) hold no NUL byte and at most
  ``NOT_TEXT_SHARE`` of them in invalid UTF-8 sequences (``not_text``): an
  image or an object file is a bad file, never trained on.
- A lone surrogate from a JSON escape (half of a cut emoji) cannot be
  encoded as UTF-8: it becomes U+FFFD and is counted the same way
  (``replace_surrogates``).
"""

from __future__ import annotations

import codecs
import itertools
from collections.abc import Iterable, Iterator

import regex

from toktoktok.sources.reads import ReadStats

_REPLACEMENT = "\ufffd"
_REPLACEMENT_UTF8 = _REPLACEMENT.encode()
_SURROGATE = regex.compile(r"[\ud800-\udfff]")

# UTF-32 first: its little-endian mark begins with UTF-16's
WIDE_BOMS = ((codecs.BOM_UTF32_LE, "utf-32"), (codecs.BOM_UTF32_BE, "utf-32"),
             (codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16"))


def recoded(chunks: Iterable[bytes], stats: ReadStats | None = None) -> Iterator[bytes]:
    """``chunks`` as they are, or, when they begin with a UTF-16 or UTF-32 byte
    order mark, decoded as that encoding (invalid units replaced) and given as
    UTF-8: such a text must never be trained on as bytes (every other byte 0).

        >>> b"".join(recoded([b"\\xff\\xfeh\\x00", b"i\\x00"]))
        b'hi'
        >>> b"".join(recoded([b"plain"]))
        b'plain'
    """
    chunks = iter(chunks)
    head = b""
    for chunk in chunks:
        head += chunk
        if len(head) >= 4:
            break
    encoding = next((enc for bom, enc in WIDE_BOMS if head.startswith(bom)), None)
    if encoding is None:
        if head:
            yield head
        yield from chunks
        return
    if stats is not None:
        stats.recoded_files += 1
    decoder = codecs.getincrementaldecoder(encoding)("replace")  # it drops the mark itself
    for chunk in itertools.chain([head], chunks):
        text = decoder.decode(chunk)
        if text:
            yield text.encode("utf-8", "surrogatepass")
    rest = decoder.decode(b"", final=True)
    if rest:
        yield rest.encode("utf-8", "surrogatepass")


SNIFF_BYTES = 8192  # how much of a file of another suffix is looked at to tell text from not
NOT_TEXT_SHARE = 0.1  # invalid UTF-8 sequences per byte of those above which it is not text


def not_text(head: bytes) -> str | None:
    """Why the first bytes of a file show it is not UTF-8 text, or None: a NUL
    byte, or more than ``NOT_TEXT_SHARE`` invalid sequences per byte (an
    incomplete character at the end of ``head`` is not counted).

        >>> not_text("héllo wörld".encode()), not_text(b"\\x89PNG\\r\\n\\x1a\\n\\x00\\x00"), not_text(b"\\xff\\xfe\\xfd ab")
        (None, 'it holds a NUL byte', 'invalid UTF-8 in 3 of its first 6 bytes')
    """
    if b"\x00" in head:
        return "it holds a NUL byte"
    text = codecs.getincrementaldecoder("utf-8")("replace").decode(head, final=False)
    invalid = text.count(_REPLACEMENT) - head.count(_REPLACEMENT_UTF8)
    if invalid > NOT_TEXT_SHARE * len(head):
        return f"invalid UTF-8 in {invalid} of its first {len(head)} bytes"
    return None


def decode_line(raw: bytes, stats: ReadStats) -> str:
    """UTF-8 with replacement; replacements counted.

        >>> stats = ReadStats()
        >>> decode_line(b"a\\xffb \\xef\\xbf\\xbd", stats), stats.replaced_chars
        ('a\\ufffdb \\ufffd', 1)
    """
    text = raw.decode("utf-8", "replace")
    if _REPLACEMENT in text:
        stats.replaced_chars += text.count(_REPLACEMENT) - raw.count(_REPLACEMENT_UTF8)
    return text


def replace_surrogates(text: str, stats: ReadStats) -> str:
    """Lone surrogates (JSON escapes like "\\ud83d" of a cut emoji) -> U+FFFD, counted.

    They cannot be encoded as UTF-8, so they would break every later step.
    """
    fixed, count = _SURROGATE.subn(_REPLACEMENT, text)
    stats.replaced_chars += count
    return fixed


class Utf8Decoder:
    """Incremental UTF-8 decoding with replacement, counting what was replaced.

    Feed it a file's bytes in order, in slices cut anywhere; the texts
    concatenate to the file decoded whole.

        >>> d = Utf8Decoder(ReadStats())
        >>> d.decode(b"caf\\xc3") + d.decode(b"\\xa9 \\xff") + d.decode(b"", final=True) == "café \\ufffd"
        True
    """

    def __init__(self, stats: ReadStats) -> None:
        self.stats = stats
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self._tail = b""  # the last 2 bytes fed, to find a valid U+FFFD across slices

    def decode(self, data: bytes | memoryview, final: bool = False) -> str:
        return self.decode_sized(data, final)[0]

    def skip(self, data: bytes | memoryview) -> None:
        """Pass over bytes that are valid UTF-8, whole characters, not needed as
        text (nothing in them is replaced); the decoder must hold nothing."""
        self._remember(data)

    def _remember(self, data: bytes | memoryview) -> None:
        """Keep the last 2 bytes fed (a valid U+FFFD may begin in them)."""
        if len(data) >= 2:
            self._tail = bytes(data[-2:])
        elif data:
            self._tail = (self._tail + bytes(data))[-2:]

    def take_pending(self) -> bytes:
        """The bytes of an incomplete character held back, which the caller now
        owns; the decoder starts afresh (as at the start of a file)."""
        pending = self._decoder.getstate()[0]
        self._decoder.reset()
        self._tail = b""
        return pending

    def decode_sized(self, data: bytes | memoryview, final: bool = False) -> tuple[str, int]:
        """The text and its length in UTF-8 bytes (from the bytes consumed when
        nothing was replaced, so the text need not be encoded again)."""
        held = len(self._decoder.getstate()[0])
        text = self._decoder.decode(data, final)
        replaced = 0
        if _REPLACEMENT in text:
            data = bytes(data)
            legit = data.count(_REPLACEMENT_UTF8) + (self._tail + data[:2]).count(_REPLACEMENT_UTF8)
            replaced = text.count(_REPLACEMENT) - legit
            self.stats.replaced_chars += replaced
        self._remember(data)
        if replaced:
            return text, len(text.encode("utf-8"))
        return text, held + len(data) - len(self._decoder.getstate()[0])
