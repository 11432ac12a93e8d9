"""nova.numpy's ufunc objects (add, multiply, maximum, ...): calls, outer, reduce, accumulate,
at and reduceat against NumPy's, eagerly and under jit, and their errors."""

import numpy as np
import pytest

import nova
import nova.numpy as jnp

RNG = np.random.default_rng(0)
A = RNG.standard_normal((3, 4)).astype(np.float32)
I = RNG.integers(-5, 20, (3, 4)).astype(np.int32)

ASSOC = ["add", "multiply", "maximum", "minimum", "fmax", "fmin"]
# (not arctan2: NumPy 2.4's arctan2.reduce is not the left fold its documentation defines,
# arctan2.reduce([1, 2, 3]) == arctan2(1, 3); Nova folds)
ALL_FLOAT = ASSOC + ["subtract", "divide", "hypot", "logaddexp"]


def test_ufunc_objects_call_like_functions():
    assert isinstance(jnp.add, jnp.ufunc) and repr(jnp.add) == "<nova.numpy.ufunc 'add'>"
    assert jnp.add.nin == 2 and jnp.add.nout == 1 and jnp.add.identity == 0
    assert jnp.multiply.identity == 1 and jnp.maximum.identity is None
    np.testing.assert_allclose(np.asarray(jnp.add(A, 1.0)), A + 1)
    np.testing.assert_allclose(np.asarray(A + jnp.asarray(A)), 2 * A)  # operators unchanged


@pytest.mark.parametrize("name", ALL_FLOAT)
def test_outer_reduce_accumulate_match_numpy(name):
    u, ref = getattr(jnp, name), getattr(np, name)
    np.testing.assert_allclose(np.asarray(u.outer(A[0], A[1])), ref.outer(A[0], A[1]),
                               rtol=2e-6, atol=1e-6)
    for axis in (0, 1, -1):
        np.testing.assert_allclose(np.asarray(u.reduce(A, axis=axis)), ref.reduce(A, axis=axis),
                                   rtol=2e-5, atol=1e-6)
        np.testing.assert_allclose(np.asarray(u.accumulate(A, axis=axis)),
                                   ref.accumulate(A, axis=axis), rtol=2e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(u.reduce(A, axis=1, keepdims=True)),
                               ref.reduce(A, axis=1, keepdims=True), rtol=2e-5, atol=1e-6)


def test_reduce_options():
    np.testing.assert_allclose(float(jnp.add.reduce(A, axis=None)), np.add.reduce(A, axis=None),
                               rtol=1e-5)
    np.testing.assert_allclose(np.asarray(jnp.add.reduce(A, axis=(0, 1), keepdims=True)),
                               np.add.reduce(A, axis=(0, 1), keepdims=True), rtol=1e-5)
    np.testing.assert_allclose(np.asarray(jnp.add.reduce(A, axis=0, initial=10.0)),
                               np.add.reduce(A, axis=0, initial=10.0), rtol=1e-5)
    np.testing.assert_allclose(np.asarray(jnp.maximum.reduce(A, axis=1, initial=0.5)),
                               np.maximum.reduce(A, axis=1, initial=0.5))
    w = A > 0
    np.testing.assert_allclose(np.asarray(jnp.add.reduce(A, axis=1, where=w)),
                               np.add.reduce(A, axis=1, where=w), rtol=1e-5)
    np.testing.assert_allclose(np.asarray(jnp.maximum.reduce(A, axis=1, where=w, initial=-9.0)),
                               np.maximum.reduce(A, axis=1, where=w, initial=-9.0))
    e = np.zeros((0, 3), np.float32)
    np.testing.assert_array_equal(np.asarray(jnp.add.reduce(e)), np.add.reduce(e))
    np.testing.assert_array_equal(np.asarray(jnp.minimum.reduce(e, initial=2.0)),
                                  np.minimum.reduce(e, initial=2.0))
    np.testing.assert_array_equal(np.asarray(jnp.add.reduce(A, dtype=np.int32, axis=0)),
                                  np.add.reduce(A.astype(np.int32), axis=0))
    # subtract is not associative: a0 - a1 - a2 ..., one axis at a time
    np.testing.assert_allclose(float(jnp.subtract.reduce(np.array([10.0, 1.0, 2.0]))), 7.0)
    np.testing.assert_allclose(float(jnp.power.reduce(np.array([2.0, 3.0, 2.0]))), 64.0)


