"""Matrix functions of nova.scipy.linalg (expm, expm_frechet, sqrtm, polar, solve_sylvester),
written over Nova's own loops and decompositions (nova/numpy_impl/decompositions.py), so they
trace under nova.jit and nova.vmap; expm also has a gradient (its custom VJP is the Frechet
derivative at A^T). Complex matrices (complex64 / complex128) are accepted by all of them:
expm, expm_frechet and solve_sylvester are holomorphic (the VJP is the real rule without
conjugation, JAX's convention), sqrtm of a complex matrix uses the complex Schur form
(linalg_schur.py), polar gives a unitary u and a Hermitian p."""

from __future__ import annotations

import functools
import math
from fractions import Fraction

import numpy as np

import nova.numpy as jnp
from nova.core import dtypes
from nova.core.errors import ShapeError
from nova.numpy_impl import decompositions as _d
from nova.numpy_impl import decompositions_complex as _c
from nova.numpy_impl.util import broadcast_shapes, where_am_i

__all__ = ["expm", "expm_frechet", "polar", "solve_sylvester", "sqrtm"]


def _square(name, a, arg="A"):
    """a as a float or complex (..., n, n) array; ShapeError names the shape."""
    x = _c.as_inexact(name, a, arg)
    if x.ndim < 2 or x.shape[-1] != x.shape[-2]:
        raise ShapeError(f"{name}: {arg} must be a (batched) square matrix of shape (..., n, n), "
                         f"got shape {x.shape}{where_am_i()}")
    return x


# --- expm: Higham 2005, "The scaling and squaring method for the matrix exponential revisited",
# SIAM J. Matrix Anal. Appl. 26(4), Algorithm 2.3 --------------------------------------------

# (m, theta_m): the largest 1-norm for which the [m/m] Pade approximant is accurate to the unit
# roundoff (Higham 2005, Table 2.3; single precision uses degrees 3, 5 and 7 only).
_THETA = {
    "float32": ((3, 4.258730016922831e-1), (5, 1.880152677804762e0), (7, 3.925724783138660e0)),
    "float64": ((3, 1.495585217958292e-2), (5, 2.539398330063230e-1), (7, 9.504178996162932e-1),
                (9, 2.097847961257068e0), (13, 5.371920351148152e0)),
}


@functools.cache
def _pade_coefficients(m):
    """b_j of the [m/m] Pade approximant of exp: (2m - j)! m! / ((2m)! j! (m - j)!)."""
    f = math.factorial
    return tuple(float(Fraction(f(2 * m - j) * f(m), f(2 * m) * f(j) * f(m - j)))
                 for j in range(m + 1))


def _pade_uv(a, m, pw, eye):
    """(U, V) with p_m(a) = V + U, q_m(a) = V - U; pw holds a's even powers {2: a^2, ...}.
    Degree 13 uses Higham's evaluation with a^2, a^4, a^6 only (eq. 2.7)."""
    b = _pade_coefficients(m)
    if m == 13:
        a2, a4, a6 = pw[2], pw[4], pw[6]
        u = a6 @ (b[13] * a6 + b[11] * a4 + b[9] * a2)
        u = a @ (u + b[7] * a6 + b[5] * a4 + b[3] * a2 + b[1] * eye)
        v = a6 @ (b[12] * a6 + b[10] * a4 + b[8] * a2)
        v = v + b[6] * a6 + b[4] * a4 + b[2] * a2 + b[0] * eye
        return u, v
    u_even = b[1] * eye
    v = b[0] * eye
    for j in range(2, m + 1, 2):
        v = v + b[j] * pw[j]
        u_even = u_even + b[j + 1] * pw[j]
    return a @ u_even, v


