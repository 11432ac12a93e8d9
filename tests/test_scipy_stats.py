"""nova.scipy.stats against scipy.stats: every distribution function on grids of points that
reach outside the support and far into the tails, with valid and invalid parameters (float64,
and float32 for a subset), under nova.jit; gradients of log densities against jax.grad of
jax.scipy.stats; mode / rankdata / sem, gaussian_kde, and the argument errors.

Every grid has the same shapes ((1, 16) points against (8, 1) parameter columns), so the eager
kernels compiled for one distribution serve the next ones."""

from __future__ import annotations

import warnings

import jax
import jax.numpy as jjnp
import jax.scipy.stats as jst
import nova.numpy as jnp
import numpy as np
import pytest
import scipy.stats as st

import nova
import nova.scipy.stats as ns
from nova.core.errors import ShapeError

nan, inf = np.nan, np.inf

X = np.array([-1e3, -40, -8, -2, -0.3, 0, 0.2, 0.5, 0.9, 1, 1.5, 3, 8, 40, 1e3, nan])[None, :]
K = np.array([-1, 0, 1, 2, 2.5, 3, 5, 10, 50, nan, 0, 1, 2, 3, 4, 7], float)[None, :]
Q = np.array([0, 1e-300, 1e-20, 1e-5, 0.1, 0.5, 0.9, 1 - 1e-10, 1, -0.1, 1.1, nan, 0.3, 0.6,
              0.99, 1e-3])[None, :]
ANGLES = np.array([-1, 0, 0.1, 1, 2, 3, 4, 5, 6, 6.28, 2 * np.pi, 6.3, 7, -7, 1e3, nan])[None, :]


def col(*values):
    """A parameter column of 8 entries (the values repeated), shape (8, 1)."""
    return np.resize(np.array(values, float), 8)[:, None]


