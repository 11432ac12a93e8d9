"""nova.scipy.fft: the discrete cosine transforms of scipy.fft (types 1-4; jax.scipy.fft has
type 2 only) written with Nova's ops, plus scipy.fft's names for nova.numpy.fft's transforms
and next_fast_len.

Definitions (scipy.fft's, unnormalized, N the transform length, n, k = 0..N-1):

- type 1: y[k] = x[0] + (-1)^k x[N-1] + 2 sum_{n=1}^{N-2} x[n] cos(pi k n / (N - 1))  (N >= 2)
- type 2: y[k] = 2 sum_n x[n] cos(pi k (2n + 1) / (2N))
- type 3: y[k] = x[0] + 2 sum_{n>=1} x[n] cos(pi n (2k + 1) / (2N))
- type 4: y[k] = 2 sum_n x[n] cos(pi (2n + 1) (2k + 1) / (4N))

idct of type t is the transform of type 1, 3, 2, 4 (for t = 1, 2, 3, 4), scaled so that
idct(dct(x)) == x. norm (scipy's): None / "backward" scales the inverse by 1 / (2 (N - 1))
for type 1 and 1 / (2N) otherwise; "forward" the forward transform instead; "ortho" makes
the transform matrix orthogonal (the first / last entries weighted as scipy's default
orthogonalize=True).

Computation: lengths up to fft_plan.DENSE_MAX are one matmul with the cosine matrix (built on
the host in float64, the normalization folded in). Longer ones go through nova.numpy.fft's real
transforms: type 1 as the rfft of the even extension [x, x[N-2:0:-1]] (length 2 (N - 1));
types 2 and 3 by J. Makhoul, "A fast cosine transform in one and two dimensions", IEEE Trans.
ASSP 28(1), 1980 (the even-indexed entries followed by the odd-indexed ones reversed, an N-point
rfft and a twiddle; type 3 runs these steps backward through an irfft); type 4 as the real part
of a 2N-point fft of x[n] exp(-i pi n / (2N)) times exp(-i pi (2k + 1) / (4N)).

dtypes: float64 computes and returns float64; every other real input (float32, float16,
bfloat16, integers, bool) float32; complex input has its real and imaginary parts transformed
separately (as scipy), complex64 / complex128. jit, vmap and grad apply (ordinary ops).
"""

from __future__ import annotations

import functools
import math
import operator

import numpy as np

from nova.core import dtypes
from nova.numpy_impl import fft_plan as plan
from nova.numpy_impl.fft import (
    _axes_lengths,
    _check_norm,
    _length,
    _resize,
    fft,
    fft2,
    fftfreq,
    fftn,
    fftshift,
    hfft,
    ifft,
    ifft2,
    ifftn,
    ifftshift,
    ihfft,
    irfft,
    irfft2,
    irfftn,
    rfft,
    rfft2,
    rfftfreq,
    rfftn,
)
from nova.numpy_impl.util import asarray, normalize_axis, where_am_i
from nova.ops import complex as cx
from nova.ops import lax

__all__ = [
    "dct", "dctn", "fft", "fft2", "fftfreq", "fftn", "fftshift", "hfft", "idct", "idctn", "ifft",
    "ifft2", "ifftn", "ifftshift", "ihfft", "irfft", "irfft2", "irfftn", "next_fast_len", "rfft",
    "rfft2", "rfftfreq", "rfftn",
]

_INVERSE_TYPE = {1: 1, 2: 3, 3: 2, 4: 4}
builtin_type = type  # the transforms' `type` argument shadows the builtin


# ---------------------------------------------------------------- host constants (float64)

