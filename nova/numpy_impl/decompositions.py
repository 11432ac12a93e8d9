"""Matrix decompositions for nova.numpy.linalg, nova.scipy.linalg and nova.lax.linalg, written as
loops of Nova's own array operations (lax.fori_loop / while_loop over masked, vectorized
updates), so they compile to Nova's generated kernels on every backend; no LAPACK.

Algorithms (each O(n^3) for an n x n matrix):

- Cholesky: the column-by-column (left-looking) Cholesky-Banachiewicz recurrence; a matrix
  that is not positive definite gives NaN, as jax.numpy.linalg.cholesky.
- Triangular solves: row-by-row forward / back substitution.
- LU: Gaussian elimination with partial pivoting (Golub & Van Loan, "Matrix Computations",
  4th ed., Alg. 3.4.1); LAPACK's pivot vector and the row permutation.
- QR: Householder reflections (Golub & Van Loan Alg. 5.2.1), R's diagonal with LAPACK's signs.
- eigh: the cyclic two-sided Jacobi method in Brent & Luk's parallel (round-robin) ordering
  (Brent & Luk 1985, "The solution of singular-value and symmetric eigenvalue problems on
  multiprocessor arrays"): n/2 disjoint rotations per step, applied as one gather and one
  multiply-add on the rows and on the columns; sweeps until the off-diagonal mass is below
  eps * ||A||_F. Jacobi is accurate to high relative precision (Demmel & Veselic 1992).
- SVD: one-sided Jacobi (Hestenes 1958) in the same ordering on the columns, then U from a
  Householder QR of the orthogonalized columns (which also completes U for full_matrices and
  for rank-deficient inputs).

Derivatives are custom VJPs with the standard matrix-calculus rules, not derivatives of the
loops: Cholesky (Murray 2016, "Differentiation of the Cholesky decomposition", eq. 10),
solve and triangular solve (A^-T applied to the cotangent), determinants (Jacobi's formula),
QR (Liao, Liu, Wang & Xiang 2019, "Differentiable programming tensor networks", eq. 6; m >= n),
eigh (Giles 2008, "An extended collection of matrix derivative results", 3.1) and the SVD
(Townsend 2016, "Differentiating the singular value decomposition"). Forward mode transposes
them. Repeated eigenvalues or singular values make the eigenvector / singular vector
derivatives infinite, as in JAX.

Leading dimensions are batch dimensions (nova.vmap over the 2-D routine). Integer inputs become
float32; float16 and bfloat16 compute in float32 and round back. Complex inputs (complex64,
complex128) dispatch to decompositions_complex.py (LU, triangular solves, Cholesky),
decompositions_complex_spectral.py (QR, eigh) and decompositions_complex_svd.py (the SVD and
its functions), with the same names and arguments.
"""

from __future__ import annotations

import functools
import math
from collections import namedtuple

import numpy as np

from nova.core import dtypes
from nova.core.errors import ConcretizationTypeError, ShapeError
from nova.numpy_impl.util import asarray, where_am_i


def _jnp():
    import nova.numpy as jnp

    return jnp


def _lax():
    from nova import lax

    return lax


# --- results, as numpy.linalg's named tuples (pytrees: they pass through jit and vmap) -------

SlogdetResult = namedtuple("SlogdetResult", ["sign", "logabsdet"])
QRResult = namedtuple("QRResult", ["Q", "R"])
EighResult = namedtuple("EighResult", ["eigenvalues", "eigenvectors"])
SVDResult = namedtuple("SVDResult", ["U", "S", "Vh"])

# --- argument handling ----------------------------------------------------------------------


def _as_float(name, a, arg="a"):
    x = asarray(a)
    if x.dtype == dtypes.bool_ or dtypes.is_int(x.dtype):
        x = x.astype(dtypes.default_float)
    if not dtypes.is_float(x.dtype):
        raise TypeError(f"{name}: {arg} must be a real array, got dtype {x.dtype}{where_am_i()}")
    return x


def _dc():
    """The complex algorithms (decompositions_complex.py: LU, triangular, Cholesky), imported
    lazily: that module builds on this one."""
    from nova.numpy_impl import decompositions_complex

    return decompositions_complex


def _complex(*xs):
    """Whether any argument is complex: the public functions then dispatch to _dc()."""
    return _dc().is_complex(*xs)


def _dcs():
    """The complex QR and eigh (decompositions_complex_spectral.py)."""
    from nova.numpy_impl import decompositions_complex_spectral

    return decompositions_complex_spectral


def _dsvd():
    """The complex SVD and its functions (decompositions_complex_svd.py)."""
    from nova.numpy_impl import decompositions_complex_svd

    return decompositions_complex_svd


def _compute_dtype(x):
    return dtypes.float32 if x.dtype in (dtypes.float16, dtypes.bfloat16) else x.dtype


def _matrix(name, a, *, square=True, arg="a"):
    x = _as_float(name, a, arg)
    if x.ndim < 2:
        raise ShapeError(f"{name}: {arg} must have at least 2 dimensions, got shape {x.shape}"
                         f"{where_am_i()}")
    if square and x.shape[-1] != x.shape[-2]:
        raise ShapeError(f"{name}: {arg} must be square in its last two dimensions, got shape "
                         f"{x.shape}{where_am_i()}")
    return x


def _batched(core, *args, n_batch):
    """Applies the 2-D `core` over the first n_batch dimensions of every argument (vmap over one
    flattened batch dimension); returns core's pytree of outputs with the batch restored."""
    import nova
    from nova.core.pytree import tree_map

    jnp = _jnp()
    if n_batch == 0:
        return core(*args)
    batch = args[0].shape[:n_batch]
    size = math.prod(batch)
    flat = [jnp.reshape(x, (size, *x.shape[n_batch:])) for x in args]
    out = nova.vmap(core)(*flat)
    return tree_map(lambda y: jnp.reshape(y, (*batch, *y.shape[1:])), out)


def _eye(n, dtype):
    return _jnp().eye(n, dtype=dtype)


def _iota(n, axis=0, ndim=1):
    jnp = _jnp()
    shape = [1] * ndim
    shape[axis] = n
    return jnp.reshape(jnp.arange(n, dtype=dtypes.int32), shape)


def _mT(x):
    return _jnp().swapaxes(x, -1, -2)


def _row(a, i):
    return _lax().dynamic_index_in_dim(a, i, 0, keepdims=False)


def _col(a, j):
    return _lax().dynamic_index_in_dim(a, j, 1, keepdims=False)


# --- scaling ----------------------------------------------------------------------------------


def _pow2_scale(a, even=False):
    """2^k near max|a| (2^(2k) with even=True, so its square root is exact too): dividing by it
    is exact, and the decompositions' squared norms neither overflow (entries near 1e155 in
    float64, 1e19 in float32) nor underflow. 1 for an all-zero or non-finite a."""
    jnp = _jnp()
    m = jnp.max(jnp.abs(a))
    ok = (m > 0) & jnp.isfinite(m)
    k = jnp.round(jnp.log2(jnp.where(ok, m, jnp.ones_like(m))))
    if even:
        k = 2 * jnp.round(k * 0.5)
    return jnp.exp2(k)


def _cholesky_raw(a):
    sc = _pow2_scale(a, even=True)
    return _cholesky_core(a / sc) * _jnp().sqrt(sc)


def _qr_raw(a):
    sc = _pow2_scale(a)
    q, r = _qr_core(a / sc)
    return q, r * sc


# From this size on eigh / eigvalsh use Householder tridiagonalization, multisection and
# inverse iteration (eigh_tridiagonal.py) in place of Jacobi (measured crossover, float64).
EIGH_TRIDIAGONAL_MIN_N = 48


