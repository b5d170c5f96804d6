"""The ``toktok`` and ``toktoktok`` commands' first lines, before anything heavy loads.

Until the command has begun, a Ctrl-C prints one line and exits 130 (a
handler set before the imports, which take most of a second); numpy then
loads with its BLAS on one thread and without transparent huge pages,
Arrow allocates through jemalloc, unless the environment says otherwise,
and Python's collector runs less often. Only the standard library's C
modules are imported here, so a script importing the package is left
alone: all of this happens in ``main`` and ``legacy_main``.
"""

# the C module under ``signal``: ``signal.getsignal`` imports and builds enums
# first (milliseconds in which a Ctrl-C would still raise KeyboardInterrupt)
import _signal
import gc
import os


def interrupted_while_starting(signum: int, frame: object) -> None:
    os.write(2, b"\ninterrupted: nothing was done\n")
    os._exit(130)


def prepare() -> None:
    """Ctrl-C handled, numpy's environment set; before numpy or click is imported."""
    if _signal.getsignal(_signal.SIGINT) is _signal.default_int_handler:
        _signal.signal(_signal.SIGINT, interrupted_while_starting)
    # OpenBLAS starts a spinning thread per core at import, CPU taken from the
    # counting threads; our only BLAS call is one dot product of counts
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    # numpy asks for transparent huge pages for every array of 4 MB or more, and
    # the kernel clears 2 MB at the first touch of each: our arrays are often
    # sized for the worst case and filled in part, or live briefly
    os.environ.setdefault("NUMPY_MADVISE_HUGEPAGE", "0")
    # Arrow's default pool, mimalloc, gives freed memory back to the system at
    # once, and reading a parquet column (a buffer decompressed per batch) spent
    # its time taking it back page by page; jemalloc keeps it a while
    if "ARROW_DEFAULT_MEMORY_POOL" not in os.environ and arrow_has_jemalloc():
        os.environ["ARROW_DEFAULT_MEMORY_POOL"] = "jemalloc"
    # a large folder's listing makes several objects a file, all long-lived, and at
    # Python's thresholds every 700 made started a collection, each full one walking
    # every object numba and Arrow had made; the cycles a run leaves are few
    gc.set_threshold(GC_YOUNG, 20, 20)


GC_YOUNG = 50_000  # objects made between two collections of the youngest generation


def arrow_has_jemalloc() -> bool:
    """Whether the pyarrow installed was built with jemalloc, by the build settings it
    ships (``include/arrow/util/config.h``), without importing it: naming a pool
    the build lacks makes Arrow print a warning. False when it cannot tell."""
    import importlib.util

    try:
        spec = importlib.util.find_spec("pyarrow")
    except (ImportError, ValueError):
        return False
    for folder in (spec.submodule_search_locations or []) if spec is not None else []:
        try:
            with open(os.path.join(folder, "include", "arrow", "util", "config.h"), encoding="utf-8") as f:
                return "#define ARROW_JEMALLOC\n" in f.read()
        except OSError:
            continue
    return False


def main() -> None:
    """Entry point of ``toktok``."""
    prepare()
    from .app import main as run

    run()


def legacy_main() -> None:
    """Entry point of ``toktoktok`` (the original command: ``toktoktok -c CFG``)."""
    prepare()
    from .app import legacy_main as run

    run()


if __name__ == "__main__":  # python -m toktoktok_stages.cli.entry
    main()
