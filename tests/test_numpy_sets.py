"""nova/numpy_impl/sets.py against NumPy: unique (and the array API's unique_*), the 1-d set
operations, histograms, lexsort, partition, delete/insert, compress/extract, choose, resize and
trim_zeros. Eagerly (data-dependent shapes from concrete values) and under nova.jit with a static
size= (jax.numpy's truncate / pad-with-fill_value semantics, whose expected values are built
here from NumPy's results), NaN handling, and the errors that bad input raises."""

import numpy as np
import pytest

import nova
from nova.core.errors import ConcretizationTypeError, ShapeError
from nova.numpy_impl import sets

RNG = np.random.default_rng(0)

INTS = np.array([5, 3, 3, 7, 9, 5, -2, 7, 3], np.int32)
OTHER = np.array([3, 9, 11, 4, 3, -2], np.int32)
FLOATS = np.array([3.0, np.nan, 1.0, np.nan, 3.0, -0.0, 0.0, 2.5], np.float32)


def _same(actual, expected):
    """Shape, values (NaN equal to NaN) and dtype kind as NumPy's (Nova's ints are 32-bit)."""
    a, e = np.asarray(actual), np.asarray(expected)
    assert a.shape == e.shape, f"shape {a.shape} != expected {e.shape}"
    assert a.dtype.kind == e.dtype.kind or {a.dtype.kind, e.dtype.kind} <= {"i", "u"}, \
        (a.dtype, e.dtype)
    if a.dtype.kind == "f":
        np.testing.assert_allclose(a.astype(np.float64), e.astype(np.float64), rtol=1e-6,
                                   atol=1e-6, equal_nan=True)
    else:
        np.testing.assert_array_equal(a, e)


def _padded(vals, size, fill):
    """jax.numpy's size= result: the first `size` of vals, then `fill`."""
    vals = np.asarray(vals)
    out = np.full((size,) + vals.shape[1:], fill, vals.dtype)
    k = min(size, vals.shape[0])
    out[:k] = vals[:k]
    return out


def test_same_helper_can_fail():
    with pytest.raises(AssertionError):
        _same(np.array([1, 2]), np.array([1, 3]))
    with pytest.raises(AssertionError):
        _same(np.array([1.0]), np.array([1]))


# --- unique ---------------------------------------------------------------------------------

UNIQUE_CASES = [
    INTS,
    INTS.reshape(3, 3),
    np.array([True, False, True]),
    np.array([], np.float32),
    np.array(4.0, np.float32),
    np.array([2, 2, 2], np.int32),
]


@pytest.mark.parametrize("x", UNIQUE_CASES, ids=lambda x: f"{x.dtype}{x.shape}")
def test_unique_against_numpy(x):
    got = sets.unique(x, return_index=True, return_inverse=True, return_counts=True)
    want = np.unique(x, return_index=True, return_inverse=True, return_counts=True)
    assert len(got) == 4
    for g, w in zip(got, want, strict=True):
        _same(g, w)
    _same(sets.unique(x), np.unique(x))
    # values[inverse] rebuilds x
    v, inv = sets.unique(x, return_inverse=True)
    if x.size:
        _same(np.asarray(v)[np.asarray(inv)], x)


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_unique_axis_against_numpy(axis):
    x = np.array([[1, 2, 1, 1], [0, 5, 0, 0], [1, 2, 1, 1], [0, 4, 0, 0]], np.int32)
    got = sets.unique(x, return_index=True, return_inverse=True, return_counts=True, axis=axis)
    want = np.unique(x, return_index=True, return_inverse=True, return_counts=True, axis=axis)
    for g, w in zip(got, want, strict=True):
        _same(g, w)
    # 3-d, and empty rows
    y = RNG.integers(0, 2, (4, 2, 3)).astype(np.int32)
    _same(sets.unique(y, axis=1), np.unique(y, axis=1))
    z = np.zeros((3, 0), np.float32)
    _same(sets.unique(z, axis=0, return_counts=True)[1],
          np.unique(z, axis=0, return_counts=True)[1])
    _same(sets.unique(z, axis=0), np.unique(z, axis=0))
    _same(sets.unique(z, axis=1), np.unique(z, axis=1))


