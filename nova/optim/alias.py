"""Optimizers assembled from transformations, with optax's names, signatures and defaults.

Each is a `chain` of the transformations it is made of (the same parts in the same order as
optax's, so states line up leaf for leaf); learning_rate is a float or a schedule
step -> value everywhere it appears.
"""

from __future__ import annotations

import nova.numpy as jnp
from nova.optim.adaptive import (
    scale_by_adamax,
    scale_by_adan,
    scale_by_amsgrad,
    scale_by_belief,
    scale_by_lion,
    scale_by_radam,
    scale_by_yogi,
)
from nova.optim.base import GradientTransformation, chain, check_bool, check_float, identity
from nova.optim.elementwise import (
    add_noise,
    scale_by_optimistic_gradient,
    scale_by_rprop,
    scale_by_sign,
)
from nova.optim.factorized import scale_by_factored_rms, scale_by_sm3
from nova.optim.layerwise import (
    clip_by_block_rms,
    scale_by_novograd,
    scale_by_param_block_rms,
    scale_by_trust_ratio,
)
from nova.optim.rms import (
    scale_by_adadelta,
    scale_by_rms,
    scale_by_rss,
    scale_by_stddev,
)
from nova.optim.transform import (
    add_decayed_weights,
    ema,
    scale,
    scale_by_adam,
    scale_by_learning_rate,
    trace,
)
from nova.optim.wrappers import masked


def _weight_decay(fn: str, weight_decay):
    """A weight decay rate: a schedule, or a number >= 0."""
    if callable(weight_decay):
        return weight_decay
    return check_float("weight_decay", fn, weight_decay, lo=0.0)


def _momentum(momentum, nesterov: bool, fn: str, accumulator_dtype=None):
    """trace(momentum) or, for momentum None, the identity (optax's convention)."""
    nesterov = check_bool("nesterov", fn, nesterov)
    if momentum is None:
        return identity()
    return trace(momentum, nesterov, accumulator_dtype)


def sgd(learning_rate, momentum: float | None = None, nesterov: bool = False,
        accumulator_dtype=None) -> GradientTransformation:
    """Stochastic gradient descent, optionally with (Nesterov) momentum (Sutskever et al. 2013).

    update_t = -lr_t * g_t; with momentum m: trace_t = g_t + m * trace_{t-1} and
    update_t = -lr_t * trace_t (Nesterov: -lr_t * (g_t + m * trace_t)).

    Args:
      learning_rate: a float or a schedule callable(step) -> scalar.
      momentum: None (no momentum buffer, as optax) or a decay in [0, 1].
      nesterov: use Nesterov momentum.
      accumulator_dtype: the momentum buffer's dtype (None: the parameters').

    Returns:
      chain(trace(momentum, nesterov) or identity(), scale_by_learning_rate(learning_rate)).

    Raises:
      TypeError, ValueError: bad learning_rate, momentum or nesterov (see scale_by_learning_rate,
        trace).
    """
    return chain(_momentum(momentum, nesterov, "sgd", accumulator_dtype),
                 scale_by_learning_rate(learning_rate))


def adam(learning_rate, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8,
         eps_root: float = 0.0, mu_dtype=None, *, nesterov: bool = False
         ) -> GradientTransformation:
    """Adam (Kingma & Ba 2015, "Adam: A Method for Stochastic Optimization", Algorithm 1).

    update_t = -lr_t * m^_t / (sqrt(v^_t + eps_root) + eps), with the bias-corrected moment
    estimates of scale_by_adam (NAdam's Nesterov form with nesterov=True).

    Args:
      learning_rate: a float or a schedule callable(step) -> scalar.
      b1, b2: decay rates of the first and second moment estimates, in [0, 1).
      eps: added to the denominator outside the square root; eps_root: inside it.
      mu_dtype: the first moment's dtype (None: the parameters').
      nesterov: NAdam's Nesterov momentum (Dozat 2016).

    Returns:
      chain(scale_by_adam(b1, b2, eps, eps_root, mu_dtype, nesterov=nesterov),
      scale_by_learning_rate(learning_rate)).
    """
    return chain(scale_by_adam(b1, b2, eps, eps_root, mu_dtype, nesterov=nesterov),
                 scale_by_learning_rate(learning_rate))


