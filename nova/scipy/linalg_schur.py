"""The Schur decomposition of nova.scipy.linalg (schur, rsf2csf) and the matrix functions built
on the complex Schur form (funm; the complex sqrtm of linalg_functions.py), in Nova's own ops.

Algorithms:

- Real input: Householder Hessenberg reduction and Francis' double-shift QR iteration
  (nova/numpy_impl/eig_schur.py), then each 2x2 diagonal block standardized by one rotation as
  LAPACK's dlanv2 does: a block with real eigenvalues is made upper triangular (the rotation's
  first column is the block's unit eigenvector), a block with a complex pair gets equal
  diagonal entries (rotation angle theta with tan(2 theta) = (d - a) / (b + c)).
- Complex input: complex Householder Hessenberg reduction (the zlarfg reflectors of
  decompositions_complex_spectral.py), then the single-shift QR iteration with the Wilkinson
  shift, chased by complex Givens rotations (Golub & Van Loan, "Matrix Computations", 4th ed.,
  7.5.2-7.5.5 and Alg. 5.1.3; deflation test |h[i, i-1]| <= eps (|h[i-1, i-1]| + |h[i, i]|)
  with |z| = |Re z| + |Im z| and the exceptional shift after 10 steps without a deflation
  are LAPACK's zlahqr). One rotation per while-loop iteration, as eig_schur.py.
- rsf2csf: the real Schur form made triangular by one unitary 2x2 rotation per 2x2 block,
  whose first column is the block's unit eigenvector (lambda - t[m, m], t[m, m-1]); the
  rotations of different blocks commute, so all are applied at once.
- funm: the Schur-Parlett recurrence (Golub & Van Loan Alg. 9.1.1) on the complex Schur form,
  one superdiagonal per step: F_ij = (T F - F T)_ij / (t_jj - t_ii) with F's later
  superdiagonals still zero; sqrtm's triangular root (Bjorck & Hammarling 1983, "A Schur
  method for the square root of a matrix", Linear Algebra Appl. 52/53; Higham 1987) likewise:
  R_ij = (T - R R)_ij / (r_ii + r_jj).
"""

from __future__ import annotations

import numpy as np

import nova.numpy as jnp
from nova import lax
from nova.core import dtypes
from nova.core.errors import ShapeError
from nova.numpy_impl import decompositions as _d
from nova.numpy_impl import decompositions_complex as _c
from nova.numpy_impl import eig_schur
from nova.numpy_impl.decompositions_complex_spectral import reflector
from nova.numpy_impl.util import where_am_i

__all__ = ["funm", "rsf2csf", "schur"]

# Wilkinson-shift QR steps allowed per eigenvalue (LAPACK's zlahqr allows 30 as well).
MAX_STEPS_PER_EIGENVALUE = 30


def _iota(n):
    return jnp.arange(n, dtype=dtypes.int32)


def _square(name, a, arg="a"):
    """a as a float or complex (..., n, n) array (float16 / bfloat16 as float32); ValueError
    (ShapeError) for a non-square a, as scipy's 'expected square matrix'."""
    x = _c.as_inexact(name, a, arg)
    if x.ndim < 2 or x.shape[-1] != x.shape[-2]:
        raise ShapeError(f"{name}: {arg} must be a (batched) square matrix of shape (..., n, n), "
                         f"got shape {x.shape} and dtype {x.dtype}{where_am_i()}")
    if x.dtype in (dtypes.float16, dtypes.bfloat16):
        x = x.astype(dtypes.float32)
    return x


def _cabs1(x):
    return jnp.abs(jnp.real(x)) + jnp.abs(jnp.imag(x))


# --- complex Schur form ------------------------------------------------------------------------