def test_unique_nan_handling():
    got = sets.unique(FLOATS, return_index=True, return_inverse=True, return_counts=True)
    want = np.unique(FLOATS, return_index=True, return_inverse=True, return_counts=True)
    for g, w in zip(got, want, strict=True):
        _same(g, w)
    assert np.isnan(np.asarray(got[0])).sum() == 1  # one NaN with equal_nan=True
    got = sets.unique(FLOATS, return_counts=True, equal_nan=False)
    want = np.unique(FLOATS, return_counts=True, equal_nan=False)
    _same(got[0], want[0])
    _same(got[1], want[1])
    assert np.isnan(np.asarray(got[0])).sum() == 2
    # NaN rows along an axis
    r = np.array([[np.nan, 1.0], [np.nan, 1.0], [0.0, 2.0]], np.float32)
    _same(sets.unique(r, axis=0), np.array([[0.0, 2.0], [np.nan, 1.0]], np.float32))
    _same(sets.unique(r, axis=0, equal_nan=False),
          np.array([[0.0, 2.0], [np.nan, 1.0], [np.nan, 1.0]], np.float32))


def test_unique_array_api_variants():
    r = sets.unique_all(FLOATS)
    w = np.unique_all(FLOATS)
    assert r._fields == ("values", "indices", "inverse_indices", "counts")
    for f in r._fields:
        _same(getattr(r, f), getattr(w, f))
    c = sets.unique_counts(INTS.reshape(3, 3))
    assert c._fields == ("values", "counts")
    _same(c.values, np.unique(INTS))
    _same(c.counts, np.unique(INTS, return_counts=True)[1])
    i = sets.unique_inverse(INTS.reshape(3, 3))
    assert i._fields == ("values", "inverse_indices")
    assert i.inverse_indices.shape == (3, 3)
    _same(np.asarray(i.values)[np.asarray(i.inverse_indices)], INTS.reshape(3, 3))
    # NumPy 2.3+ may return unique_values unsorted; nova's are sorted
    _same(sets.unique_values(INTS), np.sort(np.unique_values(INTS)))
    _same(sets.unique_values(FLOATS), np.unique_values(FLOATS))


def test_unique_size_under_jit():
    vals, idx, inv, cnt = np.unique(INTS, return_index=True, return_inverse=True,
                                    return_counts=True)
    n = vals.size  # 5 unique values

    def f(x):
        return sets.unique(x, return_index=True, return_inverse=True, return_counts=True,
                           size=8)

    got = nova.jit(f)(INTS)
    _same(got[0], _padded(vals, 8, vals.min()))  # default fill: the smallest value
    _same(got[1], _padded(idx, 8, idx[0]))
    _same(got[2], inv)
    _same(got[3], _padded(cnt, 8, 0))
    assert got[0].shape == (8,) and n < 8
    # eager with size gives the same
    for g, e in zip(sets.unique(INTS, return_index=True, return_inverse=True,
                                return_counts=True, size=8), got, strict=True):
        _same(g, e)
    # truncation, and an explicit fill_value
    got = nova.jit(lambda x: sets.unique(x, return_counts=True, size=3, fill_value=-9))(INTS)
    _same(got[0], vals[:3])
    _same(got[1], cnt[:3])
    got = nova.jit(lambda x: sets.unique(x, size=7, fill_value=-9))(INTS)
    _same(got, _padded(vals, 7, -9))
    # NaN under jit, and along an axis
    _same(nova.jit(lambda x: sets.unique(x, size=6, fill_value=7.0))(FLOATS),
          _padded(np.unique(FLOATS), 6, 7.0))
    m = INTS[:8].reshape(4, 2)
    got = nova.jit(lambda x: sets.unique(x, axis=0, size=5, fill_value=0))(m)
    _same(got, _padded(np.unique(m, axis=0), 5, 0))
    got = nova.jit(lambda x: sets.unique_all(x, size=6))(INTS)
    _same(got.values, _padded(vals, 6, vals.min()))
    _same(got.counts, _padded(cnt, 6, 0))


