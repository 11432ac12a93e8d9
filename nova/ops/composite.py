"""jax.lax functions that are compositions of Nova's primitives and nova.numpy (no primitive of
their own): special functions (lgamma, digamma, erfc, erf_inv, bessel_i0e, bessel_i1e,
betainc, igamma, igammac, igamma_grad_a, random_gamma_grad, polygamma, zeta from
nova.scipy.special), the
inverse trigonometric and hyperbolic functions (asin, acos, asinh, acosh, atanh from
nova.numpy), population_count,
is_finite, square, cbrt, select_n, dot, batch_matmul, broadcast, broadcast_shapes, collapse,
split, the logical reductions reduce_and / reduce_or / reduce_xor, a generic `reduce`,
cumlogsumexp, and `associative_scan` (the Blelloch / Ladner-Fischer parallel prefix of
jax.lax.associative_scan: odd-even recursion, O(log n) levels of elementwise work; Blelloch
1990, "Prefix sums and their applications").

They are imported lazily (nova.numpy and nova.scipy sit above ops/), so their derivatives,
vmap and jit come from the functions they are written in.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Sequence

from nova.core.errors import ShapeError


def _jnp():
    import nova.numpy as jnp

    return jnp


def _special():
    from nova.scipy import special

    return special


def lgamma(x):
    """log|Gamma(x)| elementwise (jax.lax.lgamma; nova.scipy.special.gammaln)."""
    return _special().gammaln(x)


def digamma(x):
    """The digamma function elementwise (jax.lax.digamma; nova.scipy.special.digamma)."""
    return _special().digamma(x)


def erfc(x):
    """1 - erf(x) without cancellation (jax.lax.erfc; nova.scipy.special.erfc)."""
    return _special().erfc(x)


def erf_inv(x):
    """The inverse error function (jax.lax.erf_inv; nova.scipy.special.erfinv)."""
    return _special().erfinv(x)


def _floats(name: str, *args):
    """args promoted to one float dtype and shape (Python scalars weakly typed), as the special
    functions of jax.lax take them. Raises TypeError for an integer or bool array."""
    import numpy as np

    from nova.core import dtypes
    from nova.core.array import Array
    from nova.numpy_impl.util import promote

    for k, a in enumerate(args):
        if isinstance(a, Array | np.ndarray | np.generic) and not dtypes.is_float(a.dtype):
            raise TypeError(f"{name}: argument {k} must be a float array, got dtype {a.dtype}")
    return promote(name, *args, to_inexact=True)


def bessel_i0e(x):
    """exp(-|x|) I0(x) elementwise (jax.lax.bessel_i0e; nova.scipy.special.i0e: Cephes'
    Chebyshev expansions). Floats only: TypeError for an integer array."""
    return _special().i0e(*_floats("bessel_i0e", x))


def bessel_i1e(x):
    """exp(-|x|) I1(x) elementwise (jax.lax.bessel_i1e; nova.scipy.special.i1e). Floats only."""
    return _special().i1e(*_floats("bessel_i1e", x))


def betainc(a, b, x):
    """The regularized incomplete beta function I_x(a, b) (jax.lax.betainc;
    nova.scipy.special.betainc's continued fraction, NR 3rd ed. 6.4). Broadcasts; floats only;
    NaN outside a, b > 0, 0 <= x <= 1."""
    return _special().betainc(*_floats("betainc", a, b, x))


def igamma(a, x):
    """The regularized lower incomplete gamma function P(a, x) (jax.lax.igamma;
    nova.scipy.special.gammainc: series / Legendre's continued fraction, NR 3rd ed. 6.2).
    Broadcasts; floats only; NaN outside a > 0, x >= 0."""
    return _special().gammainc(*_floats("igamma", a, x))


def igammac(a, x):
    """The regularized upper incomplete gamma function Q(a, x) = 1 - P(a, x) (jax.lax.igammac;
    nova.scipy.special.gammaincc, without cancellation in the tail)."""
    return _special().gammaincc(*_floats("igammac", a, x))


def igamma_grad_a(a, x):
    """dP(a, x) / da elementwise (jax.lax.igamma_grad_a): forward mode through igamma's series
    and continued fraction (their loops differentiate term by term). Broadcasts; floats only."""
    import nova

    a, x = _floats("igamma_grad_a", a, x)
    jnp = _jnp()
    return nova.jvp(lambda s: _special().gammainc(s, x), (a,), (jnp.ones_like(a),))[1]


def random_gamma_grad(a, x):
    """d sample / d alpha of a standard Gamma(alpha = a) sample x, by implicit differentiation
    of the CDF (jax.lax.random_gamma_grad): x = P^-1(a, u) with u fixed gives
    dx/da = -(dP/da)(a, x) / p(x; a), p(x; a) = x^(a-1) e^-x / Gamma(a) the density (the
    reparameterization gradient of Figurnov et al. 2018, "Implicit Reparameterization
    Gradients", eq. 7). Broadcasts; floats only; a > 0, x > 0."""
    a, x = _floats("random_gamma_grad", a, x)
    jnp = _jnp()
    log_density = (a - 1.0) * jnp.log(x) - x - _special().gammaln(a)
    return -igamma_grad_a(a, x) / jnp.exp(log_density)


def polygamma(m, x):
    """The m-th derivative of digamma (jax.lax.polygamma; nova.scipy.special.polygamma:
    (-1)^(m+1) m! zeta(m + 1, x)). m is a float array as in JAX: NaN where m is negative or
    not an integer. Broadcasts; floats only."""
    from nova.core import dtypes

    jnp = _jnp()
    m, x = _floats("polygamma", m, x)
    ok = (m >= 0) & (m == jnp.floor(m))
    order = jnp.where(ok, m, jnp.zeros_like(m)).astype(dtypes.int32)
    return jnp.where(ok, _special().polygamma(order, x), jnp.nan)


def zeta(x, q):
    """The Hurwitz zeta function sum_k (k + q)^-x (jax.lax.zeta; nova.scipy.special.zeta's
    Euler-Maclaurin summation): x > 1, q > 0, NaN otherwise. Broadcasts; floats only."""
    return _special().zeta(*_floats("zeta", x, q))


def _elementary():
    from nova.numpy_impl import elementary

    return elementary


def asin(x):
    """The inverse sine elementwise (jax.lax.asin; nova.numpy.arcsin's algorithm)."""
    return _elementary().arcsin(x)


def acos(x):
    """The inverse cosine elementwise (jax.lax.acos; nova.numpy.arccos's algorithm)."""
    return _elementary().arccos(x)


def asinh(x):
    """The inverse hyperbolic sine elementwise (jax.lax.asinh; nova.numpy.arcsinh's)."""
    return _elementary().arcsinh(x)


def acosh(x):
    """The inverse hyperbolic cosine elementwise (jax.lax.acosh; nova.numpy.arccosh's)."""
    return _elementary().arccosh(x)


def atanh(x):
    """The inverse hyperbolic tangent elementwise (jax.lax.atanh; nova.numpy.arctanh's)."""
    return _elementary().arctanh(x)


def population_count(x):
    """The number of 1 bits of each element, in x's dtype (jax.lax.population_count: the bit
    pattern, so -1 in int32 counts 32). Integer inputs only; TypeError otherwise."""
    from nova.core import dtypes

    jnp = _jnp()
    a = jnp.asarray(x)
    if not dtypes.is_int(a.dtype):
        raise TypeError(f"population_count: x must be an integer array, got dtype {a.dtype}")
    if dtypes.is_unsigned(a.dtype):
        return jnp.bitwise_count(a).astype(a.dtype)
    # a negative x's pattern is the sign bit over x ^ INT_MIN (x with the sign bit cleared)
    sign_bit = jnp.asarray(-(1 << (a.dtype.itemsize * 8 - 1)), a.dtype)
    neg = a < 0
    out = jnp.bitwise_count(jnp.where(neg, a ^ sign_bit, a)).astype(a.dtype)
    return jnp.where(neg, out + jnp.asarray(1, a.dtype), out)


def is_finite(x):
    """True where x is neither inf nor NaN (jax.lax.is_finite); floats only."""
    from nova.core import dtypes

    jnp = _jnp()
    a = jnp.asarray(x)
    if not dtypes.is_float(a.dtype):
        raise TypeError(f"is_finite: x must be a float array, got {a.dtype}")
    return jnp.isfinite(a)


def square(x):
    """x * x elementwise (jax.lax.square)."""
    a = _jnp().asarray(x)
    return a * a


def cbrt(x):
    """The real cube root elementwise (jax.lax.cbrt)."""
    return _jnp().cbrt(x)


def select_n(which, *cases):
    """cases[which] elementwise (jax.lax.select_n): `which` is bool (two cases: False picks
    cases[0]) or int32 in [0, len(cases)); the cases share one shape and dtype, which is a
    scalar or of their shape. Raises ValueError without cases, TypeError for mismatched
    cases or a float `which`."""
    from nova.core import dtypes

    jnp = _jnp()
    if not cases:
        raise ValueError("select_n: at least one case is needed")
    cs = [jnp.asarray(c) for c in cases]
    if any(c.shape != cs[0].shape or c.dtype != cs[0].dtype for c in cs):
        raise TypeError("select_n: the cases must share one shape and dtype, got "
                        + ", ".join(f"{c.dtype}{list(c.shape)}" for c in cs))
    w = jnp.asarray(which)
    if w.shape not in ((), cs[0].shape):
        raise ShapeError(f"select_n: which has shape {w.shape}; it must be a scalar or of the "
                         f"cases' shape {cs[0].shape}")
    if w.dtype == dtypes.bool_:
        if len(cs) > 2:
            raise TypeError(f"select_n: a bool `which` selects between 2 cases, got {len(cs)}")
        return jnp.where(w, cs[-1], cs[0])
    if not dtypes.is_int(w.dtype):
        raise TypeError(f"select_n: which must be bool or an integer, got {w.dtype}")
    out = cs[-1]
    for k in range(len(cs) - 2, -1, -1):  # out-of-range indices take the last case
        out = jnp.where(w == k, cs[k], out)
    return out


def dot(lhs, rhs, precision=None, preferred_element_type=None):
    """The vector / matrix product of 1-d or 2-d arrays (jax.lax.dot): contracts lhs' last
    axis with rhs' first. Raises ShapeError for other ranks or mismatched sizes."""
    from nova.ops import lax

    jnp = _jnp()
    lax._check_precision("dot", precision)
    x, y, want = lax._accumulating("dot", lhs, rhs, preferred_element_type)
    if x.ndim not in (1, 2) or y.ndim not in (1, 2) or x.shape[-1] != y.shape[0]:
        raise ShapeError(f"dot: shapes {x.shape} and {y.shape} are not 1-d/2-d operands with "
                         "matching contracting sizes")
    out = jnp.matmul(x, y)
    return out if want is None or out.dtype == want else out.astype(want)


def batch_matmul(lhs, rhs, precision=None):
    """Batched matrix product of two arrays of one rank >= 2 with equal batch shapes
    (jax.lax.batch_matmul). Raises ShapeError otherwise."""
    jnp = _jnp()
    x, y = jnp.asarray(lhs), jnp.asarray(rhs)
    if x.ndim < 2 or x.ndim != y.ndim or x.shape[:-2] != y.shape[:-2] or \
            x.shape[-1] != y.shape[-2]:
        raise ShapeError(f"batch_matmul: shapes {x.shape} and {y.shape} need one rank >= 2, "
                         "equal batch dimensions and matching contracting sizes")
    return jnp.matmul(x, y)


def broadcast(operand, sizes: Sequence[int]):
    """operand with new leading axes of `sizes` (jax.lax.broadcast)."""
    jnp = _jnp()
    x = jnp.asarray(operand)
    sizes = tuple(operator.index(n) for n in sizes)
    return jnp.broadcast_to(x, sizes + x.shape)


def broadcast_shapes(*shapes):
    """The shape all `shapes` broadcast to (jax.lax.broadcast_shapes). Raises ValueError when
    they do not broadcast."""
    try:
        return tuple(_jnp().broadcast_shapes(*shapes))
    except ShapeError as e:
        raise ValueError(str(e)) from None


def collapse(operand, start_dimension: int, stop_dimension: int | None = None):
    """operand with axes [start, stop) merged into one (jax.lax.collapse)."""
    x = _jnp().asarray(operand)
    nd = x.ndim
    stop = nd if stop_dimension is None else stop_dimension
    start = start_dimension + nd if start_dimension < 0 else start_dimension
    stop = stop + nd if stop < 0 else stop
    if not 0 <= start <= stop <= nd:
        raise ValueError(f"collapse: dimensions [{start_dimension}, {stop_dimension}) are out "
                         f"of range for shape {x.shape}")
    return x.reshape(x.shape[:start] + (math.prod(x.shape[start:stop]),) + x.shape[stop:])


def split(operand, sizes: Sequence[int], axis: int = 0):
    """operand cut along `axis` into pieces of `sizes` (jax.lax.split). Raises ValueError when
    the sizes do not add up to the axis' length."""
    from nova.numpy_impl.util import normalize_axis

    jnp = _jnp()
    x = jnp.asarray(operand)
    a = normalize_axis(axis, x.ndim)
    sizes = [operator.index(n) for n in sizes]
    if sum(sizes) != x.shape[a] or any(n < 0 for n in sizes):
        raise ValueError(f"split: sizes {sizes} do not add up to axis {a}'s length "
                         f"{x.shape[a]}")
    out, start = [], 0
    for n in sizes:
        idx = [slice(None)] * x.ndim
        idx[a] = slice(start, start + n)
        out.append(x[tuple(idx)])
        start += n
    return out


def _axes(operand, axes):
    from nova.numpy_impl.util import normalize_axes

    return normalize_axes(tuple(axes), operand.ndim)


def reduce_and(operand, axes: Sequence[int]):
    """Logical (bool) or bitwise (integer) AND over `axes` (jax.lax.reduce_and)."""
    return _bit_reduce("reduce_and", operand, axes)


def reduce_or(operand, axes: Sequence[int]):
    """Logical (bool) or bitwise (integer) OR over `axes` (jax.lax.reduce_or)."""
    return _bit_reduce("reduce_or", operand, axes)


def reduce_xor(operand, axes: Sequence[int]):
    """Logical (bool) or bitwise (integer) XOR over `axes` (jax.lax.reduce_xor)."""
    return _bit_reduce("reduce_xor", operand, axes)


def _bit_reduce(name, operand, axes):
    from nova.core import dtypes

    jnp = _jnp()
    x = jnp.asarray(operand)
    ax = _axes(x, axes)
    if x.dtype == dtypes.bool_:
        if name == "reduce_and":
            return jnp.all(x, axis=ax)
        if name == "reduce_or":
            return jnp.any(x, axis=ax)
        return jnp.sum(x, axis=ax, dtype=dtypes.int32) % 2 == 1
    if not dtypes.is_int(x.dtype):
        raise TypeError(f"{name}: operand must be bool or an integer, got {x.dtype}")
    op = {"reduce_and": jnp.bitwise_and, "reduce_or": jnp.bitwise_or,
          "reduce_xor": jnp.bitwise_xor}[name]
    return _tree_reduce(op, x, ax)


def _tree_reduce(op, x, axes):
    """op folded over `axes` by halving (log2 levels of elementwise op)."""
    jnp = _jnp()
    for a in sorted(axes, reverse=True):
        while x.shape[a] > 1:
            n = x.shape[a]
            h = n // 2
            lo = jnp.take(x, jnp.arange(h), axis=a)
            hi = jnp.take(x, jnp.arange(h, 2 * h), axis=a)
            y = op(lo, hi)
            if n % 2:
                y = jnp.concatenate([y, jnp.take(x, jnp.arange(2 * h, n), axis=a)], axis=a)
            x = y
        x = jnp.squeeze(x, axis=a) if x.shape[a] == 1 else \
            jnp.full(x.shape[:a] + x.shape[a + 1:], 0, x.dtype)
    return x


def reduce(operands, init_values, computation: Callable, dimensions: Sequence[int]):
    """Folds `computation` over `dimensions` starting from init_values (jax.lax.reduce), for
    one operand (an array, or a one-element sequence): lax.add / max / min / mul and
    nova.numpy's add / maximum / minimum / multiply run Nova's reductions; another binary
    function must be associative and commutative and is folded by halving. init_value is
    combined once. Raises ValueError for several operands (not implemented)."""
    from nova.ops import elementwise as ew

    jnp = _jnp()
    single = not isinstance(operands, list | tuple)
    ops = [operands] if single else list(operands)
    inits = [init_values] if single else list(init_values)
    if len(ops) != 1 or len(inits) != 1:
        raise ValueError("reduce: several operands (variadic reduce) are not implemented")
    x = jnp.asarray(ops[0])
    init = jnp.asarray(inits[0]).astype(x.dtype)
    ax = _axes(x, dimensions)
    named = {ew.add: jnp.sum, ew.max: jnp.max, ew.min: jnp.min, ew.mul: jnp.prod,
             jnp.add: jnp.sum, jnp.maximum: jnp.max, jnp.minimum: jnp.min,
             jnp.multiply: jnp.prod}
    red = named.get(computation)
    if red is not None:
        if any(x.shape[a] == 0 for a in ax):
            shape = tuple(n for k, n in enumerate(x.shape) if k not in ax)
            out = jnp.broadcast_to(init, shape)
        else:
            out = red(x, axis=ax).astype(x.dtype)
            out = computation(out, jnp.broadcast_to(init, out.shape))
    else:
        out = _tree_reduce(computation, x, ax)
        out = computation(out, jnp.broadcast_to(init, out.shape))
    return out if single else [out]


def cumlogsumexp(operand, axis: int = 0, reverse: bool = False):
    """log(cumsum(exp(x))) along `axis`, computed stably (jax.lax.cumlogsumexp): an
    associative_scan of logaddexp."""
    jnp = _jnp()
    return associative_scan(jnp.logaddexp, jnp.asarray(operand), reverse=reverse, axis=axis)


def associative_scan(fn: Callable, elems, reverse: bool = False, axis: int = 0):
    """All prefix combinations fn(...fn(fn(e0, e1), e2)..., ek) along `axis` of elems (an
    array or a pytree of arrays sharing that axis' length), for an associative fn of pytrees
    (jax.lax.associative_scan): the odd-even parallel prefix, O(log n) levels of
    elementwise fn over whole slices. reverse scans from the end. Raises ValueError when the
    leaves' lengths along axis differ."""
    from nova.core.pytree import tree_flatten, tree_unflatten

    jnp = _jnp()
    leaves, tree = tree_flatten(elems)
    leaves = [jnp.asarray(x) for x in leaves]
    if not leaves:
        return elems
    from nova.numpy_impl.util import normalize_axis

    ax = [normalize_axis(axis, x.ndim) for x in leaves]
    n = leaves[0].shape[ax[0]]
    if any(x.shape[a] != n for x, a in zip(leaves, ax, strict=True)):
        raise ValueError("associative_scan: the leaves' lengths along axis differ: "
                         + ", ".join(str(x.shape) for x in leaves))
    if reverse:
        leaves = [jnp.flip(x, axis=a) for x, a in zip(leaves, ax, strict=True)]

    def take(xs, start, stop, step=1):
        out = []
        for x, a in zip(xs, ax, strict=True):
            idx = [slice(None)] * x.ndim
            idx[a] = slice(start, stop, step)
            out.append(x[tuple(idx)])
        return out

    def combine(a, b):
        res = fn(tree_unflatten(tree, a), tree_unflatten(tree, b))
        return [jnp.asarray(r) for r in tree_flatten(res)[0]]

    def interleave(evens, odds, length):
        out = []
        for e, o, a in zip(evens, odds, ax, strict=True):
            ne, no = e.shape[a], o.shape[a]
            if no < ne:  # one odd fewer: pad with the last even to stack, cut after
                idx = [slice(None)] * e.ndim
                idx[a] = slice(ne - 1, ne)
                o = jnp.concatenate([o, e[tuple(idx)]], axis=a)
            st = jnp.stack([e, o], axis=a + 1)
            shape = list(e.shape)
            shape[a] = 2 * ne
            idx = [slice(None)] * e.ndim
            idx[a] = slice(0, length)
            out.append(st.reshape(shape)[tuple(idx)])
        return out

    def scan(xs):
        m = xs[0].shape[ax[0]]
        if m < 2:
            return xs
        # pair up neighbours, scan the pairs, then fill in the evens
        reduced = combine(take(xs, 0, m - 1, 2), take(xs, 1, m, 2))
        odd = scan(reduced)
        if m % 2 == 0:
            even = combine(take(odd, 0, -1), take(xs, 2, m, 2))
        else:
            even = combine(odd, take(xs, 2, m, 2))
        even = [jnp.concatenate([f, e], axis=a)
                for f, e, a in zip(take(xs, 0, 1), even, ax, strict=True)]
        return interleave(even, odd, m)

    out = scan(leaves)
    if reverse:
        out = [jnp.flip(x, axis=a) for x, a in zip(out, ax, strict=True)]
    return tree_unflatten(tree, out)
