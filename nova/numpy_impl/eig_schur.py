"""The real Schur form of a general real matrix for eig / eigvals (eig_general.py): Householder
reduction to upper Hessenberg form, then Francis' implicit double-shift QR iteration with
deflation, as loops of Nova's own array operations (no LAPACK).

Sources: Golub & Van Loan, "Matrix Computations", 4th ed.: Alg. 7.4.2 (Householder Hessenberg
reduction), Alg. 7.5.1 (the Francis QR step) and Alg. 7.5.2 (the QR iteration with
deflation); the ad hoc "exceptional" shift after 10 and 20 steps without a deflation and the
deflation test |h[i, i-1]| <= eps (|h[i-1, i-1]| + |h[i, i]|) are LAPACK's (dlahqr).

The iteration is one flat `while_loop`, one Householder reflector per iteration: an iteration
at the start of a step (`j == 0`) zeroes the negligible subdiagonal entries, finds the active
unreduced block [l, hi] and either deflates a 1x1 or 2x2 block at its bottom (a reflector with
beta = 0) or applies the step's first reflector from the double shift; the iterations after
it chase the bulge down the block (reflector j at rows l + j .. l + j + 2). Each reflector
touches three rows and three columns through dynamic slices, so an iteration costs O(n). The
matrix carries one zero row and column of padding so that every reflector is 3x3 (the last
one of a step is 2x2: its third component is zero).
"""

from __future__ import annotations

import numpy as np

from nova.core import dtypes

# Francis steps allowed per eigenvalue (LAPACK's dlahqr allows 30 per eigenvalue as well).
MAX_STEPS_PER_EIGENVALUE = 30


def _jnp():
    import nova.numpy as jnp

    return jnp


def _lax():
    from nova import lax

    return lax


def _iota(n):
    return _jnp().arange(n, dtype=dtypes.int32)


def _pick(x, i):
    """x[i] for a 1-D x and a traced int scalar i (a masked sum: one fused reduction)."""
    jnp = _jnp()
    return jnp.sum(jnp.where(_iota(x.shape[0]) == i, x, jnp.zeros_like(x)))


def hessenberg(a, want_q):
    """(H, Q) with H = Q^T a Q upper Hessenberg for a 2-D (n, n) float a (Golub & Van Loan
    Alg. 7.4.2); Q is None unless want_q."""
    jnp, lax = _jnp(), _lax()
    n = a.shape[0]
    i = _iota(n)
    zero = jnp.zeros((n,), a.dtype)

    def step(k, c):
        h, q = c
        x = jnp.where(i > k, lax.dynamic_index_in_dim(h, k, 1, keepdims=False), zero)
        alpha = _pick(x, k + 1)
        norm = jnp.sqrt(jnp.sum(x * x))
        sign = jnp.where(alpha < 0, -jnp.ones_like(alpha), jnp.ones_like(alpha))
        v = x + jnp.where(i == k + 1, sign * norm, zero)
        vv = jnp.sum(v * v)
        beta = jnp.where(vv > 0, 2 / jnp.where(vv > 0, vv, jnp.ones_like(vv)), jnp.zeros_like(vv))
        h = h - (beta * v)[:, None] * (v @ h)[None, :]
        h = h - (h @ v)[:, None] * (beta * v)[None, :]
        if q is not None:
            q = q - (q @ v)[:, None] * (beta * v)[None, :]
        return h, q

    q0 = jnp.eye(n, dtype=a.dtype) if want_q else None
    h, q = lax.fori_loop(0, max(n - 2, 0), step, (a, q0))
    return jnp.triu(h, -1), q


def _house3(x, y, z):
    """(v (3,), beta) of the reflector I - beta v v^T mapping (x, y, z) to a multiple of e_1;
    the vector is scaled by its largest entry first (the reflector does not change)."""
    jnp = _jnp()
    s = jnp.maximum(jnp.maximum(jnp.abs(x), jnp.abs(y)), jnp.abs(z))
    ok = s > 0
    s = jnp.where(ok, s, jnp.ones_like(s))
    x, y, z = x / s, y / s, z / s
    norm = jnp.sqrt(x * x + y * y + z * z)
    v0 = x + jnp.where(x < 0, -norm, norm)
    v = jnp.stack([v0, y, z])
    vv = jnp.sum(v * v)
    beta = jnp.where(ok & (vv > 0), 2 / jnp.where(vv > 0, vv, jnp.ones_like(vv)),
                     jnp.zeros_like(vv))
    return v, beta


