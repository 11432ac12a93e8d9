"""nova.scipy.linalg: scipy.linalg's decompositions and solvers over Nova's own loops
(nova/numpy_impl/decompositions.py): solve_triangular, cho_factor / cho_solve, lu, lu_factor /
lu_solve, cholesky (upper by default, as SciPy's), qr, qr_multiply, eigh, eigh_tridiagonal,
hessenberg, svd, solve, inv, det, pinv; the matrix functions of linalg_functions.py (expm,
expm_frechet, sqrtm, polar, solve_sylvester), the Schur decomposition and what is built on it
(linalg_schur.py: schur, rsf2csf, funm) and the special matrices of linalg_special.py (dft
among them). Complex (complex64 / complex128) matrices are accepted throughout."""

from __future__ import annotations

from nova.numpy_impl import decompositions as _d
from nova.numpy_impl.decompositions import (  # noqa: F401
    cho_factor,
    cho_solve,
    det,
    inv,
    lu,
    lu_factor,
    lu_solve,
    pinv,
    solve_triangular,
)
from nova.scipy import linalg_functions as _functions
from nova.scipy import linalg_schur as _schur
from nova.scipy import linalg_special as _special
from nova.scipy.linalg_functions import (  # noqa: F401
    expm,
    expm_frechet,
    polar,
    solve_sylvester,
    sqrtm,
)
from nova.scipy.linalg_schur import funm, rsf2csf, schur  # noqa: F401
from nova.scipy.linalg_special import (  # noqa: F401
    block_diag,
    circulant,
    companion,
    convolution_matrix,
    dft,
    fiedler,
    fiedler_companion,
    hadamard,
    hankel,
    helmert,
    hilbert,
    invhilbert,
    invpascal,
    leslie,
    pascal,
    toeplitz,
)

__all__ = ["eigh_tridiagonal", "hessenberg", "qr_multiply"]
__all__ += _d.SCIPY_LINALG  # noqa: PLE0605 (a list defined in decompositions.py)
__all__ += _functions.__all__
__all__ += _schur.__all__
__all__ += _special.__all__
__all__.sort()


def cholesky(a, lower=False, overwrite_a=False, check_finite=True):
    """The Cholesky factor of a symmetric positive-definite a (scipy.linalg.cholesky): upper
    (a = U^T U, from a's upper triangle) unless lower=True (L, from the lower triangle); the
    other triangle is not read, as SciPy's. See nova.numpy.linalg.cholesky."""
    return _d._cholesky_from_triangle(a, lower)


def qr(a, overwrite_a=False, lwork=None, mode="full", pivoting=False, check_finite=True):
    """scipy.linalg.qr: mode "full" (Q (m, m), R (m, n)), "economic" (Q (m, k), R (k, n)) or
    "r" (the full R (m, n) alone, as a 1-tuple as SciPy's); pivoting is not supported (NotImplementedError)."""
    if pivoting:
        raise NotImplementedError("qr: column pivoting is not supported")
    modes = {"full": "complete", "economic": "reduced", "r": "complete"}
    if mode not in modes:
        raise ValueError(f"qr: mode must be 'full', 'economic' or 'r', got {mode!r}")
    out = _d.qr(a, modes[mode])
    return (out.R,) if mode == "r" else tuple(out)


def eigh(a, b=None, lower=True, eigvals_only=False, overwrite_a=False, overwrite_b=False,
         type=1, check_finite=True, subset_by_index=None, subset_by_value=None, driver=None):
    """scipy.linalg.eigh for the standard problem (b must be None): (w ascending, v), or w with
    eigvals_only=True; the triangle read is the lower one unless lower=False."""
    if b is not None:
        raise NotImplementedError("eigh: the generalized problem (b) is not supported")
    if subset_by_index is not None or subset_by_value is not None:
        raise NotImplementedError("eigh: subsets are not supported")
    w, v = _d.eigh(a, "L" if lower else "U", symmetrize_input=False)
    return w if eigvals_only else (w, v)