def _cos_matrix(kind: int, n: int):
    """C[k, m]: the unnormalized transform of type `kind`, y = C @ x (exponents reduced
    modulo the period first, so large n keeps its accuracy)."""
    k, m = np.arange(n)[:, None], np.arange(n)[None, :]
    if kind == 1:
        c = 2.0 * np.cos(np.pi * ((k * m) % (2 * (n - 1))) / (n - 1))
        c[:, 0] = 1.0
        c[:, -1] = np.where(k[:, 0] % 2, -1.0, 1.0)
        return c
    if kind == 2:
        return 2.0 * np.cos(np.pi * ((k * (2 * m + 1)) % (4 * n)) / (2 * n))
    if kind == 3:
        c = 2.0 * np.cos(np.pi * ((m * (2 * k + 1)) % (4 * n)) / (2 * n))
        c[:, 0] = 1.0
        return c
    return 2.0 * np.cos(np.pi * (((2 * k + 1) * (2 * m + 1)) % (8 * n)) / (4 * n))


@functools.lru_cache(maxsize=256)
def _scales(kind: int, n: int, norm, scaled: bool):
    """(pre, post): the transform computed is post * T_kind(pre * x) (host float64 vectors).
    scaled: whether the 1 / (2N) (type 1: 1 / (2 (N - 1))) of the non-orthogonal norms
    applies."""
    pre, post = np.ones(n), np.ones(n)
    if norm == "ortho":
        if kind == 1:
            pre[[0, -1]] = math.sqrt(2.0)
            post[:] = 1.0 / math.sqrt(2.0 * (n - 1))
            post[[0, -1]] /= math.sqrt(2.0)
        elif kind == 2:
            post[:] = 1.0 / math.sqrt(2.0 * n)
            post[0] = 1.0 / math.sqrt(4.0 * n)
        elif kind == 3:
            pre[:] = 1.0 / math.sqrt(2.0 * n)
            pre[0] = 1.0 / math.sqrt(n)
        else:
            post[:] = 1.0 / math.sqrt(2.0 * n)
    elif scaled:
        post[:] = 1.0 / (2.0 * (n - 1) if kind == 1 else 2.0 * n)
    return pre, post


@functools.lru_cache(maxsize=256)
def _dense_matrix(kind: int, n: int, norm, scaled: bool, dtype):
    """The (in, out) matrix of the normalized transform, for x @ M."""
    pre, post = _scales(kind, n, norm, scaled)
    return (pre[:, None] * _cos_matrix(kind, n).T * post[None, :]).astype(dtype)


def _phases(numer, denom: int, dtype):
    """exp(-i pi numer / denom) for integer numer (reduced modulo 2 denom first)."""
    return np.exp(-1j * np.pi * (np.asarray(numer) % (2 * denom)) / denom).astype(dtype)


# ---------------------------------------------------------------- transforms of rows (B, N)

def _const(value):
    return asarray(value)


def _type1(rows):
    b, n = rows.shape
    ext = lax.concatenate([rows, lax.rev(lax.slice(rows, (0, 1), (b, n - 1)), (1,))], 1)
    return cx.real(plan.real_forward(ext, 1))  # 2 (N - 1) points: N half-spectrum values


def _interleave(first, second, n: int):
    """out[2j] = first[j], out[2j + 1] = second[j], cut to length n (second may be shorter)."""
    b, h = first.shape
    if second.shape[1] < h:
        second = lax.pad(second, _const(np.zeros((), second.dtype)), [(0, 0, 0), (0, 1, 0)])
    pairs = lax.concatenate([lax.reshape(first, (b, h, 1)), lax.reshape(second, (b, h, 1))], 2)
    return lax.slice(lax.reshape(pairs, (b, 2 * h)), (0, 0), (b, n))


