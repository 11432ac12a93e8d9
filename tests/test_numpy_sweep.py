"""nova.numpy against NumPy: function x shape (0-d, size-0, broadcasting, non-contiguous) x dtype."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import nova
import nova.numpy as jnp
from tests.helpers import assert_close

SHAPES = [(), (0,), (5,), (3, 4), (2, 0, 3), (2, 3, 4)]
FLOATS = [np.float32, np.float64]
ALL = [np.float32, np.float64, np.int32, np.int64, np.uint8, np.bool_]


def _data(rng, shape, dtype, lo=-3, hi=3, noncontig=False):
    if noncontig and len(shape) >= 2:
        big = _data(rng, shape[:-1] + (shape[-1] * 2,), dtype, lo, hi)
        return big[..., ::2]
    if dtype == np.bool_:
        return rng.random(shape) > 0.5
    if np.issubdtype(dtype, np.integer):
        lo = 0 if np.issubdtype(dtype, np.unsignedinteger) else lo
        return rng.integers(lo, hi, shape).astype(dtype)
    return rng.uniform(lo, hi, shape).astype(dtype)


UNARY_FLOAT = {
    "exp": (np.exp, -3, 3), "exp2": (np.exp2, -3, 3), "expm1": (np.expm1, -3, 3),
    "log": (np.log, 0.1, 5), "log2": (np.log2, 0.1, 5), "log1p": (np.log1p, 0, 5),
    "tanh": (np.tanh, -3, 3), "sinh": (np.sinh, -3, 3), "cosh": (np.cosh, -3, 3),
    "sin": (np.sin, -3, 3), "cos": (np.cos, -3, 3), "tan": (np.tan, -1.2, 1.2),
    "arctan": (np.arctan, -3, 3), "sqrt": (np.sqrt, 0, 5), "reciprocal": (np.reciprocal, 0.5, 3),
    "square": (np.square, -3, 3), "negative": (np.negative, -3, 3), "abs": (np.abs, -3, 3),
    "sign": (np.sign, -3, 3), "floor": (np.floor, -3, 3), "ceil": (np.ceil, -3, 3),
    "round": (np.round, -3, 3), "positive": (np.positive, -3, 3),
}


@pytest.mark.parametrize("name", sorted(UNARY_FLOAT))
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("noncontig", [False, True])
def test_unary_float(name, shape, dtype, noncontig):
    ref, lo, hi = UNARY_FLOAT[name]
    x = _data(np.random.default_rng(0), shape, dtype, lo, hi, noncontig)
    got = getattr(jnp, name)(x)
    assert got.dtype == dtype
    assert_close(got, ref(x).astype(dtype))


@pytest.mark.parametrize("name", ["exp", "sqrt", "sin", "log1p"])
@pytest.mark.parametrize("dtype", [np.int32, np.uint8, np.bool_])
def test_unary_float_of_integers_gives_float32(name, dtype):
    x = _data(np.random.default_rng(1), (3, 4), dtype, 0, 4)
    got = getattr(jnp, name)(x)
    assert got.dtype == np.float32
    assert_close(got, UNARY_FLOAT[name][0](x.astype(np.float64)).astype(np.float32))


BINARY = {
    "add": np.add, "subtract": np.subtract, "multiply": np.multiply, "maximum": np.maximum,
    "minimum": np.minimum, "equal": np.equal, "not_equal": np.not_equal, "less": np.less,
    "less_equal": np.less_equal, "greater": np.greater, "greater_equal": np.greater_equal,
}
BCAST = [((3, 4), (3, 4)), ((3, 4), (4,)), ((3, 1), (1, 4)), ((), (2, 3)), ((0, 3), (1, 3)),
         ((2, 1, 4), (3, 1))]


@pytest.mark.parametrize("name", sorted(BINARY))
@pytest.mark.parametrize("shapes", BCAST)
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64, np.uint8])
def test_binary(name, shapes, dtype):
    rng = np.random.default_rng(2)
    a, b = (_data(rng, s, dtype) for s in shapes)
    got = getattr(jnp, name)(a, b)
    want = BINARY[name](a, b)
    assert got.shape == want.shape
    assert_close(got, want)


@pytest.mark.parametrize("name,ref", [("true_divide", np.true_divide), ("arctan2", np.arctan2),
                                      ("power", np.power), ("floor_divide", np.floor_divide),
                                      ("mod", np.mod)])
@pytest.mark.parametrize("shapes", BCAST[:4])
def test_binary_float_ops(name, ref, shapes):
    rng = np.random.default_rng(3)
    a = _data(rng, shapes[0], np.float64, 0.5, 3)
    b = _data(rng, shapes[1], np.float64, 0.5, 3) * np.where(rng.random(shapes[1]) > 0.5, 1, -1)
    if name == "power":
        b = np.abs(b)
    assert_close(getattr(jnp, name)(a, b), ref(a, b))


@pytest.mark.parametrize("name,ref", [("floor_divide", np.floor_divide), ("mod", np.mod),
                                      ("power", np.power)])
def test_integer_division_and_power_match_numpy(name, ref):
    a = np.array([-7, -3, 0, 3, 7, 9], np.int32)
    b = np.array([2, -2, 3, -4, 3, 2], np.int32)
    if name == "power":
        b = np.abs(b)
    got = getattr(jnp, name)(a, b)
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, ref(a, b))


@pytest.mark.parametrize("name,ref", [("logical_and", np.logical_and), ("logical_or", np.logical_or),
                                      ("logical_xor", np.logical_xor)])
@pytest.mark.parametrize("dtype", [np.bool_, np.int32, np.float32])
def test_logical(name, ref, dtype):
    rng = np.random.default_rng(4)
    a, b = _data(rng, (3, 4), dtype, 0, 2), _data(rng, (4,), dtype, 0, 2)
    np.testing.assert_array_equal(getattr(jnp, name)(a, b), ref(a, b))
    np.testing.assert_array_equal(jnp.logical_not(a), np.logical_not(a))


def test_nan_inf_predicates():
    x = np.array([0.0, np.nan, np.inf, -np.inf, 1.0], np.float32)
    np.testing.assert_array_equal(jnp.isnan(x), np.isnan(x))
    np.testing.assert_array_equal(jnp.isinf(x), np.isinf(x))
    np.testing.assert_array_equal(jnp.isfinite(x), np.isfinite(x))
    np.testing.assert_array_equal(jnp.isfinite(np.arange(3)), [True] * 3)


def test_where_and_clip():
    rng = np.random.default_rng(5)
    c = rng.random((3, 1)) > 0.5
    x, y = rng.standard_normal((3, 4)), rng.standard_normal(4)
    assert_close(jnp.where(c, x, y), np.where(c, x, y))
    assert_close(jnp.where(c, x, 0.0), np.where(c, x, 0.0))
    assert_close(jnp.clip(x, -0.5, 0.5), np.clip(x, -0.5, 0.5))
    assert_close(jnp.clip(x, None, 0.1), np.clip(x, None, 0.1))


@pytest.mark.parametrize("fn", ["sum", "mean", "max", "min", "var", "std", "any", "all"])
@pytest.mark.parametrize("shape,axis", [((), None), ((5,), 0), ((3, 4), None), ((3, 4), -1),
                                        ((2, 3, 4), (0, 2)), ((2, 3, 4), 1), ((0, 3), 1),
                                        ((2, 0, 3), (0, 2))])
@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.bool_])
def test_reductions(fn, shape, axis, keepdims, dtype):
    x = _data(np.random.default_rng(6), shape, dtype, noncontig=True)
    ref = getattr(np, fn)
    if dtype == np.bool_ and fn in ("var", "std"):
        ref = lambda v, **k: getattr(np, fn)(v.astype(np.float32), **k)  # noqa: E731
    axes = tuple(range(len(shape))) if axis is None else axis
    axes = (axes,) if isinstance(axes, int) else axes
    empty = any(shape[a] == 0 for a in axes) if shape else False
    if fn in ("max", "min") and empty:
        with pytest.raises(ValueError, match="zero-size array"):
            getattr(jnp, fn)(x, axis=axis, keepdims=keepdims)
        return
    with np.errstate(all="ignore"):
        want = ref(x, axis=axis, keepdims=keepdims)
    got = getattr(jnp, fn)(x, axis=axis, keepdims=keepdims)
    assert got.shape == np.shape(want)
    if fn in ("mean", "var", "std"):
        assert_close(got, np.asarray(want, np.float32), rtol=1e-5, atol=1e-6)
    else:
        assert_close(got, np.asarray(want).astype(got.dtype), rtol=1e-5, atol=1e-5)


def test_sum_dtypes_follow_jax():
    assert jnp.sum(np.ones(3, np.bool_)).dtype == np.int32
    assert jnp.sum(np.ones(3, np.uint8)).dtype == np.uint32  # as jnp: unsigned stays unsigned
    assert jnp.mean(np.ones(3, np.int32)).dtype == np.float32
    assert jnp.sum(np.ones(3, np.float64)).dtype == np.float64
    assert jnp.sum(np.ones(3, np.float32), dtype=np.float64).dtype == np.float64


@pytest.mark.parametrize("a,b", [((3,), (3,)), ((2, 3), (3,)), ((3,), (3, 4)), ((2, 3), (3, 4)),
                                 ((5, 2, 3), (3, 4)), ((5, 2, 3), (5, 3, 4)), ((1, 2, 3), (4, 3, 2)),
                                 ((0, 3), (3, 2))])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32])
def test_matmul(a, b, dtype):
    rng = np.random.default_rng(7)
    x, y = _data(rng, a, dtype), _data(rng, b, dtype)
    got = jnp.matmul(x, y)
    assert_close(got, np.matmul(x, y), rtol=1e-5, atol=1e-5)
    assert_close(jnp.asarray(x) @ y, np.matmul(x, y), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("a,b", [((3,), (3,)), ((2, 3), (3, 4)), ((2, 3, 4), (4, 5)),
                                 ((2, 3, 4), (5, 4, 2)), ((), (3,))])
def test_dot(a, b):
    rng = np.random.default_rng(8)
    x, y = rng.standard_normal(a), rng.standard_normal(b)
    assert_close(jnp.dot(x, y), np.dot(x, y))


@pytest.mark.parametrize("case", [
    ("reshape", ((2, 3, 4),), {"shape": (4, -1)}),
    ("reshape", ((6,),), {"shape": (1, 6, 1)}),
    ("ravel", ((2, 3),), {}),
    ("transpose", ((2, 3, 4),), {}),
    ("transpose", ((2, 3, 4),), {"axes": (1, 0, 2)}),
    ("swapaxes", ((2, 3, 4),), {"axis1": 0, "axis2": -1}),
    ("moveaxis", ((2, 3, 4),), {"source": 0, "destination": -1}),
    ("moveaxis", ((2, 3, 4, 5),), {"source": (0, 1), "destination": (3, 0)}),
    ("expand_dims", ((2, 3),), {"axis": (0, 3)}),
    ("squeeze", ((1, 3, 1),), {}),
    ("squeeze", ((1, 3, 1),), {"axis": -1}),
    ("broadcast_to", ((3, 1),), {"shape": (2, 3, 4)}),
    ("atleast_2d", ((3,),), {}),
])
def test_shape_functions(case):
    name, shapes, kw = case
    rng = np.random.default_rng(9)
    x = rng.standard_normal(shapes[0]).astype(np.float32)
    assert_close(getattr(jnp, name)(x, **kw), getattr(np, name)(x, **kw))


def test_creation_functions():
    assert jnp.zeros((2, 3)).dtype == np.float32
    np.testing.assert_array_equal(jnp.ones((2, 3), jnp.int32), np.ones((2, 3), np.int32))
    np.testing.assert_array_equal(jnp.full((2,), 7), [7, 7])
    assert jnp.full((2,), 7).dtype == np.int32
    assert jnp.full((2,), 7.0).dtype == np.float32
    x = jnp.asarray(np.arange(6.0).reshape(2, 3))
    assert x.dtype == np.float64
    assert jnp.zeros_like(x).dtype == np.float64
    np.testing.assert_array_equal(jnp.full_like(x, 2, dtype=jnp.int32), np.full((2, 3), 2))
    np.testing.assert_array_equal(jnp.empty((0, 3)), np.empty((0, 3)))
    assert jnp.array([1, 2]).dtype == np.int32
    assert jnp.array([1.0, 2]).dtype == np.float32
    assert jnp.array(True).dtype == np.bool_
    assert jnp.array([1, 2], dtype=jnp.bfloat16).dtype == jnp.bfloat16


PROMOTIONS = [
    (np.int32, 1.0, np.float32), (np.float16, 2, np.float16), (np.uint8, np.int32, np.int32),
    (np.float16, jnp.bfloat16, np.float32), (np.bool_, np.bool_, np.bool_),
    (np.int64, np.float32, np.float32), (np.uint8, 3, np.uint8), (np.bool_, 1, np.int32),
    (np.bool_, 1.5, np.float32), (np.float64, 1.0, np.float64), (np.int32, np.int64, np.int64),
]


@pytest.mark.parametrize("a,b,want", PROMOTIONS)
def test_promotion_table_is_jax_lattice(a, b, want):
    x = jnp.zeros(2, a)
    y = b if isinstance(b, int | float) else jnp.zeros(2, b)
    assert (x + y).dtype == np.dtype(want)
    assert jnp.result_type(x, y) == np.dtype(want)


def test_array_basics():
    x = jnp.asarray(np.arange(6, dtype=np.float32).reshape(2, 3))
    assert (x.shape, x.ndim, x.size, x.dtype) == ((2, 3), 2, 6, np.float32)
    assert "Array(" in repr(x) and "dtype=float32" in repr(x)
    assert_close(np.asarray(x.T), np.arange(6).reshape(2, 3).T)
    assert_close(x.astype(jnp.int32), np.arange(6).reshape(2, 3))
    assert_close(-x + 2 * x - x / 2 ** 1, np.arange(6).reshape(2, 3) / 2)
    assert_close(3 - x, 3 - np.arange(6).reshape(2, 3))
    assert_close((x > 2) & (x < 5), (np.arange(6) > 2).reshape(2, 3) & (np.arange(6) < 5).reshape(2, 3))
    assert len(x) == 2 and float(x.sum()) == 15.0 and x.sum(axis=0).shape == (3,)
    assert x.reshape(3, 2).shape == (3, 2) and x.reshape((6,)).shape == (6,)
    assert x.mean().item() == 2.5


@given(hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=4, max_side=4))
def test_hypothesis_broadcasting(shapes):
    rng = np.random.default_rng(10)
    a, b = (rng.standard_normal(s).astype(np.float32) for s in shapes.input_shapes)
    got = jnp.add(a, b) * jnp.maximum(a, b)
    assert got.shape == shapes.result_shape
    assert_close(got, (a + b) * np.maximum(a, b))


@given(st.data())
def test_hypothesis_reduction_axes(data):
    shape = data.draw(hnp.array_shapes(min_dims=1, max_dims=4, min_side=1, max_side=4))
    axes = data.draw(st.lists(st.integers(-len(shape), len(shape) - 1), unique_by=lambda a: a % len(shape), max_size=len(shape)))
    keepdims = data.draw(st.booleans())
    x = np.random.default_rng(11).standard_normal(shape)
    ax = tuple(axes)
    assert_close(jnp.sum(x, axis=ax, keepdims=keepdims), np.sum(x, axis=ax, keepdims=keepdims))
    assert_close(jnp.max(x, axis=ax, keepdims=keepdims), np.max(x, axis=ax, keepdims=keepdims))
    assert_close(jnp.mean(x, axis=ax, keepdims=keepdims), np.mean(x, axis=ax, keepdims=keepdims))


@given(hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=3, max_side=3))
def test_hypothesis_broadcast_gradients(shapes):
    """The gradient of a broadcast op has each operand's shape (sum over broadcast dims)."""
    rng = np.random.default_rng(12)
    a, b = (rng.standard_normal(s) for s in shapes.input_shapes)
    ga, gb = nova.grad(lambda a, b: jnp.sum(a * b), argnums=(0, 1))(a, b)
    full = np.broadcast_shapes(a.shape, b.shape)

    def unbroadcast(g, shape):
        g = g.sum(axis=tuple(range(g.ndim - len(shape))))
        return g.sum(axis=tuple(i for i, d in enumerate(shape) if d == 1), keepdims=True)

    assert ga.shape == a.shape and gb.shape == b.shape
    assert_close(ga, unbroadcast(np.broadcast_to(b, full), a.shape).reshape(a.shape))
    assert_close(gb, unbroadcast(np.broadcast_to(a, full), b.shape).reshape(b.shape))