def _reflect(h, z, r, v, beta):
    """h with the reflector applied from both sides at rows / columns r..r+2; z (or None)
    multiplied on the right."""
    lax = _lax()
    npad = h.shape[0]
    bv = beta * v
    rows = lax.dynamic_slice(h, (r, 0), (3, npad))
    h = lax.dynamic_update_slice(h, rows - bv[:, None] * (v @ rows)[None, :], (r, 0))
    cols = lax.dynamic_slice(h, (0, r), (npad, 3))
    h = lax.dynamic_update_slice(h, cols - (cols @ v)[:, None] * bv[None, :], (0, r))
    if z is not None:
        zc = lax.dynamic_slice(z, (0, r), (z.shape[0], 3))
        z = lax.dynamic_update_slice(z, zc - (zc @ v)[:, None] * bv[None, :], (0, r))
    return h, z


def schur(h, z=None):
    """(T, Z, converged) for a 2-D (n, n) upper Hessenberg h, n >= 2: T = Z^T h Z quasi upper
    triangular (1x1 and 2x2 diagonal blocks; every subdiagonal entry outside a 2x2 block is
    exactly zero), z (n, n) multiplied on the right by the transforms (None: not computed),
    converged a bool scalar (False if some block needed more than MAX_STEPS_PER_EIGENVALUE
    Francis steps per eigenvalue). Golub & Van Loan Alg. 7.5.2."""
    jnp, lax = _jnp(), _lax()
    n = h.shape[0]
    npad = n + 1
    dt = h.dtype
    eps = float(np.finfo(np.dtype(dt)).eps)
    tiny = float(np.finfo(np.dtype(dt)).tiny)
    h = jnp.pad(h, ((0, 1), (0, 1)))
    if z is not None:
        z = jnp.pad(z, ((0, 1), (0, 1)))
    i = _iota(npad)
    sub_mask = (i[:, None] == i[None, :] + 1) & (i[:, None] < n)
    int0 = jnp.zeros((), dtypes.int32)

    def entry(x, r, c):
        return lax.dynamic_slice(x, (r, c), (1, 1))[0, 0]

    def deflated(x):
        # the matrix with negligible subdiagonal entries set to zero, and its subdiagonal
        d = jnp.abs(jnp.diagonal(x))
        s = jnp.concatenate([jnp.zeros((1,), dt), jnp.diagonal(x, -1)])  # s[i] = x[i, i-1]
        tst = jnp.concatenate([jnp.zeros((1,), dt), d[:-1]]) + d
        nb = jnp.abs(jnp.concatenate([jnp.zeros((1,), dt), s[:-1]])) + \
            jnp.abs(jnp.concatenate([s[1:], jnp.zeros((1,), dt)]))
        tst = jnp.where(tst == 0, nb, tst)
        small = (jnp.abs(s) <= eps * tst) | (jnp.abs(s) < tiny)
        small_sub = small[:, None] & sub_mask
        return jnp.where(small_sub, jnp.zeros_like(x), x), jnp.where(small, jnp.zeros_like(s), s)

    def cond(c):
        hi, steps = c[2], c[5]
        return (hi >= 0) & (steps < MAX_STEPS_PER_EIGENVALUE * n)

    def body(c):
        x, zz, hi, lo, j, steps, its = c
        start = j == 0
        # --- at a step's start: deflation test and the active block [l, hi]
        xd, s = deflated(x)
        x = jnp.where(start, xd, x)
        boundary = ((i == 0) | (s == 0)) & (i <= hi)
        l_new = jnp.max(jnp.where(boundary, i, jnp.zeros_like(i)))
        lo = jnp.where(start, l_new, lo)
        size = hi - lo + 1
        deflate = start & (size <= 2)
        # --- the double shift (the trailing 2x2 block's trace and determinant)
        hm1 = jnp.maximum(hi - 1, 0)
        a11, a12 = entry(x, hm1, hm1), entry(x, hm1, hi)
        a21, a22 = entry(x, hi, hm1), entry(x, hi, hi)
        exc = (its > 0) & (its % 10 == 0)  # an ad hoc shift to break a cycle (dlahqr)
        se = jnp.abs(a21) + jnp.abs(entry(x, hm1, jnp.maximum(hi - 2, 0)))
        e11 = 0.75 * se + a22
        tr = jnp.where(exc, 2 * e11, a11 + a22)
        det = jnp.where(exc, e11 * e11 + 0.4375 * se * se, a11 * a22 - a12 * a21)
        h00, h01 = entry(x, lo, lo), entry(x, lo, lo + 1)
        h10, h11, h21 = entry(x, lo + 1, lo), entry(x, lo + 1, lo + 1), entry(x, lo + 2, lo + 1)
        fx = h00 * h00 + h01 * h10 - tr * h00 + det
        fy = h10 * (h00 + h11 - tr)
        fz = h10 * h21
        # --- in a chase: the bulge below reflector j's column
        r = jnp.where(start, lo, lo + j)
        col = lax.dynamic_slice(x, (r, jnp.maximum(r - 1, 0)), (3, 1))[:, 0]
        cz = jnp.where(r + 2 <= hi, col[2], jnp.zeros_like(col[2]))
        v, beta = _house3(jnp.where(start, fx, col[0]), jnp.where(start, fy, col[1]),
                          jnp.where(start, fz, cz))
        beta = jnp.where(deflate, jnp.zeros_like(beta), beta)
        x, zz = _reflect(x, zz, r, v, beta)
        # the annihilated bulge entries are exactly zero
        kill = (~start) & (i[None, :] == r - 1) & (i[:, None] > r) & (i[:, None] <= r + 2)
        x = jnp.where(kill, jnp.zeros_like(x), x)
        # --- the next state
        last = (~deflate) & (j == size - 2)
        j = jnp.where(deflate | last, int0, j + 1)
        hi = jnp.where(deflate, hi - size, hi)
        steps = steps + jnp.where(start & ~deflate, 1, 0).astype(dtypes.int32)
        its = jnp.where(deflate, int0, its + jnp.where(start, 1, 0).astype(dtypes.int32))
        return x, zz, hi, lo, j, steps, its

    init = (h, z, jnp.full((), n - 1, dtypes.int32), int0, int0, int0, int0)
    x, zz, hi, _, _, _, _ = lax.while_loop(cond, body, init)
    t = x[:n, :n]
    return t, (None if zz is None else zz[:n, :n]), hi < 0


