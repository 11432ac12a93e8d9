"""Neural-network functions as compositions of nova.numpy ops (their gradients come from those).

Each is written in the plain spelling the compiler fuses (elementwise chains, row reductions,
max-subtract / exp / sum / divide for softmax and attention); there is no hand-written backward.
Stability: softmax, log_softmax, cross_entropy and attention subtract the row maximum (for the
first three its floor, through which no gradient flows) before exp, so logits of 1e4 do not
overflow; a row of attention scores that is masked everywhere gives zeros (value and gradient),
not NaN.

Layout: this module re-exports every name of functional_basic.py (argument checks, activations,
layer_norm, one_hot, dropout), functional_softmax.py (softmax, log_softmax, cross_entropy,
linear_cross_entropy), functional_attention.py (scaled_dot_product_attention,
dot_product_attention) and functional_conv.py (conv2d, max_pool2d, avg_pool2d).
"""

from __future__ import annotations

from nova.nn.functional_attention import dot_product_attention, scaled_dot_product_attention
from nova.nn.functional_basic import (  # noqa: F401
    _int_arg,
    _pair,
    broadcast_where,
    check_index_range,
    dropout,
    gelu,
    layer_norm,
    one_hot,
    relu,
    silu,
)
from nova.nn.functional_conv import avg_pool2d, conv2d, max_pool2d
from nova.nn.functional_softmax import (  # noqa: F401
    _lce_chunk_rows,
    cross_entropy,
    linear_cross_entropy,
    log_softmax,
    softmax,
)
from nova.scipy.special import logsumexp

__all__ = [
    "avg_pool2d",
    "conv2d",
    "cross_entropy",
    "dot_product_attention",
    "dropout",
    "gelu",
    "layer_norm",
    "linear_cross_entropy",
    "log_softmax",
    "logsumexp",
    "max_pool2d",
    "one_hot",
    "relu",
    "scaled_dot_product_attention",
    "silu",
    "softmax",
]