def _eigh_raw(a, want_vectors=True):
    sc = _pow2_scale(a)
    if a.shape[0] >= EIGH_TRIDIAGONAL_MIN_N:
        from nova.numpy_impl.eigh_tridiagonal import eigh_core

        w, v = eigh_core(a / sc, want_vectors)
    else:
        w, v = _eigh_core(a / sc)
    return w * sc, v


def _svd_tall_raw(a):
    sc = _pow2_scale(a)
    u, s, v = _svd_tall_core(a / sc)
    return u, s * sc, v


# --- triangular solve -----------------------------------------------------------------------


def _tri_solve_raw(a, b, lower, unit_diagonal):
    """x with tri(a) x = b for 2-D a (n, n) and b (n, k): substitution row by row; only the
    triangle of a named by `lower` is read (and its diagonal unless unit_diagonal)."""
    jnp, lax = _jnp(), _lax()
    n = a.shape[0]
    j = _iota(n)
    x0 = jnp.zeros_like(b)

    def step(t, x):
        i = t if lower else n - 1 - t
        row = _row(a, i)
        mask = (j < i) if lower else (j > i)
        r = jnp.where(mask, row, jnp.zeros_like(row))
        xi = _row(b, i) - r @ x
        if not unit_diagonal:
            xi = xi / jnp.sum(jnp.where(j == i, row, jnp.zeros_like(row)))
        return lax.dynamic_update_index_in_dim(x, xi, i, 0)

    return lax.fori_loop(0, n, step, x0)


def _tri_part(a, lower, unit_diagonal):
    jnp = _jnp()
    t = jnp.tril(a) if lower else jnp.triu(a)
    if unit_diagonal:
        n = a.shape[-1]
        t = jnp.where(_iota(n, 0, 2) == _iota(n, 1, 2), jnp.ones_like(t), t)
    return t


@functools.cache
def _tri_solve_fn(lower, unit_diagonal):
    import nova

    @nova.custom_vjp
    def solve(a, b):
        return _tri_solve_raw(a, b, lower, unit_diagonal)

    def fwd(a, b):
        x = _tri_solve_raw(a, b, lower, unit_diagonal)
        return x, (a, x)

    def bwd(res, g):
        a, x = res
        # x = T^-1 b: b_bar = T^-T g; T_bar = -b_bar x^T on T's triangle.
        gb = _tri_solve_raw(_mT(a), g, not lower, unit_diagonal)
        ga = -(gb @ _mT(x))
        ga = _tri_part(ga, lower, False)
        if unit_diagonal:
            n = a.shape[-1]
            ga = _jnp().where(_iota(n, 0, 2) == _iota(n, 1, 2), _jnp().zeros_like(ga), ga)
        return ga, gb

    solve.defvjp(fwd, bwd)
    return solve


def solve_triangular(a, b, trans=0, lower=False, unit_diagonal=False, overwrite_b=False,
                     check_finite=True):
    """x with op(T) x = b, T the lower or upper triangle of `a` (scipy.linalg.solve_triangular).

    a: (..., n, n); b: (..., n) or (..., n, k) (batch dimensions broadcast); float dtypes (ints
    become float32). trans: 0/'N' (T x = b), 1/'T' or 2/'C' (T^T x = b). Only the named
    triangle of a is read; unit_diagonal assumes ones on the diagonal. A zero on the diagonal
    gives inf/NaN. Returns x with b's shape. Raises ShapeError for mismatched shapes.
    """
    if _complex(a, b):
        return _dc().solve_triangular(a, b, trans, lower, unit_diagonal)
    a = _matrix("solve_triangular", a)
    bb = _as_float("solve_triangular", b, "b")
    if trans in (1, 2, "T", "C"):
        a, lower = _mT(a), not lower
    elif trans not in (0, "N"):
        raise ValueError(f"solve_triangular: trans must be 0, 1, 2, 'N', 'T' or 'C', got {trans!r}")
    return _solve_with(
        "solve_triangular", a, bb,
        lambda m, r: _tri_solve_fn(bool(lower), bool(unit_diagonal))(m, r))


def _solve_with(name, a, b, core):
    # b (n,) is one vector, (..., n, k) a batch of right-hand sides (NumPy 2's rule)
    jnp = _jnp()
    n = a.shape[-1]
    dt = jnp.result_type(a.dtype, b.dtype)
    cd = dtypes.float32 if dt in (dtypes.float16, dtypes.bfloat16) else dt
    a, b = a.astype(cd), b.astype(cd)
    vector = b.ndim == 1
    if vector:
        b = b[:, None]
    if b.ndim < 2 or b.shape[-2] != n:
        raise ShapeError(f"{name}: b must have shape (..., {n}) or (..., {n}, k) to match a of "
                         f"shape {a.shape}, got {b.shape}{where_am_i()}")
    batch = jnp.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    a = jnp.broadcast_to(a, (*batch, n, n))
    b = jnp.broadcast_to(b, (*batch, *b.shape[-2:]))
    if n == 0 or b.shape[-1] == 0 or math.prod(batch) == 0:
        x = jnp.zeros(b.shape, cd)  # nothing to solve (NumPy's empty result)
    else:
        x = _batched(core, a, b, n_batch=len(batch))
    if vector:
        x = x[..., 0]
    return x.astype(dt)


# --- Cholesky -------------------------------------------------------------------------------


def _cholesky_core(a):
    jnp, lax = _jnp(), _lax()
    n = a.shape[0]
    i = _iota(n)

    def step(j, L):
        lj = _row(L, j)  # L[j, :j] (the rest still zero)
        s = L @ lj  # s_i = sum_k<j L[i, k] L[j, k]
        aj = _col(a, j)
        d = jnp.sqrt(jnp.sum(jnp.where(i == j, aj - s, jnp.zeros_like(s))))
        col = jnp.where(i > j, (aj - s) / d, jnp.where(i == j, d, jnp.zeros_like(s)))
        return lax.dynamic_update_index_in_dim(L, col, j, 1)

    return lax.fori_loop(0, n, step, jnp.zeros_like(a))


def _phi(x):
    # the lower triangle with half the diagonal
    jnp = _jnp()
    n = x.shape[-1]
    eye = _iota(n, 0, 2) == _iota(n, 1, 2)
    return jnp.where(eye, x * 0.5, jnp.tril(x))


def _make_cholesky():
    import nova

    @nova.custom_vjp
    def chol(a):
        return _cholesky_raw(a)

    def fwd(a):
        L = _cholesky_raw(a)
        return L, L

    def bwd(L, g):
        # Murray 2016, eq. 10: A_bar = L^-T Phi(L^T L_bar) L^-1, symmetrized.
        p = _phi(_mT(L) @ g)
        s = _tri_solve_raw(_mT(L), p, False, False)  # L^-T P
        s = _mT(_tri_solve_raw(_mT(L), _mT(s), False, False))  # (L^-T (L^-T P)^T)^T = S L^-1
        return ((s + _mT(s)) * 0.5,)

    chol.defvjp(fwd, bwd)
    return chol


_cholesky = None


def cholesky(a, *, upper=False, symmetrize_input=True):
    """The Cholesky factor L (lower triangular, A = L L^T) of a symmetric positive-definite
    matrix (numpy.linalg.cholesky; `upper=True` returns L^T).

    a: (..., n, n) float (ints become float32); only its lower triangle is read after
    symmetrizing as (A + A^T) / 2 (jax.numpy's symmetrize_input). A matrix that is not
    positive definite gives NaN entries (JAX's behaviour; NumPy raises LinAlgError). Raises
    ShapeError for a non-square input. Differentiable (Murray 2016).
    """
    global _cholesky
    if _complex(a):
        return _dc().cholesky(a, upper=upper, symmetrize_input=symmetrize_input)
    jnp = _jnp()
    x = _matrix("cholesky", a)
    dt = x.dtype
    x = x.astype(_compute_dtype(x))
    if symmetrize_input:
        x = (x + _mT(x)) * 0.5
    elif x.shape[-1]:
        # the matrix is the lower triangle's symmetric completion, so the derivative lands on
        # the entries read (the lower triangle) and not on the ignored ones
        x = _symmetric_from_triangle(x, True)
    if x.shape[-1] == 0:
        return jnp.zeros_like(x).astype(dt)
    if _cholesky is None:
        _cholesky = _make_cholesky()
    L = _batched(_cholesky, x, n_batch=x.ndim - 2)
    return (_mT(L) if upper else L).astype(dt)


