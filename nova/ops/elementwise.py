"""Elementwise primitives: unary and binary math, comparisons, logic, casts and select.

Operands of a binary primitive have one shape and one dtype; `nova.numpy` broadcasts and promotes
before binding (as jax.numpy does over lax), so the VJP rules here never unbroadcast.
"""

from __future__ import annotations

import math

import numpy as np

from nova.core import dtypes
from nova.core.errors import ShapeError
from nova.core.ir import TensorType
from nova.core.primitive import Elementwise, FusionKind, Primitive

# --- shape rules --------------------------------------------------------------------------------


def _same_shape_dtype(name):
    def rule(*ts):
        t0 = ts[0]
        for t in ts[1:]:
            if t.shape != t0.shape:
                raise ShapeError(f"{name}: operand shapes differ: {t0.shape} and {t.shape}")
            if t.dtype != t0.dtype:
                raise TypeError(f"{name}: operand dtypes differ: {t0.dtype} and {t.dtype}")
        return t0

    return rule


# Unary and binary math defined for complex operands too (their NumPy references handle them;
# the compiler splits them into float arithmetic: nova/compiler/legalize_complex.py).
COMPLEX_OK = frozenset({"exp", "exp2", "expm1", "log", "log2", "log1p", "tanh", "sinh", "cosh",
                        "sin", "cos", "tan", "sqrt", "rsqrt", "reciprocal", "pow"})


def _float_only(name, rule):
    complex_ok = name in COMPLEX_OK

    def checked(*ts, **params):
        for t in ts:
            if not dtypes.is_float(t.dtype) and not (complex_ok and dtypes.is_complex(t.dtype)):
                kind = "floating-point or complex" if complex_ok else "floating-point"
                raise TypeError(f"{name} needs a {kind} operand, got {t.dtype}")
        return rule(*ts, **params)

    return checked


def _real_only(name, rule):
    """Refuses complex operands (ordering, rounding and bit operations have no complex form)."""

    def checked(*ts, **params):
        for t in ts:
            if dtypes.is_complex(t.dtype):
                raise TypeError(f"{name} is not defined for complex operands, got {t.dtype}")
        return rule(*ts, **params)

    return checked


def _to_bool(rule):
    def out(*ts, **params):
        t = rule(*ts, **params)
        return TensorType(t.shape, dtypes.bool_)

    return out


# --- helpers used by the rules (thin bind wrappers live at the bottom) --------------------------


def _known_finite(d) -> bool:
    """Whether d is a traced value known to be finite (a constant, or a broadcast of one): the
    zero-cotangent mask would select d everywhere, so it is left out of the program (the simplify
    pass used to remove it after tracing; 150 of the small GPT-2 step's 309 masks)."""
    from nova.core.trace import Tracer

    return isinstance(d, Tracer) and d._trace.is_finite(d)


def _zero_safe_mul(ct, d):
    """ct * d, but exactly 0 where ct == 0 even if d is inf/nan (DESIGN.md, Numerics).

    Only non-finite partials are masked, so the result stays linear in ct with derivative d
    wherever d is finite (higher-order derivatives through zero cotangents stay exact).
    """
    if not dtypes.is_inexact(d.dtype) or _known_finite(d):
        return mul(ct, d)
    bad = bitwise_and(eq(ct, zeros_like(ct)), bitwise_or(isnan(d), isinf(d)))
    return mul(ct, select(bad, zeros_like(d), d))


def _jvp_from_partials(partials, safe):
    def jvp(tangents, *primals, out, **params):
        ds = partials(*primals, out=out, **params)
        acc = None
        for t, d in zip(tangents, ds, strict=True):
            if d is None:
                continue
            term = _zero_safe_mul(t, d)
            acc = term if acc is None else add(acc, term)
        return acc if acc is not None else zeros_like(out)

    return jvp


def _vjp_from_partials(partials, safe):
    # Every elementwise VJP is zero-safe (DESIGN.md, Numerics): a zero cotangent contributes
    # exactly zero even where the local derivative is inf or NaN (exp of inf, x * inf, ...).
    def vjp(ct, *primals, out, **params):
        ds = partials(*primals, out=out, **params)
        f = _zero_safe_mul
        return tuple(None if d is None else f(ct, d) for d in ds)

    return vjp


