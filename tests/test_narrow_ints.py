"""int8, int16 and uint16 (nova/core/dtypes.py): JAX's promotion lattice, wrapping arithmetic
and saturating casts in generated CPU kernels (eagerly and under jit), reductions accumulating
in int32, and the dtype queries promote_types / can_cast / isdtype."""

from __future__ import annotations

import nova.numpy as jnp
import numpy as np
import pytest

import nova
from nova.core import dtypes

NARROW = [np.int8, np.int16, np.uint16]
RNG = np.random.default_rng(11)


def _values(dt, shape):
    info = np.iinfo(dt)
    return RNG.integers(info.min, int(info.max) + 1, shape).astype(dt)


@pytest.mark.parametrize("dt", NARROW)
def test_arrays_keep_their_dtype_and_wrap_as_numpy(dt):
    x, y = _values(dt, (5, 37)), _values(dt, (5, 37))
    y[y == 0] = 1
    a = jnp.asarray(x)
    assert a.dtype == dt and jnp.zeros(3, dt).dtype == dt
    assert getattr(jnp, np.dtype(dt).name)(7).dtype == dt

    def ops(u, v):
        return (u + v, u - v, u * v, u // v, u % v, u >> 3, u << 2, u & v, u | v, u ^ v,
                jnp.maximum(u, v), u < v, -u, jnp.abs(u), u[:, ::-1])

    with np.errstate(over="ignore"):
        want = (x + y, x - y, x * y, x // y, x % y, x >> 3, x << 2, x & y, x | y, x ^ y,
                np.maximum(x, y), x < y, -x, np.abs(x), x[:, ::-1])
    for got in (ops(a, jnp.asarray(y)), nova.jit(ops)(x, y)):
        for g, w in zip(got, want, strict=True):
            g = np.asarray(g)
            assert g.dtype == w.dtype, (g.dtype, w.dtype)
            np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("dt", NARROW)
def test_casts_saturate_and_reductions_accumulate_in_int32(dt):
    info = np.iinfo(dt)
    f = np.linspace(-1e5, 1e5, 101).astype(np.float32)
    f[3] = np.nan
    want = np.clip(np.nan_to_num(f, nan=0.0), info.min, info.max).astype(dt)
    np.testing.assert_array_equal(np.asarray(nova.jit(lambda v: v.astype(dt))(f)), want)
    x = _values(dt, (4, 300))
    s = nova.jit(lambda v: (jnp.sum(v, axis=1), jnp.cumsum(v, axis=1), jnp.max(v),
                            jnp.prod(v[:, :3], axis=1)))(x)
    # as jnp: sums and products accumulate in the 32-bit int of the same signedness, cumsum
    # keeps the dtype (and wraps, as NumPy's cumsum with dtype=dt)
    acc = np.uint32 if np.dtype(dt).kind == "u" else np.int32
    assert s[0].dtype == acc and s[1].dtype == dt and s[2].dtype == dt
    np.testing.assert_array_equal(np.asarray(s[0]), x.astype(np.int64).sum(1).astype(acc))
    np.testing.assert_array_equal(np.asarray(s[1]), np.cumsum(x, 1, dtype=dt))
    assert int(s[2]) == int(x.max())
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(np.asarray(s[3]),
                                      np.prod(x[:, :3].astype(acc), 1, dtype=acc))
    back = nova.jit(lambda v: (v.astype(jnp.float32) * 0.5, v.astype(jnp.int32),
                               v.astype(jnp.uint8)))(x)
    np.testing.assert_array_equal(np.asarray(back[0]), x.astype(np.float32) * 0.5)
    np.testing.assert_array_equal(np.asarray(back[1]), x.astype(np.int32))
    np.testing.assert_array_equal(np.asarray(back[2]), x.astype(np.uint8))  # wraps, as NumPy


def test_promotion_follows_jax():
    r = jnp.result_type
    assert r(jnp.int8, jnp.uint8) == np.int16
    assert r(jnp.uint16, jnp.int16) == np.int32
    assert r(jnp.uint8, jnp.uint16) == np.uint16
    assert r(jnp.int8, 3) == np.int8 and r(jnp.uint16, 1.5) == np.float32
    assert r(jnp.int16, jnp.float16) == np.float16
    assert r(jnp.uint16, jnp.uint32) == np.uint32 and r(jnp.int16, jnp.uint32) == np.int64
    a = jnp.asarray(np.array([100], np.int8)) + jnp.asarray(np.array([200], np.uint8))
    assert a.dtype == np.int16 and int(a[0]) == 300
    assert jnp.promote_types(jnp.int8, jnp.uint8) == np.int16
    assert jnp.promote_types("int32", "float16") == np.float16
    assert jnp.promote_types(jnp.float16, jnp.bfloat16) == np.float32
    assert jnp.promote_types(np.complex64, np.float32) == np.complex64
    with pytest.raises(TypeError, match="not supported"):
        jnp.promote_types(np.uint64, np.float32)


def test_can_cast_and_isdtype():
    assert jnp.can_cast(jnp.int8, jnp.int32) and not jnp.can_cast(jnp.int32, jnp.int8)
    assert not jnp.can_cast(jnp.zeros(2, jnp.int16), jnp.uint16)
    assert jnp.can_cast(jnp.float32, jnp.int8, casting="unsafe")
    assert jnp.can_cast(jnp.float32, jnp.bfloat16, casting="same_kind")
    with pytest.raises(ValueError, match="casting must be"):
        jnp.can_cast(jnp.int8, jnp.int16, casting="sometimes")
    assert jnp.isdtype(jnp.int8, "signed integer") and not jnp.isdtype(jnp.uint16, "signed integer")
    assert jnp.isdtype(jnp.uint16, ("bool", "unsigned integer"))
    assert jnp.isdtype(jnp.bfloat16, "real floating") and jnp.isdtype(jnp.int16, "numeric")
    assert not jnp.isdtype(jnp.bool_, "numeric") and jnp.isdtype(jnp.bool_, "bool")
    assert jnp.isdtype(jnp.float32, jnp.float32) and not jnp.isdtype(jnp.float32, jnp.float64)
    with pytest.raises(TypeError, match="unknown kind 'integer'"):
        jnp.isdtype(jnp.int8, "integer")
    assert dtypes.is_unsigned(np.uint16) and not dtypes.is_unsigned(np.int8)


def test_quantized_matmul_by_hand():
    """A typical int8 use: quantize, multiply in int32, dequantize."""
    w = RNG.standard_normal((16, 8)).astype(np.float32)
    x = RNG.standard_normal((4, 16)).astype(np.float32)

    def qdot(x, w):
        sw = jnp.max(jnp.abs(w)) / 127.0
        q = jnp.round(w / sw).astype(jnp.int8)
        return (x @ q.astype(jnp.float32)) * sw, q

    y, q = nova.jit(qdot)(x, w)
    assert q.dtype == np.int8 and int(jnp.max(jnp.abs(q.astype(jnp.int32)))) == 127
    np.testing.assert_allclose(np.asarray(y), x @ w, atol=0.05)
