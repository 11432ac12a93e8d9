"""frompyfunc, reduceat and at of every ufunc, bool //, % and **, and mean with an integer dtype
or an empty axis, against jax.numpy and NumPy (eager, nova.jit, nova.vmap, nova.grad)."""

import jax
import jax.numpy as jjnp
import nova.numpy as jnp
import numpy as np
import pytest

import nova

RNG = np.random.default_rng(7)
X = RNG.uniform(0.5, 2.0, (3, 6)).astype(np.float32)
IDX = np.array([0, 4, 1, 5], np.int32)  # a decreasing pair (4 > 1) and a last segment


def close(got, want, rtol=1e-5, atol=1e-6):
    got = np.asarray(got)
    want = np.asarray(want)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)


def affine(x, y):
    return x * y + 1


# --- frompyfunc ---------------------------------------------------------------------------------


def test_frompyfunc_methods_match_jnp():
    u, ref = jnp.frompyfunc(affine, 2, 1), jjnp.frompyfunc(affine, 2, 1)
    assert (u.nin, u.nout, u.nargs, u.identity, u.__name__) == (2, 1, 3, None, "affine")
    assert isinstance(u, jnp.ufunc)
    a, b = X[0], X[1]
    close(u(a, b), ref(a, b))
    close(u(X, 2.0), ref(X, 2.0))
    close(u(X[:, :1], X[0]), ref(X[:, :1], X[0]))  # broadcasting
    close(u.outer(a[:3], b), ref.outer(a[:3], b))
    close(u.reduce(X, axis=1), ref.reduce(X, axis=1), rtol=1e-4)
    close(u.reduce(X, axis=0, initial=2.0), ref.reduce(X, axis=0, initial=2.0), rtol=1e-4)
    close(u.accumulate(X, axis=1), ref.accumulate(X, axis=1), rtol=1e-4)
    idx = np.array([0, 0, 3, 5])
    close(u.at(a, idx, 2.5, inplace=False), ref.at(a, idx, 2.5, inplace=False))
    close(u.reduceat(X, IDX, axis=1), ref.reduceat(X, IDX, axis=1), rtol=1e-4)
    ints = np.arange(1, 7, dtype=np.int32)
    close(u.reduce(ints), ref.reduce(ints))
    close(u.accumulate(ints), ref.accumulate(ints))
    # a function that is not elementwise on arrays sees scalars (it is vectorized), as jnp's
    s = jnp.frompyfunc(lambda x, y: jnp.sum(x) + y, 2, 1)
    close(s(np.ones(3, np.float32), 1.0), np.full(3, 2.0, np.float32))


def test_frompyfunc_identity_where_and_other_arities():
    u = jnp.frompyfunc(jnp.add, 2, 1, identity=0)
    ref = jjnp.frompyfunc(jjnp.add, 2, 1, identity=0)
    close(u.reduce(np.zeros(0, np.float32)), ref.reduce(np.zeros(0, np.float32)))
    w = np.array([True, False, True, True, False, True])
    close(u.reduce(X[0], where=w), ref.reduce(X[0], where=w))
    v, vref = jnp.frompyfunc(affine, 2, 1), jjnp.frompyfunc(affine, 2, 1)
    close(v.reduce(X[0], where=w, initial=1.0), vref.reduce(X[0], where=w, initial=1.0),
          rtol=1e-4)
    dbl = jnp.frompyfunc(lambda x: x * 2, 1, 1)
    assert (dbl.nin, dbl.nargs) == (1, 2)
    close(dbl(X), X * 2)
    close(dbl.at(X[0], np.array([0, 0, 2]), inplace=False),
          jjnp.frompyfunc(lambda x: x * 2, 1, 1).at(X[0], np.array([0, 0, 2]), inplace=False))
    two = jnp.frompyfunc(lambda x, y: (x + y, x - y), 2, 2)
    got = two(X[0], 1.0)
    assert isinstance(got, tuple) and len(got) == 2
    close(got[0], X[0] + 1)
    close(got[1], X[0] - 1)
    three = jnp.frompyfunc(lambda x, y, z: x + y * z, 3, 1)
    close(three(X[0], X[1], 2.0), X[0] + X[1] * 2)