def svd(a, full_matrices=True, compute_uv=True, overwrite_a=False, check_finite=True,
        lapack_driver="gesdd"):
    """scipy.linalg.svd: (U, s, Vh), or s with compute_uv=False. See nova.numpy.linalg.svd."""
    out = _d.svd(a, full_matrices=full_matrices, compute_uv=compute_uv)
    return out if not compute_uv else tuple(out)


def solve(a, b, lower=False, overwrite_a=False, overwrite_b=False, check_finite=True,
          assume_a="gen", transposed=False):
    """scipy.linalg.solve: x with a x = b (a^T x = b if transposed); b (n,) or (n, k).
    assume_a "pos" uses the Cholesky factor, anything else LU with partial pivoting; for
    "pos", "sym" and "her" only the triangle named by `lower` is read (the matrix is its
    symmetric completion, Hermitian for a complex a with "pos" or "her"), as SciPy's."""
    from nova import numpy as jnp

    a = jnp.asarray(a)
    hermitian = ("pos", "positive definite", "her", "hermitian")
    if jnp.iscomplexobj(a) and assume_a in hermitian:  # complex: the Hermitian completion
        from nova.numpy_impl.decompositions_complex import hermitian_from_triangle, matrix

        a = hermitian_from_triangle(matrix("solve", a), lower)
    elif assume_a in (*hermitian, "sym", "symmetric"):
        a = _d._symmetric_from_triangle(a, lower)
    if transposed:
        a = jnp.swapaxes(a, -1, -2)
    if assume_a in ("pos", "positive definite"):
        c = _d._cholesky_from_triangle(a, True)
        return cho_solve((c, True), b)
    return _d.solve(a, b)


def qr_multiply(a, c, mode="right", pivoting=False, conjugate=False, overwrite_a=False,
                overwrite_c=False):
    """(Q @ c or c @ Q, R) from the economic QR decomposition a = Q R (scipy.linalg.qr_multiply).

    a: (..., m, n) float, k = min(m, n); Q (..., m, k), R (..., k, n). mode 'left': c
    (..., k, p) (or (k,), a column) gives Q @ c (..., m, p) (or (m,)); mode 'right': c
    (..., p, m) (or (m,), a row) gives c @ Q (..., p, k) (or (k,)). Batch dimensions
    broadcast. `conjugate` changes nothing for real arrays. Returns (cQ, R). Raises
    ValueError for a bad mode, ShapeError for mismatched shapes, NotImplementedError for
    pivoting.
    """
    from nova.numpy_impl.util import where_am_i

    if pivoting:
        raise NotImplementedError(f"qr_multiply: column pivoting is not supported{where_am_i()}")
    if mode not in ("left", "right"):
        raise ValueError(f"qr_multiply: mode must be 'left' or 'right', got {mode!r}"
                         f"{where_am_i()}")
    x = _d._matrix("qr_multiply", a, square=False)
    cc = _d._as_float("qr_multiply", c, "c")
    m, n = x.shape[-2:]
    k = min(m, n)
    vector = cc.ndim == 1
    if vector:
        cc = cc[:, None] if mode == "left" else cc[None, :]
    need = (k, "rows") if mode == "left" else (m, "columns")
    have = cc.shape[-2] if mode == "left" else cc.shape[-1]
    if have != need[0]:
        raise _d.ShapeError(f"qr_multiply: for a of shape {x.shape} and mode {mode!r}, c must "
                            f"have {need[0]} {need[1]}, got shape {cc.shape}{where_am_i()}")
    q, r = _d.qr(x, "reduced")
    out = q @ cc if mode == "left" else cc @ q
    if vector:
        out = out[..., :, 0] if mode == "left" else out[..., 0, :]
    return out, r


