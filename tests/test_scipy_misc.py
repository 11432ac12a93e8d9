"""nova.scipy beyond linalg and stats: the third group of special functions (expn, dawsn,
fresnel, sici, spence, owens_t, hyp1f1, hyp2f1, bessel_jn), signal, ndimage, integrate,
interpolate and cluster.vq, against SciPy on real inputs (JAX where the semantics are JAX's own,
and for gradients)."""

import warnings
from fractions import Fraction

import jax
import jax.scipy.cluster.vq as jvq
import jax.scipy.interpolate as jinterp
import jax.scipy.ndimage as jnd
import jax.scipy.signal as jsig
import jax.scipy.special as jsp
import numpy as np
import pytest
import scipy.cluster.vq as svq
import scipy.integrate as sint
import scipy.interpolate as sinterp
import scipy.ndimage as snd
import scipy.signal as ssig
import scipy.special as ssp

import nova
import nova.scipy.cluster.vq as V
import nova.scipy.integrate as I
import nova.scipy.interpolate as IP
import nova.scipy.ndimage as ND
import nova.scipy.signal as S
import nova.scipy.special as N


@pytest.fixture(autouse=True)
def _jax_x64():
    """JAX in float64 for this module's references only (the flag is process-wide)."""
    with jax.enable_x64(True):
        yield


def _close(got, want, rtol, atol=0.0):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    assert got.shape == want.shape, (got.shape, want.shape)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, equal_nan=True)


RNG = np.random.default_rng(7)
M = 64  # one length for every elementwise case, so their kernels are shared


def _spread(lo, hi, n=M):
    return np.sort(RNG.uniform(lo, hi, n))


# name: (nova function, scipy function, float64 arguments, rtol in float64, (rtol, atol) in
# float32). SciPy's own error bounds some tolerances (owens_t at tiny a, hyp2f1 ~1e-12).
CASES = {
    "expn": (N.expn, ssp.expn,
             [np.tile([0.0, 1, 2, 3, 5, 12, 40, 150], 8),
              np.concatenate([np.geomspace(1e-6, 700, 56), [0.5, 1.0, 1.01, 2, 3, 30, 1e-3, 4]])],
             1e-13, (1e-5, 1e-30)),
    "dawsn": (N.dawsn, ssp.dawsn,
              [np.concatenate([_spread(-60, 60, 40), np.geomspace(1e-8, 1e8, 20),
                               [0.0, 0.19, 0.21, -0.2]])], 1e-14, (2e-6, 1e-30)),
    "fresnel_s": (lambda x: N.fresnel(x)[0], lambda x: ssp.fresnel(x)[0],
                  [np.concatenate([_spread(-8, 8, 40), [1.59, 1.61, -1.6, 0.0, 3e-5],
                                   np.geomspace(10.0, 300.0, 19)])], 1e-13, (2e-6, 1e-30)),
    "fresnel_c": (lambda x: N.fresnel(x)[1], lambda x: ssp.fresnel(x)[1],
                  [np.concatenate([_spread(-8, 8, 40), [1.59, 1.61, -1.6, 0.0, 3e-5],
                                   np.geomspace(10.0, 300.0, 19)])], 1e-13, (2e-6, 1e-30)),
    "si": (lambda x: N.sici(x)[0], lambda x: ssp.sici(x)[0],
           [np.concatenate([_spread(-40, 40, 44), [3.99, 4.01, -4.0, 1e-9],
                            np.geomspace(50, 1e6, 16)])], 1e-14, (2e-6, 1e-30)),
    "ci": (lambda x: N.sici(x)[1], lambda x: ssp.sici(x)[1],
           [np.concatenate([_spread(-40, 40, 44), [3.99, 4.01, -4.0, 1e-9],
                            np.geomspace(50, 1e6, 16)])], 1e-13, (2e-6, 2e-7)),
    "spence": (N.spence, ssp.spence,
               [np.concatenate([_spread(0, 5, 40), [0.0, 0.5, 1.0, 2.0, 1 - 1e-9, 1e-200],
                                np.geomspace(5, 1e200, 18)])], 1e-14, (2e-6, 1e-30)),
    "owens_t": (N.owens_t, ssp.owens_t,
                [np.concatenate([RNG.uniform(-8, 8, 56), [0, 0, 1, 3, 10, 37, -2, 0.5]]),
                 np.concatenate([RNG.uniform(-1, 1, 28), RNG.uniform(-30, 30, 28),
                                 [0.3, 5, 1, 1, 0.9, 0.5, np.inf, 1e8]])],
                1e-12, (2e-5, 1e-30)),
    "hyp1f1": (N.hyp1f1, ssp.hyp1f1,
               [RNG.uniform(0.1, 6, M), RNG.uniform(0.1, 6, M),
                np.concatenate([RNG.uniform(-40, 40, 48), RNG.uniform(-600, 600, 16)])],
               5e-12, (2e-4, 1e-30)),
    "hyp2f1": (N.hyp2f1, ssp.hyp2f1,
               [RNG.uniform(0.1, 4, M), RNG.uniform(0.1, 4, M), RNG.uniform(0.2, 7, M),
                np.concatenate([RNG.uniform(-15, 0, 24), RNG.uniform(0, 0.97, 24),
                                RNG.uniform(0.97, 1, 16)])],
               2e-12, (5e-4, 1e-30)),
}