# --- LU -------------------------------------------------------------------------------------


def _lu_raw(a):
    """(lu, pivots, perm) of a 2-D (m, n) a with partial pivoting: a[perm] = L U, L unit lower
    (below lu's diagonal), U upper (on and above it); pivots as LAPACK's getrf (row k was
    swapped with pivots[k])."""
    jnp, lax = _jnp(), _lax()
    m, n = a.shape
    k_steps = min(m, n)
    i = _iota(m)
    jj = _iota(n)

    def step(k, c):
        lu, piv, perm = c
        colk = _col(lu, k)
        cand = jnp.where(i >= k, jnp.abs(colk), jnp.full_like(colk, -1))
        p = jnp.argmax(cand).astype(dtypes.int32)
        swap = jnp.where(i == k, p, jnp.where(i == p, k, i))
        lu = lu[swap]
        perm = perm[swap]
        piv = lax.dynamic_update_index_in_dim(piv, p[None], k, 0)
        rowk = _row(lu, k)
        pivot = jnp.sum(jnp.where(jj == k, rowk, jnp.zeros_like(rowk)))
        colk = _col(lu, k)
        safe = jnp.where(pivot == 0, jnp.ones_like(pivot), pivot)
        l = jnp.where((i > k) & (pivot != 0), colk / safe, jnp.zeros_like(colk))
        u = jnp.where(jj > k, rowk, jnp.zeros_like(rowk))
        lu = lu - l[:, None] * u[None, :]
        lu = jnp.where((i[:, None] > k) & (jj[None, :] == k), l[:, None], lu)
        return lu, piv, perm

    init = (a, jnp.zeros((k_steps,), dtypes.int32), jnp.arange(m, dtype=dtypes.int32))
    return lax.fori_loop(0, k_steps, step, init)


def _lu_solve_raw(lu, perm, b):
    x = _tri_solve_raw(lu, b[perm], True, True)
    return _tri_solve_raw(lu, x, False, False)


def _lu_solve_t_raw(lu, perm, g):
    # A^T z = g with P A = L U: U^T w = g, L^T v = w, z = P^T v.
    jnp = _jnp()
    w = _tri_solve_raw(_mT(lu), g, True, False)
    v = _tri_solve_raw(_mT(lu), w, False, True)
    return jnp.zeros_like(v).at[perm].set(v)


def _make_solve():
    import nova

    @nova.custom_vjp
    def solve(a, b):
        lu, _, perm = _lu_raw(a)
        return _lu_solve_raw(lu, perm, b)

    def fwd(a, b):
        lu, _, perm = _lu_raw(a)
        x = _lu_solve_raw(lu, perm, b)
        return x, (lu, perm, x)

    def bwd(res, g):
        lu, perm, x = res
        gb = _lu_solve_t_raw(lu, perm, g)
        return -(gb @ _mT(x)), gb

    solve.defvjp(fwd, bwd)
    return solve


_solve = None


def solve(a, b):
    """x with a @ x = b (numpy.linalg.solve), by LU with partial pivoting.

    a: (..., n, n); b: (n,) (one vector) or (..., n, k) (batch dimensions broadcast, NumPy 2's
    rule); floats (ints become float32). A singular a gives inf/NaN (NumPy raises
    LinAlgError). Differentiable in a and b. Raises ShapeError for mismatched shapes.
    """
    global _solve
    if _complex(a, b):
        return _dc().solve(a, b)
    if _solve is None:
        _solve = _make_solve()
    a = _matrix("solve", a)
    return _solve_with("solve", a, _as_float("solve", b, "b"), _solve)


def inv(a):
    """The inverse of a square matrix (numpy.linalg.inv): solve(a, I).

    a: (..., n, n) float (ints become float32); a singular matrix gives inf/NaN. Raises
    ShapeError for a non-square input. Differentiable (-A^-T A_bar A^-T).
    """
    if _complex(a):
        return _dc().inv(a)
    jnp = _jnp()
    x = _matrix("inv", a)
    n = x.shape[-1]
    eye = jnp.broadcast_to(_eye(n, x.dtype), x.shape)
    return solve(x, eye)


def _slogdet_raw(a):
    jnp = _jnp()
    lu, piv, _ = _lu_raw(a)
    d = jnp.diagonal(lu)
    n = a.shape[0]
    swaps = jnp.sum((piv != jnp.arange(n, dtype=dtypes.int32)).astype(dtypes.int32))
    parity = jnp.where(swaps % 2 == 1, -jnp.ones((), a.dtype), jnp.ones((), a.dtype))
    sign = parity * jnp.prod(jnp.sign(d))
    logabs = jnp.sum(jnp.log(jnp.abs(d)))
    return sign, logabs, lu, piv


def _make_slogdet():
    import nova

    @nova.custom_vjp
    def slogdet(a):
        s, l, _, _ = _slogdet_raw(a)
        return s, l

    def fwd(a):
        s, l, _, _ = _slogdet_raw(a)
        return (s, l), a

    def bwd(a, g):
        _, gl = g
        # d log|det A| = tr(A^-1 dA): A_bar = g A^-T (Jacobi's formula); the sign is constant.
        return (gl * _mT(_inv2(a)),)

    slogdet.defvjp(fwd, bwd)
    return slogdet


def _inv2(a):
    lu, _, perm = _lu_raw(a)
    return _lu_solve_raw(lu, perm, _eye(a.shape[0], a.dtype))


_slogdet = None


def slogdet(a):
    """(sign, logabsdet) of the determinant (numpy.linalg.slogdet: det = sign * exp(logabsdet)),
    from the LU factorization's diagonal and the pivots' parity.

    a: (..., n, n) float; returns two (...) arrays of a's float dtype; a singular matrix gives
    (0, -inf). Differentiable: logabsdet's gradient is A^-T (inf/NaN at singular matrices).
    Raises ShapeError for a non-square input.
    """
    global _slogdet
    if _complex(a):
        return _dc().slogdet(a)
    if _slogdet is None:
        _slogdet = _make_slogdet()
    x = _matrix("slogdet", a)
    dt = x.dtype
    x = x.astype(_compute_dtype(x))
    if x.shape[-1] == 0 or x.size == 0:  # the empty product: det 1 (NumPy's)
        ones = _jnp().ones(x.shape[:-2], dt)
        return SlogdetResult(ones, _jnp().zeros(x.shape[:-2], dt))
    s, l = _batched(_slogdet, x, n_batch=x.ndim - 2)
    return SlogdetResult(s.astype(dt), l.astype(dt))


def det(a):
    """The determinant (numpy.linalg.det), sign * exp(logabsdet) of slogdet.

    a: (..., n, n) float; returns (...) of a's float dtype. Differentiable (det * A^-T;
    NaN at exactly singular matrices). Raises ShapeError for a non-square input.
    """
    jnp = _jnp()
    s, l = slogdet(a)
    return s * jnp.exp(l)


def lu_factor(a):
    """(lu, piv) of scipy.linalg.lu_factor: L (unit, below the diagonal) and U packed in one
    (..., n, n) array, and LAPACK's int32 pivot indices (row i was swapped with piv[i]).
    Partial pivoting (Golub & Van Loan Alg. 3.4.1). Not differentiable (use solve / det)."""
    if _complex(a):
        return _dc().lu_factor(a)
    x = _matrix("lu_factor", a)
    lu, piv, _ = _batched(_lu_raw, x, n_batch=x.ndim - 2)
    return lu, piv


