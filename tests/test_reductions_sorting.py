"""prod, argmax/argmin, cumsum/cumprod, sort/argsort and logsumexp against NumPy; their gradients
against finite differences (float64), including zeros in prod/cumprod and -inf in logsumexp."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import nova
import nova.numpy as jnp
from nova.ops import lax
from nova.scipy.special import logsumexp
from tests.helpers import assert_close, check_grads

SHAPES = [(), (0,), (5,), (3, 4), (2, 0, 3), (2, 3, 4), (1, 5, 1)]
DTYPES = [np.float32, np.float64, np.int32, np.bool_]
LAYOUTS = ["c", "transposed", "strided"]


def _data(rng, shape, dtype, layout="c", lo=-3, hi=3):
    """Values of `dtype` in [lo, hi) with shape `shape`, laid out contiguously or not."""
    if layout == "transposed" and len(shape) >= 2:
        return _data(rng, shape[::-1], dtype, "c", lo, hi).T
    if layout == "strided" and len(shape) >= 1:
        big = _data(rng, shape[:-1] + (shape[-1] * 2,), dtype, "c", lo, hi)
        return big[..., ::2]
    if dtype == np.bool_:
        return rng.random(shape) > 0.5
    if np.issubdtype(dtype, np.integer):
        return rng.integers(lo, hi, shape).astype(dtype)
    return rng.uniform(lo, hi, shape).astype(dtype)


def _axes(shape):
    """None, every single axis (positive and negative) and, for ndim >= 2, tuples of axes."""
    nd = len(shape)
    out = [None] + list(range(nd)) + [-1] * (nd > 0)
    if nd >= 2:
        out += [(0, -1), (-1, 0)]
    if nd == 3:
        out += [(0, 1, 2), (1,)]
    return out


CASES = [(s, a) for s in SHAPES for a in _axes(s)]


def _accumulation_dtype(dtype):
    return np.int32 if dtype in (np.bool_, np.uint8) else dtype


# --- prod and sum --------------------------------------------------------------------------------


@pytest.mark.parametrize("shape,axis", CASES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_prod_matches_numpy(shape, axis, dtype, keepdims, layout):
    x = _data(np.random.default_rng(0), shape, dtype, layout, lo=-2, hi=3)
    want_dtype = _accumulation_dtype(dtype)
    want = np.prod(x, axis=axis, keepdims=keepdims, dtype=want_dtype)
    got = jnp.prod(x, axis=axis, keepdims=keepdims)
    assert got.dtype == want_dtype
    assert_close(got, want)
    assert_close(jnp.sum(x, axis=axis, keepdims=keepdims),
                 np.sum(x, axis=axis, keepdims=keepdims, dtype=want_dtype))


def test_prod_options_and_method():
    x = np.arange(1, 7, dtype=np.float32).reshape(2, 3)
    assert_close(jnp.prod(x, axis=1, initial=2.0), np.prod(x, axis=1, initial=2.0))
    assert_close(jnp.prod(x, dtype=np.float64), np.prod(x, dtype=np.float64))
    assert jnp.prod(x, dtype=np.float64).dtype == np.float64
    assert_close(jnp.asarray(x).prod(axis=0), np.prod(x, axis=0))
    assert jnp.prod(np.ones((4,), np.uint8) * 3).dtype == np.uint32  # as jnp
    assert int(jnp.prod(np.full((4,), 3, np.uint8))) == 81  # no uint8 wrap-around


def test_prod_under_jit():
    x = np.random.default_rng(1).uniform(0.5, 1.5, (3, 4, 5))
    f = nova.jit(lambda x: jnp.prod(x, axis=(0, 2), keepdims=True))
    assert_close(f(x), np.prod(x, axis=(0, 2), keepdims=True))


# --- argmax / argmin ------------------------------------------------------------------------------

ARG_CASES = [(s, a) for s in SHAPES for a in _axes(s) if not isinstance(a, tuple)]


@pytest.mark.parametrize("name", ["argmax", "argmin"])
@pytest.mark.parametrize("shape,axis", ARG_CASES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_argmax_argmin_match_numpy(name, shape, axis, dtype, keepdims, layout):
    # Few distinct values, so ties are common: the first index must win.
    x = _data(np.random.default_rng(2), shape, dtype, layout, lo=0, hi=3)
    ref = getattr(np, name)
    try:
        want = ref(x, axis=axis, keepdims=keepdims)
    except ValueError:
        with pytest.raises(ValueError, match="empty sequence"):
            getattr(jnp, name)(x, axis=axis, keepdims=keepdims)
        return
    got = getattr(jnp, name)(x, axis=axis, keepdims=keepdims)
    assert got.dtype == np.int32
    assert_close(got, want)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_argmax_argmin_nan_first_wins(dtype):
    x = np.array([[1, np.nan, 3, np.nan], [2, 2, 1, 1], [-np.inf, np.inf, 0, np.inf]], dtype)
    for name in ("argmax", "argmin"):
        for axis in (None, 0, 1, -1):
            assert_close(getattr(jnp, name)(x, axis=axis), getattr(np, name)(x, axis=axis))
    assert int(jnp.argmax(x[0])) == 1 and int(jnp.argmin(x[0])) == 1


def test_argmax_methods_and_jit():
    x = np.random.default_rng(3).permutation(24).reshape(2, 3, 4).astype(np.float32)
    assert_close(jnp.asarray(x).argmax(axis=1), np.argmax(x, axis=1))
    assert_close(jnp.asarray(x).argmin(), np.argmin(x))
    f = nova.jit(lambda x: (jnp.argmax(x, axis=-1), jnp.argmin(x, axis=0, keepdims=True)))
    a, b = f(x)
    assert_close(a, np.argmax(x, axis=-1))
    assert_close(b, np.argmin(x, axis=0, keepdims=True))


def test_argmax_is_not_differentiable_but_composes_with_grad():
    x = np.array([0.3, -1.0, 2.0, 0.5])

    def f(x):
        i = jnp.argmax(x)
        return jnp.sum(jnp.where(lax.iota(np.int32, (4,), 0) == i, x, 0.0) ** 2)

    assert_close(nova.grad(f)(x), np.array([0, 0, 4.0, 0]))


# --- cumsum / cumprod ----------------------------------------------------------------------------

SCAN_CASES = [(s, a) for s in SHAPES for a in [None, 0, -1] if len(s) > 0 or a is None]


@pytest.mark.parametrize("name", ["cumsum", "cumprod"])
@pytest.mark.parametrize("shape,axis", SCAN_CASES + [((), 0), ((), -1)])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_cumsum_cumprod_match_numpy(name, shape, axis, dtype, layout):
    x = _data(np.random.default_rng(4), shape, dtype, layout, lo=-2, hi=3)
    want_dtype = _accumulation_dtype(dtype)
    want = getattr(np, name)(x, axis=axis, dtype=want_dtype)
    got = getattr(jnp, name)(x, axis=axis)
    assert got.dtype == want_dtype
    assert_close(got, want)


@pytest.mark.parametrize("name", ["cumsum", "cumprod"])
@pytest.mark.parametrize("dtype", [np.float64, np.int32, np.bool_])
def test_cumsum_cumprod_dtype_argument(name, dtype):
    x = _data(np.random.default_rng(5), (3, 4), np.int32, lo=0, hi=3)
    got = getattr(jnp, name)(x, axis=1, dtype=dtype)
    assert got.dtype == dtype
    assert_close(got, getattr(np, name)(x, axis=1, dtype=dtype))


def test_cumsum_method_and_jit():
    x = np.random.default_rng(6).standard_normal((3, 5)).astype(np.float32)
    assert_close(jnp.asarray(x).cumsum(axis=1), np.cumsum(x, axis=1))
    assert_close(jnp.asarray(x).cumsum(), np.cumsum(x))
    f = nova.jit(lambda x: (jnp.cumsum(x, axis=0), jnp.cumprod(x, axis=-1)))
    a, b = f(x)
    assert_close(a, np.cumsum(x, axis=0))
    assert_close(b, np.cumprod(x, axis=-1))


@pytest.mark.parametrize("name,ufunc", [("cumsum", np.add), ("cumprod", np.multiply),
                                        ("cummax", np.maximum), ("cummin", np.minimum)])
@pytest.mark.parametrize("reverse", [False, True])
def test_lax_scans_reverse(name, ufunc, reverse):
    x = np.random.default_rng(7).uniform(0.5, 1.5, (3, 6))
    got = getattr(lax, name)(jnp.asarray(x), axis=1, reverse=reverse)
    if reverse:
        want = np.flip(ufunc.accumulate(np.flip(x, 1), axis=1), 1)
    else:
        want = ufunc.accumulate(x, axis=1)
    assert_close(got, want)


# --- sort / argsort ------------------------------------------------------------------------------

SORT_CASES = [(s, a) for s in SHAPES for a in [None, 0, -1] if len(s) > 0 or a is None]


def _sort_data(rng, shape, dtype, layout):
    x = _data(rng, shape, dtype, layout, lo=-2, hi=3)
    if np.issubdtype(dtype, np.floating) and x.size:
        flat = x.reshape(-1).copy()
        # Ties, NaN, infinities and both zeros, in random places.
        specials = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, 1.0, np.nan], dtype)
        k = min(flat.size, specials.size)
        flat[rng.choice(flat.size, k, replace=False)] = specials[:k]
        x = flat.reshape(shape)
    return x


@pytest.mark.parametrize("shape,axis", SORT_CASES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_sort_argsort_match_numpy(shape, axis, dtype, layout):
    x = _sort_data(np.random.default_rng(8), shape, dtype, layout)
    got = jnp.sort(x, axis=axis)
    want = np.sort(x, axis=axis, kind="stable")
    assert got.dtype == x.dtype
    assert_close(got, want)
    # -0.0 and 0.0 are equal keys: the stable order keeps their input order, as NumPy.
    np.testing.assert_array_equal(np.signbit(np.asarray(got)), np.signbit(want))
    idx = jnp.argsort(x, axis=axis)
    assert idx.dtype == np.int32
    np.testing.assert_array_equal(np.asarray(idx), np.argsort(x, axis=axis, kind="stable"))


def test_sort_0d_and_options():
    x = np.float32(2.5)
    with pytest.raises(ValueError, match="out of bounds"):
        jnp.sort(x)
    assert_close(jnp.sort(x, axis=None), np.sort(x, axis=None))
    np.testing.assert_array_equal(np.asarray(jnp.argsort(x)), np.argsort(x))
    y = np.array([[3.0, 1.0, 2.0], [0.0, 0.0, -1.0]])
    for kind in (None, "quicksort", "mergesort", "heapsort", "stable"):
        assert_close(jnp.sort(y, kind=kind), np.sort(y, kind=kind))
    assert_close(jnp.sort(y, stable=True), np.sort(y, stable=True))
    with pytest.raises(ValueError, match="kind"):
        jnp.sort(y, kind="bogo")
    with pytest.raises(ValueError, match="order"):
        jnp.argsort(y, order="f0")
    assert_close(jnp.asarray(y).sort(axis=0), np.sort(y, axis=0))
    np.testing.assert_array_equal(np.asarray(jnp.asarray(y).argsort()),
                                  np.argsort(y, kind="stable"))


def test_sort_multiple_operands_and_jit():
    rng = np.random.default_rng(9)
    k1 = rng.integers(0, 3, (4, 8)).astype(np.int32)
    k2 = rng.integers(0, 3, (4, 8)).astype(np.float32)
    v = rng.standard_normal((4, 8)).astype(np.float32)
    order = np.lexsort((k2, k1), axis=1)

    def f(a, b, c):
        return lax.sort([a, b, c], dimension=1, num_keys=2)

    for g in (f, nova.jit(f)):
        outs = g(k1, k2, v)
        for got, x in zip(outs, (k1, k2, v), strict=True):
            assert_close(got, np.take_along_axis(x, order, 1))
    s1, s2 = lax.sort_key_val(jnp.asarray(k2), jnp.asarray(v), dimension=0)
    o = np.argsort(k2, axis=0, kind="stable")
    assert_close(s1, np.take_along_axis(k2, o, 0))
    assert_close(s2, np.take_along_axis(v, o, 0))


# --- errors name the problem and the user's line -----------------------------------------------


def test_errors_name_axis_and_line():
    x = np.ones((2, 3))
    for fn in (lambda: jnp.prod(x, axis=2), lambda: jnp.argmax(x, axis=-3),
               lambda: jnp.cumsum(x, axis=5), lambda: jnp.sort(x, axis=2),
               lambda: jnp.argsort(x, axis=-4)):
        with pytest.raises(ValueError, match=r"out of bounds.*test_reductions_sorting\.py:\d+"):
            fn()
    with pytest.raises(ValueError, match=r"repeated axis"):
        jnp.prod(x, axis=(0, -2))
    with pytest.raises(ValueError, match=r"empty sequence: shape \(0, 3\)"):
        jnp.argmin(np.ones((0, 3)), axis=0)
    with pytest.raises(TypeError, match="out="):
        jnp.argmax(x, out=np.zeros(3))


# --- gradients (float64, finite differences through the reference interpreter) ----------------


def _with_zeros(rng, shape, positions):
    x = rng.uniform(0.5, 1.5, shape) * rng.choice([-1.0, 1.0], shape)
    for p in positions:
        x[p] = 0.0
    return x


@pytest.mark.parametrize("zeros", [[], [(1, 2)], [(1, 0), (1, 3)], [(0, 1), (2, 2)]])
@pytest.mark.parametrize("axis", [None, 0, 1, -1, (0, 1)])
def test_prod_grad_with_zeros(zeros, axis):
    x = _with_zeros(np.random.default_rng(10), (3, 4), zeros)
    check_grads(lambda x: jnp.prod(x, axis=axis), [x])


def test_prod_grad_exact_values_with_zeros():
    x = np.array([[2.0, 0.0, 3.0, 4.0], [0.0, 5.0, 0.0, 1.0], [1.0, 2.0, 3.0, 4.0]])
    g = nova.grad(lambda x: jnp.sum(jnp.prod(x, axis=1)))(x)
    assert_close(g, np.array([[0, 24.0, 0, 0], [0, 0, 0, 0], [24.0, 12.0, 8.0, 6.0]]))
    assert np.all(np.isfinite(np.asarray(g)))


@pytest.mark.parametrize("zeros", [[], [2], [0, 2], [0, 1, 3], [0, 1, 2, 3]])
def test_prod_second_derivatives_through_zeros(zeros):
    x = np.array([[1.5, -0.7, 0.9, 2.0], [0.6, 1.2, -1.4, 0.8]])
    x[0, zeros] = 0.0
    check_grads(lambda x: nova.grad(lambda y: jnp.sum(jnp.prod(y, axis=1)))(x), [x])


@pytest.mark.parametrize("axis", [None, 0, 1, -1])
def test_cumsum_grad(axis):
    x = np.random.default_rng(11).standard_normal((3, 5))
    check_grads(lambda x: jnp.cumsum(x, axis=axis), [x])


@pytest.mark.parametrize("zeros", [[], [(0, 2)], [(1, 1), (1, 3)], [(2, 0)], [(0, 4)]])
@pytest.mark.parametrize("axis", [None, 1, 0])
@pytest.mark.parametrize("reverse", [False, True])
def test_cumprod_grad_with_zeros(zeros, axis, reverse):
    x = _with_zeros(np.random.default_rng(12), (3, 5), zeros)
    if axis is None:
        check_grads(lambda x: jnp.cumprod(x, axis=None), [x])
    else:
        check_grads(lambda x: lax.cumprod(jnp.asarray(x), axis=axis, reverse=reverse), [x])


@pytest.mark.parametrize("zeros", [[], [1], [1, 3], [0, 2, 4], [4]])
@pytest.mark.parametrize("reverse", [False, True])
def test_cumprod_second_derivatives_through_zeros(zeros, reverse):
    x = np.array([0.8, -1.1, 1.3, -0.6, 0.9])
    x[zeros] = 0.0
    w = np.array([0.3, -1.2, 0.7, 1.5, -0.4])

    def f(y):
        return jnp.sum(lax.cumprod(y, axis=0, reverse=reverse) * w)

    check_grads(lambda x: nova.grad(f)(x), [x])
    # The tangent rule's own derivatives (grad of a JVP, JVP of a JVP).
    v = np.array([1.0, 0.5, -0.3, 0.2, -0.7])
    check_grads(lambda x: nova.jvp(f, (x,), (jnp.asarray(v),))[1], [x])


@pytest.mark.parametrize("name", ["cummax", "cummin"])
@pytest.mark.parametrize("reverse", [False, True])
def test_cummax_cummin_grad(name, reverse):
    x = np.random.default_rng(13).permutation(18).reshape(3, 6) * 0.25 - 2.0
    check_grads(lambda x: getattr(lax, name)(jnp.asarray(x), axis=1, reverse=reverse), [x])


def test_cummax_grad_ties_and_nan_go_to_latest_attaining_element():
    x = np.array([1.0, 3.0, 2.0, 3.0, 0.0, np.nan, 5.0])
    ct = np.array([1.0, 10.0, 100.0, 1e3, 1e4, 1e5, 1e6])
    _, f_vjp = nova.vjp(lambda x: lax.cummax(x, axis=0), jnp.asarray(x))
    (g,) = f_vjp(jnp.asarray(ct))
    # owners: 0, 1, 1, 3, 3, 5(NaN), 5  -> sums per owner
    assert_close(g, np.array([1.0, 110.0, 0.0, 1.1e4, 0.0, 1.1e6, 0.0]))
    _, f_vjp = nova.vjp(lambda x: lax.cummax(x, axis=0, reverse=True), jnp.asarray(x[:5]))
    (g,) = f_vjp(jnp.asarray(ct[:5]))
    # reversed running max [3, 3, 3, 3, 0]: owners 1, 1, 3, 3, 4
    assert_close(g, np.array([0.0, 11.0, 0.0, 1100.0, 1e4]))


@pytest.mark.parametrize("axis", [None, 0, -1])
def test_sort_grad(axis):
    x = np.random.default_rng(14).permutation(20).reshape(4, 5) * 0.3
    check_grads(lambda x: jnp.sort(x, axis=axis), [x])


def test_sort_grad_moves_cotangent_to_original_place():
    x = np.array([3.0, 1.0, 2.0, 1.0])
    _, f_vjp = nova.vjp(lambda x: jnp.sort(x), jnp.asarray(x))
    (g,) = f_vjp(jnp.asarray(np.array([10.0, 20.0, 30.0, 40.0])))
    # sorted = x[[1, 3, 2, 0]] (stable), so x's cotangents are ct at those slots
    assert_close(g, np.array([40.0, 10.0, 30.0, 20.0]))


def test_sort_values_by_keys_grad():
    rng = np.random.default_rng(15)
    k = rng.permutation(12).reshape(3, 4) * 0.5
    v = rng.standard_normal((3, 4))
    check_grads(lambda k, v: lax.sort([k, v], dimension=1, num_keys=1), [k, v])


def test_grad_under_jit_of_sort_prod_cumsum():
    x = np.random.default_rng(16).uniform(0.5, 1.5, (3, 4))

    def loss(x):
        w = np.arange(12.0).reshape(3, 4)
        return (jnp.sum(jnp.sort(x, axis=0) * w) + jnp.sum(jnp.prod(x, axis=1))
                + jnp.sum(jnp.cumsum(x, axis=1) ** 2))

    assert_close(nova.jit(nova.grad(loss))(x), nova.grad(loss)(x))


# --- logsumexp -----------------------------------------------------------------------------------


def _logsumexp_ref(a, axis=None, b=None, keepdims=False, return_sign=False):
    """NumPy reference, in float64: shift by the max of the finite terms."""
    a = np.asarray(a, np.float64)
    if b is not None:
        a, b = np.broadcast_arrays(a, np.asarray(b, np.float64))
        a = np.where(b != 0, a, -np.inf)
    m = np.max(a, axis=axis, keepdims=True, initial=-np.inf)
    m = np.where(np.isfinite(m), m, 0.0)
    with np.errstate(all="ignore"):
        e = np.exp(a - m) if b is None else b * np.exp(a - m)
        s = np.sum(e, axis=axis, keepdims=True)
        sign = np.sign(s)
        out = np.log(np.abs(s) if return_sign else s) + m
    if not keepdims:
        ax = tuple(range(a.ndim)) if axis is None else axis
        out, sign = np.squeeze(out, axis=ax), np.squeeze(sign, axis=ax)
    return (out, sign) if return_sign else out


LSE_CASES = [((), None), ((5,), None), ((5,), 0), ((3, 4), 1), ((3, 4), -2), ((3, 4), (0, 1)),
             ((2, 3, 4), (0, 2)), ((2, 0, 3), 1), ((2, 0, 3), 0)]


@pytest.mark.parametrize("shape,axis", LSE_CASES)
@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_logsumexp_matches_reference(shape, axis, keepdims, dtype):
    rng = np.random.default_rng(17)
    a = (rng.standard_normal(shape) * 30).astype(dtype)  # large spread: unshifted exp overflows
    got = logsumexp(a, axis=axis, keepdims=keepdims)
    assert got.dtype == dtype
    assert_close(got, _logsumexp_ref(a, axis, keepdims=keepdims).astype(dtype))


def test_logsumexp_infinities_and_huge_values():
    a = np.array([[1.0, 2.0, 3.0], [-np.inf, -np.inf, -np.inf], [-np.inf, 0.0, 1.0],
                  [np.inf, 1.0, 2.0], [1e30, 1e30, -1e30], [np.nan, 0.0, 1.0]], np.float32)
    got = np.asarray(logsumexp(a, axis=1))
    assert got[1] == -np.inf and got[3] == np.inf and np.isnan(got[5])
    assert_close(got, _logsumexp_ref(a, 1).astype(np.float32))
    assert_close(got[4], np.float32(1e30 + np.log(2.0)))


def test_logsumexp_weights_and_sign():
    rng = np.random.default_rng(18)
    a = rng.standard_normal((3, 4))
    b = np.array([1.0, -2.0, 0.0, 0.5])
    a[0, 2] = np.inf  # a zero weight removes the term, even an infinite one
    for axis in (None, 1, 0):
        out, sign = logsumexp(a, axis=axis, b=b, return_sign=True)
        want_out, want_sign = _logsumexp_ref(a, axis, b=b, return_sign=True)
        assert_close(out, want_out)
        assert_close(sign, want_sign)
    got = np.asarray(logsumexp(a, axis=1, b=b))
    want = _logsumexp_ref(a, 1, b=b)
    assert_close(got, want)  # negative sums give NaN, as SciPy


def test_logsumexp_matches_jax():
    jax = pytest.importorskip("jax")
    from jax.scipy.special import logsumexp as jax_lse

    rng = np.random.default_rng(19)
    a = (rng.standard_normal((3, 5)) * 10).astype(np.float32)
    a[1, :2] = -np.inf
    b = rng.uniform(-1, 2, (5,)).astype(np.float32)
    assert_close(logsumexp(a, axis=1), np.asarray(jax_lse(a, axis=1)))
    out, sign = logsumexp(a, axis=-1, b=b, keepdims=True, return_sign=True)
    jout, jsign = jax_lse(a, axis=-1, b=b, keepdims=True, return_sign=True)
    assert_close(out, np.asarray(jout), rtol=1e-5)
    assert_close(sign, np.asarray(jsign))
    g = nova.grad(lambda x: jnp.sum(logsumexp(x, axis=1)))(a)
    jg = jax.grad(lambda x: jax_lse(x, axis=1).sum())(a)
    assert_close(g, np.asarray(jg))


def _softmax(a, axis):
    e = np.exp(a - np.max(a, axis=axis, keepdims=True))
    return e / np.sum(e, axis=axis, keepdims=True)


def test_logsumexp_gradient_is_softmax_and_finite_with_neg_inf():
    rng = np.random.default_rng(20)
    a = rng.standard_normal((4, 5)) * 3
    a[0, 1] = a[2, 0] = a[2, 4] = -np.inf
    g = np.asarray(nova.grad(lambda x: jnp.sum(logsumexp(x, axis=1)))(a))
    assert np.all(np.isfinite(g))
    assert_close(g, _softmax(a, 1))
    assert g[0, 1] == 0.0 and g[2, 0] == 0.0
    # ties at the maximum still give the exact softmax (no cotangent reaches the max)
    t = np.array([[2.0, 2.0, 1.0]])
    assert_close(nova.grad(lambda x: jnp.sum(logsumexp(x, axis=1)))(t), _softmax(t, 1))


@pytest.mark.parametrize("axis", [None, 1, (0, 1)])
def test_logsumexp_grad_finite_differences(axis):
    rng = np.random.default_rng(21)
    a = rng.standard_normal((3, 4))
    b = rng.uniform(0.5, 2.0, (3, 4))
    check_grads(lambda a: logsumexp(a, axis=axis), [a])
    check_grads(lambda a, b: logsumexp(a, axis=axis, b=b), [a, b])


# --- property tests ------------------------------------------------------------------------------


@st.composite
def _array_and_axis(draw):
    shape = draw(hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4))
    dtype = draw(st.sampled_from([np.float64, np.float32, np.int32, np.bool_]))
    if dtype == np.bool_:
        elems = st.booleans()
    elif dtype == np.int32:
        elems = st.integers(-3, 3)
    else:
        elems = st.floats(-3, 3, width=np.dtype(dtype).itemsize * 8)
    x = draw(hnp.arrays(dtype, shape, elements=elems))
    kind = draw(st.sampled_from(["none", "int", "tuple"]))
    if kind == "none" or not shape:
        axis = None
    elif kind == "int":
        axis = draw(st.integers(-len(shape), len(shape) - 1))
    else:
        axes = draw(st.lists(st.integers(0, len(shape) - 1), unique=True, max_size=len(shape)))
        axis = tuple(a - len(shape) if draw(st.booleans()) else a for a in axes)
    return x, axis, draw(st.booleans())


@given(_array_and_axis())
def test_sum_prod_argmax_property(case):
    x, axis, keepdims = case
    acc = _accumulation_dtype(x.dtype.type)
    rtol = 1e-4 if x.dtype == np.float32 else 1e-10
    assert_close(jnp.sum(x, axis=axis, keepdims=keepdims),
                 np.sum(x, axis=axis, keepdims=keepdims, dtype=acc), rtol=rtol, atol=rtol)
    assert_close(jnp.prod(x, axis=axis, keepdims=keepdims),
                 np.prod(x, axis=axis, keepdims=keepdims, dtype=acc), rtol=rtol, atol=rtol)
    one_axis = axis if not isinstance(axis, tuple) else (axis[0] if axis else None)
    try:
        want = np.argmax(x, axis=one_axis, keepdims=keepdims)
    except ValueError:
        with pytest.raises(ValueError):
            jnp.argmax(x, axis=one_axis, keepdims=keepdims)
        return
    assert_close(jnp.argmax(x, axis=one_axis, keepdims=keepdims), want)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("axis", [-1, 0, None], ids=["rows", "columns", "all"])
def test_compiled_max_min_propagate_nan_from_any_lane(dtype, axis):
    """Float max/min reductions run on bare vmaxps/vminps accumulators plus NaN-seen flags
    (codegen/cpu/row_reduction.py): a NaN in any lane or step must still give NaN, infinities and
    all-(-inf) rows stay exact."""
    x = np.random.default_rng(21).standard_normal((37, 64)).astype(dtype)
    for k in range(16):  # NaN at every lane position of a vector, in different rows
        x[k, 5 * k % 64] = np.nan
    x[20, :] = -np.inf
    x[21, 7] = np.inf
    x[22, :] = np.inf
    f = nova.jit(lambda x: (jnp.max(x, axis=axis), jnp.min(x * 2.0, axis=axis)))
    got_max, got_min = f(x)
    with np.errstate(invalid="ignore"):
        assert_close(got_max, np.max(x, axis=axis))
        assert_close(got_min, np.min(x * 2.0, axis=axis))
    assert np.isnan(np.asarray(got_max)).sum() == np.isnan(np.max(x, axis=axis)).sum()


def test_compiled_exp_and_tanh_keep_nan_and_limits():
    """exp clamps its argument with bare vminps/vmaxps (poison for NaN) and selects the NaN case
    from the argument; tanh's clamps pass NaN and -0 through (builder.clamp_keep_nan)."""
    x = np.array([np.nan, np.inf, -np.inf, 89.0, 88.7, -104.5, -103.0, -0.0, 0.0, 1e-5, -1e-5,
                  8.0, -8.0, 3.0, -0.5, np.nan], np.float32)
    got_exp, got_tanh = nova.jit(lambda x: (jnp.exp(x), jnp.tanh(x)))(x)
    with np.errstate(over="ignore"):
        assert_close(got_exp, np.exp(x))
    assert_close(got_tanh, np.tanh(x))
    np.testing.assert_array_equal(np.signbit(np.asarray(got_tanh)[7:9]), [True, False])