def _at_m(f, *args):
    """f at arrays of one length k <= M, evaluated padded to length M (with each array's last
    value) so that the eager kernels compiled for the accuracy tests serve here too."""
    k = len(args[0])
    padded = [np.concatenate([a, np.full(M - k, a[-1])]) for a in map(np.asarray, args)]
    out = f(*padded)
    return tuple(np.asarray(o)[:k] for o in out) if isinstance(out, tuple) else \
        np.asarray(out)[:k]


def _scipy(f, args):
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return f(*(np.asarray(a, np.float64) for a in args))


@pytest.mark.parametrize("name", sorted(CASES))
def test_special_float64_against_scipy(name):
    f, ref, args, rtol, _ = CASES[name]
    _close(f(*args), _scipy(ref, args), rtol=rtol, atol=1e-300)


@pytest.mark.parametrize("name", sorted(CASES))
def test_special_float32_jit_against_scipy(name):
    f, ref, args, _, (rtol, atol) = CASES[name]
    fits = np.all([np.abs(a) < 1e38 for a in args], axis=0)
    a32 = [np.asarray(a[fits], np.float32) for a in args]
    got = nova.jit(f)(*a32)
    assert np.asarray(got).dtype == np.float32
    want = _scipy(ref, a32)  # at the float32 inputs, in float64
    ok = np.abs(want) < 1e30  # values float32 cannot hold are left out
    _close(np.asarray(got)[ok], want[ok], rtol=rtol, atol=atol)


def test_special_edges():
    inf, nan = np.inf, np.nan
    # non-integer n gives NaN (JAX's; SciPy truncates), E_n(0) = 1 / (n - 1), E_n(inf) = 0
    _close(_at_m(N.expn, [1.5, -1, 0, 0, 2, 3, 1.0], [1.0, 1, 0, 1, 0, inf, -1]),
           [nan, nan, inf, np.exp(-1), 1.0, 0.0, nan], rtol=1e-15)
    _close(_at_m(N.dawsn, [inf, -inf, 0.0, 1e300, nan]), [0, 0, 0, 5e-301, nan], rtol=1e-15)
    s, c = _at_m(N.fresnel, [inf, -inf, 0.0, 1e200, nan])
    _close(s, [0.5, -0.5, 0, 0.5, nan], rtol=0)
    _close(c, [0.5, -0.5, 0, 0.5, nan], rtol=0)
    # far out, S = 1/2 - f cos(t) - g sin(t), C = 1/2 + f sin(t) - g cos(t), t = pi x^2 / 2,
    # f ~ 1 / (pi x), g ~ 1 / (pi^2 x^3) (A&S 7.3.9-10, 7.3.27-28); x^2 mod 4 in exact arithmetic
    # (SciPy's phase is off by ~x^2 eps there)
    x = np.array([1e6 + 0.125, 3e7 + 0.375, 12345.6789])
    t = np.pi / 2 * np.array([float((Fraction(v) ** 2) % 4) for v in x])
    f, g = 1 / (np.pi * x), 1 / (np.pi ** 2 * x ** 3)
    s, c = _at_m(N.fresnel, x)
    _close(s, 0.5 - f * np.cos(t) - g * np.sin(t), rtol=1e-15)
    _close(c, 0.5 + f * np.sin(t) - g * np.cos(t), rtol=1e-15)
    si, ci = _at_m(N.sici, [0.0, inf, -inf, -2.0, nan])
    _close(si, [0, np.pi / 2, -np.pi / 2, ssp.sici(-2.0)[0], nan], rtol=1e-15)
    _close(ci, [-inf, 0, nan, ssp.sici(2.0)[1], nan], rtol=1e-15)
    _close(_at_m(N.spence, [0.0, 1.0, -1.0, inf, nan]), [np.pi ** 2 / 6, 0, nan, nan, nan],
           rtol=1e-15)
    _close(_at_m(N.owens_t, [1.0, 0, 1, inf, -1, 2], [inf, 2, -1, 1, 0.5, nan]),
           ssp.owens_t([1.0, 0, 1, inf, -1, 2], [inf, 2, -1, 1, 0.5, nan]), rtol=1e-14)
    # JAX's conventions: 1F1(0; 0; x) = 1, a pole of b gives inf; 2F1 at x = 1 is Gauss's sum
    _close(_at_m(N.hyp1f1, [0.0, 1, 1, -2, 2.5], [0.0, 0, -1, 1, 2.5],
                 [1.0, 1, 1, 3, 0.7]), [1, inf, inf, -0.5, np.exp(0.7)], rtol=1e-15)
    _close(_at_m(N.hyp2f1, [1.0, 1, 1, 0, 1, 2], [2.0, 2, 2, 2, 2, 3], [4.0, 3, -1, 3, 3, 5],
                 [1.0, 1, 0.5, 0.5, 1.5, -1e4]),
           [3.0, inf, inf, 1.0, inf, ssp.hyp2f1(2, 3, 5, -1e4)], rtol=1e-13)
    # integer c - a - b near x = 1 (A&S 15.3.10-11), and after Euler's transformation
    a, b, c = np.array([0.5, 1.5, 2.0]), np.array([1.5, 0.5, 3.0]), np.array([2.0, 5.0, 3.0])
    x = np.array([0.99, 0.995, 0.985])
    _close(_at_m(N.hyp2f1, a, b, c, x), ssp.hyp2f1(a, b, c, x), rtol=1e-12)