def _complex_hessenberg(a):
    """(H, Q) with H = Q^H a Q upper Hessenberg for a complex 2-D (n, n) a."""
    n = a.shape[0]
    i = _iota(n)

    def step(k, c):
        x, q = c
        u = jnp.where(i > k, _d._col(x, k), jnp.zeros((n,), x.dtype))
        v, kappa, _ = reflector(u, i == k + 1)
        x = x - jnp.conj(kappa) * v[:, None] * (jnp.conj(v) @ x)[None, :]  # H^H x
        x = x - kappa * (x @ v)[:, None] * jnp.conj(v)[None, :]  # x H
        q = q - kappa * (q @ v)[:, None] * jnp.conj(v)[None, :]
        return x, q

    x, q = lax.fori_loop(0, max(n - 2, 0), step, (a, jnp.eye(n, dtype=a.dtype)))
    return jnp.triu(x, -1), q


def _givens(f, g):
    """(c real, s complex) with [[c, s], [-conj(s), c]] @ (f, g) = (r, 0)."""
    af, ag = jnp.abs(f), jnp.abs(g)
    norm = jnp.sqrt(af * af + ag * ag)
    safe = jnp.where(norm > 0, norm, jnp.ones_like(norm))
    phase = jnp.where(af > 0, f / jnp.where(af > 0, af, 1).astype(f.dtype),
                      jnp.ones_like(f))
    c = jnp.where(norm > 0, af / safe, jnp.ones_like(af))
    s = jnp.where(norm > 0, phase * jnp.conj(g) / safe.astype(f.dtype), jnp.zeros_like(f))
    return c, s


def _complex_schur_iter(h, z):
    """(T, Z, converged) for a complex upper Hessenberg (n, n) h, n >= 2: T = Z^H h Z upper
    triangular, z multiplied on the right by the rotations (module docstring)."""
    n = h.shape[0]
    dt = h.dtype
    rdt = dtypes.real_dtype(dt)
    eps = float(np.finfo(np.dtype(rdt)).eps)
    tiny = float(np.finfo(np.dtype(rdt)).tiny)
    i = _iota(n)
    sub_mask = i[:, None] == i[None, :] + 1
    int0 = jnp.zeros((), dtypes.int32)

    def entry(x, r, c):
        return lax.dynamic_slice(x, (r, c), (1, 1))[0, 0]

    def deflated(x):
        d = _cabs1(jnp.diagonal(x))
        s = jnp.concatenate([jnp.zeros((1,), dt), jnp.diagonal(x, -1)])  # s[i] = x[i, i-1]
        tst = jnp.concatenate([jnp.zeros((1,), rdt), d[:-1]]) + d
        small = (_cabs1(s) <= eps * tst) | (_cabs1(s) < tiny)
        x = jnp.where(small[:, None] & sub_mask, jnp.zeros_like(x), x)
        return x, jnp.where(small, jnp.zeros_like(s), s)

    def cond(c):
        return (c[2] >= 0) & (c[5] < MAX_STEPS_PER_EIGENVALUE * n)

    def body(c):
        x, zz, hi, lo, j, steps, its = c
        start = j == 0
        xd, s = deflated(x)
        x = jnp.where(start, xd, x)
        boundary = ((i == 0) | (s == 0)) & (i <= hi)
        lo = jnp.where(start, jnp.max(jnp.where(boundary, i, jnp.zeros_like(i))), lo)
        size = hi - lo + 1
        deflate = start & (size <= 1)
        # the Wilkinson shift: the trailing 2x2 block's eigenvalue nearer its last entry
        hm1 = jnp.maximum(hi - 1, 0)
        a, b = entry(x, hm1, hm1), entry(x, hm1, hi)
        cc, d = entry(x, hi, hm1), entry(x, hi, hi)
        p = 0.5 * (a - d)
        root = jnp.sqrt(p * p + b * cc)
        den = jnp.where(jnp.real(jnp.conj(p) * root) >= 0, p + root, p - root)
        mu = d - b * cc / jnp.where(den == 0, jnp.ones_like(den), den)
        mu = jnp.where(den == 0, d, mu)
        exc = (its > 0) & (its % 10 == 0)  # an ad hoc shift to break a cycle (zlahqr)
        mu = jnp.where(exc, d + 0.75 * jnp.abs(jnp.real(cc)), mu)
        r = jnp.where(start, lo, lo + j)
        f = jnp.where(start, entry(x, lo, lo) - mu, entry(x, r, jnp.maximum(r - 1, 0)))
        g = entry(x, jnp.minimum(r + 1, n - 1), jnp.where(start, lo, jnp.maximum(r - 1, 0)))
        cs, sn = _givens(f, g)
        cs = jnp.where(deflate, jnp.ones_like(cs), cs).astype(dt)
        sn = jnp.where(deflate, jnp.zeros_like(sn), sn)
        rr = jnp.minimum(r, n - 2)
        rot = jnp.stack([jnp.stack([cs, sn]), jnp.stack([-jnp.conj(sn), cs])])
        roth = jnp.conj(rot.T)
        rows = lax.dynamic_slice(x, (rr, 0), (2, n))
        x = lax.dynamic_update_slice(x, rot @ rows, (rr, 0))
        cols = lax.dynamic_slice(x, (0, rr), (n, 2))
        x = lax.dynamic_update_slice(x, cols @ roth, (0, rr))
        zc = lax.dynamic_slice(zz, (0, rr), (n, 2))
        zz = lax.dynamic_update_slice(zz, zc @ roth, (0, rr))
        # the annihilated bulge entry is exactly zero
        kill = (~start) & (i[:, None] == r + 1) & (i[None, :] == r - 1)
        x = jnp.where(kill, jnp.zeros_like(x), x)
        last = (~deflate) & (j == size - 2)
        j = jnp.where(deflate | last, int0, j + 1)
        hi = jnp.where(deflate, hi - 1, hi)
        steps = steps + jnp.where(start & ~deflate, 1, 0).astype(dtypes.int32)
        its = jnp.where(deflate, int0, its + jnp.where(start, 1, 0).astype(dtypes.int32))
        return x, zz, hi, lo, j, steps, its

    init = (h, z, jnp.full((), n - 1, dtypes.int32), int0, int0, int0, int0)
    x, zz, hi, _, _, _, _ = lax.while_loop(cond, body, init)
    return jnp.triu(x), zz, hi < 0


