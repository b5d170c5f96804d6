"""The house rules, read from the imports of every module (inside functions too).

- ``toktoktok/`` (the library) never imports ``stages/`` (installed as
  ``toktoktok_stages``).
- ``stages/`` has four layers, each a few units (a module or a package);
  a module imports only from layers below it, or from its own unit:

  1. the command line (``stages.cli``: its entry and its commands' options);
  2. the orchestrator (``stages.pipeline``) and the user commands
     (``stages.commands``), which never import each other;
  3. the stages ``ingest`` (with its engines inside it), ``train``,
     ``export`` and ``report``, which never import each other: they meet in
     the work folder and the files it names;
  4. the work folder (``stages.workdir``: layout, keys, artifacts, progress).
- Inside ``stages/`` the pipeline imports itself relatively, so it works under
  its installed name; nothing anywhere imports a top-level ``stages``.
- No module takes another module's ``_private`` name.

A new module must be given its layer here (the test fails until it is).
docs/architecture.md draws the same map.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

LAYERS: dict[str, int] = {
    "stages.cli": 1,
    "stages.pipeline": 2, "stages.commands": 2,
    "stages.ingest": 3, "stages.train": 3, "stages.export": 3, "stages.report": 3,
    "stages.workdir": 4,
    "stages": 4,  # the package's own __init__: a docstring
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def unit(module: str) -> str:
    """The layer map's entry a module belongs to: ``stages.ingest.routing`` -> ``stages.ingest``."""
    while module not in LAYERS and module.count(".") > 1:
        module = module.rsplit(".", 1)[0]
    return module


def absolute_pipeline_imports(source: str) -> list[tuple[int, str]]:
    """Absolute imports of ``stages`` or ``toktoktok_stages`` (inside the pipeline
    they must be relative, so the package works under its installed name)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                 else [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
        found += [(node.lineno, n) for n in names if n.split(".")[0] in ("stages", "toktoktok_stages")]
    return found


def base_of(node: ast.ImportFrom, module: str) -> str:
    """The module a ``from ... import`` reads from, relative levels resolved."""
    if not node.level:
        return node.module or ""
    package = module if (ROOT / module.replace(".", "/")).is_dir() else module.rpartition(".")[0]
    anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
    return ".".join(anchor + ([node.module] if node.module else []))


def imports(source: str, module: str, known: set[str]) -> list[tuple[int, str, str | None]]:
    """(line, imported module, imported name or None) for every import in ``source``,
    relative imports resolved; ``from pkg import mod`` gives ``pkg.mod``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name, None) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = base_of(node, module)
            for alias in node.names:
                full = f"{base}.{alias.name}"
                found.append((node.lineno, full, None) if full in known else (node.lineno, base, alias.name))
    return found


