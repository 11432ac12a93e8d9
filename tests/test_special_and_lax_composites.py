"""nova.scipy.special's special functions and the composite jax.lax functions of
nova/ops/composite.py, against Python's math module, identities (inverse round trips,
recurrences, asymptotic expansions) and NumPy; eagerly, under jit, and their gradients."""

from __future__ import annotations

import math

import nova.numpy as jnp
import numpy as np
import pytest

import nova
from nova import lax
from nova.core.errors import ShapeError
from nova.scipy import special as sp

X = np.concatenate([np.linspace(-9.7, 30.0, 211), [0.5, 1.0, 2.0, 1e-8, 3e-3, 170.3]])


def _close(got, want, tol):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    assert np.array_equal(np.isfinite(got), np.isfinite(want))
    ok = np.isfinite(want)
    err = np.abs(got[ok] - want[ok]) / (np.abs(want[ok]) + 1.0)
    assert err.max() < tol, (err.max(), got[ok][err.argmax()], want[ok][err.argmax()])


@pytest.mark.parametrize("dtype,tol", [(np.float64, 1e-12), (np.float32, 2e-5)])
def test_gamma_family_and_erfc_match_math(dtype, tol):
    x = X.astype(dtype)
    poles = (x <= 0) & (x == np.floor(x))
    want = [math.inf if p else math.lgamma(float(v)) for v, p in zip(x, poles)]
    _close(sp.gammaln(x), want, tol)
    _close(nova.jit(lax.lgamma)(x), want, tol)
    g = [math.gamma(float(v)) if not p and v < 171 else math.inf for v, p in zip(x, poles)]
    _close(sp.gamma(x[x < 30]), np.asarray(g)[x < 30], 10 * tol)
    _close(sp.erfc(x), [math.erfc(float(v)) for v in x], tol)
    # erfc keeps its relative accuracy deep in the tail, where 1 - erf(x) is 0
    tail = np.array([3.0, 6.0, 10.0, 26.0])
    rel = np.asarray(sp.erfc(tail)) / np.array([math.erfc(v) for v in tail]) - 1
    assert np.abs(rel).max() < 1e-13
    assert float(lax.erfc(np.float64(-3.0))) == pytest.approx(2 - math.erfc(3.0), rel=1e-15)


def test_digamma_by_its_identities():
    x = np.linspace(0.05, 25.0, 97)
    d = np.asarray(sp.digamma(x))
    np.testing.assert_allclose(np.asarray(sp.digamma(x + 1.0)) - d, 1 / x, rtol=1e-11, atol=1e-12)
    assert float(sp.digamma(np.float64(1.0))) == pytest.approx(-0.5772156649015329, rel=1e-13)
    assert float(sp.digamma(np.float64(0.5))) == pytest.approx(-0.5772156649015329
                                                             - 2 * math.log(2), rel=1e-13)
    # reflection: psi(1 - x) - psi(x) = pi / tan(pi x)
    xs = np.array([-2.3, -0.7, 0.2, 0.4])
    np.testing.assert_allclose(np.asarray(sp.digamma(1 - xs)) - np.asarray(sp.digamma(xs)),
                               np.pi / np.tan(np.pi * xs), rtol=1e-11)
    poles = np.asarray(lax.digamma(np.array([0.0, -1.0, -4.0])))
    assert poles[0] == -np.inf and np.isnan(poles[1:]).all()
    # the derivative of gammaln is digamma (through the Lanczos sum)
    g = nova.jit(nova.grad(lambda v: jnp.sum(lax.lgamma(v))))(x)
    np.testing.assert_allclose(np.asarray(g), d, rtol=1e-9, atol=1e-10)


