"""Root-mean-square rescalings (optax's): AdaGrad's running sum (scale_by_rss), RMSProp's moving
average (scale_by_rms), centred RMSProp (scale_by_stddev) and AdaDelta (scale_by_adadelta).
States are NamedTuples with optax's names and fields."""

from __future__ import annotations

from typing import Any, NamedTuple

import nova.numpy as jnp
from nova import lax
from nova.core.pytree import tree_map
from nova.optim.base import (
    GradientTransformation,
    check_bool,
    check_float,
    check_like_state,
    full_like_tree,
    safe_increment,
    zero_count,
    zeros_like_tree,
)
from nova.optim.moments import bias_correction as debias
from nova.optim.moments import update_moment, update_moment_per_elem_norm


def _decay(name: str, fn: str, value, *, open_top: bool = True):
    return check_float(name, fn, value, lo=0.0, hi=1.0, hi_open=open_top)


def _nonneg(name: str, fn: str, value):
    return check_float(name, fn, value, lo=0.0)


class ScaleByRssState(NamedTuple):
    """State of scale_by_rss: the running sum of squared gradients, shaped like the params."""

    sum_of_squares: Any


def scale_by_rss(initial_accumulator_value: float = 0.1, eps: float = 1e-7
                 ) -> GradientTransformation:
    """AdaGrad's rescaling (Duchi, Hazan & Singer 2011, "Adaptive Subgradient Methods for Online
    Learning and Stochastic Optimization", the diagonal form):

        s_t = s_{t-1} + g_t^2   (s_0 = initial_accumulator_value)
        update = g_t / sqrt(s_t + eps)   (0 where s_t = 0)

    Raises:
      ValueError: a negative argument; (update) updates not shaped like the parameters.
    """
    fn = "scale_by_rss"
    initial_accumulator_value = _nonneg("initial_accumulator_value", fn,
                                        initial_accumulator_value)
    eps = _nonneg("eps", fn, eps)

    def init(params):
        return ScaleByRssState(sum_of_squares=full_like_tree(params, initial_accumulator_value))

    def update(updates, state, params=None):
        del params
        check_like_state(f"{fn}.update", updates, state.sum_of_squares, "sum_of_squares")
        sos = tree_map(lambda g, s: g * g + s, updates, state.sum_of_squares)
        updates = tree_map(lambda g, s: jnp.where(s > 0, lax.rsqrt(s + eps), 0.0)
                           * g, updates, sos)
        return updates, ScaleByRssState(sum_of_squares=sos)

    return GradientTransformation(init, update)


class ScaleByRmsState(NamedTuple):
    """State of scale_by_rms: the moving average of squared gradients nu."""

    nu: Any


class ScaleByRmsWithCountState(NamedTuple):
    """State of scale_by_rms with bias_correction: step count (0-d int32) and nu."""

    count: Any
    nu: Any


class ScaleByRStdDevState(NamedTuple):
    """State of scale_by_stddev: moving averages of the gradients (mu) and their squares (nu)."""

    mu: Any
    nu: Any


class ScaleByRStdDevWithCountState(NamedTuple):
    """State of scale_by_stddev with bias_correction: step count (0-d int32), mu and nu."""

    count: Any
    mu: Any
    nu: Any


def _rms_scaling(eps, eps_in_sqrt: bool):
    if eps_in_sqrt:
        return lambda v: lax.rsqrt(v + eps)
    return lambda v: 1 / (jnp.sqrt(v) + eps)


def scale_by_rms(decay: float = 0.9, eps: float = 1e-8, initial_scale: float = 0.0,
                 eps_in_sqrt: bool = True, bias_correction: bool = False
                 ) -> GradientTransformation:
    """RMSProp's rescaling (Hinton, Srivastava & Swersky 2012, "Neural Networks for Machine
    Learning", lecture 6e):

        nu_t = decay * nu_{t-1} + (1 - decay) * g_t^2   (nu_0 = initial_scale)
        update = g_t / sqrt(nu_t + eps)   (g_t / (sqrt(nu_t) + eps) with eps_in_sqrt=False)

    With bias_correction, nu_t / (1 - decay**t) replaces nu_t and the state counts steps
    (ScaleByRmsWithCountState); otherwise the state is ScaleByRmsState.

    Raises:
      ValueError: decay outside [0, 1] ([0, 1) with bias_correction), eps or initial_scale
        negative.
      TypeError: a flag is not a bool.
    """
    fn = "scale_by_rms"
    corrected = check_bool("bias_correction", fn, bias_correction)
    eps_in_sqrt = check_bool("eps_in_sqrt", fn, eps_in_sqrt)
    decay = _decay("decay", fn, decay, open_top=corrected)
    eps = _nonneg("eps", fn, eps)
    initial_scale = _nonneg("initial_scale", fn, initial_scale)
    scaling = _rms_scaling(eps, eps_in_sqrt)

    def init(params):
        nu = full_like_tree(params, initial_scale)
        return ScaleByRmsWithCountState(count=zero_count(), nu=nu) if corrected else \
            ScaleByRmsState(nu=nu)

    def update(updates, state, params=None):
        del params
        check_like_state(f"{fn}.update", updates, state.nu, "nu")
        nu = update_moment_per_elem_norm(updates, state.nu, decay, 2)
        if corrected:
            count = safe_increment(state.count)
            nu_hat = debias(nu, decay, count)
            new_state = ScaleByRmsWithCountState(count=count, nu=nu)
        else:
            nu_hat, new_state = nu, ScaleByRmsState(nu=nu)
        return tree_map(lambda g, v: scaling(v) * g, updates, nu_hat), new_state

    return GradientTransformation(init, update)


