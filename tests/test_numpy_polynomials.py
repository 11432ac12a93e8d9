"""nova/numpy_impl/polynomials.py against NumPy: polynomials (polyval ... polyfit, vander),
trapezoid, gradient, interp, unwrap and the windows on several shapes, axes and edge cases
(empty, length-1, negative axes, float64), the same under nova.jit, gradients against finite
differences (float64), and the errors that bad input raises."""

import numpy as np
import pytest

import nova
from nova.core.errors import ShapeError
from nova.numpy_impl import polynomials as P
from tests.helpers import assert_close, check_grads

RNG = np.random.default_rng(0)


def _f64(*shape, lo=-2, hi=2):
    return RNG.uniform(lo, hi, shape)


def _f32(*shape, lo=-2, hi=2):
    return _f64(*shape, lo=lo, hi=hi).astype(np.float32)


def _same(actual, expected, rtol=None, atol=None, dtype=None):
    """actual's values and shape as expected's (NumPy's); its dtype `dtype` when given, else
    of expected's kind."""
    a, e = np.asarray(actual), np.asarray(expected)
    if dtype is not None:
        assert a.dtype == np.dtype(dtype), (a.dtype, dtype)
    else:
        assert a.dtype.kind == e.dtype.kind, (a.dtype, e.dtype)
    assert_close(a, e.astype(a.dtype), rtol=rtol, atol=atol)


def _jit_same(fn, args, expected, **kw):
    """fn(*args) equal to `expected`, eagerly and under nova.jit."""
    _same(fn(*args), expected, **kw)
    _same(nova.jit(fn)(*args), expected, **kw)


# --- polynomials ----------------------------------------------------------------------------


def test_polyval():
    p, x = _f64(5), _f64(3, 4)
    _jit_same(P.polyval, (p, x), np.polyval(p, x), dtype=np.float64)
    _same(P.polyval(p, 0.5), np.polyval(p, 0.5))  # scalar x gives 0-d
    assert P.polyval(p, 0.5).shape == ()
    # ints become float32 (jax.numpy); numpy keeps int
    _same(P.polyval([1, 2, 3], np.arange(4, dtype=np.int32)), np.polyval([1, 2, 3], np.arange(4)),
          dtype=np.float32)
    _same(P.polyval(np.zeros(0), x), np.zeros_like(x), dtype=np.float64)  # empty p: zeros
    p1, x1 = _f32(1), _f32(3)  # length-1 p: a constant, float32 kept
    _same(P.polyval(p1, x1), np.polyval(p1, x1), dtype=np.float32)
    check_grads(P.polyval, [_f64(4), _f64(3, 2)])
    with pytest.raises(ValueError, match=r"polyval: p must be at least 1-d"):
        P.polyval(3.0, x)
    with pytest.raises(ShapeError, match=r"polyval.*\(3,\) \(3, 4\)"):
        P.polyval(_f64(2, 3), x)


def test_polyval_nd_coefficients():
    # numpy.polyval iterates over p's first axis: p.shape[1:] broadcasts against x
    p, x = _f64(4, 3), _f64(2, 3)
    _jit_same(P.polyval, (p, x), np.polyval(p, x), dtype=np.float64)


def test_polyadd_polysub():
    for a, b in [([1, 2, 3], [4, 5]), ([4.0], _f64(4)), (_f64(3), _f64(3)), (2.5, [1.0, 1.0]),
                 (np.zeros(0), _f64(2))]:
        _jit_same(P.polyadd, (np.asarray(a), np.asarray(b)), np.polyadd(a, b))
        _jit_same(P.polysub, (np.asarray(a), np.asarray(b)), np.polysub(a, b))
    # integers stay integers (numpy, jax.numpy); no trimming of leading zeros
    assert P.polyadd(np.int32([1, 2]), np.int32([3])).dtype == np.int32
    _same(P.polysub([1.0, 2.0], [1.0, 0.0]), np.array([0.0, 2.0]))
    with pytest.raises(ValueError, match=r"polyadd: a2 must be a scalar or 1-d.*\(2, 2\)"):
        P.polyadd([1.0], np.ones((2, 2)))


