"""nova.nn.functional's argument checks, activations, layer_norm, one_hot and dropout."""

from __future__ import annotations

import math
import operator

import numpy as np

import nova.numpy as jnp
from nova.core import dtypes
from nova.core.array import Array
from nova.numpy_impl.util import asarray, where_am_i
from nova.ops import lax


def _int_arg(fn: str, name: str, value) -> int:
    """`value` as a Python int (ints and NumPy integers; not bools, floats or strings)."""
    if isinstance(value, bool):
        raise TypeError(f"{fn}: {name} must be an int, got bool {value!r}{where_am_i()}")
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(f"{fn}: {name} must be an int, got {type(value).__name__} {value!r}"
                        f"{where_am_i()}") from None


def _wide_int(labels: Array) -> Array:
    """Integer labels in a dtype that holds every class index: int32 for narrower ints (uint8
    labels compared against arange(300, uint8) would wrap around), int64 for uint32."""
    if labels.dtype.itemsize < 4:
        return labels.astype(jnp.int32)
    if labels.dtype == np.uint32:
        return labels.astype(jnp.int64)
    return labels


def check_index_range(fn: str, name: str, idx: Array, n: int, ignore: int | None = None) -> None:
    """Raises ValueError when a concrete (not traced) integer array `idx` holds a value outside
    [0, n) other than `ignore`. Under `jit` values are unknown and nothing is checked."""
    from nova.core.trace import Tracer

    if isinstance(idx, Tracer):
        return
    v = np.asarray(idx)
    bad = (v < 0) | (v >= n)
    if ignore is not None:
        bad &= v != ignore
    if bad.any():
        vals = sorted(set(v[bad].tolist()))
        raise ValueError(
            f"{fn}: {name} holds {int(bad.sum())} value(s) outside [0, {n})"
            f"{'' if ignore is None else f' other than ignore_index {ignore}'}: {vals[:8]}"
            f"{' ...' if len(vals) > 8 else ''}{where_am_i()}"
        )


def _float_input(name: str, x) -> Array:
    a = asarray(x)
    if not dtypes.is_float(a.dtype):
        raise TypeError(f"{name}: expected a floating-point array, got {a.dtype}{where_am_i()}")
    return a


def _pair(name: str, v, n: int = 2, low: int = 1) -> tuple:
    """v (an int or n ints, each >= low) as n ints; ValueError otherwise."""
    vals = (v,) * n if isinstance(v, int | np.integer) else tuple(v)
    if len(vals) != n or any(not isinstance(k, int | np.integer) or isinstance(k, bool)
                             or k < low for k in vals):
        kind = "positive" if low == 1 else "non-negative"
        raise ValueError(f"{name} must be an int or {n} {kind} ints, got {v!r}"
                         f"{where_am_i()}")
    return tuple(int(k) for k in vals)


def broadcast_where(fn: str, where, shape: tuple):
    """A `where=` mask as a bool Array of `shape` (None stays None): what softmax, log_softmax,
    logmeanexp and standardize take. Raises TypeError for a non-bool mask, ValueError for one
    that does not broadcast to `shape`."""
    if where is None:
        return None
    m = asarray(where)
    if not dtypes.is_bool(m.dtype):
        raise TypeError(f"{fn}: where must be a bool array, got {m.dtype}{where_am_i()}")
    try:
        np.broadcast_shapes(tuple(m.shape), tuple(shape))
    except ValueError:
        raise ValueError(f"{fn}: where of shape {tuple(m.shape)} does not broadcast to x's "
                         f"shape {tuple(shape)}{where_am_i()}") from None
    return jnp.broadcast_to(m, shape)


def relu(x) -> Array:
    """max(x, 0) elementwise; x a float or integer array of any shape (the result has its
    dtype). NaN stays NaN (as JAX and PyTorch: a diverging model is not hidden); the gradient
    is 0 at 0 and at NaN (as jax.nn.relu). Raises TypeError for a boolean or complex array."""
    a = asarray(x)
    if not (dtypes.is_float(a.dtype) or dtypes.is_int(a.dtype)):
        raise TypeError(f"relu: expected a floating-point or integer array, got "
                        f"{a.dtype}{where_am_i()}")
    y = jnp.where(a > 0, a, 0)
    if dtypes.is_int(a.dtype):
        return y
    # NaN passes through a term without a gradient (x > 0 is false there).
    return y + lax.stop_gradient(jnp.where(jnp.isnan(a), a, 0))