def _complex_schur_2d(a):
    n = a.shape[0]
    if n == 1:
        return a, jnp.ones_like(a)
    sc = _d._pow2_scale(a).astype(a.dtype)
    h, q = _complex_hessenberg(a / sc)
    t, z, ok = _complex_schur_iter(h, q)
    ok = ok & jnp.all(jnp.isfinite(a))
    nan = jnp.full_like(t, np.nan)
    return jnp.where(ok, t * sc, nan), jnp.where(ok, z, nan)


# --- real Schur form ---------------------------------------------------------------------------


def _standardize(t, z):
    """(T, Z) with every 2x2 block of the quasi-triangular t standardized (module docstring)."""
    n = t.shape[0]
    re, im, top, _ = eig_schur.block_eigenvalues(t)
    z1 = jnp.zeros((1,), t.dtype)
    a = jnp.diagonal(t)
    d = jnp.concatenate([a[1:], z1])
    b = jnp.concatenate([jnp.diagonal(t, 1), z1])
    c = jnp.concatenate([jnp.diagonal(t, -1), z1])
    # real pair: the unit eigenvector for re (the longer of (b, re - a) and (re - d, c))
    na = b * b + (re - a) * (re - a)
    nb = (re - d) * (re - d) + c * c
    v1 = jnp.where(na > nb, b, re - d)
    v2 = jnp.where(na > nb, re - a, c)
    nrm = jnp.sqrt(jnp.maximum(na, nb))
    nrm = jnp.where(nrm > 0, nrm, jnp.ones_like(nrm))
    theta = 0.5 * jnp.arctan2(d - a, b + c)  # complex pair: equal diagonal entries
    real_pair = top & (im == 0)
    cs = jnp.where(top, jnp.where(real_pair, v1 / nrm, jnp.cos(theta)), jnp.ones_like(a))
    sn = jnp.where(top, jnp.where(real_pair, v2 / nrm, jnp.sin(theta)), jnp.zeros_like(a))
    k = _iota(n)
    prev_cs = jnp.concatenate([jnp.ones((1,), t.dtype), cs[:-1]])
    bottom = jnp.concatenate([jnp.zeros((1,), bool), top[:-1]])
    diag = jnp.where(bottom, prev_cs, cs)
    w = jnp.where(k[:, None] == k[None, :], diag[None, :], jnp.zeros_like(t))
    w = w + jnp.where((k[:, None] == k[None, :] + 1) & top[None, :], sn[None, :], 0 * t)
    w = w - jnp.where((k[:, None] + 1 == k[None, :]) & top[:, None], sn[:, None], 0 * t)
    t = w.T @ t @ w
    # exact zeros below the blocks, and below the triangularized real pairs
    keep = (k[:, None] <= k[None, :]) | ((k[:, None] == k[None, :] + 1) & top[None, :]
                                          & ~real_pair[None, :])
    return jnp.where(keep, t, jnp.zeros_like(t)), z @ w


