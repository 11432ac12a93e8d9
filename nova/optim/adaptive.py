"""Per-coordinate adaptive rescalings of the Adam family (optax's scale_by_*): Adamax, AMSGrad,
AdaBelief, Yogi, RAdam, Adan and Lion. RMSProp, AdaGrad and AdaDelta are in `rms`, SM3 and
Adafactor in `factorized`, NovoGrad in `layerwise`, Rprop and the optimistic gradient in
`elementwise`.

Every state is a NamedTuple with optax's name and fields; step counts are 0-d int32, so an
update traces under `nova.jit` without retracing as the step advances.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import nova.numpy as jnp
from nova.core.pytree import tree_map
from nova.optim.base import (
    GradientTransformation,
    cast_tree,
    check_bool,
    check_float,
    check_float_dtype,
    check_like_state,
    full_like_tree,
    safe_increment,
    zero_count,
    zeros_like_tree,
)
from nova.optim.moments import (
    bias_correction as debias,
)
from nova.optim.moments import (
    update_infinity_moment,
    update_moment,
    update_moment_per_elem_norm,
)
from nova.optim.transform import ScaleByAdamState, nesterov_moment


def _decay(name: str, fn: str, value, *, open_top: bool = True):
    return check_float(name, fn, value, lo=0.0, hi=1.0, hi_open=open_top)


def _nonneg(name: str, fn: str, value):
    return check_float(name, fn, value, lo=0.0)


def scale_by_adamax(b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8
                    ) -> GradientTransformation:
    """Adamax's rescaling (Kingma & Ba 2015, "Adam", Algorithm 2):

        m_t = b1 m_{t-1} + (1 - b1) g_t      u_t = max(|g_t| + eps, b2 u_{t-1})
        update = m_t / (1 - b1^t) / u_t

    The state is ScaleByAdamState(count, mu=m, nu=u).

    Raises:
      ValueError: b1 or b2 outside [0, 1), eps negative.
    """
    fn = "scale_by_adamax"
    b1, b2 = _decay("b1", fn, b1), _decay("b2", fn, b2)
    eps = _nonneg("eps", fn, eps)

    def init(params):
        return ScaleByAdamState(count=zero_count(), mu=zeros_like_tree(params),
                                nu=zeros_like_tree(params))

    def update(updates, state, params=None):
        del params
        check_like_state(f"{fn}.update", updates, state.mu, "mu")
        count = safe_increment(state.count)
        mu = update_moment(updates, state.mu, b1, 1)
        nu = update_infinity_moment(updates, state.nu, b2, eps)
        mu_hat = debias(mu, b1, count)
        return tree_map(lambda m, v: m / v, mu_hat, nu), ScaleByAdamState(count, mu, nu)

    return GradientTransformation(init, update)


class ScaleByAmsgradState(NamedTuple):
    """State of scale_by_amsgrad: step count, first and second moments, and the running
    maximum of the (bias-corrected) second moment."""

    count: Any
    mu: Any
    nu: Any
    nu_max: Any


def scale_by_amsgrad(b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8,
                     eps_root: float = 0.0, mu_dtype=None, bias_correction_mu: bool = True,
                     bias_correction_nu: bool = True) -> GradientTransformation:
    """AMSGrad's rescaling (Reddi, Kale & Kumar 2018, "On the Convergence of Adam and Beyond",
    Algorithm 2, with optax's bias corrections): Adam's moments, with the second replaced by
    its running maximum nu_max_t = max(nu_max_{t-1}, v^_t), and
    update = m^_t / (sqrt(nu_max_t + eps_root) + eps).

    Raises:
      ValueError: b1 or b2 outside [0, 1), eps or eps_root negative.
      TypeError: a flag is not a bool or mu_dtype not a float dtype.
    """
    fn = "scale_by_amsgrad"
    b1, b2 = _decay("b1", fn, b1), _decay("b2", fn, b2)
    eps, eps_root = _nonneg("eps", fn, eps), _nonneg("eps_root", fn, eps_root)
    mu_dtype = check_float_dtype("mu_dtype", fn, mu_dtype)
    correct_mu = check_bool("bias_correction_mu", fn, bias_correction_mu)
    correct_nu = check_bool("bias_correction_nu", fn, bias_correction_nu)

    def init(params):
        return ScaleByAmsgradState(count=zero_count(), mu=zeros_like_tree(params, mu_dtype),
                                   nu=zeros_like_tree(params), nu_max=zeros_like_tree(params))

    def update(updates, state, params=None):
        del params
        check_like_state(f"{fn}.update", updates, state.nu, "nu")
        mu = update_moment(updates, state.mu, b1, 1)
        nu = update_moment_per_elem_norm(updates, state.nu, b2, 2)
        count = safe_increment(state.count)
        mu_hat = debias(mu, b1, count) if correct_mu else mu
        nu_eff = debias(nu, b2, count) if correct_nu else nu
        nu_max = tree_map(jnp.maximum, state.nu_max, nu_eff)
        updates = tree_map(lambda m, v: m / (jnp.sqrt(v + eps_root) + eps), mu_hat, nu_max)
        return updates, ScaleByAmsgradState(count, cast_tree(mu, mu_dtype), nu, nu_max)

    return GradientTransformation(init, update)


class ScaleByBeliefState(NamedTuple):
    """State of scale_by_belief: step count, first moment mu, and nu, the moving average of the
    squared prediction error (g - mu)^2 (plus eps_root)."""

    count: Any
    mu: Any
    nu: Any


def scale_by_belief(b1: float = 0.9, b2: float = 0.999, eps: float = 1e-16,
                    eps_root: float = 1e-16, *, nesterov: bool = False
                    ) -> GradientTransformation:
    """AdaBelief's rescaling (Zhuang et al. 2020, "AdaBelief Optimizer: Adapting Stepsizes by
    the Belief in Observed Gradients", Algorithm 2):

        m_t = b1 m_{t-1} + (1 - b1) g_t
        s_t = b2 s_{t-1} + (1 - b2) (g_t - m_t)^2 + eps_root
        update = m^_t / (sqrt(s_t / (1 - b2^t)) + eps)

    with m^_t = m_t / (1 - b1^t), or NAdam's form with nesterov.

    Raises:
      ValueError: b1 or b2 outside [0, 1), eps or eps_root negative.
      TypeError: nesterov is not a bool.
    """
    fn = "scale_by_belief"
    b1, b2 = _decay("b1", fn, b1), _decay("b2", fn, b2)
    eps, eps_root = _nonneg("eps", fn, eps), _nonneg("eps_root", fn, eps_root)
    nesterov = check_bool("nesterov", fn, nesterov)

    def init(params):
        return ScaleByBeliefState(count=zero_count(), mu=zeros_like_tree(params),
                                  nu=zeros_like_tree(params))

    def update(updates, state, params=None):
        del params
        check_like_state(f"{fn}.update", updates, state.mu, "mu")
        mu = update_moment(updates, state.mu, b1, 1)
        error = tree_map(lambda g, m: g - m, updates, mu)
        nu = update_moment_per_elem_norm(error, state.nu, b2, 2)
        nu = tree_map(lambda v: v + eps_root, nu)
        count = safe_increment(state.count)
        mu_hat = nesterov_moment(mu, updates, b1, count) if nesterov else \
            debias(mu, b1, count)
        nu_hat = debias(nu, b2, count)
        updates = tree_map(lambda m, v: m / (jnp.sqrt(v) + eps), mu_hat, nu_hat)
        return updates, ScaleByBeliefState(count, mu, nu)

    return GradientTransformation(init, update)


def scale_by_yogi(b1: float = 0.9, b2: float = 0.999, eps: float = 1e-3, eps_root: float = 0.0,
                  initial_accumulator_value: float = 1e-6) -> GradientTransformation:
    """Yogi's rescaling (Zaheer et al. 2018, "Adaptive Methods for Nonconvex Optimization",
    Algorithm 2): Adam with the additive second-moment update

        v_t = v_{t-1} - (1 - b2) sign(v_{t-1} - g_t^2) g_t^2

    both moments starting at initial_accumulator_value and bias-corrected as in optax;
    update = m^_t / (sqrt(v^_t + eps_root) + eps). The state is ScaleByAdamState.

    Raises:
      ValueError: b1 or b2 outside [0, 1), a negative eps, eps_root or initial value.
    """
    fn = "scale_by_yogi"
    b1, b2 = _decay("b1", fn, b1), _decay("b2", fn, b2)
    eps, eps_root = _nonneg("eps", fn, eps), _nonneg("eps_root", fn, eps_root)
    initial = _nonneg("initial_accumulator_value", fn, initial_accumulator_value)

    def init(params):
        return ScaleByAdamState(count=zero_count(), mu=full_like_tree(params, initial),
                                nu=full_like_tree(params, initial))

    def update(updates, state, params=None):
        del params
        check_like_state(f"{fn}.update", updates, state.mu, "mu")
        mu = update_moment(updates, state.mu, b1, 1)
        nu = tree_map(lambda g, v: v - (1 - b2) * jnp.sign(v - g * g) * (g * g), updates,
                      state.nu)
        count = safe_increment(state.count)
        mu_hat, nu_hat = debias(mu, b1, count), debias(nu, b2, count)
        updates = tree_map(lambda m, v: m / (jnp.sqrt(v + eps_root) + eps), mu_hat, nu_hat)
        return updates, ScaleByAdamState(count, mu, nu)

    return GradientTransformation(init, update)


def scale_by_radam(b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8, eps_root: float = 0.0,
                   threshold: float = 5.0, *, nesterov: bool = False) -> GradientTransformation:
    """Rectified Adam's rescaling (Liu et al. 2020, "On the Variance of the Adaptive Learning
    Rate and Beyond", Algorithm 2): with rho_inf = 2 / (1 - b2) - 1 and
    rho_t = rho_inf - 2 t b2^t / (1 - b2^t), the update is

        r_t m^_t / (sqrt(v^_t + eps_root) + eps)   when rho_t >= threshold,
        m^_t                                        otherwise,

    r_t = sqrt((rho_t - 4)(rho_t - 2) rho_inf / ((rho_inf - 4)(rho_inf - 2) rho_t)). The state
    is ScaleByAdamState.

    Raises:
      ValueError: b1 or b2 outside [0, 1), eps or eps_root negative.
      TypeError: nesterov is not a bool.
    """
    fn = "scale_by_radam"
    b1, b2 = _decay("b1", fn, b1), _decay("b2", fn, b2)
    eps, eps_root = _nonneg("eps", fn, eps), _nonneg("eps_root", fn, eps_root)
    threshold = check_float("threshold", fn, threshold)
    nesterov = check_bool("nesterov", fn, nesterov)
    rho_inf = 2.0 / (1.0 - b2) - 1.0

    def init(params):
        return ScaleByAdamState(count=zero_count(), mu=zeros_like_tree(params),
                                nu=zeros_like_tree(params))

    def update(updates, state, params=None):
        del params
        check_like_state(f"{fn}.update", updates, state.mu, "mu")
        mu = update_moment(updates, state.mu, b1, 1)
        nu = update_moment_per_elem_norm(updates, state.nu, b2, 2)
        count = safe_increment(state.count)
        b2t = b2 ** count.astype(jnp.float32)
        rho = rho_inf - 2 * count.astype(jnp.float32) * b2t / (1 - b2t)
        mu_hat = nesterov_moment(mu, updates, b1, count) if nesterov else \
            debias(mu, b1, count)
        nu_hat = debias(nu, b2, count)
        r = jnp.sqrt((rho - 4.0) * (rho - 2.0) * rho_inf
                     / ((rho_inf - 4.0) * (rho_inf - 2.0) * rho))

        def rectified(m, v):
            return jnp.where(rho >= threshold,
                             r.astype(m.dtype) * m / (jnp.sqrt(v + eps_root) + eps), m)

        return tree_map(rectified, mu_hat, nu_hat), ScaleByAdamState(count, mu, nu)

    return GradientTransformation(init, update)


class ScaleByAdanState(NamedTuple):
    """State of scale_by_adan: moments m, v (of gradient differences), n, the last gradient g,
    and the step count t (0-d int32), optax's field names."""

    m: Any
    v: Any
    n: Any
    g: Any
    t: Any


