"""Linear algebra for second-order optimizers (optax's power_iteration and the Shampoo helper
matrix_inverse_pth_root), with nova.numpy matmuls inside nova.lax.while_loop."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

import nova.numpy as jnp
import nova.random
from nova import lax
from nova.core.pytree import tree_map
from nova.optim.base import check_float, check_int
from nova.optim.tree_utils import tree_norm, tree_scale, tree_sub, tree_vdot


def _normalized(tree):
    return tree_scale(1.0 / tree_norm(tree), tree)


def _square_matrix(fn: str, matrix):
    m = jnp.asarray(matrix)
    if m.ndim != 2 or m.shape[0] != m.shape[1]:
        raise ValueError(f"{fn}: matrix must be square (n, n), got shape {tuple(m.shape)}")
    if np.dtype(m.dtype).kind != "f":
        raise TypeError(f"{fn}: matrix must have a float dtype, got {m.dtype}")
    return m


def power_iteration(matrix, *, v0=None, num_iters: int = 100, error_tolerance: float = 1e-6,
                    precision=None, key=None):
    """The dominant eigenvalue and its eigenvector by power iteration (optax.power_iteration;
    e.g. Golub & Van Loan, "Matrix Computations", section 7.3.1).

    Iterates v <- A v / ||A v|| until |(||A v - lambda v||) / lambda| < error_tolerance or
    num_iters steps, lambda = <v, A v>, in a nova.lax.while_loop.

    Args:
      matrix: a square float array (n, n), or a callable v -> A v on pytrees shaped like v0.
      v0: the start vector (shape (n,), or a pytree for a callable); None (arrays only): uniform
        in [-1, 1] drawn with `key` (nova.random.PRNGKey(0) when None).
      precision: accepted for optax's signature; Nova's matmuls use nova.config's precision.

    Returns:
      (eigenvalue, a 0-d array; the unit-norm eigenvector, shaped like v0).

    Raises:
      ValueError: matrix is a callable and v0 is None, or an array that is not square.
      TypeError: matrix has an integer dtype.
    """
    del precision
    fn = "power_iteration"
    if callable(matrix):
        mvp: Callable = matrix
        if v0 is None:
            raise ValueError(f"{fn}: v0 must be given when matrix is a callable")
    else:
        m = _square_matrix(fn, matrix)

        def mvp(v):
            return jnp.matmul(m, v)

        if v0 is None:
            key = nova.random.PRNGKey(0) if key is None else key
            v0 = nova.random.uniform(key, m.shape[-1:], m.dtype, minval=-1.0, maxval=1.0)
    v0 = _normalized(tree_map(jnp.asarray, v0))

    def keep_going(carry):
        vec, z, eig, i = carry
        residual = tree_norm(tree_sub(z, tree_scale(eig, vec)))
        return ~(jnp.abs(residual / eig) < error_tolerance) & (i < num_iters)

    def step(carry):
        _, z, _, i = carry
        vec = _normalized(z)
        z = mvp(vec)
        return vec, z, jnp.asarray(tree_vdot(vec, z)).astype(jnp.float32), i + 1

    init = (v0, mvp(v0), jnp.asarray(0.0, jnp.float32), jnp.asarray(0, jnp.int32))
    _, z, eig, _ = lax.while_loop(keep_going, step, init)
    return eig, _normalized(z)


def _matrix_power(a, p: int):
    """a**p for a static int p >= 1 by repeated squaring (p = 1, 2, 4, 8 as optax's)."""
    out, base = None, a
    while p:
        if p & 1:
            out = base if out is None else jnp.matmul(out, base)
        p >>= 1
        if p:
            base = jnp.matmul(base, base)
    return out


def matrix_inverse_pth_root(matrix, p: int, num_iters: int = 100, ridge_epsilon: float = 1e-6,
                            error_tolerance: float = 1e-6, precision=None):
    """matrix^(-1/p) of a symmetric positive semi-definite matrix by the coupled Newton
    iteration (optax.matrix_inverse_pth_root, the Shampoo preconditioner root; Higham 2008,
    "Functions of Matrices", eq. 7.18).

    The matrix is damped by ridge_epsilon * max(lambda_max, 1e-16) * I (lambda_max from
    power_iteration); M_0 = z A, H_0 = z^(1/p) I with z = (1 + p) / (2 ||A||_F), then
    M <- ((1 - a) I + a M)^p M and H <- H ((1 - a) I + a M) with a = -1/p, until
    max|M - I| <= error_tolerance, num_iters steps, or the error grows by more than 1.2x
    (then the previous H is returned). Computed in float32.

    Args:
      matrix: a square float array (n, n).
      p: the root, a positive Python int (optax supports 1, 2, 4 and 8; any p works here).
      precision: accepted for optax's signature; Nova's matmuls use nova.config's precision.

    Returns:
      (matrix^(-1/p) in matrix's dtype, shape (n, n); the final error max|M - I|, 0-d).

    Raises:
      ValueError: matrix is not square, or p < 1; TypeError: p is not an int, or an integer
        matrix.
    """
    del precision
    fn = "matrix_inverse_pth_root"
    matrix = _square_matrix(fn, matrix)
    p = check_int("p", fn, p, lo=1)
    error_tolerance = check_float("error_tolerance", fn, error_tolerance, lo=0.0)
    n = matrix.shape[0]
    alpha = -1.0 / p
    eye = jnp.eye(n, dtype=jnp.float32)
    max_ev, _ = power_iteration(matrix, num_iters=100, error_tolerance=1e-6)
    ridge = ridge_epsilon * jnp.maximum(max_ev, 1e-16)
    if n == 1:
        return (matrix + ridge) ** alpha, jnp.asarray(0.0, jnp.float32)

    def keep_going(state):
        i, _, _, _, error, improving = state
        return (i < num_iters) & (error > error_tolerance) & improving

    def step(state):
        i, mat_m, mat_h, _, error, _ = state
        mixed = (1.0 - alpha) * eye + alpha * mat_m
        new_m = jnp.matmul(_matrix_power(mixed, p), mat_m)
        new_h = jnp.matmul(mat_h, mixed)
        new_error = jnp.max(jnp.abs(new_m - eye))
        # the error may rise for a step before it falls; stop when it rises by more than 1.2x
        return i + 1, new_m, new_h, mat_h, new_error, new_error < error * 1.2

    damped = matrix.astype(jnp.float32) + ridge * eye
    z = (1 + p) / (2 * jnp.linalg.norm(damped))
    m0 = damped * z
    h0 = eye * jnp.power(z, 1.0 / p)
    init = (jnp.asarray(0, jnp.int32), m0, h0, h0, jnp.max(jnp.abs(m0 - eye)), jnp.asarray(True))
    _, mat_m, mat_h, old_h, _, improving = lax.while_loop(keep_going, step, init)
    root = jnp.where(improving, mat_h, old_h).astype(matrix.dtype)
    return root, jnp.max(jnp.abs(mat_m - eye))


__all__ = ["matrix_inverse_pth_root", "power_iteration"]
