"""Special matrices of scipy.linalg / jax.scipy.linalg, built from Nova array operations
(gathers and masks over index grids) so they trace under nova.jit, nova.grad and nova.vmap;
the constructors of a static order n (hilbert, pascal, hadamard, ...) are exact host constants.

Definitions follow SciPy's reference pages (scipy.linalg, "Special matrices") and Golub & Van
Loan, "Matrix Computations", 4th ed., 4.7 (Toeplitz and Hankel) and 7.4.6 (companion).
Complex (complex64 / complex128) vectors give complex matrices; dft's matrix is complex."""

from __future__ import annotations

import math
import operator

import numpy as np

import nova.numpy as jnp
from nova.core import dtypes
from nova.numpy_impl.util import broadcast_shapes, where_am_i

__all__ = ["block_diag", "circulant", "companion", "convolution_matrix", "dft", "fiedler",
           "fiedler_companion", "hadamard", "hankel", "helmert", "hilbert", "invhilbert",
           "invpascal", "leslie", "pascal", "toeplitz"]


# --- helpers ----------------------------------------------------------------------------------


def _vector(name, x, arg, inexact=False, scalar_ok=True):
    """x as an array of at least one dimension (a scalar becomes (1,) unless scalar_ok=False)."""
    a = jnp.asarray(x)
    if a.ndim == 0 and not scalar_ok:
        raise ValueError(f"{name}: {arg} must be at least 1-dimensional, got a scalar"
                         f"{where_am_i()}")
    if inexact and not dtypes.is_float(a.dtype):
        a = a.astype(dtypes.default_float)
    return jnp.atleast_1d(a)


def _common(name, a, b):
    """a (..., m), b (..., n) in one dtype with broadcast leading (batch) dimensions."""
    dt = dtypes.result_type(a, b)
    batch = broadcast_shapes(a.shape[:-1], b.shape[:-1], name=name)
    a = jnp.broadcast_to(a.astype(dt), (*batch, a.shape[-1]))
    b = jnp.broadcast_to(b.astype(dt), (*batch, b.shape[-1]))
    return a, b


def _grid(m, n):
    """Row and column indices (m, 1) and (1, n) as int32."""
    return (jnp.arange(m, dtype=dtypes.int32)[:, None], jnp.arange(n, dtype=dtypes.int32)[None, :])


def _static_order(name, n):
    try:
        n = operator.index(n)
    except TypeError:
        raise TypeError(f"{name}: n must be an integer, got {type(n).__name__}"
                        f"{where_am_i()}") from None
    if n < 0:
        raise ValueError(f"{name}: n must be non-negative, got {n}{where_am_i()}")
    return n


def _kind(name, kind):
    kind = "symmetric" if kind is None else kind
    if kind not in ("symmetric", "lower", "upper"):
        raise ValueError(f"{name}: kind must be 'symmetric', 'lower' or 'upper', got {kind!r}"
                         f"{where_am_i()}")
    return kind


# --- matrices from vectors ---------------------------------------------------------------------


def toeplitz(c, r=None):
    """The Toeplitz matrix T[..., i, j] = c[..., i - j] (i >= j), r[..., j - i] (i < j).

    c: (..., m) first column; r: (..., n) first row (default conj(c), so a complex c gives a
    Hermitian matrix, as SciPy's and JAX's; r[..., 0] is ignored, the
    diagonal is c[..., 0]); scalars count as length 1. Leading dimensions broadcast and give a
    batch. Returns (..., m, n) in the promoted dtype of c and r (ints stay ints), as
    jax.scipy.linalg.toeplitz. Raises ShapeError if the batch dimensions do not broadcast.
    """
    c = _vector("toeplitz", c, "c")
    r = jnp.conj(c) if r is None else _vector("toeplitz", r, "r")
    c, r = _common("toeplitz", c, r)
    m, n = c.shape[-1], r.shape[-1]
    if m == 0 or n == 0:
        return jnp.zeros((*c.shape[:-1], m, n), c.dtype)
    values = jnp.concatenate([jnp.flip(c, axis=-1), r[..., 1:]], axis=-1)
    i, j = _grid(m, n)
    return jnp.take(values, (m - 1) - i + j, axis=-1)


def hankel(c, r=None):
    """The Hankel matrix H[..., i, j] = v[..., i + j], v = concatenate([c, r[..., 1:]]).

    c: (..., m) first column; r: (..., n) last row (default zeros like c; r[..., 0] is
    ignored). Leading dimensions broadcast. Returns (..., m, n) in the promoted dtype, as
    scipy.linalg.hankel. Raises ValueError for a scalar c or r.
    """
    c = _vector("hankel", c, "c", scalar_ok=False)
    r = jnp.zeros_like(c) if r is None else _vector("hankel", r, "r", scalar_ok=False)
    c, r = _common("hankel", c, r)
    m, n = c.shape[-1], r.shape[-1]
    if m == 0 or n == 0:
        return jnp.zeros((*c.shape[:-1], m, n), c.dtype)
    values = jnp.concatenate([c, r[..., 1:]], axis=-1)
    i, j = _grid(m, n)
    return jnp.take(values, i + j, axis=-1)