def test_special_gradients():
    x = np.concatenate([np.geomspace(0.05, 60.0, M - 2), [3.5, 7.3]])
    hs, av = x / 10, x / 20
    with np.errstate(all="ignore"):  # the closed forms of the derivatives, through SciPy
        cases = [
            (lambda v: N.dawsn(v), 1 - 2 * x * ssp.dawsn(x)),
            (lambda v: N.fresnel(v)[0], np.sin(np.pi * x * x / 2)),
            (lambda v: N.sici(v)[1], np.cos(x) / x),
            (lambda v: N.expn(2.0, v), -ssp.exp1(x)),
            (lambda v: N.expn(0.0, v), -np.exp(-x) * (1 / x + 1 / x ** 2)),
            (lambda v: N.spence(v), np.log(x) / (1 - x)),
            # T(h, a) along h = x / 10, a = x / 20: dT/dh / 10 + dT/da / 20
            (lambda v: N.owens_t(v / 10, v / 20),
             -np.exp(-hs * hs / 2) * ssp.erf(av * hs / np.sqrt(2)) / (20 * np.sqrt(2 * np.pi))
             + np.exp(-hs * hs * (1 + av * av) / 2) / (40 * np.pi * (1 + av * av))),
            # d/dz pFq = (prod a / prod b) pFq(a + 1; b + 1; z)
            (lambda v: N.hyp1f1(1.5, 2.5, v / 2), 0.6 * ssp.hyp1f1(2.5, 3.5, x / 2) / 2),
            (lambda v: N.hyp2f1(0.5, 1.5, 2.5, v / 61),
             0.3 * ssp.hyp2f1(1.5, 2.5, 3.5, x / 61) / 61),
            (lambda v: N.bessel_jn(v / 4, v=3)[2], ssp.jvp(2, x / 4) / 4),
        ]

    def grads(v):  # one jitted program for all: one compile
        return [nova.grad(lambda u, f=f: f(u).sum())(v) for f, _ in cases]

    for g, (_, want) in zip(nova.jit(grads)(x), cases, strict=True):
        _close(g, want, rtol=1e-10, atol=1e-12)  # atol: NumPy's sin(pi x^2 / 2) at x = 60
    # and one against jax.grad
    want = jax.jit(jax.vmap(jax.grad(lambda v: jsp.sici(v)[0])))(x)
    _close(nova.grad(lambda v: N.sici(v)[0].sum())(x), want, rtol=1e-12, atol=1e-15)


