"""nova/numpy_impl/arrayapi.py and the dtype aliases of nova.numpy against NumPy: the array
API's names, shape helpers, apply_along_axis / piecewise, functional put / place, index
construction, the real views of the complex helpers, host I/O (atomic writes), i0 and kaiser;
under jit and grad where they apply, and the errors."""

import os

import nova.numpy as jnp
import numpy as np
import pytest

import nova
from nova.core.errors import ConcretizationTypeError, ShapeError
from tests.helpers import check_grads

RNG = np.random.default_rng(0)


def _eq(got, want):
    got = np.asarray(got)
    assert got.shape == np.shape(want), (got.shape, np.shape(want))
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_array_api_names():
    a = RNG.standard_normal((2, 3, 4))
    _eq(jnp.concat([a, a], axis=1), np.concatenate([a, a], axis=1))
    _eq(jnp.concat([a, a[0]], axis=None), np.concatenate([a.ravel(), a[0].ravel()]))
    _eq(jnp.permute_dims(a, (2, 0, 1)), np.transpose(a, (2, 0, 1)))
    parts = jnp.unstack(a, axis=1)
    assert len(parts) == 3
    _eq(parts[2], a[:, 2])
    _eq(jnp.cumulative_sum(a, axis=2), np.cumsum(a, axis=2))
    _eq(jnp.cumulative_sum(a, axis=-1, include_initial=True),
        np.concatenate([np.zeros((2, 3, 1)), np.cumsum(a, axis=-1)], axis=-1))
    _eq(jnp.cumulative_prod(np.arange(1, 5), include_initial=True), [1, 1, 2, 6, 24])
    _eq(jnp.matrix_transpose(a), np.swapaxes(a, -1, -2))
    _eq(jnp.vecdot(a, a), np.sum(a * a, -1))
    m, v = RNG.standard_normal((5, 3, 4)), RNG.standard_normal(4)
    _eq(jnp.matvec(m, v), m @ v)
    w = RNG.standard_normal(3)
    _eq(jnp.vecmat(w, m), np.einsum("j,bjk->bk", w, m))
    with pytest.raises(ValueError, match="axis must be given"):
        jnp.cumulative_sum(a)
    with pytest.raises(ValueError, match="at least one dimension"):
        jnp.unstack(np.float32(1))
    with pytest.raises(ShapeError, match=r"matvec: x1 \(3, 4\)"):
        jnp.matvec(np.ones((3, 4)), np.ones(3))


def test_shape_helpers():
    assert jnp.atleast_3d(np.ones(3)).shape == np.atleast_3d(np.ones(3)).shape
    assert jnp.atleast_3d(np.ones((2, 3))).shape == (2, 3, 1)
    assert jnp.atleast_3d(1.0).shape == (1, 1, 1)
    assert [x.shape for x in jnp.atleast_3d(np.ones(2), np.ones((2, 2, 2, 2)))] == [(1, 2, 1), (2, 2, 2, 2)]
    x = np.ones((3, 4, 5, 6))
    for axis, start in [(3, 1), (2, 0), (1, 4), (0, 2), (-1, 0)]:
        assert jnp.rollaxis(x, axis, start).shape == np.rollaxis(x, axis, start).shape
    a, b = np.ones((2, 2)), np.zeros((2, 3))
    c, d = np.full((1, 2), 2.0), np.full((1, 3), 3.0)
    _eq(jnp.block([[a, b], [c, d]]), np.block([[a, b], [c, d]]))
    _eq(jnp.block([1, 2, np.array([3, 4])]), np.block([1, 2, np.array([3, 4])]))
    _eq(jnp.block([[1], [2]]), np.block([[1], [2]]))
    _eq(jnp.block(np.eye(2)), np.block(np.eye(2)))
    with pytest.raises(ValueError, match="depths are mismatched"):
        jnp.block([[a], b])
    with pytest.raises(TypeError, match="tuple"):
        jnp.block((a, b))
    m = RNG.standard_normal((3, 4))
    _eq(jnp.ptp(m), np.ptp(m))
    _eq(jnp.ptp(m, axis=0, keepdims=True), np.ptp(m, axis=0, keepdims=True))
    _eq(jnp.copy(m), m)


def test_apply_along_axis_and_over_axes():
    a = RNG.standard_normal((2, 3, 4))
    for axis in (0, 1, 2, -1):
        _eq(jnp.apply_along_axis(lambda v: v[:2] * jnp.sum(v), axis, a),
            np.apply_along_axis(lambda v: v[:2] * v.sum(), axis, a))
        _eq(jnp.apply_along_axis(jnp.sum, axis, a), np.apply_along_axis(np.sum, axis, a))
    _eq(jnp.apply_along_axis(lambda v: jnp.outer(v, v), 1, a),
        np.apply_along_axis(lambda v: np.outer(v, v), 1, a))
    _eq(nova.jit(lambda x: jnp.apply_along_axis(jnp.sort, 0, x))(a), np.sort(a, axis=0))
    _eq(jnp.apply_over_axes(jnp.sum, a, [0, 2]), np.apply_over_axes(np.sum, a, [0, 2]))
    _eq(jnp.apply_over_axes(jnp.cumsum, a, 1), np.apply_over_axes(np.cumsum, a, 1))