def test_compiled_exp_across_its_range_with_overflow_and_subnormals():
    """exp's clamp bounds do the limit work: above ln(FLT_MAX) the 2^n scaling overflows to inf,
    below -104 the result rounds to 0, and the subnormal range keeps its rounding."""
    x = np.concatenate([np.linspace(-110.0, 95.0, 40001), [88.72283, 88.7228394, 88.72284, 1e30,
                        -1e30, -103.97, -103.28, -87.3365, -87.34]]).astype(np.float32)
    got = np.asarray(nova.jit(jnp.exp)(x)).astype(np.float64)
    with np.errstate(over="ignore"):
        want = np.exp(x.astype(np.float64)).astype(np.float32).astype(np.float64)
    np.testing.assert_array_equal(np.isinf(got), np.isinf(want))
    finite = np.isfinite(want)
    tiny = np.float64(np.finfo(np.float32).smallest_subnormal)
    err = np.abs(got[finite] - want[finite])
    assert np.all(err <= 4e-7 * want[finite] + tiny), float(np.max(err / (want[finite] + tiny)))
    assert got[x < -104.0].max() == 0.0


def test_compiled_exp_fast_path_matches_the_full_path_bit_for_bit():
    """Vectors with every |x| <= 87 take exp's fast path (one shift builds 2^n), others the full
    one in a branch: a lane's result must not depend on which path its neighbours chose, and
    both stay within ~1 ulp of the exact value."""
    rng = np.random.default_rng(3)
    x = rng.uniform(-87.0, 87.0, 4096).astype(np.float32)
    x[:64] = np.linspace(-87.0, 87.0, 64)  # the fast path's edges
    far = x.copy()
    far[::5] = -100.0  # a subnormal result in most vectors: they take the full path
    f = nova.jit(jnp.exp)
    near_got, far_got = np.asarray(f(x)), np.asarray(f(far))
    keep = np.ones(x.size, bool)
    keep[::5] = False
    np.testing.assert_array_equal(near_got[keep], far_got[keep])
    exact = np.exp(x.astype(np.float64))
    ulps = np.abs(near_got - exact) / np.spacing(exact.astype(np.float32)).astype(np.float64)
    assert ulps.max() <= 1.1, float(ulps.max())
    assert ulps.mean() <= 0.35, float(ulps.mean())
    assert np.all(far_got[~keep] == np.float32(np.exp(-100.0)))
    assert float(np.asarray(f(np.zeros(16, np.float32))).max()) == 1.0


