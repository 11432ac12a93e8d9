"""Complex values in nova.scipy.special: wofz, sph_harm_y, gamma / loggamma / erfcx at complex
arguments and the complex elementary functions, against scipy.special and jax.scipy.special
(eager, jit, vmap, grad), and TypeError for the real-only functions."""

import jax
import jax.numpy as jjnp
import jax.scipy.special as jsp
import nova.numpy as jnp
import numpy as np
import pytest
import scipy.special as ss

import nova
import nova.scipy.special as nss
from nova.core.errors import ConcretizationTypeError
from tests.helpers import assert_close, check_grads

RNG = np.random.default_rng(7)


def _z(n, scale, dtype=np.complex128):
    return (RNG.uniform(-scale, scale, n) + 1j * RNG.uniform(-scale, scale, n)).astype(dtype)


def _rel_err(got, ref):
    got, ref = np.asarray(got, np.complex128), np.asarray(ref, np.complex128)
    return float(np.max(np.abs(got - ref) / np.maximum(np.abs(ref), 1e-300)))


# --- wofz -----------------------------------------------------------------------------------

def test_wofz_matches_scipy_float64_over_the_plane():
    z = np.concatenate([_z(400, 25.0), _z(400, 4.0), _z(50, 1e-3), [0j, 1e4 + 1e4j, -3e5 - 2j,
                                                                    2e3 + 1e-9j, 5 - 1e-12j]])
    ref = ss.wofz(z)
    got = nss.wofz(jnp.asarray(z))
    assert got.dtype == np.complex128
    finite = np.abs(ref) < 1e300
    assert _rel_err(np.asarray(got)[finite], ref[finite]) < 5e-13


def test_wofz_real_axis_and_dtypes():
    x = np.linspace(-40.0, 40.0, 161)
    got = nss.wofz(jnp.asarray(x))
    ref = ss.wofz(x)
    assert got.dtype == np.complex128
    # real part exactly exp(-x^2), imaginary part 2 dawsn(x) / sqrt(pi)
    np.testing.assert_allclose(np.real(np.asarray(got)), np.exp(-x * x), rtol=1e-14, atol=0)
    assert_close(np.imag(np.asarray(got)), ref.imag, rtol=1e-12, atol=1e-300)
    g32 = nss.wofz(jnp.asarray(x.astype(np.float32)))
    assert g32.dtype == np.complex64 and nss.wofz(jnp.arange(3)).dtype == np.complex64
    assert_close(g32, jsp.wofz(x.astype(np.float32)), rtol=1e-5, atol=1e-6)


def test_wofz_complex64_matches_jax():
    z = _z(300, 5.0, np.complex64)
    got = nss.wofz(jnp.asarray(z))
    assert got.dtype == np.complex64
    assert _rel_err(got, ss.wofz(z.astype(np.complex128))) < 3e-5  # exp(-z^2) at |z| ~ 7
    ref_jax = np.asarray(jsp.wofz(z))
    assert _rel_err(got, ref_jax) < 5e-5
    upper = z[z.imag >= 0]  # no reflection: the series alone, ~float32 rounding
    assert _rel_err(nss.wofz(jnp.asarray(upper)), ss.wofz(upper.astype(np.complex128))) < 2e-6


def test_wofz_float64_matches_jax_with_x64():
    z = _z(100, 6.0)
    with jax.enable_x64(True):
        ref = np.asarray(jsp.wofz(jjnp.asarray(z)))
    assert _rel_err(nss.wofz(jnp.asarray(z)), ref) < 1e-11


