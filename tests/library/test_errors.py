"""The error family: one base carrying the exit code, one class a failure, and
the command line's mapping of each to its exit code and one line."""

from __future__ import annotations

import ast
import inspect
import pickle

import pytest

from tests.helpers import ROOT  # noqa: E402
from toktoktok import errors

FAMILY = [cls for _, cls in inspect.getmembers(errors, inspect.isclass)
          if issubclass(cls, errors.ToktokError) and cls is not errors.ToktokError]
BUILT_IN_BASES = {"Exception", "ValueError", "RuntimeError", "OSError", "OverflowError", "KeyboardInterrupt",
                  "TypeError", "KeyError", "LookupError", "ArithmeticError", "BaseException"}


def sample(cls: type) -> errors.ToktokError:
    """An instance of ``cls`` made with the arguments its constructor takes."""
    if cls is errors.LayoutError:
        return cls(("vocab_size",), "is 10, too small")
    if issubclass(cls, errors.TokenizerFileError):
        return cls("v.tiktoken", "duplicate rank 7", line=3)
    if cls is errors.PatternTimeout:
        return cls(2.5, index=1, offset=40, file="a.txt", per_mib=10.0)
    if cls is errors.PatternMiss:
        return cls("leaves 'x' unmatched", index=1, offset=40, file="a.txt")
    return cls("something went wrong\nin two lines")


@pytest.mark.parametrize("cls", FAMILY, ids=lambda c: c.__name__)
def test_each_error_has_a_built_in_base_callers_catch(cls):
    """Mixed in, never bare: an ``except Exception`` (or ``except KeyboardInterrupt``
    for a Ctrl-C) still catches it, and a Ctrl-C is never an ``Exception``."""
    assert issubclass(cls, Exception) != issubclass(cls, KeyboardInterrupt)
    assert cls.exit_code in (1, 2, 130)
    assert (cls.exit_code == 130) == issubclass(cls, KeyboardInterrupt)


@pytest.mark.parametrize("cls", FAMILY, ids=lambda c: c.__name__)
def test_each_error_crosses_a_process_whole(cls):
    """Worker processes and Ray tasks send errors back pickled: the message and the
    attributes arrive as they left."""
    err = sample(cls)
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is cls and str(back) == str(err) and vars(back) == vars(err)


def test_the_exit_codes_follow_the_kind_of_failure():
    assert {c.__name__ for c in FAMILY if c.exit_code == 2} == {
        "ConfigError", "UsageError", "PatternError", "UnsafePattern", "LayoutError", "UnsupportedTokenizer"}
    assert [c.__name__ for c in FAMILY if c.exit_code == 130] == ["Interrupted"]


def test_the_python_api_keeps_the_bases_it_documents():
    assert issubclass(errors.UsageError, ValueError)  # toktoktok.train documents ValueError
    assert issubclass(errors.PublishError, OSError)
    assert issubclass(errors.TooFewMerges, RuntimeError)
    assert issubclass(errors.DamagedArtifact, errors.MissingInput)


def test_no_error_class_is_defined_outside_the_family():
    """Every exception class of the library and the pipeline lives in
    ``toktoktok/errors.py`` (warnings are not errors)."""
    stray = []
    for path in sorted((ROOT / "toktoktok").rglob("*.py")) + sorted((ROOT / "stages").rglob("*.py")):
        if path.name == "errors.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                bases = {b.id if isinstance(b, ast.Name) else getattr(b, "attr", "") for b in node.bases}
                if bases & (BUILT_IN_BASES | {c.__name__ for c in FAMILY} | {"ToktokError"}):
                    stray.append(f"{path.relative_to(ROOT)}: class {node.name}")
    assert stray == []


@pytest.mark.parametrize("cls", FAMILY, ids=lambda c: c.__name__)
def test_the_command_line_says_each_in_one_line_with_its_code(cls, capsys):
    from toktoktok_stages.cli import guard

    err = sample(cls)

    def fail() -> None:
        raise err

    with pytest.raises(SystemExit) as exited:
        guard.guarded(fail, verbose=False)
    assert exited.value.code == cls.exit_code
    said = capsys.readouterr().err.strip()
    assert len(said.splitlines()) == 1 and errors.one_line(err) in said
    assert "unexpected" not in said


def test_an_error_outside_the_family_is_unexpected(capsys):
    """A ValueError no code of ours raised on purpose is a bug, said as one."""
    from toktoktok_stages.cli import guard

    def fail() -> None:
        raise ValueError("bad value")

    with pytest.raises(SystemExit) as exited:
        guard.guarded(fail, verbose=False)
    assert exited.value.code == 1
    assert capsys.readouterr().err.strip() == (
        "error: unexpected ValueError: bad value (rerun with --verbose for the traceback)")
