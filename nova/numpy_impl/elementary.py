"""Elementary functions of nova.numpy that NumPy has as ufuncs and Nova writes over its existing
primitives (no kernel of their own, so jit, grad, vmap and every backend work unchanged):

- inverse trigonometric and hyperbolic functions (arcsin, arccos, arcsinh, arccosh, arctanh and
  the array-API names asin, acos, asinh, acosh, atan, atanh, atan2), with the branch splits
  that keep them accurate near 0 and for large arguments (Kahan, "Branch cuts for complex
  elementary functions", 1987; the real forms as in glibc and jax.lax); complex arguments
  take the principal branches of nova/numpy_impl/complex_inverse.py;
- rounding and classification: trunc, fix, rint, signbit, isposinf, isneginf, fabs;
- floating-point decomposition: frexp, ldexp, modf, spacing;
- remainders and NaN-aware extrema: fmod, divmod, fmax, fmin;
- integer number theory: gcd, lcm (Euclid's algorithm in a while loop), bitwise_count;
- conversions: deg2rad, radians, rad2deg, degrees, sinc, float_power, and the array-API
  aliases pow, bitwise_invert, bitwise_not, bitwise_left_shift, bitwise_right_shift.

Nova has no bitcast, so the bit-level functions are computed arithmetically: frexp and spacing
from log2 and exact powers of two (subnormals included), signbit from 1/x for zeros (a NaN
counts as positive whatever its sign bit).
"""

from __future__ import annotations

import math

import numpy as np

# nova.numpy is only partly initialized while it imports this module; it is complete by the time
# any function here runs.
from nova import numpy_api as jnp
from nova.core import dtypes
from nova.numpy_impl import complex_inverse
from nova.numpy_impl.families_common import _full, _zeros
from nova.numpy_impl.util import promote, where_am_i
from nova.ops import lax

__all__ = [
    "acos",
    "acosh",
    "arccos",
    "arccosh",
    "arcsin",
    "arcsinh",
    "arctanh",
    "asin",
    "asinh",
    "atan",
    "atan2",
    "atanh",
    "bitwise_count",
    "bitwise_invert",
    "bitwise_left_shift",
    "bitwise_not",
    "bitwise_right_shift",
    "deg2rad",
    "degrees",
    "divmod",
    "fabs",
    "fix",
    "float_power",
    "fmax",
    "fmin",
    "fmod",
    "frexp",
    "gcd",
    "isneginf",
    "isposinf",
    "lcm",
    "ldexp",
    "log10",
    "modf",
    "pow",
    "rad2deg",
    "radians",
    "rint",
    "signbit",
    "sinc",
    "spacing",
    "trunc",
]


def _float(name, x):
    (a,) = promote(name, x, to_inexact=True)
    return a


def _where(c, a, b):
    return lax.select(c, a, b)


def _sqrt1m(a):
    # sqrt(1 - a**2) as sqrt((1 - a)(1 + a)): no cancellation near |a| = 1.
    one = _full(a, 1)
    return lax.sqrt(lax.mul(lax.sub(one, a), lax.add(one, a)))


# --- inverse trigonometric and hyperbolic ---------------------------------------------------


def arcsin(x, /):
    """The inverse sine elementwise, in [-pi/2, pi/2] (numpy.arcsin).

    Integer and bool inputs become float32; NaN outside [-1, 1]. Computed as
    atan2(x, sqrt((1 - x)(1 + x))), accurate to an ulp or two over the whole domain; the
    derivative 1/sqrt(1 - x**2) is infinite at +-1 (NaN there, from 0 * inf).
    A complex x gives the principal branch, NumPy's (Kahan 1987; see
    nova/numpy_impl/complex_inverse.py), in x's dtype.
    """
    a = _float("arcsin", x)
    if dtypes.is_complex(a.dtype):
        return complex_inverse.arcsin(a)
    return lax.atan2(a, _sqrt1m(a))


def arccos(x, /):
    """The inverse cosine elementwise, in [0, pi] (numpy.arccos).

    Integer and bool inputs become float32; NaN outside [-1, 1]. Computed as
    atan2(sqrt((1 - x)(1 + x)), x): arccos(1) is exactly 0 and arccos(-1) pi rounded.
    A complex x gives the principal branch, NumPy's (Kahan 1987; see
    nova/numpy_impl/complex_inverse.py), in x's dtype.
    """
    a = _float("arccos", x)
    if dtypes.is_complex(a.dtype):
        return complex_inverse.arccos(a)
    return lax.atan2(_sqrt1m(a), a)