def test_erfinv_ndtr_ndtri_log_ndtr():
    y = np.linspace(-0.999999, 0.999999, 201)
    x = np.asarray(sp.erfinv(y))
    np.testing.assert_allclose(np.vectorize(math.erf)(x), y, rtol=1e-14, atol=1e-15)
    e = np.asarray(lax.erf_inv(np.array([1.0, -1.0, 1.5, np.nan])))
    assert e[0] == np.inf and e[1] == -np.inf and np.isnan(e[2:]).all()
    f32 = np.asarray(nova.jit(sp.erfinv)(y.astype(np.float32)))
    np.testing.assert_allclose(np.vectorize(math.erf)(f32.astype(np.float64)), y, atol=3e-6)
    z = np.linspace(-6, 6, 61)
    cdf = 0.5 * np.vectorize(math.erfc)(-z / math.sqrt(2))
    np.testing.assert_allclose(np.asarray(sp.ndtr(z)), cdf, rtol=1e-14)
    # p near 1 is itself rounded: x is then only known to ~1e-16 / pdf(x) (2e-8 at 6)
    np.testing.assert_allclose(np.asarray(sp.ndtri(cdf)), z, rtol=1e-9, atol=5e-8)
    # log(cdf) loses digits where cdf nears 1: there log1p(-cdf(-z)) is the reference
    upper = np.log1p(-0.5 * np.vectorize(math.erfc)(z / math.sqrt(2)))
    np.testing.assert_allclose(np.asarray(sp.log_ndtr(z)), np.where(z > 0, upper, np.log(cdf)),
                               rtol=1e-13)
    # far tail: A&S 26.2.12 to five terms is exact to ~1e-14 relative at -30
    t = -30.0
    s = 1 - 1 / t**2 + 3 / t**4 - 15 / t**6 + 105 / t**8
    want = -t * t / 2 - math.log(-t) - 0.5 * math.log(2 * math.pi) + math.log(s)
    assert float(sp.log_ndtr(np.float64(t))) == pytest.approx(want, rel=1e-13)
    assert np.isfinite(float(sp.log_ndtr(np.float32(-30.0))))  # no underflow in float32


def test_elementary_special_functions():
    p = np.array([0.0, 0.25, 0.5, 1.0])
    lg = np.asarray(sp.logit(p))
    assert lg[0] == -np.inf and lg[-1] == np.inf and lg[2] == 0.0
    np.testing.assert_allclose(np.asarray(sp.expit(lg[1:3])), p[1:3], rtol=1e-15)
    xl = np.asarray(sp.xlogy(np.array([0.0, 2.0, 0.0]), np.array([0.0, 3.0, 5.0])))
    np.testing.assert_allclose(xl, [0.0, 2 * math.log(3), 0.0], rtol=1e-15)
    assert float(sp.xlog1py(np.float64(0.0), np.float64(-1.0))) == 0.0
    en = np.asarray(sp.entr(np.array([-1.0, 0.0, 0.5])))
    assert en[0] == -np.inf and en[1] == 0.0 and en[2] == pytest.approx(0.5 * math.log(2))
    np.testing.assert_allclose(np.asarray(sp.factorial(np.arange(6.0))), [1, 1, 2, 6, 24, 120],
                               rtol=1e-12)
    assert float(sp.betaln(np.float64(2.0), np.float64(3.0))) == pytest.approx(math.log(1 / 12))
    m = float(sp.multigammaln(np.float64(3.0), 2))
    assert m == pytest.approx(0.5 * math.log(math.pi) + math.lgamma(3.0) + math.lgamma(2.5))
    row = np.array([1.0, 2.0, 3.0])
    np.testing.assert_allclose(np.asarray(sp.softmax(row)), np.exp(row) / np.exp(row).sum())
    with pytest.raises(ValueError, match="d must be a positive int"):
        sp.multigammaln(np.float64(3.0), 0)
    with pytest.raises(NotImplementedError, match="exact=True"):
        sp.factorial(3, exact=True)


@pytest.mark.parametrize("n", [1, 2, 5, 8, 13])
def test_associative_scan(n):
    a = np.arange(1.0, n + 1)
    np.testing.assert_allclose(np.asarray(lax.associative_scan(jnp.add, a)), np.cumsum(a))
    np.testing.assert_allclose(np.asarray(lax.associative_scan(jnp.multiply, a, reverse=True)),
                               np.cumprod(a[::-1])[::-1])
    # a pytree: the linear recurrence h_t = a_t h_{t-1} + b_t, under jit
    rng = np.random.default_rng(n)
    coef, off = rng.uniform(0.5, 1.0, (2, n))

    def compose(p, q):
        return p[0] * q[0], q[0] * p[1] + q[1]

    _, h = nova.jit(lambda c, o: lax.associative_scan(compose, (c, o)))(coef, off)
    want, acc = [], 0.0
    for c, o in zip(coef, off):
        acc = c * acc + o
        want.append(acc)
    np.testing.assert_allclose(np.asarray(h), want, rtol=1e-13)
    g = nova.grad(lambda v: jnp.sum(lax.associative_scan(jnp.add, v) ** 2))(a)
    np.testing.assert_allclose(np.asarray(g), 2 * np.cumsum(np.cumsum(a)[::-1])[::-1])