def _type2(rows):
    b, n = rows.shape
    even = lax.slice(rows, (0, 0), (b, n), (1, 2))
    odd = lax.rev(lax.slice(rows, (0, 1), (b, n), (1, 2)), (1,))
    spec = plan.real_forward(lax.concatenate([even, odd], 1), 1)  # V[k], k = 0..N // 2
    z = spec * _const(_phases(np.arange(n // 2 + 1), 2 * n, spec.dtype))
    head = cx.real(z) * 2.0  # y[k], k = 0..N // 2
    tail = lax.rev(lax.slice(cx.imag(z), (0, 1), (b, (n + 1) // 2)), (1,)) * -2.0
    return lax.concatenate([head, tail], 1)  # ..., then y[N - k] = -2 Im z[k]


def _type3(rows):
    b, n = rows.shape
    h = n // 2
    re = lax.slice(rows, (0, 0), (b, h + 1))  # x[k], k = 0..N // 2
    mirror = lax.slice(lax.rev(rows, (1,)), (0, 0), (b, h))  # x[N - k], k = 1..N // 2
    im = lax.pad(mirror, _const(np.zeros((), rows.dtype)), [(0, 0, 0), (1, 0, 0)]) * -1.0
    spec = cx.complex(re, im) * _const(_phases(-np.arange(h + 1), 2 * n,
                                                dtypes.complex_dtype(rows.dtype)))
    v = plan.real_inverse(spec, 1, n)  # the plain (unscaled) inverse sum
    head = lax.slice(v, (0, 0), (b, (n + 1) // 2))
    tail = lax.slice(lax.rev(v, (1,)), (0, 0), (b, h))
    return _interleave(head, tail, n)


def _type4(rows):
    b, n = rows.shape
    cdt = dtypes.complex_dtype(rows.dtype)
    u = rows.astype(cdt) * _const(_phases(np.arange(n), 2 * n, cdt))
    u = lax.pad(u, _const(np.zeros((), cdt)), [(0, 0, 0), (0, n, 0)])
    spec = lax.slice(plan.complex_transform(u, 1, -1), (0, 0), (b, n))
    return cx.real(spec * _const(_phases(2 * np.arange(n) + 1, 4 * n, cdt))) * 2.0


_FAST = {1: _type1, 2: _type2, 3: _type3, 4: _type4}


def _transform_rows(rows, kind: int, norm, scaled: bool):
    n = rows.shape[1]
    if n <= plan.DENSE_MAX:
        m = _dense_matrix(kind, n, norm, scaled, rows.dtype)
        return lax.dot_general(rows, _const(m), (((1,), (0,)), ((), ())))
    pre, post = _scales(kind, n, norm, scaled)
    if norm == "ortho" and kind in (1, 3):
        rows = rows * _const(pre.astype(rows.dtype))
    out = _FAST[kind](rows)
    if norm == "ortho" or scaled:
        out = out * _const(post.astype(rows.dtype))
    return out


# ---------------------------------------------------------------- argument checking

def _check_type(type, name):
    try:
        t = operator.index(type)
    except TypeError:
        raise TypeError(f"{name}: type must be an integer 1, 2, 3 or 4, got "
                        f"{builtin_type(type).__name__} {type!r}{where_am_i()}") from None
    if t not in _INVERSE_TYPE:
        raise ValueError(f"{name}: type must be 1, 2, 3 or 4, got {t}{where_am_i()}")
    return t


def _operand(x):
    a = asarray(x)
    if dtypes.is_complex(a.dtype):
        return a
    return a.astype(dtypes.float64 if a.dtype == dtypes.float64 else dtypes.float32)


def _dct_axis(a, axis: int, n: int, t: int, norm, inverse: bool, name: str):
    """The normalized transform of one axis of float or complex a (resized to n)."""
    if t == 1 and n < 2:
        raise ValueError(f"{name}: the type 1 transform needs a length of at least 2, got "
                         f"{n} (shape {a.shape}, axis {axis}){where_am_i()}")
    kind = _INVERSE_TYPE[t] if inverse else t
    scaled = norm != "ortho" and ((norm == "forward") != inverse)
    a = _resize(a, axis, n)
    if a.size == 0:
        return a

    def real_part(r):
        return plan._along(r, axis, lambda rows: _transform_rows(rows, kind, norm, scaled), n)

    if dtypes.is_complex(a.dtype):
        return cx.complex(real_part(cx.real(a)), real_part(cx.imag(a)))
    return real_part(a)


def _dctn(x, type, s, axes, norm, inverse, name):
    t = _check_type(type, name)
    _check_norm(norm, name)
    a = _operand(x)
    axes, lengths = _axes_lengths(a, s, axes, name)
    for ax, n in zip(axes, lengths, strict=True):
        a = _dct_axis(a, ax, n, t, norm, inverse, name)
    return a


# ---------------------------------------------------------------- public transforms

def dct(x, type=2, n=None, axis=-1, norm=None):
    """The discrete cosine transform of `type` (1-4) along `axis` (scipy.fft.dct; jax.scipy.fft
    .dct has type 2). x: any shape, real or complex; n: the length x is truncated or
    zero-padded to first (default x.shape[axis]). Result: x's shape with n along `axis`;
    float32 / float64 (complex64 / complex128 for complex x, module docstring). norm: None,
    "backward", "ortho" or "forward" (module docstring). Raises TypeError for a non-integer
    type or n, ValueError for a type outside 1-4, n < 1 (type 1: n < 2), a bad axis or norm.
    """
    return _dct1(x, type, n, axis, norm, False, "dct")


def idct(x, type=2, n=None, axis=-1, norm=None):
    """The inverse of dct of the same `type` and `norm` (scipy.fft.idct): idct(dct(x)) == x.
    Arguments, shapes, dtypes and errors as dct."""
    return _dct1(x, type, n, axis, norm, True, "idct")


def _dct1(x, type, n, axis, norm, inverse, name):
    a = asarray(x)
    if a.ndim == 0:
        raise ValueError(f"{name}: axis {axis} is out of bounds for a 0-d array{where_am_i()}")
    ax = normalize_axis(axis, a.ndim)
    n = a.shape[ax] if n is None else _length(n, name)
    return _dctn(a, type, (n,), (ax,), norm, inverse, name)


def dctn(x, type=2, s=None, axes=None, norm=None):
    """The N-d discrete cosine transform: dct of `type` along each of `axes` in turn
    (scipy.fft.dctn / jax.scipy.fft.dctn). axes default: all, or the last len(s) when only s
    is given; s: the lengths per axis (truncate / zero-pad). Result: x's shape with s along
    axes; dtypes and norm as dct. Raises ValueError for bad or repeated axes, len(s) !=
    len(axes), s entries < 1, or as dct."""
    return _dctn(x, type, s, axes, norm, False, "dctn")


def idctn(x, type=2, s=None, axes=None, norm=None):
    """The inverse of dctn (scipy.fft.idctn / jax.scipy.fft.idctn); arguments and errors as
    dctn."""
    return _dctn(x, type, s, axes, norm, True, "idctn")


def _smallest_smooth(target: int, primes) -> int:
    """The smallest product of powers of `primes` (2 first) that is >= target: a search over
    the products below the best found so far, starting from the power of two >= target."""
    best = 1 << (target - 1).bit_length()

    def search(value, i):
        nonlocal best
        if value >= target:
            best = min(best, value)
            return
        if i == len(primes):
            return
        while value < best:
            search(value, i + 1)
            value *= primes[i]

    search(1, 0)
    return best


def next_fast_len(target, real=False):
    """The smallest length >= target that the FFT handles fastest (scipy.fft.next_fast_len):
    a product of powers of 2, 3, 5 (real=True) or of 2, 3, 5, 7, 11 (real=False), as scipy;
    such lengths factor into Nova's dense DFT blocks without Bluestein's algorithm. target: a
    non-negative int (0 gives 0, as scipy). Returns a Python int. Raises TypeError for a
    non-integer target, ValueError for a negative one."""
    try:
        t = operator.index(target)
    except TypeError:
        raise TypeError(f"next_fast_len: target must be an integer, got "
                        f"{builtin_type(target).__name__} {target!r}{where_am_i()}") from None
    if t < 0:
        raise ValueError(f"next_fast_len: target must be >= 0, got {t}{where_am_i()}")
    if t <= 6:
        return t
    return _smallest_smooth(t, (2, 3, 5) if real else (2, 3, 5, 7, 11))
