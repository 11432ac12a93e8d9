"""nova.random: pseudo-random numbers from explicit keys, with JAX's API and JAX's numbers.

A key is a uint32 Array of shape (2,), JAX's raw key (`jax.random.PRNGKey`). Every function here is
a pure function of its key built from Nova primitives, so it gives the same numbers eagerly and
under `nova.jit`; reusing a key reuses its numbers (`split` or `fold_in` to get fresh ones).

The generator is Threefry-2x32 with 20 rounds (Salmon, Moraes, Dror, Shaw, "Parallel random
numbers: as easy as 1, 2, 3", SC 2011; the `threefry2x32` primitive) in counter mode, laid out as
JAX lays it out with its default `jax_threefry_partitionable=True`: the element at row-major
position i of a result hashes the 64-bit counter (i >> 32, i & 0xFFFFFFFF). So `key`, `split`,
`fold_in`, `bits`, `uniform` (every float dtype), `randint`, `bernoulli`, `permutation` and
`choice` equal jax.random's results bit for bit, and so do `categorical` and `choice` with `p`
but without replacement except at near-ties of their Gumbel noise (tests/test_random.py).

Deliberate differences from JAX:
- keys are always raw uint32 arrays (`key` and `PRNGKey` are the same; there are no typed keys);
- a seed counts modulo 2**32 and a Python int `fold_in` datum too (JAX without x64 keeps the low
  32 bits of a seed and refuses out-of-range data);
- `normal`, `truncated_normal`, `gumbel` and `exponential` follow JAX's construction (for the
  first two the inverse error function of a uniform, by Giles' polynomials), but XLA has its own
  log, log1p and erf and contracts polynomials into fused multiply-adds, so they agree with JAX's
  values to a few ulps (in erf space, for truncated_normal's ill-conditioned tails), not bit for
  bit;
- `randint` samples int32, uint32 and uint8 (int64 would need 64-bit unsigned arithmetic).

More distributions, with jax.random's signatures (nova/random_gamma.py, random_discrete.py,
random_distributions.py; each module's docstring says which match JAX's numbers and which only
its distribution): gamma, loggamma, beta, dirichlet, chisquare, f, t (Marsaglia-Tsang, gamma
differentiable in `a`); poisson, binomial, multinomial, geometric, rademacher; cauchy, laplace,
logistic, lognormal, pareto, rayleigh, maxwell, double_sided_maxwell, weibull_min, wald,
triangular, generalized_normal, ball, multivariate_normal, orthogonal; and the key utilities
clone, key_impl, wrap_key_data.
"""

from __future__ import annotations

import math
import operator

import numpy as np

from nova.core import dtypes
from nova.core.array import Array
from nova.core.errors import ShapeError
from nova.numpy_impl.util import asarray, broadcast_shapes, broadcast_to, normalize_axis, where_am_i
from nova.ops import lax

__all__ = [
    "PRNGKey",
    "bernoulli",
    "bits",
    "categorical",
    "choice",
    "exponential",
    "fold_in",
    "gumbel",
    "key",
    "key_data",
    "normal",
    "permutation",
    "randint",
    "split",
    "truncated_normal",
    "uniform",
    # nova/random_gamma.py, random_discrete.py, random_distributions.py:
    "ball",
    "beta",
    "binomial",
    "cauchy",
    "chisquare",
    "clone",
    "dirichlet",
    "double_sided_maxwell",
    "f",
    "gamma",
    "generalized_normal",
    "geometric",
    "key_impl",
    "laplace",
    "loggamma",
    "logistic",
    "lognormal",
    "maxwell",
    "multinomial",
    "multivariate_normal",
    "orthogonal",
    "pareto",
    "poisson",
    "rademacher",
    "rayleigh",
    "t",
    "triangular",
    "wald",
    "weibull_min",
    "wrap_key_data",
]

_U32 = dtypes.uint32
_I32 = dtypes.int32
_F32 = dtypes.float32

# --- keys -----------------------------------------------------------------------------------------


def _shape(name, shape) -> tuple:
    if isinstance(shape, int | np.integer):
        shape = (shape,)
    try:
        shape = tuple(operator.index(d) for d in shape)
    except TypeError:
        raise TypeError(
            f"{name}: shape must be a sequence of ints, got {shape!r}{where_am_i()}"
        ) from None
    if any(d < 0 for d in shape):
        raise ValueError(
            f"{name}: negative dimensions are not allowed: shape {shape}{where_am_i()}"
        )
    return shape


def _as_array(x) -> Array:
    # np.asarray first: a foreign array (NumPy, JAX) keeps its dtype, e.g. a uint32 key.
    return x if isinstance(x, Array) else asarray(np.asarray(x) if not _is_python_scalar(x) else x)


