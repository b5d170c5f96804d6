"""What summing count tables costs against their rows: the Ray engine's reduce step, timed on a real inventory.

    python benchmarks/benchkit/reduce_cost.py INGEST_FOLDER    # prints JSON

The Ray engine sums the tasks' count tables ``FAN_IN`` at a time with
``toktoktok.counts.sum_tables``. Its cost per input row is what the scale
report's cost model needs at sizes no run here reaches, so it is timed on
the inventory an ingest just wrote (its ``chunk-*.arrow`` files, read
whole): ``FAN_IN`` copies of its first ``rows`` rows summed, for a quarter,
a half and all of its rows (best of 3 each, after one call that loads
numba's code). Copies of the same rows all match: the output has ``rows``
rows, the most work a row can cost (every row is looked up and added).

Run as a process of its own with the benchmark's numba cache, so the bench
itself stays free of toktoktok's code and memory.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

FAN_IN = 8  # as stages/ray_engine.FAN_IN at the time of writing; the report prints what it used
REPEAT = 3


def measure(folder: Path, fan_in: int = FAN_IN) -> dict[str, object]:
    """Seconds of ``sum_tables`` over ``fan_in`` tables of a quarter, half and all the rows of ``folder``'s inventory."""
    import pyarrow as pa
    import pyarrow.ipc as ipc

    from toktoktok import counts

    parts = [ipc.open_file(pa.memory_map(str(p))).read_all() for p in sorted(folder.glob("chunk-*.arrow"))]
    table = pa.concat_tables(parts).combine_chunks() if parts else counts.SCHEMA.empty_table()
    rows = table.num_rows
    counts.sum_tables([table.slice(0, 2), table.slice(0, 2)])  # numba's code, loaded once
    points = []
    for share in (4, 2, 1):
        part = table.slice(0, rows // share)
        best = float("inf")
        for _ in range(REPEAT):
            started = time.perf_counter()
            out = counts.sum_tables([part] * fan_in)
            best = min(best, time.perf_counter() - started)
        assert out.num_rows == part.num_rows
        points.append({"rows": part.num_rows, "input_rows": fan_in * part.num_rows, "seconds": best})
    return {"fan_in": fan_in, "rows": rows, "table_bytes": counts.table_bytes(table) if rows else 0,
            "bytes_per_row": counts.table_bytes(table) / rows if rows else None, "points": points}


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: reduce_cost.py INGEST_FOLDER")
    print(json.dumps(measure(Path(sys.argv[1]))))