def nadam(learning_rate, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8,
          eps_root: float = 0.0, mu_dtype=None, *, nesterov: bool = True
          ) -> GradientTransformation:
    """NAdam (Dozat 2016, "Incorporating Nesterov Momentum into Adam"): adam with
    nesterov=True, whose first moment estimate is b1 m_t / (1 - b1^(t+1)) + (1 - b1) g_t /
    (1 - b1^t). Arguments as adam."""
    return adam(learning_rate, b1, b2, eps, eps_root, mu_dtype, nesterov=nesterov)


def adamw(
    learning_rate, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8,
    eps_root: float = 0.0, mu_dtype=None, weight_decay=1e-4, mask=None, *,
    nesterov: bool = False,
) -> GradientTransformation:
    """AdamW: Adam with decoupled weight decay (Loshchilov & Hutter 2019, "Decoupled Weight Decay
    Regularization", Algorithm 2).

    update_t = -lr_t * (m^_t / (sqrt(v^_t + eps_root) + eps) + weight_decay * theta_{t-1}),
    where the decay term is applied only to the leaves selected by `mask`. As in optax, the decay
    is multiplied by the (scheduled) learning rate, i.e. eta_t * alpha = lr_t in the paper's terms.

    Args:
      learning_rate: a float or a schedule callable(step) -> scalar.
      b1, b2, eps, eps_root, mu_dtype, nesterov: as adam.
      weight_decay: the decoupled decay rate (>= 0), or a schedule.
      mask: None (decay every parameter), a pytree of bools shaped like the parameters (or a
        prefix of them), or a callable params -> such a pytree; `weight_decay_mask` decays only
        ndim >= 2 weights (GPT-2's convention: no decay on biases and LayerNorm parameters).

    Returns:
      chain(scale_by_adam(...), add_decayed_weights(weight_decay, mask),
      scale_by_learning_rate(learning_rate)); update needs `params`.
    """
    return chain(
        scale_by_adam(b1, b2, eps, eps_root, mu_dtype, nesterov=nesterov),
        add_decayed_weights(_weight_decay("adamw", weight_decay), mask),
        scale_by_learning_rate(learning_rate),
    )


def nadamw(
    learning_rate, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8,
    eps_root: float = 0.0, mu_dtype=None, weight_decay=1e-4, mask=None, *,
    nesterov: bool = True,
) -> GradientTransformation:
    """NAdamW: adamw with NAdam's Nesterov momentum (Dozat 2016; Loshchilov & Hutter 2019).
    Arguments as adamw."""
    return adamw(learning_rate, b1, b2, eps, eps_root, mu_dtype, weight_decay, mask,
                 nesterov=nesterov)


def adamax(learning_rate, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8
           ) -> GradientTransformation:
    """Adamax, Adam with the infinity norm (Kingma & Ba 2015, Algorithm 2):
    chain(scale_by_adamax(b1, b2, eps), scale_by_learning_rate(learning_rate))."""
    return chain(scale_by_adamax(b1, b2, eps), scale_by_learning_rate(learning_rate))


def adamaxw(learning_rate, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8,
            weight_decay=1e-4, mask=None) -> GradientTransformation:
    """Adamax with decoupled weight decay (Loshchilov & Hutter 2019): chain(scale_by_adamax,
    add_decayed_weights(weight_decay, mask), scale_by_learning_rate); update needs params."""
    return chain(scale_by_adamax(b1, b2, eps),
                 add_decayed_weights(_weight_decay("adamaxw", weight_decay), mask),
                 scale_by_learning_rate(learning_rate))