def test_wofz_jit_vmap_and_grad():
    z = _z(12, 3.0).reshape(3, 4)
    ref = ss.wofz(z)
    assert _rel_err(nova.jit(nss.wofz)(jnp.asarray(z)), ref) < 1e-12
    assert _rel_err(nova.vmap(nss.wofz)(jnp.asarray(z)), ref) < 1e-12
    # w'(z) = 2i / sqrt(pi) - 2 z w(z)
    for z0 in (1.0 + 1.0j, -0.7 + 0.2j, 2.0 - 1.5j, 0.3 + 0.0j):
        want = 2j / np.sqrt(np.pi) - 2 * z0 * ss.wofz(z0)
        got = nova.grad(nss.wofz, holomorphic=True)(jnp.asarray(np.complex128(z0)))
        assert abs(complex(got) - want) < 1e-11 * max(1.0, abs(want))
    # the gradient of a real-valued function, JAX's convention (complex64, no x64)
    z0 = np.complex64(0.8 + 0.6j)
    ref = jax.grad(lambda v: jsp.wofz(v).real * jsp.wofz(v).imag)(z0)
    got = nova.grad(lambda v: jnp.real(nss.wofz(v)) * jnp.imag(nss.wofz(v)))(jnp.asarray(z0))
    assert abs(complex(got) - complex(ref)) < 1e-5
    # d/dx of the real axis value: Re w = exp(-x^2), Im w = 2 dawsn(x) / sqrt(pi)
    x0 = 1.3
    g = nova.grad(lambda v: jnp.imag(nss.wofz(v)))(jnp.asarray(np.float64(x0)))
    assert abs(float(g) - 2 / np.sqrt(np.pi) * (1 - 2 * x0 * ss.dawsn(x0))) < 1e-12


def test_wofz_bad_input():
    with pytest.raises(TypeError, match="wofz"):
        nss.wofz("1+2j")


# --- gamma, loggamma, erfcx at complex arguments --------------------------------------------

def test_loggamma_complex_matches_scipy():
    z = np.concatenate([_z(500, 20.0), _z(500, 3.0), [1e5 + 1e5j, -1e4 + 3j, 300j, -300 + 1e-3j,
                                                      -2.5 + 0j, -3.7 + 0j, -2.5 - 0.0j]])
    ref = ss.loggamma(z)
    got = np.asarray(nss.loggamma(jnp.asarray(z)))
    assert got.dtype == np.complex128
    # the branch: imaginary parts beyond (-pi, pi] as SciPy's
    assert np.max(np.abs(got - ref) / np.maximum(np.abs(ref), 1.0)) < 2e-13
    assert_close(nss.gamma(jnp.asarray(z[:600])), ss.gamma(z[:600]), rtol=2e-12, atol=1e-300)


def test_loggamma_complex_identities_and_poles():
    z = jnp.asarray(_z(50, 10.0))
    lg, lg1 = nss.loggamma(z), nss.loggamma(z + 1.0)
    assert_close(lg1, lg + jnp.log(z), rtol=1e-11, atol=1e-11)  # the principal branch
    assert_close(nss.loggamma(jnp.conj(z)), jnp.conj(lg), rtol=1e-12, atol=1e-12)
    poles = nss.loggamma(jnp.asarray(np.array([0j, -1 + 0j, -7 + 0j])))
    assert np.all(np.isnan(np.asarray(poles)))
    assert np.all(np.isnan(np.asarray(nss.gamma(jnp.asarray(np.array([0j, -2 + 0j]))))))


def test_gamma_loggamma_complex64_match_jax():
    z = _z(200, 6.0, np.complex64)
    got = np.asarray(nss.loggamma(jnp.asarray(z)))
    assert got.dtype == np.complex64
    ref = np.asarray(jsp.loggamma(z))
    assert np.max(np.abs(got - ref) / np.maximum(np.abs(ref), 1.0)) < 2e-5
    assert _rel_err(nss.gamma(jnp.asarray(z)), jsp.gamma(z)) < 1e-4
    with jax.enable_x64(True):
        z64 = z.astype(np.complex128)
        ref64 = np.asarray(jsp.gamma(jjnp.asarray(z64)))
    assert _rel_err(nss.gamma(jnp.asarray(z64)), ref64) < 1e-11