def scale_by_adan(b1: float = 0.98, b2: float = 0.92, b3: float = 0.99, eps: float = 1e-8,
                  eps_root: float = 0.0) -> GradientTransformation:
    """Adan's rescaling (Xie et al. 2022, "Adan: Adaptive Nesterov Momentum Algorithm for Faster
    Optimizing Deep Models", Algorithm 1, in optax's form, with decays b = 1 - beta): with
    d_t = g_t - g_{t-1} (0 at the first step),

        m_t = b1 m + (1 - b1) g_t      v_t = b2 v + (1 - b2) d_t
        n_t = b3 n + (1 - b3) (g_t + (1 - b2) d_t)^2
        update = (m^_t + (1 - b2) v^_t) / (sqrt(n^_t + eps_root) + eps)

    each ^ a bias correction by 1 - b**t.

    Raises:
      ValueError: a decay outside [0, 1), eps or eps_root negative.
    """
    fn = "scale_by_adan"
    b1, b2, b3 = _decay("b1", fn, b1), _decay("b2", fn, b2), _decay("b3", fn, b3)
    eps, eps_root = _nonneg("eps", fn, eps), _nonneg("eps_root", fn, eps_root)

    def init(params):
        z = zeros_like_tree
        return ScaleByAdanState(m=z(params), v=z(params), n=z(params), g=z(params),
                                t=zero_count())

    def update(updates, state, params=None):
        del params
        check_like_state(f"{fn}.update", updates, state.m, "m")
        first = state.t == 0
        diff = tree_map(lambda g, prev: jnp.where(first, jnp.zeros_like(g), g - prev), updates,
                        state.g)
        m = update_moment(updates, state.m, b1, 1)
        v = update_moment(diff, state.v, b2, 1)
        sq = tree_map(lambda g, d: g + (1 - b2) * d, updates, diff)
        n = update_moment_per_elem_norm(sq, state.n, b3, 2)
        t = safe_increment(state.t)
        m_hat, v_hat, n_hat = (debias(m, b1, t), debias(v, b2, t),
                               debias(n, b3, t))
        out = tree_map(lambda mh, vh, nh: (mh + (1 - b2) * vh) / (jnp.sqrt(nh + eps_root) + eps),
                       m_hat, v_hat, n_hat)
        return out, ScaleByAdanState(m=m, v=v, n=n, g=updates, t=t)

    return GradientTransformation(init, update)