def _negate_where_negative(x, r):
    # r with x's sign (odd functions): -0.0 in gives -0.0 out, as NumPy's.
    from nova.numpy_impl.mathfuncs import _signbit

    return _where(_signbit(x), lax.neg(r), r)


def _abs_odd(a):
    # |a| as a select, so an odd function r(|a|) * sign(a) keeps its derivative at 0
    # (lax.abs's is sign(a), 0 there).
    from nova.numpy_impl.mathfuncs import _signbit

    return _where(_signbit(a), lax.neg(a), a)


def arcsinh(x, /):
    """The inverse hyperbolic sine elementwise (numpy.arcsinh); odd, defined on all reals.

    Integer and bool inputs become float32. For |x| < 1: log1p(|x| + x**2 / (1 + sqrt(1 + x**2)))
    (no cancellation near 0); otherwise log|x| + log1p(sqrt(1 + 1/x**2)) (no overflow of x**2
    for |x| up to the dtype's maximum). The derivative is 1/sqrt(1 + x**2) everywhere.
    A complex x gives the principal branch, NumPy's (Kahan 1987; see
    nova/numpy_impl/complex_inverse.py), in x's dtype.
    """
    a = _float("arcsinh", x)
    if dtypes.is_complex(a.dtype):
        return complex_inverse.arcsinh(a)
    m = _abs_odd(a)
    one = _full(m, 1)
    small = lax.lt(m, one)
    lo = _where(small, m, _full(m, 0.5))  # each branch sees only inputs it is exact for,
    hi = _where(small, one, m)  # so neither's derivative is evaluated out of range
    lo2 = lax.mul(lo, lo)
    r_lo = lax.log1p(lax.add(lo, lax.div(lo2, lax.add(one, lax.sqrt(lax.add(one, lo2))))))
    inv = lax.div(one, hi)
    r_hi = lax.add(lax.log(hi), lax.log1p(lax.sqrt(lax.add(one, lax.mul(inv, inv)))))
    return _negate_where_negative(a, _where(small, r_lo, r_hi))


def arccosh(x, /):
    """The inverse hyperbolic cosine elementwise, >= 0 (numpy.arccosh); NaN below 1.

    Integer and bool inputs become float32. For x < 2: log1p(t + sqrt(2t + t**2)) with
    t = x - 1 (accurate near 1); otherwise log(x) + log1p(sqrt(1 - 1/x**2)) (no overflow for
    large x). The derivative 1/sqrt(x**2 - 1) is infinite at 1.
    A complex x gives the principal branch, NumPy's (Kahan 1987; see
    nova/numpy_impl/complex_inverse.py), in x's dtype.
    """
    a = _float("arccosh", x)
    if dtypes.is_complex(a.dtype):
        return complex_inverse.arccosh(a)
    one, two = _full(a, 1), _full(a, 2)
    near = lax.lt(a, two)
    t = lax.sub(_where(near, a, two), one)
    r_lo = lax.log1p(lax.add(t, lax.sqrt(lax.add(lax.add(t, t), lax.mul(t, t)))))
    hi = _where(near, two, a)
    inv = lax.div(one, hi)
    r_hi = lax.add(lax.log(hi), lax.log1p(_sqrt1m(inv)))
    out = _where(near, r_lo, r_hi)
    return _where(lax.lt(a, one), _full(a, np.nan), out)


def arctanh(x, /):
    """The inverse hyperbolic tangent elementwise (numpy.arctanh); +-inf at +-1, NaN beyond.

    Integer and bool inputs become float32. Computed as log1p(2|x| / (1 - |x|)) / 2 with x's
    sign (accurate near 0). The derivative is 1/(1 - x**2).
    A complex x gives the principal branch, NumPy's (Kahan 1987; see
    nova/numpy_impl/complex_inverse.py), in x's dtype.
    """
    a = _float("arctanh", x)
    if dtypes.is_complex(a.dtype):
        return complex_inverse.arctanh(a)
    m = _abs_odd(a)
    one = _full(m, 1)
    r = lax.mul(lax.log1p(lax.div(lax.add(m, m), lax.sub(one, m))), _full(m, 0.5))
    r = _where(lax.gt(m, one), _full(m, np.nan), r)
    return _negate_where_negative(a, r)


asin, acos, asinh, acosh, atanh = arcsin, arccos, arcsinh, arccosh, arctanh