def _real_schur_2d(a):
    n = a.shape[0]
    if n == 1:
        return a, jnp.ones_like(a)
    sc = _d._pow2_scale(a)
    h, q = eig_schur.hessenberg(a / sc, True)
    t, z, ok = eig_schur.schur(h, q)
    t, z = _standardize(t, z)
    ok = ok & jnp.all(jnp.isfinite(a))
    nan = jnp.full_like(t, np.nan)
    return jnp.where(ok, t * sc, nan), jnp.where(ok, z, nan)


# --- rsf2csf -----------------------------------------------------------------------------------


def _block_shifted_eigenvalue(p, bc):
    """p + sqrt(p^2 + bc), complex: for a block [[a, b], [c, d]] and p = (a - d) / 2 an
    eigenvalue less d. For a real block in real arithmetic (the root of the larger modulus
    for real eigenvalues), not by a complex sqrt of a number whose imaginary part is zero."""
    if _c.is_complex(p):
        return p + jnp.sqrt(p * p + bc)
    disc = p * p + bc
    root = jnp.sqrt(jnp.abs(disc))
    real = disc >= 0
    sign = jnp.where(p < 0, -jnp.ones_like(p), jnp.ones_like(p))
    re = jnp.where(real, p + sign * root, p)
    return lax.complex(re, jnp.where(real, jnp.zeros_like(root), root))


def _rsf2csf_2d(t, z):
    n = t.shape[0]
    eps = float(np.finfo(np.dtype(dtypes.real_dtype(t.dtype))).eps)
    d = jnp.diagonal(t)
    z1 = jnp.zeros((1,), t.dtype)
    c = jnp.concatenate([jnp.diagonal(t, -1), z1])  # c[m] = t[m + 1, m]
    dn = jnp.concatenate([d[1:], z1])
    b = jnp.concatenate([jnp.diagonal(t, 1), z1])
    top = jnp.abs(c) > eps * (jnp.abs(d) + jnp.abs(dn))
    lam_minus_d = _block_shifted_eigenvalue(0.5 * (d - dn), b * c)
    r = jnp.sqrt(jnp.abs(lam_minus_d) ** 2 + jnp.abs(c) ** 2)
    cdt = lam_minus_d.dtype
    t, z, d, c = t.astype(cdt), z.astype(cdt), d.astype(cdt), c.astype(cdt)
    r = jnp.where(top & (r > 0), r, jnp.ones_like(r)).astype(t.dtype)
    u1 = jnp.where(top, lam_minus_d / r, jnp.ones_like(d))
    u2 = jnp.where(top, c / r, jnp.zeros_like(d))
    bottom = jnp.concatenate([jnp.zeros((1,), bool), top[:-1]])
    prev_u1 = jnp.concatenate([jnp.ones((1,), t.dtype), u1[:-1]])
    k = _iota(n)
    zero = jnp.zeros_like(t)
    w = jnp.where(k[:, None] == k[None, :], jnp.where(bottom, jnp.conj(prev_u1), u1)[None, :],
                  zero)
    w = w + jnp.where((k[:, None] == k[None, :] + 1) & top[None, :], u2[None, :], zero)
    w = w - jnp.where((k[:, None] + 1 == k[None, :]) & top[:, None], jnp.conj(u2)[:, None], zero)
    t = jnp.triu(_c.mH(w) @ t @ w)
    return t, z @ w