def _is_python_scalar(x) -> bool:
    return isinstance(x, bool | int | float)


def _check_key(name, key) -> Array:
    k = _as_array(key)
    if k.dtype != _U32 or k.shape != (2,):
        raise TypeError(
            f"{name}: expected a key, a uint32 array of shape (2,) from nova.random.key, split or "
            f"fold_in; got a {k.dtype} array of shape {k.shape}{where_am_i()}"
        )
    return k


def _words(key):
    """The key's two uint32 words as 0-d arrays."""
    return tuple(lax.reshape(lax.slice(key, (i,), (i + 1,)), ()) for i in range(2))


def _pack(w0, w1):
    """Keys from two uint32 arrays of one shape: shape + (2,)."""
    s = w0.shape + (1,)
    return lax.concatenate([lax.reshape(w0, s), lax.reshape(w1, s)], len(s) - 1)


def _hash(key, shape):
    """Threefry of every element's row-major 64-bit counter under `key`: two uint32 arrays."""
    size = math.prod(shape)
    if size >= 2**32:
        # The high counter word would be needed; no array that large fits on one device.
        raise ValueError(f"nova.random: {size} values in one call exceed 2**32 - 1{where_am_i()}")
    k0, k1 = (lax.broadcast_in_dim(w, shape, ()) for w in _words(key))
    hi = lax.full(shape, 0, _U32)
    lo = lax.reshape(lax.iota(_U32, (size,)), shape)
    return lax.threefry2x32(k0, k1, hi, lo)


def _bits32(key, shape):
    y0, y1 = _hash(key, shape)
    return lax.bitwise_xor(y0, y1)


def key(seed) -> Array:
    """A key from an integer seed: uint32 [0, seed mod 2**32], shape (2,) (jax.random.PRNGKey).

    seed: a Python int or a 0-d integer array (a traced one under `jit` is fine). As in JAX without
    x64, only the seed's low 32 bits count. Raises TypeError for a non-integer or non-scalar seed.
    """
    if isinstance(seed, bool | np.bool_):
        raise TypeError(f"key: seed must be an integer, got {seed!r}{where_am_i()}")
    if isinstance(seed, int | np.integer):
        return lax.constant(np.array([0, int(seed) % 2**32], np.uint32))
    s = _as_array(seed)
    if s.ndim != 0 or not dtypes.is_int(s.dtype):
        raise TypeError(
            f"key: seed must be a scalar integer, got a {s.dtype} array of shape {s.shape}"
            f"{where_am_i()}"
        )
    return _pack(lax.full((), 0, _U32), lax.convert_element_type(s, _U32))


PRNGKey = key


def key_data(keys) -> Array:
    """The uint32 words of a key (Nova's keys are raw, so this checks and returns it)."""
    return _check_key("key_data", keys)


def split(key, num=2) -> Array:
    """`num` new keys from one: uint32 of shape (num, 2), or num + (2,) for a tuple `num`.

    key: shape (2,) uint32. Equals jax.random.split bit for bit. Raises TypeError for a bad key.
    """
    k = _check_key("split", key)
    return _pack(*_hash(k, _shape("split", num)))


def fold_in(key, data) -> Array:
    """A new key from `key` and a 32-bit integer `data` (jax.random.fold_in), shape (2,) uint32.

    data: a Python int (taken modulo 2**32) or a 0-d integer array (converted to uint32).
    Raises TypeError for a non-integer or non-scalar datum.
    """
    k = _check_key("fold_in", key)
    if isinstance(data, int | np.integer) and not isinstance(data, bool | np.bool_):
        d = lax.full((), int(data) % 2**32, _U32)
    else:
        d = _as_array(data)
        if d.ndim != 0 or not dtypes.is_int(d.dtype):
            raise TypeError(
                f"fold_in: data must be a scalar integer, got a {d.dtype} array of shape "
                f"{d.shape}{where_am_i()}"
            )
        d = lax.convert_element_type(d, _U32)
    k0, k1 = _words(k)
    return _pack(*lax.threefry2x32(k0, k1, lax.full((), 0, _U32), d))


def bits(key, shape=(), dtype=None) -> Array:
    """Uniform random bits: an unsigned array (uint32 by default, or uint8) of `shape`.

    Equals jax.random.bits bit for bit. Raises ValueError for a dtype that is not unsigned.
    """
    k = _check_key("bits", key)
    d = _U32 if dtype is None else dtypes.canonicalize(dtype)
    if d not in (_U32, dtypes.uint8):
        raise ValueError(f"bits: dtype must be uint32 or uint8, got {d}{where_am_i()}")
    b = _bits32(k, _shape("bits", shape))
    return lax.convert_element_type(b, d)


