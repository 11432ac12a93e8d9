"""nova/numpy_impl/elementary.py (inverse trigonometric and hyperbolic functions, rounding,
frexp/ldexp/modf/spacing, fmod/fmax/fmin, gcd/lcm/bitwise_count, conversions) and the
lax functions over them (asin ... atanh, population_count) against NumPy: special values,
accuracy in ulps on dense grids, eagerly and under nova.jit, derivatives against finite
differences, vmap, and the errors bad input raises."""

import warnings

import nova.numpy as jnp
import numpy as np
import pytest

import nova
from nova import lax
from tests.helpers import check_grads

SPECIAL = np.array([0.0, -0.0, 1e-30, -1e-30, 1e-8, 0.3, -0.7, 0.999999, 1.0, -1.0, 1.0000001,
                    1.5, 2.0, -2.5, 10.0, 1e5, 1e19, 3e38, -3e38, 1e-45, np.inf, -np.inf,
                    np.nan], np.float32)

UNARY = ["arcsin", "arccos", "arcsinh", "arccosh", "arctanh", "trunc", "fix", "rint", "signbit",
         "fabs", "spacing", "sinc", "deg2rad", "rad2deg", "radians", "degrees", "isposinf",
         "isneginf"]


def _np_ref(name, x):
    with np.errstate(all="ignore"):
        return getattr(np, name)(x)


def _same_bits(got, expected, ulps=2):
    """Equal up to `ulps` units in the last place, NaN where NumPy has NaN, and the sign of
    every non-NaN value as NumPy's (-0.0 included)."""
    got = np.asarray(got)
    assert got.shape == expected.shape and got.dtype == expected.dtype, (got.dtype, expected.dtype)
    if got.dtype == bool:
        np.testing.assert_array_equal(got, expected)
        return
    nan = np.isnan(expected)
    np.testing.assert_array_equal(np.isnan(got), nan)
    np.testing.assert_array_equal(np.signbit(got[~nan]), np.signbit(expected[~nan]))
    g, e = got[~nan].astype(np.float64), expected[~nan].astype(np.float64)
    spacing = np.spacing(np.abs(expected[~nan])).astype(np.float64)
    exact = g == e  # infinities and exact zeros
    with np.errstate(invalid="ignore"):
        close = exact | (np.abs(g - e) <= ulps * spacing)
    assert np.all(close), \
        list(zip(expected[~nan][~exact], got[~nan][~exact], strict=True))[:5]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", UNARY)
def test_unary_special_values_as_numpy(name, dtype):
    x = SPECIAL.astype(dtype)
    expected = _np_ref(name, x)
    f = getattr(jnp, name)
    _same_bits(f(x), expected)
    _same_bits(nova.jit(f)(x), expected)


@pytest.mark.parametrize("name,lo,hi", [
    ("arcsin", -1, 1), ("arccos", -1, 1), ("arctanh", -1, 1), ("arcsinh", -40, 40),
    ("arccosh", 1, 60),
])
def test_inverse_functions_accurate_over_the_domain(name, lo, hi):
    # float32 against NumPy's float64 rounded: within 2 ulps everywhere, the ends included
    x = np.concatenate([np.linspace(lo, hi, 20001), np.geomspace(1e-7, 1, 200) * (hi - lo) + lo])
    x = x.astype(np.float32)
    expected = _np_ref(name, x.astype(np.float64)).astype(np.float32)
    _same_bits(nova.jit(getattr(jnp, name))(x), expected, ulps=2)


