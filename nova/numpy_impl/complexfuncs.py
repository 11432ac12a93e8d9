"""Complex numbers in `nova.numpy`: real, imag, conj, angle, the iscomplex family,
real_if_close (numpy's and jax.numpy's functions of those names).

Nova has two complex dtypes, complex64 and complex128 (float32 / float64 parts). Promotion is
JAX's: a float meets a complex in the complex dtype that holds both (float32 + 1j is
complex64, float64 + complex64 is complex128), Python complex scalars are weakly typed. The
compiler computes complex arithmetic as float arithmetic on the two parts
(nova/compiler/legalize_complex.py). Derivatives follow JAX's convention: `grad(f)(z)` of a
real-valued f is the conjugate of (df/dx + i df/dy), i.e. the transpose of the JVP without
conjugation; `grad(f, holomorphic=True)` differentiates a complex-valued holomorphic f.
"""

from __future__ import annotations

import math

import numpy as np

from nova.core import dtypes
from nova.core.array import Array
from nova.numpy_impl.util import asarray
from nova.ops import complex as cx
from nova.ops import elementwise as ew

__all__ = ["real", "imag", "conj", "conjugate", "angle", "iscomplex", "isreal", "iscomplexobj",
           "isrealobj", "real_if_close"]


def real(val, /):
    """The real part (numpy.real): float32 for complex64, float64 for complex128; a real array
    is returned as it is. Shape: val's."""
    return cx.real(asarray(val))


def imag(val, /):
    """The imaginary part (numpy.imag): float32 for complex64, float64 for complex128; zeros
    of val's shape and dtype for a real array."""
    return cx.imag(asarray(val))


def conj(x, /):
    """The complex conjugate, elementwise (numpy.conj); a real array is returned as it is."""
    return cx.conj(asarray(x))


conjugate = conj


def angle(z, deg=False):
    """The argument of z in radians, in (-pi, pi] (numpy.angle): atan2(imag z, real z); in
    degrees with deg=True. Complex64 gives float32, complex128 float64; real z gives pi where
    z < 0 (also -0.0), 0 elsewhere, NaN for NaN; integers become float32."""
    from nova.numpy_impl.elementary import signbit

    a = asarray(z)
    half_turn = 180.0 if deg else math.pi
    if dtypes.is_complex(a.dtype):
        out = ew.atan2(cx.imag(a), cx.real(a))
        return out * (180.0 / math.pi) if deg else out
    if not dtypes.is_float(a.dtype):
        a = a.astype(dtypes.default_float)
    from nova import numpy as jnp

    out = jnp.where(signbit(a), jnp.full_like(a, half_turn), jnp.zeros_like(a))
    return jnp.where(jnp.isnan(a), a, out)


def iscomplex(x, /):
    """Elementwise: whether the imaginary part is nonzero (numpy.iscomplex); False everywhere
    for a real array. A bool array of x's shape."""
    from nova import numpy as jnp

    a = asarray(x)
    if not dtypes.is_complex(a.dtype):
        return jnp.zeros(a.shape, dtypes.bool_)
    return cx.imag(a) != 0


def isreal(x, /):
    """Elementwise: whether the imaginary part is zero (numpy.isreal); True everywhere for a
    real array. A bool array of x's shape."""
    from nova import numpy as jnp

    a = asarray(x)
    if not dtypes.is_complex(a.dtype):
        return jnp.ones(a.shape, dtypes.bool_)
    return cx.imag(a) == 0


def iscomplexobj(x, /):
    """Whether x's dtype is complex (numpy.iscomplexobj), for Nova arrays, NumPy values and
    Python values alike; a static bool."""
    if isinstance(x, Array):
        return dtypes.is_complex(x.dtype)
    d = getattr(x, "dtype", None)
    if d is not None:
        return np.dtype(d).kind == "c"
    return bool(np.iscomplexobj(x))


def isrealobj(x, /):
    """not iscomplexobj(x) (numpy.isrealobj)."""
    return not iscomplexobj(x)


def real_if_close(a, tol=100):
    """a's real part when every imaginary part is within `tol` of zero, else a itself
    (numpy.real_if_close; jax.numpy has no such function). tol > 1 counts machine epsilons of
    a's real dtype (100 * 2**-23 for complex64), tol <= 1 is absolute. A real a is returned as
    it is. The result's dtype depends on a's values, so a complex a must be concrete: raises
    ConcretizationTypeError inside jit or vmap."""
    from nova.core.errors import ConcretizationTypeError
    from nova.numpy_impl.util import where_am_i

    x = asarray(a)
    if not dtypes.is_complex(x.dtype):
        return x
    if tol > 1:
        tol = tol * float(np.finfo(dtypes.real_dtype(x.dtype)).eps)
    try:
        im = np.asarray(cx.imag(x))
    except ConcretizationTypeError:
        raise ConcretizationTypeError(
            f"real_if_close: the result's dtype depends on the values of a (shape {x.shape}, "
            f"dtype {x.dtype}), which are not known inside jit or vmap; use jnp.real where the "
            f"imaginary parts are known to vanish{where_am_i()}") from None
    return cx.real(x) if bool(np.all(np.abs(im) < tol)) else x