def _unary(name, np_fn, partial, body, *, safe=False, float_only=True):
    rule = _same_shape_dtype(name)
    if float_only:
        rule = _float_only(name, rule)

    def partials(x, *, out):
        return (partial(x, out),)

    return Primitive(
        name,
        shape_rule=rule,
        impl=np_fn,
        vjp=_vjp_from_partials(partials, safe),
        jvp=_jvp_from_partials(partials, safe),
        fusion=FusionKind.ELEMENTWISE,
        kernel=Elementwise(body),
    )


def _binary(name, np_fn, partials, body, *, safe=False, float_only=False, real_only=False):
    rule = _same_shape_dtype(name)
    if float_only:
        rule = _float_only(name, rule)
    if real_only:
        rule = _real_only(name, rule)
    return Primitive(
        name,
        shape_rule=rule,
        impl=np_fn,
        vjp=_vjp_from_partials(partials, safe),
        jvp=_jvp_from_partials(partials, safe),
        fusion=FusionKind.ELEMENTWISE,
        kernel=Elementwise(body),
    )


def _nondiff(name, np_fn, rule, body, nargs):
    def vjp(ct, *primals, out, **params):
        return (None,) * nargs

    def jvp(tangents, *primals, out, **params):
        return zeros_like(out)

    return Primitive(
        name,
        shape_rule=rule,
        impl=np_fn,
        vjp=vjp,
        jvp=jvp,
        fusion=FusionKind.ELEMENTWISE,
        kernel=Elementwise(body),
        differentiable=False,
    )


def _c(x, v):
    return full_like(x, v)


# --- unary math ---------------------------------------------------------------------------------

