"""Result dtypes and values of nova.numpy's reductions, scans and statistics, and of the ufunc
objects' reduce / accumulate / reduceat, swept over every dtype Nova supports (with and without
dtype=) against jax.numpy's.

The reference is JAX's default config (x64 off) with Nova's one difference: int64 and float64
arrays exist and keep their dtype, as under x64, while the defaults stay 32-bit (an int64 mean
is float32, as int64 + 1.0 is in Nova's promotion). So a 64-bit input or dtype= goes to JAX as
its 32-bit counterpart, and a result of that counterpart is read back as the 64-bit dtype;
index results (argmax, count_nonzero, ...) are int32. test_reference_rule_agrees_with_x64
checks that rule against JAX with x64 enabled where both should agree.
"""

import warnings

import jax
import jax.numpy as jx
import ml_dtypes
import numpy as np
import pytest

import nova
import nova.numpy as jnp

DTYPES = [np.dtype(d) for d in (np.bool_, np.uint8, np.uint16, np.uint32, np.int8, np.int16,
                                np.int32, np.int64, np.float16, ml_dtypes.bfloat16, np.float32,
                                np.float64)]
NARROW = {np.dtype(np.int64): np.dtype(np.int32), np.dtype(np.float64): np.dtype(np.float32)}
SHAPE = (3, 4)

# name -> (takes dtype=, extra keyword arguments, result is an index)
FUNCS = {
    "sum": (True, {}, False), "prod": (True, {}, False), "mean": (True, {}, False),
    "var": (True, {}, False), "std": (True, {}, False), "max": (False, {}, False),
    "min": (False, {}, False), "argmax": (False, {}, True), "argmin": (False, {}, True),
    "all": (False, {}, False), "any": (False, {}, False), "cumsum": (True, {}, False),
    "cumprod": (True, {}, False), "cumulative_sum": (True, {"axis": 1}, False),
    "cumulative_prod": (True, {"axis": 1}, False), "nansum": (True, {}, False),
    "nanprod": (True, {}, False), "nanmean": (True, {}, False), "nanvar": (True, {}, False),
    "nanstd": (True, {}, False), "nanmax": (False, {}, False), "nanmin": (False, {}, False),
    "nanargmax": (False, {}, True), "nanargmin": (False, {}, True),
    "nancumsum": (True, {}, False), "nancumprod": (True, {}, False),
    "average": (False, {"axis": 1}, False), "median": (False, {}, False),
    "nanmedian": (False, {}, False), "quantile": (False, {"q": 0.3}, False),
    "percentile": (False, {"q": 40.0}, False), "ptp": (False, {"axis": 0}, False),
    "count_nonzero": (False, {}, True), "trace": (True, {}, False),
    "diff": (False, {}, False), "ediff1d": (False, {}, False),
}
WITH_DTYPE = [n for n, (takes, _, _) in FUNCS.items() if takes]
# A subset of the 12 x 12 (input, dtype=) pairs keeps the sweep fast; it has each kind and
# both 64-bit dtypes on each side.
IN_SUB = [np.dtype(d) for d in ("bool", "uint8", "int16", "int64", "float16", "float64")] + \
    [np.dtype(ml_dtypes.bfloat16)]
DT_SUB = [np.dtype(d) for d in ("bool", "uint8", "int8", "uint32", "int64", "float16",
                                "float32", "float64")]


def _narrow(d):
    return NARROW.get(np.dtype(d), np.dtype(d))


def _first_dtype(tree):
    return np.dtype(jax.tree.leaves(tree)[0].dtype)


def jax_dtype(fn, dtype, kw, index=False):
    """The reference result dtype (see the module docstring), or the exception type."""
    kw32 = {k: (_narrow(v) if k == "dtype" else v) for k, v in kw.items()}
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            r = _first_dtype(jax.eval_shape(lambda a: fn(a, **kw32),
                                            jax.ShapeDtypeStruct(SHAPE, _narrow(dtype))))
    except Exception as e:  # noqa: BLE001 - the reference's failure is the expectation
        return type(e)
    src = np.dtype(kw["dtype"]) if kw.get("dtype") is not None else np.dtype(dtype)
    if not index and src in NARROW and r == NARROW[src]:
        return src
    return r


