"""nova.numpy indexing against NumPy: x[idx], take, take_along_axis and x.at[idx] updates, with
gradients, jit with traced indices, and the errors (IndexError, ShapeError, TypeError)."""

import jax
import jax.numpy as jjnp
import numpy as np
import pytest

import nova
import nova.numpy as jnp
from tests.helpers import assert_close, check_grads



@pytest.fixture(autouse=True)
def _jax_x64():
    """JAX in float64 for this module's references only (the flag is process-wide)."""
    with jax.enable_x64(True):
        yield

THIS_FILE = "test_indexing.py"


def _arr(shape, rng=None, contiguous=True):
    rng = rng or np.random.default_rng(0)
    if contiguous:
        return rng.standard_normal(shape)
    # A non-contiguous view: every other element of a larger array, transposed back.
    big = rng.standard_normal(tuple(reversed([2 * d for d in shape])))
    return big[tuple(slice(None, None, 2) for _ in shape)].T


# Index forms, keyed by the shape they apply to (each is checked against NumPy, including
# whether NumPy raises IndexError).
_S = slice
FORMS = {
    (): [(), Ellipsis, None, (None, Ellipsis), True, False],
    (0,): [_S(None), _S(1, 3), [], np.array([], int), (Ellipsis, None), np.zeros(0, bool)],
    (5,): [
        0,
        -1,
        4,
        -5,
        _S(None),
        _S(1, 4),
        _S(None, None, 2),
        _S(None, None, -1),
        _S(4, 0, -2),
        _S(-2, None),
        _S(10, 20),
        _S(3, 1),
        [0, 4, 4, -1],
        np.array([[1, 2], [3, 0]]),
        np.array([True, False, True, True, False]),
        (None, _S(None, 3)),
        (Ellipsis, 2),
        np.int64(3),
        np.array(2),
        True,
        (0, True),
        [True, False, True, True, True],
    ],
    (3, 4): [
        1,
        (1, 2),
        (-1, -1),
        (_S(None), 1),
        (Ellipsis, 0),
        (None, 0, None),
        (_S(None, None, -1), _S(1, None, 2)),
        ([0, 2], [1, 3]),
        ([[0], [2]], [1, 3]),
        (_S(None), [3, 0, 0]),
        ([2, 0], _S(1, 3)),
        (1, [0, 3]),
        ([1], 2),
        np.arange(12).reshape(3, 4) % 3 == 0,
        (np.array([True, False, True]), 1),
        (Ellipsis, None),
        (_S(0, 0), _S(None)),
        (None, Ellipsis, None),
    ],
    (2, 3, 4): [
        (0, _S(None), [0, 1]),
        ([0, 1], _S(None), [1, 3]),
        (_S(None), [0, 2], [1, 3]),
        (Ellipsis, [1, 2]),
        (1, Ellipsis, None, _S(1, 3)),
        ([[0], [1]], 0, [0, 2, 3]),
        (_S(None), np.array([[True, False, True, False]] * 3)),
        ([1, 0], None, [2, 1]),
        (_S(None, None, -1), [[0, 1]], _S(None, None, 3)),
        (0, [1], _S(None), None),
    ],
    (2, 0, 3): [(1, _S(None), 2), (_S(None), _S(None), [0, 2]), (Ellipsis, 0)],
}
FORM_CASES = [(shape, k) for shape in FORMS for k in range(len(FORMS[shape]))]


def _np_result(x, idx):
    try:
        return x[idx], None
    except IndexError as e:
        return None, e


@pytest.mark.parametrize("shape,k", FORM_CASES)
@pytest.mark.parametrize("contiguous", [True, False])
def test_getitem_matches_numpy(shape, k, contiguous):
    idx = FORMS[shape][k]
    x = _arr(shape, contiguous=contiguous)
    expected, err = _np_result(x, idx)
    if err is not None:
        with pytest.raises(IndexError):
            jnp.asarray(x)[idx]
        return
    assert_close(jnp.asarray(x)[idx], expected)