def amsgrad(learning_rate, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8,
            eps_root: float = 0.0, mu_dtype=None, bias_correction_mu: bool = True,
            bias_correction_nu: bool = True) -> GradientTransformation:
    """AMSGrad (Reddi, Kale & Kumar 2018, "On the Convergence of Adam and Beyond"): Adam with
    the running maximum of the second moment; see scale_by_amsgrad."""
    return chain(scale_by_amsgrad(b1, b2, eps, eps_root, mu_dtype, bias_correction_mu,
                                  bias_correction_nu),
                 scale_by_learning_rate(learning_rate))


def adabelief(learning_rate, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-16,
              eps_root: float = 1e-16, *, nesterov: bool = False) -> GradientTransformation:
    """AdaBelief (Zhuang et al. 2020, "AdaBelief Optimizer: Adapting Stepsizes by the Belief in
    Observed Gradients"): chain(scale_by_belief(...), scale_by_learning_rate(learning_rate))."""
    return chain(scale_by_belief(b1, b2, eps, eps_root, nesterov=nesterov),
                 scale_by_learning_rate(learning_rate))


def yogi(learning_rate, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-3
         ) -> GradientTransformation:
    """Yogi (Zaheer et al. 2018, "Adaptive Methods for Nonconvex Optimization"):
    chain(scale_by_yogi(b1, b2, eps), scale_by_learning_rate(learning_rate))."""
    return chain(scale_by_yogi(b1, b2, eps), scale_by_learning_rate(learning_rate))


def radam(learning_rate, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8,
          eps_root: float = 0.0, threshold: float = 5.0, *, nesterov: bool = False
          ) -> GradientTransformation:
    """Rectified Adam (Liu et al. 2020, "On the Variance of the Adaptive Learning Rate and
    Beyond"): chain(scale_by_radam(...), scale_by_learning_rate(learning_rate))."""
    return chain(scale_by_radam(b1, b2, eps, eps_root, threshold, nesterov=nesterov),
                 scale_by_learning_rate(learning_rate))


def adan(learning_rate, b1: float = 0.98, b2: float = 0.92, b3: float = 0.99, eps: float = 1e-8,
         eps_root: float = 1e-8, weight_decay=0.0, mask=None) -> GradientTransformation:
    """Adan (Xie et al. 2022, "Adan: Adaptive Nesterov Momentum Algorithm for Faster Optimizing
    Deep Models"): chain(scale_by_adan(...), add_decayed_weights(weight_decay, mask),
    scale_by_learning_rate(learning_rate)); update needs params."""
    return chain(scale_by_adan(b1, b2, b3, eps, eps_root),
                 add_decayed_weights(_weight_decay("adan", weight_decay), mask),
                 scale_by_learning_rate(learning_rate))


def lion(learning_rate, b1: float = 0.9, b2: float = 0.99, mu_dtype=None, weight_decay=1e-3,
         mask=None) -> GradientTransformation:
    """Lion (Chen et al. 2023, "Symbolic Discovery of Optimization Algorithms", Algorithm 2):
    update = -lr * (sign(b1 m + (1 - b1) g) + weight_decay * p), m = b2 m + (1 - b2) g.
    Returns chain(scale_by_lion, add_decayed_weights, scale_by_learning_rate); update needs
    params."""
    return chain(scale_by_lion(b1, b2, mu_dtype),
                 add_decayed_weights(_weight_decay("lion", weight_decay), mask),
                 scale_by_learning_rate(learning_rate))


def lamb(learning_rate, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-6,
         eps_root: float = 0.0, weight_decay=0.0, mask=None) -> GradientTransformation:
    """LAMB (You et al. 2020, "Large Batch Optimization for Deep Learning: Training BERT in 76
    minutes", Algorithm 2): Adam's update plus weight decay, scaled per leaf by the trust ratio
    ||p|| / ||update||. Returns chain(scale_by_adam(b1, b2, eps, eps_root),
    add_decayed_weights(weight_decay, mask), scale_by_trust_ratio(), scale_by_learning_rate);
    update needs params."""
    return chain(scale_by_adam(b1, b2, eps, eps_root),
                 add_decayed_weights(_weight_decay("lamb", weight_decay), mask),
                 scale_by_trust_ratio(),
                 scale_by_learning_rate(learning_rate))