LOC_SCALE = (col(0, 1.5, -2, 0.3, 0, 1e3, -1, 2), col(1, 0.5, 3, -1, 1e-3, 20, 0, 1))
# name: (points, parameters); each table holds invalid parameters (NaN expected) too
CONTINUOUS = {
    "norm": (X, LOC_SCALE),
    "cauchy": (X, LOC_SCALE),
    "expon": (X, LOC_SCALE),
    "laplace": (X, LOC_SCALE),
    "logistic": (X, LOC_SCALE),
    "gumbel_r": (X, LOC_SCALE),
    "gumbel_l": (X, LOC_SCALE),
    "uniform": (X, LOC_SCALE),
    "gamma": (X, (col(0.5, 1, 3.5, -1, 2, 40, 0, 1e-3), col(0, 1, -1, 0, 0.5, 0, 0, 0),
                  col(1, 2, 0.5, 1, 1, 3, 1, 1))),
    "chi2": (X, (col(1, 2, 7.5, 0, 3, 80, -1, 0.5), col(0, 1, -1, 0, 0.5, 0, 0, 0),
                 col(1, 2, 0.5, 1, 1, 1, 1, 1))),
    "beta": (X, (col(0.5, 1, 3.5, 2, -1, 30, 0.1, 1), col(2, 1, 0.7, 5, 1, 40, 0.2, 1),
                 col(0, -1, 0.2, 0, 0, 0, 0, 0), col(1, 3, 0.5, 1, 1, 1, 1, 0))),
    "pareto": (X, (col(0.5, 1, 3.5, 0, 2, 10, -1, 0.1), col(0, -1, 0.2, 0, 0, 1, 0, 0),
                   col(1, 3, 0.5, 1, 1, 1, 1, 1))),
    "t": (X, (col(0.5, 1, 3.5, 1e3, inf, 0, 30, 2), col(0, -1, 0.2, 0, 1, 0, 0, 0),
              col(1, 3, 0.5, 1, 2, 1, 1, -1))),
    "truncnorm": (X, (col(-1, 0, 2, -inf, 30, -40, 1, 0.5), col(1, inf, 3, -3, 31, -38, 1, 0.2),
                      col(0, 0, 0, 0, 0, 0, 0, 0), col(1, 1, 1, 1, 1, 1, 1, 1))),
    "gennorm": (X, (col(0.5, 1, 2, 8, 0, 1.5, -1, 20),)),
    "vonmises": (ANGLES, (col(0, 0.5, 3, 50, -1, 1e3, 1e-3, 1),)),
    "wrapcauchy": (ANGLES, (col(0.01, 0.5, 0.99, 0, 1, 0.999, -0.5, 0.3),)),
}
DISCRETE = {
    "bernoulli": (K, (col(0, 0.3, 1, 1.2, -0.1, 0.5, 0.99, 0.7), col(0, 1, -1, 0, 0, 1, 0, 0))),
    "binom": (K, (col(3, 10, 0, 2.5, 10, 50, 7, -1), col(0.2, 0.5, 0.5, 0.5, 1.2, 0.999, 0, 0.3),
                  col(0, 1, 0, 0, 0, 0, 0, 0))),
    "betabinom": (K, (col(3, 10, 0, 2.5, 10, 50, 7, -1), col(0.2, 2, 0.5, 0.5, -1, 30, 1, 1),
                      col(1, 0.5, 2, 1, 1, 0.1, 1, 1), col(0, 1, 0, 0, 0, 0, 0, 0))),
    "geom": (K, (col(0.2, 1, 0.5, 0, 1.2, 1e-3, 0.9, 0.4), col(0, 1, -1, 0, 0, 0, 0, 2))),
    "nbinom": (K, (col(3, 0.5, 10, 0, 2, 40, 1, 2.5), col(0.2, 1, 0.5, 0.5, 0, 0.01, 0.9, 1.1),
                   col(0, 1, -1, 0, 0, 0, 0, 0))),
    "poisson": (K, (col(0, 0.5, 3, 40, -1, 1e-3, 7.5, 200), col(0, 1, -1, 0, 0, 0, 0, 0))),
}
FUNCTIONS = ("logpdf", "pdf", "cdf", "logcdf", "sf", "logsf", "ppf", "isf", "logpmf", "pmf")
# scipy's gammaln-free formulas give exact 0 where Nova's Lanczos gammaln(1) is ~9e-16
ATOL64 = 1e-14
# SciPy's wrapcauchy denominator 1 + c^2 - 2c cos x cancels for c near 1 (1.4e-11 off at
# c = 0.999, x = 0 by mpmath; Nova's (1 - c)^2 + 4c sin^2(x/2) is within 3e-15: see
# test_far_tails_and_dtypes)
RTOL64 = {"wrapcauchy": 1e-10}


def _functions(module):
    return [f for f in FUNCTIONS if hasattr(module, f)]


def _args(name, fn, table):
    points, params = table
    if fn in ("ppf", "isf"):
        points = Q
    if name == "bernoulli" and fn in ("cdf", "ppf"):
        params = params[:-1]  # no loc, as jax.scipy.stats.bernoulli
    return (points,) + tuple(params)


def _scipy(name, fn, args):
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return getattr(getattr(st, name), fn)(*args)


def _compare(got, want, rtol, atol, msg=""):
    got = np.asarray(got).astype(np.float64)
    want = np.array(np.broadcast_to(want, got.shape), np.float64)
    # SciPy takes some logs of densities or tails that have underflowed to 0 (laplace.logpdf,
    # gumbel_r.logsf at z = 1e6): -inf where the true value is a finite number below
    # log(tiny) ~ -708, which is what Nova returns
    underflowed = (want == -inf) & np.isfinite(got) & (got < -700)
    want[underflowed] = got[underflowed]
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, equal_nan=True, err_msg=msg)


TABLES = {**CONTINUOUS, **DISCRETE}


@pytest.mark.parametrize("name", list(TABLES))
def test_matches_scipy_float64(name):
    module = getattr(ns, name)
    for fn in _functions(module):
        args = _args(name, fn, TABLES[name])
        got = getattr(module, fn)(*args)
        assert got.dtype == np.float64 and got.shape == (8, 16), (fn, got.dtype, got.shape)
        _compare(got, _scipy(name, fn, args), RTOL64.get(name, 1e-12), ATOL64, f"{name}.{fn}")


