"""The SVD of complex matrices and what is built on it (svd, pinv, lstsq, matrix_rank, cond):
one-sided Jacobi (Hestenes 1958) whose pair rotations carry the phase of the Gram entry
g_p^H g_q, then U from the complex QR of the orthogonalized columns
(decompositions_complex_spectral.py), so that U's signs follow R's real diagonal.
decompositions.py dispatches here for complex arguments.

The reduced SVD's derivative (JAX's convention: the conjugated adjoint for Re tr(X^H Y)) is
Townsend 2016 ("Differentiating the singular value decomposition") with conjugate transposes,
plus U diag(i Im(diag(U^H U_bar)) / s) V^H: the phase of u_j and v_j is free, and a loss must
not depend on it (be invariant under u_j, v_j -> e^(i t) u_j, e^(i t) v_j), as in JAX.
"""

from __future__ import annotations

import functools

import numpy as np

from nova.core import dtypes
from nova.core.errors import ConcretizationTypeError, ShapeError
from nova.numpy_impl import decompositions as _d
from nova.numpy_impl import decompositions_complex as _c
from nova.numpy_impl import decompositions_complex_spectral as _s
from nova.numpy_impl.util import where_am_i

_jnp, _lax, _row, _iota, _eye = _d._jnp, _d._lax, _d._row, _d._iota, _d._eye
mH = _c.mH


def _svd_tall_core(a):
    """(U (m, m), s (n,) real descending, V (n, n)) of a complex 2-D a with m >= n."""
    jnp, lax = _jnp(), _lax()
    m, n0 = a.shape
    n = n0 + (n0 % 2)
    if n != n0:
        a = jnp.pad(a, ((0, 0), (0, 1)))
    partner_np, first_np = _d._round_robin(n) if n > 1 else (np.zeros((1, n), np.int32),
                                                             np.ones((1, n), bool))
    partner, first = jnp.asarray(partner_np), jnp.asarray(first_np)
    real = dtypes.real_dtype(a.dtype)
    eps = float(np.finfo(np.dtype(real)).eps)
    rounds = max(n - 1, 1)

    def rotations(r, g):
        part, isp = _row(partner, r), _row(first, r)
        norms = jnp.sum(jnp.real(g * jnp.conj(g)), axis=0)
        gamma = jnp.sum(jnp.conj(g) * g[:, part], axis=0)  # g_i^H g_partner
        gamma = jnp.where(isp, gamma, gamma[part])  # g_p^H g_q for both members
        alpha = jnp.where(isp, norms, norms[part])
        beta = jnp.where(isp, norms[part], norms)
        own, other, mag = _s._pair_phases(gamma, isp)
        cc, ss = _d._rotation(alpha, beta, mag)
        scale = jnp.sqrt(alpha * beta)
        rel = jnp.where(scale > 0, mag / jnp.where(scale > 0, scale, 1.0), jnp.zeros_like(mag))
        sgn = jnp.where(isp, -ss, ss)
        return (cc * own).astype(a.dtype), (sgn * other).astype(a.dtype), part, jnp.max(rel)

    limit = _d._max_sweeps(real) * rounds
    tol = eps * m

    def cond(c):
        r, worst = c[2], c[3]
        return (((r % rounds) != 0) | (worst > tol)) & (r < limit)

    def body(c):
        g, v, r, worst, cs, cp, part, rel = c
        g = g * cs[None, :] + g[:, part] * cp[None, :]
        v = v * cs[None, :] + v[:, part] * cp[None, :]
        worst = jnp.maximum(jnp.where(r % rounds == 0, jnp.zeros_like(worst), worst), rel)
        r = r + 1
        return (g, v, r, worst, *rotations(r % rounds, g))

    zero = jnp.zeros((), dtypes.int32)
    init = (a, _eye(n, a.dtype), zero, jnp.full((), np.inf, real), *rotations(zero, a))
    g, v = lax.while_loop(cond, body, init)[:2]
    g, v = g[:, :n0], v[:n0, :n0]
    s = jnp.sqrt(jnp.sum(jnp.real(g * jnp.conj(g)), axis=0))
    order = jnp.argsort(-s)
    s, g, v = s[order], g[:, order], v[:, order]
    q, r = _s._qr_raw(g)
    d = jnp.real(jnp.diagonal(r))
    sign = jnp.where(d < 0, -jnp.ones_like(d), jnp.ones_like(d)).astype(a.dtype)
    return jnp.concatenate([q[:, :n0] * sign[None, :], q[:, n0:]], axis=1), s, v