def test_polymul():
    for a, b in [(_f64(4), _f64(3)), (_f64(1), _f64(5)), (3.0, _f64(2)), (_f64(6), _f64(6))]:
        _jit_same(P.polymul, (a, b), np.polymul(a, b), dtype=np.float64)
    _same(P.polymul(np.int32([1, 2]), np.int32([1, -2])), np.polymul([1, 2], [1, -2]),
          dtype=np.float32)
    _same(P.polymul(np.zeros(0), [1.0, 2.0]), np.zeros(2))  # empty = [0] (jax.numpy)
    _same(P.polymul(np.array([0.0, 0.0, 1.0, 2.0]), np.array([0.0, 3.0]),
                    trim_leading_zeros=True), np.array([3.0, 6.0]))
    check_grads(P.polymul, [_f64(4), _f64(3)])
    with pytest.raises(TypeError, match=r"polymul: trim_leading_zeros=True needs a concrete a1"):
        nova.jit(lambda a: P.polymul(a, a, trim_leading_zeros=True))(_f64(3))


def test_polyder_polyint():
    p = _f64(5)
    for m in range(7):
        _jit_same(lambda q, m=m: P.polyder(q, m), (p,), np.polyder(p, m), dtype=np.float64)
    _same(P.polyder(np.int32([3, 2, 1])), np.polyder([3, 2, 1]), dtype=np.float32)
    for m, k in [(0, None), (1, None), (2, None), (1, 3.0), (3, 2.0), (2, [1.0, -2.0]),
                 (2, [1.0, -2.0, 5.0])]:
        _jit_same(lambda q, m=m, k=k: P.polyint(q, m, k), (p,), np.polyint(p, m, k),
                  dtype=np.float64)
    _same(P.polyint(np.zeros(0), 2, 1.5), np.polyint(np.zeros(0), 2, 1.5))
    _same(P.polyint([2, 4]), np.polyint([2, 4]), dtype=np.float32)
    check_grads(lambda q: P.polyder(q, 2), [_f64(5)])
    check_grads(lambda q, k: P.polyint(q, 2, k), [_f64(4), _f64(2)])
    with pytest.raises(ValueError, match=r"polyder: m .* must be non-negative, got -1"):
        P.polyder(p, -1)
    with pytest.raises(TypeError, match=r"polyder: m must be an integer, got float"):
        P.polyder(p, 1.0)
    with pytest.raises(TypeError, match=r"polyder: m must be an integer"):
        nova.jit(P.polyder)(p, 2)  # a traced m
    with pytest.raises(ValueError, match=r"polyint: m .* must be non-negative, got -2"):
        P.polyint(p, -2)
    with pytest.raises(ValueError, match=r"polyint: k must be .* length 1 or >= m = 3, got "
                                         r"shape \(2,\)"):
        P.polyint(p, 3, [1.0, 2.0])
    with pytest.raises(ValueError, match=r"polyder: p must be a scalar or 1-d.*\(2, 3\)"):
        P.polyder(np.ones((2, 3)))