def test_integer_and_logical_ufuncs():
    for name in ("bitwise_and", "bitwise_or", "bitwise_xor", "add", "maximum"):
        u, ref = getattr(jnp, name), getattr(np, name)
        np.testing.assert_array_equal(np.asarray(u.reduce(I, axis=1)), ref.reduce(I, axis=1))
        np.testing.assert_array_equal(np.asarray(u.accumulate(I, axis=0)),
                                      ref.accumulate(I, axis=0))
    b = I > 5
    for name in ("logical_and", "logical_or", "logical_xor"):
        u, ref = getattr(jnp, name), getattr(np, name)
        np.testing.assert_array_equal(np.asarray(u.reduce(b, axis=1)), ref.reduce(b, axis=1))
        np.testing.assert_array_equal(np.asarray(u.accumulate(b, axis=1)),
                                      ref.accumulate(b, axis=1))


@pytest.mark.parametrize("name", ["add", "subtract", "multiply", "maximum", "minimum"])
def test_at_matches_numpy(name):
    idx = np.array([0, 1, 1, 3, 0])
    vals = RNG.standard_normal(5).astype(np.float32)
    want = A[0].copy()
    getattr(np, name).at(want, idx, vals)
    got = getattr(jnp, name).at(A[0], idx, vals, inplace=False)
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-6)


@pytest.mark.parametrize("name", ["add", "multiply", "maximum", "minimum"])
def test_reduceat_matches_numpy(name):
    x = RNG.standard_normal((8, 3)).astype(np.float32)
    for idx in ([0, 4, 1, 5], [0, 3, 6], [2], [5, 5, 7], [7, 0]):
        want = getattr(np, name).reduceat(x, idx, axis=0)
        got = getattr(jnp, name).reduceat(x, np.array(idx), axis=0)
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-6, err_msg=str(idx))
    np.testing.assert_allclose(np.asarray(getattr(jnp, name).reduceat(x, np.array([0, 1]),
                                                                       axis=1)),
                               getattr(np, name).reduceat(x, [0, 1], axis=1), rtol=1e-5)


def test_methods_under_jit_and_grad():
    f = nova.jit(lambda a: (jnp.add.reduce(a, axis=1), jnp.maximum.accumulate(a, axis=1),
                            jnp.subtract.reduce(a, axis=0), jnp.multiply.outer(a[0], a[1])))
    got = f(A)
    want = (np.add.reduce(A, axis=1), np.maximum.accumulate(A, axis=1),
            np.subtract.reduce(A, axis=0), np.multiply.outer(A[0], A[1]))
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(np.asarray(g), w, rtol=2e-6, atol=1e-6)
    g = nova.grad(lambda a: jnp.subtract.reduce(a, axis=1).sum())(A)
    np.testing.assert_allclose(np.asarray(g), np.tile([1.0, -1.0, -1.0, -1.0], (3, 1)))


def test_errors():
    with pytest.raises(ValueError, match="inplace=False"):
        jnp.add.at(A[0], np.array([0]), 1.0)
    with pytest.raises(ValueError, match="b is required"):
        jnp.add.at(A[0], np.array([0]), inplace=False)
    with pytest.raises(NotImplementedError, match="divide.at"):
        jnp.divide.at(A[0], np.array([0]), 2.0, inplace=False)
    with pytest.raises(NotImplementedError, match="subtract.reduceat"):
        jnp.subtract.reduceat(A[0], np.array([0]))
    with pytest.raises(ValueError, match="out="):
        jnp.add.reduce(A, out=np.zeros(4))
    with pytest.raises(TypeError, match="not associative"):
        jnp.subtract.reduce(A, axis=(0, 1))
    with pytest.raises(ValueError, match="empty axis"):
        jnp.maximum.reduce(np.zeros(0, np.float32))
    with pytest.raises(nova.ShapeError, match="out of bounds"):
        jnp.add.accumulate(A, axis=2)
    with pytest.raises(TypeError, match="1-d integer"):
        jnp.add.reduceat(A, np.array([0.5]))