# --- floating-point samplers ----------------------------------------------------------------------


def _float_dtype(name, dtype):
    d = dtypes.default_float if dtype is None else dtypes.canonicalize(dtype)
    if not dtypes.is_float(d):
        raise ValueError(f"{name}: dtype must be a float dtype, got {d}{where_am_i()}")
    return d


def _param(name, arg, value, dtype, shape) -> Array:
    """`value` as `dtype`, broadcast to `shape` (which must not grow by broadcasting)."""
    x = asarray(value, dtype) if _is_python_scalar(value) else asarray(_as_array(value), dtype)
    lead = len(shape) - x.ndim
    if lead < 0 or any(d not in (1, shape[lead + i]) for i, d in enumerate(x.shape)):
        raise ShapeError(
            f"{name}: {arg} of shape {x.shape} does not broadcast to the shape argument {shape}"
            f"{where_am_i()}"
        )
    return broadcast_to(x, shape)


def _unit(key, shape, dtype):
    """Uniform floats in [0, 1): the top `nmant` random bits as the mantissa, as JAX builds them.

    JAX bit-casts `bits >> (nbits - nmant) | bits_of(1.0)` and subtracts 1; that is m * 2**-nmant
    exactly, which is what we compute (Nova has no bitcast). bfloat16 draws 8 bits, float16 16,
    float32 32 (one word), float64 64 (both words, the first one high).
    """
    fi = dtypes.finfo(dtype)
    nmant = fi.nmant
    if dtype == dtypes.float64:
        y0, y1 = _hash(key, shape)
        hi = lax.mul(lax.convert_element_type(y0, dtype), lax.full(shape, 2.0**-32, dtype))
        low = lax.div(y1, lax.full(shape, 2 ** (64 - nmant), _U32))
        lo = lax.mul(lax.convert_element_type(low, dtype), lax.full(shape, 2.0**-nmant, dtype))
        return lax.add(hi, lo)
    b = _bits32(key, shape)
    nbits = 8 if nmant < 8 else fi.bits
    if nbits < 32:
        b = lax.rem(b, lax.full(shape, 2**nbits, _U32))
    m = lax.div(b, lax.full(shape, 2 ** (nbits - nmant), _U32))
    return lax.mul(lax.convert_element_type(m, dtype), lax.full(shape, 2.0**-nmant, dtype))


def uniform(key, shape=(), dtype=None, minval=0.0, maxval=1.0) -> Array:
    """Uniform floats in [minval, maxval): `shape`, `dtype` (float32 by default).

    minval, maxval: scalars or arrays that broadcast to `shape`. Equals jax.random.uniform bit for
    bit. Raises ValueError for a non-float dtype, ShapeError when the bounds do not broadcast.
    """
    k = _check_key("uniform", key)
    d = _float_dtype("uniform", dtype)
    shape = _shape("uniform", shape)
    lo = _param("uniform", "minval", minval, d, shape)
    hi = _param("uniform", "maxval", maxval, d, shape)
    f = _unit(k, shape, d)
    return lax.max(lo, lax.add(lax.mul(f, lax.sub(hi, lo)), lo))


def normal(key, shape=(), dtype=None) -> Array:
    """Standard normal floats of `shape` and `dtype` (float32 by default).

    sqrt(2) * erfinv(u) for u uniform in (-1, 1), as jax.random.normal; erfinv by Giles'
    polynomials (see `_erf_inv`). A complex dtype (complex64 / complex128) gives the standard
    complex normal, E|z|^2 = 1: real and imaginary parts independent N(0, 1/2), drawn as the
    normals of split(key)'s two keys in the real dtype, divided by sqrt(2) (jax.random.normal's
    values). Raises ValueError for a dtype that is neither float nor complex.
    """
    k = _check_key("normal", key)
    if dtype is not None and dtypes.is_complex(dtypes.canonicalize(dtype)):
        rd = dtypes.real_dtype(dtypes.canonicalize(dtype))
        k_re, k_im = split(k)
        shape = _shape("normal", shape)
        scale = lax.full(shape, 1 / np.sqrt(2), rd)
        return lax.complex(lax.mul(normal(k_re, shape, rd), scale),
                           lax.mul(normal(k_im, shape, rd), scale))
    d = _float_dtype("normal", dtype)
    shape = _shape("normal", shape)
    lo = -1.0 + float(dtypes.finfo(d).epsneg)  # nextafter(-1, 0): keeps erfinv finite
    u = uniform(k, shape, d, lo, 1.0)
    return lax.mul(lax.full(shape, np.sqrt(2), d), _erf_inv(u))


