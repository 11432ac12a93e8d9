"""Elementwise nova.numpy functions (NumPy's names and broadcasting; JAX's dtype promotion)."""

from __future__ import annotations

import builtins

from nova.core import dtypes
from nova.ops import lax
from nova.numpy_impl.util import asarray, promote, where_am_i


def _unary_float(name, op):
    def f(x, /):
        (x,) = promote(name, x, to_inexact=True)
        return op(x)

    f.__name__ = name
    f.__doc__ = (
        f"Elementwise {name} (numpy.{name}). Integer and bool inputs become float32; "
        "the result has the input's shape."
    )
    return f


exp = _unary_float("exp", lax.exp)
exp2 = _unary_float("exp2", lax.exp2)
expm1 = _unary_float("expm1", lax.expm1)
log = _unary_float("log", lax.log)
log2 = _unary_float("log2", lax.log2)
log1p = _unary_float("log1p", lax.log1p)
tanh = _unary_float("tanh", lax.tanh)
sinh = _unary_float("sinh", lax.sinh)
cosh = _unary_float("cosh", lax.cosh)
sin = _unary_float("sin", lax.sin)
cos = _unary_float("cos", lax.cos)
tan = _unary_float("tan", lax.tan)
_real_arctan = _unary_float("arctan", lax.atan)


def arctan(x, /):
    """The inverse tangent elementwise (numpy.arctan), in (-pi/2, pi/2) for real x; complex x
    takes the principal branch (complex_inverse.py). Integers and bools become float32."""
    (a,) = promote("arctan", x, to_inexact=True)
    if dtypes.is_complex(a.dtype):
        from nova.numpy_impl.complex_inverse import arctan as complex_arctan

        return complex_arctan(a)
    return _real_arctan(a)
sqrt = _unary_float("sqrt", lax.sqrt)
reciprocal = _unary_float("reciprocal", lax.reciprocal)


def _binary(name, op, to_inexact=False):
    def f(x1, x2, /):
        a, b = promote(name, x1, x2, to_inexact=to_inexact)
        return op(a, b)

    f.__name__ = name
    f.__doc__ = f"Elementwise {name} with NumPy broadcasting (numpy.{name})."
    return f


add = _binary("add", lambda a, b: lax.bitwise_or(a, b) if a.dtype == dtypes.bool_ else lax.add(a, b))
def _sub(a, b):
    if a.dtype == dtypes.bool_:  # NumPy's and JAX's rule (the compiled backend gave a xor)
        raise TypeError("subtract: boolean subtract, the `-` operator, is not supported; use "
                        f"bitwise_xor (`^`) or logical_xor{where_am_i()}")
    return lax.sub(a, b)


subtract = _binary("subtract", _sub)
multiply = _binary(
    "multiply", lambda a, b: lax.bitwise_and(a, b) if a.dtype == dtypes.bool_ else lax.mul(a, b)
)
true_divide = _binary("true_divide", lax.div, to_inexact=True)
divide = true_divide
maximum = _binary("maximum", lax.max)
minimum = _binary("minimum", lax.min)
arctan2 = _binary("arctan2", lax.atan2, to_inexact=True)
equal = _binary("equal", lax.eq)
not_equal = _binary("not_equal", lax.ne)
less = _binary("less", lax.lt)
less_equal = _binary("less_equal", lax.le)
greater = _binary("greater", lax.gt)
greater_equal = _binary("greater_equal", lax.ge)


def _bool_args(name, *xs):
    return [lax.ne(a, lax.full(a.shape, 0, a.dtype)) if a.dtype != dtypes.bool_ else a
            for a in promote(name, *xs)]


def logical_and(x1, x2, /):
    """Elementwise truth-value AND (numpy.logical_and); bool result."""
    return lax.bitwise_and(*_bool_args("logical_and", x1, x2))


def logical_or(x1, x2, /):
    """Elementwise truth-value OR (numpy.logical_or); bool result."""
    return lax.bitwise_or(*_bool_args("logical_or", x1, x2))


def logical_xor(x1, x2, /):
    return lax.bitwise_xor(*_bool_args("logical_xor", x1, x2))


def logical_not(x, /):
    """Elementwise truth-value NOT (numpy.logical_not); bool result."""
    (a,) = _bool_args("logical_not", x)
    return lax.bitwise_not(a)


def bitwise_and(x1, x2, /):
    return lax.bitwise_and(*promote("bitwise_and", x1, x2))


