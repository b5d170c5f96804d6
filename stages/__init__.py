"""The pipeline stages (ingest, train, export), orchestrator and CLI.

When Python runs the ``toktok`` or ``toktoktok`` command, Ctrl-C is taken
here, at the first line of ours that runs: until the command has begun, an
interrupt prints one line and exits 130 (``stages.cli`` then takes over).
The command also runs numpy's BLAS on one thread (``OPENBLAS_NUM_THREADS``)
and without transparent huge pages (``NUMPY_MADVISE_HUGEPAGE``), unless set.
Imported by a script, this module leaves the script's Ctrl-C and environment
alone.
"""

import os as _os
import sys as _sys

# the C module under ``signal``: ``signal.getsignal`` imports and builds enums
# first (milliseconds in which a Ctrl-C still raised KeyboardInterrupt here)
import _signal


def interrupted_while_starting(signum: int, frame: object) -> None:
    _os.write(2, b"\ninterrupted: nothing was done\n")
    _os._exit(130)


if _os.path.basename(_sys.argv[0] if _sys.argv else "") in ("toktok", "toktoktok"):
    if _signal.getsignal(_signal.SIGINT) is _signal.default_int_handler:
        _signal.signal(_signal.SIGINT, interrupted_while_starting)
    # numpy's OpenBLAS starts a thread per core that spins for a while after the
    # import: 0.1 s of CPU taken from the counting threads in every command (``python
    # -c "import numpy"``: 0.16-0.17 s of user CPU, 0.06-0.07 with one thread); our
    # only BLAS call is one dot product of the inventory's counts
    _os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    # numpy asks for transparent huge pages for every array of 4 MB or more; the
    # kernel then clears 2 MB at the first touch of each, where our arrays are often
    # filled only in part (sized for the worst case) or live briefly. On 1.2 GB of
    # C source, with them off: train and export 3.71-3.87 -> 3.20-3.27 s (loading
    # the inventory 0.36-0.43 -> 0.18, segmenting 0.23-0.26 -> 0.06), ingest's
    # system CPU 0.84-1.31 -> 0.53-0.61 s; the merge loop is unchanged
    _os.environ.setdefault("NUMPY_MADVISE_HUGEPAGE", "0")
