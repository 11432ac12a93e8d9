"""nova.random's counting distributions: poisson, binomial, multinomial, geometric, rademacher.

Imported by nova.random at its end (and importing its private helpers): import nova.random,
not this module, first.
"""

from __future__ import annotations

from nova import numpy_api as jnp
from nova.core import dtypes
from nova.core.array import Array
from nova.numpy_impl.util import where_am_i
from nova.ops import lax
from nova.random import _check_key, _float_dtype, _shape, _unstack, bernoulli, split, uniform
from nova.random_gamma import _control_flow, _params, _real

__all__ = ["binomial", "geometric", "multinomial", "poisson", "rademacher"]


def _int_dtype(name, dtype):
    d = dtypes.default_int if dtype is None else dtypes.canonicalize(dtype)
    if not dtypes.is_int(d):
        raise ValueError(f"{name}: dtype must be an integer dtype, got {d}{where_am_i()}")
    return d


def _rejection_loop(key, shape, dtype, propose):
    """Whole-array rejection sampling: every round draws u, v uniform of `shape` for all elements,
    `propose(u, v)` gives (candidate, accept), and an element keeps its first accepted candidate.
    Runs until all have accepted. Returns the candidates (float `dtype`)."""

    def cond(state):
        return jnp.any(jnp.logical_not(state[2]))

    def body(state):
        k, out, done = state
        k, ku, kv = _unstack(split(k, 3))
        cand, accept = propose(uniform(ku, shape, dtype), uniform(kv, shape, dtype))
        return k, jnp.where(accept & jnp.logical_not(done), cand, out), done | accept

    init = (key, lax.full(shape, -1.0, dtype), lax.full(shape, False, dtypes.bool_))
    return _control_flow().while_loop(cond, body, init)[1]


# --- Poisson --------------------------------------------------------------------------------------


def _poisson_knuth(key, lam):
    """Knuth's multiplication method (TAOCP vol. 2, 3.4.1 F): the count of uniforms whose running
    product stays above e^-lam, in log space; the loop runs max(result) + 1 rounds."""
    shape = lam.shape

    def cond(state):
        return jnp.any(state[2] > -lam)

    def body(state):
        k, count, log_prod = state
        k, sub = _unstack(split(k))
        count = count + (log_prod > -lam).astype(count.dtype)
        return k, count, log_prod + jnp.log(uniform(sub, shape, lam.dtype))

    init = (key, lax.full(shape, 0.0, lam.dtype), lax.full(shape, 0.0, lam.dtype))
    return _control_flow().while_loop(cond, body, init)[1] - 1.0


def _poisson_ptrs(key, lam):
    """W. Hörmann, "The transformed rejection method for generating Poisson random variables",
    Insurance: Mathematics and Economics 12 (1993), algorithm PTRS (for lam >= 10)."""
    log_lam = jnp.log(lam)
    b = 0.931 + 2.53 * jnp.sqrt(lam)
    a = -0.059 + 0.02483 * b
    inv_alpha = 1.1239 + 1.1328 / (b - 3.4)
    v_r = 0.9277 - 3.6224 / (b - 2.0)

    def propose(u, v):
        u = u - 0.5
        us = 0.5 - jnp.abs(u)
        k = jnp.floor((2.0 * a / us + b) * u + lam + 0.43)
        fast = (us >= 0.07) & (v <= v_r)
        bad = (k < 0) | ((us < 0.013) & (v > us))
        lhs = jnp.log(v * inv_alpha / (a / (us * us) + b))
        rhs = -lam + k * log_lam - lax.lgamma(k + 1.0)
        return k, fast | (jnp.logical_not(bad) & (lhs <= rhs))

    return _rejection_loop(key, lam.shape, lam.dtype, propose)


def poisson(key, lam, shape=None, dtype=None) -> Array:
    """Poisson(lam) counts: integers of `dtype` (int32 by default), as jax.random.poisson.

    lam: a rate >= 0 (float or array, computed in float32); shape: default lam's shape. Knuth's
    method where lam < 10, Hörmann's PTRS elsewhere (the choice of TensorFlow, NumPy and JAX);
    lam = 0 gives 0. Same distribution as JAX, not the same numbers. Raises TypeError for a bad
    key, ValueError for a non-integer dtype, ShapeError when lam does not broadcast to `shape`.
    """
    k = _check_key("poisson", key)
    d = _int_dtype("poisson", dtype)
    shape, (lam,) = _params("poisson", shape, dtypes.float32, lam=lam)
    small = jnp.isnan(lam) | (lam < 10.0)
    knuth = _poisson_knuth(k, jnp.where(small, lam, jnp.zeros_like(lam)))
    ptrs = _poisson_ptrs(k, jnp.where(small, lax.full_like(lam, 1e5), lam))
    out = jnp.where(lam == 0, jnp.zeros_like(lam), jnp.where(small, knuth, ptrs))
    return out.astype(d)