def lu(a, permute_l=False):
    """(P, L, U) with a = P @ L @ U (scipy.linalg.lu) for a (..., m, n) matrix: L (m, k) unit
    lower, U (k, n) upper, k = min(m, n); `permute_l=True` returns (P @ L, U). Not
    differentiable."""
    if _complex(a):
        return _dc().lu(a, permute_l)
    jnp = _jnp()
    x = _matrix("lu", a, square=False)
    m, n = x.shape[-2:]
    k = min(m, n)
    packed, _, perm = _batched(_lu_raw, x, n_batch=x.ndim - 2)
    L = jnp.tril(packed[..., :, :k], -1) + jnp.eye(m, k, dtype=x.dtype)
    U = jnp.triu(packed[..., :k, :])
    P = (perm[..., :, None] == jnp.arange(m)).astype(x.dtype)  # rows of P^T are e_perm
    P = _mT(P)
    return (P @ L, U) if permute_l else (P, L, U)


def _perm_from_pivots(piv, m):
    """The row permutation of LAPACK's pivots (row i swapped with piv[i], in order), traced:
    one dynamic swap per pivot."""
    jnp, lax = _jnp(), _lax()

    def step(i, perm):
        p = piv[i]
        a, b = perm[i], perm[p]
        return perm.at[i].set(b).at[p].set(a)

    return lax.fori_loop(0, piv.shape[0], step, jnp.arange(m, dtype=dtypes.int32))


def lu_solve(lu_and_piv, b, trans=0):
    """x with a x = b (trans 0) or a^T x = b (trans 1 or 2) from lu_factor's (lu, piv)
    (scipy.linalg.lu_solve). lu: (..., n, n), piv: (..., n) int, b: (..., n) or (..., n, k)
    (batches as lu's). Works under jit and vmap (the pivots are applied as traced swaps).
    Differentiable in b; not in lu. Raises ShapeError for mismatched shapes."""
    if _complex(lu_and_piv[0], b):
        return _dc().lu_solve(lu_and_piv, b, trans)
    jnp = _jnp()
    lu_, piv = lu_and_piv
    lu_ = _matrix("lu_solve", lu_)
    piv = jnp.asarray(piv).astype(dtypes.int32)
    n = lu_.shape[-1]
    if piv.shape != lu_.shape[:-1]:
        raise ShapeError(f"lu_solve: piv must have shape {lu_.shape[:-1]} to match lu of shape "
                         f"{lu_.shape}, got {piv.shape}{where_am_i()}")
    if trans not in (0, 1, 2, "N", "T", "C"):
        raise ValueError(f"lu_solve: trans must be 0, 1 or 2, got {trans!r}{where_am_i()}")
    transposed = trans not in (0, "N")
    bb = _as_float("lu_solve", b, "b")
    vec = bb.ndim == lu_.ndim - 1
    if vec:
        bb = bb[..., None]
    if bb.shape[-2] != n:
        raise ShapeError(f"lu_solve: b must have {n} rows to match lu of shape {lu_.shape}, got "
                         f"shape {bb.shape}{where_am_i()}")

    def core(m, p, r):
        perm = _perm_from_pivots(p, n)
        return _lu_solve_t_raw(m, perm, r) if transposed else _lu_solve_raw(m, perm, r)

    x = _batched(core, lu_, piv, bb, n_batch=lu_.ndim - 2)
    return x[..., 0] if vec else x


def _symmetric_from_triangle(a, lower):
    """The symmetric matrix whose lower (or upper) triangle is a's."""
    if _complex(a):
        return _dc().symmetric_from_triangle(a, lower)
    jnp = _jnp()
    x = _matrix("symmetric", a)
    t = jnp.tril(x) if lower else jnp.triu(x)
    n = x.shape[-1]
    eye = _iota(n, 0, 2) == _iota(n, 1, 2)
    return t + _mT(t) - jnp.where(eye, x, jnp.zeros_like(x))


def _cholesky_from_triangle(a, lower):
    """SciPy's Cholesky: L from a's lower triangle, or U = L^T from its upper one."""
    if _complex(a):
        return _dc().cholesky_from_triangle(a, lower)
    x = _matrix("cholesky", a)
    if lower:
        return cholesky(x, symmetrize_input=False)
    return _mT(cholesky(_mT(x), symmetrize_input=False))


def cho_factor(a, lower=False, overwrite_a=False, check_finite=True):
    """(c, lower) of scipy.linalg.cho_factor: the Cholesky factor (upper unless lower=True,
    from that triangle of a) for cho_solve."""
    return _cholesky_from_triangle(a, lower), lower


def cho_solve(c_and_lower, b, overwrite_b=False, check_finite=True):
    """x with A x = b from cho_factor's (c, lower) (scipy.linalg.cho_solve): two triangular
    solves. Differentiable in c and b."""
    c, lower = c_and_lower
    if _complex(c, b):
        return _dc().cho_solve(c_and_lower, b)
    L = c if lower else _mT(asarray(c))
    y = solve_triangular(L, b, lower=True)
    return solve_triangular(L, y, lower=True, trans=1)


# --- QR -------------------------------------------------------------------------------------


def _qr_core(a):
    """(Q (m, m), R (m, n)) of a 2-D a by Householder reflections."""
    jnp, lax = _jnp(), _lax()
    m, n = a.shape
    i = _iota(m)

    def step(j, c):
        q, r = c
        x = jnp.where(i >= j, _col(r, j), jnp.zeros((m,), r.dtype))
        alpha = jnp.sum(jnp.where(i == j, x, jnp.zeros_like(x)))
        norm = jnp.sqrt(jnp.sum(x * x))
        s = jnp.where(alpha < 0, -jnp.ones_like(alpha), jnp.ones_like(alpha))
        v = x + jnp.where(i == j, s * norm, jnp.zeros_like(x))
        vv = jnp.sum(v * v)
        beta = jnp.where(vv > 0, 2 / jnp.where(vv > 0, vv, jnp.ones_like(vv)), jnp.zeros_like(vv))
        r = r - beta * v[:, None] * (v @ r)[None, :]
        q = q - beta * (q @ v)[:, None] * v[None, :]
        return q, r

    q, r = lax.fori_loop(0, min(m - 1, n) if m > 1 else 0, step, (_eye(m, a.dtype), a))
    return q, jnp.triu(r)


def _copyltu(m):
    jnp = _jnp()
    return jnp.tril(m) + _mT(jnp.tril(m, -1))


def _make_qr():
    import nova

    @nova.custom_vjp
    def qr_reduced(a):
        q, r = _qr_raw(a)
        n = a.shape[1]
        return q[:, :n], r[:n, :]

    def fwd(a):
        out = qr_reduced(a)
        return out, out

    def bwd(res, g):
        q, r = res
        gq, gr = g
        # Liao et al. 2019, eq. 6 (m >= n, full rank): A_bar = (Q_bar + Q copyltu(M)) R^-T,
        # M = R R_bar^T - Q_bar^T Q.
        m = r @ _mT(gr) - _mT(gq) @ q
        b = gq + q @ _copyltu(m)
        # X R^T = B  <=>  R X^T = B^T: an upper triangular solve
        return (_mT(_tri_solve_raw(r, _mT(b), False, False)),)

    qr_reduced.defvjp(fwd, bwd)
    return qr_reduced


_qr_reduced = None