# float32: a representative of each numerical route, against SciPy at the float32-rounded inputs
FLOAT32 = [("norm", "logcdf"), ("norm", "ppf"), ("gamma", "sf"), ("beta", "cdf"),
           ("truncnorm", "logcdf"), ("t", "logpdf"), ("cauchy", "logcdf"), ("binom", "logpmf")]


def test_matches_scipy_float32():
    for name, fn in FLOAT32:
        args = [np.asarray(a, np.float32) for a in _args(name, fn, TABLES[name])]
        got = getattr(getattr(ns, name), fn)(*args)
        assert got.dtype == np.float32, (name, fn, got.dtype)
        want = _scipy(name, fn, [a.astype(np.float64) for a in args])
        _compare(got, want, 3e-5, 1e-6, f"{name}.{fn} float32")


def _grid(values, dtype=np.float64):
    """values repeated over the (8, 16) grid of the tables (whose kernels are compiled)."""
    return np.resize(np.asarray(values, dtype), (8, 16))


def test_far_tails_and_dtypes():
    # norm: the log CDF far below any representable CDF, the quantile of a denormal probability
    z = _grid([-1e10, -40.0, -10.0, 10.0, 40.0])
    _compare(ns.norm.logcdf(z), st.norm.logcdf(z), 1e-13, 0)
    _compare(ns.norm.logsf(z), st.norm.logsf(z), 1e-13, 0)
    q = _grid([5e-324, 1e-300, 1e-200, 1e-30, 1 - 2 ** -53])
    _compare(ns.norm.ppf(q), st.norm.ppf(q), 1e-14, 0)
    _compare(ns.norm.isf(q), st.norm.isf(q), 1e-14, 0)
    # cauchy's CDF keeps its digits in the left tail, where 1/2 + arctan(z)/pi cancels
    far = _grid([-1e12, -1e300])
    _compare(ns.cauchy.cdf(far), -1 / (np.pi * far), 1e-12, 0)
    # the Gumbel log tails stay finite (about -z) after exp(-z) underflows
    _compare(ns.gumbel_r.logsf(_grid([50.0, 800.0])), _grid([-50.0, -800.0]), 1e-15, 0)
    # wrapcauchy at x = 0: (1 + c) / (2 pi (1 - c)), 1 - c exact
    c = _grid([0.999, 1 - 1e-9])
    _compare(ns.wrapcauchy.logpdf(0.0, c), np.log((1 + c) / (2 * np.pi * (1 - c))), 1e-14, 0)
    # ints promote to float32, Python scalars keep float64 arrays float64
    assert ns.norm.logpdf(_grid(np.arange(3), np.int32)).dtype == np.float32
    assert ns.poisson.logpmf(_grid(np.arange(3), np.int32), 2).dtype == np.float32
    assert ns.gamma.cdf(_grid([1.0]), 2.5, 0.5, 2).dtype == np.float64


def test_poisson_entropy_under_jit():
    mu = np.array([0, 1e-3, 0.5, 3, 10, 50, 150, 199.9, 200, 500, 1000, -1, nan, 1e5, 1e9, 2])
    got = np.asarray(nova.jit(ns.poisson.entropy)(mu))
    _compare(got[:13], _scipy("poisson", "entropy", [mu[:13]]), 1e-12, 0)
    big = mu[13:15]  # SciPy's own sum stops converging here
    _compare(got[13:15], 0.5 * np.log(2 * np.pi * np.e * big) - 1 / (12 * big), 1e-12, 0)


# The linear-algebra and sorting paths run under nova.jit: one compiled program is much cheaper
# to build than their eager op-by-op kernels.