def bitwise_or(x1, x2, /):
    return lax.bitwise_or(*promote("bitwise_or", x1, x2))


def bitwise_xor(x1, x2, /):
    return lax.bitwise_xor(*promote("bitwise_xor", x1, x2))


def invert(x, /):
    (a,) = promote("invert", x)
    if dtypes.is_inexact(a.dtype):
        raise TypeError(f"invert (~) needs a bool or integer array, got {a.dtype}{where_am_i()}")
    return lax.bitwise_not(a)


def negative(x, /):
    """Elementwise -x (numpy.negative)."""
    (a,) = promote("negative", x)
    if a.dtype == dtypes.bool_:
        raise TypeError(f"negative is not defined for bool arrays; use logical_not{where_am_i()}")
    return lax.neg(a)


def positive(x, /):
    (a,) = promote("positive", x)
    return a


def absolute(x, /):
    """Elementwise |x| (numpy.abs)."""
    (a,) = promote("abs", x)
    if a.dtype == dtypes.bool_ or dtypes.is_unsigned(a.dtype):
        return a
    return lax.abs(a)


abs = absolute  # noqa: A001 - NumPy's name


def sign(x, /):
    (a,) = promote("sign", x)
    return lax.sign(a)


def _round_like(name, op):
    def f(x, /):
        (a,) = promote(name, x)
        return op(a) if dtypes.is_float(a.dtype) else a

    f.__name__ = name
    return f


floor = _round_like("floor", lax.floor)
ceil = _round_like("ceil", lax.ceil)


def round(x, decimals=0):  # noqa: A001 - NumPy's name
    """Rounds half to even to `decimals` decimal places (numpy.round); complex values round
    their real and imaginary parts."""
    (a,) = promote("round", x)
    if dtypes.is_complex(a.dtype):
        return lax.complex(round(lax.real(a), decimals), round(lax.imag(a), decimals))
    if not dtypes.is_float(a.dtype):
        return a
    if decimals == 0:
        return lax.round(a, lax.RoundingMethod.TO_NEAREST_EVEN)
    scale = lax.full(a.shape, 10.0**decimals, a.dtype)
    return lax.div(lax.round(lax.mul(a, scale), lax.RoundingMethod.TO_NEAREST_EVEN), scale)


around = round


def square(x, /):
    (a,) = promote("square", x)
    return lax.mul(a, a)


def _bool_as_int(*xs):
    # jnp's rule for the arithmetic that has no bool meaning (//, %, **): bools compute as int32.
    if xs[0].dtype != dtypes.bool_:
        return xs
    return tuple(lax.convert_element_type(x, dtypes.default_int) for x in xs)


def power(x1, x2, /):
    """x1 ** x2 elementwise (numpy.power).

    A Python int exponent is applied by repeated multiplication (JAX's integer_pow), so
    `x ** 2` of a negative x has a finite derivative. Bool operands (both bool, or a bool
    array and a Python int) compute in int32 and give int32, as jnp.power. Integer arrays
    raised to negative integer powers raise ValueError, as in NumPy.
    """
    if type(x2) is int and builtins.abs(x2) <= 64:
        (a,) = _bool_as_int(*promote("power", x1))
        if x2 < 0 and not dtypes.is_inexact(a.dtype):
            raise ValueError(f"integers to negative integer powers are not allowed{where_am_i()}")
        return lax.integer_pow(a, x2)  # repeated squaring: exact, no log in the derivative
    a, b = _bool_as_int(*promote("power", x1, x2))
    if dtypes.is_inexact(a.dtype):
        return lax.pow(a, b)
    f = dtypes.float64
    return lax.convert_element_type(
        lax.round(lax.pow(lax.convert_element_type(a, f), lax.convert_element_type(b, f))), a.dtype
    )


def _float_divmod(a, b):
    """NumPy's float floor division and remainder (npy_divmod, CPython's float_divmod): the
    quotient from (a - fmod(a, b)) / b, rounded to the nearest integer, so the two agree
    (a = q b + r): floor(0.5 / 0.1) would be 5 where 0.5 // 0.1 is 4 with remainder 0.1."""
    zero = lax.full(a.shape, 0, a.dtype)
    one = lax.full(a.shape, 1, a.dtype)
    mod = lax.rem(a, b)
    div = lax.div(lax.sub(a, mod), b)
    fix = lax.bitwise_and(lax.ne(mod, zero), lax.ne(lax.lt(b, zero), lax.lt(mod, zero)))
    mod = lax.select(fix, lax.add(mod, b), mod)
    div = lax.select(fix, lax.sub(div, one), div)
    q = lax.floor(div)
    q = lax.select(lax.gt(lax.sub(div, q), lax.full(a.shape, 0.5, a.dtype)), lax.add(q, one), q)
    # a zero quotient takes the sign of a / b; b == 0 gives a / b (inf or NaN), as NumPy
    q = lax.select(lax.eq(div, zero), lax.mul(zero, lax.div(a, b)), q)
    q = lax.select(lax.eq(b, zero), lax.div(a, b), q)
    return q, mod


