"""nova.scipy.stats: probability distributions and summary statistics over nova.numpy, as
jax.scipy.stats / scipy.stats.

One module per distribution (`nova.scipy.stats.norm.logpdf(x, loc, scale)`), each with the
functions jax.scipy.stats' module has and SciPy's parameter defaults. Conventions shared by all
of them (nova/scipy/stats/_common.py): the arguments broadcast to one shape and promote to one
float dtype (ints and bools become float32, float64 stays float64); invalid parameters (a
scale <= 0, a probability outside [0, 1], ...) and NaN input give NaN, points outside the
support give pdf 0 / logpdf -inf (pmf: non-integers too) and cdf 0 or 1, quantile functions
give NaN outside [0, 1]; the log functions and tails are computed without underflow or
cancellation where SciPy's are (log_ndtr for the normal, log-space masses for truncnorm, the
complementary incomplete gamma and beta functions for survival functions). Shapes that do not
broadcast raise ShapeError (a ValueError) naming the function. All of it is differentiable and
traceable (jit, vmap) through nova.numpy.

Also: mode, rankdata, sem (nova/scipy/stats/_descriptive.py) and gaussian_kde (_kde.py).
"""

from nova.scipy.stats import (
    bernoulli,
    beta,
    betabinom,
    binom,
    cauchy,
    chi2,
    dirichlet,
    expon,
    gamma,
    gennorm,
    geom,
    gumbel_l,
    gumbel_r,
    laplace,
    logistic,
    multinomial,
    multivariate_normal,
    nbinom,
    norm,
    pareto,
    poisson,
    t,
    truncnorm,
    uniform,
    vonmises,
    wrapcauchy,
)
from nova.scipy.stats._descriptive import ModeResult, mode, rankdata, sem
from nova.scipy.stats._kde import gaussian_kde

__all__ = [
    "ModeResult",
    "bernoulli",
    "beta",
    "betabinom",
    "binom",
    "cauchy",
    "chi2",
    "dirichlet",
    "expon",
    "gamma",
    "gaussian_kde",
    "gennorm",
    "geom",
    "gumbel_l",
    "gumbel_r",
    "laplace",
    "logistic",
    "mode",
    "multinomial",
    "multivariate_normal",
    "nbinom",
    "norm",
    "pareto",
    "poisson",
    "rankdata",
    "sem",
    "t",
    "truncnorm",
    "uniform",
    "vonmises",
    "wrapcauchy",
]