def test_piecewise_and_fromfunction():
    x = np.linspace(-2, 2, 9)
    _eq(jnp.piecewise(x, [x < 0, x >= 0], [lambda v: -v, lambda v: v ** 2]),
        np.piecewise(x, [x < 0, x >= 0], [lambda v: -v, lambda v: v ** 2]))
    _eq(jnp.piecewise(x, [x < -1, x > 1], [5.0, 7.0, lambda v: v]),
        np.piecewise(x, [x < -1, x > 1], [5.0, 7.0, lambda v: v]))
    _eq(jnp.piecewise(x, x > 0, [1.0]), np.piecewise(x, x > 0, [1.0]))
    f = nova.jit(lambda v: jnp.piecewise(v, [v < 0], [lambda t: jnp.sin(t), lambda t: t * 3]))
    _eq(f(x), np.where(x < 0, np.sin(x), 3 * x))
    check_grads(lambda v: jnp.piecewise(v, [v < 0], [lambda t: t ** 3, lambda t: 2 * t]),
                [np.array([-1.5, 0.5, 2.0])])
    with pytest.raises(ValueError, match="funclist has 3 entries for 1 conditions"):
        jnp.piecewise(x, [x > 0], [1, 2, 3])
    _eq(jnp.fromfunction(lambda i, j: i * 10 + j, (2, 3), dtype=int),
        np.fromfunction(lambda i, j: i * 10 + j, (2, 3), dtype=int))


def test_put_put_along_axis_place():
    a = np.arange(6.0)
    want = a.copy()
    np.put(want, [0, -1, 2], [9.0, 8.0])
    _eq(jnp.put(a, [0, -1, 2], [9.0, 8.0]), want)
    want = a.copy()
    np.put(want, [7, -8], [1.0, 2.0], mode="wrap")
    _eq(jnp.put(a, [7, -8], [1.0, 2.0], mode="wrap"), want)
    want = a.copy()
    np.put(want, [10], [3.0], mode="clip")
    _eq(jnp.put(a, [10], [3.0], mode="clip"), want)
    with pytest.raises(IndexError, match="out of bounds for size 6"):
        jnp.put(a, [6], [1.0])
    with pytest.raises(ValueError, match="inplace=True"):
        jnp.put(a, [0], [1.0], inplace=True)
    m = RNG.standard_normal((3, 4))
    idx = np.argsort(m, axis=1)[:, -2:]
    want = m.copy()
    np.put_along_axis(want, idx, -1.0, axis=1)
    _eq(jnp.put_along_axis(m, idx, -1.0, axis=1), want)
    want = m.copy()
    idx0 = np.argsort(m, axis=0)[:2]
    np.put_along_axis(want, idx0, 5.0, axis=0)
    _eq(jnp.put_along_axis(m, idx0, 5.0, axis=0), want)
    g = nova.grad(lambda v: jnp.sum(jnp.put_along_axis(m, idx, v, axis=1) ** 2))(np.ones((3, 2)))
    _eq(g, 2 * np.ones((3, 2)))
    want = np.arange(6)
    np.place(want, want % 2 == 0, [7, 8])
    _eq(jnp.place(np.arange(6), np.arange(6) % 2 == 0, [7, 8]), want)
    with pytest.raises(ConcretizationTypeError):
        nova.jit(lambda x: jnp.place(x, x > 2, [0]))(np.arange(6))


def test_index_construction():
    a = np.arange(20).reshape(4, 5)
    rows, cols = jnp.ix_([0, 2], [1, 3, 4])
    assert rows.shape == (2, 1) and cols.shape == (1, 3)
    _eq(a[np.asarray(rows), np.asarray(cols)], a[np.ix_([0, 2], [1, 3, 4])])
    r, _ = jnp.ix_(np.array([True, False, True, False]), [0])
    _eq(r, np.ix_(np.array([True, False, True, False]), [0])[0])
    with pytest.raises(ValueError, match="must be 1-d"):
        jnp.ix_(np.ones((2, 2)))
    _eq(jnp.mgrid[0:3, 1:4:2], np.mgrid[0:3, 1:4:2])
    _eq(jnp.mgrid[-1:1:5j], np.mgrid[-1:1:5j])
    og = jnp.ogrid[0:3, 0:2]
    for g, w in zip(og, np.ogrid[0:3, 0:2], strict=True):
        _eq(g, w)
    assert jnp.mgrid[0:3].dtype == jnp.int32 and jnp.mgrid[0:1:3j].dtype == jnp.float32
    assert jnp.s_[1:3, ::2] == np.s_[1:3, ::2] and jnp.index_exp[2] == (2,)
    for got, want in zip(jnp.mask_indices(4, jnp.triu, 1), np.mask_indices(4, np.triu, 1), strict=True):
        _eq(got, want)


