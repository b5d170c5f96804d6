"""One argument type per kernel argument, whatever path the array came by.

numba compiles a kernel once per signature, and an array's type includes
whether it may be written: ``np.frombuffer`` of ``bytes`` is read-only, an
array made by ``np.empty`` or read into from a file is not. A kernel handed
both compiles twice, and a configuration whose path brings the other kind
compiles again into a cache thought warm. So the callers hand every byte
buffer a kernel only reads as a read-only view (free: no copy), and every
count or offset array as C-contiguous int64.

    >>> import numpy as np
    >>> a = np.zeros(3, np.uint8)
    >>> readonly(a).flags.writeable, a.flags.writeable
    (False, True)
    >>> readonly(np.frombuffer(b"ab", np.uint8)).tobytes()
    b'ab'
"""

from __future__ import annotations

import numpy as np


def readonly(array: np.ndarray) -> np.ndarray:
    """``array`` as a read-only view (itself when it already is one)."""
    if not array.flags.writeable:
        return array
    view = array.view()
    view.flags.writeable = False
    return view


def readonly_bytes(data: object) -> np.ndarray:
    """UTF-8 bytes (``bytes``, ``bytearray``, a view or a uint8 array) as a read-only uint8 array, no copy."""
    array = data if isinstance(data, np.ndarray) else np.frombuffer(data, dtype=np.uint8)  # type: ignore[call-overload]
    return readonly(array)


def int64s(array: object) -> np.ndarray:
    """Offsets or counts as the C-contiguous int64 array the kernels take (a copy only if needed)."""
    return np.ascontiguousarray(array, dtype=np.int64)