def nova_dtype(fn, dtype, kw):
    try:
        return _first_dtype(nova.eval_shape(lambda a: fn(a, **kw),
                                            nova.ShapeDtypeStruct(SHAPE, dtype)))
    except Exception as e:  # noqa: BLE001
        return type(e)


def _same(want, got):
    if isinstance(want, type) or isinstance(got, type):  # both must raise (any error type)
        return isinstance(want, type) and isinstance(got, type)
    return want == got


def _check(pairs):
    bad = [(key, want, got) for key, want, got in pairs if not _same(want, got)]
    assert not bad, f"{len(bad)} mismatches (case, jax, nova): {bad[:12]}"


@pytest.mark.parametrize("name", sorted(FUNCS))
def test_function_result_dtypes(name):
    _, kw, index = FUNCS[name]
    _check([((d,), jax_dtype(getattr(jx, name), d, kw, index),
             nova_dtype(getattr(jnp, name), d, kw)) for d in DTYPES])


@pytest.mark.parametrize("name", WITH_DTYPE)
def test_function_result_dtypes_with_dtype_argument(name):
    _, kw, index = FUNCS[name]
    pairs = []
    for d in IN_SUB:
        for dt in DT_SUB:
            k = dict(kw, dtype=dt)
            pairs.append(((d, dt), jax_dtype(getattr(jx, name), d, k, index),
                          nova_dtype(getattr(jnp, name), d, k)))
    _check(pairs)


# --- ufunc objects ------------------------------------------------------------------------
JAX_UFUNCS = ["add", "multiply", "subtract", "maximum", "minimum", "logical_and", "logical_or",
              "logical_xor", "bitwise_and", "bitwise_or", "bitwise_xor", "logaddexp"]
# Nova's subtract and logaddexp have no reduceat yet (NotImplementedError; jnp's fold).
NO_REDUCEAT = ("subtract", "logaddexp")
# Nova's ufunc objects that jnp has only as functions: the reference is jnp.ufunc's generic
# reduce / accumulate over the function (a fold in func's result dtype). (Not floor_divide,
# power, remainder: their bool-by-bool results differ elementwise, a ufuncs.py matter.)
GENERIC = ["divide", "true_divide", "fmax", "fmin", "arctan2", "hypot"]
IDX = np.array([0, 2, 3])


def _jax_ufunc(name):
    fn = getattr(jx, name)
    return fn if isinstance(fn, jx.ufunc) else jx.ufunc(fn, 2, 1)


def _method(u, method, indices):
    if method == "reduceat":
        return lambda a, **k: u.reduceat(a, indices, axis=1, **k)
    return lambda a, **k: getattr(u, method)(a, axis=1, **k)


def _ufunc_cases(name, methods):
    for method in methods:
        yield (method, _method(_jax_ufunc(name), method, jx.asarray(IDX)),
               _method(getattr(jnp, name), method, IDX))


@pytest.mark.parametrize("name", JAX_UFUNCS + GENERIC)
def test_ufunc_method_result_dtypes(name):
    methods = ("reduce", "accumulate") + \
        (("reduceat",) if name in JAX_UFUNCS and name not in NO_REDUCEAT else ())
    _check([((method, d), jax_dtype(jf, d, {}), nova_dtype(nf, d, {}))
            for method, jf, nf in _ufunc_cases(name, methods) for d in DTYPES])


# jnp ignores dtype= in reduceat and raises for maximum/minimum.reduce(dtype=...) and for a
# float dtype= of the logical reductions; Nova honours dtype= there, as NumPy (module docstring
# of nova/numpy_impl/ufunc_objects.py): the result has that dtype, or, for a bitwise ufunc
# and a float input or dtype (as bitwise_and.reduce in jnp), the call raises.
def _honours_dtype(name, method, dt):
    return method == "reduceat" or (method == "reduce" and (
        name in ("maximum", "minimum")
        or name.startswith("logical") and jnp.issubdtype(dt, jnp.floating)))


def _honoured(name, d, dt):
    floats = jnp.issubdtype(d, jnp.floating) or jnp.issubdtype(dt, jnp.floating)
    return TypeError if name.startswith("bitwise") and floats else dt