def lars(learning_rate, weight_decay=0.0, weight_decay_mask=True,
         trust_coefficient: float = 0.001, eps: float = 0.0, trust_ratio_mask=True,
         momentum: float = 0.9, nesterov: bool = False) -> GradientTransformation:
    """LARS (You, Gitman & Ginsburg 2017, "Large Batch Training of Convolutional Networks",
    Algorithm 1): weight decay, the trust ratio trust_coefficient * ||p|| / ||u|| (on the
    leaves trust_ratio_mask selects), the learning rate, then momentum. The masks are pytrees
    of bools (True: the whole tree), prefixes of them, or callables. Update needs params."""
    return chain(
        add_decayed_weights(_weight_decay("lars", weight_decay), weight_decay_mask),
        masked(scale_by_trust_ratio(trust_coefficient=trust_coefficient, eps=eps),
               trust_ratio_mask),
        scale_by_learning_rate(learning_rate),
        trace(momentum, nesterov),
    )


def fromage(learning_rate, min_norm: float = 1e-6) -> GradientTransformation:
    """Fromage (Bernstein et al. 2020, "On the distance between two neural networks and the
    stability of learning", Algorithm 1): with c = 1 / sqrt(1 + lr^2),
    p <- c * (p - lr * ||p|| / ||g|| * g), i.e. chain(scale_by_trust_ratio(min_norm),
    scale_by_learning_rate(lr * c), add_decayed_weights(c - 1)). Update needs params."""
    if callable(learning_rate):
        def mult(count):
            lr = learning_rate(count)
            return 1 / jnp.sqrt(1 + lr * lr)

        return chain(scale_by_trust_ratio(min_norm),
                     scale_by_learning_rate(lambda c: mult(c) * learning_rate(c)),
                     add_decayed_weights(lambda c: mult(c) - 1))
    lr = check_float("learning_rate", "fromage", learning_rate, lo=0.0)
    mult = 1 / (1 + lr**2) ** 0.5
    return chain(scale_by_trust_ratio(min_norm), scale_by_learning_rate(lr * mult),
                 add_decayed_weights(mult - 1))


def novograd(learning_rate, b1: float = 0.9, b2: float = 0.25, eps: float = 1e-6,
             eps_root: float = 0.0, weight_decay: float = 0.0) -> GradientTransformation:
    """NovoGrad (Ginsburg et al. 2019, "Stochastic Gradient Methods with Layer-wise Adaptive
    Moments for Training of Deep Networks"): chain(scale_by_novograd(...),
    scale_by_learning_rate(learning_rate)); update needs params."""
    return chain(scale_by_novograd(b1, b2, eps, eps_root, weight_decay),
                 scale_by_learning_rate(learning_rate))


def rmsprop(learning_rate, decay: float = 0.9, eps: float = 1e-8, initial_scale: float = 0.0,
            eps_in_sqrt: bool = True, centered: bool = False, momentum: float | None = None,
            nesterov: bool = False, bias_correction: bool = False) -> GradientTransformation:
    """RMSProp (Hinton 2012, lecture 6e; centred: Graves 2013, eq. 38-41): the gradient over the
    root of a moving average of its square (of its variance with centered=True), times -lr,
    then optional (Nesterov) momentum. Returns chain(scale_by_rms or scale_by_stddev,
    scale_by_learning_rate(learning_rate), trace(momentum, nesterov) or identity())."""
    centered = check_bool("centered", "rmsprop", centered)
    scaler = scale_by_stddev if centered else scale_by_rms
    return chain(scaler(decay, eps, initial_scale, eps_in_sqrt, bias_correction),
                 scale_by_learning_rate(learning_rate),
                 _momentum(momentum, nesterov, "rmsprop"))


