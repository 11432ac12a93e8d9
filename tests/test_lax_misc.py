"""nova.lax's round (with RoundingMethod) and bitcast_convert_type, against NumPy's and JAX's
definitions, eagerly and inside compiled (fused) kernels."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import nova
from nova import lax

RNG = np.random.default_rng(7)
TIES = np.array([2.5, -2.5, 0.5, -0.5, 1.5, -1.5, 1.4999999, 0.49999997, -0.3, 0.0, -0.0,
                 np.inf, -np.inf, np.nan, 3.0, 1e30, 8388609.0], np.float32)


# C's round() of TIES: halves away from zero, signed zeros kept
AWAY = np.array([3.0, -3.0, 1.0, -1.0, 2.0, -2.0, 1.0, 0.0, -0.0, 0.0, -0.0, np.inf, -np.inf,
                 np.nan, 3.0, 1e30, 8388609.0], np.float32)


@pytest.mark.parametrize("jit", [False, True])
def test_round_defaults_to_away_from_zero_as_jax(jit):
    f = nova.jit(lax.round) if jit else lax.round
    got = np.asarray(f(TIES))
    want = AWAY
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))
    assert got[0] == 3.0 and got[1] == -3.0 and got[6] == 1.0 and got[7] == 0.0


@pytest.mark.parametrize("jit", [False, True])
def test_round_to_nearest_even_is_numpys(jit):
    def f(v):
        return lax.round(v, lax.RoundingMethod.TO_NEAREST_EVEN)

    got = np.asarray((nova.jit(f) if jit else f)(TIES))
    np.testing.assert_array_equal(got, np.round(TIES))
    # an int is accepted for the method, as JAX's enum is an IntEnum
    np.testing.assert_array_equal(np.asarray(lax.round(TIES, 1)), np.round(TIES))
    np.testing.assert_array_equal(np.asarray(nova.numpy.round(TIES)), np.round(TIES))


def test_round_other_dtypes_gradient_and_errors():
    h = np.array([2.5, -0.5, 1.25], ml_dtypes.bfloat16)
    np.testing.assert_array_equal(np.asarray(lax.round(h)).astype(np.float32), [3.0, -1.0, 1.0])
    f16 = np.array([0.5, 1.5, -2.5], np.float16)
    np.testing.assert_array_equal(np.asarray(lax.round(f16)), np.array([1, 2, -3], np.float16))
    g = nova.grad(lambda v: (lax.round(v) * v).sum())(np.array([0.7, 1.2], np.float32))
    np.testing.assert_allclose(np.asarray(g), [1.0, 1.0])  # d(round)/dx is zero
    with pytest.raises(TypeError, match="floating-point operand, got int32"):
        lax.round(np.arange(3, dtype=np.int32))
    with pytest.raises(ValueError, match="rounding_method must be a RoundingMethod"):
        lax.round(TIES, 5)


SAME_WIDTH = [(np.float32, np.int32), (np.float32, np.uint32), (np.int32, np.float32),
              (np.float16, np.uint16), (ml_dtypes.bfloat16, np.int16), (np.int16, np.float16),
              (np.float64, np.int64), (np.uint8, np.int8)]


def _sample(dtype, shape):
    if np.dtype(dtype).kind in "iu":
        info = np.iinfo(dtype)
        return RNG.integers(info.min, info.max, shape, endpoint=True).astype(dtype)
    return (RNG.standard_normal(shape) * 100).astype(dtype)


@pytest.mark.parametrize("src,dst", SAME_WIDTH)
@pytest.mark.parametrize("jit", [False, True])
def test_bitcast_same_width_is_a_view(src, dst, jit):
    x = _sample(src, (3, 5))
    f = nova.jit(lax.bitcast_convert_type, static_argnums=1) if jit else lax.bitcast_convert_type
    got = np.asarray(f(x, dst))
    assert got.dtype == np.dtype(dst) and got.shape == (3, 5)
    np.testing.assert_array_equal(got.view(np.uint8), x.view(np.uint8))


@pytest.mark.parametrize("src,dst", [(np.float32, np.uint8), (np.float32, ml_dtypes.bfloat16),
                                     (np.float64, np.uint32), (np.uint32, np.int16),
                                     (np.float16, np.int8), (np.int64, np.float32)])
@pytest.mark.parametrize("jit", [False, True])
def test_bitcast_width_changes_round_trip_little_endian(src, dst, jit):
    x = _sample(src, (4, 3))
    f = nova.jit(lax.bitcast_convert_type, static_argnums=1) if jit else lax.bitcast_convert_type
    k = np.dtype(src).itemsize // np.dtype(dst).itemsize
    narrow = np.asarray(f(x, dst))
    assert narrow.dtype == np.dtype(dst) and narrow.shape == (4, 3, k)
    # NumPy's view on a little-endian host is the same layout JAX documents
    np.testing.assert_array_equal(narrow.view(np.uint8), x.view(np.uint8).reshape(4, 3, -1))
    back = np.asarray(f(narrow, src))
    assert back.dtype == np.dtype(src) and back.shape == (4, 3)
    np.testing.assert_array_equal(back.view(np.uint8), x.view(np.uint8))


def test_bitcast_fuses_with_arithmetic_and_has_no_gradient():
    def absval(v):  # clear the sign bit
        bits = lax.bitcast_convert_type(v, np.int32)
        return lax.bitcast_convert_type(lax.bitwise_and(bits, lax.full_like(bits, 0x7FFFFFFF)), np.float32)

    x = (RNG.standard_normal(1000) * 3).astype(np.float32)
    np.testing.assert_array_equal(np.asarray(nova.jit(lambda v: absval(v * 2.0) + 1.0)(x)),
                                  np.abs(x * 2.0) + 1.0)
    g = nova.grad(lambda v: (lax.bitcast_convert_type(v, np.int32).astype(np.float32) + v).sum())
    np.testing.assert_array_equal(np.asarray(g(x[:4])), np.ones(4, np.float32))


def test_bitcast_errors():
    with pytest.raises(TypeError, match="does not reinterpret bool"):
        lax.bitcast_convert_type(np.array([True]), np.uint8)
    with pytest.raises(ValueError, match=r"needs a last axis of size 4, got an operand of shape \(2, 3\)"):
        lax.bitcast_convert_type(np.zeros((2, 3), np.uint8), np.float32)
    with pytest.raises(ValueError, match="last axis of size 2"):
        lax.bitcast_convert_type(np.uint16(3), np.float32)


def test_dot_general_precision_and_preferred_element_type():
    a = np.full((4, 8), 100, np.int8)
    b = np.full((8, 3), 100, np.int8)
    dn = (((1,), (0,)), ((), ()))
    for f in (lambda: lax.dot_general(a, b, dn, preferred_element_type=np.int32),
              lambda: lax.dot(a, b, preferred_element_type=np.int32),
              lambda: nova.jit(lambda p, q: lax.dot_general(
                  p, q, dn, preferred_element_type=np.int32))(a, b)):
        out = f()
        assert out.dtype == np.int32
        np.testing.assert_array_equal(np.asarray(out), np.full((4, 3), 80000))  # no int8 wrap
    x = RNG.standard_normal((3, 4)).astype(np.float16)
    y = RNG.standard_normal((4, 2)).astype(np.float16)
    out = lax.dot_general(x, y, dn, precision=lax.Precision.HIGHEST,
                          preferred_element_type=np.float32)
    assert out.dtype == np.float32
    np.testing.assert_allclose(np.asarray(out), x.astype(np.float32) @ y.astype(np.float32),
                               rtol=1e-6)
    assert lax.dot(x, y, precision=("highest", "default")).dtype == np.float16
    assert lax.Precision("tensorfloat32") is lax.Precision.HIGH
    with pytest.raises(ValueError, match="unknown precision 'bogus'"):
        lax.dot_general(x, y, dn, precision="bogus")
    with pytest.raises(TypeError, match="preferred_element_type int32 is not a floating type"):
        lax.dot(x, y, preferred_element_type=np.int32)


def test_primitive_objects_by_name():
    assert lax.exp_p.name == "exp" and lax.dot_general_p.name == "dot_general"
    assert lax.psum_p.name == "psum" and lax.scan_p.name == "scan"
    with pytest.raises(AttributeError, match="no attribute 'not_a_primitive_p'"):
        lax.not_a_primitive_p  # noqa: B018


def test_signbit_copysign_and_nextafter_read_the_sign_bit():
    x = np.array([1.0, -0.0, 0.0, np.nan, -np.nan, -3.0, -np.inf], np.float32)
    np.testing.assert_array_equal(np.asarray(nova.numpy.signbit(x)), np.signbit(x))
    np.testing.assert_array_equal(np.asarray(nova.numpy.copysign(2.0, x)), np.copysign(2.0, x))
    b = np.array([-0.0, 2.0, -np.nan], ml_dtypes.bfloat16)
    np.testing.assert_array_equal(np.asarray(nova.numpy.signbit(b)), [True, False, True])
    a = np.array([1.0, 0.0, -1.0, 5.0], np.float32)
    d = np.array([2.0, -1.0, -2.0, 5.0], np.float32)
    np.testing.assert_array_equal(np.asarray(nova.numpy.nextafter(a, d)), np.nextafter(a, d))
    assert nova.numpy.nextafter(1, 2).dtype == np.float32


def test_bitcast_to_the_same_dtype_is_the_operand():
    b = np.array([True, False, True])
    np.testing.assert_array_equal(np.asarray(lax.bitcast_convert_type(b, np.bool_)), b)
