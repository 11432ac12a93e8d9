"""Complex-valued special functions for nova.scipy.special: the Faddeeva function wofz, and
log-gamma, gamma and erfcx at complex arguments."""

from __future__ import annotations

import math

import numpy as np

import nova.numpy as jnp
from nova import lax
from nova.core import dtypes
from nova.numpy_impl.util import promote

_SQRT_PI = math.sqrt(math.pi)


def _as_complex(name, z):
    """z promoted to its complex dtype (ints and bools -> complex64, float32 -> complex64,
    float64 -> complex128)."""
    (z,) = promote(name, z, to_inexact=True)
    if not dtypes.is_complex(z.dtype):
        z = z.astype(dtypes.complex_dtype(z.dtype))
    return z


def _weideman_coefficients(n):
    """The n coefficients a_1..a_n of Weideman's rational series for w(z), highest first
    (J. A. C. Weideman, "Computation of the complex error function", SIAM J. Numer. Anal. 31
    (1994) 1497-1518, eq. (3.6)-(3.10)): the Fourier coefficients of
    f(t) = exp(-t^2) (L^2 + t^2) at t = L tan(theta / 2), by an FFT of 4n samples, with
    L = sqrt(n / sqrt(2))."""
    m = 2 * n
    k = np.arange(-m + 1, m)
    scale = math.sqrt(n / math.sqrt(2.0))
    t = scale * np.tan(k * math.pi / (2 * m))
    f = np.concatenate([[0.0], np.exp(-t * t) * (scale * scale + t * t)])
    a = np.real(np.fft.fft(np.fft.fftshift(f))) / (2 * m)
    return scale, tuple(float(c) for c in a[1:n + 1][::-1])


# n = 36 terms: relative error below ~2e-14 of |w| over the closed upper half-plane.
_W_L, _W_COEFFS = _weideman_coefficients(36)
# Beyond |z| = 1e3 the asymptotic series i / (sqrt(pi) z) (1 + 1/(2z^2) + 3/(4z^4)) is exact
# to ~1e-18 (A&S 7.1.23) and keeps (L - iz)^2 from overflowing.
_W_BIG = 1e3


def _wofz_upper(z):
    """w(z) for Im z >= 0: Weideman's series inside |z| <= _W_BIG, the asymptotic series
    outside."""
    big = jnp.abs(z) > _W_BIG
    zs = jnp.where(big, jnp.ones_like(z), z)
    d = _W_L - 1j * zs
    zz = (_W_L + 1j * zs) / d
    p = jnp.zeros_like(zz)
    for c in _W_COEFFS:  # Horner's rule
        p = p * zz + c
    near = 2.0 * p / (d * d) + (1.0 / _SQRT_PI) / d
    zb = jnp.where(big, z, jnp.ones_like(z))
    r = 1.0 / (zb * zb)
    far = (1j / _SQRT_PI) / zb * (1.0 + r * (0.5 + 0.75 * r))
    return jnp.where(big, far, near)