def block_eigenvalues(t):
    """(re, im, top, bottom) for a quasi upper triangular t (n, n) as schur returns: the real
    and imaginary parts of the eigenvalues in t's diagonal order (a 2x2 block's pair with the
    positive imaginary part first; a 2x2 block with real eigenvalues gives the larger first)
    and whether position i is the top / bottom row of a 2x2 block."""
    jnp = _jnp()
    dt = t.dtype
    d = jnp.diagonal(t)
    z1 = jnp.zeros((1,), dt)
    s = jnp.concatenate([z1, jnp.diagonal(t, -1)])  # s[i] = t[i, i-1]
    bottom = s != 0
    top = jnp.concatenate([bottom[1:], jnp.zeros((1,), bool)])
    # every block's entries at its top row i: [[a, b], [c, dd]]
    a = d
    dd = jnp.concatenate([d[1:], z1])
    b = jnp.concatenate([jnp.diagonal(t, 1), z1])
    c = jnp.concatenate([s[1:], z1])
    p = 0.5 * (a - dd)
    mid = 0.5 * (a + dd)
    # the discriminant p^2 + b c, scaled to keep its squares in range
    sc = jnp.maximum(jnp.abs(p), jnp.sqrt(jnp.abs(b)) * jnp.sqrt(jnp.abs(c)))
    sc = jnp.where(sc > 0, sc, jnp.ones_like(sc))
    disc = (p / sc) * (p / sc) + (b / sc) * (c / sc)
    root = sc * jnp.sqrt(jnp.abs(disc))
    cplx = disc < 0
    # real pair: mid +- root with the larger |.| one computed directly and the other from the
    # product (a dd - b c) / first (no cancellation)
    sgn = jnp.where(mid < 0, -jnp.ones_like(mid), jnp.ones_like(mid))
    big = mid + sgn * root
    prod = a * dd - b * c
    small = jnp.where(big != 0, prod / jnp.where(big != 0, big, jnp.ones_like(big)),
                      jnp.zeros_like(big))
    hi_r, lo_r = jnp.maximum(big, small), jnp.minimum(big, small)
    first_re = jnp.where(cplx, mid, hi_r)
    second_re = jnp.where(cplx, mid, lo_r)
    first_im = jnp.where(cplx, root, jnp.zeros_like(root))

    def prev(x):  # the row above's value
        return jnp.concatenate([z1, x[:-1]])

    re = jnp.where(top, first_re, jnp.where(bottom, prev(second_re), d))
    im = jnp.where(top, first_im, jnp.where(bottom, -prev(first_im), jnp.zeros_like(d)))
    return re, im, top, bottom