def test_frompyfunc_under_jit_vmap_and_grad():
    u, ref = jnp.frompyfunc(affine, 2, 1), jjnp.frompyfunc(affine, 2, 1)
    close(nova.jit(lambda x: u.reduce(x, axis=1))(X), ref.reduce(X, axis=1), rtol=1e-4)
    close(nova.jit(lambda x: u.accumulate(x, axis=0))(X), ref.accumulate(X, axis=0), rtol=1e-4)
    close(nova.vmap(lambda r: u.reduce(r))(X), jax.vmap(lambda r: ref.reduce(r))(X), rtol=1e-4)
    close(nova.vmap(u)(X, X[::-1]), jax.vmap(ref)(X, X[::-1]))
    g = nova.grad(lambda x: u.reduce(x, axis=1).sum())(X)
    close(g, jax.grad(lambda x: ref.reduce(x, axis=1).sum())(X), rtol=1e-4)
    g = nova.grad(lambda x: u.reduceat(x, IDX, axis=1).sum())(X)
    close(g, jax.grad(lambda x: ref.reduceat(x, IDX, axis=1).sum())(X), rtol=1e-4)


def test_frompyfunc_bad_inputs():
    with pytest.raises(TypeError, match="nin must be an integer"):
        jnp.frompyfunc(affine, 1.5, 1)
    with pytest.raises(TypeError, match="nout must be an integer"):
        jnp.frompyfunc(affine, 2, "1")
    with pytest.raises(ValueError, match="nin must be at least 1, got 0"):
        jnp.frompyfunc(affine, 0, 1)
    with pytest.raises(ValueError, match="nout must be at least 1, got -1"):
        jnp.frompyfunc(affine, 2, -1)
    with pytest.raises(TypeError, match="func must be callable, got int"):
        jnp.frompyfunc(3, 2, 1)
    u = jnp.frompyfunc(affine, 2, 1)
    with pytest.raises(TypeError, match=r"takes 2 operand\(s\) \(nin=2\), got 1"):
        u(X)
    with pytest.raises(TypeError, match="keyword arguments"):
        u(X, y=X)
    with pytest.raises(ValueError, match="returned 2 value"):
        jnp.frompyfunc(lambda x, y: (x, y), 2, 1)(X, X)
    unary = jnp.frompyfunc(lambda x: x, 1, 1)
    for method in ("outer", "reduce", "accumulate", "reduceat"):
        args = (X[0], X[0]) if method == "outer" else (X[0],) + ((IDX,) if method ==
                                                                "reduceat" else ())
        with pytest.raises(ValueError, match=rf"{method} is only supported for binary"):
            getattr(unary, method)(*args)
    two = jnp.frompyfunc(lambda x, y: (x, y), 2, 2)
    with pytest.raises(ValueError, match="reduce is only supported for ufuncs with one output"):
        two.reduce(X[0])
    with pytest.raises(ValueError, match="nin=2, nout=2"):
        two.at(X[0], 0, 1.0, inplace=False)
    with pytest.raises(ValueError, match="unary ufunc takes no b"):
        unary.at(X[0], 0, 1.0, inplace=False)
    with pytest.raises(ValueError, match="inplace=False"):
        u.at(X[0], 0, 1.0)
    with pytest.raises(ValueError, match="empty axis needs an identity"):
        u.reduce(np.zeros(0, np.float32))


# --- reduceat of every ufunc --------------------------------------------------------------------


def left_folds(fn, x, idx, axis):
    """numpy.ufunc.reduceat's definition, written out: each segment folded left to right."""
    x = np.moveaxis(np.asarray(x), axis, 0)
    ends = list(idx[1:]) + [len(x)]
    out = []
    for i, e in zip(idx, ends, strict=True):
        acc = x[i]
        for j in range(i + 1, e):
            acc = fn(acc, x[j])
        out.append(acc)
    return np.moveaxis(np.stack(out), 0, axis)


