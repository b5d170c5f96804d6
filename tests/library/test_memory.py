"""The CLI's process settings in ``toktoktok.memory``: pyarrow kept from importing pandas."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest

needs_pandas = pytest.mark.skipif(importlib.util.find_spec("pandas") is None, reason="pandas is not installed")

# a fresh interpreter: converts numpy data with pyarrow, says whether pandas came
# in, then asks for a DataFrame, which must still work
CONVERT = """
import sys
{first}
import numpy as np, pyarrow as pa
table = pa.table({{"x": pa.array(np.arange(3, dtype=np.uint64))}})
table["x"].combine_chunks().to_numpy(zero_copy_only=False)
pa.array([1, None]).is_valid().to_numpy(zero_copy_only=False)
print("pandas" in sys.modules, type(table.to_pandas()).__name__)
"""


def converted(first: str) -> list[str]:
    code = CONVERT.format(first=first)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()


@needs_pandas
def test_pyarrow_imports_pandas_unless_kept_out():
    assert converted("") == ["True", "DataFrame"], "pyarrow's first conversion imports pandas when it is installed"
    kept = "from toktoktok.memory import keep_pandas_out\nkeep_pandas_out()"
    assert converted(kept) == ["False", "DataFrame"]


@needs_pandas
def test_pandas_imported_first_stays():
    first = "import pandas\nfrom toktoktok.memory import keep_pandas_out\nkeep_pandas_out()"
    assert converted(first) == ["True", "DataFrame"]