def truncated_normal(key, lower, upper, shape=None, dtype=None) -> Array:
    """Standard normal floats conditioned on lower < x < upper, by inverse-CDF sampling.

    lower, upper: scalars or arrays; `shape` defaults to their broadcast shape and otherwise must
    contain it. Values lie in the open interval (lower, upper) (clamped to the neighbouring
    floats, as JAX does). Raises ValueError for a non-float dtype, ShapeError for bad shapes.
    """
    k = _check_key("truncated_normal", key)
    d = _float_dtype("truncated_normal", dtype)
    lo, hi = (_as_array(v) if not _is_python_scalar(v) else asarray(v, d) for v in (lower, upper))
    if shape is None:
        shape = broadcast_shapes(lo.shape, hi.shape, name="truncated_normal")
    shape = _shape("truncated_normal", shape)
    lo = _param("truncated_normal", "lower", lo, d, shape)
    hi = _param("truncated_normal", "upper", hi, d, shape)
    sqrt2 = lax.full(shape, np.sqrt(2), d)
    a = lax.erf(lax.div(lo, sqrt2))
    b = lax.erf(lax.div(hi, sqrt2))
    out = lax.mul(sqrt2, _erf_inv(uniform(k, shape, d, a, b)))
    return lax.min(lax.max(out, _nextafter(lo, +1)), _nextafter(hi, -1))


def exponential(key, shape=(), dtype=None) -> Array:
    """Exponential(1) floats of `shape`: -log1p(-u) for u uniform in [0, 1), as JAX."""
    k = _check_key("exponential", key)
    d = _float_dtype("exponential", dtype)
    u = uniform(k, _shape("exponential", shape), d)
    return lax.neg(lax.log1p(lax.neg(u)))


def gumbel(key, shape=(), dtype=None, mode="low") -> Array:
    """Standard Gumbel floats of `shape`: -log(-log(u)), as jax.random.gumbel.

    mode "low" draws u in [tiny, 1) from one word; "high" adds a second uniform below the first's
    resolution so that logits up to ~32 (float32) are reachable. Raises ValueError otherwise.
    """
    k = _check_key("gumbel", key)
    d = _float_dtype("gumbel", dtype)
    shape = _shape("gumbel", shape)
    fi = dtypes.finfo(d)
    if mode == "low":
        u = uniform(k, shape, d, float(fi.tiny), 1.0)
        return lax.neg(lax.log(lax.neg(lax.log(u))))
    if mode != "high":
        raise ValueError(f"gumbel: mode must be 'low' or 'high', got {mode!r}{where_am_i()}")
    high, low = _unstack(uniform(k, (2, *shape), d))
    fine = lax.mul(lax.full(shape, 2.0**-fi.nmant, d), low)
    x = lax.add(lax.add(high, fine), lax.full(shape, fi.tiny, d))
    x = lax.select(lax.ge(high, lax.full(shape, 0.5, d)), high, x)
    return lax.neg(lax.log(lax.neg(lax.log1p(lax.neg(x)))))


def _unstack(x):
    """The slices x[0], x[1], ... of the leading axis."""
    rest = x.shape[1:]
    return [
        lax.reshape(lax.slice(x, (i,) + (0,) * len(rest), (i + 1,) + rest), rest)
        for i in range(x.shape[0])
    ]


def bernoulli(key, p=0.5, shape=None, mode="low") -> Array:
    """Booleans that are True with probability `p` (a float scalar or array), as JAX.

    shape: defaults to p's shape, else must contain it. mode "high" adds a second uniform for
    correct sampling of p below ~1e-7 (float32). Raises TypeError for integer p.
    """
    k = _check_key("bernoulli", key)
    if mode not in ("low", "high"):
        raise ValueError(f"bernoulli: mode must be 'low' or 'high', got {mode!r}{where_am_i()}")
    pa = _as_array(p)
    if not dtypes.is_float(pa.dtype):
        raise TypeError(f"bernoulli: p must have a float dtype, got {pa.dtype}{where_am_i()}")
    shape = pa.shape if shape is None else _shape("bernoulli", shape)
    pb = _param("bernoulli", "p", pa, pa.dtype, shape)
    if mode == "low":
        return lax.lt(uniform(k, shape, pa.dtype), pb)
    u1, u2 = _unstack(uniform(k, (2, *shape), pa.dtype))
    u2 = lax.mul(u2, lax.full(shape, 2.0 ** -dtypes.finfo(pa.dtype).nmant, pa.dtype))
    return lax.lt(u2, lax.sub(pb, u1))


# --- erfinv and nextafter from Nova ops -----------------------------------------------------------