def adagrad(learning_rate, initial_accumulator_value: float = 0.1, eps: float = 1e-7
            ) -> GradientTransformation:
    """AdaGrad (Duchi, Hazan & Singer 2011, "Adaptive Subgradient Methods for Online Learning
    and Stochastic Optimization"): chain(scale_by_rss(initial_accumulator_value, eps),
    scale_by_learning_rate(learning_rate))."""
    return chain(scale_by_rss(initial_accumulator_value, eps),
                 scale_by_learning_rate(learning_rate))


def adadelta(learning_rate=None, rho: float = 0.9, eps: float = 1e-6, weight_decay=0.0,
             weight_decay_mask=None) -> GradientTransformation:
    """AdaDelta (Zeiler 2012, "ADADELTA: An Adaptive Learning Rate Method"):
    chain(add_decayed_weights(weight_decay, weight_decay_mask), scale_by_adadelta(rho, eps),
    scale_by_learning_rate(learning_rate)). As optax, learning_rate None leaves the updates
    unscaled (and unnegated: pass a learning rate, 1.0 for the paper's method, to descend).
    Update needs params."""
    return chain(add_decayed_weights(_weight_decay("adadelta", weight_decay), weight_decay_mask),
                 scale_by_adadelta(rho, eps),
                 scale_by_learning_rate(learning_rate))


def adafactor(
    learning_rate=None, min_dim_size_to_factor: int = 128, decay_rate: float = 0.8,
    decay_offset: int = 0, multiply_by_parameter_scale: bool = True,
    clipping_threshold: float | None = 1.0, momentum: float | None = None,
    dtype_momentum=jnp.float32, weight_decay_rate=None, eps: float = 1e-30, factored: bool = True,
    weight_decay_mask=None,
) -> GradientTransformation:
    """Adafactor (Shazeer & Stern 2018, "Adafactor: Adaptive Learning Rates with Sublinear
    Memory Cost", Algorithms 4-5 with update clipping and relative step size), as optax:

    chain(scale_by_factored_rms(factored, decay_rate, decay_offset, min_dim_size_to_factor,
    eps), [clip_by_block_rms(clipping_threshold)], [scale_by_learning_rate(learning_rate,
    flip_sign=False)], [scale_by_param_block_rms()], [ema(momentum, debias=False,
    accumulator_dtype=dtype_momentum)], [add_decayed_weights(weight_decay_rate,
    weight_decay_mask)], scale(-1)), each bracketed part present when its argument is not None
    (multiply_by_parameter_scale for the parameter scale). Update needs params.

    Raises:
      TypeError: multiply_by_parameter_scale is not a bool; see the parts for the others.
    """
    fn = "adafactor"
    by_scale = check_bool("multiply_by_parameter_scale", fn, multiply_by_parameter_scale)
    parts = [scale_by_factored_rms(factored, decay_rate, decay_offset, min_dim_size_to_factor,
                                   eps)]
    if clipping_threshold is not None:
        parts.append(clip_by_block_rms(clipping_threshold))
    if learning_rate is not None:
        parts.append(scale_by_learning_rate(learning_rate, flip_sign=False))
    if by_scale:
        parts.append(scale_by_param_block_rms())
    if momentum is not None:
        parts.append(ema(momentum, debias=False, accumulator_dtype=dtype_momentum))
    if weight_decay_rate is not None:
        parts.append(add_decayed_weights(_weight_decay(fn, weight_decay_rate),
                                         weight_decay_mask))
    parts.append(scale(-1.0))
    return chain(*parts)


