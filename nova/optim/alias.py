"""Optimizers assembled from transformations: sgd, adam, adamw (as optax's aliases)."""

from __future__ import annotations

from nova.optim.base import GradientTransformation, chain, check_bool, check_float, identity
from nova.optim.transform import (
    add_decayed_weights,
    scale_by_adam,
    scale_by_learning_rate,
    trace,
)


def sgd(learning_rate, momentum: float = 0.0, nesterov: bool = False) -> GradientTransformation:
    """Stochastic gradient descent, optionally with (Nesterov) momentum (Sutskever et al. 2013).

    update_t = -lr_t * g_t; with momentum m: trace_t = g_t + m * trace_{t-1} and
    update_t = -lr_t * trace_t (Nesterov: -lr_t * (g_t + m * trace_t)).

    Args:
      learning_rate: a float or a schedule callable(step) -> scalar.
      momentum: in [0, 1]; 0 keeps no momentum buffer.
      nesterov: use Nesterov momentum (needs momentum > 0 to matter).

    Returns:
      chain(trace(momentum, nesterov), scale_by_learning_rate(learning_rate)); with momentum 0 the
      state of the first part is EmptyState().

    Raises:
      TypeError, ValueError: bad learning_rate, momentum or nesterov (see scale_by_learning_rate,
        trace).
    """
    momentum = check_float("momentum", "sgd", momentum, lo=0.0, hi=1.0)
    nesterov = check_bool("nesterov", "sgd", nesterov)
    first = trace(momentum, nesterov) if momentum > 0.0 else identity()
    return chain(first, scale_by_learning_rate(learning_rate))


def adam(
    learning_rate, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8, eps_root: float = 0.0
) -> GradientTransformation:
    """Adam (Kingma & Ba 2015, "Adam: A Method for Stochastic Optimization", Algorithm 1).

    update_t = -lr_t * m^_t / (sqrt(v^_t + eps_root) + eps), with the bias-corrected moment
    estimates of scale_by_adam.

    Args:
      learning_rate: a float or a schedule callable(step) -> scalar.
      b1, b2: decay rates of the first and second moment estimates, in [0, 1).
      eps: added to the denominator outside the square root; eps_root: inside it.

    Returns:
      chain(scale_by_adam(b1, b2, eps, eps_root), scale_by_learning_rate(learning_rate)).
    """
    return chain(scale_by_adam(b1, b2, eps, eps_root), scale_by_learning_rate(learning_rate))


def adamw(
    learning_rate, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8,
    eps_root: float = 0.0, weight_decay: float = 1e-4, mask=None,
) -> GradientTransformation:
    """AdamW: Adam with decoupled weight decay (Loshchilov & Hutter 2019, "Decoupled Weight Decay
    Regularization", Algorithm 2).

    update_t = -lr_t * (m^_t / (sqrt(v^_t + eps_root) + eps) + weight_decay * theta_{t-1}),
    where the decay term is applied only to the leaves selected by `mask`. As in optax, the decay
    is multiplied by the (scheduled) learning rate, i.e. eta_t * alpha = lr_t in the paper's terms.

    Args:
      learning_rate: a float or a schedule callable(step) -> scalar.
      b1, b2, eps, eps_root: as adam.
      weight_decay: the decoupled decay rate (>= 0).
      mask: None (decay every parameter), a pytree of bools shaped like the parameters, or a
        callable params -> such a pytree; `weight_decay_mask` decays only ndim >= 2 weights
        (GPT-2's convention: no decay on biases and LayerNorm parameters).

    Returns:
      chain(scale_by_adam(...), add_decayed_weights(weight_decay, mask),
      scale_by_learning_rate(learning_rate)); update needs `params`.
    """
    return chain(
        scale_by_adam(b1, b2, eps, eps_root),
        add_decayed_weights(weight_decay, mask),
        scale_by_learning_rate(learning_rate),
    )
