"""jax.lax's bit-level functions without bitcast: clz, mulhi, nextafter, reduce_precision."""

from __future__ import annotations

import functools
import operator

import numpy as np

from nova.core import dtypes
from nova.ops import elementwise as ew
from nova.ops.composite import _floats, _jnp


def _int_array(name: str, x):
    a = _jnp().asarray(x)
    if not dtypes.is_int(a.dtype):
        raise TypeError(f"{name}: x must be an integer array, got dtype {a.dtype}")
    return a


def clz(x):
    """The number of leading zero bits of each element's bit pattern, in x's dtype
    (jax.lax.clz): 0 for negative signed values, the bit width for 0. Integers only
    (TypeError otherwise). A binary search with logical shifts (log2(width) steps)."""
    jnp = _jnp()
    a = _int_array("clz", x)
    width = a.dtype.itemsize * 8
    neg = a < 0 if not dtypes.is_unsigned(a.dtype) else None
    y = a if neg is None else jnp.where(neg, jnp.zeros_like(a), a)
    length = jnp.zeros(a.shape, dtypes.int32)  # bit length of y, found from the top half down
    s = width // 2
    while s:
        hi = jnp.right_shift(y, s)
        nz = hi != 0
        y = jnp.where(nz, hi, y)
        length = length + jnp.where(nz, s, 0)
        s //= 2
    out = (width - length - (y != 0).astype(dtypes.int32)).astype(a.dtype)
    return out if neg is None else jnp.where(neg, jnp.zeros_like(out), out)


def _same_ints(name: str, x, y):
    jnp = _jnp()
    a, b = jnp.asarray(x), jnp.asarray(y)
    if a.dtype != b.dtype or not dtypes.is_int(a.dtype):
        raise TypeError(f"{name}: x and y must be integers of one dtype, got {a.dtype} and "
                        f"{b.dtype}")
    return jnp.broadcast_arrays(a, b)


def mulhi(x, y, /):
    """The high half of the double-width product x * y, in x's dtype (jax.lax.mulhi): floor(x y
    / 2^n) for n-bit signed ints, x y >> n for unsigned. Up to 32 bits the product is taken in
    a wider integer; int64 multiplies 32-bit limbs (Hacker's Delight 2nd ed. sec. 8-2, mulhs).
    Raises TypeError for floats or mixed dtypes (uint64 does not exist in Nova)."""
    jnp = _jnp()
    a, b = _same_ints("mulhi", x, y)
    bits = a.dtype.itemsize * 8
    if bits < 64:
        unsigned = dtypes.is_unsigned(a.dtype)
        wide = {8: dtypes.int32, 16: dtypes.uint32 if unsigned else dtypes.int32}.get(
            bits, dtypes.int64)
        p = a.astype(wide) * b.astype(wide)  # uint32 x uint32 wraps in int64: the bits hold
        sh = jnp.full(p.shape, bits, wide)
        hi = ew.shift_right_logical(p, sh) if unsigned else ew.shift_right_arithmetic(p, sh)
        return hi.astype(a.dtype)
    mask = jnp.full(a.shape, 0xFFFFFFFF, a.dtype)
    s32 = jnp.full(a.shape, 32, a.dtype)
    u0, u1 = a & mask, ew.shift_right_arithmetic(a, s32)
    v0, v1 = b & mask, ew.shift_right_arithmetic(b, s32)
    w0 = u0 * v0  # the unsigned 64-bit product, wrapped
    t = u1 * v0 + ew.shift_right_logical(w0, s32)
    w1 = u0 * v1 + (t & mask)
    return u1 * v1 + ew.shift_right_arithmetic(t, s32) + ew.shift_right_arithmetic(w1, s32)


def nextafter(x1, x2):
    """The next float after x1 in the direction of x2, elementwise (jax.lax.nextafter): x2
    where they are equal (so nextafter(0., -0.) is -0.), NaN if either is NaN, the smallest
    subnormal after zero, +-max from +-inf inward. Computed without bitcast by exact float
    steps (nova.random's: x +- |x| / 2^(p+1), at powers of two x +- |x| / 2^p, small values
    scaled up first). Broadcasts; floats only (TypeError)."""
    from nova.random import _nextafter

    jnp = _jnp()
    a, b = _floats("nextafter", x1, x2)
    out = jnp.where(b > a, _nextafter(a, +1), jnp.where(b < a, _nextafter(a, -1), b))
    return jnp.where(jnp.isnan(a) | jnp.isnan(b), jnp.full_like(a, np.nan), out)