# --- binomial -------------------------------------------------------------------------------------

# log(k!) - (k + 1/2) log(k + 1) + (k + 1) - log(2 pi) / 2: the Stirling remainder at k + 1 for
# k = 0..9 (Kachitvichyanukul and Schmeiser, table of fc(k)); a series above.
_STIRLING_TAIL = (0.0810614667953272, 0.0413406959554092, 0.0276779256849983,
                  0.02079067210376509, 0.0166446911898211, 0.0138761288230707,
                  0.0118967099458917, 0.0104112652619720, 0.00925546218271273,
                  0.00833056343336287)  # fmt: skip


def _stirling_tail(k):
    table = jnp.asarray(_STIRLING_TAIL, dtype=k.dtype)
    idx = jnp.clip(k, 0.0, 9.0).astype(dtypes.int32)
    k1 = k + 1.0
    k1sq = k1 * k1
    series = (1.0 / 12 - (1.0 / 360 - 1.0 / 1260 / k1sq) / k1sq) / k1
    return jnp.where(k <= 9, jnp.take(table, idx), series)


def _binomial_inversion(key, n, q):
    """Successes among n trials as the number of Geometric(q) waiting times that fit in n
    (Devroye, "Non-Uniform Random Variate Generation", X.4.3); rounds ~ n q + 1."""
    shape = n.shape
    log1mq = jnp.log1p(-q)

    def cond(state):
        return jnp.any(state[2] <= n)

    def body(state):
        k, count, total = state
        k, sub = _unstack(split(k))
        count = count + (total <= n).astype(count.dtype)
        wait = jnp.ceil(jnp.log(uniform(sub, shape, q.dtype)) / log1mq)
        return k, count, total + wait

    init = (key, jnp.zeros_like(q), jnp.zeros_like(q))
    return _control_flow().while_loop(cond, body, init)[1] - 1.0


def _binomial_btrs(key, n, q):
    """W. Hörmann, "The generation of binomial random variates", J. Statist. Comput. Simul. 46
    (1993), algorithm BTRS (for n q > 10, q <= 1/2)."""
    spq = jnp.sqrt(n * q * (1.0 - q))
    b = 1.15 + 2.53 * spq
    a = -0.0873 + 0.0248 * b + 0.01 * q
    c = n * q + 0.5
    v_r = 0.92 - 4.2 / b
    r = q / (1.0 - q)
    alpha = (2.83 + 5.1 / b) * spq
    m = jnp.floor((n + 1.0) * q)

    def propose(u, v):
        u = u - 0.5
        us = 0.5 - jnp.abs(u)
        k = jnp.floor((2.0 * a / us + b) * u + c)
        fast = (us >= 0.07) & (v <= v_r)
        bad = (k < 0) | (k > n)
        lhs = jnp.log(v * alpha / (a / (us * us) + b))
        rhs = (
            (m + 0.5) * jnp.log((m + 1.0) / (r * (n - m + 1.0)))
            + (n + 1.0) * jnp.log((n - m + 1.0) / (n - k + 1.0))
            + (k + 0.5) * jnp.log(r * (n - k + 1.0) / (k + 1.0))
            + _stirling_tail(m) + _stirling_tail(n - m)
            - _stirling_tail(k) - _stirling_tail(n - k)
        )  # fmt: skip
        return k, fast | (jnp.logical_not(bad) & (lhs <= rhs))

    return _rejection_loop(key, n.shape, n.dtype, propose)


