"""nova.lax.linalg: jax.lax.linalg's decompositions over nova/numpy_impl/decompositions.py
(imported lazily: nova.numpy sits above ops/). The conventions are lax's, not NumPy's:
eigh returns (eigenvectors, eigenvalues), lu returns (lu, pivots, permutation), and
triangular_solve solves x op(a) = b unless left_side=True. Complex (complex64 / complex128)
matrices are accepted by every function (decompositions.py dispatches them to
decompositions_complex*.py; lu here calls the complex LU directly)."""

from __future__ import annotations


def _d():
    from nova.numpy_impl import decompositions

    return decompositions


def cholesky(x, *, symmetrize_input: bool = True):
    """The lower Cholesky factor of each symmetric positive-definite (..., n, n) matrix
    (jax.lax.linalg.cholesky); NaN where x is not positive definite."""
    return _d().cholesky(x, symmetrize_input=symmetrize_input)


def eigh(x, *, lower: bool = True, symmetrize_input: bool = True, sort_eigenvalues: bool = True):
    """(v, w): eigenvectors (..., n, n) and ascending eigenvalues (..., n) of symmetric x
    (jax.lax.linalg.eigh); the triangle read is the lower one unless lower=False (when not
    symmetrizing). Eigenvalues are always sorted."""
    w, v = _d().eigh(x, "L" if lower else "U", symmetrize_input=symmetrize_input)
    return v, w


def lu(x):
    """(lu, pivots, permutation) of x (..., m, n) with partial pivoting (jax.lax.linalg.lu):
    L (unit, below the diagonal) and U packed, LAPACK's int32 pivots (min(m, n)) and the int32
    row permutation (m) with x[permutation] = L @ U. x: float or complex (the pivot of a
    complex column is its entry of largest |Re| + |Im|, LAPACK's izamax); lu has x's dtype
    (ints become float32). Raises ShapeError for fewer than 2 dimensions, TypeError for a
    non-numeric dtype."""
    d = _d()
    if d._complex(x):
        from nova.numpy_impl import decompositions_complex as dc

        a = dc.matrix("lu", x, square=False)
        return d._batched(dc.lu_raw, a, n_batch=a.ndim - 2)
    a = d._matrix("lu", x, square=False)
    return d._batched(d._lu_raw, a, n_batch=a.ndim - 2)


def qr(x, *, full_matrices: bool = True):
    """(q, r) of x (..., m, n) (jax.lax.linalg.qr): q (m, m), r (m, n), or the reduced
    q (m, k), r (k, n) with full_matrices=False."""
    out = _d().qr(x, "complete" if full_matrices else "reduced")
    return tuple(out)


def svd(x, *, full_matrices: bool = True, compute_uv: bool = True):
    """(u, s, vh) of x (jax.lax.linalg.svd), or s alone with compute_uv=False."""
    out = _d().svd(x, full_matrices=full_matrices, compute_uv=compute_uv)
    return out if not compute_uv else tuple(out)


def triangular_solve(a, b, *, left_side: bool = False, lower: bool = False,
                     transpose_a: bool = False, conjugate_a: bool = False,
                     unit_diagonal: bool = False):
    """x with op(a) x = b (left_side=True) or x op(a) = b (left_side=False, lax's default),
    op(a) = a^T if transpose_a, conj(a) if conjugate_a (a^H with both), a's lower or upper
    triangle (jax.lax.linalg.triangular_solve). a: (..., m, m); b: (..., m, n) for left_side,
    (..., n, m) otherwise; float or complex (the result has the promoted dtype).
    conjugate_a has no effect on real arrays. Raises ShapeError for mismatched shapes."""
    from nova import numpy as jnp

    d = _d()
    if conjugate_a and d._complex(a):
        a = jnp.conj(jnp.asarray(a))
    if left_side:
        return d.solve_triangular(a, b, trans=1 if transpose_a else 0, lower=lower,
                                  unit_diagonal=unit_diagonal)
    # x op(a) = b  <=>  op(a)^T x^T = b^T
    bt = jnp.swapaxes(jnp.asarray(b), -1, -2)
    xt = d.solve_triangular(a, bt, trans=0 if transpose_a else 1, lower=lower,
                            unit_diagonal=unit_diagonal)
    return jnp.swapaxes(xt, -1, -2)