def _rounded(x, exponent_bits: int, mantissa_bits: int):
    """x rounded to a float format of the given bit counts (XLA's ReducePrecision), by exact
    power-of-two scaling: x / 2^k with 2^k the target ulp at x, rounded half to even, times 2^k.
    Below the smallest normal the source format's ulp applies (its subnormals round on their
    own grid, as the bit pattern does). With no mantissa bits the kept bit is the exponent's
    lowest, so a tie goes to the even biased exponent. Then values past the target's largest
    exponent become inf and those below its smallest normal a signed zero. The rounding step
    passes the derivative straight through (reduce_precision's rule sets the cotangent)."""
    jnp = _jnp()
    info = dtypes.finfo(x.dtype)
    out = x
    if mantissa_bits < info.nmant:
        a = jnp.abs(x)
        finite = jnp.isfinite(a) & (a > 0)
        a = jnp.where(finite, a, jnp.ones_like(a))
        e = jnp.maximum(jnp.frexp(a)[1] - 1, info.minexp)  # the binade's exponent
        k = e - mantissa_bits
        q = jnp.ldexp(a, -k)  # in [2^m, 2^(m+1)): the kept bits before the point
        r = q + ew.stop_gradient(jnp.round(q) - q)  # exactly round(q)
        if mantissa_bits == 0:
            biased_even = (e + (info.maxexp - 1)) % 2 == 0
            r = jnp.where(q == 1.5, jnp.where(biased_even, 1.0, 2.0).astype(x.dtype), r)
        y = jnp.ldexp(r, k)
        out = jnp.where(finite, jnp.where(jnp.signbit(x), -y, y), x)
    if exponent_bits < info.nexp:
        bias = 2 ** (exponent_bits - 1) - 1
        ay = jnp.abs(out)
        inf = jnp.where(jnp.signbit(out), -np.inf, np.inf).astype(x.dtype)
        out = jnp.where(ay >= 2.0 ** (bias + 1), inf, out)
        out = jnp.where(ay < 2.0 ** (1 - bias), out * 0.0, out)  # x * 0 keeps the sign
    return out


@functools.cache
def _reduce_precision_fn():
    import nova

    @functools.partial(nova.custom_vjp, nondiff_argnums=(1, 2))
    def rp(x, exponent_bits, mantissa_bits):
        return _rounded(x, exponent_bits, mantissa_bits)

    def fwd(x, exponent_bits, mantissa_bits):
        return _rounded(x, exponent_bits, mantissa_bits), None

    def bwd(exponent_bits, mantissa_bits, _, g):
        return (_rounded(g, exponent_bits, mantissa_bits),)

    rp.defvjp(fwd, bwd)
    return rp


def reduce_precision(operand, exponent_bits: int, mantissa_bits: int):
    """operand rounded to a float format with `exponent_bits` exponent and `mantissa_bits`
    mantissa bits, kept in its own dtype (jax.lax.reduce_precision; e.g. (5, 10) simulates
    float16 in float32, (8, 7) bfloat16): mantissa rounded half to even, then overflow to inf
    and values below the format's smallest normal flushed to signed zero (XLA's semantics: no
    subnormals in the reduced format unless its exponent is the source's); NaN and inf pass.
    Exact (power-of-two scaling). The derivative, as JAX's, reduces the cotangent's precision
    (forward mode passes the tangent through unrounded). Raises TypeError for non-floats,
    ValueError for exponent_bits < 1 or mantissa_bits < 0."""
    jnp = _jnp()
    x = jnp.asarray(operand)
    if not dtypes.is_float(x.dtype):
        raise TypeError(f"reduce_precision: operand must be a float array, got dtype {x.dtype}")
    e, m = operator.index(exponent_bits), operator.index(mantissa_bits)
    if e < 1 or m < 0:
        raise ValueError(f"reduce_precision: exponent_bits must be >= 1 and mantissa_bits >= 0, "
                         f"got {e} and {m}")
    return _reduce_precision_fn()(x, e, m)
