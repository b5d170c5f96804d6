"""The worked examples in the pipeline's docstrings, run under its installed name.

pytest's ``--doctest-modules`` collects ``toktoktok/`` itself; ``stages/`` is
imported as ``toktoktok_stages`` (its relative imports need the package), so
its examples run here, one test a module.
"""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import toktoktok_stages

MODULES = sorted(m.name for m in pkgutil.walk_packages(toktoktok_stages.__path__, "toktoktok_stages."))


def test_every_module_is_found():
    assert {"toktoktok_stages.cli.app", "toktoktok_stages.ingest.routing", "toktoktok_stages.workdir"} <= set(MODULES)


@pytest.mark.parametrize("name", MODULES)
def test_worked_examples(name):
    result = doctest.testmod(importlib.import_module(name), verbose=False, report=True)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples failed in {name} (output above)"