def atan(x, /):
    """The inverse tangent elementwise (the array API's name for numpy.arctan); a complex x
    takes the principal branch (nova/numpy_impl/complex_inverse.py), real part in
    [-pi/2, pi/2]."""
    (a,) = promote("atan", x, to_inexact=True)
    if dtypes.is_complex(a.dtype):
        return complex_inverse.arctan(a)
    return jnp.arctan(a)


def atan2(x1, x2, /):
    """The angle of (x2, x1) elementwise (the array API's name for numpy.arctan2)."""
    return jnp.arctan2(x1, x2)


# --- rounding and classification ------------------------------------------------------------


def trunc(x, /):
    """x rounded toward zero elementwise (numpy.trunc); integer and bool inputs are returned
    unchanged (jax.numpy's). The derivative is 0 almost everywhere."""
    (a,) = promote("trunc", x)
    if not dtypes.is_float(a.dtype):
        return a
    return _where(lax.lt(a, _zeros(a)), lax.ceil(a), lax.floor(a))


def fix(x, out=None):
    """x rounded toward zero elementwise (numpy.fix; the same as trunc). `out` must be None."""
    if out is not None:
        raise NotImplementedError(f"fix: out= is not supported (arrays are immutable){where_am_i()}")
    return trunc(x)


def rint(x, /):
    """x rounded to the nearest integer, halves to even, elementwise (numpy.rint); integer
    inputs are returned unchanged."""
    (a,) = promote("rint", x)
    return lax.round(a, lax.RoundingMethod.TO_NEAREST_EVEN) if dtypes.is_float(a.dtype) else a


def signbit(x, /):
    """True where x is negative, -0.0 and -inf included (numpy.signbit); a bool array.

    Floats: the IEEE sign bit (a NaN's too, as NumPy); integers: x < 0; bools: all False.
    """
    from nova.numpy_impl.mathfuncs import _signbit

    (a,) = promote("signbit", x)
    if dtypes.is_float(a.dtype):
        return _signbit(a)
    if a.dtype == dtypes.bool_ or dtypes.is_unsigned(a.dtype):
        return jnp.zeros(a.shape, dtypes.bool_)
    return lax.lt(a, _zeros(a))


def isposinf(x, /):
    """True where x is +inf (numpy.isposinf); all False for integer and bool inputs."""
    (a,) = promote("isposinf", x)
    if not dtypes.is_float(a.dtype):
        return jnp.zeros(a.shape, dtypes.bool_)
    return lax.eq(a, _full(a, np.inf))


def isneginf(x, /):
    """True where x is -inf (numpy.isneginf); all False for integer and bool inputs."""
    (a,) = promote("isneginf", x)
    if not dtypes.is_float(a.dtype):
        return jnp.zeros(a.shape, dtypes.bool_)
    return lax.eq(a, _full(a, -np.inf))


def fabs(x, /):
    """|x| elementwise as a float (numpy.fabs): integer and bool inputs become float32."""
    return lax.abs(_float("fabs", x))


# --- floating-point decomposition -----------------------------------------------------------


def _exp2_int(e):
    # 2**e exactly for an integer-valued float array e, as three factors 2**e1 * 2**e2 * 2**e3
    # (e1 = floor(e / 3), ...), after clamping e to the span between the smallest subnormal and
    # the overflow threshold (beyond it the product is 0 or inf anyway): no factor overflows or
    # underflows, so x * f1 * f2 * f3 is exact when the result is in range and 0 * f stays 0
    # (ldexp(0, 3000) must not meet 0 * inf).
    info = np.finfo(np.dtype(e.dtype))
    span = float(info.maxexp - np.log2(info.smallest_subnormal) + 2)
    e = lax.clamp(_full(e, -span), e, _full(e, span))
    e1 = lax.floor(lax.mul(e, _full(e, 1 / 3)))
    e2 = lax.floor(lax.mul(lax.sub(e, e1), _full(e, 0.5)))
    return lax.exp2(e1), lax.exp2(e2), lax.exp2(lax.sub(lax.sub(e, e1), e2))


def _times_pow2(x, factors):
    for f in factors:
        x = lax.mul(x, f)
    return x


