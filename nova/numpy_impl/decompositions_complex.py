"""Complex (complex64 / complex128) inputs of nova.numpy.linalg and nova.scipy.linalg: the
LU-based solvers (solve, inv, slogdet, lu, lu_factor, lu_solve, tensorsolve, tensorinv),
triangular solves and the Cholesky factorization of Hermitian positive-definite matrices.
decompositions.py dispatches here when an argument is complex; QR, eigh and the SVD of complex
matrices are in decompositions_complex_spectral.py.

The algorithms are the real ones of decompositions.py with conjugate transposes where the
real ones transpose: LU with partial pivoting on LAPACK's |Re z| + |Im z| (izamax), so the
pivots are LAPACK's; Cholesky A = L L^H (Golub & Van Loan, "Matrix Computations", 4th ed.,
Alg. 4.2.2 with conjugates), whose diagonal is real.

Derivatives follow JAX's convention (nova/numpy_impl/complexfuncs.py): the VJP is the
transpose, without conjugation, of the JVP. For the holomorphic maps (solve, inv, det,
triangular solves) that is the real rule unchanged (x = A^-1 b: b_bar = A^-T g,
A_bar = -b_bar x^T). For a non-holomorphic map the rule below is the adjoint in the inner
product Re tr(X^H Y) with the cotangent and the result conjugated: slogdet (A_bar =
(g_logabsdet + i Im(g_sign sign)) A^-T) and Cholesky (Murray 2016, "Differentiation of the
Cholesky decomposition", eq. 10 with conjugate transposes, projected on Hermitian matrices).
"""

from __future__ import annotations

import functools
import math

from nova.core import dtypes
from nova.core.errors import ShapeError
from nova.numpy_impl import decompositions as _d
from nova.numpy_impl.complexfuncs import iscomplexobj
from nova.numpy_impl.util import asarray, where_am_i

_jnp, _lax, _mT, _iota, _row, _col = _d._jnp, _d._lax, _d._mT, _d._iota, _d._row, _d._col


def is_complex(*xs) -> bool:
    """Whether any of xs (Nova arrays, NumPy values, Python values) has a complex dtype."""
    return any(iscomplexobj(x) for x in xs)


def mH(x):
    """The conjugate transpose of the last two dimensions."""
    return _jnp().conj(_mT(x))


def as_inexact(name, a, arg="a"):
    """a as a float or complex array (ints and bools become float32); TypeError otherwise."""
    x = asarray(a)
    if x.dtype == dtypes.bool_ or dtypes.is_int(x.dtype):
        x = x.astype(dtypes.default_float)
    if not (dtypes.is_float(x.dtype) or dtypes.is_complex(x.dtype)):
        raise TypeError(f"{name}: {arg} must be a float or complex array, got dtype {x.dtype}"
                        f"{where_am_i()}")
    return x


def complex_dtype(*xs):
    """The complex dtype of the promoted xs (complex64 for float32 / float16 / bfloat16 with
    complex64, complex128 where float64 or complex128 take part)."""
    return dtypes.complex_dtype(_jnp().result_type(*(x.dtype for x in xs)))


def matrix(name, a, *, square=True, arg="a"):
    """a as a complex (..., m, n) array (square unless square=False); ShapeError otherwise."""
    x = as_inexact(name, a, arg)
    if x.ndim < 2:
        raise ShapeError(f"{name}: {arg} must have at least 2 dimensions, got shape {x.shape}"
                         f"{where_am_i()}")
    if square and x.shape[-1] != x.shape[-2]:
        raise ShapeError(f"{name}: {arg} must be square in its last two dimensions, got shape "
                         f"{x.shape}{where_am_i()}")
    return x.astype(complex_dtype(x))


def hermitian_from_triangle(x, lower):
    """The Hermitian matrix whose lower (or upper) triangle is x's; the diagonal's real part
    (LAPACK reads no imaginary part there)."""
    jnp = _jnp()
    t = jnp.tril(x, -1) if lower else jnp.triu(x, 1)
    n = x.shape[-1]
    eye = _iota(n, 0, 2) == _iota(n, 1, 2)
    return t + mH(t) + jnp.where(eye, jnp.real(x).astype(x.dtype), jnp.zeros_like(x))


# --- triangular solves ------------------------------------------------------------------------