def circulant(c):
    """The circulant matrix C[..., i, j] = c[..., (i - j) mod n] (first column c).

    c: (..., n); returns (..., n, n) in c's dtype, as jax.scipy.linalg.circulant.
    """
    c = _vector("circulant", c, "c")
    n = c.shape[-1]
    i, j = _grid(n, n)
    return jnp.take(c, (i - j) % max(n, 1), axis=-1)


def leslie(f, s):
    """The Leslie matrix: first row f, first sub-diagonal s, zeros elsewhere.

    f: (..., n) fecundities, n >= 2; s: (..., n - 1) survival coefficients. Returns (..., n, n)
    in the promoted dtype of f and s, as jax.scipy.linalg.leslie. Raises ValueError when
    n < 2 or s's last dimension is not n - 1.
    """
    f = _vector("leslie", f, "f")
    s = _vector("leslie", s, "s")
    n = f.shape[-1]
    if n < 2:
        raise ValueError(f"leslie: f must have length at least 2 in its last dimension, got "
                         f"shape {f.shape}{where_am_i()}")
    if s.shape[-1] != n - 1:
        raise ValueError(f"leslie: s must have length len(f) - 1 = {n - 1} in its last "
                         f"dimension, got shapes f {f.shape} and s {s.shape}{where_am_i()}")
    f, s = _common("leslie", f, s)
    i, j = _grid(n, n)
    s_rows = jnp.concatenate([jnp.zeros_like(s[..., :1]), s], axis=-1)[..., :, None]
    zero = jnp.zeros((), f.dtype)
    sub = jnp.where((j == i - 1), s_rows, zero)
    return jnp.where(i == 0, f[..., None, :], sub)


def companion(a):
    """The companion matrix of the polynomial a[0] x^(n-1) + ... + a[n-1]: first row
    -a[1:] / a[0], ones on the first sub-diagonal (its eigenvalues are the roots).

    a: (..., n), n >= 2; ints become float32. Returns (..., n - 1, n - 1) float. A zero a[0]
    gives inf / NaN (not checked, as jax.scipy.linalg.companion). Raises ValueError for n < 2.
    """
    a = _vector("companion", a, "a", inexact=True)
    if a.shape[-1] < 2:
        raise ValueError(f"companion: a must have length at least 2 in its last dimension, got "
                         f"shape {a.shape}{where_am_i()}")
    m = a.shape[-1] - 1
    first = -a[..., 1:] / a[..., :1]
    i, j = _grid(m, m)
    ones = jnp.where(j == i - 1, jnp.ones((), a.dtype), jnp.zeros((), a.dtype))
    return jnp.where(i == 0, first[..., None, :], ones)


def fiedler(a):
    """The symmetric Fiedler matrix F[..., i, j] = |a[..., i] - a[..., j]|.

    a: (..., n); returns (..., n, n) in a's dtype, as jax.scipy.linalg.fiedler.
    """
    a = _vector("fiedler", a, "a")
    return jnp.abs(a[..., :, None] - a[..., None, :])


def fiedler_companion(a):
    """The Fiedler companion matrix of the polynomial with coefficients a (descending): a
    pentadiagonal matrix with the companion matrix's eigenvalues (Fiedler 2003, "A note on
    companion matrices", Linear Algebra Appl. 372).

    a: (..., n), n >= 1; ints become float32. Returns (..., n - 1, n - 1) float. Raises
    ValueError when a's last dimension is empty.
    """
    a = _vector("fiedler_companion", a, "a", inexact=True)
    if a.shape[-1] == 0:
        raise ValueError(f"fiedler_companion: a must have a non-empty last dimension, got "
                         f"shape {a.shape}{where_am_i()}")
    n = a.shape[-1] - 1
    if n == 0:
        return jnp.zeros((*a.shape[:-1], 0, 0), a.dtype)
    a = a / a[..., :1]
    i, j = _grid(n, n)
    coef = jnp.concatenate([-a, jnp.zeros_like(a[..., :2])], axis=-1)  # coef[k] = -a[k]
    even, odd = i % 2 == 0, i % 2 == 1
    one, zero = jnp.ones((), a.dtype), jnp.zeros((), a.dtype)
    # scipy.linalg.fiedler_companion's layout: even rows i carry -a[i + 2] at (i, i + 1) and
    # a one at (i, i + 2), and -a[i + 1] at (i, i - 1) from row 2; odd rows from 3 a one at
    # (i, i - 2); the first column starts with -a[1], 1.
    above = jnp.take(coef, jnp.broadcast_to(i + 2, (n, n)), axis=-1)
    below = jnp.take(coef, jnp.broadcast_to(i + 1, (n, n)), axis=-1)
    out = jnp.where(even & (j == i + 1), above, zero)
    out = jnp.where(even & (j == i + 2), one, out)
    out = jnp.where(even & (i >= 2) & (j == i - 1), below, out)
    out = jnp.where(odd & (i >= 3) & (j == i - 2), one, out)
    out = jnp.where((i == 0) & (j == 0), coef[..., 1:2, None], out)
    return jnp.where((i == 1) & (j == 0), one, out)


