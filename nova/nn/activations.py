"""The rest of jax.nn's activations and normalizers, as compositions of nova.numpy ops.

Every gradient comes from the composition. At a kink the spelling fixes the derivative to the
one jax.nn gives: relu6 and hard_sigmoid have slope 0 at their corners (as relu at 0);
hard_tanh, leaky_relu, elu, celu and sparse_plus take the slope of the linear piece that
includes the corner; sparse_sigmoid takes 1/4 at +-1, the mean of its one-sided slopes.
Branches that `where` does not select are fed safe inputs, so no NaN or inf leaks into a
gradient from the side not taken.

Dtypes: floating inputs keep their dtype (Python scalar parameters are weakly typed, so float16
stays float16); integer and bool inputs become float32 (as jax.numpy's inexact functions do),
except in `identity` and `hard_tanh`, which keep them, as in JAX.
"""

from __future__ import annotations

import math

import nova.numpy as jnp
from nova.core import dtypes
from nova.core.array import Array
from nova.nn.functional import broadcast_where, silu
from nova.numpy_impl.util import asarray, normalize_axes, normalize_axis, where_am_i
from nova.ops import lax
from nova.scipy.special import logsumexp

__all__ = [
    "celu",
    "elu",
    "glu",
    "hard_sigmoid",
    "hard_silu",
    "hard_swish",
    "hard_tanh",
    "identity",
    "leaky_relu",
    "log1mexp",
    "log_sigmoid",
    "logmeanexp",
    "mish",
    "relu6",
    "selu",
    "sigmoid",
    "soft_sign",
    "softplus",
    "sparse_plus",
    "sparse_sigmoid",
    "squareplus",
    "standardize",
    "swish",
    "tanh",
]

# Klambauer, Unterthiner, Mayr, Hochreiter, "Self-normalizing neural networks" (NeurIPS 2017),
# eq. 2 and the constants of its section 3.
_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def _inexact(x) -> Array:
    """x as a floating-point Array: floats as they are, integers and bools (Nova's other
    dtypes) as float32."""
    a = asarray(x)
    return a if dtypes.is_float(a.dtype) else a.astype(dtypes.default_float)


def identity(x) -> Array:
    """x itself, as an Array of its shape and dtype (jax.nn.identity)."""
    return asarray(x)


def sigmoid(x) -> Array:
    """The logistic function 1 / (1 + exp(-x)), elementwise, in [0, 1] without overflow.

    x: real array (integers become float32); the result has its shape.
    """
    return lax.logistic(_inexact(x))


def tanh(x) -> Array:
    """The hyperbolic tangent, elementwise (jax.nn.tanh is jax.numpy.tanh)."""
    return jnp.tanh(_inexact(x))


def softplus(x) -> Array:
    """log(1 + exp(x)) elementwise, computed as logaddexp(x, 0): no overflow for large x, and
    the gradient sigmoid(x) is exact in both tails (1/2 at 0). x: real array."""
    return jnp.logaddexp(_inexact(x), 0.0)


def log_sigmoid(x) -> Array:
    """log(sigmoid(x)) = -softplus(-x) elementwise: finite (about x) for very negative x, where
    log of the sigmoid would give -inf; gradient sigmoid(-x). x: real array."""
    return -softplus(-_inexact(x))


def soft_sign(x) -> Array:
    """x / (|x| + 1) elementwise, in (-1, 1); gradient 1 / (|x| + 1)^2. x: real array."""
    x = _inexact(x)
    return x / (jnp.abs(x) + 1.0)


def elu(x, alpha=1.0) -> Array:
    """Exponential linear unit (Clevert, Unterthiner, Hochreiter, arXiv 1511.07289): x for
    x > 0, alpha * (exp(x) - 1) for x <= 0, elementwise.

    x: real array; alpha: scalar or array broadcastable to x. The gradient at 0 is alpha (the
    exponential piece's), as jax.nn.elu.
    """
    x = _inexact(x)
    pos = x > 0
    return jnp.where(pos, x, alpha * jnp.expm1(jnp.where(pos, 0.0, x)))


def celu(x, alpha=1.0) -> Array:
    """Continuously differentiable ELU (Barron, arXiv 1704.07483): x for x > 0,
    alpha * (exp(x / alpha) - 1) for x <= 0, elementwise; the slope is 1 at 0 from both sides.

    x: real array; alpha: nonzero scalar or array broadcastable to x.
    """
    x = _inexact(x)
    pos = x > 0
    return jnp.where(pos, x, alpha * jnp.expm1(jnp.where(pos, 0.0, x) / alpha))


