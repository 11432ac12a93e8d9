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
    with pytest.raises(ValueError, match="out="):
        jnp.add.reduce(A, out=np.zeros(4))
    with pytest.raises(ValueError, match="not associative"):  # NumPy: ValueError
        jnp.subtract.reduce(A, axis=(0, 1))
    with pytest.raises(ValueError, match="empty axis"):
        jnp.maximum.reduce(np.zeros(0, np.float32))
    with pytest.raises(nova.ShapeError, match="out of bounds"):
        jnp.add.accumulate(A, axis=2)
    with pytest.raises(TypeError, match="1-d integer"):
        jnp.add.reduceat(A, np.array([0.5]))


# --- regressions (review of the ufunc objects) ---------------------------------------------------
B = np.arange(1.0, 7.0, dtype=np.float32).reshape(2, 3)
MASKS = [np.array([True, True, True]), np.array([True, False, False]), np.zeros(3, bool)]


def test_reduce_where_and_initial_apply_initial_once():
    # masked entries are the identity and initial is combined once, for any number masked
    for name, init in (("add", 10.0), ("multiply", 2.0), ("maximum", 2.5), ("logaddexp", 1.0)):
        u, ref = getattr(jnp, name), getattr(np, name)
        for w in MASKS:
            want = ref.reduce(B, axis=1, where=w, initial=init)
            np.testing.assert_allclose(np.asarray(u.reduce(B, axis=1, where=w, initial=init)),
                                       want, rtol=1e-6, err_msg=f"{name} {w}")
    f = nova.jit(lambda a, w: jnp.add.reduce(a, axis=1, where=w, initial=10.0))
    np.testing.assert_allclose(np.asarray(f(B, MASKS[1])), [11.0, 14.0])
    # where= broadcasts and must be boolean
    np.testing.assert_allclose(np.asarray(jnp.add.reduce(B, axis=0, where=MASKS[1], initial=1.0)),
                               np.add.reduce(B, axis=0, where=MASKS[1], initial=1.0))
    with pytest.raises(TypeError, match="where must be a boolean"):
        jnp.add.reduce(B, axis=1, where=np.array([1, 0, 1]))


def test_reduce_initial_starts_the_left_fold():
    # ((initial op a0) op a1) op a2 for the non-associative ufuncs, as NumPy and jnp
    for name, init in (("subtract", 10.0), ("divide", 1.0), ("power", 2.0)):
        u, ref = getattr(jnp, name), getattr(np, name)
        want = np.full(B.shape[0], init)
        for k in range(B.shape[1]):  # written out: NumPy 2.4's power.reduce skips the middle
            want = ref(want, B[:, k] / 4)
        np.testing.assert_allclose(np.asarray(u.reduce(B / 4, axis=1, initial=init)), want,
                                   rtol=1e-6)
    w = np.array([True, False, True])
    want = np.subtract.reduce(B, axis=1, where=w, initial=0.0)
    np.testing.assert_allclose(want, [-4.0, -10.0])
    got = nova.jit(lambda a: jnp.subtract.reduce(a, axis=1, where=w, initial=0.0))(B)
    np.testing.assert_allclose(np.asarray(got), want)
    np.testing.assert_allclose(np.asarray(jnp.subtract.reduce(B, axis=0, initial=1.0)),
                               np.asarray(jax_np().subtract.reduce(B, axis=0, initial=1.0)))
    g = nova.grad(lambda a: jnp.subtract.reduce(a, axis=1, where=w, initial=3.0).sum())(B)
    np.testing.assert_allclose(np.asarray(g), np.tile([-1.0, 0.0, -1.0], (2, 1)))
    with pytest.raises(ValueError, match="needs an identity or an initial"):
        jnp.subtract.reduce(B, axis=1, where=w)


def jax_np():
    import jax.numpy

    return jax.numpy


def test_reduceat_out_of_range_indices():
    a = np.arange(8, dtype=np.float32)
    for idx in ([0, -3], [0, 8], [0, 2, 9]):
        with pytest.raises(IndexError):
            np.add.reduceat(a, idx)
        with pytest.raises(IndexError, match=f"index {idx[-1]} is out of bounds \\[0, 8\\)"):
            jnp.add.reduceat(a, np.array(idx))
    with pytest.raises(IndexError, match="empty"):
        jnp.add.reduceat(np.zeros(0, np.float32), np.array([0]))
    # constant indices under jit are still checked; traced ones are clipped into [0, len - 1]
    with pytest.raises(IndexError, match="out of bounds"):
        nova.jit(lambda x: jnp.add.reduceat(x, np.array([0, 8])))(a)
    f = nova.jit(lambda x, i: jnp.maximum.reduceat(x, i))
    np.testing.assert_array_equal(np.asarray(f(a, np.array([-3, 2, 9]))),
                                  np.maximum.reduceat(a, [0, 2, 7]))


