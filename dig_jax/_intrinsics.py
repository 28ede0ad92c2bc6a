"""numba building blocks numba's Python subset cannot express, in LLVM IR.

Imported only when a kernel that calls them first compiles (`dig_jax._numba.intrinsic`):
importing this module imports numba.

- `bytes_at(address, h, w)` / `words_at(address, n)`: the uint8[h, w] / uint64[n] array at a
  raw address, so one compiled call can walk many numpy arrays (the caller keeps them alive).
- `word_at(address)`: the 8 bytes at any address as one uint64 (an unaligned load), and
  `trailing_zeros(word)` (LLVM's cttz): reading masks eight pixels at a time.
"""

from __future__ import annotations

import numba
from llvmlite import ir
from numba import types
from numba.extending import intrinsic


@intrinsic
def _pointer(typingctx, address, dtype):
    """The integer `address` as a pointer to `dtype` (a numba dtype given as a type)."""
    element = dtype.dtype if isinstance(dtype, types.DType) else dtype.instance_type
    sig = types.CPointer(element)(types.intp, dtype)

    def codegen(context, builder, signature, args):
        return builder.inttoptr(args[0], context.get_value_type(signature.return_type))

    return sig, codegen


@intrinsic
def word_at(typingctx, address):
    """The uint64 made of the 8 bytes at `address` (any alignment; the machine's byte order)."""
    sig = types.uint64(types.intp)

    def codegen(context, builder, signature, args):
        pointer = builder.inttoptr(args[0], ir.IntType(64).as_pointer())
        return builder.load(pointer, align=1)

    return sig, codegen


@intrinsic
def trailing_zeros(typingctx, word):
    """The number of trailing zero bits of uint64 `word` (64 for 0)."""
    sig = types.uint64(types.uint64)

    def codegen(context, builder, signature, args):
        i64, i1 = ir.IntType(64), ir.IntType(1)
        cttz = builder.module.declare_intrinsic("llvm.cttz", [i64], ir.FunctionType(i64, [i64, i1]))
        return builder.call(cttz, [args[0], ir.Constant(i1, 0)])

    return sig, codegen


@numba.njit(cache=True, nogil=True)
def bytes_at(address, h, w):
    """uint8[h, w] (C-contiguous) at `address`."""
    return numba.carray(_pointer(address, numba.uint8), (h, w))


@numba.njit(cache=True, nogil=True)
def words_at(address, n):
    """uint64[n] at `address` (byte order of the machine)."""
    return numba.carray(_pointer(address, numba.uint64), (n,))