neg_p = _unary("neg", np.negative, lambda x, y: _c(x, -1), lambda b, x: b.neg(x), float_only=False)
exp_p = _unary("exp", np.exp, lambda x, y: y, lambda b, x: b.exp(x))
exp2_p = _unary("exp2", np.exp2, lambda x, y: mul(y, _c(x, math.log(2))), lambda b, x: b.exp2(x))
expm1_p = _unary("expm1", np.expm1, lambda x, y: add(y, _c(x, 1)), lambda b, x: b.expm1(x))
log_p = _unary("log", np.log, lambda x, y: reciprocal(x), lambda b, x: b.log(x), safe=True)
log2_p = _unary(
    "log2",
    np.log2,
    lambda x, y: reciprocal(mul(x, _c(x, math.log(2)))),
    lambda b, x: b.log2(x),
    safe=True,
)
log1p_p = _unary(
    "log1p", np.log1p, lambda x, y: reciprocal(add(x, _c(x, 1))), lambda b, x: b.log1p(x), safe=True
)
tanh_p = _unary(
    "tanh", np.tanh, lambda x, y: sub(_c(x, 1), mul(y, y)), lambda b, x: b.tanh(x)
)
def _logistic_reference(x):
    """1 / (1 + exp(-x)) in float64 without overflow or cancellation, in x's dtype."""
    a = np.asarray(x)
    w = a.astype(np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        e = np.exp(-np.abs(w))
        y = np.where(w >= 0, 1.0 / (1.0 + e), e / (1.0 + e))
    return np.asarray(y).astype(a.dtype)


logistic_p = _unary(
    "logistic",
    _logistic_reference,
    lambda x, y: mul(y, sub(_c(x, 1), y)),
    lambda b, x: b.logistic(x),
)
sinh_p = _unary("sinh", np.sinh, lambda x, y: cosh(x), lambda b, x: b.sinh(x))
cosh_p = _unary("cosh", np.cosh, lambda x, y: sinh(x), lambda b, x: b.cosh(x))
sin_p = _unary("sin", np.sin, lambda x, y: cos(x), lambda b, x: b.sin(x))
cos_p = _unary("cos", np.cos, lambda x, y: neg(sin(x)), lambda b, x: b.cos(x))
tan_p = _unary(
    "tan", np.tan, lambda x, y: add(_c(x, 1), mul(y, y)), lambda b, x: b.tan(x)
)
atan_p = _unary(
    "atan", np.arctan, lambda x, y: reciprocal(add(_c(x, 1), mul(x, x))), lambda b, x: b.atan(x)
)
sqrt_p = _unary(
    "sqrt", np.sqrt, lambda x, y: div(_c(x, 0.5), y), lambda b, x: b.sqrt(x), safe=True
)
rsqrt_p = _unary(
    "rsqrt",
    lambda x: np.asarray(1 / np.sqrt(x), dtype=np.asarray(x).dtype),
    lambda x, y: mul(_c(x, -0.5), div(y, x)),
    lambda b, x: b.rsqrt(x),
    safe=True,
)
reciprocal_p = _unary(
    "reciprocal",
    lambda x: np.asarray(1 / x, dtype=np.asarray(x).dtype),
    lambda x, y: neg(mul(y, y)),
    lambda b, x: b.div(b.const(1, None), x),
    safe=True,
)
_erf_vec = np.frompyfunc(math.erf, 1, 1)
erf_p = _unary(
    "erf",
    lambda x: np.asarray(_erf_vec(x), dtype=np.float64).astype(np.asarray(x).dtype),
    lambda x, y: mul(_c(x, 2 / math.sqrt(math.pi)), exp(neg(mul(x, x)))),
    lambda b, x: b.erf(x),
)
def _abs_rule(x):
    return TensorType(x.shape, dtypes.real_dtype(x.dtype))


def _complex_sign(x):
    """x / |x| for complex x, 0 where x == 0."""
    r = convert_element_type(abs(x), x.dtype)
    z = zeros_like(x)
    zero = eq(x, z)
    return select(zero, z, div(x, select(zero, full_like(x, 1), r)))


def _abs_vjp(ct, x, *, out):
    if not dtypes.is_complex(x.dtype):
        return (_zero_safe_mul(ct, sign(x)),)
    from nova.ops.complex import conj

    # |z| is real-differentiable only: the transpose of t -> real(conj(sign z) t) (JAX's).
    return (mul(convert_element_type(ct, x.dtype), conj(_complex_sign(x))),)


def _abs_jvp(tangents, x, *, out):
    if not dtypes.is_complex(x.dtype):
        return _zero_safe_mul(tangents[0], sign(x))
    from nova.ops.complex import conj, real

    return real(mul(conj(_complex_sign(x)), tangents[0]))


abs_p = Primitive("abs", shape_rule=_abs_rule, impl=np.abs, vjp=_abs_vjp, jvp=_abs_jvp,
                  fusion=FusionKind.ELEMENTWISE, kernel=Elementwise(lambda b, x: b.abs(x)))
sign_p = _nondiff("sign", np.sign, _same_shape_dtype("sign"), lambda b, x: b.sign(x), 1)
# stop_gradient: the identity whose derivative is zero (jax.lax.stop_gradient). Reverse mode
# passes no cotangent through it; after tracing it is an identity that canonicalize removes.
stop_gradient_p = _nondiff("stop_gradient", lambda x: np.array(x, copy=True),
                           _same_shape_dtype("stop_gradient"), lambda b, x: x, 1)
floor_p = _nondiff("floor", np.floor, _float_only("floor", _same_shape_dtype("floor")),
                   lambda b, x: b.floor(x), 1)
ceil_p = _nondiff("ceil", np.ceil, _float_only("ceil", _same_shape_dtype("ceil")),
                  lambda b, x: b.ceil(x), 1)
# Rounds half to even, as numpy.round does.
round_p = _nondiff("round", np.round, _float_only("round", _same_shape_dtype("round")),
                   lambda b, x: b.round(x), 1)
isnan_p = _nondiff("isnan", np.isnan, _to_bool(_same_shape_dtype("isnan")),
                   lambda b, x: b.isnan(x), 1)
isinf_p = _nondiff("isinf", np.isinf, _to_bool(_same_shape_dtype("isinf")),
                   lambda b, x: b.isinf(x), 1)
not_p = _nondiff("not", lambda x: np.logical_not(x) if x.dtype == np.bool_ else np.invert(x),
                 _same_shape_dtype("not"), lambda b, x: b.not_(x), 1)

# --- binary math --------------------------------------------------------------------------------


def _one(x, **_):
    return _c(x, 1)


add_p = _binary("add", np.add, lambda x, y, out: (_one(x), _one(y)), lambda b, x, y: b.add(x, y))
sub_p = _binary(
    "sub", np.subtract, lambda x, y, out: (_one(x), _c(y, -1)), lambda b, x, y: b.sub(x, y)
)
mul_p = _binary("mul", np.multiply, lambda x, y, out: (y, x), lambda b, x, y: b.mul(x, y))


def _np_div(x, y):
    if np.issubdtype(x.dtype, np.integer):
        # C-style division that truncates toward zero (as lax.div); zero divisors give 0.
        q = np.trunc(np.true_divide(x, np.where(y == 0, 1, y)))
        return np.where(y == 0, 0, q).astype(x.dtype)
    return np.true_divide(x, y).astype(x.dtype)


div_p = _binary(
    "div",
    _np_div,
    lambda x, y, out: (reciprocal(y), neg(div(out, y))),
    lambda b, x, y: b.div(x, y),
    safe=True,
)


def _np_rem(x, y):
    if np.issubdtype(x.dtype, np.integer):
        return np.where(y == 0, 0, np.fmod(x, np.where(y == 0, 1, y))).astype(x.dtype)
    return np.fmod(x, y).astype(x.dtype)


# C-style remainder (sign of the dividend, as lax.rem); nova.numpy.mod builds NumPy's from it.
rem_p = _binary(
    "rem",
    _np_rem,
    lambda x, y, out: (_one(x), neg(trunc_div(x, y))),
    lambda b, x, y: b.rem(x, y),
    real_only=True,
)


def _pow_partials(x, y, out):
    # d/dx x**y = y * x**(y-1); d/dy x**y = log(x) * x**y, taken as 0 where x == 0 (as JAX does).
    dx = mul(y, pow(x, sub(y, _c(y, 1))))
    safe_log = log(select(eq(x, zeros_like(x)), _c(x, 1), x))
    dy = mul(out, safe_log)
    return dx, dy


pow_p = _binary("pow", np.power, _pow_partials, lambda b, x, y: b.pow(x, y), safe=True,
                float_only=True)


def _max_partials(x, y, out):
    # Ties split the cotangent evenly, as JAX does.
    gx = select(gt(x, y), _c(x, 1), select(eq(x, y), _c(x, 0.5), _c(x, 0)))
    return gx, sub(_c(x, 1), gx)


def _min_partials(x, y, out):
    gx = select(lt(x, y), _c(x, 1), select(eq(x, y), _c(x, 0.5), _c(x, 0)))
    return gx, sub(_c(x, 1), gx)


# Complex operands compare lexicographically (real part, then imaginary part), as JAX's lax.max
# and NumPy's maximum (nova/compiler/legalize_complex.py).
max_p = _binary("max", np.maximum, _max_partials, lambda b, x, y: b.max(x, y))
min_p = _binary("min", np.minimum, _min_partials, lambda b, x, y: b.min(x, y))


def _atan2_partials(x, y, out):
    denom = add(mul(x, x), mul(y, y))
    return div(y, denom), neg(div(x, denom))


atan2_p = _binary("atan2", np.arctan2, _atan2_partials, lambda b, x, y: b.atan2(x, y), safe=True,
                  float_only=True)

# --- comparisons and logic (not differentiable) ------------------------------------------------

_CMP = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal,
        "gt": np.greater, "ge": np.greater_equal}
