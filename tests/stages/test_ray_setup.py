"""``engine: ray`` as installed, without the session's Ray instance: the ``ray``
extra is enough for a ``ray://`` address; ``toktok plan`` refuses what ``run``
refuses when Ray cannot be imported; a local instance's object store is the
smaller of what the run needs and a share of the memory available.

The Ray instance a command starts with a ``working_set_mb`` above the machine's
memory is in test_ingest_ray.py (it needs Ray installed).
"""

from __future__ import annotations

import os
import subprocess

import pytest

from tests.processes import TOKTOK, error_line, phase, write_config
from toktoktok_stages.ingest import ray_engine


def shimmed(tmp_path):
    """An environment in which ``import ray`` fails, as where Ray is not installed."""
    shim = tmp_path / "shim" / "ray"
    shim.mkdir(parents=True)
    (shim / "__init__.py").write_text("raise ImportError('No module named ray (a test shim)')\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    env["PYTHONPATH"] = str(shim.parent)
    return env


@pytest.mark.parametrize("command", ["plan", "run"])
def test_plan_refuses_engine_ray_without_ray_as_run_does(tmp_path, command):
    data = tmp_path / "data"
    data.mkdir()
    (data / "a.txt").write_text("hello world\n")
    config = write_config(tmp_path / "p", [phase("A", 10, {"path": str(data)})], engine="ray")
    proc = subprocess.run([str(TOKTOK), command, "-c", str(config)], capture_output=True, text=True,
                          env=shimmed(tmp_path), timeout=120)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    line = error_line(proc.stderr)
    assert "engine: ray needs Ray" in line and "toktoktok[ray]" in line, line
    assert not (tmp_path / "p" / "out").exists()  # refused before any work


def test_object_store_is_the_smaller_of_the_need_and_a_share_of_memory():
    assert ray_engine.object_store_mb(2048, 24_000) == (2048, None)
    assert ray_engine.object_store_mb(16, 24_000) == (ray_engine.MIN_STORE_MB, None)
    size, note = ray_engine.object_store_mb(4 << 20, 24_000)  # 4 TiB asked, as the docs allow
    assert size == int(24_000 * ray_engine.STORE_SHARE)
    assert note is not None and "\n" not in note and "working_set_mb" in note and f"{size} MiB" in note
    assert ray_engine.object_store_mb(4 << 20, 100)[0] == 75  # never below Ray's own minimum
    assert 0 < ray_engine.available_mb() < 1 << 30


def test_the_ray_extra_installs_what_a_ray_client_address_needs():
    pytest.importorskip("ray")
    from ray._private.utils import get_ray_client_dependency_error

    assert get_ray_client_dependency_error() is None  # else ray.init("ray://...") says "requires ray[client]"