def test_unique_errors():
    with pytest.raises(ConcretizationTypeError, match=r"unique.*size="):
        nova.jit(sets.unique)(INTS)
    with pytest.raises(ConcretizationTypeError, match=r"unique.*size="):
        nova.jit(sets.unique_counts)(INTS)
    with pytest.raises(ValueError, match=r"unique: .*fill_value must be given"):
        sets.unique(np.array([], np.int32), size=3)
    _same(sets.unique(np.array([], np.int32), size=2, fill_value=4), np.array([4, 4]))
    with pytest.raises(ValueError, match="size must be non-negative, got -1"):
        sets.unique(INTS, size=-1)
    with pytest.raises(TypeError, match="size must be an integer"):
        sets.unique(INTS, size=2.5)
    with pytest.raises(ValueError, match="axis 2 is out of bounds"):
        sets.unique(INTS.reshape(3, 3), axis=2)
    with pytest.raises(ShapeError, match=r"fill_value of shape \(2,\) does not broadcast to "
                                          r"the shape \(3,\)"):
        sets.unique(INTS.reshape(3, 3), axis=0, size=4, fill_value=np.zeros(2))


# --- set operations -------------------------------------------------------------------------

SET_PAIRS = [
    (INTS, OTHER),
    (INTS.reshape(3, 3), OTHER.reshape(2, 3)),  # flattened
    (np.array([], np.int32), OTHER),
    (np.array([np.nan, 1.0, 2.0, np.nan], np.float32), np.array([np.nan, 2.0, 5.0], np.float32)),
    (np.array([1, 2, 3], np.int32), np.array([1.5, 2.0], np.float32)),  # promoted
    (np.array([1, 1, 1], np.int32), np.array([0], np.int32)),  # padding equals the largest
]
SET_IDS = ["ints", "2d", "empty", "nan", "mixed", "pad-edge"]


@pytest.mark.parametrize("a,b", SET_PAIRS, ids=SET_IDS)
def test_set_operations_against_numpy(a, b):
    _same(sets.union1d(a, b), np.union1d(a, b))
    _same(sets.intersect1d(a, b), np.intersect1d(a, b))
    _same(sets.setdiff1d(a, b), np.setdiff1d(a, b))
    _same(sets.setdiff1d(b, a), np.setdiff1d(b, a))
    _same(sets.setxor1d(a, b), np.setxor1d(a, b))
    got = sets.intersect1d(a, b, return_indices=True)
    want = np.intersect1d(a, b, return_indices=True)
    for g, w in zip(got, want, strict=True):
        _same(g, w)


def test_set_operations_assume_unique():
    a = np.array([9, 1, 4, 7], np.int32)
    b = np.array([4, 2, 9], np.int32)
    _same(sets.setdiff1d(a, b, assume_unique=True), np.setdiff1d(a, b, assume_unique=True))
    assert np.asarray(sets.setdiff1d(a, b, assume_unique=True)).tolist() == [1, 7]  # a's order
    _same(sets.setxor1d(a, b, assume_unique=True), np.setxor1d(a, b, assume_unique=True))
    for g, w in zip(sets.intersect1d(a, b, assume_unique=True, return_indices=True),
                    np.intersect1d(a, b, assume_unique=True, return_indices=True), strict=True):
        _same(g, w)


