"""Reading and writing ``.tiktoken`` files, with our own strict parser.

The format, and what the parser accepts and refuses: docs/outputs.md (The
``.tiktoken`` file). Special tokens are not in it (they live in the
``.meta.json`` companion).

One module an idea: ``reading`` (the strict parser, compressed files),
``writing``, ``ranks`` (a vocabulary's checks, shared by both), ``special``
(special tokens checked against a vocabulary, and found in a text).

    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "t.tiktoken"
    >>> vocab = {bytes([b]): b for b in range(256)} | {b"ab": 256}
    >>> write_tiktoken(p, vocab)
    >>> p.read_bytes().splitlines()[256]
    b'YWI= 256'
    >>> read_tiktoken(p) == vocab
    True
"""

from toktoktok.errors import TokenizerFileError
from toktoktok.tiktoken_file.ranks import MAX_RANK, missing_single_bytes, validate_ranks
from toktoktok.tiktoken_file.reading import decompressed_bytes, parse_tiktoken_bytes, read_tiktoken
from toktoktok.tiktoken_file.special import SpecialIndex, find_nested, validate_special_tokens
from toktoktok.tiktoken_file.writing import format_tiktoken, write_tiktoken

__all__ = [
    "MAX_RANK", "SpecialIndex", "TokenizerFileError", "decompressed_bytes", "find_nested", "format_tiktoken",
    "missing_single_bytes", "parse_tiktoken_bytes", "read_tiktoken", "validate_ranks", "validate_special_tokens", "write_tiktoken",
]
