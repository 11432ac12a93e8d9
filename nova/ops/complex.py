"""Complex-number primitives: real, imag, conj, complex, and the two views that pass complex
buffers to and from kernels as pairs of floats.

Complex values (complex64, complex128) are first-class in Programs: every primitive's NumPy
reference handles them, and reverse mode follows JAX's convention (a VJP is the transpose of
the JVP, with no conjugation: `grad(f)(z)` of a real f is the conjugate of df/dx + i df/dy,
e.g. grad(abs)(3+4j) == 0.6-0.8j). The compiler splits every complex value into its real and
imaginary parts before fusion (nova/compiler/legalize_complex.py), so kernels only see floats:
`complex_as_pairs` copies a complex buffer of shape S into planar floats of shape (2,) + S (the
real parts, then the imaginary parts: each part is contiguous, so the kernels reading them
vectorize), and `pairs_as_complex` interleaves them back; both run on the host, placed only at
the boundaries of a Program (its inputs and outputs, and primitives without a split rule).
"""

from __future__ import annotations

import numpy as np

from nova.core import dtypes
from nova.core.ir import TensorType
from nova.core.primitive import Elementwise, FusionKind, Primitive, _batch_elementwise


def _legalized(b, *args, **params):
    raise AssertionError("complex primitives are split into float parts before codegen "
                         "(nova/compiler/legalize_complex.py)")


def _complex_operand(name, t):
    if not dtypes.is_complex(t.dtype):
        raise TypeError(f"{name}_p needs a complex operand, got {t.dtype}")


def _real_rule(x):
    _complex_operand("real", x)
    return TensorType(x.shape, dtypes.real_dtype(x.dtype))


def _conj_rule(x):
    _complex_operand("conj", x)
    return x


def _complex_rule(x, y):
    if x.shape != y.shape:
        from nova.core.errors import ShapeError

        raise ShapeError(f"complex: operand shapes differ: {x.shape} and {y.shape}")
    if x.dtype != y.dtype or x.dtype not in (dtypes.float32, dtypes.float64):
        raise TypeError(f"complex_p needs two float32 or two float64 operands, got {x.dtype} "
                        f"and {y.dtype}")
    return TensorType(x.shape, dtypes.complex_dtype(x.dtype))


def _primitive(name, rule, impl, vjp, jvp, *, fusion=FusionKind.OPAQUE, differentiable=True):
    # OPAQUE, not ELEMENTWISE: no kernel body ever sees them (they are split before fusion),
    # and batching is the elementwise rule.
    p = Primitive(name, shape_rule=rule, impl=impl, vjp=vjp, jvp=jvp, fusion=fusion,
                  kernel=Elementwise(_legalized), differentiable=differentiable)
    p.batch = _batch_elementwise(p)
    return p


def _zeros(x):
    from nova.ops.structural import full

    return full(x.shape, 0, x.dtype)


# real(z): its transpose puts a real cotangent in the real part.
real_p = _primitive(
    "real", _real_rule, lambda x: np.array(np.real(x)),
    lambda ct, x, *, out: (_to_complex(ct, x.dtype),),
    lambda ts, x, *, out: real(ts[0]) if ts[0] is not None else _zeros(out))
# imag(z) = real(-i z): its transpose maps a real cotangent c to -i c (JAX's convention).
imag_p = _primitive(
    "imag", _real_rule, lambda x: np.array(np.imag(x)),
    lambda ct, x, *, out: (complex(_zeros(ct), _neg(ct)),),
    lambda ts, x, *, out: imag(ts[0]) if ts[0] is not None else _zeros(out))
conj_p = _primitive(
    "conj", _conj_rule, np.conj,
    lambda ct, x, *, out: (conj(ct),),
    lambda ts, x, *, out: conj(ts[0]) if ts[0] is not None else _zeros(out))
complex_p = _primitive(
    "complex", _complex_rule, lambda x, y: (x + 1j * y.astype(dtypes.complex_dtype(x.dtype)))
    .astype(dtypes.complex_dtype(x.dtype)),
    lambda ct, x, y, *, out: (real(ct), _neg(imag(ct))),
    lambda ts, x, y, *, out: complex(ts[0] if ts[0] is not None else _zeros(x),
                                     ts[1] if ts[1] is not None else _zeros(y)))


def _as_pairs_rule(x):
    _complex_operand("complex_as_pairs", x)
    return TensorType((2, *x.shape), dtypes.real_dtype(x.dtype))


def _as_complex_rule(x):
    if x.dtype not in (dtypes.float32, dtypes.float64) or not x.shape or x.shape[0] != 2:
        raise TypeError(f"pairs_as_complex_p needs float32/float64 parts (first axis 2), got "
                        f"{x.dtype}{list(x.shape)}")
    return TensorType(x.shape[1:], dtypes.complex_dtype(x.dtype))


def _split(x):
    out = np.empty((2, *x.shape), dtypes.real_dtype(x.dtype))
    out[0], out[1] = x.real, x.imag
    return out


def _join(x):
    out = np.empty(x.shape[1:], dtypes.complex_dtype(x.dtype))
    out.real, out.imag = x[0], x[1]
    return out


def _no_derivative(name):
    def rule(*args, **params):
        raise AssertionError(f"{name} is placed by the compiler after differentiation")

    return rule


complex_as_pairs_p = _primitive(
    "complex_as_pairs", _as_pairs_rule, _split,
    _no_derivative("complex_as_pairs"), _no_derivative("complex_as_pairs"),
    differentiable=False)
pairs_as_complex_p = _primitive(
    "pairs_as_complex", _as_complex_rule, _join,
    _no_derivative("pairs_as_complex"), _no_derivative("pairs_as_complex"),
    differentiable=False)


def _swap01(x):
    from nova.ops.structural import transpose

    return transpose(x, (1, 0, *range(2, x.ndim)))


# Batched: the parts axis leads the planar layout, so the batch axis moves past it.
complex_as_pairs_p.batch = lambda args, batched: _swap01(complex_as_pairs_p.bind(args[0]))
pairs_as_complex_p.batch = lambda args, batched: pairs_as_complex_p.bind(_swap01(args[0]))


def real(x):
    """The real part of a complex array (lax.real); x itself if x is not complex."""
    return real_p.bind(x) if dtypes.is_complex(x.dtype) else x


def imag(x):
    """The imaginary part of a complex array (lax.imag); zeros of x's dtype otherwise."""
    return imag_p.bind(x) if dtypes.is_complex(x.dtype) else _zeros(x)


def conj(x):
    """The complex conjugate (lax.conj); x itself if x is not complex."""
    return conj_p.bind(x) if dtypes.is_complex(x.dtype) else x


def complex(x, y):  # noqa: A001 - lax's name
    """x + i y for float arrays of one shape and dtype (lax.complex)."""
    return complex_p.bind(x, y)


def _to_complex(x, dtype):
    from nova.ops.elementwise import convert_element_type

    return convert_element_type(x, dtype)


def _neg(x):
    from nova.ops.elementwise import neg

    return neg(x)