@pytest.mark.parametrize("shape,k", FORM_CASES)
def test_getitem_matches_numpy_in_jit_and_int32(shape, k):
    idx = FORMS[shape][k]
    x = np.arange(int(np.prod(shape)), dtype=np.int32).reshape(shape)
    expected, err = _np_result(x, idx)
    if err is not None:
        return
    got = nova.jit(lambda a: a[idx])(x)
    assert got.dtype == np.int32
    assert_close(got, expected)


def test_basic_indexing_uses_slice_and_rev_not_gather():
    text = nova.jit(lambda x: x[1:, ::-2, 0]).trace(np.zeros((4, 5, 3))).as_text()
    assert "nova.slice" in text and "nova.rev" in text and "nova.gather" not in text


# --- dynamic indices -----------------------------------------------------------------------------


@pytest.mark.parametrize("i", [0, 2, -1, -4])
def test_jit_traced_integer_index(i):
    x = _arr((4, 3))
    f = nova.jit(lambda x, i: x[i])
    text = f.trace(x, np.int32(i)).as_text()
    assert "nova.gather" in text
    assert_close(f(x, np.int32(i)), x[i])
    assert_close(nova.jit(lambda x, i: x[1:, i])(x, np.int32(i % 3)), x[1:, i % 3])
    assert_close(nova.jit(lambda x, i: x[i, ::-1])(x, np.int32(i)), x[i, ::-1])


def test_jit_traced_index_arrays_mixed_with_slices():
    x = _arr((3, 4, 5))
    i = np.array([[2, 0], [1, 1]], np.int32)
    j = np.array([4, -1], np.int64)
    f = nova.jit(lambda x, i, j: x[i, 1:3, j])
    assert_close(f(x, i, j), x[i, 1:3, j])
    assert_close(nova.jit(lambda x, i: x[:, i])(x, i), x[:, i])
    assert_close(nova.jit(lambda x, i: x[..., i, None])(x, i), x[..., i, None])


def test_dynamic_out_of_range_indices_clamp():
    """Documented: nova index arrays out of range are clamped (after negatives wrap once)."""
    x = np.arange(10.0)
    i = np.array([-1, 3, 12, -30], np.int32)
    got = jnp.asarray(x)[jnp.asarray(i)]
    assert_close(got, x[[9, 3, 9, 0]])
    got = nova.jit(lambda x, i: x[i])(x, i)
    assert_close(got, x[[9, 3, 9, 0]])
    assert_close(jax.numpy.asarray(x)[i], got)  # JAX does the same


def test_concrete_mask_inside_grad():
    x = _arr((4, 3), np.random.default_rng(3))

    def f(x):
        a = jnp.asarray(x)
        return jnp.sum(a[a > 0] ** 2)

    g = nova.grad(f)(x)
    assert_close(g, np.where(x > 0, 2 * x, 0))


# --- gradients -----------------------------------------------------------------------------------

GRAD_INDICES = [
    (1, _S(None, None, -2)),
    (Ellipsis, [0, 0, 3]),
    ([2, 0, 2], _S(1, 3)),
    (None, 1, [1, 1]),
    (np.array([[True, False, True, False]] * 3),),
    ([[0], [2]], [1, 3]),
    (_S(None), [3, 0], None),
]


@pytest.mark.parametrize("idx", GRAD_INDICES, ids=range(len(GRAD_INDICES)))
def test_getitem_gradients(idx):
    check_grads(lambda x: jnp.asarray(x)[idx], [_arr((3, 4))])


def test_getitem_gradient_with_dynamic_clamped_indices():
    i = np.array([0, 7, -1, 2, 2], np.int32)  # 7 clamps to 3
    check_grads(lambda x: jnp.asarray(x)[jnp.asarray(i)], [_arr((4, 2))])


# --- take, take_along_axis -----------------------------------------------------------------------


@pytest.mark.parametrize("axis", [None, 0, 1, -1])
def test_take_matches_numpy(axis):
    x = _arr((3, 4))
    n = x.size if axis is None else x.shape[axis]
    idx = np.array([[0, n - 1], [1, -1]])
    assert_close(jnp.take(x, idx, axis=axis), np.take(x, idx, axis=axis))
    assert_close(
        jnp.take(x, jnp.asarray(idx.astype(np.int32)), axis=axis), np.take(x, idx, axis=axis)
    )
    check_grads(lambda a: jnp.take(a, idx, axis=axis), [x])