def private_attributes(source: str, aliases: dict[str, str]) -> list[tuple[int, str]]:
    """``alias._name`` uses where ``alias`` is an imported project module."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases
                and node.attr.startswith("_") and not node.attr.startswith("__")):
            out.append((node.lineno, f"{aliases[node.value.id]}.{node.attr}"))
    return out


def module_aliases(source: str, module: str, known: set[str]) -> dict[str, str]:
    aliases = {}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in known and alias.asname:
                    aliases[alias.asname] = alias.name
        elif isinstance(node, ast.ImportFrom):
            base = base_of(node, module)
            for alias in node.names:
                full = f"{base}.{alias.name}"
                if full in known:
                    aliases[alias.asname or alias.name] = full
    return aliases


def problems(sources: dict[str, str]) -> list[str]:
    """Every broken rule in ``sources`` ({module name: its code})."""
    known = set(sources)
    out = []
    for module, source in sources.items():
        if module.startswith("stages") and unit(module) not in LAYERS:
            out.append(f"{module}: not in the layer map of tests/test_layers.py")
            continue
        for line, target, name in imports(source, module, known):
            where = f"{module}:{line}"
            if not target.startswith(("stages", "toktoktok")):
                continue
            if module.startswith("toktoktok") and target.split(".")[0] in ("stages", "toktoktok_stages"):
                out.append(f"{where}: the library imports {target}")
            if name and name.startswith("_") and not name.startswith("__") and target != module:
                out.append(f"{where}: takes the private name {name} of {target}")
            if module.startswith("stages") and target.startswith("stages") and unit(target) != unit(module):
                mine, theirs = LAYERS[unit(module)], LAYERS.get(unit(target), 0)
                if theirs < mine or (theirs == mine and mine != 4):
                    out.append(f"{where}: layer {mine} ({unit(module)}) imports layer {theirs} ({target})")
        if module.startswith("stages"):
            out += [f"{module}:{line}: imports {name} by an absolute name" for line, name in
                    absolute_pipeline_imports(source)]
        for line, name in private_attributes(source, module_aliases(source, module, known)):
            if name.rpartition(".")[0] != module:
                out.append(f"{module}:{line}: uses the private name {name}")
    return out


def project_sources() -> dict[str, str]:
    files = sorted((ROOT / "toktoktok").rglob("*.py")) + sorted((ROOT / "stages").rglob("*.py"))
    return {module_name(p): p.read_text(encoding="utf-8") for p in files}


def test_the_house_keeps_its_layers():
    sources = project_sources()
    assert "stages.workdir" in sources and "toktoktok.api" in sources
    assert problems(sources) == []


@pytest.mark.parametrize("module, code, broken", [
    ("toktoktok.api", "def f():\n    from toktoktok_stages import pipeline\n", "the library imports toktoktok_stages"),
    ("stages.train", "from .ingest import run_ingest\n", "layer 3 (stages.train) imports layer 3"),
    ("stages.export", "from . import train as t\n", "layer 3 (stages.export) imports layer 3"),
    ("stages.workdir", "from .. import pipeline\n", "layer 4 (stages.workdir) imports layer 2"),
    ("stages.workdir.artifacts", "from ..ingest import run_ingest\n", "layer 4 (stages.workdir) imports layer 3"),
    ("stages.ingest.routing", "from ..commands import plan\n", "layer 3 (stages.ingest) imports layer 2"),
    ("stages.commands.plan", "from ..workdir import _fingerprint\n", "takes the private name _fingerprint"),
    ("stages.commands.plan", "from .. import workdir\nworkdir._unwritable(1)\n", "uses the private name"),
    ("stages.commands.plan", "from .. import pipeline\n", "layer 2 (stages.commands) imports layer 2"),
    ("stages.commands.plan", "from stages import workdir\n", "imports stages by an absolute name"),
    ("stages.train", "import toktoktok_stages.workdir\n", "imports toktoktok_stages.workdir by an absolute name"),
    ("stages.newthing", "x = 1\n", "not in the layer map"),
])
def test_the_checker_finds_each_kind_of_broken_rule(module, code, broken):
    sources = {m: "" for m in ("stages.pipeline", "stages.ingest", "stages.ingest.routing", "stages.train",
                               "stages.workdir", "stages.workdir.artifacts", "stages.commands",
                               "stages.commands.plan", "stages.export", "toktoktok.api")}
    sources[module] = code
    found = problems(sources)
    assert any(broken in p for p in found), found


def test_the_checker_allows_what_the_rules_allow():
    sources = {
        "stages.cli.entry": "def main():\n    from .app import main\n",
        "stages.cli.app": "from .. import pipeline\nfrom ..commands import plan\n",
        "stages.pipeline": "def f():\n    from .ingest import run_ingest\n    from . import workdir\n",
        "stages.commands.plan": "from ..workdir import artifacts\nfrom .texts import table\n",
        "stages.commands.texts": "",
        "stages.ingest": "from .routing import Router\nfrom .. import workdir\n",
        "stages.ingest.routing": "from .batching import Batcher\n",
        "stages.ingest.batching": "from .regex_worker import count_in_worker\n",
        "stages.ingest.regex_worker": "from toktoktok.pretokenize import count_with_regex\n",
        "stages.workdir": "from . import artifacts\n",
        "stages.workdir.artifacts": "",
        "toktoktok.pretokenize": "",
    }
    assert problems(sources) == []


def test_nothing_imports_a_top_level_stages():
    """Tests, benchmarks and the demo's recipe take the pipeline by its installed name."""
    found = []
    for folder in ("tests", "benchmarks", "data", "toktoktok"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            source = path.read_text(encoding="utf-8")
            found += [f"{path.relative_to(ROOT)}:{line}: {name}" for line, name in absolute_pipeline_imports(source)
                      if name.split(".")[0] == "stages"]
    assert found == []


def test_the_installed_packages_are_the_folders():
    """pyproject.toml lists every package folder, under its installed name (a wheel
    holds only what is listed)."""
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    listed = set(re.findall(r'"(toktoktok[\w.]*)"', text.split("packages = [", 1)[1].split("]", 1)[0]))
    folders = {".".join(p.parent.relative_to(ROOT).parts) for p in ROOT.glob("*/**/__init__.py")
               if p.parts[len(ROOT.parts)] in ("toktoktok", "stages")}
    assert listed == {f.replace("stages", "toktoktok_stages", 1) if f.startswith("stages") else f for f in folders}
