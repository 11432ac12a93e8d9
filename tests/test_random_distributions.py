"""nova.random's further distributions (nova/random_gamma.py, random_discrete.py,
random_distributions.py): Kolmogorov-Smirnov statistics and moments against scipy with fixed
keys (each threshold also rejects a wrong scale), JAX's numbers where the construction is JAX's,
JAX's shapes and dtypes, determinism, jit, vmap, gamma's gradient in `a`, and bad input."""

import jax
import jax.numpy as jnp
import nova.numpy as nnp
import numpy as np
import pytest
import scipy.stats as st

import nova
import nova.random as nr
from nova.core.errors import ShapeError

N = 4000  # one sample size everywhere, so compiled kernels are shared between tests
KS_MAX = 0.03  # about the 0.1% critical value of the KS statistic for N samples
KEY = nr.key(0)


@pytest.fixture(autouse=True)
def _jax_without_x64():
    with jax.enable_x64(False):
        yield


def _ks(x, dist, wrong=None):
    """x follows `dist` (KS below KS_MAX) and, if given, not `wrong` (KS above KS_MAX)."""
    x = np.asarray(x, np.float64)
    assert x.shape == (N,)
    stat = st.kstest(x, dist.cdf).statistic
    assert stat < KS_MAX, stat
    if wrong is not None:
        assert st.kstest(x, wrong.cdf).statistic > KS_MAX


# --- gamma family ---------------------------------------------------------------------------------


@pytest.mark.parametrize("a", [0.3, 1.0, 4.5])
def test_gamma_ks(a):
    x = nr.gamma(KEY, a, (N,))
    assert x.dtype == nnp.float32
    _ks(x, st.gamma(a), wrong=st.gamma(a, scale=1.25))


def test_loggamma_small_a_and_agreement_with_gamma():
    # a = 0.01: most Gamma samples are below float32's tiny; loggamma keeps them.
    lx = np.asarray(nr.loggamma(KEY, 0.01, (N,)))
    assert np.isfinite(lx).all() and lx.min() < -200
    _ks(lx, st.loggamma(0.01), wrong=st.loggamma(0.012))
    np.testing.assert_allclose(
        np.exp(np.asarray(nr.loggamma(KEY, 2.5, (N,)))), nr.gamma(KEY, 2.5, (N,)), rtol=1e-5
    )


def test_beta_dirichlet_ks():
    _ks(nr.beta(KEY, 0.5, 2.0, (N,)), st.beta(0.5, 2.0), wrong=st.beta(0.6, 2.0))
    alpha = np.array([0.5, 1.5, 3.0], np.float32)
    x = np.asarray(nr.dirichlet(KEY, alpha, (N,)))
    assert x.shape == (N, 3)
    np.testing.assert_allclose(x.sum(-1), 1.0, rtol=1e-5)
    _ks(x[:, 1], st.beta(1.5, 3.5), wrong=st.beta(1.5, 3.0))


def test_chisquare_f_t_ks():
    _ks(nr.chisquare(KEY, 3.0, (N,)), st.chi2(3.0), wrong=st.chi2(3.0, scale=1.25))
    _ks(nr.f(KEY, 4.0, 7.0, (N,)), st.f(4.0, 7.0), wrong=st.f(4.0, 7.0, scale=1.25))
    _ks(nr.t(KEY, 3.0, (N,)), st.t(3.0), wrong=st.t(3.0, scale=1.25))