def test_set_operations_size_under_jit():
    a, b = INTS, OTHER
    union, inter = np.union1d(a, b), np.intersect1d(a, b, return_indices=True)
    diff, xor = np.setdiff1d(a, b), np.setxor1d(a, b)

    @nova.jit
    def f(x, y):
        return (sets.union1d(x, y, size=10),
                sets.intersect1d(x, y, size=5, return_indices=True),
                sets.setdiff1d(x, y, size=4),
                sets.setxor1d(x, y, size=8),
                sets.union1d(x, y, size=3, fill_value=0),
                sets.setxor1d(x, y, size=8, fill_value=-1))

    u, (iv, i1, i2), d, x, u3, x2 = f(a, b)
    _same(u, _padded(union, 10, union.min()))  # unique's default: the smallest value
    _same(iv, _padded(inter[0], 5, inter[0].min()))  # jax: the smallest result
    _same(i1, _padded(inter[1], 5, a.size))  # jax: padded indices are the input sizes
    _same(i2, _padded(inter[2], 5, b.size))
    _same(d, _padded(diff, 4, 0))  # jax: setdiff1d pads with 0
    _same(x, _padded(xor, 8, xor.min()))
    _same(u3, union[:3])
    _same(x2, _padded(xor, 8, -1))
    # an empty intersection pads with 0; assume_unique under jit
    g = nova.jit(lambda x, y: sets.intersect1d(x, y, size=2))
    _same(g(np.array([1, 2], np.int32), np.array([3, 4], np.int32)), np.array([0, 0]))
    h = nova.jit(lambda x, y: sets.setdiff1d(x, y, assume_unique=True, size=3, fill_value=-5))
    _same(h(np.array([9, 1, 4, 7], np.int32), np.array([4, 2, 9], np.int32)),
          np.array([1, 7, -5]))


def test_set_operations_errors():
    for fn in (sets.union1d, sets.intersect1d, sets.setdiff1d, sets.setxor1d):
        with pytest.raises(ConcretizationTypeError, match=fr"{fn.__name__}: .*size="):
            nova.jit(fn)(INTS, OTHER)
    with pytest.raises(ValueError, match="union1d: .*fill_value must be given"):
        sets.union1d(np.array([], np.int32), np.array([], np.int32), size=2)
    with pytest.raises(ValueError, match="setxor1d: size must be non-negative"):
        sets.setxor1d(INTS, OTHER, size=-3)


# --- histograms -----------------------------------------------------------------------------

DATA = RNG.normal(size=200)
W = RNG.uniform(0, 2, 200)


@pytest.mark.parametrize("kw", [
    {},
    {"bins": 7},
    {"bins": 5, "range": (-1.0, 1.0)},  # outliers dropped
    {"bins": np.array([-3.0, -1.0, 0.0, 0.5, 4.0])},
    {"bins": 6, "weights": W},
    {"bins": 6, "density": True},
    {"bins": 4, "weights": W, "density": True},
], ids=lambda kw: ",".join(kw) or "default")
def test_histogram_against_numpy(kw):
    counts, edges = sets.histogram(DATA, **kw)
    wc, we = np.histogram(DATA, **kw)
    _same(counts, wc)
    _same(edges, we)
    _same(sets.histogram_bin_edges(DATA, kw.get("bins", 10), kw.get("range")),
          np.histogram_bin_edges(DATA, kw.get("bins", 10), kw.get("range")))


def test_histogram_edge_cases():
    # values on the edges: the last bin is closed
    x = np.array([0.0, 1.0, 2.0, 3.0, 4.0, 4.0])
    for g, w in zip(sets.histogram(x, bins=4), np.histogram(x, bins=4), strict=True):
        _same(g, w)
    # degenerate range, integers, empty input, NaN with an explicit range
    for g, w in zip(sets.histogram(np.array([2, 2, 2]), bins=3),
                    np.histogram(np.array([2, 2, 2]), bins=3), strict=True):
        _same(g, w)
    for g, w in zip(sets.histogram(np.array([], np.float64), bins=3),
                    np.histogram(np.array([], np.float64), bins=3), strict=True):
        _same(g, w)
    y = np.array([0.5, np.nan, 1.5, 9.0])
    for g, w in zip(sets.histogram(y, bins=2, range=(0, 2)),
                    np.histogram(y, bins=2, range=(0, 2)), strict=True):
        _same(g, w)
    assert sets.histogram(DATA.astype(np.float32))[1].dtype == np.float32


def test_histogram_under_jit():
    f = nova.jit(lambda x, w: sets.histogram(x, bins=8, weights=w))
    for g, w in zip(f(DATA, W), np.histogram(DATA, bins=8, weights=W), strict=True):
        _same(g, w)
    g = nova.jit(lambda x: sets.histogram_bin_edges(x, 6))
    _same(g(DATA), np.histogram_bin_edges(DATA, 6))