@pytest.mark.parametrize("name", ["subtract", "logaddexp", "logaddexp2", "divide", "power",
                                  "arctan2", "hypot", "add", "maximum"])
def test_reduceat_matches_numpy(name):
    # NumPy 2.4's power and arctan2 reduce/reduceat combine only a segment's first and last
    # entries (0.7 ** 1.3 ** 1.9 ** 0.6 gives 0.7 ** 0.6), so the reference is the fold itself;
    # NumPy's own reduceat is checked where it folds.
    u, ref = getattr(jnp, name), getattr(np, name)
    for x, idx, axis in ((X[0], IDX, 0), (X, IDX, 1), (X, np.array([2, 0]), 0)):
        want = left_folds(ref, x, idx, axis)
        close(u.reduceat(x, idx, axis=axis), want, rtol=2e-5)
        if name not in ("power", "arctan2"):
            close(u.reduceat(x, idx, axis=axis), ref.reduceat(x, idx, axis=axis), rtol=2e-5)


@pytest.mark.parametrize("name", ["subtract", "logaddexp"])
def test_reduceat_matches_jnp_under_jit_vmap_grad(name):
    u, ref = getattr(jnp, name), getattr(jjnp, name)
    close(u.reduceat(X, IDX, axis=1), ref.reduceat(X, IDX, axis=1), rtol=2e-5)
    got = nova.jit(lambda x, i: u.reduceat(x, i, axis=1))(X, IDX)  # traced indices
    close(got, ref.reduceat(X, IDX, axis=1), rtol=2e-5)
    close(nova.vmap(lambda r: u.reduceat(r, IDX))(X), jax.vmap(lambda r: ref.reduceat(r, IDX))(X),
          rtol=2e-5)
    rows = np.array([[0, 3], [1, 2], [5, 0]], np.int32)
    close(nova.vmap(u.reduceat)(X, rows), jax.vmap(ref.reduceat)(X, rows), rtol=2e-5)
    w = np.arange(1.0, 5.0, dtype=np.float32)
    g = nova.grad(lambda x: (u.reduceat(x, IDX) * w).sum())(X[0])
    close(g, jax.grad(lambda x: (ref.reduceat(x, IDX) * w).sum())(X[0]), rtol=1e-4)


def test_reduceat_fold_dtypes_and_errors():
    i8 = np.arange(8, dtype=np.int8) * 20  # wraps in int8
    close(jnp.subtract.reduceat(i8, IDX), jjnp.subtract.reduceat(i8, IDX))
    close(jnp.subtract.reduceat(i8, IDX), np.subtract.reduceat(i8, IDX))
    ints = np.arange(8, dtype=np.int32)
    close(jnp.logaddexp.reduceat(ints, IDX),  # jnp fails here; NumPy's values, float32
          np.logaddexp.reduceat(ints.astype(np.float32), IDX))
    close(jnp.divide.reduceat(ints + 1, IDX), np.divide.reduceat(ints + 1, IDX).astype(np.float32))
    close(jnp.subtract.reduceat(ints, IDX, dtype=jnp.float32),
          np.subtract.reduceat(ints, IDX, dtype=np.float32))
    empty = jnp.subtract.reduceat(X, np.array([], np.int32), axis=1)
    assert empty.shape == (3, 0) and empty.dtype == np.float32
    with pytest.raises(TypeError, match="boolean subtract"):
        jnp.subtract.reduceat(np.ones(4, bool), np.array([0, 2]))
    with pytest.raises(IndexError, match="index 9 is out of bounds"):
        jnp.logaddexp.reduceat(X[0], np.array([0, 9]))
    with pytest.raises(TypeError, match="1-d integer array"):
        jnp.subtract.reduceat(X[0], np.array([0.5]))
    with pytest.raises(TypeError, match="cannot hold the results"):
        jnp.divide.reduceat(ints, IDX, dtype=jnp.int32)


# --- at of every ufunc --------------------------------------------------------------------------


def np_at(name, a, idx, b):
    out = np.array(a)
    getattr(np, name).at(out, idx, b)
    return out