def frexp(x, /):
    """(mantissa, exponent) with x = mantissa * 2**exponent elementwise (numpy.frexp).

    The mantissa has x's float dtype (integers become float32) and magnitude in [0.5, 1); the
    exponent is int32. Zeros give (x, 0); inf and NaN give (x, 0) as NumPy's. Subnormals are
    exact. Computed without bitcast: e = floor(log2|x|) + 1, then one correction step for the
    rounding of log2 near powers of two.
    """
    a = _float("frexp", x)
    m = lax.abs(a)
    finite = lax.bitwise_and(jnp.isfinite(a), lax.ne(a, _zeros(a)))
    ms = _where(finite, m, _full(m, 1))
    e = lax.add(lax.floor(lax.log2(ms)), _full(ms, 1))
    r = _times_pow2(ms, _exp2_int(lax.neg(e)))
    one, half = _full(r, 1), _full(r, 0.5)
    big = lax.ge(r, one)
    r = _where(big, lax.mul(r, half), r)
    e = _where(big, lax.add(e, one), e)
    low = lax.lt(r, half)
    r = _where(low, lax.add(r, r), r)
    e = _where(low, lax.sub(e, one), e)
    mant = _where(finite, _where(lax.lt(a, _zeros(a)), lax.neg(r), r), a)
    expo = lax.convert_element_type(_where(finite, e, _zeros(e)), dtypes.int32)
    return mant, expo


def ldexp(x1, x2, /):
    """x1 * 2**x2 elementwise (numpy.ldexp); x2 must be an integer array or int.

    The result has x1's float dtype (integers become float32); broadcasts. The power of two is
    applied in two exact factors, so ldexp(5e-324, 2000) is finite in float64. The derivative
    with respect to x1 is 2**x2. Raises TypeError for a float or bool exponent.
    """
    e = jnp.asarray(x2)
    if not dtypes.is_int(e.dtype):
        raise TypeError(f"ldexp: x2 must be an integer array, got dtype {e.dtype}{where_am_i()}")
    a = _float("ldexp", x1)
    a, ef = promote("ldexp", a, lax.convert_element_type(e, a.dtype))
    return _times_pow2(a, _exp2_int(ef))


def modf(x, /):
    """(fractional part, integral part) elementwise, both with x's sign (numpy.modf).

    Integer and bool inputs become float32. modf(inf) is (0.0, inf) and modf(-inf) is
    (-0.0, -inf); NaN gives (nan, nan). The fraction's derivative is 1 (0 at +-inf), the
    integral part's 0.
    """
    a = _float("modf", x)
    whole = trunc(a)
    frac = lax.sub(a, whole)  # derivative 1, whole's is 0
    # a zero fraction (and inf's) takes x's sign: modf(-2.0) is (-0.0, -2.0)
    signed_zero = lax.mul(_where(lax.isinf(a), lax.sign(a), a), _zeros(a))  # x * 0: x's sign
    # signed_zero - (+0 with frac's derivative): the value keeps the zero's sign (-0 - +0 is
    # -0), the derivative stays frac's (1)
    carried = lax.sub(signed_zero, lax.sub(lax.stop_gradient(frac), frac))
    frac = _where(lax.eq(frac, _zeros(a)), carried, frac)
    frac = _where(lax.isinf(a), signed_zero, frac)
    return frac, whole


def spacing(x, /):
    """The distance from x to the next float away from zero, elementwise (numpy.spacing).

    Integer and bool inputs become float32. For finite x it is 2**(e - p) with e frexp's
    exponent of |x| and p the dtype's mantissa digits, never below the smallest subnormal;
    spacing(+-0) is that subnormal, positive; inf and NaN give NaN. The sign follows x's (NumPy's).
    """
    a = _float("spacing", x)
    info = np.finfo(np.dtype(a.dtype))
    _, e = frexp(a)
    ef = lax.convert_element_type(e, a.dtype)
    p = _full(ef, info.nmant + 1)
    lowest = _full(ef, float(np.log2(info.smallest_subnormal)))
    s = _times_pow2(_full(a, 1), _exp2_int(lax.max(lax.sub(ef, p), lowest)))
    # past the largest float the next one is inf (NumPy's spacing(finfo.max) is inf)
    s = _where(lax.eq(lax.abs(a), _full(a, float(info.max))), _full(a, np.inf), s)
    s = _where(jnp.isfinite(a), _negate_where_negative(a, s), _full(a, np.nan))
    return _where(lax.eq(a, _zeros(a)), _full(a, float(info.smallest_subnormal)), s)


# --- remainders and NaN-aware extrema -------------------------------------------------------