def _expm_2d(a, upper_triangular, max_squarings):
    """exp(a) of one (n, n) matrix by Higham's Algorithm 2.3; NaN when more than
    max_squarings squarings would be needed."""
    from nova import lax

    table = _THETA["float64" if a.dtype in (dtypes.float64, dtypes.complex128) else "float32"]
    degrees = [m for m, _ in table]
    theta_max = table[-1][1]
    norm1 = jnp.max(jnp.sum(jnp.abs(a), axis=0))
    # s = ceil(log2(||A||_1 / theta_m)) scalings by 2 put the norm below theta_max (eq. 2.4)
    ratio = jnp.where(norm1 > theta_max, norm1 / theta_max, jnp.ones_like(norm1))
    s = jnp.ceil(jnp.log2(ratio))
    s = jnp.where(jnp.isfinite(s), s, jnp.full_like(s, max_squarings + 1))
    x = a * jnp.exp2(-s)
    eye = jnp.eye(a.shape[-1], dtype=a.dtype)
    pw = {2: x @ x}
    pw[4] = pw[2] @ pw[2]
    pw[6] = pw[4] @ pw[2]
    if 9 in degrees:
        pw[8] = pw[4] @ pw[4]
    u, v = _pade_uv(x, degrees[-1], pw, eye)
    # below theta_m of a smaller degree that degree suffices (Algorithm 2.3, lines 1-5)
    for m, theta in reversed(table[:-1]):
        um, vm = _pade_uv(x, m, pw, eye)
        use = norm1 <= theta
        u, v = jnp.where(use, um, u), jnp.where(use, vm, v)
    if upper_triangular:
        r = _d.solve_triangular(v - u, v + u, lower=False)
    else:
        r = _d.solve(v - u, v + u)
    count = s.astype(dtypes.int32)

    def square(c):
        i, y = c
        return i + 1, y @ y

    r = lax.while_loop(lambda c: c[0] < jnp.minimum(count, max_squarings), square,
                       (jnp.zeros((), dtypes.int32), r))[1]
    return jnp.where(count > max_squarings, jnp.full_like(r, np.nan), r)


@functools.cache
def _expm_fn(upper_triangular, max_squarings):
    import nova

    @nova.custom_vjp
    def expm2(a):
        return _expm_2d(a, upper_triangular, max_squarings)

    def fwd(a):
        return expm2(a), a

    def bwd(a, g):
        # <G, L(A, E)> = <L(A^T, G), E>: the VJP is the Frechet derivative at A^T in the
        # direction G, the upper-right block of exp([[A^T, G], [0, A^T]]) (Higham 2008,
        # "Functions of Matrices", Thm. 3.6 and eq. 3.17)
        n = a.shape[-1]
        at = _d._mT(a)
        big = jnp.block([[at, g], [jnp.zeros_like(at), at]])
        return (_expm_fn(False, max_squarings + 1)(big)[:n, n:],)

    expm2.defvjp(fwd, bwd)
    return expm2


def expm(A, *, upper_triangular=False, max_squarings=16):
    """The matrix exponential exp(A) = sum_k A^k / k! (scipy.linalg.expm, jax.scipy.linalg.expm).

    A: (..., n, n) float or complex (ints become float32; float16 / bfloat16 compute in
    float32; complex64 uses float32's Pade degrees, complex128 float64's). Scaling
    and squaring with a [m/m] Pade approximant (Higham 2005, Algorithm 2.3: degrees 3-7 in
    float32, 3-13 in float64, s = ceil(log2(||A||_1 / theta_m)) squarings). upper_triangular
    =True solves the Pade system by back substitution (A must be upper triangular). Returns
    (..., n, n) in A's dtype; NaN where more than max_squarings squarings would be needed (or
    A is not finite). Differentiable (nova.grad): the VJP is the Frechet derivative at A^T
    (for complex A, JAX's convention: the transpose, not the conjugate transpose, as exp is
    holomorphic). Raises ShapeError unless A is (..., n, n), TypeError for a non-numeric
    dtype.
    """
    x = _square("expm", A)
    dt = x.dtype
    x = x.astype(_d._compute_dtype(x))
    if x.shape[-1] == 0:
        return x.astype(dt)
    fn = _expm_fn(bool(upper_triangular), int(max_squarings))
    return _d._batched(fn, x, n_batch=x.ndim - 2).astype(dt)


def expm_frechet(A, E, *, method=None, compute_expm=True):
    """The Frechet derivative L(A, E) = d/dt exp(A + t E) at t = 0 (scipy.linalg.expm_frechet).

    A, E: (..., n, n) float or complex of one shape. Returns (expm(A), L(A, E)), or L(A, E) alone with
    compute_expm=False, each (..., n, n). Computed as the blocks of exp([[A, E], [0, A]])
    (Higham 2008, "Functions of Matrices", eq. 3.16); `method` (None, 'SPS' or
    'blockEnlarge') is accepted and this one method is used. Differentiable through expm.
    Raises ShapeError for non-square or mismatched shapes, ValueError for an unknown method.
    """
    if method not in (None, "SPS", "blockEnlarge"):
        raise ValueError(f"expm_frechet: method must be None, 'SPS' or 'blockEnlarge', got "
                         f"{method!r}{where_am_i()}")
    a = _square("expm_frechet", A, "A")
    e = _square("expm_frechet", E, "E")
    if a.shape != e.shape:
        raise ShapeError(f"expm_frechet: A and E must have the same shape, got A {a.shape} and "
                         f"E {e.shape}{where_am_i()}")
    dt = dtypes.result_type(a, e)
    a, e = a.astype(dt), e.astype(dt)
    n = a.shape[-1]
    big = jnp.concatenate([jnp.concatenate([a, e], axis=-1),
                           jnp.concatenate([jnp.zeros_like(a), a], axis=-1)], axis=-2)
    out = expm(big)
    frechet = out[..., :n, n:]
    return (out[..., :n, :n], frechet) if compute_expm else frechet


