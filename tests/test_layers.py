"""The house rules, read from the imports of every module (inside functions too).

- ``toktoktok/`` (the library) never imports ``stages/``.
- ``stages/`` has four layers; a module imports only from layers below it
  (layer 4, the work folder and its helpers, may import itself), so the
  stages ``ingest``, ``train``, ``export`` never import each other: they
  meet in ``stages.workdir`` and the files it names. The modules of one
  stage (the ``stages.ingest`` package and its worker) may import each other.
- No module takes another module's ``_private`` name.

A new module must be given its layer here (the test fails until it is).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

LAYERS: dict[str, int] = {
    "stages.cli": 1,
    "stages.pipeline": 2, "stages.plan": 2, "stages.inspect": 2, "stages.encode": 2, "stages.compare": 2,
    "stages.clean": 2, "stages.decode": 2, "stages.show": 2,
    "stages.ingest": 3, "stages.ingest_worker": 3, "stages.train": 3, "stages.export": 3, "stages.report": 3,
    "stages.ray_engine": 3, "stages.ray_guard": 3,
    "stages.workdir": 4, "stages.artifacts": 4, "stages.progress": 4, "stages.texts": 4,
    "stages": 4,
}

# the modules of one stage may import each other (a stage may be a small package)
STAGE_OF = {"stages.ingest_worker": "stages.ingest", "stages.ray_engine": "stages.ingest",
            "stages.ray_guard": "stages.ingest"}


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


def stage(module: str) -> str:
    return STAGE_OF.get(unit(module), unit(module))


def imports(source: str, module: str, known: set[str]) -> list[tuple[int, str, str | None]]:
    """(line, imported module, imported name or None) for every import in ``source``,
    relative imports resolved; ``from pkg import mod`` gives ``pkg.mod``."""
    found = []
    package = module if (ROOT / module.replace(".", "/")).is_dir() else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name, None) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
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
        elif isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
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
            if module.startswith("toktoktok") and target.split(".")[0] == "stages":
                out.append(f"{where}: the library imports {target}")
            if name and name.startswith("_") and not name.startswith("__") and target != module:
                out.append(f"{where}: takes the private name {name} of {target}")
            if module.startswith("stages") and target.startswith("stages") and stage(target) != stage(module):
                mine, theirs = LAYERS[unit(module)], LAYERS.get(unit(target), 0)
                if theirs < mine or (theirs == mine and mine != 4):
                    out.append(f"{where}: layer {mine} ({unit(module)}) imports layer {theirs} ({target})")
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
    ("toktoktok.api", "def f():\n    from stages import pipeline\n", "the library imports stages.pipeline"),
    ("stages.train", "from stages.ingest import run_ingest\n", "layer 3 (stages.train) imports layer 3"),
    ("stages.export", "import stages.train as t\n", "layer 3 (stages.export) imports layer 3"),
    ("stages.workdir", "from stages import pipeline\n", "layer 4 (stages.workdir) imports layer 2"),
    ("stages.plan", "from stages.workdir import _fingerprint\n", "takes the private name _fingerprint"),
    ("stages.plan", "from stages import workdir\nworkdir._unwritable(1)\n", "uses the private name"),
    ("stages.encode", "from stages import compare\n", "layer 2 (stages.encode) imports layer 2"),
    ("stages.newthing", "x = 1\n", "not in the layer map"),
])
def test_the_checker_finds_each_kind_of_broken_rule(module, code, broken):
    sources = {m: "" for m in ("stages.pipeline", "stages.ingest", "stages.train", "stages.workdir",
                               "stages.compare", "stages.encode", "stages.plan", "stages.export", "toktoktok.api")}
    sources[module] = code
    found = problems(sources)
    assert any(broken in p for p in found), found


def test_the_checker_allows_what_the_rules_allow():
    sources = {
        "stages.cli": "from stages import pipeline\n",
        "stages.pipeline": "def f():\n    from stages.ingest import run_ingest\n    from stages import workdir\n",
        "stages.ingest": "from stages.ingest.routing import Router\nfrom stages import workdir\n",
        "stages.ingest.routing": "from stages.ingest.batching import Batcher\n",
        "stages.ingest.batching": "from stages.ingest_worker import count_in_worker\n",
        "stages.ingest_worker": "from toktoktok.pretokenize import count_texts\n",
        "stages.workdir": "from stages import artifacts\n",
        "stages.artifacts": "",
        "toktoktok.pretokenize": "",
    }
    assert problems(sources) == []