def test_integer_inputs_become_float32():
    for name in ["arcsin", "arcsinh", "fabs", "deg2rad", "sinc", "spacing"]:
        assert getattr(jnp, name)(np.arange(3)).dtype == jnp.float32, name
    assert jnp.trunc(np.arange(3, dtype=np.int16)).dtype == jnp.int16
    assert jnp.rint(np.arange(3)).dtype == np.arange(3).dtype
    np.testing.assert_array_equal(jnp.signbit(np.array([-3, 0, 2])), [True, False, False])
    np.testing.assert_array_equal(jnp.signbit(np.array([True, False])), [False, False])
    np.testing.assert_array_equal(jnp.isposinf(np.array([1, 2])), [False, False])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_frexp_ldexp_modf_as_numpy(dtype):
    x = np.concatenate([SPECIAL.astype(dtype), np.array([np.finfo(dtype).smallest_subnormal,
                                                         np.finfo(dtype).max, 0.75, 1.0 - 1e-7,
                                                         2.0**-30, 3.0 * 2**20], dtype)])
    for f in (jnp.frexp, nova.jit(jnp.frexp)):
        m, e = f(x)
        em, ee = np.frexp(x)
        np.testing.assert_array_equal(np.asarray(m), em)
        np.testing.assert_array_equal(np.asarray(e), ee)
        assert e.dtype == jnp.int32
    finite = np.isfinite(x)
    m, e = jnp.frexp(x)
    np.testing.assert_array_equal(np.asarray(jnp.ldexp(m, e))[finite], x[finite])
    for f in (jnp.modf, nova.jit(jnp.modf)):
        frac, whole = f(x)
        ef, ew = np.modf(x)
        np.testing.assert_array_equal(np.asarray(frac), ef)
        np.testing.assert_array_equal(np.signbit(np.asarray(frac)), np.signbit(ef))
        np.testing.assert_array_equal(np.asarray(whole), ew)


def test_ldexp_extreme_exponents():
    x = np.array([5e-324, 1.0, 3.0, -2.5, 1e300])
    n = np.array([2000, -1074, 10, -3, 10])
    np.testing.assert_array_equal(np.asarray(jnp.ldexp(x, n)), np.ldexp(x, n))
    np.testing.assert_array_equal(np.asarray(nova.jit(jnp.ldexp)(x, n)), np.ldexp(x, n))
    assert jnp.ldexp(np.float32(3), 2).dtype == jnp.float32
    np.testing.assert_array_equal(jnp.ldexp(np.arange(3), 1), [0.0, 2.0, 4.0])
    with pytest.raises(TypeError, match="ldexp: x2 must be an integer array, got dtype float"):
        jnp.ldexp(1.0, 2.0)


def test_fmod_fmax_fmin_divmod():
    x = np.array([5.0, -5, 5, -5, np.inf, 3, np.nan, 7.5, -0.0])
    y = np.array([3.0, 3, -3, -3, 2, 0, 1, np.inf, 2])
    with np.errstate(all="ignore"):
        _same_bits(jnp.fmod(x, y), np.fmod(x, y), ulps=0)
        a, b = np.array([5, -5, 5, -7, 0]), np.array([3, 3, 0, -2, 4])
        np.testing.assert_array_equal(jnp.fmod(a, b), np.fmod(a, b))
        np.testing.assert_array_equal(nova.jit(jnp.fmod)(a, b), np.fmod(a, b))
    y2 = np.array([np.nan, 0, 9, np.nan, 1, np.nan, np.nan, 1, -1.0])
    for name in ("fmax", "fmin"):
        _same_bits(getattr(jnp, name)(x, y2), getattr(np, name)(x, y2), ulps=0)
        _same_bits(nova.jit(getattr(jnp, name))(x, y2), getattr(np, name)(x, y2), ulps=0)
    np.testing.assert_array_equal(jnp.fmax(np.array([1, 5]), 3), [3, 5])
    q, r = jnp.divmod(np.array([7, -7, 7, -7]), np.array([3, 3, -3, -3]))
    eq, er = np.divmod(np.array([7, -7, 7, -7]), np.array([3, 3, -3, -3]))
    np.testing.assert_array_equal(q, eq)
    np.testing.assert_array_equal(r, er)


@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint32])
def test_gcd_lcm_as_numpy(dtype):
    rng = np.random.default_rng(1)
    info = np.iinfo(dtype)
    lo = 0 if info.min == 0 else -min(1000, info.max)
    a = rng.integers(lo, min(1000, info.max), 300).astype(dtype)
    b = rng.integers(lo, min(1000, info.max), 300).astype(dtype)
    a[:3] = 0
    b[1:4] = 0
    np.testing.assert_array_equal(jnp.gcd(a, b), np.gcd(a, b))
    np.testing.assert_array_equal(nova.jit(jnp.gcd)(a, b), np.gcd(a, b))
    small_a, small_b = a % 50, b % 50  # no wrapping in the product
    np.testing.assert_array_equal(jnp.lcm(small_a, small_b), np.lcm(small_a, small_b))
    assert jnp.gcd(a, b).dtype == dtype