def _hessenberg_2d(a):
    """(H, Q) of one (n, n) matrix by Householder reflections from the left and the right
    (Golub & Van Loan, "Matrix Computations", 4th ed., Alg. 7.4.2)."""
    from nova import lax
    from nova import numpy as jnp

    n = a.shape[-1]
    i = _d._iota(n)

    def step(k, c):
        h, q = c
        x = jnp.where(i > k, _d._col(h, k), jnp.zeros((n,), h.dtype))
        alpha = jnp.sum(jnp.where(i == k + 1, x, jnp.zeros_like(x)))
        norm = jnp.sqrt(jnp.sum(x * x))
        sign = jnp.where(alpha < 0, -jnp.ones_like(alpha), jnp.ones_like(alpha))
        v = x + jnp.where(i == k + 1, sign * norm, jnp.zeros_like(x))
        vv = jnp.sum(v * v)
        beta = jnp.where(vv > 0, 2 / jnp.where(vv > 0, vv, jnp.ones_like(vv)), jnp.zeros_like(vv))
        h = h - beta * v[:, None] * (v @ h)[None, :]
        h = h - beta * (h @ v)[:, None] * v[None, :]
        q = q - beta * (q @ v)[:, None] * v[None, :]
        return h, q

    h, q = lax.fori_loop(0, max(n - 2, 0), step, (a, _d._eye(n, a.dtype)))
    return jnp.triu(h, -1), q


def hessenberg(a, *, calc_q=False, overwrite_a=False, check_finite=True):
    """The upper Hessenberg form a = Q H Q^T, H zero below the first sub-diagonal
    (scipy.linalg.hessenberg), by Householder reflections (Golub & Van Loan Alg. 7.4.2).

    a: (..., n, n) float (ints become float32). Returns H (..., n, n), or (H, Q) with
    calc_q=True, Q orthogonal; signs may differ from LAPACK's. Differentiable through the
    reflection loop. Raises ShapeError unless a is (..., n, n).
    """
    x = _d._matrix("hessenberg", a)
    dt = x.dtype
    x = x.astype(_d._compute_dtype(x))
    h, q = _d._batched(_hessenberg_2d, x, n_batch=x.ndim - 2)
    return (h.astype(dt), q.astype(dt)) if calc_q else h.astype(dt)


def eigh_tridiagonal(d, e, *, eigvals_only=False, select="a", select_range=None, tol=None):
    """Eigenvalues (ascending) and, with eigvals_only=False, eigenvectors of the symmetric
    tridiagonal matrix with diagonal d and off-diagonal e (scipy.linalg.eigh_tridiagonal;
    jax.scipy.linalg.eigh_tridiagonal computes eigenvalues only).

    d: (n,) float, e: (n - 1,) float. Returns w (k,) in the promoted dtype, or (w, v) with v
    (n, k) orthonormal, column j for w[j] (as SciPy). select 'a' gives all n eigenvalues, 'i'
    those of indices select_range[0] <= i <= select_range[1] (static ints); 'v' raises
    NotImplementedError, as JAX's. Eigenvalues by multisection with Sturm counts, eigenvectors by
    inverse iteration with re-orthogonalization (nova/numpy_impl/eigh_tridiagonal.py); tol is
    unused (the bisection runs to a few eps * ||T||). Raises ShapeError for mismatched shapes.
    """
    from nova.numpy_impl import eigh_tridiagonal as _tri
    from nova.numpy_impl.util import where_am_i

    if select not in ("a", "i"):
        raise NotImplementedError(f"eigh_tridiagonal: select must be 'a' or 'i', got "
                                  f"{select!r}{where_am_i()}")
    dd = _d._as_float("eigh_tridiagonal", d, "d")
    ee = _d._as_float("eigh_tridiagonal", e, "e")
    if dd.ndim != 1 or ee.shape != (max(dd.shape[0] - 1, 0),):
        raise _d.ShapeError(f"eigh_tridiagonal: d must be (n,) and e (n - 1,), got shapes "
                            f"{dd.shape} and {ee.shape}{where_am_i()}")
    from nova import numpy as jnp

    dt = jnp.result_type(dd, ee)
    dd, ee = dd.astype(dt), ee.astype(dt)
    if dd.shape[0] <= 1:  # (the solver's recurrences need an off-diagonal)
        w, v = dd, jnp.ones((dd.shape[0], dd.shape[0]), dt)
    else:
        w = _tri.tridiagonal_eigvals(dd, ee)
        v = None if eigvals_only else _tri.tridiagonal_eigvecs(dd, ee, w)
    if select == "i":
        lo, hi = (int(i) for i in select_range)
        w = w[lo:hi + 1]
        v = None if v is None else v[:, lo:hi + 1]
    return w if eigvals_only else (w, v)