@pytest.mark.parametrize("k", [0, 1, -2, 5])
def test_diag_diagonal_trace(k):
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    v = np.array([1.0, 2.0, 3.0], np.float32)
    np.testing.assert_array_equal(jnp.diag(x, k), np.diag(x, k))
    np.testing.assert_array_equal(jnp.diag(v, k), np.diag(v, k))
    assert_close(jnp.trace(x, k), np.trace(x, k))
    y = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    np.testing.assert_array_equal(jnp.diagonal(y, k, 1, 2), np.diagonal(y, k, 1, 2))
    g = nova.grad(lambda x: jnp.trace(x * x))(x)
    assert_close(g, 2 * x * np.eye(3, 4))


@pytest.mark.parametrize("indexing", ["xy", "ij"])
@pytest.mark.parametrize("sparse", [False, True])
def test_meshgrid(indexing, sparse):
    a, b, c = np.arange(3.0), np.arange(2.0), np.arange(4.0)
    for got, want in zip(jnp.meshgrid(a, b, c, indexing=indexing, sparse=sparse),
                         np.meshgrid(a, b, c, indexing=indexing, sparse=sparse), strict=True):
        np.testing.assert_array_equal(got, want)


def test_nan_to_num_and_shifts():
    z = np.array([np.nan, np.inf, -np.inf, 1.5], np.float32)
    np.testing.assert_array_equal(jnp.nan_to_num(z), np.nan_to_num(z))
    np.testing.assert_array_equal(jnp.nan_to_num(z, nan=1, posinf=2, neginf=3),
                                  np.nan_to_num(z, nan=1, posinf=2, neginf=3))
    i = np.array([-8, 5, 1, 7, -1], np.int32)
    s = np.array([1, 2, 3, 31, 4], np.int32)
    np.testing.assert_array_equal(jnp.left_shift(i, s), np.left_shift(i, s))
    np.testing.assert_array_equal(jnp.right_shift(i, s), np.right_shift(i, s))
    np.testing.assert_array_equal(jnp.asarray(i) << 2, i << 2)
    u = np.array([200, 3, 255], np.uint8)
    np.testing.assert_array_equal(jnp.asarray(u) >> 3, u >> 3)
    with pytest.raises(TypeError, match="integer"):
        jnp.left_shift(np.ones(2, np.float32), 1)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
