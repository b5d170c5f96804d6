#!/usr/bin/env python3
"""The ingest baseline: ``regex.findall`` + ``collections.Counter`` in one Python process.

    python benchmarks/sections/baseline_ingest.py --corpus train.txt --pattern REGEX --out counts.json

Reads the same plain ``.txt`` toktoktok ingests, split into the same
documents (``peer_trainers.iter_documents``: docs/pretokenization.md's blank-line boundary, streamed
in 1 MB blocks), and counts its pieces with the plainest loop there is::

    counts = collections.Counter()
    for doc in documents:
        counts.update(regex.findall(pattern, doc))

Writes to ``--out`` what it found and how long it took, timed inside the
process like toktoktok's stage manifests (Python start-up and imports left
out): ``seconds`` from opening the file to the last count, and
``loop_seconds``, the part of it spent in ``findall`` and ``Counter``.
``pieces`` and ``distinct`` let the benchmark check that toktoktok's ingest
found the same pieces.
"""

from __future__ import annotations

import argparse
import collections
import json
import time
from pathlib import Path

import regex
from peer_trainers import iter_documents


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, required=True, help="plain UTF-8 .txt")
    parser.add_argument("--pattern", required=True, help="the pre-tokenization regex")
    parser.add_argument("--out", type=Path, required=True, help="JSON report")
    args = parser.parse_args(argv)
    pattern = args.pattern
    regex.findall(pattern, "")  # compile outside the timing, as toktoktok's tables load outside its stage
    started = time.perf_counter()
    counts: collections.Counter[str] = collections.Counter()
    loop = 0.0
    documents = 0
    for doc in iter_documents(args.corpus):
        t = time.perf_counter()
        counts.update(regex.findall(pattern, doc))
        loop += time.perf_counter() - t
        documents += 1
    seconds = time.perf_counter() - started
    report = {"seconds": seconds, "loop_seconds": loop, "documents": documents,
              "bytes": args.corpus.stat().st_size, "pieces": sum(counts.values()), "distinct": len(counts)}
    args.out.write_text(json.dumps(report) + "\n", encoding="utf-8")
    print(f"baseline: {documents} documents, {report['pieces']} pieces, {report['distinct']} distinct, "
          f"{seconds:.2f} s ({loop:.2f} s in findall + Counter)")


if __name__ == "__main__":
    main()