@pytest.mark.parametrize("name", [n for n in JAX_UFUNCS if n != "logaddexp"] + ["divide"])
def test_ufunc_method_result_dtypes_with_dtype_argument(name):
    methods = ("reduce", "accumulate") + \
        (("reduceat",) if name in JAX_UFUNCS and name not in NO_REDUCEAT else ())
    pairs = []
    for method, jf, nf in _ufunc_cases(name, methods):
        for d in IN_SUB:
            for dt in DT_SUB:
                want = _honoured(name, d, dt) if _honours_dtype(name, method, dt) else \
                    jax_dtype(jf, d, {"dtype": dt})
                pairs.append(((method, d, dt), want, nova_dtype(nf, d, {"dtype": dt})))
    _check(pairs)


# --- values ---------------------------------------------------------------------------------
def _data(dtype):
    rng = np.random.default_rng(3)
    if dtype == np.bool_:
        return rng.random(SHAPE) > 0.4
    if dtype.kind in "iu":
        lo = 0 if dtype.kind == "u" else -60
        return rng.integers(lo, 120, SHAPE).astype(dtype)  # int8/uint8 sums and products wrap
    return rng.uniform(-3, 3, SHAPE).astype(dtype)


VALUE_FUNCS = ["sum", "prod", "mean", "var", "max", "argmin", "any", "cumsum", "cumprod",
               "nansum", "nanmean", "nancumsum", "median", "ptp", "count_nonzero", "trace",
               "diff"]
UFUNC_VALUES = [("add", "reduce"), ("add", "accumulate"), ("add", "reduceat"),
                ("multiply", "reduceat"), ("maximum", "reduceat"), ("subtract", "reduce")]


def _all_results(np_mod, x, idx):
    out = {}
    for name in VALUE_FUNCS:
        if name == "ptp" and x.dtype == np.bool_:
            continue
        out[name] = getattr(np_mod, name)(x, **FUNCS[name][1])
    for name, method in UFUNC_VALUES:
        if name == "subtract" and x.dtype == np.bool_:
            continue
        u = getattr(np_mod, name)
        out[f"{name}.{method}"] = u.reduceat(x, idx, axis=1) if method == "reduceat" else \
            getattr(u, method)(x, axis=1)
    out["divide.reduce"] = np_mod.divide.reduce(x, axis=1) if np_mod is jnp else \
        jx.ufunc(jx.divide, 2, 1).reduce(x, axis=1)
    return out


@pytest.mark.parametrize("dtype", [np.dtype(d) for d in ("bool", "uint8", "int8", "uint16",
                                                         "int64", "float16", "float64")],
                         ids=str)
def test_values_match_jax_under_jit(dtype):
    x = _data(dtype)
    got = nova.jit(lambda a: _all_results(jnp, a, IDX))(x)
    with jax.enable_x64(dtype in NARROW):
        want = jax.jit(lambda a: _all_results(jx, a, jx.asarray(IDX)))(x)
    for key, w in want.items():
        w = np.asarray(w)
        g = np.asarray(got[key])
        assert g.shape == w.shape, key
        if g.dtype.kind == "f" or w.dtype.kind == "f":
            tol = 2e-2 if dtype in (np.float16,) or key in ("prod", "cumprod") else 1e-5
            np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), rtol=tol,
                                       atol=tol, err_msg=key)
        else:
            np.testing.assert_array_equal(g, w.astype(g.dtype), err_msg=key)


def test_reference_rule_agrees_with_x64():
    # Where Nova keeps a 64-bit dtype, JAX with x64 enabled gives the same dtype and values.
    for dtype in NARROW:
        x = _data(dtype)
        with jax.enable_x64(True):
            for name in ("sum", "prod", "cumsum", "max", "ptp", "diff", "nansum", "trace"):
                want = getattr(jx, name)(x, **FUNCS[name][1])
                got = getattr(jnp, name)(x, **FUNCS[name][1])
                assert got.dtype == want.dtype == dtype, name
                np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-12)
            want = jx.add.reduceat(x, jx.asarray(IDX), axis=1)
            got = jnp.add.reduceat(x, IDX, axis=1)
            assert got.dtype == want.dtype == dtype
            np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