# Giles, "Approximating the erfinv function", GPU Computing Gems Jade Edition (2011), in the form
# XLA uses (xla/hlo/builder/lib/math.cc ErfInv32/ErfInv64): w = -log1p(-x*x); a polynomial in a
# shifted w (or sqrt(w)) per range of w; erfinv(x) = p * x.
# fmt: off
_GILES32 = (  # (upper bound of w, shift, sqrt?, coefficients from the highest degree)
    (5.0, 2.5, False, (2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06,
                       0.00021858087, -0.00125372503, -0.00417768164, 0.246640727, 1.50140941)),
    (np.inf, 3.0, True, (-0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844,
                         0.00573950773, -0.0076224613, 0.00943887047, 1.00167406, 2.83297682)),
)
_GILES64 = (
    (6.25, 3.125, False, (
        -3.6444120640178196996e-21, -1.685059138182016589e-19, 1.2858480715256400167e-18,
        1.115787767802518096e-17, -1.333171662854620906e-16, 2.0972767875968561637e-17,
        6.6376381343583238325e-15, -4.0545662729752068639e-14, -8.1519341976054721522e-14,
        2.6335093153082322977e-12, -1.2975133253453532498e-11, -5.4154120542946279317e-11,
        1.051212273321532285e-09, -4.1126339803469836976e-09, -2.9070369957882005086e-08,
        4.2347877827932403518e-07, -1.3654692000834678645e-06, -1.3882523362786468719e-05,
        0.0001867342080340571352, -0.00074070253416626697512, -0.0060336708714301490533,
        0.24015818242558961693, 1.6536545626831027356)),
    (16.0, 3.25, True, (
        2.2137376921775787049e-09, 9.0756561938885390979e-08, -2.7517406297064545428e-07,
        1.8239629214389227755e-08, 1.5027403968909827627e-06, -4.013867526981545969e-06,
        2.9234449089955446044e-06, 1.2475304481671778723e-05, -4.7318229009055733981e-05,
        6.8284851459573175448e-05, 2.4031110387097893999e-05, -0.0003550375203628474796,
        0.00095328937973738049703, -0.0016882755560235047313, 0.0024914420961078508066,
        -0.0037512085075692412107, 0.005370914553590063617, 1.0052589676941592334,
        3.0838856104922207635)),
    (np.inf, 5.0, True, (
        -2.7109920616438573243e-11, -2.5556418169965252055e-10, 1.5076572693500548083e-09,
        -3.7894654401267369937e-09, 7.6157012080783393804e-09, -1.4960026627149240478e-08,
        2.9147953450901080826e-08, -6.7711997758452339498e-08, 2.2900482228026654717e-07,
        -9.9298272942317002539e-07, 4.5260625972231537039e-06, -1.9681778105531670567e-05,
        7.5995277030017761139e-05, -0.00021503011930044477347, -0.00013871931833623122026,
        1.0103004648645343977, 4.8499064014085844221)),
)
# fmt: on


def _erf_inv(x):
    """erfinv(x) for |x| <= 1 (±1 give ±max finite, as XLA); 16-bit floats compute in float32."""
    if x.dtype in (dtypes.float16, dtypes.bfloat16):
        return lax.convert_element_type(_erf_inv(lax.convert_element_type(x, _F32)), x.dtype)
    table = _GILES64 if x.dtype == dtypes.float64 else _GILES32

    def c(v):
        return lax.full_like(x, v)

    w = lax.neg(lax.log1p(lax.neg(lax.mul(x, x))))
    root = lax.sqrt(w)
    p = None
    for bound, shift, use_root, coefs in reversed(table):
        z = lax.sub(root if use_root else w, c(shift))
        q = c(coefs[0])
        for a in coefs[1:]:
            q = lax.add(c(a), lax.mul(q, z))
        p = q if p is None else lax.select(lax.lt(w, c(bound)), q, p)
    big = lax.mul(x, c(dtypes.finfo(x.dtype).max))
    return lax.select(lax.eq(lax.abs(x), c(1.0)), big, lax.mul(p, x))


def _nextafter(x, direction: int):
    """numpy.nextafter(x, direction * inf), exactly, from arithmetic alone (Nova has no bitcast).

    For |x| <= tiny the neighbours are x ± the smallest subnormal. Elsewhere x ± |x| / 2**(p+1)
    (p mantissa bits) rounds to the neighbour, except at a power of two moving away from zero,
    where it ties back to x and x ± |x| / 2**p is the neighbour. Scaling small x by 2**(p+2)
    keeps |x| / 2**(p+1) normal, so every step is exact. ±inf moving inward become ±max.
    """
    fi = dtypes.finfo(x.dtype)
    p = fi.nmant

    def c(v):
        return lax.full_like(x, v)

    ax = lax.abs(x)
    near_zero = lax.add(x, c(direction * float(fi.smallest_subnormal)))
    scale = lax.select(lax.lt(ax, c(float(fi.tiny) * 2.0 ** (p + 2))), c(2.0 ** (p + 2)), c(1.0))
    y = lax.mul(x, scale)
    d = lax.mul(lax.abs(y), c(direction * 2.0 ** -(p + 1)))
    t = lax.add(y, d)
    t = lax.select(lax.eq(t, y), lax.add(y, lax.add(d, d)), t)
    r = lax.select(lax.le(ax, c(float(fi.tiny))), near_zero, lax.div(t, scale))
    r = lax.select(lax.eq(r, c(0.0)), lax.mul(x, c(0.0)), r)  # a zero keeps x's sign
    inward_inf = lax.eq(x, c(-direction * np.inf))
    return lax.select(inward_inf, c(-direction * float(fi.max)), r)