def selu(x) -> Array:
    """Scaled ELU (Klambauer et al., "Self-normalizing neural networks", NeurIPS 2017, eq. 2):
    lambda * elu(x, alpha) with lambda ~ 1.0507 and alpha ~ 1.6733. x: real array."""
    return _SELU_SCALE * elu(_inexact(x), _SELU_ALPHA)


def leaky_relu(x, negative_slope=1e-2) -> Array:
    """x for x >= 0, negative_slope * x below (Maas, Hannun, Ng, ICML 2013 workshop),
    elementwise; the gradient at 0 is 1. x: real array; negative_slope: scalar or array."""
    x = _inexact(x)
    return jnp.where(x >= 0, x, negative_slope * x)


def relu6(x) -> Array:
    """min(max(x, 0), 6) elementwise (Krizhevsky, "Convolutional deep belief networks on
    CIFAR-10", 2010). The gradient is 1 on (0, 6) and 0 elsewhere, the corners and NaN included
    (jax.nn.relu6's convention); NaN stays NaN. x: real array (integers become float32)."""
    x = _inexact(x)
    inside = (x > 0) & (x < 6)
    # Outside (0, 6) the value is the clipped one, through which no gradient flows.
    return jnp.where(inside, x, lax.stop_gradient(jnp.clip(x, 0.0, 6.0)))


def hard_sigmoid(x) -> Array:
    """relu6(x + 3) / 6 elementwise, a piecewise-linear sigmoid (Howard et al., "Searching for
    MobileNetV3", arXiv 1905.02244, eq. 2); gradient 1/6 on (-3, 3), 0 elsewhere."""
    return relu6(_inexact(x) + 3.0) / 6.0


def hard_silu(x) -> Array:
    """x * hard_sigmoid(x) elementwise, the hard swish of MobileNetV3 (Howard et al.,
    arXiv 1905.02244, eq. 2). `hard_swish` is the same function."""
    x = _inexact(x)
    return x * hard_sigmoid(x)


hard_swish = hard_silu
swish = silu


def hard_tanh(x) -> Array:
    """-1 below -1, x on [-1, 1], 1 above, elementwise (Collobert, PhD thesis 2004); the
    gradient at +-1 is 1. Keeps x's dtype, integers included (as jax.nn.hard_tanh)."""
    x = asarray(x)
    return jnp.where(x > 1, 1, jnp.where(x < -1, -1, x))


def mish(x) -> Array:
    """x * tanh(softplus(x)) elementwise (Misra, "Mish: a self regularized non-monotonic
    activation function", arXiv 1908.08681). x: real array."""
    x = _inexact(x)
    return x * jnp.tanh(softplus(x))


def squareplus(x, b=4) -> Array:
    """(x + sqrt(x^2 + b)) / 2 elementwise, a smooth ReLU built of algebraic operations
    (Barron, "Squareplus", arXiv 2112.11687, eq. 1). x: real array; b: smoothness >= 0 (scalar
    or array); b = 0 is relu."""
    x = _inexact(x)
    return (x + jnp.sqrt(x * x + b)) / 2.0


def sparse_plus(x) -> Array:
    """0 for x <= -1, (x + 1)^2 / 4 on (-1, 1), x for x >= 1, elementwise: a once
    differentiable twin of softplus (Blondel, Martins, Niculae, "Learning with Fenchel-Young
    losses", JMLR 2020, sec. 6.2). Gradient sparse_sigmoid(x). x: real array."""
    x = _inexact(x)
    return jnp.where(x <= -1.0, 0.0, jnp.where(x >= 1.0, x, (x + 1.0) * (x + 1.0) / 4.0))


def sparse_sigmoid(x) -> Array:
    """0 for x <= -1, (x + 1) / 2 on (-1, 1), 1 for x >= 1, elementwise: the derivative of
    sparse_plus (Blondel, Martins, Niculae, JMLR 2020, sec. 6.2). The gradient is 1/2 inside,
    1/4 at +-1 (as jax.nn.sparse_sigmoid, whose clip splits ties evenly), 0 outside."""
    x = _inexact(x)
    return 0.5 * jnp.clip(x + 1.0, 0.0, 2.0)