def solve_triangular(a, b, trans=0, lower=False, unit_diagonal=False):
    """decompositions.solve_triangular for complex a or b; trans 2/'C' solves T^H x = b."""
    x = matrix("solve_triangular", a)
    bb = as_inexact("solve_triangular", b, "b")
    dt = complex_dtype(x, bb)
    x = x.astype(dt)
    if trans in (1, 2, "T", "C"):
        x, lower = (mH(x) if trans in (2, "C") else _mT(x)), not lower
    elif trans not in (0, "N"):
        raise ValueError(f"solve_triangular: trans must be 0, 1, 2, 'N', 'T' or 'C', got "
                         f"{trans!r}{where_am_i()}")
    core = _d._tri_solve_fn(bool(lower), bool(unit_diagonal))  # holomorphic: the real VJP
    return _d._solve_with("solve_triangular", x, bb.astype(dt), core)


# --- LU ---------------------------------------------------------------------------------------


def lu_raw(a):
    """(lu, pivots, perm) of a 2-D complex (m, n) a, as decompositions._lu_raw; the pivot is
    the entry of largest |Re| + |Im| (LAPACK's izamax), the first of ties."""
    jnp, lax = _jnp(), _lax()
    m, n = a.shape
    i = _iota(m)
    jj = _iota(n)

    def step(k, c):
        lu, piv, perm = c
        colk = _col(lu, k)
        mag = jnp.abs(jnp.real(colk)) + jnp.abs(jnp.imag(colk))
        p = jnp.argmax(jnp.where(i >= k, mag, -jnp.ones_like(mag))).astype(dtypes.int32)
        swap = jnp.where(i == k, p, jnp.where(i == p, k, i))
        lu, perm = lu[swap], perm[swap]
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

    init = (a, jnp.zeros((min(m, n),), dtypes.int32), jnp.arange(m, dtype=dtypes.int32))
    return lax.fori_loop(0, min(m, n), step, init)


@functools.cache
def _solve_fn():
    import nova

    @nova.custom_vjp
    def solve2(a, b):
        lu, _, perm = lu_raw(a)
        return _d._lu_solve_raw(lu, perm, b)

    def fwd(a, b):
        lu, _, perm = lu_raw(a)
        x = _d._lu_solve_raw(lu, perm, b)
        return x, (lu, perm, x)

    def bwd(res, g):
        lu, perm, x = res
        gb = _d._lu_solve_t_raw(lu, perm, g)  # A^-T g: holomorphic, no conjugation
        return -(gb @ _mT(x)), gb

    solve2.defvjp(fwd, bwd)
    return solve2


def solve(a, b):
    """decompositions.solve for complex a or b: LU with partial pivoting."""
    x = matrix("solve", a)
    bb = as_inexact("solve", b, "b")
    dt = complex_dtype(x, bb)
    return _d._solve_with("solve", x.astype(dt), bb.astype(dt), _solve_fn())


def inv(a):
    """decompositions.inv for complex a: solve(a, I)."""
    x = matrix("inv", a)
    return solve(x, _jnp().broadcast_to(_d._eye(x.shape[-1], x.dtype), x.shape))


def _slogdet_raw(a):
    jnp = _jnp()
    lu, piv, _ = lu_raw(a)
    d = jnp.diagonal(lu)
    swaps = jnp.sum((piv != jnp.arange(a.shape[0], dtype=dtypes.int32)).astype(dtypes.int32))
    parity = jnp.where(swaps % 2 == 1, -jnp.ones((), a.dtype), jnp.ones((), a.dtype))
    sign = parity * jnp.prod(jnp.sign(d))  # sign(z) = z / |z|, 0 for 0
    return sign, jnp.sum(jnp.log(jnp.abs(d)))


@functools.cache
def _slogdet_fn():
    import nova

    @nova.custom_vjp
    def slogdet2(a):
        return _slogdet_raw(a)

    def fwd(a):
        s, l = _slogdet_raw(a)
        return (s, l), (a, s)

    def bwd(res, g):
        jnp = _jnp()
        a, s = res
        gs, gl = g
        # d logabsdet = Re tr(A^-1 dA), d sign = i Im tr(A^-1 dA) sign; transposed:
        coef = gl.astype(a.dtype) + 1j * jnp.imag(gs * s)
        lu, _, perm = lu_raw(a)
        return (coef * _mT(_d._lu_solve_raw(lu, perm, _d._eye(a.shape[0], a.dtype))),)

    slogdet2.defvjp(fwd, bwd)
    return slogdet2


