"""The dense symmetric eigensolver for larger matrices (eigh / eigvalsh above a crossover),
written as loops of Nova's own array operations, so it compiles to generated kernels.

Three stages (Golub & Van Loan, "Matrix Computations", 4th ed., ch. 8):

1. Householder tridiagonalization A = Q T Q^T (GvL Alg. 8.3.1): n - 2 steps, each a matvec
   and the symmetric rank-2 update A -= v w^T + w v^T; Q is accumulated alongside.
2. The eigenvalues of T by multisection with Sturm counts (GvL 8.4.1; the guarded pivot
   recurrence of LAPACK's dlaebz): every eigenvalue's bracket is cut at K points at once, and
   one `scan` over T's rows computes the counts for all n * K points, so a round gains
   log2(K + 1) bits for every eigenvalue.
3. The eigenvectors of T by inverse iteration (GvL 8.2.2), vectorized over the eigenvalues:
   two solves with the LDL^T factorization of T - lambda I (the same guarded recurrence),
   from pseudo-random starts, each followed by a Householder QR of the vectors (orthogonal
   iteration, GvL 8.2.4), which orthogonalizes the vectors of clustered or repeated
   eigenvalues (those inverse iteration leaves arbitrary within their invariant subspace)
   and changes the others only by rounding.
   Finally V = Q Z.
"""

from __future__ import annotations

import numpy as np

from nova.core import dtypes


def _jnp():
    import nova.numpy as jnp

    return jnp


def _lax():
    from nova import lax

    return lax


def _iota(n):
    return _jnp().arange(n, dtype=dtypes.int32)


def _pick(x, mask):
    """The one entry of vector x where mask holds (a masked sum: no gather)."""
    jnp = _jnp()
    return jnp.sum(jnp.where(mask, x, jnp.zeros_like(x)))


def _reflector(x, k, i):
    """(v, beta) of the Householder reflection I - beta v v^T that zeroes column k of x
    below its subdiagonal (GvL Alg. 5.1.1; v_i = 0 for i <= k, beta = 0 for a zero column)."""
    jnp, lax = _jnp(), _lax()
    col = lax.dynamic_index_in_dim(x, k, 1, keepdims=False)
    zero = jnp.zeros_like(col)
    u = jnp.where(i > k, col, zero)
    norm = jnp.sqrt(jnp.sum(u * u))
    head = _pick(u, i == k + 1)
    alpha = jnp.where(head < 0, norm, -norm)  # -sign(head) ||u||: no cancellation in v
    v = u - jnp.where(i == k + 1, alpha, zero)
    vv = jnp.sum(v * v)
    beta = jnp.where(vv > 0, 2 / jnp.where(vv > 0, vv, jnp.ones_like(vv)), jnp.zeros_like(vv))
    return v, beta


def tridiagonalize(a, want_q=True):
    """(d (n,), e (n - 1,), Q (n, n) or None) with a = Q T Q^T, T = tridiag(e, d, e), for a
    symmetric 2-D a (n >= 2): Householder reflections (GvL Alg. 8.3.1)."""
    jnp, lax = _jnp(), _lax()
    n = a.shape[0]
    i = _iota(n)

    # Each step applies the reflector the previous step computed (carried, it is stored once:
    # computed in the step that applies it, the fused rank-2 update would recompute v and w at
    # every element it writes) and computes the next one from the updated column.
    def step(k, c):
        x, q, v, beta = c
        p = beta * (x @ v)
        w = p - (0.5 * beta * jnp.sum(v * p)) * v
        x = x - v[:, None] * w[None, :] - w[:, None] * v[None, :]
        if q is not None:
            q = q - (beta * (q @ v))[:, None] * v[None, :]
        return (x, q, *_reflector(x, k + 1, i))

    q0 = jnp.eye(n, dtype=a.dtype) if want_q else None
    x, q, _, _ = lax.fori_loop(0, n - 2, step, (a, q0, *_reflector(a, 0, i)))
    d = jnp.diagonal(x)
    e = (jnp.diagonal(x, 1) + jnp.diagonal(x, -1)) * 0.5
    return d, e, q


def _pivmin(e):
    # LAPACK's dlarra/dstebz guard: pivots below this are replaced, so no division overflows
    jnp = _jnp()
    tiny = float(np.finfo(np.dtype(e.dtype)).tiny)
    e2max = jnp.max(e * e) if e.shape[0] else jnp.zeros((), e.dtype)
    return tiny * jnp.maximum(e2max, jnp.ones_like(e2max))


def _sturm_counts(d, e, x, pivmin):
    """The number of eigenvalues of tridiag(e, d, e) below each entry of x (any shape): the
    negative pivots of the LDL^T factorization of T - x I, one scan over T's rows."""
    jnp, lax = _jnp(), _lax()
    e2 = jnp.concatenate([jnp.zeros((1,), e.dtype), e * e])

    def row(c, de):
        q, cnt = c
        di, e2i = de
        q = (di - x) - e2i / q
        q = jnp.where(jnp.abs(q) < pivmin, -pivmin, q)
        return (q, cnt + (q < 0).astype(dtypes.int32)), None

    init = (jnp.ones_like(x), jnp.zeros(x.shape, dtypes.int32))
    (_, cnt), _ = lax.scan(row, init, (d, e2))
    return cnt