def test_real_views_and_predicates():
    x = np.array([-1.0, 2.0, -0.0, 0.0, np.nan])
    _eq(jnp.angle(x), np.angle(x))
    _eq(jnp.angle(x, deg=True), np.angle(x, deg=True))
    assert jnp.angle(np.array([-2, 3])).dtype == jnp.float32
    _eq(jnp.real(x), x)
    _eq(jnp.imag(x), np.zeros(5))
    _eq(jnp.conj(x), x)
    _eq(jnp.conjugate(x), x)
    assert not np.asarray(jnp.iscomplex(x)).any() and np.asarray(jnp.isreal(x)).all()
    assert not jnp.iscomplexobj(jnp.asarray(x)) and jnp.isrealobj(x)
    assert jnp.iscomplexobj(np.array([1j]))
    assert jnp.isscalar(3) and jnp.isscalar(np.float32(2)) and jnp.isscalar(jnp.asarray(1.0))
    assert not jnp.isscalar([1]) and not jnp.isscalar("a") and not jnp.isscalar(jnp.ones(2))
    assert jnp.iterable([1]) and jnp.iterable(jnp.ones(2)) and not jnp.iterable(jnp.asarray(1))


def test_dtype_aliases():
    assert jnp.bool is jnp.bool_ and jnp.asarray([1, 0]).astype(jnp.bool).dtype == np.bool_
    assert jnp.int_(3).dtype == jnp.int32 and jnp.float_(1).dtype == jnp.float32
    assert jnp.double == np.float64 and jnp.single == np.float32 and jnp.half == np.float16
    assert jnp.uint(5).dtype == jnp.uint32
    assert jnp.issubdtype(jnp.float32, jnp.generic) and not jnp.issubdtype(jnp.float32,
                                                                            jnp.complexfloating)
    assert jnp.euler_gamma == np.euler_gamma
    assert type(jnp.can_cast("int8", "int16")) is bool


def test_host_io_round_trips_and_writes_atomically(tmp_path):
    a = jnp.arange(6.0).reshape(2, 3)
    p = tmp_path / "x"
    jnp.save(str(p), a)
    back = jnp.load(str(p) + ".npy")
    assert isinstance(back, nova.Array)
    _eq(back, np.arange(6.0).reshape(2, 3))
    jnp.savez(tmp_path / "y", w=a, b=jnp.ones(2))
    with jnp.load(tmp_path / "y.npz") as z:
        _eq(z["w"], np.asarray(a))
    assert sorted(os.listdir(tmp_path)) == ["x.npy", "y.npz"]  # no temporary file left

    class Boom:
        def __array__(self, dtype=None, copy=None):
            raise RuntimeError("no")

    with pytest.raises(RuntimeError):
        jnp.save(str(p), Boom())
    _eq(jnp.load(str(p) + ".npy"), np.asarray(a))  # the old file is intact
    assert sorted(os.listdir(tmp_path)) == ["x.npy", "y.npz"]
    _eq(jnp.frombuffer(np.arange(3, dtype=np.int32).tobytes(), dtype=np.int32), [0, 1, 2])
    _eq(jnp.fromstring("1, 2, 3", sep=","), [1.0, 2.0, 3.0])
    _eq(jnp.fromiter((i * i for i in range(4)), dtype=np.int32), [0, 1, 4, 9])
    _eq(jnp.from_dlpack(np.arange(3.0)), [0.0, 1.0, 2.0])
    assert jnp.array_str(jnp.arange(3)) == np.array_str(np.arange(3))
    assert jnp.array_repr(jnp.arange(3)) == np.array_repr(np.arange(3, dtype=np.int32))


def test_i0_and_kaiser():
    x = np.concatenate([np.linspace(-30, 30, 121), [0.0, 7.9999, 8.0, 8.0001, 100.0, 700.0]])
    got = np.asarray(jnp.i0(x))
    np.testing.assert_allclose(got, np.i0(x), rtol=5e-15)
    assert jnp.i0(np.arange(3)).dtype == jnp.float32
    np.testing.assert_allclose(np.asarray(nova.jit(jnp.i0)(x)), np.i0(x), rtol=5e-15)
    check_grads(jnp.i0, [np.array([-3.0, 0.5, 9.0, 20.0])])
    for m, beta in [(12, 8.6), (7, 0.0), (1, 5.0), (0, 5.0), (33, 14.0)]:
        np.testing.assert_allclose(np.asarray(jnp.kaiser(m, beta)), np.kaiser(m, beta),
                                   rtol=2e-6, atol=1e-7)