def test_gamma_array_parameter():
    a = np.repeat(np.array([0.5, 2.0, 8.0, 30.0], np.float32), N // 4)
    x = np.asarray(nr.gamma(KEY, a, (N,))).reshape(4, N // 4)
    np.testing.assert_allclose(x.mean(1), [0.5, 2.0, 8.0, 30.0], rtol=0.1)
    np.testing.assert_allclose(x.var(1), [0.5, 2.0, 8.0, 30.0], rtol=0.2)


def test_gamma_grad_is_the_implicit_reparameterization():
    a = 2.0
    x = nr.gamma(KEY, a, (N,))
    per_elem = nova.grad(lambda v: nnp.sum(nr.gamma(KEY, v)))(nnp.full((N,), a))
    ref = jax.lax.random_gamma_grad(jnp.full((N,), a), jnp.asarray(np.asarray(x)))
    np.testing.assert_allclose(per_elem, ref, rtol=2e-3, atol=1e-5)
    assert abs(float(np.mean(per_elem)) - 1.0) < 0.08  # d E[x] / da = 1


# --- counts ---------------------------------------------------------------------------------------


def _pmf_close(x, pmf, tol=0.02):
    x = np.asarray(x).astype(np.int64)
    ks = np.arange(x.min(), x.max() + 1)
    emp = np.array([(x == k).mean() for k in ks])
    assert np.abs(emp - pmf(ks)).max() < tol
    return x


@pytest.mark.parametrize("lam", [0.7, 4.0, 25.0, 400.0])
def test_poisson(lam):
    x = nr.poisson(KEY, lam, (N,))
    assert x.dtype == nnp.int32
    x = _pmf_close(x, st.poisson(lam).pmf)
    assert abs(x.mean() - lam) < 4 * np.sqrt(lam / N)
    assert abs(x.var() / lam - 1) < 0.1


@pytest.mark.parametrize("n,p", [(6.0, 0.3), (200.0, 0.3), (200.0, 0.85), (9.0, 0.9)])
def test_binomial(n, p):
    x = nr.binomial(KEY, n, p, (N,))
    assert x.dtype == nnp.float32
    x = _pmf_close(x, st.binom(int(n), p).pmf)
    assert x.min() >= 0 and x.max() <= n
    sd = np.sqrt(n * p * (1 - p))
    assert abs(x.mean() - n * p) < 4 * sd / np.sqrt(N)
    assert abs(x.std() / sd - 1) < 0.06


def test_binomial_edge_values():
    n, p = np.full(N, 5.0, np.float32), np.full(N, 0.5, np.float32)  # N: the kernels are cached
    n[:6] = [-1.0, np.nan, np.inf, 5.0, 5.0, 5.0]
    p[:6] = [0.5, 0.5, 0.5, -0.1, 1.0, 0.0]
    got = np.asarray(nr.binomial(KEY, n, p))
    np.testing.assert_array_equal(got[:6], [np.nan, np.nan, np.inf, np.nan, 5.0, 0.0])


def test_multinomial():
    p = np.array([0.2, 0.3, 0.5], np.float32)
    x = np.asarray(nr.multinomial(KEY, 10.0, p, shape=(N, 3)))
    assert x.dtype == np.float32 and x.shape == (N, 3)
    np.testing.assert_array_equal(x.sum(-1), 10.0)
    np.testing.assert_allclose(x.mean(0), 10 * p, atol=0.08)
    _pmf_close(x[:, 2], st.binom(10, 0.5).pmf)


def test_geometric_and_rademacher_match_jax():
    jk = jax.random.PRNGKey(0)
    g = np.asarray(nr.geometric(KEY, 0.3, (N,)))
    jg = np.asarray(jax.random.geometric(jk, 0.3, (N,)))
    assert g.dtype == jg.dtype == np.int32 and (g == jg).mean() > 0.999
    _pmf_close(g, st.geom(0.3).pmf)
    r = np.asarray(nr.rademacher(KEY, (N,)))
    np.testing.assert_array_equal(r, jax.random.rademacher(jk, (N,)))
    assert set(np.unique(r)) == {-1, 1}


# --- closed forms: JAX's numbers and scipy's distributions ----------------------------------------

CLOSED = [  # name, args after the key (shape last), scipy distribution for a scale factor s
    ("cauchy", ((N,),), lambda s: st.cauchy(scale=s)),
    ("laplace", ((N,),), lambda s: st.laplace(scale=s)),
    ("logistic", ((N,),), lambda s: st.logistic(scale=s)),
    ("lognormal", (0.5, (N,)), lambda s: st.lognorm(0.5, scale=s)),
    ("pareto", (2.5, (N,)), lambda s: st.pareto(2.5, scale=s)),
    ("rayleigh", (2.0, (N,)), lambda s: st.rayleigh(scale=2.0 * s)),
    ("maxwell", ((N,),), lambda s: st.maxwell(scale=s)),
    ("double_sided_maxwell", (1.0, 2.0, (N,)), None),  # |x - 1| / 2 is Maxwell: below
    ("weibull_min", (2.0, 1.5, (N,)), lambda s: st.weibull_min(1.5, scale=2.0 * s)),
    ("wald", (1.5, (N,)), lambda s: st.invgauss(1.5, scale=s)),
    ("triangular", (0.0, 0.3, 2.0, (N,)), lambda s: st.triang(0.15, scale=2.0 * s)),
]


@pytest.mark.parametrize("name,args,dist", CLOSED, ids=[c[0] for c in CLOSED])
def test_closed_forms_match_jax_and_scipy(name, args, dist):
    x = np.asarray(getattr(nr, name)(KEY, *args))
    ref = np.asarray(getattr(jax.random, name)(jax.random.PRNGKey(0), *args))
    assert x.dtype == ref.dtype and x.shape == ref.shape
    np.testing.assert_allclose(x, ref, rtol=2e-5, atol=1e-6)
    if dist is None:
        x, dist = np.abs(x - 1.0) / 2.0, (lambda s: st.maxwell(scale=s))
    _ks(x, dist(1.0), wrong=dist(1.25))


def test_generalized_normal_and_ball():
    _ks(nr.generalized_normal(KEY, 1.5, (N,)), st.gennorm(1.5), wrong=st.gennorm(1.5, scale=1.25))
    x = np.asarray(nr.ball(KEY, 3, 2, (N,)))
    assert x.shape == (N, 3) and x.dtype == np.float32
    r = np.linalg.norm(x, axis=-1)
    _ks(r**3, st.uniform())  # uniform in the ball: P(|x| < r) = r^3
    x1 = np.asarray(nr.ball(KEY, 3, 1.0, (N,)))
    assert np.abs(x1).sum(-1).max() <= 1.0


COV = np.array([[2.0, 0.6, 0.1], [0.6, 1.0, -0.3], [0.1, -0.3, 0.5]], np.float32)
MEAN = np.array([1.0, -2.0, 0.5], np.float32)


def test_multivariate_normal():
    x = nr.multivariate_normal(KEY, MEAN, COV, (N,))
    ref = jax.random.multivariate_normal(jax.random.PRNGKey(0), MEAN, COV, (N,))
    np.testing.assert_allclose(x, ref, rtol=1e-4, atol=1e-5)
    for method in ("eigh", "svd"):
        y = np.asarray(nr.multivariate_normal(KEY, MEAN, COV, (N,), method=method))
        np.testing.assert_allclose(y.mean(0), MEAN, atol=0.08)
        np.testing.assert_allclose(np.cov(y.T), COV, atol=0.12)
    singular = np.array([[1.0, 1.0, 0], [1.0, 1.0, 0], [0, 0, 1.0]], np.float32)
    y = nr.multivariate_normal(KEY, np.zeros(3, np.float32), singular, (N,), None, "eigh")
    y = np.asarray(y)
    np.testing.assert_allclose(y[:, 0], y[:, 1], atol=1e-3)


def test_orthogonal_matches_jax():
    for n, m in ((5, 3), (3, 5)):  # one QR shape: compiled once
        q = np.asarray(nr.orthogonal(KEY, n, (2,), m=m))
        ref = np.asarray(jax.random.orthogonal(jax.random.PRNGKey(0), n, (2,), m=m))
        assert q.shape == ref.shape == (2, n, m)
        np.testing.assert_allclose(q, ref, atol=1e-5)
        gram = q @ q.swapaxes(-1, -2) if n < m else q.swapaxes(-1, -2) @ q
        np.testing.assert_allclose(gram, np.broadcast_to(np.eye(min(n, m)), gram.shape), atol=1e-5)


# --- shapes, dtypes, determinism, transforms ------------------------------------------------------

A3 = np.full((3,), 2.0, np.float32)
A21 = np.full((2, 1), 2.0, np.float32)
SHAPES = [  # name, args after the key, kwargs
    ("gamma", (A3,), {}),
    ("gamma", (A21, (4, 2, 3)), {}),
    ("loggamma", (2.0,), {"dtype": jnp.float16}),
    ("beta", (A3, A21), {}),
    ("dirichlet", (A3, (4, 2)), {}),
    ("chisquare", (A21,), {}),
    ("f", (A21, 3.0), {}),
    ("t", (A3, (2, 3)), {}),
    ("poisson", (A21,), {}),
    ("binomial", (5.0, A3), {}),
    ("multinomial", (A3[:2], np.full((2, 3), 1 / 3, np.float32)), {}),
    ("geometric", (A3 / 4,), {}),
    ("rademacher", ((2, 3),), {"dtype": jnp.float32}),
    ("lognormal", (), {}),
    ("pareto", (A21, (5, 2, 3)), {}),
    ("weibull_min", (A3, A21), {}),
    ("double_sided_maxwell", (A3, 1.0, (2,)), {}),
    ("triangular", (0.0, A3 / 4, A21), {}),
    ("multivariate_normal", (np.zeros((2, 3), np.float32), COV), {}),
    ("multivariate_normal", (MEAN, COV, (4, 1)), {}),
    ("orthogonal", (3, (2,)), {"m": 4}),
    ("ball", (3,), {"shape": (2,)}),
    ("generalized_normal", (1.5, (2, 3)), {}),
]


@pytest.mark.parametrize("name,args,kw", SHAPES, ids=[s[0] for s in SHAPES])
def test_shapes_and_dtypes_like_jax(name, args, kw):
    ours = nova.eval_shape(lambda k: getattr(nr, name)(k, *args, **kw), KEY)
    theirs = jax.eval_shape(lambda k: getattr(jax.random, name)(k, *args, **kw), jax.random.key(0))
    assert (tuple(ours.shape), np.dtype(ours.dtype)) == (theirs.shape, np.dtype(theirs.dtype))


def test_deterministic_and_jit():
    for fn in (lambda k: nr.gamma(k, 0.7, (N,)), lambda k: nr.poisson(k, 25.0, (N,))):
        a, b = np.asarray(fn(KEY)), np.asarray(fn(nr.key(0)))
        np.testing.assert_array_equal(a, b)
        assert (a != np.asarray(fn(nr.key(1)))).mean() > 0.5
    f = nova.jit(lambda k, a: nr.gamma(k, a, (N,)))
    np.testing.assert_allclose(f(KEY, 0.7), nr.gamma(KEY, 0.7, (N,)), rtol=1e-6)


def test_vmap_over_keys():
    keys = nr.split(KEY, 3)
    got = nova.vmap(lambda k: nr.gamma(k, 1.5, (5,)))(keys)
    want = np.stack([np.asarray(nr.gamma(keys[i], 1.5, (5,))) for i in range(3)])
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_key_utilities():
    np.testing.assert_array_equal(nr.clone(KEY), KEY)
    np.testing.assert_array_equal(nr.wrap_key_data(np.array([0, 7], np.uint32)), nr.key(7))
    assert nr.key_impl(KEY) == nr.key_impl(nr.split(KEY, 3)) == "threefry2x32"
    with pytest.raises(ValueError, match="impl must be None or 'threefry2x32'"):
        nr.wrap_key_data(KEY, impl="rbg")
    with pytest.raises(TypeError, match=r"key_impl: expected keys.*float32"):
        nr.key_impl(np.zeros(2, np.float32))


# --- bad input ------------------------------------------------------------------------------------


def test_bad_inputs_raise():
    bad_key = np.zeros(3, np.float32)
    with pytest.raises(TypeError, match=r"gamma: expected a key.*float32.*\(3,\)"):
        nr.gamma(bad_key, 1.0)
    with pytest.raises(TypeError, match="poisson: expected a key"):
        nr.poisson(bad_key, 1.0)
    with pytest.raises(ValueError, match="beta: dtype must be a float dtype, got int32"):
        nr.beta(KEY, 1.0, 1.0, dtype=jnp.int32)
    with pytest.raises(ValueError, match="poisson: dtype must be an integer dtype, got float32"):
        nr.poisson(KEY, 1.0, dtype=jnp.float32)
    with pytest.raises(ShapeError, match=r"gamma: a of shape \(3,\) does not broadcast.*\(2,\)"):
        nr.gamma(KEY, A3, (2,))
    with pytest.raises(ShapeError, match=r"binomial: p of shape \(3,\).*\(4,\)"):
        nr.binomial(KEY, 3.0, A3, (4,))
    with pytest.raises(ValueError, match="negative dimensions"):
        nr.cauchy(KEY, (-1,))
    with pytest.raises(TypeError, match="t: df must be real, got dtype complex64"):
        nr.t(KEY, np.ones(2, np.complex64))
    with pytest.raises(ValueError, match=r"dirichlet: alpha must have ndim >= 1.*\(\)"):
        nr.dirichlet(KEY, 1.0)
    with pytest.raises(ValueError, match="method must be 'cholesky', 'eigh' or 'svd'"):
        nr.multivariate_normal(KEY, MEAN, COV, method="qr")
    with pytest.raises(ValueError, match=r"mean must be \(..., n\).*\(3,\).*\(3, 2\)"):
        nr.multivariate_normal(KEY, MEAN, COV[:, :2])
    with pytest.raises(ValueError, match=r"do not broadcast to the shape argument \(4,\)"):
        nr.multivariate_normal(KEY, np.zeros((2, 3), np.float32), COV, (4,))
    with pytest.raises(ValueError, match=r"multinomial: shape \(2, 4\) must end in.*3"):
        nr.multinomial(KEY, 3.0, np.ones(3, np.float32) / 3, shape=(2, 4))
    with pytest.raises(TypeError, match="orthogonal: n must be a Python int"):
        nr.orthogonal(KEY, 2.5)
    with pytest.raises(ValueError, match="test_random_distributions.py"):
        nr.rayleigh(KEY, 1.0, dtype=jnp.int32)  # messages name the user's line


def test_generalized_normal_takes_array_and_traced_p():
    # found by review (session 23): p was used as a Python float
    k = nr.key(3)
    p = np.array([1.0, 2.0], np.float32)
    x = nr.generalized_normal(k, p, shape=(2,))
    assert x.shape == (2,) and np.all(np.isfinite(np.asarray(x)))
    xs = nova.jit(lambda q: nr.generalized_normal(k, q, shape=(20000,)))(np.float32(2.0))
    # p = 2: density exp(-x^2), a normal of variance 1/2
    assert abs(float(np.var(np.asarray(xs))) - 0.5) < 0.03
    v = nova.vmap(lambda q: nr.generalized_normal(k, q, shape=(3,)))(p)
    assert v.shape == (2, 3)
    b = nova.jit(lambda q: nr.ball(k, 3, q, shape=(4,)))(np.float32(1.0))
    assert b.shape == (4, 3) and np.all(np.abs(np.asarray(b)).sum(-1) <= 1.0)