def fmod(x1, x2, /):
    """The C remainder x1 - trunc(x1 / x2) * x2, with the sign of x1 (numpy.fmod).

    Broadcasts and promotes (integers stay integers). Floats: fmod(x, 0) is NaN, fmod(inf, y)
    NaN, fmod(x, inf) x. Integers: fmod(x, 0) is 0 (NumPy's result, without its warning).
    """
    a, b = promote("fmod", x1, x2)
    if dtypes.is_float(a.dtype) or a.dtype == dtypes.bool_:
        if a.dtype == dtypes.bool_:
            a, b = (lax.convert_element_type(v, dtypes.int8) for v in (a, b))
        return lax.rem(a, b)
    zero = lax.eq(b, _zeros(b))
    return _where(zero, _zeros(a), lax.rem(a, _where(zero, _full(b, 1), b)))


def divmod(x1, x2, /):
    """(floor_divide(x1, x2), mod(x1, x2)) elementwise (numpy.divmod)."""
    return jnp.floor_divide(x1, x2), jnp.mod(x1, x2)


def _nan_aware(name, op):
    def f(x1, x2, /):
        a, b = promote(name, x1, x2)
        if not dtypes.is_float(a.dtype):
            return op(a, b)
        na, nb = lax.isnan(a), lax.isnan(b)
        return _where(na, b, _where(nb, a, op(a, b)))

    f.__name__ = name
    return f


fmax = _nan_aware("fmax", lax.max)
fmax.__doc__ = """The elementwise maximum ignoring NaNs (numpy.fmax): where one operand is NaN
the other is returned; NaN only where both are. Broadcasts and promotes."""
fmin = _nan_aware("fmin", lax.min)
fmin.__doc__ = """The elementwise minimum ignoring NaNs (numpy.fmin): where one operand is NaN
the other is returned; NaN only where both are. Broadcasts and promotes."""


# --- integer number theory ------------------------------------------------------------------


def _int_args(name, x1, x2):
    from nova.numpy_impl.misc import _int_args as checked

    return checked(name, x1, x2)


def gcd(x1, x2, /):
    """The greatest common divisor of |x1| and |x2| elementwise (numpy.gcd); gcd(0, 0) is 0.

    Integer inputs only (TypeError otherwise); broadcasts and promotes. Euclid's algorithm:
    a while loop of (a, b) -> (b, a mod b) until every b is 0 (at most ~1.44 log2 of the
    largest input iterations, Lamé's theorem), under jit as one lax.while_loop.
    """
    a, b = _int_args("gcd", x1, x2)
    a, b = lax.abs(a), lax.abs(b)
    if a.size == 0:
        return a

    def cond(c):
        return jnp.any(lax.ne(c[1], _zeros(c[1])))

    def body(c):
        x, y = c
        nz = lax.ne(y, _zeros(y))
        safe = _where(nz, y, _full(y, 1))
        return _where(nz, y, x), _where(nz, lax.rem(x, safe), y)

    # |INT_MIN| wraps to INT_MIN, so a result can come out negative: its magnitude is the gcd
    # (NumPy's gcd(18, -128) in int8 is 2)
    return lax.abs(lax.while_loop(cond, body, (a, b))[0])


def lcm(x1, x2, /):
    """The least common multiple of |x1| and |x2| elementwise (numpy.lcm); 0 where either is 0.

    Integer inputs only (TypeError otherwise); |x1| // gcd * |x2| (wraps on overflow, as
    NumPy's).
    """
    a, b = _int_args("lcm", x1, x2)
    g = gcd(a, b)
    zero = lax.eq(g, _zeros(g))
    q = lax.div(lax.abs(a), _where(zero, _full(g, 1), g))
    return _where(zero, _zeros(g), lax.mul(q, lax.abs(b)))


