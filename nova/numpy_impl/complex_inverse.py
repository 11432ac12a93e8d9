"""The inverse trigonometric and hyperbolic functions of complex arguments (principal branches,
NumPy's and jax.numpy's), for nova/numpy_impl/elementary.py.

arcsin, arccos and arccosh follow W. Kahan, "Branch cuts for complex elementary functions, or
much ado about nothing's sign bit" (1987), procedures ASIN, ACOS, ACOSH: both parts come from
real atan2 and asinh of the real and imaginary parts of sqrt(1 - z) and sqrt(1 + z) (Kahan's
square root, written here on the parts to honour the sign of a zero imaginary part), so
nothing overflows for large |z|, nothing
cancels near 0, and a signed zero imaginary part picks the side of a branch cut as NumPy does
(arcsin(2 + 0j) has a positive, arcsin(2 - 0j) a negative imaginary part). arcsinh(z) is
-i arcsin(iz). arctanh is the closed form of Abramowitz & Stegun 4.6.22 written without
cancellation near 0 (Re = log1p(4x / ((1 - x)^2 + y^2)) / 4, Im = atan2(2y, (1 - x)(1 + x) -
y^2) / 2, as in Kahan's ATANH without its scaling for |z| near the overflow threshold), and
arctan(z) is -i arctanh(iz).

The parts 1 - z, 1 + z, z - 1 are built from x and y directly so that 1 - (x + 0j) has the
imaginary part -0.0 that the branch-cut choice needs (a complex subtraction would give +0.0).
"""

from __future__ import annotations

from nova.ops import complex as cx
from nova.ops import elementwise as ew


def _const(x, v):
    from nova.numpy_impl.families_common import _full

    return _full(x, v)


def _real_asinh(x):
    from nova.numpy_impl.elementary import arcsinh

    return arcsinh(x)


def _sqrt_parts(a, b):
    """(Re, Im) of the principal sqrt(a + ib), Kahan's CSQRT: t = sqrt((|a| + |z|) / 2), then
    (t, b / 2t) for a >= 0 and (|b| / 2t, t with b's sign) for a < 0. The sign is b's sign
    bit, so -1 - 0j gives -1j (as NumPy); the complex sqrt primitive reads b < 0 there and
    gives +1j, which would put arcsin(2 + 0j) on the wrong side of its cut."""
    from nova.numpy_impl.mathfuncs import _signbit

    zero = _const(a, 0.0)
    t = ew.sqrt(ew.mul(ew.add(ew.abs(cx.complex(a, b)), ew.abs(a)), _const(a, 0.5)))
    is0 = ew.eq(t, zero)
    q = ew.div(b, ew.mul(_const(t, 2.0), ew.select(is0, _const(t, 1.0), t)))
    pos = ew.ge(a, zero)
    re = ew.select(pos, t, ew.abs(q))
    im = ew.select(pos, q, ew.select(_signbit(b), ew.neg(t), t))
    return ew.select(is0, zero, re), ew.select(is0, b, im)


def _parts(z):
    return cx.real(z), cx.imag(z)


def _asin_parts(x, y):
    """(Re, Im) of arcsin(x + iy), Kahan's ASIN."""
    one = _const(x, 1.0)
    a1, b1 = _sqrt_parts(ew.sub(one, x), ew.neg(y))  # sqrt(1 - z)
    a2, b2 = _sqrt_parts(ew.add(one, x), y)  # sqrt(1 + z)
    re = ew.atan2(x, ew.sub(ew.mul(a1, a2), ew.mul(b1, b2)))
    im = _real_asinh(ew.sub(ew.mul(a1, b2), ew.mul(b1, a2)))
    return re, im


def arcsin(z):
    """arcsin of a complex array (same shape and dtype); cuts on the real axis beyond +-1."""
    re, im = _asin_parts(*_parts(z))
    return cx.complex(re, im)


def arccos(z):
    """arccos of a complex array, Kahan's ACOS; real part in [0, pi]."""
    x, y = _parts(z)
    one = _const(x, 1.0)
    a1, b1 = _sqrt_parts(ew.sub(one, x), ew.neg(y))  # sqrt(1 - z)
    a2, b2 = _sqrt_parts(ew.add(one, x), y)  # sqrt(1 + z)
    re = ew.mul(_const(x, 2.0), ew.atan2(a1, a2))
    im = _real_asinh(ew.sub(ew.mul(a2, b1), ew.mul(b2, a1)))
    return cx.complex(re, im)


def arcsinh(z):
    """arcsinh of a complex array: -i arcsin(iz); cuts on the imaginary axis beyond +-i."""
    x, y = _parts(z)
    re, im = _asin_parts(ew.neg(y), x)
    return cx.complex(im, ew.neg(re))


def arccosh(z):
    """arccosh of a complex array, Kahan's ACOSH; real part >= 0, cut on the real axis
    below 1."""
    x, y = _parts(z)
    one = _const(x, 1.0)
    a3, b3 = _sqrt_parts(ew.sub(x, one), y)  # sqrt(z - 1)
    a2, b2 = _sqrt_parts(ew.add(x, one), y)  # sqrt(z + 1)
    re = _real_asinh(ew.add(ew.mul(a3, a2), ew.mul(b3, b2)))
    im = ew.mul(_const(x, 2.0), ew.atan2(b3, a2))
    return cx.complex(re, im)


def _atanh_parts(x, y):
    one = _const(x, 1.0)
    omx = ew.sub(one, x)
    den = ew.add(ew.mul(omx, omx), ew.mul(y, y))
    re = ew.mul(ew.log1p(ew.div(ew.mul(_const(x, 4.0), x), den)), _const(x, 0.25))
    im_den = ew.sub(ew.mul(omx, ew.add(one, x)), ew.mul(y, y))
    im = ew.mul(ew.atan2(ew.add(y, y), im_den), _const(x, 0.5))
    return re, im


def arctanh(z):
    """arctanh of a complex array; cuts on the real axis beyond +-1, infinite at +-1."""
    re, im = _atanh_parts(*_parts(z))
    return cx.complex(re, im)


def arctan(z):
    """arctan of a complex array: -i arctanh(iz); cuts on the imaginary axis beyond +-i."""
    x, y = _parts(z)
    re, im = _atanh_parts(ew.neg(y), x)
    return cx.complex(im, ew.neg(re))