def test_r_c_diagflat_dsplit_einsum_path():
    for got, want in [
        (jnp.r_[1:4, 0, 4, np.array([7, 8])], np.r_[1:4, 0, 4, np.array([7, 8])]),
        (jnp.r_[-1:1:6j, 0], np.r_[-1:1:6j, 0].astype(np.float32)),  # the default float
        (jnp.c_[np.array([1, 2, 3]), np.array([4, 5, 6])], np.c_[np.array([1, 2, 3]), np.array([4, 5, 6])]),
        (jnp.c_[np.array([[1, 2, 3]]), 0, 0, np.array([[4, 5, 6]])],
         np.c_[np.array([[1, 2, 3]]), 0, 0, np.array([[4, 5, 6]])]),
        (jnp.r_["0,2,0", [1, 2, 3], [4, 5, 6]], np.r_["0,2,0", [1, 2, 3], [4, 5, 6]]),
        (jnp.r_["1,2,0", [1, 2, 3], [4, 5, 6]], np.r_["1,2,0", [1, 2, 3], [4, 5, 6]]),
        (jnp.r_["0,2", [1, 2, 3], [4, 5, 6]], np.r_["0,2", [1, 2, 3], [4, 5, 6]]),
        (jnp.diagflat([[1, 2], [3, 4]], 1), np.diagflat([[1, 2], [3, 4]], 1)),
    ]:
        _eq(got, want)
    with pytest.raises(NotImplementedError, match="matrix directives"):
        jnp.r_["r", [1, 2]]
    parts = jnp.dsplit(np.arange(16.0).reshape(2, 2, 4), [1, 3])
    for g, w in zip(parts, np.dsplit(np.arange(16.0).reshape(2, 2, 4), [1, 3]), strict=True):
        _eq(g, w)
    with pytest.raises(ValueError, match="at least 3 dimensions"):
        jnp.dsplit(np.ones((2, 2)), 2)
    ops = [np.ones((2, 3)), np.ones((3, 4)), np.ones((4, 5))]
    assert jnp.einsum_path("ij,jk,kl->il", *ops)[0] == np.einsum_path("ij,jk,kl->il", *ops)[0]


@pytest.mark.parametrize("axis", [None, 0, 1])
@pytest.mark.parametrize("bitorder", ["big", "little"])
def test_packbits_unpackbits(axis, bitorder):
    b = RNG.integers(0, 2, (3, 11)).astype(bool)
    packed = jnp.packbits(b, axis=axis, bitorder=bitorder)
    assert packed.dtype == jnp.uint8
    np.testing.assert_array_equal(np.asarray(packed), np.packbits(b, axis=axis, bitorder=bitorder))
    u = np.packbits(b, axis=axis, bitorder=bitorder)
    for count in (None, 5, -3, 40):
        np.testing.assert_array_equal(
            np.asarray(jnp.unpackbits(u, axis=axis, count=count, bitorder=bitorder)),
            np.unpackbits(u, axis=axis, count=count, bitorder=bitorder))
    np.testing.assert_array_equal(np.asarray(jnp.packbits(np.array([3, 0, -1, 2]))),
                                  np.packbits(np.array([3, 0, -1, 2])))
    with pytest.raises(TypeError, match="unpackbits: a must be uint8"):
        jnp.unpackbits(np.array([1, 2]))
    with pytest.raises(TypeError, match="packbits: a must be bool or integer"):
        jnp.packbits(np.array([0.5]))


def test_review_kaiser_piecewise_bfloat16_unpackbits(tmp_path):
    np.testing.assert_allclose(np.asarray(jnp.kaiser(7, 100.0)), np.kaiser(7, 100.0), rtol=1e-5,
                               atol=1e-30)
    x = np.array([1.0, 2.0, 3.0])
    _eq(jnp.piecewise(x, [True, False, True], [lambda v: v * 10]),
        np.piecewise(x, [True, False, True], [lambda v: v * 10]))
    jnp.save(str(tmp_path / "b"), jnp.ones(3, jnp.bfloat16))
    back = jnp.load(str(tmp_path / "b.npy"))
    assert back.dtype == jnp.bfloat16 and np.asarray(back, np.float32).tolist() == [1.0, 1.0, 1.0]
    with pytest.raises(ValueError, match="removes more than the 8 bits"):
        jnp.unpackbits(np.array([3], np.uint8), count=-100)