def _svd_raw(a):
    """(U, s, V) with a = U diag(s) V^H for a complex 2-D a."""
    m, n = a.shape
    sc = _d._pow2_scale(a)
    if m >= n:
        u, s, v = _svd_tall_core(a / sc)
    else:
        v, s, u = _svd_tall_core(mH(a) / sc)
    return u, s * sc, v


@functools.cache
def _svd_reduced_fn():
    import nova

    @nova.custom_vjp
    def svd_reduced(a):
        u, s, v = _svd_raw(a)
        k = s.shape[0]
        return u[:, :k], s, mH(v[:, :k])

    def fwd(a):
        out = svd_reduced(a)
        return out, (out, a)

    def bwd(res, g):
        jnp = _jnp()
        (u, s, vh), a = res
        v = mH(vh)
        gu, gs, gvh = g
        gu, gv = jnp.conj(gu), _d._mT(gvh)  # the adjoint's cotangents of U and V
        m, n = a.shape
        k = s.shape[0]
        eye = _iota(k, 0, 2) == _iota(k, 1, 2)
        s2 = s * s
        diff = s2[None, :] - s2[:, None]
        f = jnp.where(eye, jnp.zeros_like(diff), 1 / jnp.where(eye, jnp.ones_like(diff), diff))
        uhgu = mH(u) @ gu
        vhgv = mH(v) @ gv
        inner = (f * (uhgu - mH(uhgu))) * s[None, :] + s[:, None] * (f * (vhgv - mH(vhgv)))
        sinv = 1 / s
        phase = 1j * jnp.imag(jnp.diagonal(uhgu)) * sinv
        inner = inner + jnp.where(eye, (gs + phase)[None, :], jnp.zeros_like(inner))
        ga = u @ inner @ vh
        if m > k:
            ga = ga + (gu - u @ uhgu) * sinv[None, :] @ vh
        if n > k:
            ga = ga + (u * sinv[None, :]) @ (mH(gv) - mH(vhgv) @ vh)
        return (jnp.conj(ga),)

    svd_reduced.defvjp(fwd, bwd)
    return svd_reduced


def _svd_full_fn():
    return _d._svd_full_nodiff(_svd_raw)


def svd(a, full_matrices=True, compute_uv=True):
    """decompositions.svd for complex a: U and Vh unitary of a's dtype, S real (float32 for
    complex64, float64 for complex128) descending."""
    jnp = _jnp()
    x = _c.matrix("svd", a, square=False)
    real = dtypes.real_dtype(x.dtype)
    m, n = x.shape[-2:]
    k = min(m, n)
    if k == 0:
        s = jnp.zeros((*x.shape[:-2], 0), real)
        if not compute_uv:
            return s
        um, vn = (m, n) if full_matrices else (0, 0)
        return _d.SVDResult(jnp.broadcast_to(_eye(m, x.dtype)[:, :um], (*x.shape[:-2], m, um)),
                            s, jnp.broadcast_to(_eye(n, x.dtype)[:vn], (*x.shape[:-2], vn, n)))
    if not compute_uv or not full_matrices:
        u, s, vh = _d._batched(_svd_reduced_fn(), x, n_batch=x.ndim - 2)
        return s if not compute_uv else _d.SVDResult(u, s, vh)
    u, s, v = _d._batched(_svd_full_fn(), x, n_batch=x.ndim - 2)
    return _d.SVDResult(u, s, mH(v))


def _sinv(s, cut):
    jnp = _jnp()
    big = s > cut
    return jnp.where(big, 1 / jnp.where(big, s, jnp.ones_like(s)), jnp.zeros_like(s)), big


