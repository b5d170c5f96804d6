"""``toktok show``: a text with its token boundaries marked, and its ids.

What people paste into a bug report ("why is this split like that?"): the
example at the end shows it.

Decisions (the options are in docs/cli.md):

- On a terminal the tokens sit on alternating background colours instead of
  brackets, which reads like the text itself.
- White space is made visible where it would vanish, by
  ``toktoktok.readable``: a line break inside a token is written ``\\n``
  (``\\r``, ``\\t`` likewise, other control characters and bytes that are
  not UTF-8 on their own ``\\xNN``), and the output line is broken after a
  token that holds a ``\\n``, so the text's lines stay lines. A backslash is
  written ``\\\\``, so the escapes are unambiguous. Spaces are left as they
  are (brackets or colours show where they sit) unless ``--dots``.

    >>> import tiktoken
    >>> enc = tiktoken.Encoding("t", pat_str=r"\\S+|\\s+", mergeable_ranks={bytes([b]): b for b in range(256)},
    ...                     special_tokens={})
    >>> print(render(enc, enc.encode_ordinary("a b\\n"), color=False))
    [a][ ][b][\\n]
    ids: [97, 32, 98, 10]
    4 tokens, 4 bytes, 4 characters
"""

from __future__ import annotations

from collections.abc import Sequence

import tiktoken

from toktoktok.readable import readable

COLORS = ("\x1b[30;48;5;153m", "\x1b[30;48;5;223m", "\x1b[30;48;5;157m", "\x1b[30;48;5;217m")  # blue, sand, green, pink
RESET = "\x1b[0m"


def render(enc: tiktoken.Encoding, ids: Sequence[int], *, color: bool, dots: bool = False) -> str:
    """The marked text, the ids line and the counts line."""
    pieces = []
    for i, token in enumerate(ids):
        raw = enc.decode_single_token_bytes(token)
        text = readable(raw, space="·" if dots else " ")
        pieces.append(f"{COLORS[i % len(COLORS)]}{text}{RESET}" if color else f"[{text}]")
        if b"\n" in raw:
            pieces.append("\n")
    marked = "".join(pieces).rstrip("\n")
    data = enc.decode_bytes(list(ids))
    chars = len(data.decode("utf-8", "replace"))
    counts = f"{len(ids)} token{'s' if len(ids) != 1 else ''}, {len(data)} bytes, {chars} characters"
    return "\n".join([marked, f"ids: [{', '.join(map(str, ids))}]", counts])


def encode_text(enc: tiktoken.Encoding, text: str, *, allow_special: bool = False) -> list[int]:
    """The ids of ``text``: special tokens as text unless ``allow_special``."""
    if allow_special:
        return enc.encode(text, allowed_special="all", disallowed_special=())
    return enc.encode_ordinary(text)
