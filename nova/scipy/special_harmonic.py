"""Spherical harmonics for nova.scipy.special (sph_harm_y), by the normalized associated
Legendre recurrences."""

from __future__ import annotations

import math
import operator

import numpy as np

import nova.numpy as jnp
from nova.core import dtypes
from nova.core.errors import ConcretizationTypeError
from nova.numpy_impl.util import asarray, promote, where_am_i
from nova.scipy.special_common import _fori


def _int_arg(name, v):
    a = asarray(v)
    if not (dtypes.is_int(a.dtype) or dtypes.is_bool(a.dtype)):
        raise TypeError(f"sph_harm_y: {name} must be an integer array, got dtype "
                        f"{a.dtype.name} with shape {a.shape}{where_am_i()}")
    return a.astype(dtypes.int32)


def _resolve_n_max(n, n_max):
    if n_max is not None:
        try:
            n_max = operator.index(n_max)
        except TypeError:
            raise TypeError(f"sph_harm_y: n_max must be a Python int, got "
                            f"{type(n_max).__name__}{where_am_i()}") from None
        if n_max < 0:
            raise ValueError(f"sph_harm_y: n_max must be >= 0, got {n_max}{where_am_i()}")
        return n_max
    try:
        values = np.asarray(n)
    except (ConcretizationTypeError, TypeError):
        raise ConcretizationTypeError(
            "sph_harm_y: n is traced, so its maximum is unknown; pass n_max (a Python int) "
            f"when calling under jit or vmap{where_am_i()}") from None
    return max(int(values.max()), 0) if values.size else 0


def sph_harm_y(n, m, theta, phi, diff_n=None, n_max=None):
    """The spherical harmonic Y_n^m(theta, phi) (scipy.special.sph_harm_y,
    jax.scipy.special.sph_harm_y; argument order degree, order, colatitude, longitude):

        Y_n^m = sqrt((2n + 1) / (4 pi) (n - m)! / (n + m)!) P_n^m(cos theta) exp(i m phi),

    with the Condon-Shortley phase (-1)^m in P_n^m, orthonormal on the sphere.

    n, m: integer arrays (Python ints too), the degree n >= 0 and order |m| <= n; theta in
    [0, pi] and phi (any real): float arrays (ints become float32). All four broadcast to one
    shape (jax takes 1-D arrays of one length; those work the same). n_max: a Python int, the
    largest degree computed; n above it is clipped to n_max, as jax does. Without it n must be
    concrete (not traced) and n_max is its maximum. Returns complex64 for float32 angles,
    complex128 for float64; 0 where |m| > n or n < 0 (as SciPy).

    Algorithm: the fully normalized associated Legendre functions by the standard recurrences
    in the degree (e.g. S. A. Holmes and W. E. Featherstone, J. Geodesy 76 (2002) 279-299,
    eqs. 11-13): the sectoral P_m^m = -sqrt((2m + 1) / 2m) sin(theta) P_{m-1}^{m-1} from
    1 / sqrt(4 pi), then P_l^m = a_lm (cos(theta) P_{l-1}^m - P_{l-2}^m / a_{l-1,m}) with
    a_lm = sqrt((4l^2 - 1) / (l^2 - m^2)), n_max + 1 steps of a fori_loop for every element at
    once; Y_n^{-m} = (-1)^m conj(Y_n^m). The sectoral products underflow for degrees past a
    few hundred at small sin(theta) (float32) or about a thousand (float64). Differentiable in
    theta and phi.

    Raises NotImplementedError for diff_n (as jax), TypeError for non-integer n or m, complex
    angles or a non-int n_max, ValueError for n_max < 0, ConcretizationTypeError when n is
    traced and n_max is None, ShapeError when the arguments do not broadcast.
    """
    if diff_n is not None:
        raise NotImplementedError(f"sph_harm_y: diff_n is not supported (as jax), got "
                                  f"diff_n={diff_n!r}{where_am_i()}")
    for name, v in (("theta", theta), ("phi", phi)):
        d = getattr(v, "dtype", None)
        if (d is not None and dtypes.is_complex(d)) or isinstance(v, complex):
            raise TypeError(f"sph_harm_y: {name} must be real, got a complex value"
                            f"{where_am_i()}")
    n_arr, m_arr = _int_arg("n", n), _int_arg("m", m)
    n_max = _resolve_n_max(n_arr, n_max)
    theta, phi = promote("sph_harm_y", theta, phi, to_inexact=True)
    shape = np.broadcast_shapes(n_arr.shape, m_arr.shape, theta.shape)
    theta, phi = jnp.broadcast_to(theta, shape), jnp.broadcast_to(phi, shape)
    fdt = theta.dtype
    nf = jnp.broadcast_to(jnp.minimum(n_arr, n_max), shape).astype(fdt)
    mf = jnp.broadcast_to(jnp.abs(m_arr), shape).astype(fdt)
    x, s = jnp.cos(theta), jnp.sin(theta)

    def step(l, carry):  # carry: sectoral P_{l-1}^{l-1}, P_{l-1}^m, P_{l-2}^m, result so far
        sect, p1, p2, out = carry
        lf = jnp.asarray(l).astype(fdt)
        grow = -jnp.sqrt((2.0 * lf + 1.0) / jnp.maximum(2.0 * lf, 1.0)) * s
        sect = jnp.where(lf == 0, sect, grow * sect)
        above = lf > mf
        lm2 = jnp.where(above, lf * lf - mf * mf, jnp.ones_like(lf))
        a = jnp.sqrt((4.0 * lf * lf - 1.0) / lm2)
        prev = lf - 1.0  # a_{l-1,m} / a_lm, 0 when l - 1 = m (the P_{m-1}^m = 0 term)
        pm2 = jnp.where(prev > mf, prev * prev - mf * mf, jnp.ones_like(lf))
        a_prev = jnp.sqrt((4.0 * prev * prev - 1.0) / pm2)
        ratio = jnp.where(prev > mf, a / a_prev, jnp.zeros_like(lf))
        rec = a * x * p1 - ratio * p2
        p = jnp.where(above, rec, jnp.where(lf == mf, sect, jnp.zeros_like(lf)))
        return sect, p, p1, jnp.where(lf == nf, p, out)

    start = jnp.full(shape, 1.0 / math.sqrt(4.0 * math.pi), fdt)
    zeros = jnp.zeros(shape, fdt)
    _, _, _, leg = _fori(n_max + 1, step, (start, zeros, zeros, zeros))
    mphi = jnp.broadcast_to(m_arr, shape).astype(fdt) * phi
    y = leg * jnp.cos(mphi) + 1j * (leg * jnp.sin(mphi))
    # Y_n^{-|m|} = (-1)^m conj(Y_n^{|m|}), and e^{-i|m|phi} = conj(e^{i|m|phi}): the phase
    # above already conjugates, leaving the sign
    mb = jnp.broadcast_to(m_arr, shape)
    return jnp.where((mb < 0) & (mb % 2 != 0), -y, y)