def test_polyfit():
    x = np.linspace(-1, 2, 30)
    y = np.cos(3 * x)
    for deg in (0, 1, 3, 6, 10):
        _jit_same(lambda a, b, d=deg: P.polyfit(a, b, d), (x, y), np.polyfit(x, y, deg),
                  rtol=1e-7, atol=1e-9, dtype=np.float64)
    ys = np.stack([y, np.sin(x), x ** 2], axis=1)
    w = _f64(30, lo=0.5, hi=2)
    _jit_same(lambda a, b, c: P.polyfit(a, b, 4, w=c), (x, ys, w), np.polyfit(x, ys, 4, w=w),
              rtol=1e-8, atol=1e-10, dtype=np.float64)
    # an exact fit through deg + 1 points, a length-1 x, float32
    _same(P.polyfit(x[:4], y[:4], 3), np.polyfit(x[:4], y[:4], 3), rtol=1e-6)
    _same(P.polyfit(np.array([2.0]), np.array([5.0]), 0), np.array([5.0]))
    _same(P.polyfit(x.astype(np.float32), y.astype(np.float32), 3), np.polyfit(x, y, 3),
          rtol=1e-4, atol=1e-4, dtype=np.float32)
    # a wide range and a high degree: the normal equations lose about twice the digits
    xw = np.linspace(0, 100, 50)
    yw = np.polyval([1e-6, -2e-4, 0.01, 1.0, -3.0, 2.0], xw)
    _same(P.polyfit(xw, yw, 5), np.polyfit(xw, yw, 5), rtol=1e-7, atol=1e-12)
    with pytest.raises(ValueError, match=r"polyfit: deg .* must be non-negative, got -1"):
        P.polyfit(x, y, -1)
    with pytest.raises(TypeError, match=r"polyfit: deg must be an integer, got float"):
        P.polyfit(x, y, 2.0)
    with pytest.raises(TypeError, match=r"polyfit: expected a 1-d vector for x, got shape"
                                        r" \(2, 15\)"):
        P.polyfit(x.reshape(2, 15), y, 1)
    with pytest.raises(TypeError, match=r"polyfit: expected a non-empty vector for x"):
        P.polyfit(np.zeros(0), np.zeros(0), 1)
    with pytest.raises(TypeError, match=r"polyfit: expected a 1-d or 2-d array for y"):
        P.polyfit(x, np.zeros((30, 1, 1)), 1)
    with pytest.raises(ShapeError, match=r"polyfit: .*same length, got shapes \(30,\) and "
                                         r"\(29,\)"):
        P.polyfit(x, y[:-1], 1)
    with pytest.raises(ShapeError, match=r"polyfit: expected w and y .* \(5,\) and \(30,\)"):
        P.polyfit(x, y, 1, w=np.ones(5))
    with pytest.raises(NotImplementedError, match=r"polyfit: full=True and cov=True"):
        P.polyfit(x, y, 1, full=True)


def test_vander():
    xi = np.array([-2, 0, 3, 1], np.int32)
    for N in (None, 0, 1, 3, 4, 7):
        for inc in (False, True):
            _jit_same(lambda v, N=N, inc=inc: P.vander(v, N, inc), (xi,),
                      np.vander(xi, N, inc), dtype=np.int32)
    x = _f64(6)
    _jit_same(lambda v: P.vander(v, 9), (x,), np.vander(x, 9), dtype=np.float64)
    _same(P.vander(np.zeros(0), 3), np.zeros((0, 3)))
    _same(P.vander(np.array([0.0, -1.5])), np.vander(np.array([0.0, -1.5])))  # 0**0 == 1
    check_grads(lambda v: P.vander(v, 5), [np.array([0.0, -1.5, 0.7])])
    with pytest.raises(ValueError, match=r"vander: x must be a one-dimensional array, got "
                                         r"shape \(2, 2\)"):
        P.vander(np.ones((2, 2)))
    with pytest.raises(ValueError, match=r"vander: N .* must be non-negative, got -1"):
        P.vander(x, -1)
    with pytest.raises(TypeError, match=r"vander: N must be an integer"):
        P.vander(x, 2.5)


# --- integration and differences ------------------------------------------------------------


