"""Eight bytes at any offset of a uint8 array, read or written as one word, in numba code.

A kernel that goes over text a word at a time (runs of letters in the
scanner, plain runs of a JSON string) wants the 8 bytes from any index, not
only from one a multiple of 8; LLVM did not fuse eight byte loads shifted
and or-ed together into one load, and the loop was slower than a byte at a
time. ``load8`` and ``store8`` are one unaligned load and one unaligned
store; the caller keeps ``i + 8 <= len(array)`` (nothing is checked).

    >>> import numpy as np
    >>> from numba import njit
    >>> @njit
    ... def shift_copy(src, dst):
    ...     store8(dst, 1, load8(src, 0))
    ...     return load8(src, 0)
    >>> src, dst = np.frombuffer(b"abcdefgh", np.uint8), np.zeros(9, np.uint8)
    >>> hex(shift_copy(src, dst)), dst.tobytes()
    ('0x6867666564636261', b'\\x00abcdefgh')
"""

from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.extending import intrinsic


def _word_at(context, builder, array_type, array_value, index):
    array = context.make_array(array_type)(context, builder, array_value)
    return builder.bitcast(builder.gep(array.data, [index]), ir.IntType(64).as_pointer())


@intrinsic
def load8(typingctx, src, i):
    """The 8 bytes ``src[i:i+8]`` as a little-endian uint64."""
    def codegen(context, builder, signature, args):
        return builder.load(_word_at(context, builder, signature.args[0], args[0], args[1]), align=1)

    return types.uint64(src, types.intp), codegen


@intrinsic
def store8(typingctx, dst, i, word):
    """Write the uint64 ``word`` to ``dst[i:i+8]``, little-endian."""
    def codegen(context, builder, signature, args):
        builder.store(args[2], _word_at(context, builder, signature.args[0], args[0], args[1]), align=1)
        return context.get_dummy_value()

    return types.void(dst, types.intp, types.uint64), codegen