def floor_divide(x1, x2, /):
    """Floor of x1 / x2 elementwise (numpy.floor_divide); integer division by 0 gives 0.
    Bool operands give int32 (True // True is 1), as jnp.floor_divide."""
    a, b = _bool_as_int(*promote("floor_divide", x1, x2))
    if dtypes.is_float(a.dtype):
        return _float_divmod(a, b)[0]
    q = lax.div(a, b)  # truncates toward zero
    zero = lax.full(a.shape, 0, a.dtype)
    r = lax.rem(a, b)
    fix = lax.bitwise_and(lax.ne(r, zero), lax.ne(lax.lt(r, zero), lax.lt(b, zero)))
    return lax.select(fix, lax.sub(q, lax.full(a.shape, 1, a.dtype)), q)


def mod(x1, x2, /):
    """Remainder with the sign of the divisor (numpy.mod / remainder); integer remainders by 0
    give 0. Bool operands give int32, as jnp.remainder."""
    a, b = _bool_as_int(*promote("mod", x1, x2))
    r = lax.rem(a, b)
    zero = lax.full(a.shape, 0, a.dtype)
    fix = lax.bitwise_and(lax.ne(r, zero), lax.ne(lax.lt(r, zero), lax.lt(b, zero)))
    return lax.select(fix, lax.add(r, b), r)


remainder = mod


def isnan(x, /):
    (a,) = promote("isnan", x)
    return lax.isnan(a) if dtypes.is_inexact(a.dtype) else lax.full(a.shape, False, dtypes.bool_)


def isinf(x, /):
    (a,) = promote("isinf", x)
    return lax.isinf(a) if dtypes.is_inexact(a.dtype) else lax.full(a.shape, False, dtypes.bool_)


def isfinite(x, /):
    (a,) = promote("isfinite", x)
    if not dtypes.is_inexact(a.dtype):
        return lax.full(a.shape, True, dtypes.bool_)
    return lax.bitwise_not(lax.bitwise_or(lax.isnan(a), lax.isinf(a)))


def where(condition, x=None, y=None, /):
    """Elementwise choice: x where condition is true, else y, with broadcasting (numpy.where).

    The one-argument form (indices of nonzeros) has a data-dependent shape and is not supported;
    it raises NotImplementedError.
    """
    if x is None or y is None:
        raise NotImplementedError(
            "where(condition) with one argument has a data-dependent shape; use "
            f"where(condition, x, y) or numpy on concrete values{where_am_i()}"
        )
    c = asarray(condition)
    xs = promote("where", x, y)
    from nova.numpy_impl.util import broadcast_shapes, broadcast_to

    shape = broadcast_shapes(c.shape, xs[0].shape, name="where")
    if c.dtype != dtypes.bool_:
        c = lax.ne(c, lax.full(c.shape, 0, c.dtype))
    return lax.select(broadcast_to(c, shape), broadcast_to(xs[0], shape), broadcast_to(xs[1], shape))


def clip(a, a_min=None, a_max=None):
    """Limits values to [a_min, a_max] (either may be None), as numpy.clip."""
    if a_min is None and a_max is None:
        raise ValueError(f"clip: a_min and a_max cannot both be None{where_am_i()}")
    out = asarray(a)
    if a_min is not None:
        out = maximum(out, a_min)
    if a_max is not None:
        out = minimum(out, a_max)
    return out


def astype(x, dtype):
    return lax.convert_element_type(asarray(x), dtypes.canonicalize(dtype))


def isclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    x, y = promote("isclose", a, b, to_inexact=True)
    close = less_equal(absolute(subtract(x, y)), add(atol, multiply(rtol, absolute(y))))
    close = logical_or(close, equal(x, y))
    if equal_nan:
        close = logical_or(close, logical_and(isnan(x), isnan(y)))
    return close


def allclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    from nova.numpy_impl.reductions import all as all_

    return all_(isclose(a, b, rtol, atol, equal_nan))