def _rounds(dtype, k):
    bits = np.finfo(np.dtype(dtype)).nmant + 4  # down to a few ulps of ||T||
    return -(-bits // int(np.log2(k + 1)))


def _points(n):
    # cuts per bracket and round: 2^b - 1 with n * k <= 4096 lanes (a scan step's cost is
    # mostly fixed below that), at least 3
    b = max(2, int(np.log2(4096 // n + 1)))
    return 2**b - 1


def tridiagonal_eigvals(d, e, k=None):
    """The eigenvalues (ascending, (n,)) of the symmetric tridiagonal with diagonal d (n,)
    and off-diagonal e (n - 1,): multisection of every eigenvalue's Gershgorin bracket at k
    points per round (default from n), each round one Sturm-count scan; absolute accuracy a
    few eps * ||T||."""
    jnp, lax = _jnp(), _lax()
    n = d.shape[0]
    k = _points(n) if k is None else k
    ae = jnp.abs(e)
    zero1 = jnp.zeros((1,), d.dtype)
    r = jnp.concatenate([zero1, ae]) + jnp.concatenate([ae, zero1])
    lo, hi = jnp.min(d - r), jnp.max(d + r)
    eps = float(np.finfo(np.dtype(d.dtype)).eps)
    tnorm = jnp.maximum(jnp.abs(lo), jnp.abs(hi))
    pivmin = _pivmin(e)
    pad = 2 * n * eps * tnorm + 4 * pivmin
    lo, hi = lo - pad, hi + pad
    j = _iota(n)[:, None]
    frac = (jnp.arange(1, k + 1, dtype=dtypes.int32).astype(d.dtype) / (k + 1))[None, :]

    def round_(_, c):
        # invariant: count(lower_j) <= j < count(upper_j)
        lower, upper = c
        x = lower[:, None] + (upper - lower)[:, None] * frac
        cnt = _sturm_counts(d, e, x, pivmin)
        below = cnt <= j
        big = jnp.full_like(x, np.inf)
        lower = jnp.maximum(lower, jnp.max(jnp.where(below, x, -big), axis=1))
        upper = jnp.minimum(upper, jnp.min(jnp.where(below, big, x), axis=1))
        return lower, upper

    init = (jnp.full((n,), lo, d.dtype), jnp.full((n,), hi, d.dtype))
    lower, upper = lax.fori_loop(0, _rounds(d.dtype, k), round_, init)
    return (lower + upper) * 0.5


def _starts(n, dtype):
    # deterministic pseudo-random starts (a fixed, well-mixed pattern: no RNG state needed)
    jnp = _jnp()
    i = jnp.arange(n, dtype=dtype)
    return jnp.sin(i[:, None] * 12.9898 + i[None, :] * 78.233 + 0.5) * 43758.5453 % 1.0 - 0.5


def tridiagonal_eigvecs(d, e, w, iters=2):
    """Orthonormal eigenvectors Z (n, n) (column j for w[j]) of tridiag(e, d, e), for its
    ascending eigenvalues w: `iters` rounds of inverse iteration vectorized over the
    eigenvalues, each followed by a Householder QR, which orthogonalizes clustered and
    repeated eigenvalues' vectors."""
    from nova.numpy_impl.decompositions import _qr_core

    jnp, lax = _jnp(), _lax()
    n = d.shape[0]
    pivmin = _pivmin(e)
    eps = float(np.finfo(np.dtype(d.dtype)).eps)
    tnorm = jnp.max(jnp.abs(d)) + 2 * jnp.max(jnp.abs(e))
    # pivots are kept at least eps ||T|| away from zero: T - w_j I is then as singular as the
    # arithmetic can resolve, and the solve amplifies w_j's eigenvector by ~1 / eps
    small = jnp.maximum(eps * tnorm, pivmin)
    ez = jnp.concatenate([jnp.zeros((1,), e.dtype), e])

    def factor(q, de):
        di, ei = de
        q = (di - w) - ei * ei / q
        q = jnp.where(jnp.abs(q) < small, jnp.where(q < 0, -small, small), q)
        return q, q

    _, piv = lax.scan(factor, jnp.ones_like(w), (d, ez))  # piv[i, j]: pivot i of T - w_j I
    lmul = ez[1:, None] / piv[:-1]  # L's subdiagonal, (n - 1, n)
    lz = jnp.concatenate([jnp.zeros((1, n), d.dtype), lmul])
    en = jnp.concatenate([e, jnp.zeros((1,), e.dtype)])

    def solve(b):
        def fwd(y, lb):
            li, bi = lb
            y = bi - li * y
            return y, y

        _, y = lax.scan(fwd, jnp.zeros_like(w), (lz, b))

        def back(x, ydp):
            yi, pi, ei = ydp
            x = (yi - ei * x) / pi
            return x, x

        _, x = lax.scan(back, jnp.zeros_like(w), (y, piv, en), reverse=True)
        return x / jnp.max(jnp.abs(x), axis=0, keepdims=True)

    # Orthogonal iteration (GvL 8.2.4) with the shifts w: orthonormalizing after each solve
    # keeps a cluster's vectors independent. Without it the solves skew them all toward the
    # cluster's most singular direction, and the final QR would then amplify the other
    # eigenvalues' remnants in them (residuals ~1e4 eps for 64 repeated eigenvalues).
    z = _starts(n, d.dtype)
    for _ in range(iters):
        z, _ = _qr_core(solve(z))
    return z


def eigh_core(a, want_vectors=True):
    """(w ascending (n,), V (n, n) or None) with a V = V diag(w), for a symmetric 2-D a
    (n >= 3) scaled to max |a_ij| ~ 1: the three stages of the module docstring."""
    d, e, q = tridiagonalize(a, want_vectors)
    w = tridiagonal_eigvals(d, e)
    if not want_vectors:
        return w, None
    return w, q @ tridiagonal_eigvecs(d, e, w)