# Complex operands order lexicographically, as NumPy's and jax.numpy's comparisons.
eq_p, ne_p, lt_p, le_p, gt_p, ge_p = (
    _nondiff(n, f, _to_bool(_same_shape_dtype(n)),
             (lambda pred: lambda b, x, y: b.cmp(pred, x, y))(n), 2)
    for n, f in _CMP.items()
)


def _logic_rule(name):
    base = _same_shape_dtype(name)

    def rule(x, y):
        if dtypes.is_inexact(x.dtype):
            raise TypeError(f"{name} needs bool or integer operands, got {x.dtype}")
        return base(x, y)

    return rule


def _np_shift(kind):
    def impl(x, y):
        bits = x.dtype.itemsize * 8
        big = (y < 0) | (y >= bits)
        safe = np.where(big, 0, y).astype(x.dtype)
        if kind == "left":
            r = np.left_shift(x, safe)
            fill = np.zeros_like(x)
        elif kind == "right_arithmetic":
            r = np.right_shift(x, safe)
            fill = np.where(x < 0, -1, 0).astype(x.dtype) if np.issubdtype(x.dtype, np.signedinteger) else np.zeros_like(x)
        else:
            u = x.view(np.dtype(f"uint{bits}"))
            r = np.right_shift(u, safe.view(u.dtype)).view(x.dtype)
            fill = np.zeros_like(x)
        # Shift amounts outside [0, bits) are defined (as XLA does): zeros, or the sign fill.
        return np.where(big, fill, r).astype(x.dtype)

    return impl