def qr(a, mode="reduced"):
    """The QR decomposition a = Q R (numpy.linalg.qr) by Householder reflections.

    a: (..., m, n) float (ints become float32), k = min(m, n). mode "reduced": Q (..., m, k),
    R (..., k, n); "complete": Q (..., m, m), R (..., m, n); "r": R alone. R's diagonal has
    LAPACK's signs. Differentiable: mode "reduced" with m >= n by Liao et al. 2019 (a
    rank-deficient a gives inf/NaN), the other modes through the Householder loop itself.
    Raises ValueError for an unknown mode, ShapeError for fewer than 2 dimensions.
    """
    global _qr_reduced
    if _complex(a):
        return _dcs().qr(a, mode)
    if mode not in ("reduced", "complete", "r", "raw"):
        raise ValueError(f"qr: mode must be 'reduced', 'complete' or 'r', got {mode!r}"
                         f"{where_am_i()}")
    if mode == "raw":
        raise NotImplementedError(f"qr: mode 'raw' (LAPACK's packed reflectors) is not "
                                  f"supported{where_am_i()}")
    x = _matrix("qr", a, square=False)
    dt = x.dtype
    x = x.astype(_compute_dtype(x))
    m, n = x.shape[-2:]
    if x.size == 0:  # Q is (a slice of) the identity, R empty or zero
        jnp = _jnp()
        k = m if mode == "complete" else min(m, n)
        q = jnp.broadcast_to(_eye(m, x.dtype)[:, :k], (*x.shape[:-2], m, k))
        r = jnp.zeros((*x.shape[:-2], k, n), x.dtype)
    elif mode == "reduced" and m >= n:
        if _qr_reduced is None:
            _qr_reduced = _make_qr()
        q, r = _batched(_qr_reduced, x, n_batch=x.ndim - 2)
    else:
        q, r = _batched(_qr_raw, x, n_batch=x.ndim - 2)
        if mode != "complete":
            k = min(m, n)
            q, r = q[..., :, :k], r[..., :k, :]
    if mode == "r":
        return r.astype(dt)
    return QRResult(q.astype(dt), r.astype(dt))


# --- Jacobi: eigh and svd -------------------------------------------------------------------