# --- integers and permutations ------------------------------------------------------------------

_RANDINT_DTYPES = (dtypes.int32, dtypes.uint32, dtypes.uint8)


def _int_bound(name, arg, value, dtype, lo_clip, hi_clip, shape):
    """A randint bound as `dtype` broadcast to `shape`, clipped into [lo_clip, hi_clip]; and
    whether it exceeded the dtype's maximum (a bool array), as JAX's _convert_and_clip_integer."""
    top = int(dtypes.iinfo(dtype).max)
    if isinstance(value, int | np.integer | float):
        v = int(value)
        over = lax.full(shape, v > top, dtypes.bool_)
        return lax.full(shape, min(max(v, lo_clip), hi_clip), dtype), over
    x = _as_array(value)
    if not dtypes.is_int(x.dtype):
        x = lax.convert_element_type(x, _I32)  # JAX's astype(int): truncation toward zero
    info = dtypes.iinfo(x.dtype)
    over = lax.gt(x, lax.full(x.shape, min(top, int(info.max)), x.dtype))
    lo, hi = max(lo_clip, int(info.min)), min(hi_clip, int(info.max))
    x = lax.min(lax.max(x, lax.full(x.shape, lo, x.dtype)), lax.full(x.shape, hi, x.dtype))
    x = lax.convert_element_type(x, dtype)
    return _param(name, arg, x, dtype, shape), _param(name, arg, over, dtypes.bool_, shape)


def _urem(x, span):
    # XLA's unsigned remainder by 0 returns the dividend (JAX relies on it for the full range).
    return lax.select(lax.eq(span, lax.zeros_like(span)), x, lax.rem(x, span))


def randint(key, shape, minval, maxval, dtype=None) -> Array:
    """Uniform integers in [minval, maxval) of `shape` and `dtype` (int32 by default).

    JAX's algorithm: two 32-bit words per value reduced modulo the span, so the bias is about
    span / 2**32 relative. minval, maxval: ints or integer arrays broadcasting to `shape`; bounds
    beyond the dtype are clipped to it (maxval one past its top is allowed); maxval <= minval gives
    minval. dtype: int32, uint32 or uint8 (uint8 samples as int32). Raises TypeError otherwise.
    """
    k = _check_key("randint", key)
    d = _I32 if dtype is None else dtypes.canonicalize(dtype)
    if d not in _RANDINT_DTYPES:
        raise TypeError(f"randint: dtype must be int32, uint32 or uint8, got {d}{where_am_i()}")
    shape = _shape("randint", shape)
    sd = _I32 if d == dtypes.uint8 else d
    info = dtypes.iinfo(d)
    lo, _ = _int_bound("randint", "minval", minval, sd, int(info.min), int(info.max), shape)
    hi, over = _int_bound(
        "randint",
        "maxval",
        maxval,
        sd,
        int(info.min),
        int(info.max) + (1 if d == dtypes.uint8 else 0),
        shape,
    )
    k1, k2 = _unstack(split(k))
    higher, lower = _bits32(k1, shape), _bits32(k2, shape)

    def u(v):
        return lax.full(shape, v, _U32)

    span = lax.convert_element_type(lax.sub(hi, lo), _U32)
    empty = lax.le(hi, lo)
    span = lax.select(empty, u(1), span)
    span = lax.select(lax.bitwise_and(over, lax.bitwise_not(empty)), lax.add(span, u(1)), span)
    # hi * 2**32 + lo mod span, with 2**32 mod span = (2**16 mod span)**2 mod span.
    mult = _urem(u(2**16), span)
    mult = _urem(lax.mul(mult, mult), span)
    offset = lax.add(lax.mul(_urem(higher, span), mult), _urem(lower, span))
    out = lax.add(lo, lax.convert_element_type(_urem(offset, span), sd))
    return lax.convert_element_type(out, d)


