"""One module per section of ``benchmarks/run.py``; each has ``main(argv)``."""