@functools.cache
def _round_robin(n):
    """Brent & Luk's round-robin schedule for an even n: (rounds, n) tables of each index's
    partner and whether it is the pair's first member ("p"); every pair meets once in n - 1
    rounds."""
    players = list(range(n))
    partner = np.zeros((n - 1, n), np.int32)
    first = np.zeros((n - 1, n), bool)
    for r in range(n - 1):
        for k in range(n // 2):
            p, q = players[k], players[n - 1 - k]
            p, q = min(p, q), max(p, q)
            partner[r, p], partner[r, q] = q, p
            first[r, p] = True
        players = [players[0], players[-1], *players[1:-1]]
    return partner, first


def _rotation(x, y, z):
    """(c, s) of the Jacobi rotation annihilating the off-diagonal z of [[x, z], [z, y]]
    (Golub & Van Loan Alg. 8.5.1, sym.schur2): t = sign(tau) / (|tau| + sqrt(1 + tau^2))."""
    jnp = _jnp()
    nz = z != 0
    zs = jnp.where(nz, z, jnp.ones_like(z))
    tau = (y - x) / (2 * zs)
    big = jnp.abs(tau) > 1e150 if x.dtype == dtypes.float64 else jnp.abs(tau) > 1e18
    taus = jnp.where(big, jnp.ones_like(tau), tau)
    sign = jnp.where(taus >= 0, 1.0, -1.0).astype(x.dtype)
    t = sign / (jnp.abs(taus) + jnp.sqrt(1 + taus * taus))
    t = jnp.where(big, 1 / (2 * tau), t)  # t ~ 1 / (2 tau) once tau^2 would overflow
    t = jnp.where(nz, t, jnp.zeros_like(t))
    c = 1 / jnp.sqrt(1 + t * t)
    return c, t * c


def _max_sweeps(dtype):
    return 20 if dtype == dtypes.float64 else 12


def _eigh_core(a):
    """(w ascending, V) with a V = V diag(w) for a symmetric 2-D a: parallel cyclic Jacobi."""
    jnp, lax = _jnp(), _lax()
    n0 = a.shape[0]
    n = n0 + (n0 % 2)
    if n != n0:  # a decoupled zero row and column: its rotations are all the identity
        a = jnp.pad(a, ((0, 1), (0, 1)))
    partner_np, first_np = _round_robin(n)
    partner, first = jnp.asarray(partner_np), jnp.asarray(first_np)
    idx = jnp.arange(n, dtype=dtypes.int32)
    eps = float(np.finfo(np.dtype(a.dtype)).eps)
    fro2 = jnp.sum(a * a)

    upper = _iota(n, 0, 2) < _iota(n, 1, 2)

    def off2(x):
        # the squares above the diagonal, summed directly (||x||^2 - ||diag||^2 cancels to
        # rounding noise). The rotations are computed from these entries, which go to zero
        # quadratically; the ones below drift from them by rounding and stall near eps ||A||.
        return jnp.sum(jnp.where(upper, x * x, jnp.zeros_like(x)))

    def rotations(r, x):
        # (c, s-with-sign, partner) of every index for round r: p' = c p - s q, q' = s p + c q
        part = _row(partner, r)
        isp = _row(first, r)
        diag = jnp.diagonal(x)
        dp = diag[part]
        # a_pq from the first member's side for both (x drifts from symmetry by rounding, and
        # the two members of a pair must apply one rotation, or V stops being orthogonal)
        z = jnp.where(isp, x[idx, part], x[part, idx])
        app = jnp.where(isp, diag, dp)
        aqq = jnp.where(isp, dp, diag)
        cc, ss = _rotation(app, aqq, z)
        return cc, jnp.where(isp, -ss, ss), part

    def apply(x, v, cc, sgn, part):
        x = cc[:, None] * x + sgn[:, None] * x[part, :]
        x = x * cc[None, :] + x[:, part] * sgn[None, :]
        v = v * cc[None, :] + v[:, part] * sgn[None, :]
        return x, v

    # One flat loop over rounds, the convergence test read at the end of each sweep of n - 1
    # rounds. Each iteration applies the rotations the previous one computed and computes the
    # next round's: carried, they are stored once, where computed inside the iteration that
    # applies them the fused kernel would recompute them at every element it writes.
    rounds = n - 1
    tol = (eps * eps) * fro2
    limit = _max_sweeps(a.dtype) * rounds

    def cond(c):
        x, _, r, _, _, _ = c
        mid_sweep = (r % rounds) != 0
        return (mid_sweep | (off2(x) > tol)) & (r < limit)

    def body(c):
        x, v, r, cc, sgn, part = c
        x, v = apply(x, v, cc, sgn, part)
        r = r + 1
        return (x, v, r, *rotations(r % rounds, x))

    zero = jnp.zeros((), dtypes.int32)
    init = (a, _eye(n, a.dtype), zero, *rotations(zero, a))
    x, v, _, _, _, _ = lax.while_loop(cond, body, init)
    w = jnp.diagonal(x)[:n0]
    v = v[:n0, :n0]
    order = jnp.argsort(w)
    return w[order], v[:, order]


def _make_eigh():
    import nova

    @nova.custom_vjp
    def eigh2(a):
        return _eigh_raw(a)

    def fwd(a):
        w, v = _eigh_raw(a)
        return (w, v), (w, v)

    def bwd(res, g):
        jnp = _jnp()
        w, v = res
        gw, gv = g
        # Giles 2008, 3.1: A_bar = V (diag(w_bar) + F o (V^T V_bar)) V^T, F_ij = 1/(w_j - w_i).
        diff = w[None, :] - w[:, None]
        n = w.shape[0]
        eye = _iota(n, 0, 2) == _iota(n, 1, 2)
        f = jnp.where(eye, jnp.zeros_like(diff), 1 / jnp.where(eye, jnp.ones_like(diff), diff))
        inner = f * (_mT(v) @ gv) + jnp.where(eye, gw[None, :], jnp.zeros_like(diff))
        ga = v @ inner @ _mT(v)
        return ((ga + _mT(ga)) * 0.5,)

    eigh2.defvjp(fwd, bwd)
    return eigh2


_eigh = None


def _eigh_input(a, UPLO, symmetrize_input, name="eigh"):
    """(the symmetric matrix eigh reads, in its compute dtype; the result dtype)."""
    jnp = _jnp()
    if UPLO not in (None, "L", "U"):
        raise ValueError(f"{name}: UPLO must be 'L' or 'U', got {UPLO!r}{where_am_i()}")
    x = _matrix(name, a)
    dt = x.dtype
    x = x.astype(_compute_dtype(x))
    if symmetrize_input:
        return (x + _mT(x)) * 0.5, dt
    t = jnp.tril(x) if UPLO in (None, "L") else jnp.triu(x)
    eye = _iota(x.shape[-1], 0, 2) == _iota(x.shape[-1], 1, 2)
    return t + _mT(t) - jnp.where(eye, x, jnp.zeros_like(x)), dt


def eigh(a, UPLO=None, symmetrize_input=True):
    """Eigenvalues (ascending) and orthonormal eigenvectors of a symmetric matrix
    (numpy.linalg.eigh): a @ v[..., :, i] = w[..., i] * v[..., :, i].

    a: (..., n, n) float (ints become float32). UPLO 'L' (default) or 'U' names the triangle
    read when symmetrize_input=False; with symmetrize_input=True (jax.numpy's default) a is
    replaced by (a + a^T) / 2. Returns (w (..., n), v (..., n, n)) as an EighResult.
    Parallel cyclic Jacobi below n = EIGH_TRIDIAGONAL_MIN_N, from there Householder
    tridiagonalization, multisection and inverse iteration (eigh_tridiagonal.py); eigenvector
    signs may differ from LAPACK's.
    Differentiable (Giles 2008; infinite for repeated eigenvalues). Raises ShapeError for a
    non-square input, ValueError for a bad UPLO.
    """
    global _eigh
    if _complex(a):
        return _dcs().eigh(a, UPLO, symmetrize_input)
    jnp = _jnp()
    x, dt = _eigh_input(a, UPLO, symmetrize_input)
    if x.shape[-1] == 0:
        return EighResult(jnp.zeros(x.shape[:-1], dt), jnp.zeros(x.shape, dt))
    if _eigh is None:
        _eigh = _make_eigh()
    w, v = _batched(_eigh, x, n_batch=x.ndim - 2)
    return EighResult(w.astype(dt), v.astype(dt))


@functools.cache
def _eigvalsh_fn():
    import nova

    @nova.custom_vjp
    def eigvalsh2(a):
        return _eigh_raw(a, False)[0]  # no eigenvectors unless differentiated

    def fwd(a):
        w, v = _eigh_raw(a)
        return w, v

    def bwd(v, gw):
        return ((v * gw[None, :]) @ _mT(v),)  # Giles 2008, 3.1 with V_bar = 0

    eigvalsh2.defvjp(fwd, bwd)
    return eigvalsh2


def eigvalsh(a, UPLO="L", *, symmetrize_input=True):
    """The eigenvalues (ascending) of a symmetric matrix (numpy.linalg.eigvalsh): eigh's w;
    from n = EIGH_TRIDIAGONAL_MIN_N on without computing the eigenvectors (unless
    differentiated). Arguments, dtypes and errors as eigh's."""
    if _complex(a):
        return _dcs().eigvalsh(a, UPLO, symmetrize_input=symmetrize_input)
    if _matrix("eigvalsh", a).shape[-1] < EIGH_TRIDIAGONAL_MIN_N:
        return eigh(a, UPLO, symmetrize_input)[0]
    x, dt = _eigh_input(a, UPLO, symmetrize_input, "eigvalsh")
    return _batched(_eigvalsh_fn(), x, n_batch=x.ndim - 2).astype(dt)


def _svd_tall_core(a):
    """(U (m, m), s (n,) descending, V (n, n)) of a 2-D a with m >= n: one-sided Jacobi on the
    columns, then U from a Householder QR of a V."""
    jnp, lax = _jnp(), _lax()
    m, n0 = a.shape
    n = n0 + (n0 % 2)
    if n != n0:
        a = jnp.pad(a, ((0, 0), (0, 1)))
    partner_np, first_np = _round_robin(n) if n > 1 else (np.zeros((1, n), np.int32),
                                                           np.ones((1, n), bool))
    partner, first = jnp.asarray(partner_np), jnp.asarray(first_np)
    eps = float(np.finfo(np.dtype(a.dtype)).eps)
    rounds = max(n - 1, 1)

    def rotations(r, g):
        # round r's (c, signed s, partner) per column and the largest |cos| between the pairs
        part = _row(partner, r)
        isp = _row(first, r)
        norms = jnp.sum(g * g, axis=0)
        gamma = jnp.sum(g * g[:, part], axis=0)
        gamma = jnp.where(isp, gamma, gamma[part])  # one rotation per pair (see _eigh_raw)
        alpha = jnp.where(isp, norms, norms[part])
        beta = jnp.where(isp, norms[part], norms)
        # the rotation diagonalizing the pair's Gram matrix [[alpha, gamma], [gamma, beta]]
        cc, ss = _rotation(alpha, beta, gamma)
        scale = jnp.sqrt(alpha * beta)
        rel = jnp.where(scale > 0, jnp.abs(gamma) / jnp.where(scale > 0, scale, 1.0),
                        jnp.zeros_like(gamma))
        return cc, jnp.where(isp, -ss, ss), part, jnp.max(rel)

    # As _eigh_raw: one flat loop, each iteration applying the carried rotations and computing
    # the next round's; `worst` is the largest pair cosine met in the current sweep.
    limit = _max_sweeps(a.dtype) * rounds
    tol = eps * m

    def cond(c):
        r, worst = c[2], c[3]
        return (((r % rounds) != 0) | (worst > tol)) & (r < limit)

    def body(c):
        g, v, r, worst, cc, sgn, part, rel = c
        g = g * cc[None, :] + g[:, part] * sgn[None, :]
        v = v * cc[None, :] + v[:, part] * sgn[None, :]
        worst = jnp.maximum(jnp.where(r % rounds == 0, jnp.zeros_like(worst), worst), rel)
        r = r + 1
        return (g, v, r, worst, *rotations(r % rounds, g))

    zero = jnp.zeros((), dtypes.int32)
    init = (a, _eye(n, a.dtype), zero, jnp.full((), np.inf, a.dtype), *rotations(zero, a))
    g, v = lax.while_loop(cond, body, init)[:2]
    g, v = g[:, :n0], v[:n0, :n0]
    s = jnp.sqrt(jnp.sum(g * g, axis=0))
    order = jnp.argsort(-s)
    s, g, v = s[order], g[:, order], v[:, order]
    q, r = _qr_raw(g)
    d = jnp.diagonal(r)
    sign = jnp.where(d < 0, -jnp.ones_like(d), jnp.ones_like(d))
    u = jnp.concatenate([q[:, :n0] * sign[None, :], q[:, n0:]], axis=1)
    return u, s, v


def _svd_raw(a):
    m, n = a.shape
    if m >= n:
        return _svd_tall_raw(a)
    v, s, u = _svd_tall_raw(_mT(a))
    return u, s, v


def _make_svd():
    import nova

    @nova.custom_vjp
    def svd_reduced(a):
        u, s, v = _svd_raw(a)
        k = s.shape[0]
        return u[:, :k], s, _mT(v[:, :k])

    def fwd(a):
        out = svd_reduced(a)
        return out, (out, a)

    def bwd(res, g):
        jnp = _jnp()
        (u, s, vt), a = res
        gu, gs, gvt = g
        v, gv = _mT(vt), _mT(gvt)
        m, n = a.shape
        k = s.shape[0]
        # Townsend 2016: A_bar = U [(F o (U^T U_bar - U_bar^T U)) S + diag(s_bar)
        #   + S (F o (V^T V_bar - V_bar^T V))] V^T + (I - U U^T) U_bar S^-1 V^T
        #   + U S^-1 V_bar^T (I - V V^T),   F_ij = 1 / (s_j^2 - s_i^2), i != j.
        eye = _iota(k, 0, 2) == _iota(k, 1, 2)
        s2 = s * s
        diff = s2[None, :] - s2[:, None]
        f = jnp.where(eye, jnp.zeros_like(diff), 1 / jnp.where(eye, jnp.ones_like(diff), diff))
        utgu = _mT(u) @ gu
        vtgv = _mT(v) @ gv
        inner = (f * (utgu - _mT(utgu))) * s[None, :] + s[:, None] * (f * (vtgv - _mT(vtgv)))
        inner = inner + jnp.where(eye, gs[None, :], jnp.zeros_like(diff))
        ga = u @ inner @ vt
        sinv = 1 / s
        if m > k:
            ga = ga + (gu - u @ utgu) * sinv[None, :] @ vt
        if n > k:
            ga = ga + (u * sinv[None, :]) @ (gvt - _mT(vtgv) @ vt)
        return (ga,)

    svd_reduced.defvjp(fwd, bwd)
    return svd_reduced


_svd_reduced = None


def svd(a, full_matrices=True, compute_uv=True, hermitian=False):
    """The singular value decomposition a = U diag(S) Vh (numpy.linalg.svd).

    a: (..., m, n) float (ints become float32), k = min(m, n). Returns (U (..., m, m),
    S (..., k) descending, Vh (..., n, n)) as an SVDResult, U (..., m, k) and Vh (..., k, n)
    with full_matrices=False, or S alone with compute_uv=False. One-sided Jacobi (module
    docstring); singular vector signs may differ from LAPACK's. `hermitian` is accepted and
    ignored (the general algorithm is used). Differentiable with full_matrices=False or
    compute_uv=False (Townsend 2016; repeated singular values make the vectors' derivative
    infinite); differentiating the full matrices raises NotImplementedError, as JAX's.
    Raises ShapeError for fewer than 2 dimensions.
    """
    global _svd_reduced
    if _complex(a):
        return _dsvd().svd(a, full_matrices, compute_uv)
    jnp = _jnp()
    x = _matrix("svd", a, square=False)
    dt = x.dtype
    x = x.astype(_compute_dtype(x))
    m, n = x.shape[-2:]
    k = min(m, n)
    if k == 0:
        s = jnp.zeros((*x.shape[:-2], 0), dt)
        if not compute_uv:
            return s
        um = m if full_matrices else 0
        vn = n if full_matrices else 0
        return SVDResult(jnp.broadcast_to(_eye(m, dt)[:, :um], (*x.shape[:-2], m, um)), s,
                          jnp.broadcast_to(_eye(n, dt)[:vn], (*x.shape[:-2], vn, n)))
    if _svd_reduced is None:
        _svd_reduced = _make_svd()
    if not compute_uv or not full_matrices:
        u, s, vt = _batched(_svd_reduced, x, n_batch=x.ndim - 2)
        if not compute_uv:
            return s.astype(dt)
        return SVDResult(u.astype(dt), s.astype(dt), vt.astype(dt))
    u, s, v = _batched(_svd_full_nodiff(), x, n_batch=x.ndim - 2)
    return SVDResult(u.astype(dt), s.astype(dt), _mT(v).astype(dt))


@functools.cache
def _svd_full_nodiff(raw=None):
    """The full-matrices SVD `raw` (default: the real one) under a custom_vjp whose backward
    raises (shared with decompositions_complex_svd.py)."""
    import nova

    raw = raw or _svd_raw

    @nova.custom_vjp
    def full(a):
        return raw(a)

    def fwd(a):
        return raw(a), None

    def bwd(res, g):
        raise NotImplementedError(
            "svd: derivatives of the full matrices (full_matrices=True) are not defined (the "
            "completion of U or V is arbitrary); use full_matrices=False, as with jax.numpy")

    full.defvjp(fwd, bwd)
    return full


def svdvals(x, /):
    """The singular values, descending (numpy.linalg.svdvals): svd(x, compute_uv=False)."""
    return svd(x, compute_uv=False)


# --- functions of the decompositions --------------------------------------------------------


def _rcond_default(m, n, dtype):
    return max(m, n) * float(np.finfo(np.dtype(dtype)).eps)


def pinv(a, rtol=None, hermitian=False, *, rcond=None):
    """The Moore-Penrose pseudo-inverse (numpy.linalg.pinv) from the reduced SVD: singular
    values at most rtol * max(S) are treated as zero (default max(m, n) * eps, NumPy 2's).

    a: (..., m, n) float; returns (..., n, m). `rcond` is NumPy's older name for rtol.
    Differentiable through the SVD.
    """
    if _complex(a):
        return _dsvd().pinv(a, rtol, rcond=rcond)
    jnp = _jnp()
    x = _matrix("pinv", a, square=False)
    m, n = x.shape[-2:]
    tol = rcond if rcond is not None else rtol
    if tol is None:
        tol = _rcond_default(m, n, x.dtype)
    if min(m, n) == 0:
        return jnp.zeros((*x.shape[:-2], n, m), x.dtype)
    u, s, vt = svd(x, full_matrices=False)
    cut = jnp.asarray(tol, x.dtype)[..., None] * jnp.max(s, axis=-1, keepdims=True)
    big = s > cut
    sinv = jnp.where(big, 1 / jnp.where(big, s, jnp.ones_like(s)), jnp.zeros_like(s))
    return _mT(vt) @ (sinv[..., :, None] * _mT(u))


def lstsq(a, b, rcond=None):
    """(x, residuals, rank, s) minimizing ||b - a x||_2 (numpy.linalg.lstsq), from the SVD.

    a: (m, n); b: (m,) or (m, k). x: (n,) or (n, k); residuals: the squared residual norms
    ((k,) or (1,) for a vector b) when rank == n < m, else an empty array (NumPy's rule;
    under jit always computed); rank: the number of singular values above rcond * max(S)
    (default eps * max(m, n)); s: the singular values. Differentiable in x.
    """
    if _complex(a, b):
        return _dsvd().lstsq(a, b, rcond)
    jnp = _jnp()
    x = _matrix("lstsq", a, square=False)
    bb = _as_float("lstsq", b, "b")
    if x.ndim != 2:
        raise ShapeError(f"lstsq: a must be 2-D, got shape {x.shape}{where_am_i()}")
    m, n = x.shape
    vec = bb.ndim == 1
    if bb.ndim not in (1, 2) or bb.shape[0] != m:
        raise ShapeError(f"lstsq: b must have shape ({m},) or ({m}, k) to match a of shape "
                         f"{x.shape}, got {bb.shape}{where_am_i()}")
    if rcond is None:
        rcond = _rcond_default(m, n, x.dtype)
    bm = bb[:, None] if vec else bb
    if min(m, n) == 0:
        sol = jnp.zeros((n, bm.shape[1]), x.dtype)
        s = jnp.zeros((0,), x.dtype)
        rank = jnp.zeros((), dtypes.int32)
    else:
        u, s, vt = svd(x, full_matrices=False)
        big = s > rcond * jnp.max(s)
        rank = jnp.sum(big.astype(dtypes.int32))
        sinv = jnp.where(big, 1 / jnp.where(big, s, jnp.ones_like(s)), jnp.zeros_like(s))
        sol = _mT(vt) @ (sinv[:, None] * (_mT(u) @ bm))
    resid_all = jnp.sum((bm - x @ sol) ** 2, axis=0)
    try:
        full_rank = int(rank) == n and m > n
        resid = resid_all if full_rank else jnp.zeros((0,), x.dtype)
    except ConcretizationTypeError:  # a traced rank (under jit): always the residuals
        resid = resid_all
    return (sol[:, 0] if vec else sol), resid, rank, s


def matrix_rank(M, rtol=None, *, tol=None):
    """The number of singular values above the tolerance (numpy.linalg.matrix_rank): `tol`
    absolute, or rtol * max(S) (default max(m, n) * eps). 1-D inputs: 1 unless all zero."""
    if _complex(M):
        return _dsvd().matrix_rank(M, rtol, tol=tol)
    jnp = _jnp()
    x = _as_float("matrix_rank", M, "M")
    if x.ndim < 2:
        return jnp.any(x != 0).astype(dtypes.int32)
    if min(x.shape[-2:]) == 0:
        return jnp.zeros(x.shape[:-2], dtypes.int32)
    s = svdvals(x)
    m, n = x.shape[-2:]
    if tol is None:
        r = _rcond_default(m, n, x.dtype) if rtol is None else rtol
        cut = jnp.asarray(r, x.dtype)[..., None] * jnp.max(s, axis=-1, keepdims=True)
    else:
        cut = jnp.asarray(tol, x.dtype)[..., None]
    return jnp.sum((s > cut).astype(dtypes.int32), axis=-1)


def cond(x, p=None):
    """The condition number (numpy.linalg.cond): for p None / 2 / -2 the ratio of the largest
    to the smallest singular value (or its inverse); other p (1, -1, inf, -inf, 'fro', 'nuc')
    norm(x, p) * norm(inv(x), p). Singular matrices give inf."""
    if _complex(x):
        return _dsvd().cond(x, p)
    a = _matrix("cond", x, square=p not in (None, 2, -2))
    if p in (None, 2, -2):
        s = svdvals(a)
        r = s[..., 0] / s[..., -1]
        return 1 / r if p == -2 else r
    from nova.numpy_impl.norms import norm

    return norm(a, p, axis=(-2, -1)) * norm(inv(a), p, axis=(-2, -1))


def matrix_power(a, n):
    """a raised to the integer power n (numpy.linalg.matrix_power) by repeated squaring;
    n = 0 gives the identity and n < 0 powers of inv(a). a: (..., m, m); ints stay ints for
    n >= 0. Raises TypeError for a non-integer n, ShapeError for a non-square a."""
    import operator

    jnp = _jnp()
    try:
        n = operator.index(n)
    except TypeError:
        raise TypeError(f"matrix_power: exponent must be an integer, got {type(n).__name__}"
                        f"{where_am_i()}") from None
    x = asarray(a)
    if x.ndim < 2 or x.shape[-1] != x.shape[-2]:
        raise ShapeError(f"matrix_power: a must be square in its last two dimensions, got "
                         f"shape {x.shape}{where_am_i()}")
    if n == 0:
        return jnp.broadcast_to(jnp.eye(x.shape[-1], dtype=x.dtype), x.shape)
    if n < 0:
        x, n = inv(x), -n
    result = None
    while n:
        if n & 1:
            result = x if result is None else result @ x
        n >>= 1
        if n:
            x = x @ x
    return result


def multi_dot(arrays, *, precision=None):
    """The product of a sequence of matrices in the cheapest order (numpy.linalg.multi_dot):
    the first may be 1-D (a row vector) and the last 1-D (a column vector); the order comes
    from the classic O(n^3) dynamic program over the shapes (Cormen et al., 15.2)."""
    jnp = _jnp()
    arrs = [asarray(x) for x in arrays]
    if len(arrs) < 2:
        raise ValueError(f"multi_dot: expected at least two arrays, got {len(arrs)}{where_am_i()}")
    first_vec, last_vec = arrs[0].ndim == 1, arrs[-1].ndim == 1
    if first_vec:
        arrs[0] = arrs[0][None, :]
    if last_vec:
        arrs[-1] = arrs[-1][:, None]
    for i, x in enumerate(arrs):
        if x.ndim != 2:
            raise ShapeError(f"multi_dot: array {i} must be 2-D, got shape {x.shape}{where_am_i()}")
    dims = [arrs[0].shape[0]] + [x.shape[1] for x in arrs]
    k = len(arrs)
    cost = [[0] * k for _ in range(k)]
    split = [[0] * k for _ in range(k)]
    for length in range(1, k):
        for i in range(k - length):
            j = i + length
            cost[i][j] = math.inf
            for s in range(i, j):
                c = cost[i][s] + cost[s + 1][j] + dims[i] * dims[s + 1] * dims[j + 1]
                if c < cost[i][j]:
                    cost[i][j], split[i][j] = c, s

    def product(i, j):
        if i == j:
            return arrs[i]
        s = split[i][j]
        return jnp.matmul(product(i, s), product(s + 1, j))

    out = product(0, k - 1)
    if first_vec:
        out = out[0]
    if last_vec:
        out = out[..., 0]
    return out


def tensorsolve(a, b, axes=None):
    """x with tensordot(a, x, x.ndim) = b (numpy.linalg.tensorsolve): a reshaped to a square
    matrix of b.size rows; `axes` moves those axes of a to the end first."""
    if _complex(a, b):
        return _dc().tensorsolve(a, b, axes)
    jnp = _jnp()
    x = _as_float("tensorsolve", a)
    bb = _as_float("tensorsolve", b, "b")
    if axes is not None:
        axes = [ax % x.ndim for ax in axes]
        rest = [ax for ax in range(x.ndim) if ax not in axes]
        x = jnp.transpose(x, rest + axes)
    out_shape = x.shape[bb.ndim:]
    rows = math.prod(bb.shape)
    cols = math.prod(out_shape)
    if rows != cols:
        raise ShapeError(f"tensorsolve: a's shape {x.shape} does not give a square matrix for "
                         f"b of shape {bb.shape}{where_am_i()}")
    sol = solve(jnp.reshape(x, (rows, cols)), jnp.reshape(bb, (rows,)))
    return jnp.reshape(sol, out_shape)


def tensorinv(a, ind=2):
    """The inverse of a with respect to tensordot over `ind` axes (numpy.linalg.tensorinv):
    the result has shape a.shape[ind:] + a.shape[:ind]."""
    if _complex(a):
        return _dc().tensorinv(a, ind)
    jnp = _jnp()
    x = _as_float("tensorinv", a)
    if ind <= 0:
        raise ValueError(f"tensorinv: ind must be a positive integer, got {ind}{where_am_i()}")
    rows = math.prod(x.shape[:ind])
    cols = math.prod(x.shape[ind:])
    if rows != cols:
        raise ShapeError(f"tensorinv: a's shape {x.shape} is not square over {ind} axes"
                         f"{where_am_i()}")
    return jnp.reshape(inv(jnp.reshape(x, (rows, cols))), (*x.shape[ind:], *x.shape[:ind]))


def eig(a):
    """Eigenvalues and right eigenvectors of a general real matrix (numpy.linalg.eig); see
    nova/numpy_impl/eig_general.py (Hessenberg reduction, Francis double-shift QR, back
    substitution on the Schur form)."""
    from nova.numpy_impl.eig_general import eig as general

    return general(a)


def eigvals(a):
    """The eigenvalues of a general real matrix (numpy.linalg.eigvals), complex; see
    nova/numpy_impl/eig_general.py."""
    from nova.numpy_impl.eig_general import eigvals as general

    return general(a)


LINALG = ["cholesky", "cond", "det", "eig", "eigh", "eigvals", "eigvalsh", "inv", "lstsq",
          "matrix_power", "matrix_rank", "multi_dot", "pinv", "qr", "slogdet", "solve", "svd",
          "svdvals", "tensorinv", "tensorsolve"]
SCIPY_LINALG = ["cho_factor", "cho_solve", "cholesky", "det", "eigh", "inv", "lu", "lu_factor",
                "lu_solve", "pinv", "qr", "solve", "solve_triangular", "svd"]