def test_bessel_jn():
    z = np.concatenate([np.linspace(-20, 20, 41), [1e-5, 1e-300, 0.0]])
    got = N.bessel_jn(z, v=5)
    assert got.shape == (6, z.size)
    _close(got, ssp.jv(np.arange(6)[:, None], z), rtol=1e-12, atol=1e-14)
    got32 = nova.jit(lambda t: N.bessel_jn(t, v=2, n_iter=40))(z.astype(np.float32))
    _close(got32, ssp.jv(np.arange(3)[:, None], z.astype(np.float32)), rtol=0, atol=1e-6)
    assert N.bessel_jn(np.ones((2, 3)), v=0).shape == (1, 2, 3)
    with pytest.raises(ValueError, match="v must be in"):
        N.bessel_jn(z, v=60)
    with pytest.raises(TypeError, match="must be ints"):
        N.bessel_jn(z, v=1.5)


# --- signal ----------------------------------------------------------------------------------


@pytest.mark.parametrize("sa,sb,modes", [
    ((9,), (4,), ("full", "same", "valid")), ((3,), (6,), ("full", "same", "valid")),
    ((6, 5), (3, 2), ("full", "same", "valid")), ((3, 4), (5, 6), ("same", "valid")),
    ((4, 3, 5), (2, 3, 2), ("same",))])
def test_convolve_correlate_against_scipy(sa, sb, modes):
    a, b = RNG.standard_normal(sa), RNG.standard_normal(sb)
    for mode in modes:
        _close(S.convolve(a, b, mode), ssig.convolve(a, b, mode, method="direct"), 1e-12, 1e-12)
        _close(S.correlate(a, b, mode, method="fft"), ssig.correlate(a, b, mode), 1e-12, 1e-12)


def test_convolve2d_boundaries_against_scipy():
    a = RNG.standard_normal((6, 5))
    # (the kernel wider than in1 needs the boundary repeated past in1's width)
    for b, modes in ((RNG.standard_normal((3, 2)), ("full", "same", "valid")),
                     (RNG.standard_normal((4, 7)), ("same",))):
        for mode in modes:
            for boundary, fill in (("fill", 0), ("fill", 1.5), ("wrap", 0), ("symm", 0)):
                if mode == "valid" and boundary != "fill":
                    continue  # 'valid' reads no boundary
                for ours, ref in ((S.convolve2d, ssig.convolve2d),
                                  (S.correlate2d, ssig.correlate2d)):
                    _close(ours(a, b, mode, boundary, fill), ref(a, b, mode, boundary, fill),
                           1e-12, 1e-12)


def test_signal_dtypes_jit_grad_and_errors():
    got = S.convolve(np.arange(5), np.array([1, 2, 3]))
    assert got.dtype == np.float32  # ints promote to float, as JAX's
    _close(got, np.convolve(np.arange(5), [1, 2, 3]), rtol=0)
    a, b = RNG.standard_normal((6, 5)), RNG.standard_normal((3, 2))
    _close(nova.jit(lambda u, w: S.convolve2d(u, w, "same", "symm"))(a, b),
           ssig.convolve2d(a, b, "same", "symm"), 1e-12, 1e-12)
    w = RNG.standard_normal((6, 5))

    def loss(m):
        return lambda u, k: (m.convolve(u, k, "same") * w).sum()

    got = nova.grad(loss(S), argnums=(0, 1))(a, b)
    want = jax.jit(jax.grad(loss(jsig), argnums=(0, 1)))(a, b)
    for g, h in zip(got, want, strict=True):
        _close(g, h, 1e-12, 1e-12)
    got = nova.grad(lambda u: (S.correlate2d(u, b, "full", "fill", 2.0) ** 2).sum())(a)
    eps = 1e-6
    probe = np.zeros_like(a)
    probe[2, 3] = eps
    fd = ((ssig.correlate2d(a + probe, b, "full", "fill", 2.0) ** 2).sum()
          - (ssig.correlate2d(a - probe, b, "full", "fill", 2.0) ** 2).sum()) / (2 * eps)
    _close(np.asarray(got)[2, 3], fd, rtol=1e-7)
    with pytest.raises(ValueError, match="same number of dimensions"):
        S.convolve(np.ones((3, 3)), np.ones(2))
    with pytest.raises(ValueError, match="at least as large"):
        S.convolve(np.ones((3, 1)), np.ones((1, 3)), "valid")
    with pytest.raises(ValueError, match="mode must be"):
        S.correlate(np.ones(3), np.ones(2), "middle")
    with pytest.raises(ValueError, match="method must be"):
        S.convolve(np.ones(3), np.ones(2), method="winograd")
    with pytest.raises(ValueError, match="boundary must be"):
        S.convolve2d(np.ones((3, 3)), np.ones((2, 2)), boundary="reflect")
    with pytest.raises(ValueError, match="must be 2-d"):
        S.convolve2d(np.ones(3), np.ones(2))
    with pytest.raises(ValueError, match="cannot be empty"):
        S.convolve(np.ones(0), np.ones(2))