def test_histogram_errors():
    with pytest.raises(ValueError, match="`bins` must be positive"):
        sets.histogram(DATA, bins=0)
    with pytest.raises(ValueError, match="must increase monotonically"):
        sets.histogram(DATA, bins=[3.0, 1.0, 2.0])
    with pytest.raises(ValueError, match="max must be larger than min"):
        sets.histogram(DATA, range=(2, 1))
    with pytest.raises(ValueError, match=r"range must be None or a \(min, max\) pair"):
        sets.histogram(DATA, range=(1, 2, 3))
    with pytest.raises(ValueError, match="autodetected range of .*not finite"):
        sets.histogram(np.array([1.0, np.nan]))
    with pytest.raises(ValueError, match=r"weights of shape \(3,\) must have a's shape \(200,\)"):
        sets.histogram(DATA, weights=np.ones(3))
    with pytest.raises(NotImplementedError, match="string bins"):
        sets.histogram(DATA, bins="auto")
    with pytest.raises(TypeError, match="bins must be an integer"):
        sets.histogram(DATA, bins=2.5)


def test_histogram2d_and_dd_against_numpy():
    x, y, z = DATA[:100], DATA[100:], RNG.uniform(-1, 1, 100)
    for kw in ({}, {"bins": 4}, {"bins": [3, 5], "range": [[-1, 1], None]},
               {"bins": [np.array([-2.0, 0.0, 2.0]), 3]}, {"bins": 3, "weights": W[:100]},
               {"bins": 3, "density": True}):
        got = sets.histogram2d(x, y, **kw)
        want = np.histogram2d(x, y, **kw)
        for g, w in zip(got, want, strict=True):
            _same(g, w)
    sample = np.stack([x, y, z], axis=1)
    for kw in ({"bins": 3}, {"bins": (2, 3, 4), "density": True},
               {"bins": 2, "weights": W[:100], "range": [(-1, 1), (-2, 2), None]}):
        h, e = sets.histogramdd(sample, **kw)
        wh, we = np.histogramdd(sample, **kw)
        _same(h, wh)
        assert len(e) == 3
        for g, w in zip(e, we, strict=True):
            _same(g, w)
    # NumPy's (D, N) sequence form, and a 1-d sample
    _same(sets.histogramdd([x, y], bins=3)[0], np.histogramdd([x, y], bins=3)[0])
    _same(sets.histogramdd(x, bins=4)[0], np.histogramdd(x, bins=4)[0])
    f = nova.jit(lambda s: sets.histogramdd(s, bins=(2, 3, 2)))
    h, e = f(sample)
    _same(h, np.histogramdd(sample, bins=(2, 3, 2))[0])


def test_histogram2d_and_dd_errors():
    with pytest.raises(ShapeError, match=r"x and y must be 1-d of one length.*\(3,\) and \(4,\)"):
        sets.histogram2d(np.ones(3), np.ones(4))
    with pytest.raises(ValueError, match=r"weights of shape \(2,\) must have one weight per "
                                          r"sample, shape \(5,\)"):
        sets.histogramdd(np.ones((5, 2)), weights=np.ones(2))
    with pytest.raises(ValueError, match=r"bins must be an int or have one entry per "
                                          r"dimension \(2\), got 3"):
        sets.histogramdd(np.ones((5, 2)), bins=[2, 2, 2])
    with pytest.raises(ValueError, match="range must be a sequence of 2"):
        sets.histogramdd(np.ones((5, 2)), range=[(0, 1)])
    with pytest.raises(ValueError, match=r"sample must be an \(N, D\) array"):
        sets.histogramdd(np.ones((2, 2, 2)))


# --- lexsort, partition ---------------------------------------------------------------------