# --- sqrtm: Denman & Beavers 1976 in product form with determinant scaling -----------------------


def _sqrtm_2d(a, max_iter):
    """The principal square root of one (n, n) matrix by the scaled product form of the
    Denman-Beavers iteration (Higham 2008, "Functions of Matrices", eq. 6.29): X_k -> A^(1/2),
    M_k -> I; NaN when it has not converged after max_iter steps."""
    from nova import lax

    n = a.shape[-1]
    eye = jnp.eye(n, dtype=a.dtype)
    eps = float(np.finfo(np.dtype(a.dtype)).eps)
    tol = math.sqrt(n) * eps * 8

    def cond(c):
        k, _, _, err = c
        return (k < max_iter) & (err > tol)

    def body(c):
        k, x, m, _ = c
        mu = jnp.exp(-_d.slogdet(m)[1] / (2 * n))  # |det M|^(-1/(2n)) (eq. 6.31)
        minv = _d.inv(m)
        x = 0.5 * mu * (x @ (eye + minv / (mu * mu)))
        m = 0.5 * (eye + 0.5 * (mu * mu * m + minv / (mu * mu)))
        err = jnp.sqrt(jnp.sum((m - eye) ** 2))
        return k + 1, x, m, err

    init = (jnp.zeros((), dtypes.int32), a, a, jnp.full((), np.inf, a.dtype))
    _, x, _, err = lax.while_loop(cond, body, init)
    ok = (err <= tol * 100) & jnp.all(jnp.isfinite(x))
    return jnp.where(ok, x, jnp.full_like(x, np.nan))


def _sqrtm_schur_2d(a):
    """The principal square root of one complex (n, n) matrix by the complex Schur method."""
    from nova.scipy import linalg_schur

    t, z = linalg_schur.schur(a, "complex")
    return z @ linalg_schur.sqrtm_triu(t) @ _c.mH(z)


def sqrtm(A, blocksize=1):
    """The principal square root X of A: X @ X = A, the eigenvalues of X in the open right
    half-plane (scipy.linalg.sqrtm, jax.scipy.linalg.sqrtm).

    A: (..., n, n) float or complex (ints become float32); returns (..., n, n) in A's dtype.

    - Complex A (complex64 / complex128): the Schur method (Bjorck & Hammarling 1983, "A Schur
      method for the square root of a matrix"; Higham 1987): A = Z T Z^H (the complex Schur
      form, nova.scipy.linalg.schur), the upper triangular root R of T by its superdiagonals,
      X = Z R Z^H. Every matrix without a zero eigenvalue has one; for a negative eigenvalue
      the root's eigenvalue is i sqrt(|lambda|) (NumPy's branch of sqrt). A singular A gives
      inf / NaN where 0 + 0 is divided by, as SciPy's.
    - Real A: a real root (the result's dtype must not depend on A's values under nova.jit),
      for A with no eigenvalue on the closed negative real axis (e.g. symmetric positive
      definite A, or any A with real positive and complex eigenvalues): the scaled
      Denman-Beavers iteration (Higham 2008, "Functions of Matrices", eq. 6.29),
      quadratically convergent; NaN where it does not converge in 50 steps (singular A and A
      with negative eigenvalues). For those matrices SciPy returns the complex root and JAX
      always returns a complex result: pass A.astype(complex) for that root.

    Not differentiable (while loops), as JAX's. blocksize is accepted for SciPy's signature;
    values other than 1 raise NotImplementedError, as JAX's. Raises ShapeError unless A is
    (..., n, n), TypeError for a non-numeric dtype.
    """
    if blocksize != 1:
        raise NotImplementedError(f"sqrtm: only blocksize=1 is implemented, got {blocksize}"
                                  f"{where_am_i()}")
    x = _square("sqrtm", A)
    dt = x.dtype
    x = x.astype(_d._compute_dtype(x))
    if x.shape[-1] == 0:
        return x.astype(dt)
    if _c.is_complex(x):
        return _d._batched(_sqrtm_schur_2d, x, n_batch=x.ndim - 2)
    return _d._batched(lambda m: _sqrtm_2d(m, 50), x, n_batch=x.ndim - 2).astype(dt)