def test_detrend():
    x = RNG.standard_normal((4, 13)) + np.arange(13) * 0.5
    for kind, bp in (("l", [3, 7, 12]), ("linear", [5, 5, 13]), ("constant", [4])):
        _close(S.detrend(x, type=kind, bp=bp), ssig.detrend(x, type=kind, bp=bp), 1e-12, 1e-12)
    _close(nova.jit(lambda t: S.detrend(t, axis=0))(x.T), ssig.detrend(x.T, axis=0), 1e-12,
           1e-12)
    assert S.detrend(np.arange(6)).dtype == np.float32
    # detrend is an orthogonal projection, so the gradient of sum(detrend(x)^3) is
    # detrend(3 detrend(x)^2)
    g = nova.jit(nova.grad(lambda t: (S.detrend(t, bp=[3, 7, 12]) ** 3).sum()))(x)
    want = ssig.detrend(3 * ssig.detrend(x, bp=[3, 7, 12]) ** 2, bp=[3, 7, 12])
    _close(g, want, 1e-10, 1e-12)
    with pytest.raises(ValueError, match="type must be"):
        S.detrend(x, type="quadratic")
    with pytest.raises(ValueError, match="breakpoints must lie"):
        S.detrend(x, bp=[20])
    with pytest.raises(ValueError, match="out of bounds"):
        S.detrend(x, axis=2)


# --- ndimage, integrate, interpolate, cluster ------------------------------------------------


def test_map_coordinates_against_jax_and_scipy():
    img = RNG.standard_normal((5, 7))
    c = [RNG.uniform(-8, 12, (4, 6)), RNG.uniform(-9, 15, (4, 6))]
    c[0][0, :3], c[1][0, :3] = [-0.5, 2.5, 4.5], [-0.5, 3.5, 6.7]  # halves: order 0's ties
    for order in (0, 1):
        for mode in ("constant", "nearest", "wrap", "mirror", "reflect"):
            got = ND.map_coordinates(img, c, order, mode, cval=1.5)
            _close(got, jnd.map_coordinates(img, c, order, mode, 1.5), 1e-14, 1e-14)
            if order == 1:  # JAX's constant and wrap are SciPy's grid-constant and grid-wrap
                smode = {"constant": "grid-constant", "wrap": "grid-wrap"}.get(mode, mode)
                _close(got, snd.map_coordinates(img, np.stack(c), order=1, mode=smode,
                                                cval=1.5), 1e-13, 1e-13)
    ints = np.arange(12).reshape(3, 4)
    got = ND.map_coordinates(ints, [np.array([0.5, 1.5, 2.2]), np.array([0.5, 2.5, 1.0])], 1)
    assert got.dtype == ints.dtype
    # 2.5 -> 3, 8.5 -> 9, and 0.8 * 9 + 0.2 * cval = 7.2 -> 7 (row 3 is past the edge)
    np.testing.assert_array_equal(got, [3, 9, 7])
    one_row = RNG.standard_normal((1, 4))
    q = [np.array([-1.3, 0.2, 2.0]), np.array([1.5, -2.2, 7.1])]
    _close(ND.map_coordinates(one_row, q, 1, "mirror"),
           jnd.map_coordinates(one_row, q, 1, "mirror"), 1e-14)
    a = np.array([0.3, 1.7, 2.9, -1.2])

    def f(m):
        return lambda im, t: (m.map_coordinates(im, [t, 0.7 * t], 1, "reflect") ** 2).sum()

    got = nova.jit(nova.grad(f(ND), argnums=(0, 1)))(img, a)
    for g, h in zip(got, jax.jit(jax.grad(f(jnd), argnums=(0, 1)))(img, a), strict=True):
        _close(g, h, 1e-12, 1e-14)
    with pytest.raises(ValueError, match="input.ndim"):
        ND.map_coordinates(img, [a], 1)
    with pytest.raises(NotImplementedError, match="order"):
        ND.map_coordinates(img, [a, a], 3)
    with pytest.raises(NotImplementedError, match="mode"):
        ND.map_coordinates(img, [a, a], 1, "grid-mirror")