@pytest.mark.parametrize("name", ["divide", "logaddexp", "power", "subtract", "maximum"])
def test_at_matches_numpy(name):
    u = getattr(jnp, name)
    idx = np.array([0, 0, 3, 5, 3])
    b = X[1, :5]
    close(u.at(X[0], idx, b, inplace=False), np_at(name, X[0], idx, b), rtol=2e-5)
    close(u.at(X[0], np.array([1, 4]), 1.5, inplace=False), np_at(name, X[0], [1, 4], 1.5))
    got = u.at(X, (np.array([0, 2, 0]), np.array([1, 1, 1])), X[2, :3], inplace=False)
    close(got, np_at(name, X, (np.array([0, 2, 0]), np.array([1, 1, 1])), X[2, :3]), rtol=2e-5)
    got = u.at(X, (slice(None), np.array([2, 2])), 1.25, inplace=False)
    close(got, np_at(name, X, (slice(None), np.array([2, 2])), np.float32(1.25)), rtol=2e-5)


def test_at_dtype_jit_vmap_grad():
    # func's dtype, as jnp's generic at (divide.at of ints is float32)
    a = np.arange(4, dtype=np.int32) + 1
    close(jnp.divide.at(a, np.array([0, 0]), 2, inplace=False),
          np.array([0.25, 2, 3, 4], np.float32))
    u, ref = jnp.frompyfunc(affine, 2, 1), jjnp.frompyfunc(affine, 2, 1)
    close(u.at(a, np.array([0, 0]), 2.5, inplace=False),
          ref.at(a, np.array([0, 0]), 2.5, inplace=False))
    idx = np.array([0, 0, 3], np.int32)
    want = jjnp.logaddexp.at(X[0], idx, 1.0, inplace=False)
    close(nova.jit(lambda x, i: jnp.logaddexp.at(x, i, 1.0, inplace=False))(X[0], idx), want)
    rows = np.array([[0, 0], [1, 3], [2, 2]], np.int32)
    close(nova.vmap(lambda x, i: jnp.logaddexp.at(x, i, 1.0, inplace=False))(X, rows),
          jax.vmap(lambda x, i: jjnp.logaddexp.at(x, i, 1.0, inplace=False))(X, rows))
    for i in (idx, np.array([0, 1, 3], np.int32)):  # repeated, and unique (one scatter)
        g = nova.grad(lambda x, i=i: jnp.logaddexp.at(x, i, x[:3], inplace=False).sum())(X[0])
        want = jax.grad(lambda x, i=i: jjnp.logaddexp.at(x, i, x[:3], inplace=False).sum())(X[0])
        close(g, want, rtol=1e-5)
    with pytest.raises(nova.ShapeError, match=r"does not broadcast to a\[indices\].shape"):
        jnp.divide.at(X[0], np.array([0, 1]), np.ones(3, np.float32), inplace=False)


# --- bool //, %, ** -----------------------------------------------------------------------------

T = np.array([True, False, True, False])
F = np.array([True, True, True, True])  # nonzero divisors (integer division by 0 differs: below)


