"""Helpers shared by the benchmark sections (``benchmarks/run.py``).

- ``measure``: run a command as a whole process and measure it from outside
  (wall, CPU, ``ru_maxrss``, the sampled peak of its process tree); medians;
  the growth exponent of a cost against size;
- ``toktok``: toktoktok's config, its command line, its stage manifests;
- ``corpus``: the shared corpora (or the demo fallback) as training ``.txt``
  and held-out text;
- ``report``: machine, commit, versions, Markdown tables.
"""