def test_trapezoid():
    y, x = RNG.standard_normal((3, 6)), np.sort(RNG.uniform(0, 5, 6))
    _close(I.trapezoid(y, x), sint.trapezoid(y, x), 1e-14)
    _close(nova.jit(lambda t: I.trapezoid(t, dx=0.3, axis=0))(y),
           sint.trapezoid(y, dx=0.3, axis=0), 1e-14)
    with pytest.raises(ValueError):
        I.trapezoid(np.float64(3.0))


def test_regular_grid_interpolator():
    x, y = np.sort(RNG.uniform(0, 3, 5)), np.sort(RNG.uniform(-1, 1, 4))
    v = RNG.standard_normal((5, 4, 2))
    xi = np.stack([RNG.uniform(-0.5, 3.5, 7), RNG.uniform(-1.2, 1.2, 7)], -1)
    xi[0], xi[1] = [x[1], y[2]], [(x[1] + x[2]) / 2, y[0]]  # a node, and a tie for nearest
    for method, fill in (("linear", np.nan), ("nearest", None), ("linear", -3.0)):
        ours = IP.RegularGridInterpolator((x, y), v, method=method, fill_value=fill)
        ref = sinterp.RegularGridInterpolator((x, y), v, method=method, bounds_error=False,
                                              fill_value=fill)
        _close(ours(xi), ref(xi), 1e-13, 1e-13)
    interp = IP.RegularGridInterpolator((x, y), v[..., 0], fill_value=None)
    want = sinterp.RegularGridInterpolator((x, y), v[..., 0], bounds_error=False,
                                           fill_value=None)(xi)
    _close(nova.jit(lambda it, q: it(q))(interp, xi), want, 1e-13, 1e-13)  # a pytree
    _close(interp((xi[:, 0], xi[:, 1])), want, 1e-13, 1e-13)
    _close(interp(xi, method="nearest"), sinterp.RegularGridInterpolator(
        (x, y), v[..., 0], method="nearest", bounds_error=False, fill_value=None)(xi), 1e-13)
    jref = jinterp.RegularGridInterpolator

    def f(cls):
        return lambda vals, q: (cls((x, y), vals, fill_value=None)(q) ** 2).sum()

    got = nova.grad(f(IP.RegularGridInterpolator), argnums=(0, 1))(v[..., 0], xi)
    for g, h in zip(got, jax.jit(jax.grad(f(jref), argnums=(0, 1)))(v[..., 0], xi), strict=True):
        _close(g, h, 1e-12, 1e-14)
    with pytest.raises(NotImplementedError, match="bounds_error"):
        IP.RegularGridInterpolator((x, y), v, bounds_error=True)
    with pytest.raises(ValueError, match="strictly increasing"):
        IP.RegularGridInterpolator((x[::-1], y), v)
    with pytest.raises(ValueError, match="method must be"):
        IP.RegularGridInterpolator((x, y), v, method="cubic")
    with pytest.raises(ValueError, match="has 4 points but values has 5"):
        IP.RegularGridInterpolator((y, x), v)
    with pytest.raises(ValueError, match="dimension 3"):
        interp(np.ones((2, 3)))


def test_vq():
    obs, book = RNG.standard_normal((9, 3)), RNG.standard_normal((4, 3))
    code, dist = V.vq(obs, book)
    want_code, want_dist = svq.vq(obs, book)
    assert code.dtype == np.int32
    np.testing.assert_array_equal(code, want_code)
    _close(dist, want_dist, 1e-14)
    o32, b32 = obs[:, 0].astype(np.float32), book[:, 0].astype(np.float32)
    code, dist = nova.jit(V.vq)(o32, b32)
    # the reference on the same float32 values, in float64 (a few float32 ulps apart)
    want_code, want_dist = svq.vq(o32.astype(np.float64), b32.astype(np.float64))
    np.testing.assert_array_equal(code, want_code)
    _close(dist, want_dist, 4e-6)
    got = nova.grad(lambda o, k: V.vq(o, k)[1].sum(), argnums=(0, 1))(obs, book)
    want = jax.jit(jax.grad(lambda o, k: jvq.vq(o, k)[1].sum(), argnums=(0, 1)))(obs, book)
    for g, h in zip(got, want, strict=True):
        _close(g, h, 1e-13, 1e-14)
    with pytest.raises(ValueError, match="same rank"):
        V.vq(obs, book[:, 0])
    with pytest.raises(ValueError, match="features"):
        V.vq(obs, book[:, :2])
    with pytest.raises(ValueError, match="1-d or 2-d"):
        V.vq(obs[None], book[None])