def test_trapezoid():
    y = _f64(4, 6)
    xs = np.sort(_f64(6))
    xs0 = np.sort(_f64(4))
    xn = np.sort(_f64(4, 6), axis=1)
    cases = [((y,), {}), ((y,), {"dx": 0.3, "axis": 0}), ((y, xs), {}),
             ((y, xs0), {"axis": -2}), ((y, xn), {}), ((y[0],), {}),
             ((y[:, :1],), {}), ((np.zeros((3, 0)),), {}), ((y,), {"dx": _f64(4, 1)})]
    for args, kw in cases:
        _jit_same(lambda *a, kw=kw: P.trapezoid(*a, **kw), args, np.trapezoid(*args, **kw),
                  dtype=np.float64)
    _same(P.trapezoid(np.arange(5, dtype=np.int32)), np.trapezoid(np.arange(5)),
          dtype=np.float32)
    y32 = _f32(5)
    _same(P.trapezoid(y32, dx=0.5), np.trapezoid(y32, dx=0.5), dtype=np.float32)
    check_grads(lambda a, b: P.trapezoid(a, b, axis=0), [_f64(4, 3), xs0])
    check_grads(lambda a: P.trapezoid(a, dx=0.7), [_f64(2, 5)])
    with pytest.raises(ShapeError, match=r"trapezoid: x of shape \(5,\) .*\(y of shape \(4, 6\)\)"):
        P.trapezoid(y, np.arange(5.0))
    with pytest.raises(ValueError, match=r"trapezoid: axis 2 is out of bounds .* dimension 2"):
        P.trapezoid(y, axis=2)
    with pytest.raises(ValueError, match=r"trapezoid: axis -1 is out of bounds .* dimension 0"):
        P.trapezoid(3.0)
    with pytest.raises(ShapeError, match=r"trapezoid \(x or dx against y\)"):
        P.trapezoid(y, np.ones((3, 6)))


def test_gradient():
    f = _f64(5, 7)
    c0 = np.sort(_f64(5))  # non-uniform coordinates
    c1 = np.arange(7.0) * 0.25  # uniform coordinates
    cases = [((f,), {}), ((f, 2.0), {}), ((f, c0, c1), {}), ((f, c0[::-1].copy(), 0.5), {}),
             ((f, c1), {"axis": -1}), ((f, c0), {"axis": 0}), ((f[0],), {}),
             ((f, 3.0, c0), {"axis": (-1, 0)})]
    for eo in (1, 2):
        for args, kw in cases:
            expected = np.gradient(*args, edge_order=eo, **kw)
            got = P.gradient(*args, edge_order=eo, **kw)
            jitted = nova.jit(lambda *a, kw=kw, eo=eo: P.gradient(*a, edge_order=eo, **kw))(*args)
            assert type(got) is type(jitted) is type(expected) or (
                isinstance(expected, np.ndarray) and not isinstance(got, tuple | list))
            if not isinstance(expected, tuple):
                got, jitted, expected = (got,), (jitted,), (expected,)
            assert len(got) == len(jitted) == len(expected)
            for g, j, e in zip(got, jitted, expected, strict=True):
                _same(g, e, rtol=1e-9, atol=1e-10, dtype=np.float64)
                _same(j, e, rtol=1e-9, atol=1e-10, dtype=np.float64)
    # a length-2 axis (edge_order 1), a length-3 axis (edge_order 2), ints become float32
    _same(P.gradient(np.array([1.0, 4.0])), np.gradient(np.array([1.0, 4.0])))
    _same(P.gradient(np.array([1.0, 4.0, 2.0]), edge_order=2),
          np.gradient(np.array([1.0, 4.0, 2.0]), edge_order=2))
    _same(P.gradient(np.array([1, 4, 9, 16], np.int32)), np.gradient(np.array([1, 4, 9, 16])),
          dtype=np.float32)
    # second-order accuracy: exact for quadratics on non-uniform grids, edges included
    xs = np.sort(_f64(9))
    _same(P.gradient(xs ** 2, xs, edge_order=2), 2 * xs, rtol=1e-9, atol=1e-9)
    check_grads(lambda a: P.gradient(a, axis=1), [_f64(3, 5)])
    check_grads(lambda a, c: P.gradient(a, c, edge_order=2), [_f64(6), np.sort(_f64(6))])
    check_grads(lambda a, c: P.gradient(a, c), [_f64(6), np.sort(_f64(6))])