def test_compiled_tanh_across_its_range():
    """tanh's argument clamp at +-9 and result clamp at +-1 keep it within 4 ulp of NumPy
    everywhere (subnormal arguments included), +-1 from |x| = 9 on (NumPy: 1 ulp below from 9
    to 9.01), and NaN and signed zeros pass through."""
    x = np.concatenate([np.linspace(-20.0, 20.0, 40001), np.linspace(-1e-3, 1e-3, 2001),
                        [7.9, 7.95, 8.5, 8.99, 9.0, 9.01, 1e30, -1e30, 1e-40, -1e-40, 0.0, -0.0,
                         np.inf, -np.inf, np.nan]]).astype(np.float32)
    got = np.asarray(nova.jit(jnp.tanh)(x))
    want = np.tanh(x.astype(np.float64)).astype(np.float32)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    ok = ~np.isnan(want)
    ulp = np.spacing(np.abs(want[ok])).astype(np.float64)
    err = np.abs(got[ok].astype(np.float64) - want[ok]) / np.maximum(ulp, 1e-45)
    assert err.max() <= 4, float(err.max())
    assert np.all(np.abs(got[ok]) <= 1.0)
    big = np.abs(x) >= 9.0
    np.testing.assert_array_equal(got[big], np.sign(x[big]))
    np.testing.assert_array_equal(np.signbit(got[x == 0]), np.signbit(x[x == 0]))


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "float64"])
def test_compiled_logistic_keeps_its_left_tail(dtype):
    """logistic is 1 / (1 + exp(-x)) computed from exp(-|x|): the left tail keeps its small
    values (0.5 * (tanh(x / 2) + 1) rounded them to 0 below -18 in float32, -9 in float16) and
    NaN / +-inf / +-0 behave."""
    dt = jnp.dtype(dtype)
    x = np.concatenate([np.linspace(-30.0, 30.0, 601), [-9.1, -20.0, 0.0, -0.0, np.inf,
                                                         -np.inf, np.nan]]).astype(dt)
    got = np.asarray(nova.jit(nova.lax.logistic)(x)).astype(np.float64)
    w = x.astype(np.float64)
    want = (1.0 / (1.0 + np.exp(-w))).astype(dt).astype(np.float64)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    ok = ~np.isnan(want)
    rtol = {"float32": 2e-6, "float16": 2e-3, "bfloat16": 1.6e-2, "float64": 1e-12}[dtype]
    np.testing.assert_allclose(got[ok], want[ok], rtol=rtol, atol=0)