def test_take_modes():
    x = np.arange(5.0)
    idx = np.array([-7, -1, 0, 4, 6])
    assert_close(jnp.take(x, idx, mode="clip"), np.take(x, idx, mode="clip"))
    assert_close(jnp.take(x, idx, mode="wrap"), np.take(x, idx, mode="wrap"))
    assert_close(
        jnp.take(x, jnp.asarray(idx.astype(np.int32)), mode="wrap"), np.take(x, idx, mode="wrap")
    )
    with pytest.raises(IndexError, match="index -7 is out of bounds for axis 0 with size 5"):
        jnp.take(x, idx, mode="raise")
    with pytest.raises(IndexError, match="out of bounds"):
        jnp.take(x, idx)
    with pytest.raises(nova.ConcretizationTypeError, match="mode='raise'"):
        nova.jit(lambda x, i: jnp.take(x, i, mode="raise"))(x, idx.astype(np.int32))
    with pytest.raises(ValueError, match="mode"):
        jnp.take(x, [0], mode="bogus")
    with pytest.raises(TypeError, match="integers"):
        jnp.take(x, [0.5])


@pytest.mark.parametrize("axis", [0, 1, -1, None])
def test_take_along_axis_matches_numpy(axis):
    rng = np.random.default_rng(1)
    x = _arr((3, 4))
    if axis is None:
        idx = rng.integers(0, x.size, (7,))
    else:
        shape = list(x.shape)
        shape[axis] = 5
        idx = rng.integers(-x.shape[axis], x.shape[axis], shape)
    expected = np.take_along_axis(x, idx, axis=axis)
    assert_close(jnp.take_along_axis(x, idx, axis), expected)
    assert_close(jnp.take_along_axis(x, jnp.asarray(idx.astype(np.int32)), axis), expected)
    check_grads(lambda a: jnp.take_along_axis(a, idx, axis), [x])


def test_take_along_axis_broadcasts_and_argsort_style_use():
    x = _arr((3, 1, 4))
    idx = np.array([[[0, 3]], [[1, 1]], [[2, 0]]]).repeat(2, axis=1)  # (3, 2, 2): axis 1 broadcasts
    assert_close(jnp.take_along_axis(x, idx, 2), np.take_along_axis(x, idx, 2))
    with pytest.raises(ValueError, match="same number of dimensions"):
        jnp.take_along_axis(x, idx[0], 2)
    with pytest.raises(nova.ShapeError, match="do not broadcast"):
        jnp.take_along_axis(x, np.zeros((2, 1, 2), int), 2)


# --- x.at[idx] -----------------------------------------------------------------------------------

AT_INDICES = [
    0,
    -1,
    (1, 2),
    (_S(None), 1),
    (Ellipsis, 2),
    (None, 0),
    (_S(None, None, -1),),
    (_S(3, 0, -2),),
    ([0, 1, 0],),
    (_S(None), [0, 2], [1, 3]),
    ([0, 1], _S(None), [1, 3]),
    (0, _S(None), [0, 1]),
    (np.array([[0], [1]]), np.array([0, 2])),
    (_S(None), [0, 0, 2]),
    (1, _S(None, None, 2), [3, 3, 0]),
    (np.arange(24).reshape(2, 3, 4)[..., 0] % 2 == 0,),
    (_S(None), [2, 2, 2], [1, 1, 1]),
]
METHODS = ["set", "add", "multiply", "min", "max"]


def _np_at(x, idx, v, method):
    y = x.copy()
    if method == "set":
        y[idx] = v  # NumPy keeps the last of repeated indices, as nova does
    else:
        {"add": np.add, "multiply": np.multiply, "min": np.minimum, "max": np.maximum}[method].at(
            y, idx, v
        )
    return y


