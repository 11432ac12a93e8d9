"""nova.scipy.linalg: scipy.linalg's decompositions and solvers over Nova's own loops
(nova/numpy_impl/decompositions.py): solve_triangular, cho_factor / cho_solve, lu, lu_factor /
lu_solve, cholesky (upper by default, as SciPy's), qr, eigh, svd, solve, inv, det, pinv."""

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

__all__ = list(_d.SCIPY_LINALG)


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
    symmetric completion), as SciPy's."""
    from nova import numpy as jnp

    a = jnp.asarray(a)
    if assume_a in ("pos", "positive definite", "sym", "symmetric", "her", "hermitian"):
        a = _d._symmetric_from_triangle(a, lower)
    if transposed:
        a = jnp.swapaxes(a, -1, -2)
    if assume_a in ("pos", "positive definite"):
        c = _d._cholesky_from_triangle(a, True)
        return cho_solve((c, True), b)
    return _d.solve(a, b)