def test_multivariate_under_jit():
    rng = np.random.default_rng(0)
    n = 3
    a = rng.standard_normal((n, n))
    cov = a @ a.T + np.eye(n)
    covs = np.stack([cov, 2 * cov, np.eye(n), cov + 1, cov])  # one covariance per point
    mean = rng.standard_normal(n)
    x = rng.standard_normal((5, n)) * 2
    alpha = np.array([0.5, 2.0, 3.0])
    simplex = rng.dirichlet(alpha, size=5).T  # (K, N): SciPy's layout
    counts = np.array([[1, 2, 3], [0, 0, 6], [2, 2, 2], [1.5, 1.5, 3], [-1, 3, 4]])
    p = np.array([0.2, 0.3, 0.5])
    totals = np.array([6, 5, 6, 0, -1])

    def densities(x, mean, cov, covs, simplex, counts):
        mvn = ns.multivariate_normal
        return (mvn.logpdf(x, mean, cov), mvn.pdf(x, mean, jnp.diagonal(cov)),
                mvn.logpdf(x, mean, 2.5), mvn.logpdf(x, mean, covs),
                mvn.logpdf(x[:, 0], 0.5, 2.0), mvn.logpdf(x[:2, :2], mean[:2], -jnp.eye(2)),
                ns.dirichlet.logpdf(simplex, alpha), ns.dirichlet.pdf(simplex[:2], alpha),
                ns.dirichlet.logpdf(simplex - 0.2, alpha), ns.dirichlet.logpdf(simplex, -alpha),
                ns.multinomial.logpmf(counts, 6, p), ns.multinomial.pmf(counts[0], totals, p))

    got = nova.jit(densities)(x, mean, cov, covs, simplex, counts)
    ref = st.multivariate_normal
    dirichlet = st.dirichlet.logpdf(simplex, alpha)
    wants = (ref.logpdf(x, mean, cov), ref.pdf(x, mean, np.diag(cov)), ref.logpdf(x, mean, 2.5),
             [ref.logpdf(x[i], mean, covs[i]) for i in range(5)],
             st.norm.logpdf(x[:, 0], 0.5, np.sqrt(2)), [nan, nan],  # not positive definite
             dirichlet, np.exp(dirichlet),  # the last component implied
             np.full(5, -inf), np.full(5, nan),  # off the simplex; invalid alpha
             st.multinomial.logpmf(counts, 6, p), st.multinomial.pmf(counts[0], totals, p))
    for i, (g, w) in enumerate(zip(got, wants, strict=True)):
        _compare(g, w, 1e-12, ATOL64, f"result {i}")


def test_mode_rankdata_sem_under_jit():
    rng = np.random.default_rng(1)
    a = rng.integers(0, 4, (5, 7)).astype(float)
    a[1, 2] = nan
    a[3, :4] = nan
    b = rng.integers(0, 4, (5, 7)).astype(np.int32)
    settings = [(axis, policy) for axis in (0, 1, None) for policy in ("propagate", "omit")]
    methods = [(m, axis) for m in ("average", "min", "max", "dense", "ordinal")
               for axis in (None, 0, 1)]

    def stats(a, b):
        return ([ns.mode(a, axis, policy) for axis, policy in settings],
                ns.mode(b % 3, axis=1, keepdims=True),
                [ns.rankdata(b, m, axis=axis) for m, axis in methods],
                ns.rankdata(a, axis=1),
                (ns.sem(a[::2], axis=1), ns.sem(a, axis=None, nan_policy="omit"),
                 ns.sem(a, 0, ddof=0, nan_policy="omit", keepdims=True)))

    modes, int_mode, ranks, nan_ranks, sems = nova.jit(stats)(a, b)
    for (axis, policy), got in zip(settings, modes, strict=True):
        want = st.mode(a, axis, policy)
        _compare(got.mode, want.mode, 0, 0, f"mode axis={axis} {policy}")
        np.testing.assert_array_equal(np.asarray(got.count), want.count)
    want = st.mode(b % 3, axis=1, keepdims=True)
    assert int_mode.mode.dtype == np.int32 and int_mode.mode.shape == (5, 1)
    np.testing.assert_array_equal(np.asarray(int_mode.mode), want.mode)
    np.testing.assert_array_equal(np.asarray(int_mode.count), want.count)
    for (method, axis), got in zip(methods, ranks, strict=True):
        np.testing.assert_array_equal(np.asarray(got), st.rankdata(b, method, axis=axis),
                                      err_msg=f"rankdata {method} axis={axis}")
        assert got.dtype == (np.float32 if method == "average" else np.int32)
    _compare(nan_ranks, st.rankdata(a, axis=1), 0, 0)  # a row holding NaN is all NaN
    wants = (st.sem(a[::2], axis=1), st.sem(a, axis=None, nan_policy="omit"),
             st.sem(a, 0, ddof=0, nan_policy="omit", keepdims=True))
    for got, want in zip(sems, wants, strict=True):
        _compare(got, want, 1e-14, 0)


