"""numba's compile cache is keyed by all of the package's sources (toktoktok.jit_cache).

numba keys a cached kernel by its own file: a kernel using code of another
module kept running the old code after that module changed. The end-to-end
test builds a two-module package in a temporary folder, runs its kernel in a
fresh process, changes the other module and runs it again.
"""

from __future__ import annotations

import inspect
import os
import subprocess
import sys
from pathlib import Path

import numba
import pytest

import toktoktok
from toktoktok import documents, jit_cache, merge, scanner, segment, span_table, summing, units


def _dispatchers(module):
    for name, obj in vars(module).items():
        if isinstance(obj, numba.core.registry.CPUDispatcher) and inspect.getmodule(obj.py_func) is module:
            yield name, obj


@pytest.mark.parametrize("module", [documents, merge, scanner, segment, span_table, summing, units])
def test_every_cached_kernel_is_keyed_by_the_package(module):
    digest = jit_cache.source_digest(jit_cache.PACKAGE)
    cached = [(name, d) for name, d in _dispatchers(module) if d._cache._impl is not None
              and type(d._cache).__name__ == "FunctionCache"]
    assert cached, module.__name__
    for name, d in cached:
        locator = d._cache._impl._locator
        assert isinstance(locator, jit_cache.FolderKeyed), name
        assert locator.get_source_stamp()[1] == digest, name


def test_a_kernel_in_the_sources_package_is_keyed_by_the_package():
    """The package's sub-packages are under the same key: a kernel defined in a
    ``toktoktok.sources`` module gets the folder-keyed locator, as ``scanner``'s do."""
    from toktoktok.sources import txt_windows

    space = {"__name__": txt_windows.__name__}
    exec(compile("def twice(x):\n    return 2 * x\n", txt_windows.__file__, "exec"), space)
    kernel = numba.njit(cache=True)(space["twice"])
    locator = kernel._cache._impl._locator
    assert isinstance(locator, jit_cache.FolderKeyed)
    assert locator.get_source_stamp()[1] == jit_cache.source_digest(jit_cache.PACKAGE)


def test_kernels_elsewhere_keep_numba_keys():
    @numba.njit(cache=True)
    def here(x):
        return x + 1

    assert not isinstance(here._cache._impl._locator, jit_cache.FolderKeyed)
    assert jit_cache.keep_fresh(jit_cache.PACKAGE)  # a second call changes nothing
    keyed = [c for c in numba.core.caching.CacheImpl._locator_classes if issubclass(c, jit_cache.FolderKeyed)]
    assert len({(c.__name__, c.folder) for c in keyed}) == len(keyed)


def test_digest_follows_every_file(tmp_path):
    for name in ("a.py", "b.py"):
        (tmp_path / name).write_text("x = 1\n")
    (tmp_path / "notes.txt").write_text("not a source")
    first = jit_cache.source_digest(tmp_path)
    assert jit_cache.source_digest(tmp_path) == first
    (tmp_path / "notes.txt").write_text("changed")
    assert jit_cache.source_digest(tmp_path) == first
    (tmp_path / "b.py").write_text("x = 2\n")
    assert jit_cache.source_digest(tmp_path) != first
    (tmp_path / "b.py").write_text("x = 1\n")
    (tmp_path / "c.py").write_text("")
    assert jit_cache.source_digest(tmp_path) != first


def test_digest_follows_the_files_in_sub_folders(tmp_path):
    (tmp_path / "a.py").write_text("x = 1\n")
    for folder in ("sub", "other"):
        (tmp_path / folder).mkdir()
    (tmp_path / "sub" / "b.py").write_text("x = 1\n")
    first = jit_cache.source_digest(tmp_path)
    (tmp_path / "sub" / "b.py").write_text("x = 2\n")
    assert jit_cache.source_digest(tmp_path) != first
    (tmp_path / "sub" / "b.py").write_text("x = 1\n")
    assert jit_cache.source_digest(tmp_path) == first
    (tmp_path / "sub" / "b.py").rename(tmp_path / "other" / "b.py")  # the same name and bytes, another folder
    assert jit_cache.source_digest(tmp_path) != first


PACKAGE_INIT = """
from pathlib import Path
from toktoktok.jit_cache import keep_fresh
keep_fresh(Path(__file__).parent)
"""
KERNEL = """
from numba import njit
from pkgx.helper import value

@njit(cache=True)
def total():
    return value() + 10
"""
HELPER = """
from numba import njit

@njit(cache=True)
def value():
    return {}
"""


@pytest.mark.parametrize("kernel", ["pkgx.kernel", "pkgx.inner.kernel"])
def test_a_change_in_another_module_compiles_the_kernel_again(tmp_path, kernel):
    """Also for a kernel in a sub-package (``pkgx.inner``) of the folder kept fresh."""
    pkg = tmp_path / "pkgx"
    (pkg / "inner").mkdir(parents=True)
    (pkg / "__init__.py").write_text(PACKAGE_INIT)
    (pkg / "inner" / "__init__.py").write_text("")
    (tmp_path / f"{kernel.replace('.', '/')}.py").write_text(KERNEL)
    (pkg / "helper.py").write_text(HELPER.format(1))
    root = Path(toktoktok.__file__).resolve().parent.parent
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "cache"),
           "PYTHONPATH": os.pathsep.join([str(tmp_path), str(root)])}

    def run() -> str:
        done = subprocess.run([sys.executable, "-c", f"from {kernel} import total; print(total())"],
                              env=env, capture_output=True, text=True, check=True)
        return done.stdout.strip()

    assert run() == "11"
    assert any((tmp_path / "cache").rglob("*.nbi"))  # the kernel was cached
    (pkg / "helper.py").write_text(HELPER.format(2))
    assert run() == "12"  # numba's own keys gave 11: the cached kernel, not the helper's change
