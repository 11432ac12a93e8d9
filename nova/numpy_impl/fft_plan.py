"""The 1-d discrete Fourier transforms behind nova.numpy.fft, built from matmuls, reshapes and
elementwise products (no FFT primitive), so that jit, grad, jvp and vmap see ordinary ops.

For a length N along one axis (the transform of that axis of every other index at once):

- N <= DENSE_MAX: one matmul with the DFT matrix W[n, k] = exp(sign 2 pi i n k / N), built on
  the host in float64 (the exponent reduced modulo N first) and cast to the parts' dtype.
- composite N = N1 * N2: the mixed-radix Cooley-Tukey step (J. W. Cooley and J. W. Tukey, "An
  algorithm for the machine calculation of complex Fourier series", Math. Comp. 19, 1965) in
  the "four-step" arrangement of D. H. Bailey, "FFTs in external or hierarchical memory",
  J. Supercomputing 4, 1990: view x as an N1 x N2 matrix (n = N2 n1 + n2), transform its
  columns (size N1), multiply by the twiddles exp(sign 2 pi i n2 k1 / N), transform its rows
  (size N2), and read the result transposed (k = k1 + N1 k2). Each stage is a batched matmul
  (or recursion), with N1 the divisor of N nearest sqrt(N).
- prime N > DENSE_MAX: Bluestein's chirp-z algorithm (L. I. Bluestein, "A linear filtering
  approach to the computation of discrete Fourier transform", IEEE Trans. Audio
  Electroacoustics 18(4), 1970): n k = (n^2 + k^2 - (k - n)^2) / 2 turns the DFT into a
  circular convolution with a chirp, done by transforms of a power-of-two length M >= 2N - 1;
  the chirp's spectrum is a constant, computed once on the host with numpy.fft in float64.

Real input of even length N > DENSE_MAX is packed as z[m] = x[2m] + i x[2m+1] and transformed
at length N/2, then untangled (the standard "two for one" real FFT, e.g. W. H. Press et al.,
Numerical Recipes, 3rd ed., section 12.3); the real inverse runs the same steps backward.
Small real transforms use real DFT matrices directly (two real matmuls instead of four).
"""

from __future__ import annotations

import functools
import math

import numpy as np

from nova.core import dtypes
from nova.ops import complex as cx
from nova.ops import lax

DENSE_MAX = 64  # lengths up to this use one DFT matmul


# ---------------------------------------------------------------- host constants (float64)

def _phase(numer, n: int):
    """exp(2 pi i numer / n) for integer numer, reduced modulo n first (accurate for large n)."""
    return np.exp(2j * np.pi * (np.asarray(numer) % n) / n)


@functools.lru_cache(maxsize=256)
def _dft_matrix(n: int, sign: int, dtype, cols: int | None = None):
    k = np.arange(n if cols is None else cols)
    w = _phase(sign * np.outer(np.arange(n), k), n)
    return w.astype(dtype)


@functools.lru_cache(maxsize=32)
def _twiddles(n1: int, n2: int, sign: int, dtype):
    # T[n2, k1] = exp(sign 2 pi i n2 k1 / (n1 n2))
    return _phase(sign * np.outer(np.arange(n2), np.arange(n1)), n1 * n2).astype(dtype)


@functools.lru_cache(maxsize=16)
def _bluestein_constants(n: int, sign: int, dtype):
    m = 1 << (2 * n - 2).bit_length()  # power of two >= 2n - 1
    idx = np.arange(n)
    chirp = np.exp(sign * 1j * np.pi * ((idx * idx) % (2 * n)) / n)  # w[n]
    b = np.zeros(m, np.complex128)
    b[:n] = np.conj(chirp)
    b[m - n + 1:] = np.conj(chirp[1:])[::-1]
    spectrum = np.fft.fft(b) / m  # the circular convolution's kernel (and its 1/M)
    return m, chirp.astype(dtype), spectrum.astype(dtype)