@pytest.mark.parametrize("dtype,rtol", [(np.float32, 4e-7), (np.float64, 1e-15),
                                        (np.float16, 1e-3)])
def test_compiled_log1p_keeps_small_arguments(dtype, rtol):
    """Found by review: MLIR's math.log1p expands to log(1 + x), so log1p(1e-8) was 0 and
    log1p(1e-3) off by 5e-5 (softplus = log1p(exp(z)) was 0 below z ~ -16). Compiled log1p
    matches NumPy's to a few ulp over 40 decades, with its limits and signed zeros."""
    rng = np.random.default_rng(5)
    lo = -25.0 if dtype == np.float16 else -40.0
    mags = np.exp(rng.uniform(lo, 10.0, 4000)) * 0.5
    x = np.concatenate([[1e-8, -1e-8, 0.0, -0.0, 1e-3, -0.5, -1.0, -2.0, np.inf, -np.inf, np.nan,
                         3.0], mags * rng.choice([-1.0, 1.0], mags.size)]).astype(dtype)
    got = np.asarray(nova.jit(jnp.log1p)(x)).astype(np.float64)
    with np.errstate(all="ignore"):
        want = np.log1p(x.astype(np.float64))
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(np.isinf(got), np.isinf(want))
    ok = np.isfinite(want)
    tiny = np.finfo(dtype).smallest_subnormal
    assert np.all(np.abs(got[ok] - want[ok]) <= rtol * np.abs(want[ok]) + tiny)
    np.testing.assert_array_equal(np.signbit(got[2:4]), [False, True])