def slogdet(a):
    """decompositions.slogdet for complex a: sign a complex number of modulus 1 (0 for a
    singular matrix) of a's dtype, logabsdet real (float32 for complex64, float64 for
    complex128)."""
    jnp = _jnp()
    x = matrix("slogdet", a)
    real = dtypes.real_dtype(x.dtype)
    if x.shape[-1] == 0 or x.size == 0:
        return _d.SlogdetResult(jnp.ones(x.shape[:-2], x.dtype), jnp.zeros(x.shape[:-2], real))
    s, l = _d._batched(_slogdet_fn(), x, n_batch=x.ndim - 2)
    return _d.SlogdetResult(s, l)


def lu_factor(a):
    """decompositions.lu_factor for complex a."""
    x = matrix("lu_factor", a)
    lu, piv, _ = _d._batched(lu_raw, x, n_batch=x.ndim - 2)
    return lu, piv


def lu(a, permute_l=False):
    """decompositions.lu for complex a; P has a's dtype (as jax.scipy.linalg.lu)."""
    jnp = _jnp()
    x = matrix("lu", a, square=False)
    m, n = x.shape[-2:]
    k = min(m, n)
    packed, _, perm = _d._batched(lu_raw, x, n_batch=x.ndim - 2)
    L = jnp.tril(packed[..., :, :k], -1) + jnp.eye(m, k, dtype=x.dtype)
    U = jnp.triu(packed[..., :k, :])
    P = _mT((perm[..., :, None] == jnp.arange(m)).astype(x.dtype))
    return (P @ L, U) if permute_l else (P, L, U)


def lu_solve(lu_and_piv, b, trans=0):
    """decompositions.lu_solve for complex lu or b: trans 0 solves a x = b, 1 a^T x = b and
    2 a^H x = b."""
    jnp = _jnp()
    lu_, piv = lu_and_piv
    lu_ = matrix("lu_solve", lu_)
    piv = jnp.asarray(piv).astype(dtypes.int32)
    n = lu_.shape[-1]
    if piv.shape != lu_.shape[:-1]:
        raise ShapeError(f"lu_solve: piv must have shape {lu_.shape[:-1]} to match lu of shape "
                         f"{lu_.shape}, got {piv.shape}{where_am_i()}")
    if trans not in (0, 1, 2, "N", "T", "C"):
        raise ValueError(f"lu_solve: trans must be 0, 1 or 2, got {trans!r}{where_am_i()}")
    bb = as_inexact("lu_solve", b, "b")
    dt = complex_dtype(lu_, bb)
    lu_, bb = lu_.astype(dt), bb.astype(dt)
    vec = bb.ndim == lu_.ndim - 1
    if vec:
        bb = bb[..., None]
    if bb.shape[-2] != n:
        raise ShapeError(f"lu_solve: b must have {n} rows to match lu of shape {lu_.shape}, got "
                         f"shape {bb.shape}{where_am_i()}")
    conj = trans in (2, "C")  # a^H x = b  <=>  a^T conj(x) = conj(b)

    def core(m, p, r):
        perm = _d._perm_from_pivots(p, n)
        if trans in (0, "N"):
            return _d._lu_solve_raw(m, perm, r)
        if conj:
            return jnp.conj(_d._lu_solve_t_raw(m, perm, jnp.conj(r)))
        return _d._lu_solve_t_raw(m, perm, r)

    x = _d._batched(core, lu_, piv, bb, n_batch=lu_.ndim - 2)
    return x[..., 0] if vec else x


def tensorsolve(a, b, axes=None):
    """decompositions.tensorsolve for complex a or b."""
    jnp = _jnp()
    x = as_inexact("tensorsolve", a)
    bb = as_inexact("tensorsolve", b, "b")
    if axes is not None:
        axes = [ax % x.ndim for ax in axes]
        x = jnp.transpose(x, [ax for ax in range(x.ndim) if ax not in axes] + axes)
    out_shape = x.shape[bb.ndim:]
    rows, cols = math.prod(bb.shape), math.prod(out_shape)
    if rows != cols:
        raise ShapeError(f"tensorsolve: a's shape {x.shape} does not give a square matrix for "
                         f"b of shape {bb.shape}{where_am_i()}")
    sol = solve(jnp.reshape(x, (rows, cols)), jnp.reshape(bb, (rows,)))
    return jnp.reshape(sol, out_shape)