def _shuffle(key, x, axis):
    """Sorts x along `axis` by fresh random 32-bit keys, repeated until collisions are unlikely:
    ceil(3 ln(size) / ln(2**32 - 1)) rounds (tjablin's criterion, as JAX's _shuffle)."""
    rounds = int(np.ceil(3 * np.log(max(1, x.size)) / np.log(2**32 - 1)))
    for _ in range(rounds):
        key, subkey = _unstack(split(key))
        _, x = lax.sort_key_val(_bits32(subkey, x.shape), x, axis)
    return x


def _take(arr, ind, axis):
    """arr indexed by the integer array `ind` along `axis` (numpy.take with in-range indices)."""
    g = lax.gather(arr, lax.reshape(ind, ind.shape + (1,)), (axis,))
    k = ind.ndim
    before = list(range(k, k + axis))
    perm = before + list(range(k)) + list(range(k + axis, g.ndim))
    return lax.transpose(g, perm)


def _size_or_array(name, x):
    """(n, None) for an integer or 0-d integer x, else (None, x as an Array of ndim >= 1)."""
    if isinstance(x, int | np.integer) and not isinstance(x, bool):
        return operator.index(x), None
    arr = _as_array(x)
    if arr.ndim == 0:
        if not dtypes.is_int(arr.dtype):
            raise TypeError(
                f"{name}: x must be an integer or an array of ndim >= 1, got a 0-d {arr.dtype}"
                f"{where_am_i()}"
            )
        return operator.index(arr), None
    return None, arr


def permutation(key, x, axis=0, independent=False) -> Array:
    """A random permutation of range(x) (int32) for an integer x, or of x's slices along `axis`.

    independent: shuffle every 1-D lane along `axis` on its own. Sorts by random keys (stable), as
    jax.random.permutation, whose results it equals bit for bit.
    """
    k = _check_key("permutation", key)
    n, arr = _size_or_array("permutation", x)
    if arr is None:
        return _shuffle(k, lax.iota(_I32, (n,)), 0)
    axis = normalize_axis(axis, arr.ndim)
    if independent or arr.ndim == 1:
        return _shuffle(k, arr, axis)
    ind = _shuffle(k, lax.iota(_I32, (arr.shape[axis],)), 0)
    return _take(arr, ind, axis)


def _top_k_indices(x, k):
    """Indices of the k largest entries along the last axis, ties to the lower index (lax.top_k)."""
    idx = lax.iota(_I32, x.shape, x.ndim - 1)
    _, order = lax.sort_key_val(lax.neg(x), idx, x.ndim - 1)
    return lax.slice(order, (0,) * x.ndim, x.shape[:-1] + (k,))


def choice(key, a, shape=(), replace=True, p=None, axis=0) -> Array:
    """Random samples of range(a) for an integer a, or of a's slices along `axis`.

    shape: the sample shape (the result has it in place of `axis`). p: optional probabilities of
    the a.shape[axis] entries. Without replacement and with p, uses the Gumbel top-k trick; all as
    jax.random.choice. Raises ValueError for an empty population or too many draws.
    """
    k = _check_key("choice", key)
    shape = _shape("choice", shape)
    n, arr = _size_or_array("choice", a)
    if arr is None:
        axis = 0
    else:
        axis = normalize_axis(axis, arr.ndim)
        n = arr.shape[axis]
    draws = math.prod(shape)
    if draws == 0:
        return lax.full(shape, 0, _I32 if arr is None else arr.dtype)
    if n <= 0:
        raise ValueError(
            f"choice: a must be greater than 0 unless no samples are taken{where_am_i()}"
        )
    if not replace and draws > n:
        raise ValueError(
            f"choice: cannot take a larger sample (size {draws}) than the population (size {n}) "
            f"when replace=False{where_am_i()}"
        )
    if p is None and not replace:
        perm = permutation(k, n if arr is None else arr, axis)
        lim = list(perm.shape)
        lim[axis] = draws
        ind_or_arr = lax.slice(perm, (0,) * perm.ndim, lim)
        out_shape = shape if arr is None else arr.shape[:axis] + shape + arr.shape[axis + 1 :]
        return lax.reshape(ind_or_arr, out_shape)
    if p is None:
        ind = randint(k, shape, 0, n)
    else:
        ind = _weighted_indices(k, p, n, shape, replace)
    return ind if arr is None else _take(arr, ind, axis)