def _shift_rule(name):
    base = _same_shape_dtype(name)

    def rule(x, y):
        if not dtypes.is_int(x.dtype):
            raise TypeError(f"{name} needs integer operands, got {x.dtype}")
        return base(x, y)

    return rule


shift_left_p = _nondiff("shift_left", _np_shift("left"), _shift_rule("shift_left"),
                        lambda b, x, y: b.shl(x, y), 2)
shift_right_arithmetic_p = _nondiff(
    "shift_right_arithmetic", _np_shift("right_arithmetic"), _shift_rule("shift_right_arithmetic"),
    lambda b, x, y: b.shr(x, y, arithmetic=True), 2)
shift_right_logical_p = _nondiff(
    "shift_right_logical", _np_shift("right_logical"), _shift_rule("shift_right_logical"),
    lambda b, x, y: b.shr(x, y, arithmetic=False), 2)

and_p = _nondiff("and", lambda x, y: x & y, _logic_rule("and"), lambda b, x, y: b.and_(x, y), 2)
or_p = _nondiff("or", lambda x, y: x | y, _logic_rule("or"), lambda b, x, y: b.or_(x, y), 2)
xor_p = _nondiff("xor", lambda x, y: x ^ y, _logic_rule("xor"), lambda b, x, y: b.xor(x, y), 2)

# --- select and casts ---------------------------------------------------------------------------


def _select_rule(pred, on_true, on_false):
    if pred.dtype != dtypes.bool_:
        raise TypeError(f"select: predicate must be bool, got {pred.dtype}")
    if not (pred.shape == on_true.shape == on_false.shape):
        raise ShapeError(
            f"select: shapes differ: pred {pred.shape}, on_true {on_true.shape}, "
            f"on_false {on_false.shape}"
        )
    if on_true.dtype != on_false.dtype:
        raise TypeError(f"select: branch dtypes differ: {on_true.dtype} and {on_false.dtype}")
    return on_true


def _select_vjp(ct, pred, on_true, on_false, *, out):
    z = zeros_like(ct)
    return None, select(pred, ct, z), select(pred, z, ct)


def _select_jvp(tangents, pred, on_true, on_false, *, out):
    return select(pred, tangents[1], tangents[2])


select_p = Primitive(
    "select",
    shape_rule=_select_rule,
    impl=lambda p, a, b: np.where(p, a, b),
    vjp=_select_vjp,
    jvp=_select_jvp,
    fusion=FusionKind.ELEMENTWISE,
    kernel=Elementwise(lambda b, p, x, y: b.select(p, x, y)),
)


def _convert_rule(x, *, new_dtype):
    return TensorType(x.shape, dtypes.canonicalize(new_dtype, arg_name="new_dtype"))


def _convert_impl(x, *, new_dtype):
    if np.dtype(new_dtype) == dtypes.bool_:
        return x != 0
    if dtypes.is_complex(x.dtype) and not dtypes.is_complex(new_dtype):
        # complex -> real takes the real part (as JAX; NumPy does too, with a warning).
        x = np.array(np.real(x))
    if dtypes.is_int(new_dtype) and dtypes.is_float(x.dtype):
        # Float -> int truncates toward zero, saturating at the type's range; NaN becomes 0
        # (defined behaviour, as JAX; C leaves it undefined, NumPy wraps or gives INT_MIN).
        info = np.iinfo(np.dtype(new_dtype))
        xf = x.astype(np.float64)
        big, small = xf >= float(info.max) + 1.0, xf < float(info.min)
        t = np.trunc(np.where(big | small | np.isnan(xf), 0.0, xf)).astype(new_dtype)
        return np.where(big, info.max, np.where(small, info.min, t)).astype(new_dtype)
    return x.astype(new_dtype)


def _convert_vjp(ct, x, *, out, new_dtype):
    # float <-> complex: the transposes of "take the real part" and "embed as real part".
    if not dtypes.is_inexact(x.dtype) or not dtypes.is_inexact(new_dtype):
        return (None,)
    return (convert_element_type(ct, x.dtype),)


def _convert_jvp(tangents, x, *, out, new_dtype):
    if not dtypes.is_inexact(x.dtype) or not dtypes.is_inexact(new_dtype):
        return zeros_like(out)
    return convert_element_type(tangents[0], new_dtype)