def test_loggamma_complex_grad_jit_vmap():
    for z0 in (1.0 + 1.0j, -2.3 + 0.4j, 5.0 - 3.0j):
        got = nova.grad(nss.loggamma, holomorphic=True)(jnp.asarray(np.complex128(z0)))
        assert abs(complex(got) - ss.digamma(z0)) < 1e-10
    z = _z(8, 4.0).reshape(2, 4)
    ref = ss.loggamma(z)
    assert_close(nova.jit(nss.loggamma)(jnp.asarray(z)), ref, rtol=1e-12, atol=1e-12)
    assert_close(nova.vmap(nss.gamma)(jnp.asarray(z)), ss.gamma(z), rtol=1e-12, atol=1e-14)


def test_erfcx_complex():
    z = _z(200, 5.0)
    assert _rel_err(nss.erfcx(jnp.asarray(z)), ss.erfcx(z)) < 1e-12
    z32 = _z(50, 3.0, np.complex64)
    assert _rel_err(nss.erfcx(jnp.asarray(z32)), jsp.erfcx(z32)) < 3e-5
    # the real path is unchanged
    x = np.linspace(-5.0, 30.0, 36)
    assert_close(nss.erfcx(jnp.asarray(x)), ss.erfcx(x), rtol=1e-13, atol=0)


# --- the elementary functions at complex arguments -------------------------------------------

@pytest.mark.parametrize("name", ["expit", "logit"])
def test_unary_elementary_complex_match_jax(name):
    z = _z(20, 2.0, np.complex64)
    got = getattr(nss, name)(jnp.asarray(z))
    assert got.dtype == np.complex64
    assert _rel_err(got, getattr(jsp, name)(z)) < 2e-5


@pytest.mark.parametrize("name", ["xlogy", "xlog1py", "boxcox", "boxcox1p"])
def test_binary_elementary_complex_match_jax(name):
    a, b = _z(20, 2.0, np.complex64), _z(20, 2.0, np.complex64)
    a[0] = 0  # the x == 0 rule for xlogy / xlog1py
    got = getattr(nss, name)(jnp.asarray(a), jnp.asarray(b))
    ref = getattr(jsp, name)(a, b)
    assert got.dtype == np.complex64
    assert_close(got, ref, rtol=5e-5, atol=1e-5)


def test_logsumexp_complex_matches_scipy_and_jax():
    z = _z(12, 3.0).reshape(3, 4)
    assert_close(nss.logsumexp(jnp.asarray(z)), ss.logsumexp(z), rtol=1e-12)
    assert_close(nss.logsumexp(jnp.asarray(z), axis=1), ss.logsumexp(z, axis=1), rtol=1e-12)
    out, sign = nss.logsumexp(jnp.asarray(z), axis=0, return_sign=True)
    ref_out, ref_sign = ss.logsumexp(z, axis=0, return_sign=True)
    assert out.dtype == np.float64 and sign.dtype == np.complex128
    assert_close(out, ref_out, rtol=1e-12)
    assert_close(sign, ref_sign, rtol=1e-12)
    z32 = z.astype(np.complex64)
    assert_close(nss.logsumexp(jnp.asarray(z32), axis=1), jsp.logsumexp(z32, axis=1), rtol=1e-5)
    # exp of large real parts: the shift keeps it finite
    big = z + 800.0
    assert_close(nss.logsumexp(jnp.asarray(big)), ss.logsumexp(big), rtol=1e-12)


@pytest.mark.parametrize("name,args", [
    ("gammaln", 1), ("digamma", 1), ("erf", 1), ("erfc", 1), ("exp1", 1), ("expi", 1),
    ("owens_t", 2), ("zeta", 2), ("sici", 1), ("fresnel", 1), ("dawsn", 1), ("gammainc", 2),
    ("betainc", 3), ("entr", 1), ("spence", 1), ("hyp1f1", 3),
])
def test_real_only_functions_reject_complex(name, args):
    z = jnp.asarray(np.array([0.5 + 0.5j], np.complex64))
    with pytest.raises(TypeError, match=f"{name}.*complex64"):
        getattr(nss, name)(*([1.0] * (args - 1) + [z]))