def test_lexsort_against_numpy():
    k1 = np.array([1, 1, 0, 2, 0, 1], np.int32)
    k2 = np.array([3.0, 1.0, 3.0, np.nan, 1.0, 3.0], np.float32)
    k3 = np.array([True, False, True, False, True, False])
    for keys in ([k1], [k1, k2], [k2, k1], [k3, k1, k2]):
        got = sets.lexsort(keys)
        _same(got, np.lexsort(keys))
    _same(sets.lexsort(np.stack([k1, k1[::-1]])), np.lexsort(np.stack([k1, k1[::-1]])))
    m1 = RNG.integers(0, 3, (3, 4))
    m2 = RNG.integers(0, 3, (3, 4))
    for axis in (0, 1, -1):
        _same(sets.lexsort([m1, m2], axis=axis), np.lexsort([m1, m2], axis=axis))
    f = nova.jit(lambda a, b: sets.lexsort([a, b]))
    _same(f(k1, k2), np.lexsort([k1, k2]))


def test_lexsort_errors():
    with pytest.raises(TypeError, match="need a sequence of keys"):
        sets.lexsort([])
    with pytest.raises(ShapeError, match=r"same shape, got \(3,\), \(4,\)"):
        sets.lexsort([np.ones(3), np.ones(4)])
    with pytest.raises(ValueError, match="axis 1 is out of bounds"):
        sets.lexsort([np.ones(3)], axis=1)


@pytest.mark.parametrize("kth", [0, 3, -1, [1, 4]])
def test_partition_contract(kth):
    x = np.array([[3.0, np.nan, 1.0, 7.0, 2.0, 2.0], [0.0, -1.0, 5.0, 4.0, 4.0, 9.0]],
                 np.float32)
    srt = np.sort(x, axis=-1)
    got = np.asarray(sets.partition(x, kth))
    ap = np.asarray(sets.argpartition(x, kth))
    for k in np.atleast_1d(kth):
        _same(got[:, k], srt[:, k])
        _same(np.take_along_axis(x, ap, -1)[:, k], srt[:, k])
        _same(np.partition(x, kth)[:, k], got[:, k])
    y = np.array([4, 1, 3, 3, 0, 2, 5], np.int32)
    for k in np.atleast_1d(kth):
        p = np.asarray(sets.partition(y, kth))
        assert np.all(p[:k % 7] <= p[k]) and np.all(p[k % 7:] >= p[k]), p
    _same(sets.partition(x, 1, axis=0), np.partition(x, 1, axis=0))
    _same(sets.partition(x, 2, axis=None), np.partition(x, 2, axis=None))
    f = nova.jit(lambda a: sets.argpartition(a, 1, axis=0))
    _same(np.take_along_axis(x, np.asarray(f(x)), 0), np.sort(x, axis=0))


def test_partition_errors():
    with pytest.raises(ValueError, match=r"partition: kth\(=6\) out of bounds \(6\)"):
        sets.partition(np.ones(6), 6)
    with pytest.raises(ValueError, match=r"argpartition: kth\(=-7\) out of bounds"):
        sets.argpartition(np.ones(6), [1, -7])
    with pytest.raises(TypeError, match="kth must be an integer"):
        sets.partition(np.ones(6), 1.5)


# --- delete, insert -------------------------------------------------------------------------

M = np.arange(12, dtype=np.float32).reshape(3, 4)


@pytest.mark.parametrize("obj,axis", [
    (1, None), (-1, 0), (2, 1), (slice(1, 3), 1), (slice(None, None, 2), None),
    ([0, 2, 2], 1), (np.array([-1, 0]), 0), ([], 1), (np.array([True, False, True]), 0),
])
def test_delete_against_numpy(obj, axis):
    _same(sets.delete(M, obj, axis=axis), np.delete(M, obj, axis=axis))


def test_delete_traced_indices():
    f = nova.jit(lambda o: sets.delete(M, o, axis=1, assume_unique_indices=True))
    _same(f(np.array([3, 0], np.int32)), np.delete(M, [3, 0], axis=1))
    _same(f(np.array([-1, 1], np.int32)), np.delete(M, [-1, 1], axis=1))
    g = nova.jit(lambda a: sets.delete(a, [0, 2]))
    _same(g(M), np.delete(M, [0, 2]))
    with pytest.raises(ConcretizationTypeError, match="delete: obj is traced.*assume_unique"):
        nova.jit(lambda o: sets.delete(M, o, axis=1))(np.array([1], np.int32))