def test_gcd_broadcasts_and_refuses_floats():
    np.testing.assert_array_equal(jnp.gcd(np.array([[12], [18]]), np.array([8, 9, 0])),
                                  np.gcd(np.array([[12], [18]]), np.array([8, 9, 0])))
    assert jnp.gcd(np.zeros(0, np.int32), 3).shape == (0,)
    with pytest.raises(TypeError, match="gcd needs integer operands, got float32"):
        jnp.gcd(np.float32(2), 4)
    with pytest.raises(TypeError, match="lcm needs integer operands"):
        jnp.lcm(2.0, 4)


@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16,
                                   np.uint32])
def test_bitwise_count_and_population_count(dtype):
    info = np.iinfo(dtype)
    rng = np.random.default_rng(2)
    x = np.concatenate([np.array([0, 1, info.min, info.max, info.max - 1], dtype),
                        rng.integers(info.min, info.max, 200, dtype=dtype, endpoint=True)])
    if info.min < 0:
        x = np.concatenate([x, np.array([-1, info.min + 1], dtype)])
    got = jnp.bitwise_count(x)
    assert got.dtype == jnp.uint8
    np.testing.assert_array_equal(got, np.bitwise_count(x))
    np.testing.assert_array_equal(nova.jit(jnp.bitwise_count)(x), np.bitwise_count(x))
    # lax.population_count counts the two's complement pattern, in x's dtype
    pattern = x.view(np.dtype(f"u{x.itemsize}"))
    pc = lax.population_count(x)
    assert pc.dtype == dtype
    np.testing.assert_array_equal(np.asarray(pc), np.bitwise_count(pattern).astype(dtype))
    with pytest.raises(TypeError, match="bitwise_count: x must be an integer array"):
        jnp.bitwise_count(np.float32(1))


def test_sinc_float_power_and_aliases():
    x = np.linspace(-4, 4, 101)
    np.testing.assert_allclose(np.asarray(jnp.sinc(x)), np.sinc(x), rtol=1e-14, atol=1e-16)
    assert float(jnp.sinc(0.0)) == 1.0
    fp = jnp.float_power(np.arange(4, dtype=np.int32), np.float32(0.5))
    assert fp.dtype == jnp.float64
    np.testing.assert_array_equal(fp, np.float_power(np.arange(4), 0.5))
    np.testing.assert_array_equal(jnp.pow(np.arange(4), 2), np.arange(4) ** 2)
    np.testing.assert_array_equal(jnp.bitwise_invert(np.array([0, 5], np.int8)), [-1, -6])
    np.testing.assert_array_equal(jnp.bitwise_not(np.array([True, False])), [False, True])
    np.testing.assert_array_equal(jnp.bitwise_left_shift(np.array([1, 3]), 2), [4, 12])
    np.testing.assert_array_equal(jnp.bitwise_right_shift(np.array([-8, 12]), 2), [-2, 3])
    np.testing.assert_allclose(np.asarray(jnp.atan2(1.0, -1.0)), np.arctan2(1.0, -1.0))
    np.testing.assert_allclose(np.asarray(jnp.atan(np.float32(1))), np.pi / 4, rtol=1e-7)
    for a, b in [("asin", "arcsin"), ("acos", "arccos"), ("asinh", "arcsinh"),
                 ("acosh", "arccosh"), ("atanh", "arctanh")]:
        v = np.array([0.25, 0.5]) if a != "acosh" else np.array([1.5, 3.0])
        np.testing.assert_array_equal(np.asarray(getattr(jnp, a)(v)), np.asarray(getattr(jnp, b)(v)))
        np.testing.assert_array_equal(np.asarray(getattr(lax, a)(v)), np.asarray(getattr(jnp, b)(v)))


@pytest.mark.parametrize("name,x", [
    ("arcsin", [-0.9, -0.2, 0.0, 0.5, 0.95]),
    ("arccos", [-0.9, -0.2, 0.0, 0.5, 0.95]),
    ("arcsinh", [-30.0, -0.9, 0.0, 0.4, 0.999, 1.001, 7.0]),
    ("arccosh", [1.05, 1.9, 2.1, 50.0]),
    ("arctanh", [-0.9, -0.1, 0.0, 0.3, 0.95]),
    ("sinc", [-2.5, -0.3, 0.7, 3.2]),
    ("deg2rad", [-30.0, 45.0]),
    ("fabs", [-2.0, 3.0]),
])
def test_derivatives_against_finite_differences(name, x):
    check_grads(getattr(jnp, name), [np.array(x)], rtol=1e-6)