def test_sici_fresnel_complex_continued_fractions_keep_values_and_grads():
    # the continued fractions now run in complex arithmetic (|x| > 4 and |x| > 1.6)
    x = np.array([4.5, 10.0, 37.0, 900.0, -6.0])
    si, ci = nss.sici(jnp.asarray(x))
    ref_si, ref_ci = ss.sici(x)
    assert_close(si, ref_si, rtol=1e-13, atol=1e-15)
    assert_close(ci, ref_ci, rtol=1e-11, atol=1e-15)
    s, c = nss.fresnel(jnp.asarray(x))
    ref_s, ref_c = ss.fresnel(x)
    assert_close(s, ref_s, rtol=1e-13, atol=1e-15)
    assert_close(c, ref_c, rtol=1e-13, atol=1e-15)
    check_grads(lambda v: nss.sici(v)[0] + nss.fresnel(v)[1], (jnp.asarray(x[:3]),))
    s32 = nova.jit(lambda v: nss.fresnel(v)[0])(jnp.asarray(x.astype(np.float32)))
    assert_close(s32, ref_s, rtol=1e-5, atol=1e-6)


# --- sph_harm_y -----------------------------------------------------------------------------

def _sph_args(k, n_hi=12):
    n = RNG.integers(0, n_hi, k)
    m = RNG.integers(-n_hi, n_hi + 1, k)
    return n, m, RNG.uniform(0, np.pi, k), RNG.uniform(0, 2 * np.pi, k)


def test_sph_harm_y_matches_scipy_float64():
    n, m, th, ph = _sph_args(300)
    got = nss.sph_harm_y(n, m, jnp.asarray(th), jnp.asarray(ph))
    assert got.dtype == np.complex128
    assert_close(got, ss.sph_harm_y(n, m, th, ph), rtol=1e-12, atol=1e-14)
    # the poles, |m| > n (0, as SciPy), negative n (0, as SciPy) and broadcasting
    th2 = np.array([0.0, np.pi, 0.0, 1.0])
    n2, m2 = np.array([3, 4, 2, 2]), np.array([0, 2, 3, -3])
    assert_close(nss.sph_harm_y(n2, m2, jnp.asarray(th2), 0.4),
                 ss.sph_harm_y(n2, m2, th2, 0.4), rtol=1e-12, atol=1e-14)
    grid = nss.sph_harm_y(np.array([[1], [2], [5]]), 1, jnp.asarray(th[:4]), jnp.asarray(ph[:4]))
    assert grid.shape == (3, 4)
    assert_close(grid, ss.sph_harm_y(np.array([[1], [2], [5]]), 1, th[:4], ph[:4]), rtol=1e-12,
                 atol=1e-14)
    assert nss.sph_harm_y(-1, 0, jnp.asarray([1.0]), 1.0)[0] == 0


def test_sph_harm_y_float32_matches_jax():
    n, m, th, ph = _sph_args(64, n_hi=8)
    m = np.clip(m, -n, n)
    th32, ph32 = th.astype(np.float32), ph.astype(np.float32)
    got = nss.sph_harm_y(jnp.asarray(n), jnp.asarray(m), jnp.asarray(th32), jnp.asarray(ph32))
    assert got.dtype == np.complex64
    ref = np.asarray(jsp.sph_harm_y(n, m, th32, ph32))
    assert_close(got, ref, rtol=1e-4, atol=2e-6)
    with jax.enable_x64(True):
        ref64 = np.asarray(jsp.sph_harm_y(jjnp.asarray(n), jjnp.asarray(m), jjnp.asarray(th),
                                          jjnp.asarray(ph)))
    assert_close(nss.sph_harm_y(n, m, jnp.asarray(th), jnp.asarray(ph)), ref64, rtol=1e-10,
                 atol=1e-12)