def test_delete_errors():
    with pytest.raises(IndexError, match="index 4 is out of bounds for axis 0 with size 3"):
        sets.delete(M, 4, axis=0)
    with pytest.raises(IndexError, match="index -5 is out of bounds for axis 1 with size 4"):
        sets.delete(M, [0, -5], axis=1)
    with pytest.raises(ValueError, match=r"boolean obj must be 1-d of the axis' length 3, got "
                                          r"shape \(2,\)"):
        sets.delete(M, np.array([True, False]), axis=0)
    with pytest.raises(TypeError, match="obj must be integers"):
        sets.delete(M, np.array([1.0]), axis=0)


@pytest.mark.parametrize("obj,values,axis", [
    (1, 99, None), (0, [7, 8], None), (-1, 5, 0), (2, [7, 8, 9], 1), (1, [[7], [8], [9]], 1),
    ([1], [7, 8, 9, 6], 0), ([1, 1, 4], [7, 8, 9], 1), (slice(0, 4, 2), [5, 6], 1),
    (np.array([3, 0]), 0, 0), (4, [1, 2, 3], 1), ([], 5, 0),
])
def test_insert_against_numpy(obj, values, axis):
    _same(sets.insert(M, obj, values, axis=axis), np.insert(M, obj, values, axis=axis))


def test_insert_under_jit_and_errors():
    f = nova.jit(lambda a, v: sets.insert(a, [0, 2], v, axis=0))
    _same(f(M, np.float32(-1)), np.insert(M, [0, 2], -1, axis=0))
    _same(sets.insert(np.array([1, 2], np.int32), 1, 2.7), np.insert(np.array([1, 2]), 1, 2.7))
    with pytest.raises(IndexError, match="index 5 is out of bounds for axis 1 with size 4"):
        sets.insert(M, 5, 0, axis=1)
    with pytest.raises(ValueError, match=r"1-d sequence of ints, got shape \(1, 1\)"):
        sets.insert(M, [[1]], 0, axis=1)
    with pytest.raises(TypeError, match="obj must be integers or a slice, got float64"):
        sets.insert(M, 1.0, 0, axis=1)
    with pytest.raises(ShapeError, match=r"values of shape \(3,\) do not broadcast to the "
                                          r"inserted shape \(3, 2\)"):
        sets.insert(M, [0, 1], [1, 2, 3], axis=1)
    with pytest.raises(ConcretizationTypeError, match="insert: obj must be static"):
        nova.jit(lambda o: sets.insert(M, o, 0, axis=1))(np.array([1], np.int32))


# --- compress, extract, choose, resize, trim_zeros ------------------------------------------


def test_compress_extract_against_numpy():
    cond = np.array([True, False, True])
    for axis in (None, 0, 1, -1):
        _same(sets.compress(cond, M, axis=axis), np.compress(cond, M, axis=axis))
    _same(sets.compress([0, 1, 1, 0, 0], M, axis=1), np.compress([0, 1, 1, 0, 0], M, axis=1))
    _same(sets.compress([], M, axis=0), np.compress([], M, axis=0))
    c = M % 3 == 0
    _same(sets.extract(c, M), np.extract(c, M))
    _same(sets.extract(M % 2, M), np.extract(M % 2, M))


def test_compress_extract_size_under_jit():
    cond = np.array([False, True, False, True], bool)
    f = nova.jit(lambda c, a: sets.compress(c, a, axis=1, size=3, fill_value=-1))
    want = np.full((3, 3), -1, np.float32)
    want[:, :2] = np.compress(cond, M, axis=1)
    _same(f(cond, M), want)
    g = nova.jit(lambda c, a: sets.extract(c, a, size=3))
    _same(g(M > 8, M), _padded(np.extract(M > 8, M), 3, 0))
    _same(g(M > 4, M), np.extract(M > 4, M)[:3])
    # a traced array with a concrete condition needs no size
    h = nova.jit(lambda a: sets.compress(np.array([True, False, True]), a, axis=0))
    _same(h(M), np.compress([True, False, True], M, axis=0))