def test_gradient_axis_order_and_errors():
    f = _f64(5, 7)
    c0 = np.sort(_f64(5))
    got = P.gradient(f, 3.0, c0, axis=(-1, 0))
    expected = np.gradient(f, 3.0, c0, axis=(-1, 0))
    assert isinstance(got, tuple) and len(got) == 2
    for g, e in zip(got, expected, strict=True):
        _same(g, e, rtol=1e-9, atol=1e-10)
    with pytest.raises(TypeError, match=r"gradient: invalid number of spacing arguments: got "
                                        r"3, expected 0, 1 \(a scalar\) or 2"):
        P.gradient(f, 1.0, 2.0, 3.0)
    with pytest.raises(ShapeError, match=r"gradient: .* varargs\[0\] has shape \(4,\), f has "
                                         r"shape \(5, 7\) \(axis 0\)"):
        P.gradient(f, np.arange(4.0), 1.0)
    with pytest.raises(ValueError, match=r"gradient: distances must be either scalars or 1-d"):
        P.gradient(f, np.ones((5, 1)), axis=0)
    with pytest.raises(ValueError, match=r"gradient: edge_order must be 1 or 2, got 3"):
        P.gradient(f, edge_order=3)
    with pytest.raises(TypeError, match=r"gradient: edge_order must be an integer"):
        P.gradient(f, edge_order=1.5)
    with pytest.raises(ValueError, match=r"gradient: shape of array too small.* 3 elements .*"
                                         r"axis 0, f has shape \(2, 7\)"):
        P.gradient(f[:2], edge_order=2)
    with pytest.raises(ValueError, match=r"gradient: axis 2 is out of bounds"):
        P.gradient(f, axis=2)
    with pytest.raises(ValueError, match=r"gradient: repeated axis"):
        P.gradient(f, axis=(0, -2))


def test_interp():
    xp = np.sort(_f64(8))
    fp = _f64(8)
    xq = _f64(3, 5, lo=-3, hi=3)
    cases = [((xq, xp, fp), {}), ((xq, xp, fp), {"left": -9.0, "right": 9.0}),
             ((xq, xp, fp), {"period": 1.5}), ((xq, xp, fp), {"period": -2.0}),
             ((xq, xp[:1], fp[:1]), {}), ((xp, xp, fp), {}), ((np.zeros(0), xp, fp), {}),
             ((np.float64(0.3), xp, fp), {}), ((xq, np.array([0.0, 1.0, 1.0, 2.0]),
                                              np.array([0.0, 1.0, 3.0, 4.0])), {})]
    for args, kw in cases:
        _jit_same(lambda *a, kw=kw: P.interp(*a, **kw), args, np.interp(*args, **kw),
                  rtol=1e-12, atol=1e-12, dtype=np.float64)
    x32, xp32, fp32 = _f32(7, lo=-3, hi=3), np.sort(_f32(5)), _f32(5)
    _same(P.interp(x32, xp32, fp32), np.interp(x32, xp32, fp32), dtype=np.float32)
    _same(P.interp(np.arange(4, dtype=np.int32), [0, 2, 4], [1, 5, 3]),
          np.interp(np.arange(4), [0, 2, 4], [1, 5, 3]), dtype=np.float32)
    # gradients in x (away from the nodes), xp and fp
    xg = np.array([-0.9, -0.3, 0.4, 1.1])
    xpg, fpg = np.array([-1.5, -0.5, 0.0, 0.8, 1.6]), _f64(5)
    check_grads(lambda a, b, c: P.interp(a, b, c), [xg, xpg, fpg])
    check_grads(lambda c: P.interp(np.array([-3.0, 3.0, 0.1]), xpg, c, left=0.5), [fpg])
    with pytest.raises(ValueError, match=r"interp: data points xp and fp must be 1-d, got "
                                         r"shapes \(2, 4\) and \(8,\)"):
        P.interp(xq, xp.reshape(2, 4), fp)
    with pytest.raises(ShapeError, match=r"interp: fp and xp are not of the same length: shapes "
                                         r"\(7,\) and \(8,\)"):
        P.interp(xq, xp, fp[:-1])
    with pytest.raises(ValueError, match=r"interp: array of sample points xp is empty"):
        P.interp(xq, np.zeros(0), np.zeros(0))
    with pytest.raises(ValueError, match=r"interp: period must be a non-zero value"):
        P.interp(xq, xp, fp, period=0)
    with pytest.raises(TypeError, match=r"interp: fp must be an array, got NoneType"):
        P.interp(xq, xp, None)