@pytest.mark.parametrize("k", range(len(AT_INDICES)))
@pytest.mark.parametrize("method", METHODS)
def test_at_matches_numpy(k, method):
    idx = AT_INDICES[k]
    rng = np.random.default_rng(k)
    x = rng.standard_normal((2, 3, 4))
    v = rng.standard_normal(x[idx].shape)
    got = getattr(jnp.asarray(x).at[idx], method)(v)
    assert_close(got, _np_at(x, idx, v, method))
    # A broadcast value and a jitted update agree too.
    got = nova.jit(lambda x, v: getattr(x.at[idx], method)(v))(x, np.float64(0.5))
    assert_close(got, _np_at(x, idx, 0.5, method))


def test_at_get_and_functional_semantics():
    x = jnp.asarray(np.arange(6.0))
    y = x.at[2].set(10.0)
    assert_close(x, np.arange(6.0))  # x is unchanged
    assert_close(y, [0, 1, 10, 3, 4, 5])
    assert_close(x.at[[1, 3]].get(), [1.0, 3.0])
    assert y.dtype == x.dtype
    # Values are cast to the array's dtype.
    xi = jnp.asarray(np.arange(4, dtype=np.int32))
    assert xi.at[0].add(2.7).dtype == np.int32


def test_at_add_accumulates_repeated_indices_like_add_at():
    x = np.zeros((5, 2))
    idx = np.array([0, 3, 3, 3, 1])
    v = np.arange(10.0).reshape(5, 2)
    expected = x.copy()
    np.add.at(expected, idx, v)
    assert_close(jnp.asarray(x).at[idx].add(v), expected)
    assert_close(nova.jit(lambda x, i, v: x.at[i].add(v))(x, idx.astype(np.int32), v), expected)


def test_at_dynamic_out_of_range_is_dropped_like_jax():
    x = np.arange(6.0)
    idx = np.array([1, 9, -2, -9], np.int32)
    v = np.array([10.0, 20.0, 30.0, 40.0])
    for method in METHODS:
        got = getattr(jnp.asarray(x).at[jnp.asarray(idx)], method)(v)
        jm = {"multiply": "multiply"}.get(method, method)
        expected = getattr(jjnp.asarray(x).at[idx], jm)(v)
        assert_close(got, np.asarray(expected), err_msg=method)


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize(
    "idx",
    [
        ([0, 2, 0], _S(1, 3)),
        (1, [3, 0]),
        (_S(None, None, -1), 0),
        (np.array([[True, False, True, False]] * 3),),
    ],
)
def test_at_gradients(method, idx):
    rng = np.random.default_rng(7)
    x = rng.permutation(12).reshape(3, 4) * 0.25 - 1.3  # distinct: no ties for min/max
    shape = x[idx].shape
    v = rng.permutation(int(np.prod(shape))).reshape(shape) * 0.3 - 0.95
    check_grads(lambda x, v: getattr(jnp.asarray(x).at[idx], method)(v), [x, v])


def test_at_set_gradient_matches_jax():
    """set: dx is the cotangent with zeros at the updated places; dv is the cotangent gathered."""
    x = _arr((4, 3))
    v = np.ones((2, 3))
    ct = np.arange(12.0).reshape(4, 3)

    def f(m):
        return lambda x, v: m.sum(m.asarray(x).at[np.array([1, 3])].set(v) * ct)

    g = nova.grad(f(jnp), argnums=(0, 1))(x, v)
    jg = jax.grad(f(jjnp), argnums=(0, 1))(x, v)
    for a, b in zip(g, jg, strict=True):
        assert_close(a, np.asarray(b))


def test_at_jit_traced_index_gradient():
    x, v = _arr((5, 2)), np.array([1.5, -2.0])

    def loss(x, i, v):
        return jnp.sum(x.at[i].multiply(v) ** 2)

    g = nova.jit(nova.grad(loss, argnums=(0, 2)))(x, np.int32(3), v)
    jg = jax.grad(lambda x, i, v: jjnp.sum(x.at[i].multiply(v) ** 2), argnums=(0, 2))(x, 3, v)
    for a, b in zip(g, jg, strict=True):
        assert_close(a, np.asarray(b))


