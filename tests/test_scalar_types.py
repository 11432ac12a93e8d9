"""nova.numpy's scalar types (jnp.float32 and the others), as jax.numpy's: callable converters
that stand for their dtypes."""

from __future__ import annotations

import nova.numpy as jnp
import numpy as np
import pytest

import nova
from nova import lax

NAMES = ("bool_", "uint8", "uint32", "int32", "int64", "float16", "bfloat16", "float32",
         "float64")


@pytest.mark.parametrize("name", NAMES)
def test_each_scalar_type_converts_and_is_its_dtype(name):
    t = getattr(jnp, name)
    want = np.dtype(t.dtype)
    a = t(1)
    assert isinstance(a, nova.Array) and a.shape == () and a.dtype == want
    assert np.dtype(t) == want and want == t and t == want
    assert hash(t) == hash(want) and {want: name}[t] == name
    assert jnp.zeros(2, t).dtype == want and jnp.ones(3).astype(t).dtype == want
    assert t == name  # a dtype's name compares equal, as np.dtype's does


def test_calls_cast_values_arrays_and_tracers():
    assert int(jnp.int32(3.7)) == 3
    with np.errstate(over="ignore"):  # (NumPy's cast warns of the overflow)
        assert float(jnp.float32(1e40)) == np.inf
    x = jnp.int32(np.array([1.5, -2.5]))
    np.testing.assert_array_equal(np.asarray(x), [1, -2])
    assert x.dtype == np.int32
    f = nova.jit(lambda x: jnp.float32(x) * 2 + jnp.float32(0.5))
    y = f(np.arange(3))
    assert y.dtype == np.float32
    np.testing.assert_array_equal(np.asarray(y), [0.5, 2.5, 4.5])
    with pytest.raises(OverflowError, match="out of bounds for int32"):
        jnp.int32(2 ** 40)


def test_comparisons_and_other_uses():
    assert jnp.float32 != jnp.float64 and not (jnp.float32 == jnp.float64)  # noqa: SIM201
    assert jnp.float64 != None
    assert jnp.float32 == np.float32 and jnp.float32 != "not a dtype"
    assert jnp.issubdtype(jnp.float32, jnp.floating) and not jnp.issubdtype(jnp.int32,
                                                                            jnp.floating)
    assert jnp.finfo(jnp.bfloat16).bits == 16 and jnp.iinfo(jnp.int32).max == 2 ** 31 - 1
    assert repr(jnp.float32) == "nova.numpy.float32"
    x = nova.random.normal(nova.random.PRNGKey(0), (2,), jnp.float64)
    assert x.dtype == np.float64
    assert lax.convert_element_type(x, jnp.float16).dtype == np.float16


def test_lax_iota_takes_a_size_and_broadcasted_iota_a_shape():
    np.testing.assert_array_equal(np.asarray(lax.iota(jnp.int32, 4)), [0, 1, 2, 3])
    b = lax.broadcasted_iota(jnp.int32, (2, 3), 1)
    np.testing.assert_array_equal(np.asarray(b), [[0, 1, 2], [0, 1, 2]])
    with pytest.raises(ValueError, match="dimension 2 out of range"):
        lax.broadcasted_iota(jnp.int32, (2, 3), 2)


def test_review_fixes_negative_iota_and_bfloat16_is_floating():
    with pytest.raises(ValueError, match="negative dimensions are not allowed"):
        lax.iota(jnp.int32, -1)
    assert jnp.issubdtype(jnp.bfloat16, jnp.floating)
    assert jnp.issubdtype(jnp.ones(2, jnp.bfloat16).dtype, jnp.inexact)
    assert not jnp.issubdtype(jnp.bfloat16, jnp.integer)
    assert not jnp.issubdtype(jnp.bfloat16, np.float16)
    assert jnp.issubdtype(jnp.int32, jnp.integer) and not jnp.issubdtype(jnp.int32, jnp.floating)
