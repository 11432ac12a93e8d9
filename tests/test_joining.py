"""nova.numpy joining, splitting, tiling and padding against NumPy: concatenate, stack, *stack,
split, array_split, tile, repeat, flip, roll, pad — values, dtypes, gradients, jit and errors."""

import numpy as np
import pytest

import nova
import nova.numpy as jnp
from tests.helpers import assert_close, check_grads

THIS_FILE = "test_joining.py"


def _x(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


def _noncontig(*shape):
    big = _x(*[2 * d for d in reversed(shape)])
    return big[tuple(slice(None, None, 2) for _ in shape)].T


def _same_list(got, expected):
    assert len(got) == len(expected)
    for g, e in zip(got, expected, strict=True):
        assert_close(g, e)


# --- concatenate and stack -----------------------------------------------------------------------

CONCAT = [
    ([(2, 3), (4, 3)], 0),
    ([(2, 3), (2, 1), (2, 0)], 1),
    ([(2, 3), (2, 3)], -1),
    ([(0, 3), (2, 3)], 0),
    ([(5,)], 0),
    ([(2, 3), (3,)], None),
    ([(1, 2, 3), (1, 2, 3)], 2),
]


@pytest.mark.parametrize("shapes,axis", CONCAT)
def test_concatenate_matches_numpy(shapes, axis):
    xs = [_x(*s, seed=i) for i, s in enumerate(shapes)]
    assert_close(jnp.concatenate(xs, axis=axis), np.concatenate(xs, axis=axis))
    assert_close(
        nova.jit(lambda *a: jnp.concatenate(a, axis=axis))(*xs), np.concatenate(xs, axis=axis)
    )
    check_grads(lambda *a: jnp.concatenate(a, axis=axis), xs)


def test_concatenate_promotes_dtypes_and_takes_dtype():
    a = np.arange(3, dtype=np.int32)
    b = np.ones(2, np.float32)
    out = jnp.concatenate([a, b])
    assert out.dtype == np.float32
    assert_close(out, np.concatenate([a, b]).astype(np.float32))
    assert jnp.concatenate([a, a], dtype=np.float64).dtype == np.float64
    assert jnp.concatenate([jnp.asarray(a), jnp.asarray(a)]).dtype == np.int32


def test_concatenate_non_contiguous_and_append():
    a, b = _noncontig(3, 4), _noncontig(3, 2)
    assert_close(jnp.concatenate([a, b], 1), np.concatenate([a, b], 1))
    assert_close(jnp.append(a, b), np.append(a, b))
    assert_close(jnp.append(a, a, axis=0), np.append(a, a, axis=0))


def test_concatenate_errors_name_shapes_and_line():
    with pytest.raises(nova.ShapeError, match=rf"\(2, 3\), \(2, 4\).*{THIS_FILE}"):
        jnp.concatenate([np.zeros((2, 3)), np.zeros((2, 4))])
    with pytest.raises(nova.ShapeError, match=r"same number of dimensions.*\(2, 3\), \(3,\)"):
        jnp.concatenate([np.zeros((2, 3)), np.zeros(3)])
    with pytest.raises(ValueError, match="zero-dimensional"):
        jnp.concatenate([np.float32(1), np.float32(2)])
    with pytest.raises(ValueError, match="axis 2 is out of bounds"):
        jnp.concatenate([np.zeros((2, 3))] * 2, axis=2)
    with pytest.raises(ValueError, match="at least one array"):
        jnp.concatenate([])


@pytest.mark.parametrize("shape", [(), (3,), (2, 3), (0, 2)])
@pytest.mark.parametrize("axis", [0, -1])
def test_stack_matches_numpy(shape, axis):
    xs = [_x(*shape, seed=i) for i in range(3)]
    assert_close(jnp.stack(xs, axis=axis), np.stack(xs, axis=axis))
    check_grads(lambda *a: jnp.stack(a, axis=axis), xs)


def test_stack_errors_and_asarray_of_arrays():
    with pytest.raises(nova.ShapeError, match=rf"same shape.*\(2,\), \(3,\).*{THIS_FILE}"):
        jnp.stack([np.zeros(2), np.zeros(3)])
    with pytest.raises(ValueError, match="out of bounds"):
        jnp.stack([np.zeros(2)] * 2, axis=3)
    a = jnp.asarray(np.arange(3.0))
    assert_close(jnp.asarray([a, a * 2]), np.stack([np.arange(3.0), 2 * np.arange(3.0)]))
    assert_close(jnp.asarray([[a[0], 1.0], [2.0, a[2]]]), [[0.0, 1.0], [2.0, 2.0]])


@pytest.mark.parametrize("fn", ["hstack", "vstack", "dstack", "column_stack"])
@pytest.mark.parametrize("shape", [(), (3,), (2, 3), (2, 3, 2)])
def test_stack_family_matches_numpy(fn, shape):
    xs = [_x(*shape, seed=i) for i in range(2)]
    expected = getattr(np, fn)(xs)
    assert_close(getattr(jnp, fn)(xs), expected)


# --- split ---------------------------------------------------------------------------------------

SPLITS = [
    (6, 0, (6, 2)),
    (3, 1, (2, 6)),
    ([1, 4], 1, (2, 6)),
    ([2, 10], 0, (6,)),
    ([-2], 0, (5, 2)),
    ([3, 1], 0, (5,)),
    (1, 0, (0, 2)),
    ([], 0, (3,)),
]


@pytest.mark.parametrize("ios,axis,shape", SPLITS)
def test_split_matches_numpy(ios, axis, shape):
    x = _x(*shape)
    _same_list(jnp.split(x, ios, axis=axis), np.split(x, ios, axis=axis))
    check_grads(lambda a: tuple(jnp.split(a, ios, axis=axis)), [x])


@pytest.mark.parametrize("k", [1, 2, 3, 4, 7])
def test_array_split_matches_numpy(k):
    x = _x(5, 2)
    _same_list(jnp.array_split(x, k), np.array_split(x, k))
    _same_list(jnp.array_split(x, k, axis=1), np.array_split(x, k, axis=1))


def test_hsplit_vsplit():
    x = _x(4, 6)
    _same_list(jnp.hsplit(x, 3), np.hsplit(x, 3))
    _same_list(jnp.vsplit(x, [1]), np.vsplit(x, [1]))
    _same_list(jnp.hsplit(x[0], 2), np.hsplit(x[0], 2))
    with pytest.raises(ValueError, match="2 or more dimensions"):
        jnp.vsplit(x[0], 2)


def test_split_errors():
    x = np.zeros((7, 2))
    with pytest.raises(
        ValueError, match=rf"equal division: axis 0 of size 7 into 3 sections.*{THIS_FILE}"
    ):
        jnp.split(x, 3)
    with pytest.raises(ValueError, match="larger than 0"):
        jnp.split(x, 0)
    with pytest.raises(TypeError, match="integers"):
        jnp.split(x, [1.5])
    with pytest.raises(TypeError, match="indices_or_sections"):
        jnp.split(x, "a")


# --- tile, repeat --------------------------------------------------------------------------------

TILES = [
    ((3,), 2),
    ((2, 3), (2, 1)),
    ((2, 3), (2, 1, 3)),
    ((), 3),
    ((2, 3), 0),
    ((0, 2), (2, 2)),
    ((2, 1, 2), (1, 2)),
]


@pytest.mark.parametrize("shape,reps", TILES)
def test_tile_matches_numpy(shape, reps):
    x = _x(*shape)
    assert_close(jnp.tile(x, reps), np.tile(x, reps))
    check_grads(lambda a: jnp.tile(a, reps), [x])


def test_tile_errors():
    with pytest.raises(ValueError, match="non-negative"):
        jnp.tile(np.zeros(2), -1)
    with pytest.raises(TypeError, match="reps"):
        jnp.tile(np.zeros(2), 1.5)


REPEATS = [
    (2, None),
    (2, 0),
    (3, -1),
    ([1, 0, 2], 0),
    ([2, 1, 1, 0], 1),
    (0, 1),
    (np.array([2]), 0),
    ([1, 2, 0, 1, 1, 3], None),
]


@pytest.mark.parametrize("reps,axis", REPEATS)
def test_repeat_matches_numpy(reps, axis):
    x = _x(3, 4) if axis is not None or np.size(reps) == 1 else _x(2, 3)
    assert_close(jnp.repeat(x, reps, axis=axis), np.repeat(x, reps, axis=axis))
    assert_close(jnp.asarray(x).repeat(reps, axis=axis), np.repeat(x, reps, axis=axis))
    check_grads(lambda a: jnp.repeat(a, reps, axis=axis), [x])


def test_repeat_errors():
    x = np.zeros((3, 2))
    with pytest.raises(ValueError, match="negative"):
        jnp.repeat(x, -1)
    with pytest.raises(
        nova.ShapeError,
        match=rf"repeats of shape \(2,\) do not match axis 0 of size 3.*{THIS_FILE}",
    ):
        jnp.repeat(x, [1, 2], axis=0)
    with pytest.raises(TypeError, match="traced"):
        nova.jit(lambda x, r: jnp.repeat(x, r, axis=0))(x, np.array([1, 2, 0], np.int32))
    with pytest.raises(TypeError, match="integers"):
        jnp.repeat(x, 1.5)
    # Concrete nova counts work outside jit.
    assert_close(
        jnp.repeat(x, jnp.asarray(np.array([1, 2, 0], np.int32)), axis=0),
        np.repeat(x, [1, 2, 0], axis=0),
    )


# --- flip, roll ----------------------------------------------------------------------------------


@pytest.mark.parametrize("axis", [None, 0, -1, (0, 2), ()])
def test_flip_matches_numpy(axis):
    x = _noncontig(2, 3, 4)
    assert_close(jnp.flip(x, axis), np.flip(x, axis))
    check_grads(lambda a: jnp.flip(a, axis), [x])


def test_fliplr_flipud():
    x = _x(3, 4)
    assert_close(jnp.fliplr(x), np.fliplr(x))
    assert_close(jnp.flipud(x), np.flipud(x))
    with pytest.raises(ValueError, match="at least 2-d"):
        jnp.fliplr(np.zeros(3))
    with pytest.raises(ValueError, match="out of bounds"):
        jnp.flip(np.zeros(3), 1)


ROLLS = [
    (2, None),
    (-7, None),
    (1, 0),
    (5, 1),
    ((1, -2), (0, 1)),
    (3, (0, 1)),
    ((1, 2), 1),
    (0, 0),
    (13, -1),
]


@pytest.mark.parametrize("shift,axis", ROLLS)
def test_roll_matches_numpy(shift, axis):
    x = _x(3, 4)
    assert_close(jnp.roll(x, shift, axis), np.roll(x, shift, axis))
    check_grads(lambda a: jnp.roll(a, shift, axis), [x])


@pytest.mark.parametrize("shift", [0, 1, 3, -1, 9, -13])
def test_roll_with_traced_shift(shift):
    x = _x(3, 4)
    f = nova.jit(lambda a, s: jnp.roll(a, s, 1))
    assert "nova.gather" in f.trace(x, np.int32(shift)).as_text()
    assert_close(f(x, np.int32(shift)), np.roll(x, shift, 1))
    assert_close(nova.jit(lambda a, s: jnp.roll(a, s))(x, np.int32(shift)), np.roll(x, shift))


def test_roll_size_zero_and_errors():
    assert_close(jnp.roll(np.zeros((0, 3)), 2, 0), np.zeros((0, 3)))
    with pytest.raises(ValueError, match="same length"):
        jnp.roll(np.zeros((2, 2)), (1, 2, 3), (0, 1))
    with pytest.raises(TypeError, match="shift must be an integer"):
        jnp.roll(np.zeros(3), 1.5)


# --- pad -----------------------------------------------------------------------------------------

PAD_WIDTHS = [2, (1,), (1, 2), ((1, 2), (0, 3)), ((0, 0), (2, 0)), [[3, 1], [1, 3]]]
MODES = ["constant", "edge", "reflect", "symmetric", "wrap"]


@pytest.mark.parametrize("width", PAD_WIDTHS, ids=range(len(PAD_WIDTHS)))
@pytest.mark.parametrize("mode", MODES)
def test_pad_matches_numpy(width, mode):
    x = _noncontig(3, 4)
    assert_close(jnp.pad(x, width, mode=mode), np.pad(x, width, mode=mode))
    check_grads(lambda a: jnp.pad(a, width, mode=mode), [x])


@pytest.mark.parametrize("values", [1.5, (2.0,), (1.0, -1.0), ((1, 2), (3, 4))])
def test_pad_constant_values_forms(values):
    x = np.arange(6, dtype=np.int32).reshape(2, 3)
    got = jnp.pad(x, ((1, 2), (2, 1)), constant_values=values)
    assert got.dtype == np.int32
    assert_close(got, np.pad(x, ((1, 2), (2, 1)), constant_values=values))


def test_pad_with_traced_constant_value_gradient():
    x = _x(2, 3)

    def f(a, c):
        return jnp.pad(jnp.asarray(a), 1, constant_values=jnp.asarray(c))

    assert_close(f(x, np.float64(7.0)), np.pad(x, 1, constant_values=7.0))
    check_grads(f, [x, np.float64(0.3)])
    assert_close(nova.jit(f)(x, np.float64(2.0)), np.pad(x, 1, constant_values=2.0))


def test_pad_1d_0d_and_empty():
    assert_close(
        jnp.pad(np.arange(3.0), (2, 1), mode="reflect"),
        np.pad(np.arange(3.0), (2, 1), mode="reflect"),
    )
    assert_close(jnp.pad(np.float64(2.0), 3), np.pad(np.float64(2.0), 3))
    assert_close(jnp.pad(np.zeros((0, 2)), 1), np.pad(np.zeros((0, 2)), 1))


def test_pad_errors():
    x = np.zeros((2, 3))
    with pytest.raises(ValueError, match=rf"negative.*{THIS_FILE}"):
        jnp.pad(x, -1)
    with pytest.raises(ValueError, match="cannot be broadcast"):
        jnp.pad(x, ((1, 2), (3, 4), (5, 6)))
    with pytest.raises(ValueError, match="mode 'median' is not supported"):
        jnp.pad(x, 1, mode="median")
    with pytest.raises(ValueError, match="empty axis"):
        jnp.pad(np.zeros((0, 2)), 1, mode="edge")
    with pytest.raises(ValueError, match="unsupported keyword"):
        jnp.pad(x, 1, mode="constant", stat_length=2)
    with pytest.raises(TypeError, match="integers"):
        jnp.pad(x, 1.5)


def test_pad_lowers_to_pad_primitive_and_edge_to_gather():
    text = nova.jit(lambda a: jnp.pad(a, 1)).trace(np.zeros((2, 3))).as_text()
    assert "nova.pad" in text
    text = nova.jit(lambda a: jnp.pad(a, 1, mode="edge")).trace(np.zeros((2, 3))).as_text()
    assert "nova.gather" in text