def bitwise_count(x, /):
    """The number of 1 bits in |x| elementwise, as uint8 (numpy.bitwise_count).

    Integer and bool inputs only (TypeError otherwise). A SWAR popcount (Warren, "Hacker's
    Delight", 5-1) on |x|, in x's own width; the byte sums are added with shifts, so nothing
    overflows.
    """
    (a,) = promote("bitwise_count", x)
    if a.dtype == dtypes.bool_:
        return lax.convert_element_type(a, dtypes.uint8)
    if not dtypes.is_int(a.dtype):
        raise TypeError(f"bitwise_count: x must be an integer array, got dtype {a.dtype}"
                        f"{where_am_i()}")
    bits = np.dtype(a.dtype).itemsize * 8
    if not dtypes.is_unsigned(a.dtype):
        a = lax.abs(a)

    def c(pattern):  # the byte repeated across the width; its top bit is 0, so it fits signed
        return _full(a, int.from_bytes(bytes([pattern]) * (bits // 8), "little"))

    def srl(v, n):  # logical shifts: the sign bit (INT_MIN's only bit) is counted too
        return lax.shift_right_logical(v, _full(v, n))

    v = lax.sub(a, lax.bitwise_and(srl(a, 1), c(0x55)))
    v = lax.add(lax.bitwise_and(v, c(0x33)), lax.bitwise_and(srl(v, 2), c(0x33)))
    v = lax.bitwise_and(lax.add(v, srl(v, 4)), c(0x0F))
    shift = 8
    while shift < bits:
        v = lax.add(v, srl(v, shift))
        shift *= 2
    v = lax.bitwise_and(v, _full(v, 0x7F))
    return lax.convert_element_type(v, dtypes.uint8)


# --- conversions and aliases ----------------------------------------------------------------


def log10(x, /):
    """The base-10 logarithm elementwise (numpy.log10): log(x) / ln 10, with exact powers of
    ten rounded to their integers' exponents. Integer and bool inputs become float32; 0 gives
    -inf, negative inputs NaN."""
    a = _float("log10", x)
    r = lax.mul(lax.log(a), _full(a, 1 / math.log(10)))
    if dtypes.is_complex(a.dtype):
        return r
    # log(10**k) / ln 10 can miss k by an ulp; snap to k where 10**k reproduces x exactly
    k = lax.round(r, lax.RoundingMethod.TO_NEAREST_EVEN)
    # (normal x only: a subnormal 10**k rounds, so 1e-323 would pass as exact)
    normal = lax.ge(a, _full(a, float(np.finfo(np.dtype(a.dtype)).tiny)))
    exact = lax.bitwise_and(lax.bitwise_and(lax.eq(lax.pow(_full(a, 10.0), k), a),
                                            jnp.isfinite(r)), normal)
    # r + (k - r) with the correction held constant: the derivative stays 1 / (x ln 10)
    return lax.add(r, _where(exact, lax.stop_gradient(lax.sub(k, r)), _zeros(r)))


def deg2rad(x, /):
    """Degrees to radians elementwise, x * pi / 180 (numpy.deg2rad); integers become float32."""
    a = _float("deg2rad", x)
    return lax.mul(a, _full(a, math.pi / 180))


def rad2deg(x, /):
    """Radians to degrees elementwise, x * 180 / pi (numpy.rad2deg); integers become float32."""
    a = _float("rad2deg", x)
    return lax.mul(a, _full(a, 180 / math.pi))


radians, degrees = deg2rad, rad2deg


def sinc(x, /):
    """The normalized sinc, sin(pi x) / (pi x), 1 at 0, elementwise (numpy.sinc).

    Integer and bool inputs become float32. The derivative at 0 is 0 (the limit), as
    jax.numpy's; away from 0 it is the quotient's.
    """
    a = _float("sinc", x)
    zero = lax.eq(a, _zeros(a))
    safe = lax.mul(_where(zero, _full(a, 1), a), _full(a, math.pi))
    return _where(zero, _full(a, 1), lax.div(lax.sin(safe), safe))


def float_power(x1, x2, /):
    """x1 ** x2 elementwise in float64 (numpy.float_power: the widest float, so integer and
    float32 inputs give float64 results; complex inputs give complex128). Broadcasts; negative
    real bases to non-integer powers give NaN."""
    a, b = promote("float_power", x1, x2, to_inexact=True)
    wide = dtypes.complex128 if dtypes.is_complex(a.dtype) else dtypes.float64
    a, b = (lax.convert_element_type(v, wide) for v in (a, b))
    return lax.pow(a, b)


def pow(x1, x2, /):
    """x1 ** x2 elementwise (the array API's name for numpy.power)."""
    return jnp.power(x1, x2)


def bitwise_invert(x, /):
    """Bitwise NOT elementwise (the array API's name for numpy.invert)."""
    return jnp.invert(x)


bitwise_not = bitwise_invert


def bitwise_left_shift(x1, x2, /):
    """x1 << x2 elementwise (the array API's name for numpy.left_shift)."""
    return jnp.left_shift(x1, x2)


def bitwise_right_shift(x1, x2, /):
    """x1 >> x2 elementwise, arithmetic for signed types (numpy.right_shift)."""
    return jnp.right_shift(x1, x2)