def test_sinc_derivative_at_zero_is_zero():
    assert float(nova.grad(jnp.sinc)(0.0)) == 0.0
    check_grads(lambda x: jnp.ldexp(x, np.array([3, -2])), [np.array([1.5, -0.25])])


def test_vmap_and_jit_compose():
    x = np.linspace(-0.9, 0.9, 12).reshape(3, 4)
    got = nova.vmap(lambda r: jnp.arcsin(r) + jnp.arctanh(r) + jnp.trunc(r * 5))(x)
    with warnings.catch_warnings():
        np.testing.assert_allclose(np.asarray(got), np.arcsin(x) + np.arctanh(x) + np.trunc(x * 5),
                                   rtol=1e-13)
    g = nova.vmap(jnp.gcd)(np.array([[12, 18], [7, 21]]), np.array([[8, 12], [14, 6]]))
    np.testing.assert_array_equal(g, np.gcd([[12, 18], [7, 21]], [[8, 12], [14, 6]]))


def test_log10_exact_powers_and_derivative():
    x = np.array([1.0, 10.0, 100.0, 1e-3, 1e10, 1e22, 1e-300, 2.0, 0.0, -1.0, np.inf])
    with np.errstate(all="ignore"):
        want = np.log10(x)
    _same_bits(jnp.log10(x), want, ulps=1)
    _same_bits(nova.jit(jnp.log10)(x), want, ulps=1)
    g = np.geomspace(1e-30, 1e30, 2001).astype(np.float32)
    _same_bits(jnp.log10(g), np.log10(g.astype(np.float64)).astype(np.float32), ulps=2)
    assert jnp.log10(np.arange(1, 3)).dtype == jnp.float32
    check_grads(jnp.log10, [np.array([0.5, 10.0, 1000.0])])


def test_review_edge_cases():
    # ldexp never meets 0 * inf; log10 does not snap subnormals; spacing(max) is inf
    with np.errstate(over="ignore"):  # NumPy warns for ldexp(3, 5000) = inf
        want = np.ldexp(np.array([0.0, np.inf, 3.0, 1.0]), np.array([3000, -3000, 5000, -1080]))
    np.testing.assert_array_equal(np.asarray(jnp.ldexp(np.array([0.0, np.inf, 3.0, 1.0]),
                                                       np.array([3000, -3000, 5000, -1080]))),
                                  want)
    assert float(jnp.ldexp(np.float32(0), 300)) == 0.0
    np.testing.assert_allclose(float(jnp.log10(np.float64(1e-323))), np.log10(1e-323), rtol=1e-15)
    np.testing.assert_allclose(float(jnp.log10(np.float32(1e-45))), np.log10(np.float32(1e-45)),
                               rtol=1e-6)
    assert float(jnp.spacing(np.finfo(np.float64).max)) == np.inf
    assert float(jnp.spacing(-np.finfo(np.float32).max)) == -np.inf
    # gcd with INT_MIN, whose magnitude wraps
    for dt in (np.int8, np.int16, np.int32, np.int64):
        lo = np.iinfo(dt).min
        a, b = np.array([18, lo, 6], dt), np.array([lo, 6, lo], dt)
        np.testing.assert_array_equal(np.asarray(jnp.gcd(a, b)), np.gcd(a, b))
    # float floor_divide agrees with mod (NumPy's divmod)
    rng = np.random.default_rng(3)
    x = np.concatenate([rng.standard_normal(500) * 10, [0.5, -0.5, 1.0, 0.0, -0.0, np.inf]])
    y = np.concatenate([rng.standard_normal(500), [0.1, 0.1, 0.0, 3.0, -3.0, 2.0]])
    with np.errstate(all="ignore"):
        want = np.floor_divide(x, y)
    got = np.asarray(jnp.floor_divide(x, y))
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(np.signbit(got[~np.isnan(want)]), np.signbit(want[~np.isnan(want)]))
    q, r = jnp.divmod(np.float64(0.5), np.float64(0.1))
    assert float(q) == 4.0 and float(r) == np.fmod(0.5, 0.1)


def test_modf_fraction_derivative_is_one():
    g = nova.grad(lambda x: jnp.sum(jnp.modf(x)[0]))(np.array([0.0, 0.5, -1.25, 3.0]))
    np.testing.assert_array_equal(np.asarray(g), [1.0, 1.0, 1.0, 1.0])