class ScaleByLionState(NamedTuple):
    """State of scale_by_lion: step count (0-d int32) and the momentum mu."""

    count: Any
    mu: Any


_LION_MODES = ("hard", "smooth", "refined")


def scale_by_lion(b1: float = 0.9, b2: float = 0.99, mu_dtype=None, *, mode: str = "hard",
                  smooth_beta: float = 1.0) -> GradientTransformation:
    """Lion's rescaling (Chen et al. 2023, "Symbolic Discovery of Optimization Algorithms",
    Algorithm 2):

        c_t = b1 m_{t-1} + (1 - b1) g_t     update = sign(c_t)
        m_t = b2 m_{t-1} + (1 - b2) g_t

    mode "smooth" takes tanh(smooth_beta * c_t) and "refined" c_t where |c_t| < 1 and sign(c_t)
    elsewhere instead of sign(c_t), as optax.

    Raises:
      ValueError: b1 or b2 outside [0, 1], an unknown mode.
      TypeError: mu_dtype is not a float dtype.
    """
    fn = "scale_by_lion"
    b1 = _decay("b1", fn, b1, open_top=False)
    b2 = _decay("b2", fn, b2, open_top=False)
    mu_dtype = check_float_dtype("mu_dtype", fn, mu_dtype)
    smooth_beta = check_float("smooth_beta", fn, smooth_beta)
    if mode not in _LION_MODES:
        raise ValueError(f"{fn}: mode must be one of {_LION_MODES}, got {mode!r}")

    def direction(c):
        if mode == "hard":
            return jnp.sign(c)
        if mode == "smooth":
            return jnp.tanh(smooth_beta * c)
        return jnp.where(jnp.abs(c) < 1.0, c, jnp.sign(c))

    def init(params):
        return ScaleByLionState(count=zero_count(), mu=zeros_like_tree(params, mu_dtype))

    def update(updates, state, params=None):
        del params
        check_like_state(f"{fn}.update", updates, state.mu, "mu")
        out = tree_map(lambda g, m: direction((1.0 - b1) * g + b1 * m), updates, state.mu)
        mu = cast_tree(update_moment(updates, state.mu, b2, 1), mu_dtype)
        return out, ScaleByLionState(count=safe_increment(state.count), mu=mu)

    return GradientTransformation(init, update)



__all__ = [
    "ScaleByAdanState", "ScaleByAmsgradState", "ScaleByBeliefState", "ScaleByLionState",
    "scale_by_adamax", "scale_by_adan", "scale_by_amsgrad", "scale_by_belief", "scale_by_lion",
    "scale_by_radam", "scale_by_yogi",
]