def test_compress_extract_errors():
    with pytest.raises(ConcretizationTypeError, match="compress: .*condition.*size="):
        nova.jit(lambda c: sets.compress(c, M, axis=0))(np.array([True, False, True]))
    with pytest.raises(ConcretizationTypeError, match="extract: .*size="):
        nova.jit(lambda c: sets.extract(c, M))(M > 3)
    with pytest.raises(ValueError, match=r"condition must be 1-d, got shape \(3, 4\)"):
        sets.compress(M > 2, M, axis=0)
    with pytest.raises(ValueError, match="condition has 5 entries for an axis of length 3"):
        sets.compress([1, 0, 0, 0, 1], M, axis=0)


def test_choose_against_numpy():
    a = np.array([[0, 1, 2, 1], [2, 0, 1, 0], [1, 1, 0, 2]], np.int32)
    choices = [M, M * 10, np.float32(-1)]
    _same(sets.choose(a, choices), np.choose(a, choices))
    b = np.array([0, 4, -1, 2], np.int32)
    ch = np.arange(12, dtype=np.int32).reshape(3, 4)  # an array: its rows are the choices
    for mode in ("wrap", "clip"):
        _same(sets.choose(b, ch, mode=mode), np.choose(b, ch, mode=mode))
        _same(nova.jit(lambda i, m=mode: sets.choose(i, ch, mode=m))(b),
              np.choose(b, ch, mode=mode))


def test_choose_errors():
    ch = [np.zeros(4), np.ones(4)]
    with pytest.raises(ValueError, match=r"invalid entry 2 in choice array a: must be in \[0, 2\)"):
        sets.choose(np.array([0, 2, 1, 0]), ch)
    with pytest.raises(ConcretizationTypeError, match="mode='raise' needs concrete a"):
        nova.jit(lambda i: sets.choose(i, ch))(np.array([0, 1, 1, 0]))
    with pytest.raises(TypeError, match="a must be an integer array, got float32"):
        sets.choose(np.zeros(4, np.float32), ch)
    with pytest.raises(ValueError, match="mode must be 'raise', 'wrap' or 'clip'"):
        sets.choose(np.array([0, 1, 1, 0]), ch, mode="bogus")
    with pytest.raises(ValueError, match="choices must not be empty"):
        sets.choose(np.array([0]), [])
    with pytest.raises(ShapeError, match="choose: operands could not be broadcast"):
        sets.choose(np.array([0, 1, 1]), ch)


def test_resize_against_numpy():
    for shape in ((2, 3), 7, (3, 5), (0,), (2, 0, 3), ()):
        _same(sets.resize(M, shape), np.resize(M, shape))
    _same(sets.resize(np.array([], np.int32), (2, 2)), np.resize(np.array([], np.int32), (2, 2)))
    _same(nova.jit(lambda a: sets.resize(a, (5, 5)))(M), np.resize(M, (5, 5)))
    with pytest.raises(ValueError, match=r"new_shape must be non-negative, got \(2, -1\)"):
        sets.resize(M, (2, -1))
    with pytest.raises(TypeError, match="new_shape must be an integer"):
        sets.resize(M, (2.0, 3))


def test_trim_zeros_against_numpy():
    x = np.array([0, 0, 1, 2, 0, 3, 0, 0], np.int32)
    for trim in ("fb", "f", "b", "BF"):
        _same(sets.trim_zeros(x, trim), np.trim_zeros(x, trim))
    _same(sets.trim_zeros(np.zeros(3)), np.trim_zeros(np.zeros(3)))
    m = np.zeros((4, 5), np.float32)
    m[1, 2], m[2, 3] = 1.0, 2.0
    _same(sets.trim_zeros(m), np.trim_zeros(m))
    _same(sets.trim_zeros(m, axis=1), np.trim_zeros(m, axis=1))
    with pytest.raises(ValueError, match="unexpected character.*'x'"):
        sets.trim_zeros(x, "x")
    with pytest.raises(ConcretizationTypeError, match="trim_zeros: .*concrete"):
        nova.jit(sets.trim_zeros)(x)


def test_wired_into_nova_numpy():
    """nova.numpy exports the family: its names are these functions."""
    import nova.numpy as jnp

    for name in sets.__all__:
        assert getattr(jnp, name) is getattr(sets, name), name