def _weighted_indices(key, p, n, shape, replace):
    pa = _as_array(p)
    if not dtypes.is_float(pa.dtype):
        pa = lax.convert_element_type(pa, dtypes.default_float)
    if pa.shape != (n,):
        raise ShapeError(
            f"choice: p must be None or of shape ({n},) (a.shape[axis]), got {pa.shape}"
            f"{where_am_i()}"
        )
    if replace:
        # Inverse CDF: the first index whose cumulative weight reaches r (searchsorted, left).
        cdf = lax.cumsum(pa, 0)
        total = lax.broadcast_in_dim(lax.reshape(lax.slice(cdf, (n - 1,), (n,)), ()), shape, ())
        u = uniform(key, shape, pa.dtype)
        r = lax.mul(total, lax.sub(lax.full(shape, 1, pa.dtype), u))
        full = shape + (n,)
        below = lax.lt(
            lax.broadcast_in_dim(cdf, full, (len(shape),)),
            lax.broadcast_in_dim(r, full, tuple(range(len(shape)))),
        )
        return lax.reduce_sum(lax.convert_element_type(below, _I32), (len(shape),))
    g = lax.add(gumbel(key, (n,), pa.dtype), lax.log(pa))
    return lax.reshape(_top_k_indices(g, math.prod(shape)), shape)


def categorical(key, logits, axis=-1, shape=None, replace=True, mode="low") -> Array:
    """Samples from the categorical distributions softmax(logits, axis) (Gumbel-max trick), int32.

    shape: defaults to logits' shape without `axis` (the batch shape); a longer shape draws more
    samples per distribution (its leading dims). replace=False draws without replacement (Gumbel
    top-k; the leading dims count the draws). mode: as `gumbel`. As jax.random.categorical.
    Raises ShapeError when `shape` does not broadcast with the batch shape.
    """
    k = _check_key("categorical", key)
    lg = _as_array(logits)
    if not dtypes.is_float(lg.dtype):
        lg = lax.convert_element_type(lg, dtypes.default_float)
    axis = normalize_axis(axis, lg.ndim)
    batch = lg.shape[:axis] + lg.shape[axis + 1 :]
    shape = batch if shape is None else _shape("categorical", shape)
    if len(shape) < len(batch) or broadcast_shapes(shape, batch, name="categorical") != shape:
        raise ShapeError(
            f"categorical: shape {shape} does not end in a broadcast of the logits' batch shape "
            f"{batch} (logits {lg.shape}, axis {axis}){where_am_i()}"
        )
    prefix = shape[: len(shape) - len(batch)]
    if replace:
        tail = shape[len(prefix) :]
        full_shape = prefix + tail[:axis] + (lg.shape[axis],) + tail[axis:]
        noise = gumbel(k, full_shape, lg.dtype, mode)
        dims = tuple(range(len(prefix), len(full_shape)))
        return lax.argmax(
            lax.add(noise, lax.broadcast_in_dim(lg, full_shape, dims)), len(prefix) + axis
        )
    draws = math.prod(prefix)
    if draws > lg.shape[axis]:
        raise ValueError(
            f"categorical: {draws} samples without replacement exceed the {lg.shape[axis]} "
            f"categories{where_am_i()}"
        )
    noisy = lax.add(lg, gumbel(k, lg.shape, lg.dtype, mode))
    last = lax.transpose(noisy, [i for i in range(lg.ndim) if i != axis] + [axis])
    ind = _top_k_indices(last, draws)  # batch + (draws,)
    ind = lax.transpose(ind, [ind.ndim - 1] + list(range(ind.ndim - 1)))
    return lax.reshape(ind, shape)


# The other distributions live in their own modules, which build on the samplers above:
# they are loaded on first use (so that importing one of them first does not meet a
# half-initialized nova.random).
_LAZY = {
    "beta": "nova.random_gamma",
    "chisquare": "nova.random_gamma",
    "dirichlet": "nova.random_gamma",
    "f": "nova.random_gamma",
    "gamma": "nova.random_gamma",
    "loggamma": "nova.random_gamma",
    "t": "nova.random_gamma",
    "binomial": "nova.random_discrete",
    "geometric": "nova.random_discrete",
    "multinomial": "nova.random_discrete",
    "poisson": "nova.random_discrete",
    "rademacher": "nova.random_discrete",
    "ball": "nova.random_distributions",
    "cauchy": "nova.random_distributions",
    "clone": "nova.random_distributions",
    "double_sided_maxwell": "nova.random_distributions",
    "generalized_normal": "nova.random_distributions",
    "key_impl": "nova.random_distributions",
    "laplace": "nova.random_distributions",
    "logistic": "nova.random_distributions",
    "lognormal": "nova.random_distributions",
    "maxwell": "nova.random_distributions",
    "multivariate_normal": "nova.random_distributions",
    "orthogonal": "nova.random_distributions",
    "pareto": "nova.random_distributions",
    "rayleigh": "nova.random_distributions",
    "triangular": "nova.random_distributions",
    "wald": "nova.random_distributions",
    "weibull_min": "nova.random_distributions",
    "wrap_key_data": "nova.random_distributions",
}


def __getattr__(name):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'nova.random' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_LAZY))