# --- polar and Sylvester ------------------------------------------------------------------------


def polar(a, side="right", *, method="qdwh", eps=None, max_iterations=None):
    """The polar decomposition a = u p (side='right', p (..., n, n)) or a = p u (side='left',
    p (..., m, m)), u (..., m, n) with orthonormal columns (rows if n > m), p symmetric
    positive semidefinite (jax.scipy.linalg.polar); for a complex a (complex64 / complex128)
    u has orthonormal columns in the unitary sense and p is Hermitian positive semidefinite.

    From the reduced SVD a = U S V^H: u = U V^H, p = V S V^H or U S U^H (Higham 2008,
    "Functions of Matrices", Thm. 8.1). method 'svd' or 'qdwh' (JAX's default) are both
    computed this way (Nova has no QDWH; eps and max_iterations are unused). Differentiable
    through the SVD. Raises ShapeError for fewer than 2 dimensions, ValueError for a bad side
    or method.
    """
    if side not in ("right", "left"):
        raise ValueError(f"polar: side must be 'right' or 'left', got {side!r}{where_am_i()}")
    if method not in ("svd", "qdwh"):
        raise ValueError(f"polar: method must be 'svd' or 'qdwh', got {method!r}{where_am_i()}")
    x = _c.as_inexact("polar", a)
    if x.ndim < 2:
        raise ShapeError(f"polar: a must have at least 2 dimensions, got shape {x.shape}"
                         f"{where_am_i()}")
    u_svd, s, vt = _d.svd(x, full_matrices=False)
    u = u_svd @ vt
    s = s.astype(u.dtype)
    if side == "right":
        p = (_c.mH(vt) * s[..., None, :]) @ vt
    else:
        p = (u_svd * s[..., None, :]) @ _c.mH(u_svd)
    return u, p


def solve_sylvester(A, B, C, *, method="schur", tol=1e-8):
    """X with A X + X B = C (scipy.linalg.solve_sylvester, jax.scipy.linalg.solve_sylvester).

    A: (..., m, m), B: (..., n, n), C: (..., m, n), float or complex; batch dimensions
    broadcast. Solved as the
    (m n) x (m n) linear system (A kron I_n + I_m kron B^T) vec(X) = vec(C) (vec by rows;
    Horn & Johnson, "Topics in Matrix Analysis", 4.4) by LU with partial pivoting: O((m n)^3),
    meant for small m n (Bartels-Stewart on the Schur forms is not implemented). `method`
    ('schur' or 'eigen') is accepted and this one method is used; `tol` is unused: where A and
    -B share an eigenvalue the system is singular and the result is inf / NaN. Differentiable
    through solve. Raises ShapeError for non-square A or B or a C of the wrong shape,
    ValueError for an unknown method.
    """
    if method not in ("schur", "eigen"):
        raise ValueError(f"solve_sylvester: method must be 'schur' or 'eigen', got {method!r}"
                         f"{where_am_i()}")
    a = _square("solve_sylvester", A, "A")
    b = _square("solve_sylvester", B, "B")
    c = _c.as_inexact("solve_sylvester", C, "C")
    if c.ndim < 2:
        raise ShapeError(f"solve_sylvester: C must have at least 2 dimensions, got shape "
                         f"{c.shape}{where_am_i()}")
    m, n = a.shape[-1], b.shape[-1]
    if c.shape[-2:] != (m, n):
        raise ShapeError(f"solve_sylvester: C must have shape (..., {m}, {n}) for A of shape "
                         f"{a.shape} and B of shape {b.shape}, got {c.shape}{where_am_i()}")
    dt = dtypes.result_type(a, b, c)
    batch = broadcast_shapes(a.shape[:-2], b.shape[:-2], c.shape[:-2], name="solve_sylvester")
    a = jnp.broadcast_to(a.astype(dt), (*batch, m, m))
    b = jnp.broadcast_to(b.astype(dt), (*batch, n, n))
    c = jnp.broadcast_to(c.astype(dt), (*batch, m, n))
    eye_m, eye_n = jnp.eye(m, dtype=dt), jnp.eye(n, dtype=dt)
    # K[(i, j), (k, l)] = A[i, k] delta_jl + delta_ik B[l, j]
    k = (a[..., :, None, :, None] * eye_n[:, None, :]
         + eye_m[:, None, :, None] * _d._mT(b)[..., None, :, None, :])
    k = jnp.reshape(k, (*batch, m * n, m * n))
    x = _d.solve(k, jnp.reshape(c, (*batch, m * n, 1)))
    return jnp.reshape(x, (*batch, m, n))
