"""A wheel built from the tree installs and runs the demo config from a folder
outside the checkout, so that the repository's own folders cannot stand in
for what the wheel lacks.

The test stays offline and quick: the wheel is built without build isolation
(the test environment's setuptools), into a fresh virtual environment that
sees the test environment's packages through a ``.pth`` line (runtime
dependencies without a download), and installed with ``--no-deps``. That
``.pth`` line adds the folder to ``sys.path`` without running the ``.pth``
files inside it, so the checkout's editable install stays out of sight.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
KEEP_OUT = {".git", ".venv", "out", "build", "__pycache__", "demo", ".pytest_cache"}

pytestmark = pytest.mark.slow


def _run(args: list[str], cwd: Path, env: dict[str, str] | None = None, timeout: float = 600) -> str:
    done = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"{args[:3]}... exited {done.returncode}:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    return done.stdout


def _tree_copy(to: Path) -> Path:
    """The checkout's sources without its environment, outputs or build leftovers
    (building in place would leave ``build/`` in the checkout)."""
    def ignored(_folder: str, names: list[str]) -> set[str]:
        return {n for n in names if n in KEEP_OUT or n.endswith(".egg-info")}
    return Path(shutil.copytree(ROOT, to, ignore=ignored))


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtual environment with toktoktok installed from a wheel of the tree; its bin folder."""
    top = tmp_path_factory.mktemp("wheel")
    src = _tree_copy(top / "src")
    try:
        import setuptools
    except ImportError:
        pytest.skip("setuptools is not installed in the test environment")
    if tuple(int(p) for p in setuptools.__version__.split(".")[:2]) < (70, 1):
        pytest.skip("setuptools >= 70.1 (which builds wheels itself) is not installed; the [test] extra brings it")
    _run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation", "--no-index",
          "-w", str(top / "dist"), str(src)], cwd=top)
    wheels = list((top / "dist").glob("toktoktok-*.whl"))
    assert len(wheels) == 1, wheels
    env_dir = top / "env"
    base = getattr(sys, "_base_executable", sys.executable)
    _run([base, "-m", "venv", "--without-pip", str(env_dir)], cwd=top)
    python = env_dir / "bin" / "python"
    site = _run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], cwd=top).strip()
    (Path(site) / "test-env-packages.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    _run([sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", "--no-deps", "--no-index",
          str(wheels[0])], cwd=top)
    return env_dir / "bin"


def _outside_env(work: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "VIRTUAL_ENV"}}
    env["HOME"] = str(work)
    return env


def test_the_wheel_imports_from_its_own_environment(installed: Path, tmp_path: Path) -> None:
    where = _run([str(installed / "python"), "-c",
                  "import toktoktok, toktoktok_stages.ingest.local as m; print(toktoktok.__file__); print(m.__file__)"],
                 cwd=tmp_path, env=_outside_env(tmp_path)).split()
    env_dir = installed.parent.resolve()
    assert all(Path(p).resolve().is_relative_to(env_dir) for p in where), where
    assert not any(Path(p).resolve().is_relative_to(ROOT) for p in where), where


def test_the_wheel_runs_the_demo_config_outside_the_checkout(installed: Path, tmp_path: Path) -> None:
    (tmp_path / "configs").mkdir()
    shutil.copy(ROOT / "configs" / "demo.yaml", tmp_path / "configs" / "demo.yaml")
    _run([sys.executable, str(ROOT / "data" / "build_demo.py"), str(tmp_path / "data" / "demo"), "--max-mb", "1"],
         cwd=tmp_path)
    env = _outside_env(tmp_path)
    _run([str(installed / "toktok"), "run", "-c", "configs/demo.yaml"], cwd=tmp_path, env=env, timeout=900)
    made = tmp_path / "out" / "demo" / "demo.tiktoken"
    assert made.is_file()
    check = (
        "import sys, toktoktok\n"
        "enc = toktoktok.load(sys.argv[1])\n"
        "text = 'def main():\\n    return 42  # the answer\\n<|endoftext|>'\n"
        "ids = enc.encode(text, allowed_special='all')\n"
        "assert enc.decode(ids) == text, ids\n"
        "from toktoktok.vocab import hardcoded_merges\n"
        "assert enc.n_vocab == 256 + len(hardcoded_merges()) + 3000 + 2000 + 3, enc.n_vocab\n"
        "print(len(ids))\n"
    )
    count = _run([str(installed / "python"), "-c", check, str(made)], cwd=tmp_path, env=env)
    assert int(count) > 0
