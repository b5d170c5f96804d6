"""The house rules a reader relies on, checked over every module: short module
docstrings, modules of one idea (a long one says why at its top), comments that
give reasons rather than timings, and tests that name what they check rather
than an issue number."""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CODE = sorted((ROOT / "toktoktok").rglob("*.py")) + sorted((ROOT / "stages").rglob("*.py"))
TESTS = sorted((ROOT / "tests").rglob("*.py"))
MAX_DOCSTRING_LINES = 25
LONG_LINES = 500  # past this a module says at its top why it stays whole
MAX_LINES = 700  # past this only the merge kernel, one long routine in numbered phases
KERNEL = ROOT / "toktoktok" / "merge.py"
# a before->after figure: "0.74 -> 0.49 s", "1.2 → 0.9 MB"
TIMING = re.compile(r"[0-9.]+ ?s? ?(->|→) ?[0-9.]+ ?(s|ms|MB|MiB)\b")
ISSUE = re.compile(r"\bissues? ?#?[0-9]+", re.IGNORECASE)
DOC_PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# a machine's own folders in pasted output: a reader's machine has none of them
MACHINE_PATH = re.compile(r"(?<![\w.~])(/work/|/home/|/root/|/tmp/|/Users/|/private/|~/toktoktok)")
# notes of one run on one day: a time of day, a dated timestamp, an `ls -l` date, the machine's load
DATED = re.compile(r"load average|\bthis round\b|\bmoved in\b|\bat \d{1,2}:\d\d\b|\b20\d\d-\d\d-\d\d[ T]\d\d:\d\d"
                   r"|\b(Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) +\d{1,2} +\d\d:\d\d\b", re.IGNORECASE)


def rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


def comments(source: str) -> list[tuple[int, str]]:
    return [(tok.start[0], tok.string) for tok in tokenize.generate_tokens(io.StringIO(source).readline)
            if tok.type == tokenize.COMMENT]


def docstrings(tree: ast.AST) -> list[str]:
    nodes = [tree] + [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
    return [d for d in (ast.get_docstring(n) for n in nodes) if d]


def test_module_docstrings_are_short():
    long = {rel(p): n for p in CODE
            if (n := len((ast.get_docstring(ast.parse(p.read_text(encoding="utf-8"))) or "").splitlines()))
            > MAX_DOCSTRING_LINES}
    assert long == {}


def test_a_long_module_says_why_at_its_top():
    """Over 500 lines, the module docstring's first lines say why it stays one
    module (it names its length: "long", "one routine", ...); over 700, only the
    merge kernel."""
    too_long, unexplained = [], []
    for path in CODE:
        source = path.read_text(encoding="utf-8")
        lines = source.count("\n")
        if lines > MAX_LINES and path != KERNEL:
            too_long.append(f"{rel(path)}: {lines} lines")
        if lines > LONG_LINES:
            top = " ".join((ast.get_docstring(ast.parse(source)) or "").splitlines()[:8]).lower()
            if not re.search(r"\blong\b|\bone (routine|idea|kernel)\b|\bstays? (whole|together)\b", top):
                unexplained.append(f"{rel(path)}: {lines} lines")
    assert too_long == [] and unexplained == []


@pytest.mark.parametrize("folder", ["toktoktok", "stages"])
def test_no_timing_figures_in_code_comments(folder):
    """Figures go stale as the code and the machine change: they belong in
    benchmarks/*.md and commit messages; a comment gives the reason."""
    found = []
    for path in sorted((ROOT / folder).rglob("*.py")):
        source = path.read_text(encoding="utf-8")
        found += [f"{rel(path)}:{line}: {text}" for line, text in comments(source) if TIMING.search(text)]
        found += [f"{rel(path)}: docstring: {m.group()}" for d in docstrings(ast.parse(source))
                  for m in [TIMING.search(d)] if m]
    assert found == []


def test_tests_say_what_they_check_not_which_issue():
    found = []
    for path in TESTS:
        source = path.read_text(encoding="utf-8")
        found += [f"{rel(path)}:{line}: {text}" for line, text in comments(source) if ISSUE.search(text)]
        found += [f"{rel(path)}: {m.group()}" for d in docstrings(ast.parse(source)) for m in [ISSUE.search(d)] if m]
    assert found == []


@pytest.mark.parametrize("page", DOC_PAGES, ids=rel)
def test_docs_show_no_machine_paths_nor_dated_run_notes(page):
    """A page says what holds on any machine: pasted output shows paths relative
    to a checkout, and figures name the command that measures them, not the day."""
    found = [f"{rel(page)}:{n}: {m.group()}" for n, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1)
             for m in [MACHINE_PATH.search(line) or DATED.search(line)] if m]
    assert found == []


def test_the_checks_find_what_they_look_for():
    assert TIMING.search("# loading the inventory 0.36-0.43 -> 0.18 s")
    assert not TIMING.search("# 1 MiB windows, cut at safe places")
    assert ISSUE.search("Checks the fix of issue 14") and ISSUE.search("(issue #6)")
    assert comments("x = 1  # why\n") == [(1, "# why")]
    assert MACHINE_PATH.search("wrote /work/main/out/demo/demo.tiktoken") and MACHINE_PATH.search("~/toktoktok/out")
    assert not MACHINE_PATH.search("credentials in ~/.aws; measured with /usr/bin/time; see docs/outputs.md")
    assert DATED.search("load average 1.3") and DATED.search("than at 07:47 the same morning")
    assert DATED.search("-rw-r--r-- 1 root root 2002 Dec  1 16:49 index.json")
    assert DATED.search("Run 2026-12-02 07:07 UTC")
    assert not DATED.search("naïve café, 2026-12-01.") and not DATED.search("at most 30% of the memory")