def test_eager_python_scalar_operands_keep_the_float_arrays_dtype(dtype):
    """Eager `x op scalar` and `scalar op x` fill the scalar to the array's shape and dtype
    (the fast path of weak typing), with JAX's results and dtypes in either order."""
    import jax
    import jax.numpy as jjnp

    with jax.enable_x64(True):
        _check_scalar_operands(dtype, jjnp)


def _check_scalar_operands(dtype, jjnp):
    x_np = np.array([[0.5, -1.25, 3.0]], np.float32).astype(jnp.dtype(dtype))
    x = jnp.asarray(x_np)
    jx = jjnp.asarray(x_np)
    cases = [lambda a: a + 1.0, lambda a: 1.0 - a, lambda a: 2 * a, lambda a: a / 4,
             lambda a: 3 ** a, lambda a: a ** 2, lambda a: jnp.maximum(a, 0.75) if a is x
             else jjnp.maximum(a, 0.75)]
    for f in cases:
        got, want = f(x), f(jx)
        assert got.dtype == want.dtype, (dtype, got.dtype, want.dtype)
        np.testing.assert_allclose(np.asarray(got, np.float64), np.asarray(want, np.float64),
                                   rtol=1e-2 if dtype in ("float16", "bfloat16") else 1e-6)
    i = jnp.asarray(np.array([1, 2], np.int32))  # integer arrays keep the general rule
    assert (i + 1.0).dtype == np.float32  # the default float, as JAX without x64
    y = x + 1.0
    np.asarray(y)[...] = 0  # the filled operand is its own buffer: x is unchanged
    np.testing.assert_array_equal(np.asarray(x), x_np)