def convolution_matrix(a, n, mode="full"):
    """The matrix A with A @ v == numpy.convolve(a, v, mode) for every v of length n.

    a: (..., m), m >= 1; n: a positive int (the columns); mode 'full' (m + n - 1 rows),
    'same' (max(m, n) rows) or 'valid' (max(m, n) - min(m, n) + 1 rows). Returns
    (..., rows, n) in a's dtype, as jax.scipy.linalg.convolution_matrix. Raises ValueError
    for a scalar or empty a, a non-positive n or an unknown mode.
    """
    n = operator.index(n)
    if n <= 0:
        raise ValueError(f"convolution_matrix: n must be a positive integer, got {n}"
                         f"{where_am_i()}")
    if mode not in ("full", "same", "valid"):
        raise ValueError(f"convolution_matrix: mode must be 'full', 'same' or 'valid', got "
                         f"{mode!r}{where_am_i()}")
    a = _vector("convolution_matrix", a, "a", scalar_ok=False)
    m = a.shape[-1]
    if m < 1:
        raise ValueError(f"convolution_matrix: a must be non-empty, got shape {a.shape}"
                         f"{where_am_i()}")
    rows = {"full": m + n - 1, "same": max(m, n), "valid": max(m, n) - min(m, n) + 1}[mode]
    start = {"full": 0, "same": (min(m, n) - 1) // 2, "valid": min(m, n) - 1}[mode]
    i, j = _grid(rows, n)
    d = i + start - j
    inside = (d >= 0) & (d < m)
    vals = jnp.take(a, jnp.clip(d, 0, m - 1), axis=-1)
    return jnp.where(inside, vals, jnp.zeros((), a.dtype))


def block_diag(*arrs):
    """The block-diagonal matrix with the given blocks, in order.

    arrs: arrays of at most 2 dimensions (a scalar is a 1x1 block, a (k,) vector a 1 x k
    row). Returns (sum of rows, sum of columns) in the promoted dtype; no blocks give an
    empty (1, 0) float32 array, as scipy.linalg.block_diag. Raises ValueError for a block
    of more than 2 dimensions.
    """
    if not arrs:
        return jnp.zeros((1, 0), dtypes.default_float)
    blocks = [jnp.asarray(a) for a in arrs]
    for k, b in enumerate(blocks):
        if b.ndim > 2:
            raise ValueError(f"block_diag: every block must have at most 2 dimensions, got "
                             f"shape {b.shape} for argument {k}{where_am_i()}")
    dt = dtypes.result_type(*blocks)
    blocks = [jnp.atleast_2d(b).astype(dt) for b in blocks]
    total = sum(b.shape[1] for b in blocks)
    rows, col = [], 0
    for b in blocks:
        rows.append(jnp.pad(b, ((0, 0), (col, total - col - b.shape[1]))))
        col += b.shape[1]
    return jnp.concatenate(rows, axis=0)


# --- matrices of a static order n (exact host constants) ----------------------------------------


def _constant(values, dtype=None):
    return jnp.asarray(np.asarray(values, np.float64), dtype or dtypes.default_float)


def _to_float(x):
    try:
        return float(x)
    except OverflowError:  # an exact integer beyond float64's range
        return math.inf if x > 0 else -math.inf


def hilbert(n):
    """The Hilbert matrix H[i, j] = 1 / (i + j + 1), 0 <= i, j < n: (n, n) float32."""
    n = _static_order("hilbert", n)
    k = np.arange(n, dtype=np.float64)
    return _constant(1.0 / (k[:, None] + k[None, :] + 1.0))


def invhilbert(n):
    """The inverse of hilbert(n): (n, n) float32 from the exact integer entries
    (-1)^(i+j) (i + j + 1) C(n + i, n - j - 1) C(n + j, n - i - 1) C(i + j, i)^2
    (Choi 1983, "Tricks or treats with the Hilbert matrix", Amer. Math. Monthly 90);
    entries beyond float32's range (n >= 14) are +-inf."""
    n = _static_order("invhilbert", n)
    out = np.zeros((n, n), np.float64)
    for i in range(n):
        for j in range(n):
            v = (i + j + 1) * math.comb(n + i, n - j - 1) * math.comb(n + j, n - i - 1)
            out[i, j] = _to_float((-1) ** (i + j) * v * math.comb(i + j, i) ** 2)
    return _constant(out)


def _pascal_lower(n, inverse):
    sign = (lambda i, j: (-1) ** (i - j)) if inverse else (lambda i, j: 1)
    return [[sign(i, j) * math.comb(i, j) for j in range(n)] for i in range(n)]


def _pascal(name, n, kind, inverse):
    n = _static_order(name, n)
    kind = _kind(name, kind)
    low = _pascal_lower(n, inverse)
    up = [list(row) for row in zip(*low, strict=True)] if n else []
    if kind == "lower":
        out = low
    elif kind == "upper":
        out = up
    else:  # P = L L^T (Edelman & Strang 2004, "Pascal matrices"), P^-1 = L^-T L^-1
        first, second = (up, low) if inverse else (low, up)
        out = [[sum(first[i][k] * second[k][j] for k in range(n)) for j in range(n)]
               for i in range(n)]
    return _constant([[_to_float(v) for v in row] for row in out]).reshape((n, n))


def pascal(n, kind=None):
    """The Pascal matrix of order n: kind 'symmetric' (default; C(i + j, i)), 'lower'
    (C(i, j)) or 'upper' (its transpose). (n, n) float32 from exact integers (exact while
    the entries are below 2^24). Raises ValueError for an unknown kind."""
    return _pascal("pascal", n, kind, inverse=False)


def invpascal(n, kind=None):
    """The inverse of pascal(n, kind): lower (-1)^(i - j) C(i, j), upper its transpose,
    symmetric their product U^-1 L^-1. (n, n) float32 from exact integers."""
    return _pascal("invpascal", n, kind, inverse=True)


def helmert(n, full=False):
    """The Helmert matrix: row k - 1 (k = 1..n-1) is (1, ..., 1, -k, 0, ..., 0) / sqrt(k(k+1))
    with k ones; with full=True a first row of 1 / sqrt(n) is added (then orthogonal).
    Returns (n - 1, n), or (n, n) with full, float32. Raises ValueError for n < 1."""
    n = _static_order("helmert", n)
    if n < 1:
        raise ValueError(f"helmert: n must be a positive integer, got {n}{where_am_i()}")
    out = np.zeros((n, n), np.float64)
    out[0] = 1.0 / math.sqrt(n)
    for k in range(1, n):
        out[k, :k] = 1.0 / math.sqrt(k * (k + 1))
        out[k, k] = -k / math.sqrt(k * (k + 1))
    return _constant(out if full else out[1:])


def hadamard(n, dtype=int):
    """The Sylvester-Hadamard matrix of order n (a power of 2): H_1 = [[1]],
    H_2m = [[H_m, H_m], [H_m, -H_m]]; H H^T = n I. Returns (n, n) of `dtype` (int: int32).
    Raises ValueError when n is not a positive power of 2."""
    n = _static_order("hadamard", n)
    if n < 1 or n & (n - 1):
        raise ValueError(f"hadamard: n must be a positive power of 2, got {n}{where_am_i()}")
    h = np.ones((1, 1), np.float64)
    while h.shape[0] < n:
        h = np.block([[h, h], [h, -h]])
    return jnp.asarray(h, dtypes.canonicalize(dtype))



def dft(n, scale=None, *, dtype=None):
    """The discrete Fourier transform matrix M[j, k] = w^(j k), w = exp(-2 pi i / n), so that
    M @ x == numpy.fft.fft(x) (scipy.linalg.dft, jax.scipy.linalg.dft).

    n: a non-negative int; scale None (no scaling), 'sqrtn' (M / sqrt(n), unitary) or 'n'
    (M / n). dtype: a complex dtype (default complex64; float dtypes give their complex
    dtype). Returns (n, n), an exact host constant (j k is reduced mod n before the
    exponential, so the entries are accurate for large n). Raises ValueError for a negative n
    or an unknown scale, TypeError for a non-integer n.
    """
    n = _static_order("dft", n)
    if scale not in (None, "sqrtn", "n"):
        raise ValueError(f"dft: scale must be None, 'sqrtn' or 'n', got {scale!r}{where_am_i()}")
    dt = dtypes.complex64 if dtype is None else dtypes.canonicalize(dtype)
    if not dtypes.is_complex(dt):
        dt = dtypes.complex_dtype(dt)
    k = np.arange(n, dtype=np.int64)
    m = np.exp(-2j * np.pi * ((k[:, None] * k[None, :]) % max(n, 1)) / max(n, 1))
    if scale == "sqrtn":
        m = m / math.sqrt(n)
    elif scale == "n":
        m = m / n
    return jnp.asarray(m.astype(np.complex128), dt)