def test_narrow_integer_scans_wrap_like_jax():
    x = np.array([100, 100, 100, -128], np.int8)
    for name in ("cumsum", "cumprod", "nancumsum"):
        got, want = getattr(jnp, name)(x), getattr(jx, name)(x)
        assert got.dtype == want.dtype == np.int8
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    u = np.array([200, 100, 7], np.uint8)
    assert jnp.sum(u).dtype == jx.sum(u).dtype == np.uint32 and int(jnp.sum(u)) == 307
    e = np.zeros((0, 3), np.uint8)  # an empty reduction has the reduction's dtype too
    assert jnp.add.reduce(e).dtype == jx.add.reduce(e).dtype == np.uint32
    assert int(jnp.bitwise_and.reduce(e[:, 0])) == int(np.bitwise_and.reduce(e[:, 0])) == 255
    assert jnp.add.reduceat(x, np.array([0, 2])).dtype == np.int8
    np.testing.assert_array_equal(np.asarray(jnp.add.reduceat(x, np.array([0, 2]))),
                                  np.asarray(jx.add.reduceat(x, jx.array([0, 2]))))


def test_integer_divide_reduce_and_accumulate_give_floats():
    x = np.array([[8, 2, 8], [9, 3, 2]], np.int32)
    ref = jx.ufunc(jx.divide, 2, 1)
    for method in ("reduce", "accumulate"):
        got, want = getattr(jnp.divide, method)(x, axis=1), getattr(ref, method)(x, axis=1)
        assert got.dtype == want.dtype == np.float32
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6)
        np.testing.assert_allclose(np.asarray(got), getattr(np.divide, method)(x, axis=1),
                                   rtol=1e-6)
    got = nova.jit(lambda a: jnp.true_divide.reduce(a, axis=0))(x)
    np.testing.assert_allclose(np.asarray(got), np.true_divide.reduce(x, axis=0), rtol=1e-6)


def test_bool_sum_with_bool_dtype_is_an_or():
    x = np.array([[True, True], [False, False]])
    for f in (lambda a: jnp.sum(a, axis=1, dtype=bool), lambda a: jnp.add.reduce(a, axis=1,
                                                                                dtype=bool)):
        np.testing.assert_array_equal(np.asarray(f(x)), [True, False])
    np.testing.assert_array_equal(np.asarray(jx.sum(x, axis=1, dtype=bool)), [True, False])


def test_grad_and_vmap_through_dtype_paths():
    x = np.array([[0.5, 1.5, -2.0], [3.0, 0.25, 1.0]], np.float32)
    g = nova.grad(lambda a: jnp.sum(jnp.cumsum(a, axis=1) * jnp.divide.accumulate(a, axis=1)))
    want = jax.grad(lambda a: jx.sum(jx.cumsum(a, axis=1)
                                     * jx.ufunc(jx.divide, 2, 1).accumulate(a, axis=1)))(x)
    np.testing.assert_allclose(np.asarray(g(x)), np.asarray(want), rtol=1e-5)
    u = np.array([[200, 100], [255, 255]], np.uint8)
    got = nova.vmap(jnp.sum)(u)
    assert got.dtype == np.uint32
    np.testing.assert_array_equal(np.asarray(got), [300, 510])


def test_bad_dtype_arguments_raise():
    x = np.arange(6, dtype=np.int32).reshape(2, 3)
    with pytest.raises(ValueError, match="std: dtype must be a float dtype, got int32"):
        jnp.std(x, dtype=np.int32)
    with pytest.raises(TypeError, match="mean: dtype bool is not supported"):
        jnp.mean(x, dtype=bool)
    with pytest.raises(TypeError, match="nanmean/nanvar: dtype bool"):
        jnp.nanvar(x.astype(np.float32), dtype=bool)
    with pytest.raises(TypeError, match="divide.reduce: dtype int32 cannot hold the results"):
        jnp.divide.reduce(x, dtype=np.int32)
    with pytest.raises(TypeError, match="divide.accumulate: dtype int8 cannot hold"):
        jnp.divide.accumulate(x, dtype=np.int8)
    with pytest.raises(TypeError, match="bool or integer operands, got float32"):
        jnp.bitwise_and.reduce(x.astype(np.float32), dtype=np.int32)
    with pytest.raises(TypeError, match="unknown dtype"):
        jnp.add.reduce(x, dtype="int3")