def pinv(a, rtol=None, *, rcond=None):
    """decompositions.pinv for complex a: V S^+ U^H, (..., n, m) of a's dtype."""
    jnp = _jnp()
    x = _c.matrix("pinv", a, square=False)
    m, n = x.shape[-2:]
    tol = rcond if rcond is not None else rtol
    if tol is None:
        tol = _d._rcond_default(m, n, dtypes.real_dtype(x.dtype))
    if min(m, n) == 0:
        return jnp.zeros((*x.shape[:-2], n, m), x.dtype)
    u, s, vh = svd(x, full_matrices=False)
    cut = jnp.asarray(tol, s.dtype)[..., None] * jnp.max(s, axis=-1, keepdims=True)
    sinv, _ = _sinv(s, cut)
    return mH(vh) @ (sinv[..., :, None].astype(x.dtype) * mH(u))


def lstsq(a, b, rcond=None):
    """decompositions.lstsq for complex a or b: x of the promoted complex dtype; residuals
    (the squared norms |b - a x|^2), s real."""
    jnp = _jnp()
    x = _c.as_inexact("lstsq", a)
    bb = _c.as_inexact("lstsq", b, "b")
    if x.ndim != 2:
        raise ShapeError(f"lstsq: a must be 2-D, got shape {x.shape}{where_am_i()}")
    dt = _c.complex_dtype(x, bb)
    x, bb = x.astype(dt), bb.astype(dt)
    real = dtypes.real_dtype(dt)
    m, n = x.shape
    vec = bb.ndim == 1
    if bb.ndim not in (1, 2) or bb.shape[0] != m:
        raise ShapeError(f"lstsq: b must have shape ({m},) or ({m}, k) to match a of shape "
                         f"{x.shape}, got {bb.shape}{where_am_i()}")
    if rcond is None:
        rcond = _d._rcond_default(m, n, real)
    bm = bb[:, None] if vec else bb
    if min(m, n) == 0:
        sol = jnp.zeros((n, bm.shape[1]), dt)
        s = jnp.zeros((0,), real)
        rank = jnp.zeros((), dtypes.int32)
    else:
        u, s, vh = svd(x, full_matrices=False)
        sinv, big = _sinv(s, rcond * jnp.max(s))
        rank = jnp.sum(big.astype(dtypes.int32))
        sol = mH(vh) @ (sinv[:, None].astype(dt) * (mH(u) @ bm))
    r = bm - x @ sol
    resid_all = jnp.sum(jnp.real(r * jnp.conj(r)), axis=0)
    try:
        full_rank = int(rank) == n and m > n
        resid = resid_all if full_rank else jnp.zeros((0,), real)
    except ConcretizationTypeError:  # a traced rank (under jit): always the residuals
        resid = resid_all
    return (sol[:, 0] if vec else sol), resid, rank, s


def matrix_rank(M, rtol=None, *, tol=None):
    """decompositions.matrix_rank for complex M."""
    jnp = _jnp()
    x = _c.as_inexact("matrix_rank", M, "M")
    if x.ndim < 2:
        return jnp.any(x != 0).astype(dtypes.int32)
    if min(x.shape[-2:]) == 0:
        return jnp.zeros(x.shape[:-2], dtypes.int32)
    s = svd(x, compute_uv=False)
    m, n = x.shape[-2:]
    if tol is None:
        r = _d._rcond_default(m, n, s.dtype) if rtol is None else rtol
        cut = jnp.asarray(r, s.dtype)[..., None] * jnp.max(s, axis=-1, keepdims=True)
    else:
        cut = jnp.asarray(tol, s.dtype)[..., None]
    return jnp.sum((s > cut).astype(dtypes.int32), axis=-1)


def cond(x, p=None):
    """decompositions.cond for complex x: real, of x's part dtype."""
    a = _c.matrix("cond", x, square=p not in (None, 2, -2))
    if p in (None, 2, -2):
        s = svd(a, compute_uv=False)
        r = s[..., 0] / s[..., -1]
        return 1 / r if p == -2 else r
    from nova.numpy_impl.norms import norm

    return norm(a, p, axis=(-2, -1)) * norm(_c.inv(a), p, axis=(-2, -1))
