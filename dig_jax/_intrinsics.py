"""numba building blocks numba's Python subset cannot express, in LLVM IR.

Imported only when a kernel that calls them first compiles (`dig_jax._numba.intrinsic`):
importing this module imports numba.

- `clear_streaming(flat)` / `copy_streaming(destination, source)`: zero / fill a contiguous
  uint8 array with non-temporal (streaming) stores, which write whole cache lines without
  reading them first: a 512² map cleared in 19 against 37 µs for memset's stores on the 2-core
  machine (2026-12-03, 256 maps of a 64 MiB buffer).
- `bytes_at(address, h, w)` / `words_at(address, n)`: the uint8[h, w] / uint64[n] array at a
  raw address, so one compiled call can walk many numpy arrays (the caller keeps them alive).
- `word_at(address)`: the 8 bytes at any address as one uint64 (an unaligned load), and
  `trailing_zeros(word)` (LLVM's cttz): reading masks eight pixels at a time.
"""

from __future__ import annotations

import numba
from llvmlite import ir
from numba import types
from numba.core.extending import intrinsic

_LINE = 64  # bytes written per streaming step (one cache line)


@intrinsic
def _stream_zero_line(typingctx, address):
    """Store 64 zero bytes at `address` (64-byte aligned) with non-temporal stores."""
    sig = types.void(types.uintp)

    def codegen(context, builder, signature, args):
        vector = ir.VectorType(ir.IntType(8), 32)
        pointer = builder.inttoptr(args[0], vector.as_pointer())
        hint = builder.module.add_metadata([ir.Constant(ir.IntType(32), 1)])
        for half in range(2):
            where = builder.gep(pointer, [ir.Constant(ir.IntType(64), half)])
            store = builder.store(ir.Constant(vector, None), where, align=32)
            store.set_metadata("nontemporal", hint)
        return context.get_dummy_value()

    return sig, codegen


@intrinsic
def _stream_copy_line(typingctx, destination, source):
    """Copy 64 bytes from `source` (any alignment) to `destination` (64-byte aligned) with
    non-temporal stores."""
    sig = types.void(types.uintp, types.uintp)

    def codegen(context, builder, signature, args):
        vector = ir.VectorType(ir.IntType(8), 32)
        to = builder.inttoptr(args[0], vector.as_pointer())
        start = builder.inttoptr(args[1], vector.as_pointer())
        hint = builder.module.add_metadata([ir.Constant(ir.IntType(32), 1)])
        for half in range(2):
            offset = [ir.Constant(ir.IntType(64), half)]
            value = builder.load(builder.gep(start, offset), align=1)
            store = builder.store(value, builder.gep(to, offset), align=32)
            store.set_metadata("nontemporal", hint)
        return context.get_dummy_value()

    return sig, codegen


@intrinsic
def _fence(typingctx):
    """A full memory fence: streaming stores are weakly ordered, this orders them."""
    sig = types.void()

    def codegen(context, builder, signature, args):
        builder.fence("seq_cst")
        return context.get_dummy_value()

    return sig, codegen


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
def clear_streaming(flat):
    """Zero uint8[N] (contiguous): bytes up to the first 64-byte boundary and after the last
    are stored plainly, whole lines between with streaming stores, then a fence."""
    n = flat.shape[0]
    start = flat.ctypes.data
    head = min((_LINE - start % _LINE) % _LINE, n)
    for i in range(head):
        flat[i] = 0
    i = head
    while i + _LINE <= n:
        _stream_zero_line(start + i)
        i += _LINE
    for j in range(i, n):
        flat[j] = 0
    _fence()


@numba.njit(cache=True, nogil=True)
def copy_streaming(destination, source):
    """destination[:] = source (uint8[N] each, contiguous, not overlapping), the destination
    written with streaming stores (whole lines between its 64-byte boundaries), then a fence."""
    n = destination.shape[0]
    start = destination.ctypes.data
    head = min((_LINE - start % _LINE) % _LINE, n)
    for i in range(head):
        destination[i] = source[i]
    i = head
    origin = source.ctypes.data
    while i + _LINE <= n:
        _stream_copy_line(start + i, origin + i)
        i += _LINE
    for j in range(i, n):
        destination[j] = source[j]
    _fence()


@numba.njit(cache=True, nogil=True)
def bytes_at(address, h, w):
    """uint8[h, w] (C-contiguous) at `address`."""
    return numba.carray(_pointer(address, numba.uint8), (h, w))


@numba.njit(cache=True, nogil=True)
def words_at(address, n):
    """uint64[n] at `address` (byte order of the machine)."""
    return numba.carray(_pointer(address, numba.uint64), (n,))
