"""A hint to the CPU to start loading an array element into its caches.

Hash tables of millions of rows miss the caches on nearly every probe, and a
loop whose next probe depends on the last (read the slot, then the row it
names) waits for each miss in turn. ``prefetch(arr, i)`` in numba code emits
LLVM's ``llvm.prefetch`` for ``arr[i]``: a loop can ask for the slot a few rows
ahead while it works on the current one. It reads nothing, changes nothing,
and an index out of range is harmless (no bounds check: a prefetch never faults).

    >>> import numpy as np
    >>> from numba import njit
    >>> @njit
    ... def total(a):
    ...     s = 0
    ...     for i in range(len(a)):
    ...         prefetch(a, i + 8)
    ...         s += a[i]
    ...     return s
    >>> int(total(np.arange(10)))
    45
"""

from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic


@intrinsic
def prefetch(typingctx, arr, index):
    """``llvm.prefetch`` of ``arr[index]`` (read, keep in all cache levels)."""
    if not isinstance(arr, types.Array) or not isinstance(index, types.Integer):
        return None
    sig = types.void(arr, index)

    def codegen(context, builder, signature, args):
        array_type = signature.args[0]
        array = context.make_array(array_type)(context, builder, args[0])
        pointer = cgutils.get_item_pointer(context, builder, array_type, array, [args[1]],
                                           wraparound=False, boundscheck=False)
        byte_pointer = ir.IntType(8).as_pointer()
        i32 = ir.IntType(32)
        hint = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(ir.VoidType(), [byte_pointer, i32, i32, i32]), "llvm.prefetch.p0i8")
        builder.call(hint, [builder.bitcast(pointer, byte_pointer), i32(0), i32(3), i32(1)])
        return context.get_dummy_value()

    return sig, codegen
