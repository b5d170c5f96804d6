#!/usr/bin/env python3
"""toktoktok's benchmarks: one runner, one section per report.

    .venv/bin/python benchmarks/run.py --section SECTION [the section's options]
    .venv/bin/python benchmarks/run.py --section SECTION --help

Sections (what each writes; the make target that runs it):

- ``peers`` -> ``results/RESULTS.md`` (``make bench``): toktoktok, rustbpe and Hugging
  Face on the same 100 MB corpora; its ``--parts`` add ingest alone, the
  merge-loop rate and time against size;
- ``ingest`` -> ``--out`` (default a temp file): ``peers --parts ingest``,
  toktoktok's ingest at 1 and 2 threads against a ``regex.findall`` +
  ``Counter`` loop;
- ``memory`` -> ``results/MEMORY.md`` (``make bench-memory``): peak RSS of ``toktok
  run`` against ``working_set_mb``, sampling, huge lines and row groups;
- ``scale`` -> ``results/SCALE.md`` (``make bench-scale``): toktoktok (and, at the
  largest size, toktoktok ingesting on a local Ray instance), rustbpe (fed
  1 MiB chunks, and documents) and Hugging Face on 0.1, 0.3 and 1.2 GB of the
  Linux kernel's source and on 100 MB of English prose (the shared corpora's);
  the scale targets; the merge loop alone on 1 and 2 threads at 1.2 GB, with a
  projection to more cores; a cost model of ingesting 1 TB on 64 machines;
- ``shapes`` -> the ``## shapes`` part of ``results/SCALE.md`` (``make bench-scale``):
  ``toktok ingest`` on the scale section's kernel text in every shape users
  bring (one ``.txt``, a folder of files, parquet, Arrow, ``datasets``'
  folder, JSON lines, compressed), against one ``.txt``, with the limit each
  works against and whether their inventories agree;
- ``superword`` -> ``results/SUPERWORD.md`` (``make bench-superword``): on 100 MB
  of English prose, a subword phase up to a transition point and a superword
  phase after it, at several points, against one plain phase of as many
  ranks: held-out tokens, wall and peak;
- ``merge-threads`` -> ``results/MERGE-THREADS.md``: the merge loop of a config's
  first phase on 1 and 2 threads (fresh processes, medians), whether the
  merges are identical, and a projection to more cores;
- ``scanner`` -> stdout (or ``--json``): the numba scanner's MB/s against
  ``regex.findall``;
- ``pieces`` -> stdout: ingest counts exactly ``regex.findall``'s pieces on
  real corpora;
- ``corpus`` -> ``--out``: the scale corpora, from Debian's
  ``linux-source-6.1``, and the prose decompressed from the shared corpora;
- ``big-corpus`` -> ``--out``: the 5 GB point's corpus, from several Debian
  packages, files of the same text taken once.

Where things live:

- ``sections/``: one module per section (``peers`` uses ``ingest``,
  ``scaling`` and ``targets`` for its parts of RESULTS.md), and the
  processes the sections start: ``peer_trainers.py`` (rustbpe, Hugging Face),
  ``baseline_ingest.py`` (the ``findall`` baseline); ``scale_corpus.py``
  builds the scale corpora, ``big_corpus.py`` the 5 GB one, ``shapes_corpus.py`` the shapes, ``shapes_probe.py``
  measures their limits and inventories;
- ``results/``: the reports, as the last run of each section wrote them;
- ``benchkit/``: the shared helpers: ``measure`` (a command run as a whole
  process, measured from outside: wall, CPU, ``ru_maxrss`` and the sampled
  peak of its process tree; medians; the growth exponent), ``toktok``
  (toktoktok's config, its CLI, its manifests), ``corpus`` (the shared
  corpora and the demo fallback), ``report`` (machine, commit, versions,
  Markdown tables), ``reduce_cost`` (the Ray engine's sum of count tables,
  timed per row, as a process of its own);

The benchmarks drive toktoktok through its command line (``toktok ...``),
its public library (``toktoktok.load``) and the JSON manifests it writes;
only ``scanner`` (a kernel's own speed), ``memory`` (the sampling rule it
checks against) and ``benchkit.reduce_cost`` (``counts.sum_tables``) import
library modules.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
SECTIONS = {
    "peers": "sections.peers",
    "ingest": "sections.peers",
    "memory": "sections.memory",
    "scale": "sections.scale",
    "shapes": "sections.shapes",
    "scanner": "sections.scanner",
    "pieces": "sections.pieces",
    "corpus": "sections.scale_corpus",
    "big-corpus": "sections.big_corpus",
    "superword": "sections.superword",
    "merge-threads": "sections.merge_threads",
}


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0], add_help=False)
    parser.add_argument("--section", choices=sorted(SECTIONS))
    args, rest = parser.parse_known_args(argv)
    if args.section is None:
        print(__doc__)
        return 0 if {"-h", "--help"} & set(rest) else 2
    if str(HERE) not in sys.path:
        sys.path.insert(0, str(HERE))
    if args.section == "ingest":  # RESULTS.md's ingest part alone, into its own file unless told
        out = [] if "--out" in rest else ["--out", str(Path(tempfile.gettempdir()) / "toktok-INGEST.md")]
        rest = ["--parts", "ingest", "--only", "toktoktok", *out, *rest]
    module = importlib.import_module(SECTIONS[args.section])
    return module.main(rest) or 0


if __name__ == "__main__":
    sys.exit(main())