# --- errors --------------------------------------------------------------------------------------


def test_static_out_of_range_raises_index_error_naming_axis_and_size():
    x = jnp.zeros((3, 4))
    with pytest.raises(
        IndexError, match=rf"index 4 is out of bounds for axis 1 with size 4.*{THIS_FILE}"
    ):
        x[0, 4]
    with pytest.raises(IndexError, match="index -4 is out of bounds for axis 0 with size 3"):
        x[-4]
    with pytest.raises(IndexError, match="index 5 is out of bounds for axis 0"):
        x[[0, 5]]
    with pytest.raises(IndexError, match="out of bounds"):
        x.at[3].set(1.0)
    with pytest.raises(
        IndexError, match="too many indices for array: array is 2-dimensional, but 3"
    ):
        x[0, 0, 0]
    with pytest.raises(IndexError, match="single ellipsis"):
        x[..., 0, ...]
    with pytest.raises(IndexError, match="boolean index"):
        x[np.array([True, False])]
    with pytest.raises(IndexError, match="could not be broadcast"):
        x[[0, 1], [0, 1, 2]]
    with pytest.raises(IndexError, match="size 0"):
        jnp.zeros((0, 2))[jnp.asarray(np.array([0], np.int32))]


@pytest.mark.parametrize(
    "bad", [1.0, np.float32(2), [0.5, 1.0], np.array([1.0]), "a", {"a": 1}, (0, 1.5), _S(0.5, 2)]
)
def test_non_integer_indices_raise_type_error(bad):
    x = jnp.zeros((3, 4))
    with pytest.raises(TypeError, match=THIS_FILE):
        x[bad]
    with pytest.raises(TypeError):
        x.at[bad].set(1.0)


def test_float_nova_array_index_raises_type_error():
    with pytest.raises(TypeError, match="array of float32 at position 0"):
        jnp.zeros(3)[jnp.ones(2)]


def test_traced_mask_and_slice_bounds_raise_concretization_error():
    x = np.arange(6.0)
    with pytest.raises(
        nova.ConcretizationTypeError, match=rf"boolean mask.*static.*where.*{THIS_FILE}"
    ):
        nova.jit(lambda x: x[x > 2])(x)
    with pytest.raises(nova.ConcretizationTypeError, match="boolean mask"):
        nova.jit(lambda x: x.at[x > 2].set(0.0))(x)
    with pytest.raises(nova.ConcretizationTypeError, match="slice bounds must be static"):
        nova.jit(lambda x, i: x[i:])(x, np.int32(2))


def test_at_value_shape_mismatch_raises_shape_error():
    x = jnp.zeros((3, 4))
    with pytest.raises(
        nova.ShapeError, match=rf"values of shape \(3,\).*indexed shape \(2, 4\).*{THIS_FILE}"
    ):
        x.at[:2].set(jnp.ones(3))


def test_setitem_points_to_at():
    x = jnp.zeros(3)
    with pytest.raises(TypeError, match=r"\.at\[idx\]\.set"):
        x[0] = 1.0


# --- the primitives under jit (trace text and cache) --------------------------------------------


def test_scatter_and_gather_appear_in_jitted_backward():
    def loss(table, ids):
        return jnp.sum(table[ids] ** 2)

    text = nova.jit(nova.grad(loss)).trace(_arr((10, 4)), np.array([1, 3, 3], np.int32)).as_text()
    assert "nova.gather" in text and "nova.scatter_add" in text


def test_programs_with_indexing_ops_print_parse_and_verify():
    """Every indexing primitive's params survive the IR's print/parse round trip."""

    def f(x, i, v):
        y = x[1:, ::-1][i] + jnp.pad(x, ((1, 0), (0, 2)))[:3, :4]
        z = jnp.concatenate([y, x.at[i].set(v)], axis=0)
        return z.at[jnp.asarray(np.array([0, 0, 2]))].max(1.0), jnp.roll(x, 1, 1)

    args = (_arr((4, 4)), np.int32(2), np.ones(4))
    p = nova.make_program(nova.value_and_grad(lambda x, i, v: f(x, i, v)[0].sum()))(*args)
    text = p.as_text()
    for name in ("slice", "rev", "pad", "concatenate", "gather", "scatter_add", "scatter"):
        assert f"nova.{name} " in text, name
    q = nova.parse_program(text)
    q.verify()
    assert q.structural_hash() == p.structural_hash()