def sm3(learning_rate: float, momentum: float = 0.9) -> GradientTransformation:
    """SM3 (Anil, Gupta, Koren & Singer 2019, "Memory-Efficient Adaptive Optimization"):
    chain(scale_by_sm3(momentum), scale(-learning_rate)); a constant learning rate only, as
    optax. Parameters must have ndim >= 1."""
    lr = check_float("learning_rate", "sm3", learning_rate, lo=0.0)
    return chain(scale_by_sm3(momentum), scale(-lr))


def rprop(learning_rate: float, eta_minus: float = 0.5, eta_plus: float = 1.2,
          min_step_size: float = 1e-6, max_step_size: float = 50.0) -> GradientTransformation:
    """Rprop (Riedmiller & Braun 1993; iRprop-, Igel & Huesken 2000), as optax:
    chain(scale_by_rprop(learning_rate, ...), scale(-1)). See scale_by_rprop for optax's
    one-step lag of the returned step."""
    return chain(scale_by_rprop(learning_rate, eta_minus, eta_plus, min_step_size,
                                max_step_size), scale(-1.0))


def noisy_sgd(learning_rate, eta: float = 0.01, gamma: float = 0.55, key=None, *,
              seed: int | None = None) -> GradientTransformation:
    """SGD with annealed Gaussian gradient noise (Neelakantan et al. 2015, "Adding Gradient
    Noise Improves Learning for Very Deep Networks"): chain(add_noise(eta, gamma, key, seed),
    scale_by_learning_rate(learning_rate)); the noise equals optax's for the same key."""
    return chain(add_noise(eta, gamma, key, seed=seed), scale_by_learning_rate(learning_rate))


def sign_sgd(learning_rate) -> GradientTransformation:
    """signSGD (Bernstein et al. 2018, "signSGD: Compressed Optimisation for Non-Convex
    Problems", Algorithm 1): update = -lr * sign(g)."""
    return chain(scale_by_sign(), scale_by_learning_rate(learning_rate))


def signum(learning_rate, beta: float = 0.9, accumulator_dtype=None) -> GradientTransformation:
    """Signum, signSGD with momentum (Bernstein et al. 2018): update =
    -lr * sign(m_t), m_t = beta m_{t-1} + (1 - beta) g_t (ema without debiasing)."""
    return chain(ema(beta, debias=False, accumulator_dtype=accumulator_dtype), scale_by_sign(),
                 scale_by_learning_rate(learning_rate))


def optimistic_gradient_descent(learning_rate, alpha: float = 1.0, beta: float = 1.0
                                ) -> GradientTransformation:
    """Optimistic gradient descent (Mokhtari, Ozdaglar & Pattathil 2020):
    update = -lr * ((alpha + beta) g_t - beta g_{t-1}); see scale_by_optimistic_gradient."""
    return chain(scale_by_optimistic_gradient(alpha, beta), scale_by_learning_rate(learning_rate))


def optimistic_adam_v2(learning_rate, *, alpha: float = 1.0, beta: float = 1.0,
                       b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8,
                       eps_root: float = 0.0, mu_dtype=None, nesterov: bool = True
                       ) -> GradientTransformation:
    """Optimistic Adam (Daskalakis et al. 2018, "Training GANs with Optimism"): Adam's update
    (NAdam's by default) fed to the optimistic gradient, then the learning rate, as
    optax.optimistic_adam_v2."""
    return chain(scale_by_adam(b1, b2, eps, eps_root, mu_dtype, nesterov=nesterov),
                 scale_by_optimistic_gradient(alpha, beta),
                 scale_by_learning_rate(learning_rate))


__all__ = [
    "adabelief", "adadelta", "adafactor", "adagrad", "adam", "adamax", "adamaxw", "adamw",
    "adan", "amsgrad", "fromage", "lamb", "lars", "lion", "nadam", "nadamw", "noisy_sgd",
    "novograd", "optimistic_adam_v2", "optimistic_gradient_descent", "radam", "rmsprop",
    "rprop", "sgd", "sign_sgd", "signum", "sm3", "yogi",
]