def test_unsigned_and_bool_identities():
    # bitwise_and's identity -1 is the all-ones value of an unsigned dtype (True for bool)
    u8 = np.array([[7, 3, 5], [255, 6, 12]], np.uint8)
    for x in (u8, u8.astype(np.uint16), u8 > 4):
        np.testing.assert_array_equal(np.asarray(jnp.bitwise_and.reduce(x, axis=1)),
                                      np.bitwise_and.reduce(x, axis=1))
    got = jnp.bitwise_and.reduceat(u8, np.array([0, 2]), axis=1)
    np.testing.assert_array_equal(np.asarray(got), np.bitwise_and.reduceat(u8, [0, 2], axis=1))
    np.testing.assert_array_equal(np.asarray(jnp.bitwise_and.reduce(np.zeros(0, np.uint8))),
                                  np.bitwise_and.reduce(np.zeros(0, np.uint8)))
    w = np.array([True, False, True])
    np.testing.assert_array_equal(np.asarray(jnp.bitwise_and.reduce(u8, axis=1, where=w)),
                                  np.bitwise_and.reduce(u8, axis=1, where=w))
    # maximum/minimum.reduceat need no dtype sentinel (bool has no iinfo)
    for x in (np.array([True, False, False, True, True]), np.array([3, 250, 0, 7, 1], np.uint8)):
        for name in ("maximum", "minimum"):
            got = getattr(jnp, name).reduceat(x, np.array([0, 1, 3]))
            np.testing.assert_array_equal(np.asarray(got),
                                          getattr(np, name).reduceat(x, [0, 1, 3]))


def test_fmax_fmin_reduceat_all_nan_slice_is_nan():
    x = np.array([np.nan, 1.0, np.nan, np.nan, -2.0], np.float32)
    for name in ("fmax", "fmin"):
        want = getattr(np, name).reduceat(x, [0, 2, 4])
        got = getattr(jnp, name).reduceat(x, np.array([0, 2, 4]))
        np.testing.assert_array_equal(np.asarray(got), want)
        got = nova.jit(getattr(jnp, name).reduceat)(x, np.array([0, 2, 4]))
        np.testing.assert_array_equal(np.asarray(got), want)


def test_logaddexp_identity_is_minus_inf():
    assert jnp.logaddexp.identity == np.logaddexp.identity == -np.inf
    assert jnp.logaddexp2.identity == np.logaddexp2.identity == -np.inf
    e = np.zeros((0,), np.float32)
    assert float(jnp.logaddexp.reduce(e)) == float(np.logaddexp.reduce(e)) == -np.inf
    np.testing.assert_allclose(np.asarray(jnp.logaddexp.reduce(B, axis=1, where=MASKS[1])),
                               np.logaddexp.reduce(B, axis=1, where=MASKS[1]), rtol=1e-6)


def test_add_multiply_accumulate_keep_integer_dtype():
    jx = jax_np()
    # jnp.add/multiply.accumulate keep an integer dtype (jnp.cumsum's rule; bool becomes int32)
    for x in (np.array([100, 100, 3], np.int8), np.array([200, 100, 3], np.uint8),
              np.array([True, True, False])):
        for name in ("add", "multiply"):
            got, want = getattr(jnp, name).accumulate(x), getattr(jx, name).accumulate(x)
            assert got.dtype == want.dtype, (name, x.dtype)
            np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    assert jnp.add.accumulate(np.zeros(0, bool)).dtype == jx.add.accumulate(np.zeros(0, bool)).dtype
    got = jnp.add.accumulate(np.array([True, False]), dtype=np.bool_)
    assert got.dtype == np.bool_ and np.asarray(got).tolist() == [True, True]


def test_non_reorderable_reduce_takes_one_axis():
    # NumPy: a non-reorderable ufunc reduces one axis at most, axis=None of a 2-d array included
    with pytest.raises(ValueError, match="not reorderable"):
        np.subtract.reduce(np.ones((2, 2)), axis=None)
    with pytest.raises(ValueError, match="at most one axis"):
        jnp.subtract.reduce(np.ones((1, 2), np.float32), axis=None)
    assert float(jnp.subtract.reduce(B[0], axis=None)) == np.subtract.reduce(B[0], axis=None)
    with pytest.raises(ValueError, match="duplicate"):
        jnp.add.reduce(B, axis=(1, -1))
    np.testing.assert_allclose(np.asarray(jnp.subtract.reduce(B, axis=(), initial=10.0)),
                               np.subtract.reduce(B, axis=(), initial=10.0))