convert_element_type_p = Primitive(
    "convert_element_type",
    shape_rule=_convert_rule,
    impl=_convert_impl,
    vjp=_convert_vjp,
    jvp=_convert_jvp,
    fusion=FusionKind.ELEMENTWISE,
    kernel=Elementwise(lambda b, x, *, new_dtype: b.cast(x, new_dtype)),
    param_types={"new_dtype": lambda d: dtypes.canonicalize(d, arg_name="new_dtype")},
)

def _bitcast_rule(x, *, new_dtype):
    new = dtypes.canonicalize(new_dtype, arg_name="new_dtype")
    if np.dtype(x.dtype).itemsize != new.itemsize or dtypes.bool_ in (np.dtype(x.dtype), new):
        raise TypeError(f"bitcast_convert_type_p reinterprets between non-bool dtypes of one "
                        f"width, got {x.dtype} to {new}")
    return TensorType(x.shape, new)


# Same-width reinterpretation of the bits (arith.bitcast); lax.bitcast_convert_type builds the
# width-changing forms from it with shifts.
bitcast_convert_type_p = Primitive(
    "bitcast_convert_type",
    shape_rule=_bitcast_rule,
    impl=lambda x, *, new_dtype: np.ascontiguousarray(x).view(np.dtype(new_dtype)).reshape(
        np.shape(x)),  # (ascontiguousarray makes a 0-d array 1-d)
    vjp=lambda ct, x, *, out, new_dtype: (None,),
    jvp=lambda tangents, x, *, out, new_dtype: zeros_like(out),
    fusion=FusionKind.ELEMENTWISE,
    kernel=Elementwise(lambda b, x, *, new_dtype: b.bitcast(x, new_dtype)),
    param_types={"new_dtype": lambda d: dtypes.canonicalize(d, arg_name="new_dtype")},
    differentiable=False,
)

# --- thin bind wrappers (the lax-level API used by rules and nova.numpy) ------------------------

neg = neg_p.bind
exp = exp_p.bind
exp2 = exp2_p.bind
expm1 = expm1_p.bind
log = log_p.bind
log2 = log2_p.bind
log1p = log1p_p.bind
tanh = tanh_p.bind
logistic = logistic_p.bind
sinh = sinh_p.bind
cosh = cosh_p.bind
sin = sin_p.bind
cos = cos_p.bind
tan = tan_p.bind
atan = atan_p.bind
sqrt = sqrt_p.bind
rsqrt = rsqrt_p.bind
reciprocal = reciprocal_p.bind
erf = erf_p.bind
abs = abs_p.bind  # noqa: A001 - lax's name
sign = sign_p.bind
floor = floor_p.bind
stop_gradient = stop_gradient_p.bind
ceil = ceil_p.bind
round = round_p.bind  # noqa: A001
isnan = isnan_p.bind
isinf = isinf_p.bind
bitwise_not = not_p.bind
add = add_p.bind
sub = sub_p.bind
mul = mul_p.bind
div = div_p.bind
rem = rem_p.bind
pow = pow_p.bind  # noqa: A001
max = max_p.bind  # noqa: A001
min = min_p.bind  # noqa: A001
atan2 = atan2_p.bind
eq = eq_p.bind
ne = ne_p.bind
lt = lt_p.bind
le = le_p.bind
gt = gt_p.bind
ge = ge_p.bind
bitwise_and = and_p.bind
bitwise_or = or_p.bind
bitwise_xor = xor_p.bind
select = select_p.bind
shift_left = shift_left_p.bind
shift_right_arithmetic = shift_right_arithmetic_p.bind
shift_right_logical = shift_right_logical_p.bind


def convert_element_type(x, new_dtype):
    new_dtype = dtypes.canonicalize(new_dtype, arg_name="new_dtype")
    if x.dtype == new_dtype:
        return x
    return convert_element_type_p.bind(x, new_dtype=new_dtype)


def trunc_div(x, y):
    """Quotient rounded toward zero (used by rem's VJP)."""
    q = div(x, y)
    if dtypes.is_float(q.dtype):
        q = select(lt(q, zeros_like(q)), ceil(q), floor(q))
    return q


def full_like(x, value):
    """An array of x's shape and dtype filled with `value` (a constant broadcast, cheap in IR)."""
    from nova.ops.structural import full

    return full(x.shape, value, x.dtype)


def zeros_like(x):
    return full_like(x, 0)