def test_bool_arithmetic_matches_jnp():
    nt, jt = jnp.asarray(T), jjnp.asarray(T)
    for fn in ("floor_divide", "remainder", "mod", "power"):
        close(getattr(jnp, fn)(T, F), getattr(jjnp, fn)(T, F))
        close(getattr(jnp, fn)(True, True), getattr(jjnp, fn)(True, True))
    close(nt // F, jt // F)
    close(nt % F, jt % F)
    close(nt ** jnp.asarray(F), jt ** jjnp.asarray(F))
    close(nt ** 2, jt ** 2)
    close(nt ** 0, jt ** 0)
    close(nt // 1, jt // 1)
    close(1 % jnp.asarray(F), 1 % jjnp.asarray(F))
    close(jnp.power(T, 2.0), jjnp.power(T, 2.0))
    u8 = np.array([1, 2, 3, 4], np.uint8)
    close(jnp.power(T, u8), jjnp.power(T, u8))
    close(jnp.floor_divide(T, u8), jjnp.floor_divide(T, u8))
    q, r = jnp.divmod(T, F)
    close(q, jjnp.floor_divide(T, F))
    close(r, jjnp.remainder(T, F))
    with pytest.raises(ValueError, match="negative integer powers"):
        nt ** -1


def test_bool_arithmetic_under_jit_and_vmap():
    f = nova.jit(lambda a, b: (a // b, a % b, a ** b))
    for got, want in zip(f(T, F), (jjnp.floor_divide(T, F), jjnp.remainder(T, F),
                                   jjnp.power(T, F)), strict=True):
        close(got, want)
    m = np.stack([T, ~T])
    close(nova.vmap(lambda a: a ** 3)(m), jax.vmap(lambda a: a ** 3)(m))
    # integer division by zero is Nova's (0), as for int32 operands
    close(jnp.floor_divide(T, ~F), jnp.floor_divide(T.astype(np.int32), (~F).astype(np.int32)))


# --- mean with an integer dtype or an empty axis ------------------------------------------------


def test_mean_integer_dtype_matches_jnp():
    f = (RNG.uniform(-5, 5, (3, 5)) * 3).astype(np.float32)
    i = RNG.integers(-50, 50, (3, 5)).astype(np.int32)
    for x in (f, i, i.astype(np.int8), T):
        for dt in (jnp.int32, jnp.int8, jnp.uint8, jnp.int16):
            for axis in (None, 0, 1, ()):
                if x.ndim == 1 and axis == 1:
                    continue
                close(jnp.mean(x, axis=axis, dtype=dt), jjnp.mean(x, axis=axis, dtype=dt))
    # the count wraps in the dtype as the sum does (300 counts 44 in int8)
    close(jnp.mean(np.full(300, 3.0, np.float32), dtype=jnp.int8),
          jjnp.mean(np.full(300, 3.0, np.float32), dtype=jjnp.int8))
    close(jnp.mean(np.zeros(0, np.int32)), jjnp.mean(np.zeros(0, np.int32)))  # NaN, float32
    close(jnp.mean(np.zeros((0, 3), np.float16), axis=0),
          jjnp.mean(np.zeros((0, 3), np.float16), axis=0))
    with pytest.raises(TypeError, match="dtype bool is not supported"):
        jnp.mean(T, dtype=bool)


@pytest.mark.parametrize("shape,axis,keepdims", [((0,), None, False), ((2, 0), 1, False),
                                                 ((0, 3), 0, True), ((2, 0), 0, False)])
def test_mean_integer_dtype_of_an_empty_axis(shape, axis, keepdims):
    # jnp gives the integer dtype but divides by a zero count, which XLA leaves undefined (it
    # can kill the CPU process); Nova's integer division by 0 gives 0.
    x = np.zeros(shape, np.int32)
    for dt in (jnp.int32, jnp.uint8, jnp.int16):
        want = jax.eval_shape(lambda v, dt=dt: jjnp.mean(v, axis=axis, dtype=dt,
                                                         keepdims=keepdims), x)
        for got in (jnp.mean(x, axis=axis, dtype=dt, keepdims=keepdims),
                    nova.jit(lambda v, dt=dt: jnp.mean(v, axis=axis, dtype=dt,
                                                       keepdims=keepdims))(x)):
            assert got.shape == want.shape and got.dtype == want.dtype
            np.testing.assert_array_equal(np.asarray(got), np.zeros(want.shape, want.dtype))


def test_mean_under_jit_vmap_grad():
    f = RNG.normal(size=(4, 5)).astype(np.float32) * 4
    close(nova.jit(lambda x: jnp.mean(x, axis=1, dtype=jnp.int32))(f),
          jjnp.mean(f, axis=1, dtype=jjnp.int32))
    close(nova.vmap(lambda x: jnp.mean(x, dtype=jnp.int16))(f),
          jax.vmap(lambda x: jjnp.mean(x, dtype=jjnp.int16))(f))
    close(nova.grad(lambda x: (jnp.mean(x, axis=0) ** 2).sum())(f),
          jax.grad(lambda x: (jjnp.mean(x, axis=0) ** 2).sum())(f))