def test_gaussian_kde_under_jit():
    rng = np.random.default_rng(2)
    data = rng.standard_normal((2, 16))
    weights = rng.random(16)
    pts = rng.standard_normal((2, 16)) * 3
    bandwidths = (None, "silverman", 0.3, lambda kde: 0.5 * kde.scotts_factor())

    def estimates(data, weights, pts):
        out = []
        for bw in bandwidths:
            kde = ns.gaussian_kde(data, bw, weights)
            out.append((kde.covariance, kde.inv_cov, kde.log_det, kde(pts), kde.logpdf(pts),
                        kde.integrate_gaussian(jnp.zeros(2), jnp.eye(2))))
        kde, other = ns.gaussian_kde(data[0]), ns.gaussian_kde(data[1])
        one_d = (kde.integrate_box_1d(-0.5, 1.0), kde.integrate_kde(other),
                 kde.logpdf(jnp.full(16, 100.0)))  # the pdf underflows there
        kde.set_bandwidth("silverman")
        return out, one_d + (kde.pdf(pts[0]),)

    got, got_1d = nova.jit(estimates)(data, weights, pts)
    for bw, values in zip(bandwidths, got, strict=True):
        ref = st.gaussian_kde(data, bw, weights)
        wants = (ref.covariance, ref.inv_cov, ref.log_det, ref(pts), ref.logpdf(pts),
                 ref.integrate_gaussian(np.zeros(2), np.eye(2)))
        for g, w in zip(values, wants, strict=True):
            _compare(g, w, 1e-12, 0, f"bw_method={bw}")
    ref, other = st.gaussian_kde(data[0]), st.gaussian_kde(data[1])
    wants = [ref.integrate_box_1d(-0.5, 1.0), ref.integrate_kde(other),
             ref.logpdf(np.full(16, 100.0))]
    ref.set_bandwidth("silverman")
    wants.append(ref.pdf(pts[0]))
    for g, w in zip(got_1d, wants, strict=True):
        _compare(g, w, 1e-12, 0)

    def sample(data, key):
        return ns.gaussian_kde(data[0]).resample(key, (4000,))

    draws = np.asarray(nova.jit(sample)(data, nova.random.key(0)))
    spread = data[0].var() + float(st.gaussian_kde(data[0]).covariance[0, 0])
    assert draws.shape == (1, 4000)
    assert abs(draws.mean() - data[0].mean()) < 4 * np.sqrt(spread / 4000)
    assert abs(draws.var() / spread - 1) < 0.1


def test_under_jit():
    x = X[:, :15].astype(np.float32)  # finite points
    loc, scale = (v.astype(np.float32) for v in LOC_SCALE)

    def several(x, loc, scale):
        return (ns.t.logpdf(x, 3.5, loc, scale), ns.cauchy.logcdf(x, loc, scale),
                ns.gumbel_r.logsf(x, loc, scale), ns.laplace.cdf(x, loc, scale),
                ns.poisson.logpmf(jnp.floor(x), scale))

    jitted = nova.jit(several)(x, loc, scale)
    eager = several(x, loc, scale)
    x64, loc64, scale64 = (v.astype(np.float64) for v in (x, loc, scale))
    wants = (_scipy("t", "logpdf", [x64, 3.5, loc64, scale64]),
             _scipy("cauchy", "logcdf", [x64, loc64, scale64]),
             _scipy("gumbel_r", "logsf", [x64, loc64, scale64]),
             _scipy("laplace", "cdf", [x64, loc64, scale64]),
             _scipy("poisson", "logpmf", [np.floor(x64), scale64]))
    for j, e, w in zip(jitted, eager, wants, strict=True):
        assert j.dtype == np.float32
        _compare(j, e, 1e-6, 1e-6)
        _compare(j, w, 3e-5, 1e-6)