def test_second_order_gradients_through_gather_and_scatter():
    idx = np.array([0, 2, 2], np.int32)

    def g(x):
        return nova.grad(lambda y: jnp.sum(jnp.asarray(y)[idx] ** 3))(x)

    check_grads(g, [_arr((4,))])

    def h(x, v):
        return nova.grad(lambda y: jnp.sum(jnp.asarray(y).at[idx].multiply(v) ** 2))(x)

    check_grads(h, [_arr((4,)), np.array([0.5, -1.5, 2.0])])


def test_jit_cache_hits_for_new_index_values():
    f = nova.jit(lambda x, i: x[i] * 2)
    x = _arr((5, 3))
    for i in range(5):
        assert_close(f(x, np.int32(i)), 2 * x[i])
    info = f.cache_info()
    assert (info.misses, info.hits) == (1, 4)


DTYPES = [np.bool_, np.uint8, np.int32, np.int64, np.float16, jnp.bfloat16, np.float32, np.float64]


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_indexing_and_updates_keep_every_dtype(dtype):
    x = (np.arange(12).reshape(3, 4) % 5).astype(dtype)
    v = np.ones((2, 4), dtype)
    idx = ([2, 0], slice(None))
    assert_close(jnp.asarray(x)[idx], x[idx])
    assert jnp.asarray(x)[1:, ::-1].dtype == np.dtype(dtype)
    for method in ("set", "add", "max"):
        got = getattr(jnp.asarray(x).at[idx], method)(v)
        assert got.dtype == np.dtype(dtype)
        assert_close(got, _np_at(x, idx, v, method))


def test_primitive_shape_rules_raise_clear_errors():
    from nova.ops import lax

    x = jnp.zeros((3, 4))
    i = jnp.asarray(np.zeros((2, 1), np.int32))
    with pytest.raises(nova.ShapeError, match=r"bad bounds on dimension 1 of shape \(3, 4\)"):
        lax.slice(x, (0, 0), (3, 5))
    with pytest.raises(nova.ShapeError, match="needs 2 start/limit/stride"):
        lax.slice(x, (0,), (3,))
    with pytest.raises(nova.ShapeError, match="gives size -1"):
        lax.pad(x, 0.0, ((0, 0, 0), (-3, -2, 0)))
    with pytest.raises(nova.ShapeError, match=r"needs 2 \(lo, hi, interior\) triples"):
        lax.pad(x, 0.0, ((0, 0), (1, 1, 0)))
    with pytest.raises(TypeError, match="padding value dtype"):
        lax.pad(x, jnp.asarray(np.float64(0)), ((0, 0, 0), (1, 1, 0)))
    with pytest.raises(nova.ShapeError, match=r"shapes \(3, 4\) \(2, 3\) differ outside dimension 0"):
        lax.concatenate([x, jnp.zeros((2, 3))], 0)
    with pytest.raises(TypeError, match="indices must have an integer dtype"):
        lax.gather(x, jnp.zeros((2, 1)), (0,))
    with pytest.raises(nova.ShapeError, match=r"must end in a dimension of size len\(axes\) = 2"):
        lax.gather(x, i, (0, 1))
    with pytest.raises(ValueError, match="repeated axis"):
        lax.gather(x, jnp.asarray(np.zeros((2, 2), np.int32)), (1, 1))
    with pytest.raises(nova.ShapeError, match=r"updates of shape \(2, 3\) must have shape"):
        lax.scatter_add(x, i, jnp.zeros((2, 3)), (0,))
    with pytest.raises(ValueError, match="mode must be one of"):
        lax.scatter(x, i, jnp.zeros((2, 4)), (0,), "div")
    with pytest.raises(nova.ShapeError, match="cannot index axis 0 of size 0"):
        lax.gather(jnp.zeros((0, 4)), i, (0,))
