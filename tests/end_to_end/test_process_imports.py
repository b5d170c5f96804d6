"""What a ``toktok run`` process imports: not pandas, which pyarrow would bring in (40 MB resident)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.processes import phase, write_config

# the CLI's own entry in a fresh interpreter, which says at exit which of its modules came from pandas
RUN = """
import atexit, sys
atexit.register(lambda: print("pandas modules:", sorted(m for m in sys.modules if m.split(".")[0] == "pandas")))
sys.argv = ["toktok", "run", "-c", sys.argv[1]]
from toktoktok_stages.cli.entry import main
main()
"""


@pytest.mark.skipif(importlib.util.find_spec("pandas") is None, reason="pandas is not installed")
def test_a_run_on_parquet_and_text_never_imports_pandas(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "a.txt").write_text("the cat sat on the mat\n\nthe dog sat on the log\n" * 50, encoding="utf-8")
    pq.write_table(pa.table({"text": ["a parquet row of text"] * 40 + ["another row, another text"] * 40}),
                   data / "b.parquet")
    config = write_config(tmp_path / "job", [phase("one", 40, {"path": str(data)})])
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    proc = subprocess.run([sys.executable, "-c", RUN, str(config)], capture_output=True, text=True, env=env,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "checked with tiktoken" in proc.stderr + proc.stdout, "the run went to the end"
    assert "pandas modules: []" in proc.stdout