def log1mexp(x) -> Array:
    """log(1 - exp(-x)) elementwise, for x >= 0, accurate at both ends (Maechler, "Accurately
    computing log(1 - exp(-|a|))", Rmpfr vignette, 2012): log(-expm1(-x)) for x < log 2,
    log1p(-exp(-x)) above.

    x: real array; gives -inf at 0 (gradient inf), NaN for x < 0. The gradient is
    1 / expm1(x), as jax.nn.log1mexp's.
    """
    x = _inexact(x)
    small = x < math.log(2.0)
    lo = jnp.where(small, x, 1.0)  # each branch sees a point where it is finite when unused
    hi = jnp.where(small, 1.0, x)
    return jnp.where(small, jnp.log(-jnp.expm1(-lo)), jnp.log1p(-jnp.exp(-hi)))


def glu(x, axis: int = -1) -> Array:
    """Gated linear unit (Dauphin et al., "Language modeling with gated convolutional
    networks", ICML 2017, eq. 1): x split in halves a, b along `axis`, a * sigmoid(b).

    x: real array whose `axis` has even length n; the result has length n / 2 there. Raises
    ValueError for an odd length or an out-of-range axis, TypeError for a non-int axis.
    """
    x = _inexact(x)
    ax = normalize_axis(axis, x.ndim, "glu: axis")
    n = x.shape[ax]
    if n % 2:
        raise ValueError(f"glu: the length of axis {axis} of x (shape {x.shape}) must be even, "
                         f"got {n}{where_am_i()}")
    a, b = jnp.split(x, 2, axis=ax)
    return a * lax.logistic(b)


def _reduced_count(fn: str, x: Array, axis, mask, keepdims: bool):
    """The number of elements each reduction over `axis` takes: a Python int, or with a mask
    an array of x's dtype (the mask's sum)."""
    if mask is not None:
        return jnp.sum(mask.astype(x.dtype), axis=axis, keepdims=keepdims)
    axes = range(x.ndim) if axis is None else normalize_axes(axis, x.ndim, f"{fn}: axis")
    return math.prod(x.shape[a] for a in axes)


def logmeanexp(x, axis=None, where=None, keepdims: bool = False) -> Array:
    """log(mean(exp(x))) over `axis` = logsumexp(x) - log(n), without overflow.

    x: real array; axis: None (all), int or tuple; where: optional bool mask broadcastable to
    x, the elements counted (n is their number). A reduction over no element gives NaN, as
    jax.nn.logmeanexp. Returns the reduced shape (kept axes of length 1 with keepdims).
    Raises ValueError for a mask that does not broadcast, TypeError for a non-bool mask.
    """
    x = _inexact(x)
    mask = broadcast_where("logmeanexp", where, x.shape)
    if mask is not None:
        x = jnp.where(mask, x, -jnp.inf)
    lse = logsumexp(x, axis=axis, keepdims=keepdims)
    count = _reduced_count("logmeanexp", x, axis, mask, keepdims)
    if mask is not None:
        return lse - jnp.log(count)
    return lse - (math.log(count) if count else -math.inf)  # -inf - (-inf): NaN, as JAX


def _masked_mean(fn: str, x: Array, axis, mask) -> Array:
    """The mean over `axis` (keepdims) of the elements `mask` selects (all when None)."""
    total = jnp.sum(x if mask is None else jnp.where(mask, x, 0.0), axis=axis, keepdims=True)
    return total / _reduced_count(fn, x, axis, mask, keepdims=True)


def standardize(x, axis=-1, mean=None, variance=None, epsilon=1e-5, where=None, *,
                algorithm: str = "fast") -> Array:
    """(x - mean) / sqrt(variance + epsilon) over `axis` (jax.nn.standardize).

    x: real array; axis: int, tuple or None (all axes). mean, variance: arrays broadcastable
    to x, computed over `axis` (keepdims) when None; where: optional bool mask broadcastable to
    x, the elements the statistics take (the result is computed everywhere). algorithm:
    "fast", variance = mean(x^2) - mean(x)^2 clipped at 0 (JAX's default), or "stable", the
    two-pass mean((x - mean)^2). Returns x's shape. Raises ValueError for an unknown algorithm
    or a mask that does not broadcast, TypeError for a non-bool mask.
    """
    x = _inexact(x)
    if algorithm not in ("fast", "stable"):
        raise ValueError(f"standardize: algorithm must be 'fast' or 'stable', got "
                         f"{algorithm!r}{where_am_i()}")
    mask = broadcast_where("standardize", where, x.shape)
    if mean is None:
        mean = _masked_mean("standardize", x, axis, mask)
    if variance is None:
        if algorithm == "stable":
            d = x - mean
            variance = _masked_mean("standardize", d * d, axis, mask)
        else:
            square = _masked_mean("standardize", x * x, axis, mask)
            variance = jnp.maximum(square - mean * mean, 0.0)
    return (x - mean) * lax.rsqrt(variance + epsilon)