def rsf2csf(T, Z, check_finite=True):
    """The complex Schur form from the real one (scipy.linalg.rsf2csf, jax.scipy.linalg.rsf2csf).

    T: (..., n, n) real quasi upper triangular (1x1 and 2x2 diagonal blocks, as schur(a)
    returns), Z: (..., n, n) with a = Z T Z^T. Returns (T2, Z2), both complex (complex64 for
    float32, complex128 for float64): T2 upper triangular with a = Z2 T2 Z2^H. A subdiagonal
    entry t[m, m-1] counts as a 2x2 block where |t[m, m-1]| > eps (|t[m-1, m-1]| + |t[m, m]|),
    as SciPy's; each block is triangularized by one unitary rotation (module docstring).
    Complex T or Z are accepted (treated the same way). Raises ShapeError (a ValueError) for
    non-square or mismatched T and Z, TypeError for a non-numeric dtype.
    """
    t = _square("rsf2csf", T, "T")
    zz = _square("rsf2csf", Z, "Z")
    if t.shape != zz.shape:
        raise ShapeError(f"rsf2csf: T and Z must have the same shape, got T {t.shape} and Z "
                         f"{zz.shape}{where_am_i()}")
    dt = _c.complex_dtype(t, zz)
    if t.shape[-1] == 0:
        return t.astype(dt), zz.astype(dt)
    if _c.is_complex(t, zz):
        t, zz = t.astype(dt), zz.astype(dt)
    else:
        rdt = dtypes.real_dtype(dt)
        t, zz = t.astype(rdt), zz.astype(rdt)
    return _d._batched(_rsf2csf_2d, t, zz, n_batch=t.ndim - 2)


def schur(a, output="real", lwork=None, overwrite_a=False, sort=None, check_finite=True):
    """The Schur decomposition a = Z T Z^H (scipy.linalg.schur, jax.scipy.linalg.schur).

    a: (..., n, n) float or complex (ints and bools become float32, float16 / bfloat16 compute
    in float32); leading dimensions are batch dimensions (jax's). output='real' for a real a:
    T (..., n, n) real quasi upper triangular (a 2x2 diagonal block for each complex conjugate
    pair, with equal diagonal entries; 1x1 blocks for real eigenvalues), Z orthogonal, both in
    a's dtype. output='complex', or a complex a: T upper triangular and Z unitary, complex64
    (from float32 / complex64) or complex128. The eigenvalues' order on T's diagonal is the QR
    iteration's, not LAPACK's (Schur forms are not unique). A matrix on which the iteration
    does not converge (30 steps per eigenvalue; NaN or inf entries) gives NaN. Algorithms and
    sources: module docstring (no balancing, as LAPACK's gees). Not differentiable. sort is
    not supported (NotImplementedError); lwork, overwrite_a and check_finite are ignored.

    Raises ValueError for output other than 'real' or 'complex', ShapeError (a ValueError)
    for a non-square a or fewer than 2 dimensions, TypeError for a non-numeric dtype.
    """
    if output not in ("real", "complex", "r", "c"):
        raise ValueError(f"schur: output must be 'real' or 'complex', got {output!r}"
                         f"{where_am_i()}")
    if sort is not None:
        raise NotImplementedError(f"schur: sort is not supported, got {sort!r}{where_am_i()}")
    x = _square("schur", a)
    if x.shape[-1] == 0:
        return (x, x) if output in ("real", "r") or _c.is_complex(x) else (
            x.astype(_c.complex_dtype(x)), x.astype(_c.complex_dtype(x)))
    nb = x.ndim - 2
    if _c.is_complex(x):
        return _d._batched(_complex_schur_2d, x, n_batch=nb)
    t, z = _d._batched(_real_schur_2d, x, n_batch=nb)
    if output in ("complex", "c"):
        return rsf2csf(t, z)
    return t, z


# --- functions of triangular matrices ----------------------------------------------------------