def test_cumlogsumexp_and_reductions():
    x = np.random.default_rng(3).standard_normal((6, 5))
    want = np.log(np.cumsum(np.exp(x), axis=0))
    np.testing.assert_allclose(np.asarray(nova.jit(lax.cumlogsumexp)(x)), want, rtol=1e-13)
    rev = np.log(np.cumsum(np.exp(x[:, ::-1]), axis=1))[:, ::-1]
    np.testing.assert_allclose(np.asarray(lax.cumlogsumexp(x, axis=1, reverse=True)), rev,
                               rtol=1e-13)
    np.testing.assert_allclose(np.asarray(lax.reduce(x, 0.0, lax.add, (0,))), x.sum(0))
    assert float(lax.reduce(x, -np.inf, lax.max, (0, 1))) == x.max()
    assert float(lax.reduce(x, 10.0, lax.max, (0, 1))) == 10.0  # init combined once
    xi = np.array([[5, 3, 6], [1, 7, 2]], np.int32)
    np.testing.assert_array_equal(np.asarray(lax.reduce(xi, np.int32(0), lambda p, q: p ^ q,
                                                        (1,))), np.bitwise_xor.reduce(xi, 1))
    np.testing.assert_array_equal(np.asarray(lax.reduce_and(xi, (1,))),
                                  np.bitwise_and.reduce(xi, 1))
    np.testing.assert_array_equal(np.asarray(lax.reduce_or(xi, (0,))),
                                  np.bitwise_or.reduce(xi, 0))
    assert int(lax.reduce_xor(xi, (0, 1))) == np.bitwise_xor.reduce(xi.ravel())
    b = np.array([[True, False, True], [True, True, True]])
    np.testing.assert_array_equal(np.asarray(lax.reduce_and(b, (1,))), [False, True])
    np.testing.assert_array_equal(np.asarray(lax.reduce_xor(b, (0,))), [False, True, False])
    with pytest.raises(TypeError, match="bool or an integer"):
        lax.reduce_or(x, (0,))
    with pytest.raises(ValueError, match="variadic"):
        lax.reduce([x, x], [0.0, 0.0], lax.add, (0,))


def test_shape_helpers_select_n_and_products():
    np.testing.assert_array_equal(
        np.asarray(lax.select_n(np.array([0, 2, 1]), np.zeros(3), np.ones(3), np.full(3, 2.0))),
        [0.0, 2.0, 1.0])
    np.testing.assert_array_equal(np.asarray(lax.select_n(np.array([True, False]),
                                                          np.zeros(2), np.ones(2))), [1.0, 0.0])
    assert lax.collapse(np.zeros((2, 3, 4)), 1).shape == (2, 12)
    assert lax.collapse(np.zeros((2, 3, 4)), 0, 2).shape == (6, 4)
    assert lax.broadcast(np.zeros(3), (2, 4)).shape == (2, 4, 3)
    assert lax.broadcast_shapes((2, 1), (1, 3)) == (2, 3)
    assert [p.shape for p in lax.split(np.zeros((5, 2)), (2, 3))] == [(2, 2), (3, 2)]
    a, b = np.arange(6.0).reshape(2, 3), np.arange(12.0).reshape(3, 4)
    np.testing.assert_array_equal(np.asarray(lax.dot(a, b)), a @ b)
    bb = np.arange(24.0).reshape(2, 3, 4)
    np.testing.assert_array_equal(np.asarray(lax.batch_matmul(np.stack([a, a]), bb)),
                                  np.stack([a, a]) @ bb)
    np.testing.assert_array_equal(np.asarray(lax.square(np.array([3.0, -2.0]))), [9.0, 4.0])
    np.testing.assert_allclose(np.asarray(lax.cbrt(np.array([27.0, -8.0]))), [3.0, -2.0])
    np.testing.assert_array_equal(np.asarray(lax.is_finite(np.array([1.0, np.inf, np.nan]))),
                                  [True, False, False])
    with pytest.raises(TypeError, match="share one shape and dtype"):
        lax.select_n(np.array([0]), np.zeros(1), np.zeros(2))
    with pytest.raises(ShapeError, match="matching contracting sizes"):
        lax.dot(a, a)
    with pytest.raises(ValueError, match="do not add up"):
        lax.split(np.zeros(5), (2, 2))
    with pytest.raises(ValueError, match="do not broadcast|broadcast"):
        lax.broadcast_shapes((2,), (3,))
    with pytest.raises(TypeError, match="float array"):
        lax.is_finite(np.array([1, 2]))