def binomial(key, n, p, shape=None, dtype=None) -> Array:
    """Binomial(n, p) counts as floats of `dtype` (float32 by default), as jax.random.binomial.

    n: trials (floats or arrays, floored); p: success probabilities; shape: default their
    broadcast shape. Inversion of geometric waiting times where n min(p, 1-p) <= 10, Hörmann's
    BTRS elsewhere, on q = min(p, 1 - p) (the count is reflected for p > 1/2). NaN for p < 0, a
    NaN parameter or n < 0; inf for n = inf. Same distribution as JAX, not the same numbers.
    Raises TypeError for a bad key, ValueError for a non-float dtype, ShapeError for bad shapes.
    """
    k = _check_key("binomial", key)
    d = _float_dtype("binomial", dtype)
    shape, (n, p) = _params("binomial", shape, d, n=n, p=p)
    flip = p >= 0.5
    q = jnp.where(flip, 1.0 - p, p)
    bad_n, inf_n, bad_q = jnp.isnan(n) | (n < 0), jnp.isinf(n), jnp.isnan(q) | (q < 0)
    q = jnp.where(bad_q, lax.full_like(q, 0.01), q)
    n = jnp.floor(n)
    small = bad_n | (n * q <= 10.0)
    inv = _binomial_inversion(k, jnp.where(small, n, jnp.zeros_like(n)), q)
    btrs = _binomial_btrs(
        k, jnp.where(small, lax.full_like(n, 1e4), n), jnp.where(small, lax.full_like(q, 0.5), q)
    )
    out = jnp.where(small, inv, btrs)
    out = jnp.where(flip & jnp.logical_not(bad_n | inf_n), n - out, out)
    out = jnp.where(inf_n, lax.full_like(out, float("inf")), out)
    return jnp.where(bad_n | bad_q, lax.full_like(out, float("nan")), out)


def multinomial(key, n, p, *, shape=None, dtype=None, unroll=1) -> Array:
    """Multinomial(n, p) counts along p's last axis, floats of `dtype` (float32 by default).

    n: trials, broadcasting to the batch shape; p: probabilities of shape (..., k) (normalized
    by the sampler only through the conditional ratios: they should sum to 1); shape: the full
    result shape (default p.shape), whose last entry must be k. Conditional binomials: category
    i gets Binomial(remaining, p_i / sum_{j>=i} p_j), as jax.random.multinomial. `unroll` is
    accepted for JAX's signature and ignored (categories are unrolled at trace time).
    Raises ValueError for a 0-d p or a shape not ending in k, otherwise as `binomial`.
    """
    kk = _check_key("multinomial", key)
    d = _float_dtype("multinomial", dtype)
    pa = _real("multinomial", "p", p)
    if pa.ndim < 1:
        raise ValueError(f"multinomial: p must have ndim >= 1, got shape {pa.shape}{where_am_i()}")
    full = pa.shape if shape is None else _shape("multinomial", shape)
    if not full or full[-1] != pa.shape[-1]:
        raise ValueError(
            f"multinomial: shape {full} must end in p's number of categories {pa.shape[-1]} "
            f"(p of shape {pa.shape}){where_am_i()}"
        )
    _, (n,) = _params("multinomial", full[:-1], d, n=n)
    _, (p,) = _params("multinomial", full, d, p=pa)
    cats = full[-1]
    rest = jnp.flip(jnp.cumsum(jnp.flip(p, -1), -1), -1)  # sum_{j >= i} p_j
    ratio = jnp.clip(p / jnp.where(rest == 0, jnp.ones_like(rest), rest), 0.0, 1.0)
    keys = split(kk, cats)
    counts = []
    for i in range(cats):
        c = binomial(keys[i], n, ratio[..., i], dtype=d)
        counts.append(c)
        n = n - c
    return jnp.stack(counts, -1) if cats else jnp.zeros(full, d)


# --- closed forms ---------------------------------------------------------------------------------


def geometric(key, p, shape=None, dtype=None) -> Array:
    """Geometric(p) trial counts >= 1 (integers of `dtype`, int32 by default): floor(log u /
    log(1 - p)) + 1 by inversion, as jax.random.geometric. p in (0, 1]; shape: default p's
    shape. Raises ValueError for a non-integer dtype, ShapeError for bad shapes."""
    k = _check_key("geometric", key)
    d = _int_dtype("geometric", dtype)
    pa = _real("geometric", "p", p)
    fd = pa.dtype if dtypes.is_float(pa.dtype) else dtypes.default_float
    shape, (pa,) = _params("geometric", shape, fd, p=pa)
    u = uniform(k, shape, fd)
    u = jnp.where(u == 0, jnp.ones_like(u), u)
    return (jnp.floor(jnp.log(u) / jnp.log1p(-pa)) + 1.0).astype(d)


def rademacher(key, shape=(), dtype=None) -> Array:
    """Random signs -1 or +1 with equal probability, of `shape` and integer `dtype` (int32 by
    default) (jax.random.rademacher; JAX also accepts float dtypes and so does Nova)."""
    k = _check_key("rademacher", key)
    d = dtypes.default_int if dtype is None else dtypes.canonicalize(dtype)
    if not (dtypes.is_int(d) or dtypes.is_float(d)) or d == dtypes.bool_:
        raise ValueError(f"rademacher: dtype must be a numeric dtype, got {d}{where_am_i()}")
    b = bernoulli(k, 0.5, _shape("rademacher", shape)).astype(d)
    return (2 * b - 1).astype(d)

