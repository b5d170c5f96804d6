"""Every failure toktoktok reports, one class each, under one base.

``ToktokError`` carries the command's exit code (1 a data or runtime failure,
2 a usage or configuration error, 130 interrupted) and a one-line message.
Each class also has the built-in base its callers already catch: the Python
API documents ``ValueError`` for bad arguments, a failed publish is an
``OSError``, and a Ctrl-C stays a ``KeyboardInterrupt`` (so no ``except
Exception`` swallows it). That is why the base derives from
``BaseException`` alone: it is never raised bare, only mixed in.

    >>> err = ConfigError("run.yaml line 3: merges: must be an integer")
    >>> isinstance(err, ToktokError), err.exit_code
    (True, 2)
    >>> isinstance(Interrupted("kept ingest 'A'"), Exception)
    False
    >>> one_line(PatternMiss("left 'x'\\nunmatched"))
    "left 'x' unmatched"
"""

from __future__ import annotations


class ToktokError(BaseException):
    """The base of every failure toktoktok reports; mixed in beside a built-in base."""

    exit_code = 1

    def __reduce__(self) -> tuple:
        # rebuilt without calling __init__, whose arguments differ by class: a worker
        # process or a Ray task sends the error back whole
        return (_rebuilt, (type(self), self.args, vars(self)))


def _rebuilt(cls: type[ToktokError], args: tuple, state: dict) -> ToktokError:
    err = cls.__new__(cls, *args)
    err.args = args
    vars(err).update(state)
    return err


def one_line(text: object) -> str:
    """A message (an exception's, or any text) with its line breaks and runs of spaces folded."""
    return " ".join(str(text).split())


# ------------------------------------------------------------ exit 2: usage and configuration


class ConfigError(ToktokError, Exception):
    """A configuration problem; the message names the key or path (and YAML line)."""

    exit_code = 2


class UsageError(ToktokError, ValueError):
    """A command's or a function's arguments cannot be used; the message names the option."""

    exit_code = 2


class PatternError(ToktokError, ValueError):
    """A pattern that cannot be used: it does not compile, or tiktoken's engine refuses it."""

    exit_code = 2


class UnsafePattern(PatternError):
    """A pattern that can match the empty string or leave a character unmatched."""


class LayoutError(ToktokError, ValueError):
    """The ids cannot be laid out as asked (``vocab_size`` and padding); ``key``
    names the configuration key at fault."""

    exit_code = 2

    def __init__(self, key: tuple[str | int, ...], problem: str) -> None:
        super().__init__(problem)
        self.key, self.problem = key, problem


# ------------------------------------------------------------ exit 1: data and runtime


class SourceError(ToktokError, Exception):
    """A source that cannot be read; the message names the file (and line)."""


class TokenizerFileError(ToktokError, ValueError):
    """A ``.tiktoken``, companion or ``tokenizer.json`` that cannot be used as one;
    names the file and, where it can, the line.

    >>> str(TokenizerFileError("v.tiktoken", "duplicate rank 7", line=3))
    'v.tiktoken, line 3: duplicate rank 7'
    """

    def __init__(self, path: object, problem: str, *, line: int | None = None) -> None:
        self.path, self.problem, self.line = str(path), problem, line
        where = self.path if line is None else f"{self.path}, line {line}"
        super().__init__(f"{where}: {problem}")


class UnsupportedTokenizer(TokenizerFileError):
    """A readable tokenizer of a kind tiktoken cannot encode alike (WordPiece or
    Unigram, not byte-level, a normalizer, a pre-tokenizer with no pattern);
    a usage error, since another file or ``--pattern`` is the way out."""

    exit_code = 2


class CompanionMismatch(ToktokError, ValueError):
    """A ``.tiktoken`` and its ``.meta.json`` that are not one set."""


class TokenFileError(ToktokError, ValueError):
    """A token file (``.npy``, nanoGPT or Megatron ``.bin``) that cannot be read as one."""


class PatternMiss(ToktokError, ValueError):
    """The pattern matched the empty string or left text unmatched (tiktoken would
    panic on the first and drop the second). ``words`` says what, in a few
    words; ``index`` is the text of a batch, ``offset`` the character in it;
    ``file``, once known, makes the message name the file."""

    def __init__(self, words: str, *, index: int = 0, offset: int = 0, file: object = None) -> None:
        super().__init__(words)
        self.words, self.index, self.offset, self.file = words, index, offset, file

    def __str__(self) -> str:
        if self.file is None:
            return self.words
        return (f"{self.file}: {self.words}, at character {self.offset} of what this file trains on; "
                "a pattern must match every character, never the empty string: stopping")


class PatternTimeout(ToktokError, RuntimeError):
    """A custom pattern ran past ``pattern_timeout_s`` on a text (``seconds`` allowed
    it); ``index``, ``offset`` and ``file`` as for ``PatternMiss``."""

    def __init__(self, seconds: float, *, index: int = 0, offset: int = 0, file: object = None,
                 per_mib: float | None = None) -> None:
        super().__init__(seconds)
        self.seconds, self.index, self.offset, self.file, self.per_mib = seconds, index, offset, file, per_mib

    def __str__(self) -> str:
        limit = f" (pattern_timeout_s: {self.per_mib:g} per MiB)" if self.per_mib is not None else ""
        where = f"{self.file}: " if self.file is not None else ""
        return (f"{where}the pattern took more than {self.seconds:.3g} s{limit} on the text at character "
                f"{self.offset} of what this file trains on; a pattern that backtracks without end cannot "
                "train a tokenizer")


class CountOverflow(ToktokError, OverflowError):
    """A count that would not fit in 64 bits."""


class MissingInput(ToktokError, Exception):
    """A stage's input artifacts are absent or out of date; the message says what to run."""


class DamagedArtifact(MissingInput):
    """An artifact that does not match its manifest, or is not a readable file; the
    message names it (and, for a stage's input, the command that makes it anew)."""


class StaleInput(MissingInput):
    """An upstream stage's artifact made from other inputs or settings than the
    config gives now; the message names the phase, the stage and the command
    that redoes it."""


class TooFewMerges(ToktokError, RuntimeError):
    """A phase that could not make the merges ``vocab_size`` needs of it."""


class ExportFailed(ToktokError, RuntimeError):
    """An export that did not finish or did not validate; the message says what
    became of the outputs."""


class Busy(ToktokError, RuntimeError):
    """Another run holds the lock of the folder this one would write."""


class PublishError(ToktokError, OSError):
    """A publish that could not be completed or undone; the message says what is on
    disk, ``committed`` whether the new set is in place, ``reason`` the cause alone."""

    committed = False
    reason = ""


class Interrupted(ToktokError, KeyboardInterrupt):
    """Ctrl-C, with a message saying what is kept and what was cut short."""

    exit_code = 130