def _by_superdiagonal(t, f_diag, update):
    """The upper triangular F with diagonal f_diag and, for d = 1 .. n-1, superdiagonal d from
    update(F) (F's superdiagonals d, d+1, .. still zero) on those entries."""
    n = t.shape[-1]
    k = _iota(n)
    offset = k[None, :] - k[:, None]
    f0 = jnp.where(offset == 0, f_diag[None, :], jnp.zeros_like(t))

    def step(d, f):
        return jnp.where(offset == d, update(f), f)

    return lax.fori_loop(1, n, step, f0)


def sqrtm_triu(t):
    """The upper triangular square root R (R @ R = t) of a complex upper triangular (n, n) t,
    principal (r_ii = sqrt(t_ii), right half-plane): R_ij = (T - R R)_ij / (r_ii + r_jj)."""
    r_diag = jnp.sqrt(jnp.diagonal(t))
    den = r_diag[:, None] + r_diag[None, :]
    return _by_superdiagonal(t, r_diag, lambda r: (t - r @ r) / den)


def _funm_triu(t, f_diag):
    """(F, min |t_jj - t_ii| over i < j) of the Schur-Parlett recurrence; a zero difference
    leaves the numerator undivided, as SciPy's."""
    d = jnp.diagonal(t)
    den = d[None, :] - d[:, None]
    safe = jnp.where(den == 0, jnp.ones_like(den), den)
    f = _by_superdiagonal(t, f_diag, lambda f: (t @ f - f @ t) / safe)
    n = t.shape[-1]
    k = _iota(n)
    upper = k[:, None] < k[None, :]
    gaps = jnp.where(upper, jnp.abs(den), jnp.full(den.shape, np.inf, jnp.abs(den).dtype))
    return f, jnp.minimum(jnp.min(gaps), jnp.abs(t[0, 0]))


def funm(A, func, disp=True):
    """f(A) for a scalar function f applied through the Schur form (jax.scipy.linalg.funm,
    scipy.linalg.funm).

    A: (n, n) float or complex (ints become float32). func: a function of a Nova array that
    is applied elementwise (it gets the (n,) complex eigenvalues, T's diagonal). A = Z T Z^H is
    the complex Schur form (schur(A, 'complex')) and F = Z f(T) Z^H with f(T) by the
    Schur-Parlett recurrence (Golub & Van Loan, 4th ed., Alg. 9.1.1). Returns F (n, n)
    complex64 (from float32 / complex64) or complex128, as JAX's (SciPy returns a real F for a
    real A when it can: take jnp.real). With disp=False returns (F, err), err SciPy's
    estimate min(1, max(eps, eps / min|t_jj - t_ii| * ||triu(T, 1)||_1)) of the relative
    error, inf where F is not finite. The recurrence divides by t_jj - t_ii: close or repeated
    eigenvalues make it inaccurate (err shows it), as SciPy's. Not differentiable.

    Raises ShapeError (a ValueError) unless A is (n, n), TypeError for a non-numeric dtype.
    """
    x = _square("funm", A, "A")
    if x.ndim != 2:
        raise ShapeError(f"funm: A must be a 2-D square matrix, got shape {x.shape}"
                         f"{where_am_i()}")
    t, z = schur(x, "complex")
    n = t.shape[-1]
    rdt = dtypes.real_dtype(t.dtype)
    if n == 0:
        return t if disp else (t, jnp.zeros((), rdt))
    f_diag = jnp.asarray(func(jnp.diagonal(t))).astype(t.dtype)
    ft, minden = _funm_triu(t, f_diag)
    f = z @ ft @ _c.mH(z)
    if disp:
        return f
    eps = float(np.finfo(np.dtype(rdt)).eps)
    minden = jnp.where(minden == 0, jnp.full_like(minden, eps), minden)
    norm1 = jnp.max(jnp.sum(jnp.abs(jnp.triu(t, 1)), axis=0))
    err = jnp.minimum(1.0, jnp.maximum(eps, eps / minden * norm1)).astype(rdt)
    err = jnp.where(jnp.all(jnp.isfinite(f)), err, jnp.full_like(err, np.inf))
    return f, err