@functools.lru_cache(maxsize=256)
def _real_inverse_matrices(n: int, dtype):
    # x[t] = sum_k c_k (Re X_k cos(2 pi k t / n) - Im X_k sin(2 pi k t / n)), c_k = 1 at k = 0
    # and at the Nyquist index, 2 elsewhere (each such X_k stands for itself and X_{n-k}).
    k = np.arange(n // 2 + 1)
    c = np.where((k == 0) | (2 * k == n), 1.0, 2.0)[:, None]
    w = _phase(np.outer(k, np.arange(n)), n)
    return (c * w.real).astype(dtype), (-c * w.imag).astype(dtype)


def _split(n: int):
    """(n1, n2) with n1 * n2 == n and n1 the divisor nearest sqrt(n) from below, or None."""
    for n1 in range(math.isqrt(n), 1, -1):
        if n % n1 == 0:
            return n1, n // n1
    return None


# ---------------------------------------------------------------- complex transforms of rows

def _const(value):
    from nova.numpy_impl.util import asarray

    return asarray(value)


def _matmul_last(x, w):
    """x (..., n) @ w (n, k)."""
    return lax.dot_general(x, _const(w), (((x.ndim - 1,), (0,)), ((), ())))


def _rows(x, sign: int):
    """Unnormalized DFT of each row of complex x (B, N): sum_n x[n] exp(sign 2 pi i n k / N)."""
    n = x.shape[1]
    if n == 1:
        return x
    if n <= DENSE_MAX:
        return _matmul_last(x, _dft_matrix(n, sign, x.dtype))
    factors = _split(n)
    if factors is None:
        return _bluestein(x, sign)
    n1, n2 = factors
    b = x.shape[0]
    # Contractions run over the last axis only (a contraction over a middle axis is far
    # slower in the generated kernels); the transposes between the stages are cheap copies.
    y = lax.transpose(lax.reshape(x, (b, n1, n2)), (0, 2, 1))  # (B, N2, N1)
    y = lax.reshape(_rows(lax.reshape(y, (b * n2, n1)), sign), (b, n2, n1))  # (B, N2, K1)
    y = y * _const(_twiddles(n1, n2, sign, x.dtype))
    y = lax.reshape(lax.transpose(y, (0, 2, 1)), (b * n1, n2))  # (B K1, N2)
    z = lax.reshape(_rows(y, sign), (b, n1, n2))  # (B, K1, K2)
    return lax.reshape(lax.transpose(z, (0, 2, 1)), (b, n))


def _bluestein(x, sign: int):
    b, n = x.shape
    m, chirp, spectrum = _bluestein_constants(n, sign, x.dtype)
    a = lax.pad(x * _const(chirp), _const(np.zeros((), x.dtype)), [(0, 0, 0), (0, m - n, 0)])
    conv = _rows(_rows(a, -1) * _const(spectrum), +1)
    return lax.slice(conv, (0, 0), (b, n)) * _const(chirp)


# ---------------------------------------------------------------- real <-> half spectrum

def _real_rows(x):
    """rfft of each row of real x (B, N): the N // 2 + 1 non-negative frequencies, complex."""
    b, n = x.shape
    cdt = dtypes.complex_dtype(x.dtype)
    if n <= DENSE_MAX or n % 2:
        if n <= DENSE_MAX:  # a real operand: two real matmuls
            return _matmul_last(x.astype(cdt), _dft_matrix(n, -1, cdt, n // 2 + 1))
        return lax.slice(_rows(x.astype(cdt), -1), (0, 0), (b, n // 2 + 1))
    h = n // 2
    pairs = lax.reshape(x, (b, h, 2))
    z = cx.complex(lax.reshape(lax.slice(pairs, (0, 0, 0), (b, h, 1)), (b, h)),
                   lax.reshape(lax.slice(pairs, (0, 0, 1), (b, h, 2)), (b, h)))
    zf = _rows(z, -1)
    zk = lax.concatenate([zf, lax.slice(zf, (0, 0), (b, 1))], 1)  # Z[k], k = 0..h
    zr = cx.conj(lax.rev(zk, (1,)))  # conj(Z[h - k])
    even = (zk + zr) * 0.5
    odd = (zk - zr) * _const(np.asarray(-0.5j, cdt))
    return even + odd * _const(_phase(-np.arange(h + 1), n).astype(cdt))


def _half_rows(xh, n: int):
    """irfft (unnormalized: the plain sum) of each row of complex xh (B, n // 2 + 1): real
    (B, n). The imaginary parts of the zero and Nyquist frequencies are ignored, as numpy."""
    b, m = xh.shape
    part = dtypes.real_dtype(xh.dtype)
    if n <= DENSE_MAX:
        cos, sin = _real_inverse_matrices(n, part)
        return _matmul_last(cx.real(xh), cos) + _matmul_last(cx.imag(xh), sin)
    mask = np.ones(m, part)
    mask[0] = 0
    if n % 2 == 0:
        mask[-1] = 0
    xh = cx.complex(cx.real(xh), cx.imag(xh) * _const(mask))
    if n % 2:
        tail = cx.conj(lax.rev(lax.slice(xh, (0, 1), (b, m)), (1,)))
        return cx.real(_rows(lax.concatenate([xh, tail], 1), +1))
    h = n // 2
    head = lax.slice(xh, (0, 0), (b, h))  # X[k], k < h
    mirror = cx.conj(lax.rev(lax.slice(xh, (0, 1), (b, h + 1)), (1,)))  # conj(X[h - k])
    even = head + mirror
    odd = (head - mirror) * _const(_phase(np.arange(h), n).astype(xh.dtype))
    z = _rows(even + odd * _const(np.asarray(1j, xh.dtype)), +1)
    pairs = lax.concatenate([lax.reshape(cx.real(z), (b, h, 1)),
                             lax.reshape(cx.imag(z), (b, h, 1))], 2)
    return lax.reshape(pairs, (b, n))


# ---------------------------------------------------------------- along one axis of an array

def _along(x, axis: int, fn, out_len: int):
    """fn applied to the rows of x's `axis` (moved last and flattened to (B, N)); the result's
    rows of length out_len go back to `axis`."""
    nd = x.ndim
    perm = [d for d in range(nd) if d != axis] + [axis]
    moved = x if axis == nd - 1 else lax.transpose(x, perm)
    lead = moved.shape[:-1]
    rows = lax.reshape(moved, (math.prod(lead), moved.shape[-1]))
    out = lax.reshape(fn(rows), (*lead, out_len))
    if axis == nd - 1:
        return out
    return lax.transpose(out, list(np.argsort(perm)))


def complex_transform(x, axis: int, sign: int):
    """The unnormalized DFT of complex x along `axis` (sign -1: forward, +1: inverse)."""
    return _along(x, axis, lambda r: _rows(r, sign), x.shape[axis])


def real_forward(x, axis: int):
    """rfft of real (float) x along `axis`, unnormalized: length N // 2 + 1, complex."""
    return _along(x, axis, _real_rows, x.shape[axis] // 2 + 1)


def real_inverse(xh, axis: int, n: int):
    """irfft of complex xh (length n // 2 + 1 along `axis`), unnormalized: real, length n."""
    return _along(xh, axis, lambda r: _half_rows(r, n), n)