def test_sph_harm_y_n_max_clips_as_jax():
    n, m = np.array([10, 3, 6]), np.array([2, -1, 0])
    th, ph = np.array([0.4, 1.1, 2.0], np.float32), np.array([0.3, 2.5, 5.0], np.float32)
    got = nss.sph_harm_y(n, m, jnp.asarray(th), jnp.asarray(ph), n_max=6)
    ref = jsp.sph_harm_y(n, m, th, ph, n_max=6)
    assert_close(got, ref, rtol=1e-4, atol=2e-6)
    assert_close(got[0], ss.sph_harm_y(6, 2, th[0], ph[0]), rtol=1e-4, atol=2e-6)


def test_sph_harm_y_jit_vmap_grad():
    n, m = np.array([2, 3, 5]), np.array([1, -2, 4])
    th, ph = np.array([0.4, 1.1, 2.0]), np.array([0.3, 2.5, 5.0])
    f = nova.jit(lambda t, p, nn, mm: nss.sph_harm_y(nn, mm, t, p, n_max=5))
    assert_close(f(jnp.asarray(th), jnp.asarray(ph), jnp.asarray(n), jnp.asarray(m)),
                 ss.sph_harm_y(n, m, th, ph), rtol=1e-12, atol=1e-14)
    v = nova.vmap(lambda t: nss.sph_harm_y(n, m, t, jnp.asarray(ph), n_max=5))(
        jnp.asarray(np.stack([th, th[::-1]])))
    assert_close(v[1], ss.sph_harm_y(n, m, th[::-1], ph), rtol=1e-12, atol=1e-14)
    check_grads(lambda t, p: jnp.real(nss.sph_harm_y(n, m, t, p, n_max=5)) +
                jnp.imag(nss.sph_harm_y(n, m, t, p, n_max=5)),
                (jnp.asarray(th), jnp.asarray(ph)))
    th32, ph32 = th.astype(np.float32), ph.astype(np.float32)
    ref = jax.grad(lambda t: jsp.sph_harm_y(n, m, t, ph32, n_max=5).real.sum())(th32)
    got = nova.grad(lambda t: jnp.sum(jnp.real(nss.sph_harm_y(n, m, t, jnp.asarray(ph32),
                                                                n_max=5))))(jnp.asarray(th32))
    assert_close(got, ref, rtol=1e-4, atol=1e-5)


def test_sph_harm_y_bad_inputs():
    t = jnp.asarray([1.0])
    with pytest.raises(NotImplementedError, match="diff_n"):
        nss.sph_harm_y(2, 1, t, t, diff_n=1)
    with pytest.raises(TypeError, match="n must be an integer.*float32"):
        nss.sph_harm_y(jnp.asarray([2.0]), 1, t, t)
    with pytest.raises(TypeError, match="m must be an integer"):
        nss.sph_harm_y(2, 0.5, t, t)
    with pytest.raises(TypeError, match="theta must be real"):
        nss.sph_harm_y(2, 1, jnp.asarray([1.0 + 0j]), t)
    with pytest.raises(ValueError, match="n_max must be >= 0"):
        nss.sph_harm_y(2, 1, t, t, n_max=-1)
    with pytest.raises(TypeError, match="n_max must be a Python int"):
        nss.sph_harm_y(2, 1, t, t, n_max=2.5)
    with pytest.raises(ConcretizationTypeError, match="pass n_max"):
        nova.jit(lambda n: nss.sph_harm_y(n, 0, t, t))(jnp.asarray([2]))
    with pytest.raises(ValueError, match="broadcast|shape"):
        nss.sph_harm_y(np.array([1, 2, 3]), 0, jnp.asarray([1.0, 2.0]), 0.0)