def scale_by_stddev(decay: float = 0.9, eps: float = 1e-8, initial_scale: float = 0.0,
                    eps_in_sqrt: bool = True, bias_correction: bool = False
                    ) -> GradientTransformation:
    """Centred RMSProp's rescaling (Graves 2013, "Generating Sequences With Recurrent Neural
    Networks", eq. 38-41): with mu_t and nu_t the moving averages of g and g^2 (decay `decay`,
    nu_0 = initial_scale), update = g_t / sqrt(nu_t - mu_t^2 + eps) (or / (sqrt(...) + eps)
    with eps_in_sqrt=False). bias_correction divides both averages by 1 - decay**t.

    Raises:
      ValueError: decay outside [0, 1] ([0, 1) with bias_correction), eps or initial_scale
        negative.
      TypeError: a flag is not a bool.
    """
    fn = "scale_by_stddev"
    corrected = check_bool("bias_correction", fn, bias_correction)
    eps_in_sqrt = check_bool("eps_in_sqrt", fn, eps_in_sqrt)
    decay = _decay("decay", fn, decay, open_top=corrected)
    eps = _nonneg("eps", fn, eps)
    initial_scale = _nonneg("initial_scale", fn, initial_scale)
    scaling = _rms_scaling(eps, eps_in_sqrt)

    def init(params):
        mu, nu = zeros_like_tree(params), full_like_tree(params, initial_scale)
        if corrected:
            return ScaleByRStdDevWithCountState(count=zero_count(), mu=mu, nu=nu)
        return ScaleByRStdDevState(mu=mu, nu=nu)

    def update(updates, state, params=None):
        del params
        check_like_state(f"{fn}.update", updates, state.nu, "nu")
        mu = update_moment(updates, state.mu, decay, 1)
        nu = update_moment_per_elem_norm(updates, state.nu, decay, 2)
        if corrected:
            count = safe_increment(state.count)
            mu_hat, nu_hat = debias(mu, decay, count), debias(nu, decay, count)
            new_state = ScaleByRStdDevWithCountState(count=count, mu=mu, nu=nu)
        else:
            mu_hat, nu_hat, new_state = mu, nu, ScaleByRStdDevState(mu=mu, nu=nu)
        updates = tree_map(lambda g, m, v: scaling(v - m * m) * g, updates, mu_hat, nu_hat)
        return updates, new_state

    return GradientTransformation(init, update)


class ScaleByAdaDeltaState(NamedTuple):
    """State of scale_by_adadelta: moving averages of squared gradients (e_g) and of squared
    updates (e_x)."""

    e_g: Any
    e_x: Any


def scale_by_adadelta(rho: float = 0.9, eps: float = 1e-6) -> GradientTransformation:
    """AdaDelta's rescaling (Zeiler 2012, "ADADELTA: An Adaptive Learning Rate Method",
    Algorithm 1):

        E[g^2]_t = rho E[g^2]_{t-1} + (1 - rho) g_t^2
        update = sqrt(E[dx^2]_{t-1} + eps) / sqrt(E[g^2]_t + eps) * g_t
        E[dx^2]_t = rho E[dx^2]_{t-1} + (1 - rho) update^2

    (the paper's step is -update; the learning rate supplies the sign).

    Raises:
      ValueError: rho outside [0, 1], eps negative.
    """
    fn = "scale_by_adadelta"
    rho = _decay("rho", fn, rho, open_top=False)
    eps = _nonneg("eps", fn, eps)

    def init(params):
        return ScaleByAdaDeltaState(e_g=zeros_like_tree(params), e_x=zeros_like_tree(params))

    def update(updates, state, params=None):
        del params
        check_like_state(f"{fn}.update", updates, state.e_g, "e_g")
        e_g = update_moment(updates, state.e_g, rho, 2)
        updates = tree_map(lambda g, eg, ex: jnp.sqrt(ex + eps) / jnp.sqrt(eg + eps) * g,
                           updates, e_g, state.e_x)
        e_x = update_moment(updates, state.e_x, rho, 2)
        return updates, ScaleByAdaDeltaState(e_g=e_g, e_x=e_x)

    return GradientTransformation(init, update)



__all__ = [
    "ScaleByAdaDeltaState", "ScaleByRStdDevState", "ScaleByRStdDevWithCountState",
    "ScaleByRmsState", "ScaleByRmsWithCountState", "ScaleByRssState", "scale_by_adadelta",
    "scale_by_rms", "scale_by_rss", "scale_by_stddev",
]