def tensorinv(a, ind=2):
    """decompositions.tensorinv for complex a."""
    jnp = _jnp()
    x = as_inexact("tensorinv", a)
    if ind <= 0:
        raise ValueError(f"tensorinv: ind must be a positive integer, got {ind}{where_am_i()}")
    rows, cols = math.prod(x.shape[:ind]), math.prod(x.shape[ind:])
    if rows != cols:
        raise ShapeError(f"tensorinv: a's shape {x.shape} is not square over {ind} axes"
                         f"{where_am_i()}")
    return jnp.reshape(inv(jnp.reshape(x, (rows, cols))), (*x.shape[ind:], *x.shape[:ind]))


# --- Cholesky ---------------------------------------------------------------------------------


def _cholesky_core(a):
    jnp, lax = _jnp(), _lax()
    n = a.shape[0]
    i = _iota(n)

    def step(j, L):
        s = L @ jnp.conj(_row(L, j))  # s_i = sum_k<j L[i, k] conj(L[j, k])
        r = _col(a, j) - s
        d = jnp.sqrt(jnp.real(jnp.sum(jnp.where(i == j, r, jnp.zeros_like(r))))).astype(a.dtype)
        col = jnp.where(i > j, r / d, jnp.where(i == j, d, jnp.zeros_like(r)))
        return lax.dynamic_update_index_in_dim(L, col, j, 1)

    return lax.fori_loop(0, n, step, jnp.zeros_like(a))


def _cholesky_raw(a):
    sc = _d._pow2_scale(a, even=True)
    return _cholesky_core(a / sc) * _jnp().sqrt(sc)


@functools.cache
def _cholesky_fn():
    import nova

    @nova.custom_vjp
    def chol(a):
        return _cholesky_raw(a)

    def fwd(a):
        L = _cholesky_raw(a)
        return L, L

    def bwd(L, g):
        jnp = _jnp()
        # Murray 2016, eq. 10 with ^H: S = L^-H Phi(L^H conj(g)) L^-1, Hermitian part, conj.
        p = _d._phi(mH(L) @ jnp.conj(g))
        s = _d._tri_solve_raw(mH(L), p, False, False)
        s = mH(_d._tri_solve_raw(mH(L), mH(s), False, False))
        return (jnp.conj((s + mH(s)) * 0.5),)

    chol.defvjp(fwd, bwd)
    return chol


def cholesky(a, *, upper=False, symmetrize_input=True):
    """decompositions.cholesky for a complex Hermitian positive-definite a: L lower with a
    real positive diagonal, A = L L^H (L^H with upper=True). symmetrize_input replaces a by
    (a + a^H) / 2; without it a is the Hermitian completion of its lower triangle."""
    jnp = _jnp()
    x = matrix("cholesky", a)
    if x.shape[-1] == 0:
        return jnp.zeros_like(x)
    x = (x + mH(x)) * 0.5 if symmetrize_input else hermitian_from_triangle(x, True)
    L = _d._batched(_cholesky_fn(), x, n_batch=x.ndim - 2)
    return mH(L) if upper else L


def cholesky_from_triangle(a, lower):
    """SciPy's Cholesky of complex a: L from a's lower triangle (a = L L^H), or U = L^H from
    its upper one (a = U^H U)."""
    x = matrix("cholesky", a)
    if x.shape[-1] == 0:
        return x
    L = cholesky(hermitian_from_triangle(x, lower))
    return L if lower else mH(L)


def cho_solve(c_and_lower, b):
    """decompositions.cho_solve for complex c or b: L y = b, L^H x = y."""
    c, lower = c_and_lower
    c = matrix("cho_solve", c, arg="c")
    L = c if lower else mH(c)
    y = solve_triangular(L, b, lower=True)
    return solve_triangular(L, y, lower=True, trans=2)


def symmetric_from_triangle(a, lower):
    """The complex symmetric (not Hermitian) matrix whose lower (or upper) triangle is a's."""
    jnp = _jnp()
    x = matrix("symmetric", a)
    t = jnp.tril(x, -1) if lower else jnp.triu(x, 1)
    n = x.shape[-1]
    eye = _iota(n, 0, 2) == _iota(n, 1, 2)
    return t + _mT(t) + jnp.where(eye, x, jnp.zeros_like(x))