X4 = np.array([-1.5, -0.2, 0.3, 0.8])
GRAD_CASES = [
    # (nova function, jax function, differentiated arguments, fixed trailing arguments)
    (ns.norm.logpdf, jst.norm.logpdf, (X4, 0.3, 1.7), ()),
    (ns.t.logpdf, jst.t.logpdf, (X4, 2.5), (0.5, 2.0)),
    (ns.gamma.logpdf, jst.gamma.logpdf, (X4 + 2, 1.7), (0.0, 1.5)),
    (ns.beta.logpdf, jst.beta.logpdf, (X4 / 4 + 0.5, 2.5, 1.3), ()),
]


@pytest.mark.parametrize("case", range(len(GRAD_CASES)))
def test_grad_matches_jax(case):
    ours, theirs, diff, fixed = GRAD_CASES[case]
    diff = tuple(np.asarray(v, np.float32) for v in diff)
    argnums = tuple(range(len(diff)))
    got = nova.jit(nova.grad(lambda *a: jnp.sum(ours(*a, *fixed)), argnums=argnums))(*diff)
    want = jax.grad(lambda *a: jjnp.sum(theirs(*a, *fixed)), argnums=argnums)(*diff)
    for g, w in zip(got, want, strict=True):
        _compare(g, np.asarray(w), 2e-4, 1e-5)


def test_bad_arguments():
    with pytest.raises(ShapeError, match="norm.logpdf"):
        ns.norm.logpdf(np.zeros(3), np.zeros(2))
    with pytest.raises(ValueError, match="alpha must be 1-d"):
        ns.dirichlet.logpdf(np.ones((2, 2)), np.ones((2, 2)))
    with pytest.raises(ValueError, match=r"x must have shape \(3, \.\.\.\) or \(2, \.\.\.\)"):
        ns.dirichlet.logpdf(np.ones(5), np.ones(3))
    with pytest.raises(ValueError, match="x must have shape"):
        ns.multivariate_normal.logpdf(np.zeros((4, 2)), np.zeros(3), np.eye(3))
    with pytest.raises(ValueError, match="cov must be"):
        ns.multivariate_normal.logpdf(np.zeros(3), np.zeros(3), np.eye(2))
    with pytest.raises(NotImplementedError, match="allow_singular"):
        ns.multivariate_normal.logpdf(np.zeros(3), np.zeros(3), np.eye(3), allow_singular=True)
    with pytest.raises(ValueError, match="category axis"):
        ns.multinomial.logpmf(3.0, 3, 1.0)
    with pytest.raises(ValueError, match="method must be one of"):
        ns.rankdata(np.ones(3), "mean")
    with pytest.raises(ValueError, match="nan_policy must be one of"):
        ns.mode(np.ones(3), nan_policy="skip")
    with pytest.raises(NotImplementedError, match="nan_policy='raise'"):
        ns.sem(np.ones(3), nan_policy="raise")
    with pytest.raises(ValueError, match="more than one element"):
        ns.gaussian_kde(np.ones(1))
    with pytest.raises(ValueError, match=r"weights. must have shape \(4,\)"):
        ns.gaussian_kde(np.arange(4.0), weights=np.ones(3))
    with pytest.raises(ValueError, match="bw_method must be"):
        ns.gaussian_kde(np.arange(4.0), bw_method="wide")
    data = np.arange(8.0).reshape(2, 4) ** 1.5
    # traced, so the estimate is not built eagerly: the errors come at trace time
    with pytest.raises(ValueError, match=r"points must have shape \(2, m\)"):
        nova.jit(lambda d: ns.gaussian_kde(d).evaluate(jnp.zeros((3, 2))))(data)
    with pytest.raises(NotImplementedError, match="more than one dimension"):
        nova.jit(lambda d: ns.gaussian_kde(d).integrate_box(jnp.zeros(2), jnp.ones(2)))(data)