def wofz(z):
    """The Faddeeva function w(z) = exp(-z^2) erfc(-iz) (scipy.special.wofz,
    jax.scipy.special.wofz).

    z: array of any shape, real or complex (ints and bools and float32 give complex64,
    float64 gives complex128). Returns w(z) with z's shape.

    Algorithm: in the upper half-plane Weideman's rational series in Z = (L + iz) / (L - iz)
    with 36 terms (J. A. C. Weideman, SIAM J. Numer. Anal. 31 (1994) 1497-1518), relative error
    ~2e-14 in float64, and the asymptotic series (Abramowitz & Stegun 7.1.23) for |z| > 1e3; in
    the lower half-plane the reflection w(z) = 2 exp(-z^2) - w(-z) (A&S 7.1.11), which grows
    like exp(y^2 - x^2) and overflows to inf where w does. On the real axis the real part is
    exp(-x^2) exactly. Differentiable (holomorphic): w'(z) = 2i / sqrt(pi) - 2z w(z).
    Raises TypeError for a non-numeric z.
    """
    z = _as_complex("wofz", z)
    x, y = jnp.real(z), jnp.imag(z)
    lower = y < 0
    zu = jnp.where(lower, -z, z)
    wu = _wofz_upper(zu)
    zl = jnp.where(lower, z, jnp.zeros_like(z))  # keeps exp(-z^2) finite where discarded
    w = jnp.where(lower, 2.0 * jnp.exp(-zl * zl) - wu, wu)
    # On the real axis Re w(x) = exp(-x^2), which the series gives only to an absolute error
    # of ~1e-16 |w|. The exact value carries the series' derivative (w - stop_gradient(w) is
    # exactly 0), so w stays holomorphic for grad(holomorphic=True).
    xr = jnp.where(y == 0, x, jnp.zeros_like(x))
    exact = lax.complex(jnp.exp(-xr * xr), jnp.imag(w))
    on_axis = lax.stop_gradient(exact) + (w - lax.stop_gradient(w))
    return jnp.where(y == 0, on_axis, w)


def erfcx_complex(z):
    """exp(z^2) erfc(z) at complex z, as w(iz) (A&S 7.1.3)."""
    return wofz(1j * z)


def _lanczos_log(z):
    """log Gamma(z) for Re z >= 1/2: special_gamma's Lanczos sum, which holds at complex z
    (imported here, as special_gamma imports this module)."""
    from nova.scipy.special_gamma import _lgamma_right

    return _lgamma_right(z)


def _log_sin_pi(z):
    """A branch of log sin(pi z) analytic in Im z >= 0 (away from the real zeros):
    sin(pi z) = (i/2) exp(-i pi z) (1 - exp(2 pi i z)) with |exp(2 pi i z)| <= 1, so nothing
    overflows and the log of the last factor stays principal."""
    return (-1j * math.pi) * z + (0.5j * math.pi - math.log(2.0)) + \
        jnp.log(1.0 - jnp.exp((2j * math.pi) * z))


def loggamma_complex(z):
    """The principal branch of log Gamma(z) at complex z (scipy.special.loggamma): analytic
    off the non-positive real axis, with loggamma(z + 1) = loggamma(z) + log(z) and
    loggamma(conj z) = conj(loggamma(z)); NaN at the poles 0, -1, -2, ...

    Lanczos for Re z >= 1/2; to the left the reflection log(pi) - log sin(pi z) - loggamma(1 - z)
    with the branch of log sin(pi z) from _log_sin_pi, which makes the reflection hold without a
    2 pi i correction in the upper half-plane (the lower half by conjugation; cf. D. E. G. Hare,
    "Computing the principal branch of log-Gamma", J. Algorithms 25 (1997) 221-236). Absolute
    error ~1e-13 in float64 for |z| up to ~30, relative ~1e-14 beyond.
    """
    x, y = jnp.real(z), jnp.imag(z)
    flip = jnp.signbit(y)
    zu = jnp.where(flip, jnp.conj(z), z)
    right = x >= 0.5
    one = jnp.ones_like(zu)
    lg_right = _lanczos_log(jnp.where(right, zu, one))
    zl = jnp.where(right, jnp.full_like(zu, 0.25 + 0.5j), zu)  # a harmless left-side point
    lg_left = math.log(math.pi) - _log_sin_pi(zl) - _lanczos_log(1.0 - zl)
    out = jnp.where(right, lg_right, lg_left)
    out = jnp.where(flip, jnp.conj(out), out)
    pole = (y == 0) & (x <= 0) & (x == jnp.floor(x))
    nan = jnp.full_like(out, complex(math.nan, math.nan))
    return jnp.where(pole, nan, out)


def gamma_complex(z):
    """Gamma(z) at complex z as exp(loggamma(z)); NaN + NaN i at the poles (as SciPy)."""
    return jnp.exp(loggamma_complex(z))