def test_unwrap():
    ph = np.cumsum(_f64(3, 20, lo=-4, hi=4), axis=1)
    cases = [((ph,), {}), ((ph,), {"axis": 0}), ((ph,), {"axis": -2, "discont": 4.0}),
             ((ph,), {"period": 5.0}), ((ph,), {"discont": 1.0}),
             ((np.array([0.0, np.pi, 0.0, -np.pi, 0.0, 3 * np.pi]),), {}),
             ((np.zeros((2, 0)),), {}), ((np.array([1.5]),), {})]
    for args, kw in cases:
        _jit_same(lambda *a, kw=kw: P.unwrap(*a, **kw), args, np.unwrap(*args, **kw),
                  rtol=1e-12, atol=1e-12, dtype=np.float64)
    p32 = (np.arange(12) * 2.5).astype(np.float32)
    _same(P.unwrap(p32), np.unwrap(p32), rtol=1e-5, atol=1e-5, dtype=np.float32)
    pi = np.array([0, 7, 14, 3], np.int32)
    _same(P.unwrap(pi, period=8), np.unwrap(pi, period=8), dtype=np.float32)
    with pytest.raises(ValueError, match=r"unwrap: axis -1 is out of bounds .* dimension 0"):
        P.unwrap(1.0)


# --- windows --------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["bartlett", "blackman", "hamming", "hanning"])
def test_windows(name):
    fn, ref = getattr(P, name), getattr(np, name)
    for M in (-2, 0, 1, 2, 5, 16, np.int64(7)):
        got = fn(M)
        assert got.dtype == np.float32 and got.shape == (max(int(M), 0),)
        _same(got, ref(M), rtol=1e-6, atol=1e-6)
    _same(nova.jit(lambda z: z + fn(9))(np.zeros(9, np.float32)), ref(9), rtol=1e-6, atol=1e-6)
    with pytest.raises(TypeError, match=rf"{name}: M must be an integer, got float"):
        fn(5.0)
    with pytest.raises(TypeError, match=rf"{name}: M must be an integer"):
        nova.jit(fn)(5)


def test_poly_and_polydiv():
    import nova.numpy as jnp

    for roots in ([1.0, 2.0, 3.0], [-0.5], [2.0, 2.0, -1.0, 0.25]):
        roots = np.array(roots)  # float64 (a list would be the default float32)
        np.testing.assert_allclose(np.asarray(jnp.poly(roots)), np.poly(roots), rtol=1e-12)
    assert jnp.poly([1, 2]).dtype == jnp.float32
    m = np.array([[2.0, 1.0], [1.0, 3.0]])
    np.testing.assert_allclose(np.asarray(jnp.poly(m)), np.poly(m), rtol=1e-12)
    for u, v in [([1.0, -6, 11, -6], [1.0, -1]), ([3.0, 5, 2, 1], [2.0, 1, 7]), ([1.0, 2], [4.0]),
                 ([1.0], [1.0, 2, 3])]:
        u, v = np.array(u), np.array(v)
        q, r = jnp.polydiv(u, v)
        eq, er = np.polydiv(u, v)
        np.testing.assert_allclose(np.asarray(q), eq, rtol=1e-12, atol=1e-12)
        # jax.numpy's static lengths: r has len(u) entries, leading ones zero
        np.testing.assert_allclose(np.asarray(r)[-len(er):], er, rtol=1e-12, atol=1e-12)
        t = np.linspace(-2, 2, 7)  # u = q v + r as functions
        np.testing.assert_allclose(np.polyval(np.asarray(q), t) * np.polyval(v, t)
                                   + np.polyval(np.asarray(r), t), np.polyval(u, t), atol=1e-11)
    _, r = jnp.polydiv(np.array([1.0, -6, 11, -6]), np.array([1.0, -1]), trim_leading_zeros=True)
    np.testing.assert_array_equal(np.asarray(r), [0.0])
    check_grads(lambda a, b: jnp.polydiv(a, b)[0], [np.array([3.0, 5, 2, 1]), np.array([2.0, 1, 7])])
    with pytest.raises(ValueError, match="polydiv: v must not be empty"):
        jnp.polydiv([1.0], [])