def gelu(x, approximate: bool = False) -> Array:
    """Gaussian error linear unit (Hendrycks & Gimpel, arXiv 1606.08415), elementwise.

    approximate=False: x * Phi(x) = 0.5 x (1 + erf(x / sqrt 2)) (PyTorch's default);
    approximate=True: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) (GPT-2's "gelu_new",
    PyTorch's approximate="tanh", JAX's default). x: float array; result has its shape and dtype.
    """
    x = _float_input("gelu", x)
    if approximate:
        inner = math.sqrt(2.0 / math.pi) * (x + 0.044715 * (x * x * x))
        return 0.5 * x * (1.0 + jnp.tanh(inner))
    return 0.5 * x * (1.0 + lax.erf(x * (1.0 / math.sqrt(2.0))))


def silu(x) -> Array:
    """x * sigmoid(x) (Swish-1; Elfwing et al., arXiv 1702.03118), elementwise; x float."""
    x = _float_input("silu", x)
    return x * lax.logistic(x)


def layer_norm(x, weight=None, bias=None, eps: float = 1e-5) -> Array:
    """Layer normalization over the last axis (Ba, Kiros, Hinton, arXiv 1607.06450).

    (x - mean) / sqrt(var + eps) * weight + bias, with the biased variance computed in two passes.
    x: float (..., D); weight, bias: (D,) or None; eps >= 0. Raises ValueError when weight or bias
    is not of shape (D,) or eps < 0, TypeError for non-float x.
    """
    x = _float_input("layer_norm", x)
    weight = None if weight is None else asarray(weight)
    bias = None if bias is None else asarray(bias)
    if not float(eps) >= 0.0:
        raise ValueError(f"layer_norm: eps must be >= 0, got {eps}{where_am_i()}")
    d = x.shape[-1] if x.ndim else None
    for name, p in (("weight", weight), ("bias", bias)):
        if p is not None and (x.ndim == 0 or tuple(p.shape) != (d,)):
            raise ValueError(
                f"layer_norm: {name} must have shape ({d},) to match x of shape {x.shape}, got "
                f"{tuple(p.shape)}{where_am_i()}"
            )
    mean = jnp.mean(x, axis=-1, keepdims=True)
    xc = x - mean
    var = jnp.mean(xc * xc, axis=-1, keepdims=True)
    y = xc * lax.rsqrt(var + eps)
    if weight is not None:
        y = y * weight
    if bias is not None:
        y = y + bias
    return y


def one_hot(labels, num_classes: int, dtype=jnp.float32) -> Array:
    """labels (...) integer -> (..., num_classes) with 1 at each label and 0 elsewhere.

    A label outside [0, num_classes) gives a row of zeros (as jax.nn.one_hot). Raises TypeError
    for non-integer labels or a num_classes that is not an int, ValueError for num_classes < 1.
    """
    labels = asarray(labels)
    if not dtypes.is_int(labels.dtype):
        raise TypeError(f"one_hot: labels must be integers, got {labels.dtype}{where_am_i()}")
    num_classes = _int_arg("one_hot", "num_classes", num_classes)
    if num_classes < 1:
        raise ValueError(f"one_hot: num_classes must be >= 1, got {num_classes}{where_am_i()}")
    labels = _wide_int(labels)
    classes = jnp.arange(num_classes, dtype=labels.dtype)
    return (labels[..., None] == classes).astype(dtype)


def dropout(x, rate: float, key) -> Array:
    """Inverted dropout (Srivastava et al., JMLR 2014): each element zeroed with probability
    `rate`, the kept ones scaled by 1/(1 - rate), so the expectation is x.

    x: float array; rate: Python float in [0, 1); key: a nova.random key (the same key gives the
    same mask). rate == 0 returns x unchanged. Raises ValueError for a rate outside [0, 1) or a
    missing key when rate > 0.
    """
    x = _float_input("dropout", x)
    rate = float(rate)
    if not 0.0 <= rate < 1.0:
        raise ValueError(f"dropout: rate must be in [0, 1), got {rate}{where_am_i()}")
    if rate == 0.0:
        return x
    if key is None:
        raise ValueError(f"dropout: rate {rate} > 0 needs a nova.random key{where_am_i()}")
    from nova import random

    keep = random.bernoulli(key, 1.0 - rate, x.shape)
    return jnp.where(keep, x * (1.0 / (1.0 - rate)), 0.0)
