"""nova.numpy.fft against jax.numpy.fft and numpy.fft: every transform over many lengths (dense
DFT, four-step Cooley-Tukey, Bluestein primes, the packed real path), n / s padding and
truncation, axes, norms, dtypes; under jit, vmap, grad and jvp; and the errors numpy raises."""

import jax
import jax.numpy as jjnp
import nova.numpy as jnp
import numpy as np
import pytest

import nova
from nova.numpy_impl import fft_plan

# numpy 2 deprecates s without axes (the last len(s) axes); nova follows the current rule.
pytestmark = pytest.mark.filterwarnings("ignore:`axes` should not be `None`:DeprecationWarning")
RNG = np.random.default_rng(0)
LENGTHS = [1, 2, 3, 5, 7, 8, 12, 16, 17, 60, 97, 128, 1000, 1024]
NORMS = [None, "backward", "ortho", "forward"]


def _real(shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


def _cplx(shape, dtype=np.complex64):
    return (RNG.standard_normal(shape) + 1j * RNG.standard_normal(shape)).astype(dtype)


def close(actual, expected, tol=1e-4, dtype=None):
    """|actual - expected| <= tol * max|expected| (float32 FFT error grows with log N)."""
    a, e = np.asarray(actual), np.asarray(expected)
    assert a.shape == e.shape, f"shape {a.shape} != {e.shape}"
    if dtype is not None:
        assert a.dtype == np.dtype(dtype), f"dtype {a.dtype} != {dtype}"
    np.testing.assert_array_equal(np.isnan(a), np.isnan(e))
    scale = max(float(np.nanmax(np.abs(e), initial=0.0)), 1e-30)
    err = float(np.nanmax(np.abs(a.astype(np.complex128) - e.astype(np.complex128)),
                          initial=0.0))
    assert err <= tol * scale, f"max error {err:.3g} > {tol} * {scale:.3g}"


# --- 1-d transforms over many lengths ---------------------------------------------------------

@pytest.mark.parametrize("n", LENGTHS)
def test_fft_ifft_lengths(n):
    x, z = _real((3, n)), _cplx((2, n))
    close(jnp.fft.fft(x), jjnp.fft.fft(x), dtype=np.complex64)
    close(jnp.fft.fft(z), np.fft.fft(z), dtype=np.complex64)
    close(jnp.fft.ifft(z), jjnp.fft.ifft(z), dtype=np.complex64)
    close(jnp.fft.ifft(jnp.fft.fft(z)), z)


@pytest.mark.parametrize("n", LENGTHS + [130, 194, 255])
def test_rfft_irfft_lengths(n):
    x = _real((3, n))
    close(jnp.fft.rfft(x), jjnp.fft.rfft(x), dtype=np.complex64)
    h = _cplx((3, n // 2 + 1))
    if n > 1:
        close(jnp.fft.irfft(h, n), jjnp.fft.irfft(h, n), dtype=np.float32)
        close(jnp.fft.irfft(jnp.fft.rfft(x), n), x)


@pytest.mark.parametrize("n", [67, 97, 257, 1009])
def test_bluestein_primes_and_their_multiples(n):
    assert fft_plan._split(n) is None  # prime: Bluestein's path
    z = _cplx((2, 3 * n))  # 3n: four-step with a Bluestein stage
    close(jnp.fft.fft(z[:, :n]), np.fft.fft(z[:, :n]))
    close(jnp.fft.fft(z), np.fft.fft(z))
    close(jnp.fft.ifft(z), np.fft.ifft(z))


def test_four_step_plan_factors():
    assert fft_plan._split(4096) == (64, 64)
    assert fft_plan._split(1000) == (25, 40)
    assert fft_plan._split(60) == (6, 10)


@pytest.mark.parametrize("axis", [0, 1, -1, -3])
@pytest.mark.parametrize("n", [None, 5, 24, 100])
def test_axis_and_n_pad_truncate(axis, n):
    x, z = _real((6, 24, 4)), _cplx((6, 24, 4))
    close(jnp.fft.fft(x, n, axis), jjnp.fft.fft(x, n, axis))
    close(jnp.fft.ifft(z, n, axis), np.fft.ifft(z, n, axis))
    close(jnp.fft.rfft(x, n, axis), np.fft.rfft(x, n, axis))
    close(jnp.fft.irfft(z, n, axis), np.fft.irfft(z, n, axis))
    close(jnp.fft.hfft(z, n, axis), np.fft.hfft(z, n, axis))
    close(jnp.fft.ihfft(x, n, axis), np.fft.ihfft(x, n, axis))


@pytest.mark.parametrize("norm", NORMS)
def test_norms(norm):
    x, z = _real((4, 1000)), _cplx((4, 12))
    for name, arg in [("fft", x), ("ifft", z), ("rfft", x), ("irfft", z), ("hfft", z),
                      ("ihfft", x)]:
        close(getattr(jnp.fft, name)(arg, norm=norm), getattr(np.fft, name)(arg, norm=norm))
    a = _real((6, 10, 8))
    for name in ["fft2", "ifft2", "fftn", "ifftn", "rfft2", "rfftn"]:
        close(getattr(jnp.fft, name)(a, norm=norm), getattr(jjnp.fft, name)(a, norm=norm))
    h = _cplx((6, 10, 5))
    for name in ["irfft2", "irfftn"]:
        close(getattr(jnp.fft, name)(h, norm=norm), getattr(np.fft, name)(h, norm=norm))


# --- 2-d and N-d ------------------------------------------------------------------------------

@pytest.mark.parametrize("s,axes", [(None, None), ((4, 12), None), (None, (0, 2)),
                                    ((7, 3), (2, 0)), ((5,), (1,)), ((6, 20, 9), None)])
def test_nd_transforms(s, axes):
    a, z = _real((5, 16, 9)), _cplx((5, 16, 9))
    close(jnp.fft.fftn(a, s, axes), jjnp.fft.fftn(a, s, axes))
    close(jnp.fft.ifftn(z, s, axes), np.fft.ifftn(z, s, axes))
    close(jnp.fft.rfftn(a, s, axes), jjnp.fft.rfftn(a, s, axes))
    close(jnp.fft.irfftn(z, s, axes), np.fft.irfftn(z, s, axes))


def test_2d_defaults_and_large():
    a, z = _real((3, 60, 128)), _cplx((3, 17, 64))
    close(jnp.fft.fft2(a), np.fft.fft2(a))
    close(jnp.fft.ifft2(z), np.fft.ifft2(z))
    close(jnp.fft.rfft2(a), np.fft.rfft2(a))
    close(jnp.fft.irfft2(z), np.fft.irfft2(z))
    close(jnp.fft.fft2(a, s=(8, 200), axes=(0, 2)), np.fft.fft2(a, s=(8, 200), axes=(0, 2)))
    close(jnp.fft.irfft2(jnp.fft.rfft2(a), s=a.shape[1:]), a)


# --- dtypes -----------------------------------------------------------------------------------

def test_dtypes():
    i = np.arange(12, dtype=np.int32).reshape(3, 4)
    close(jnp.fft.fft(i), np.fft.fft(i), dtype=np.complex64)
    close(jnp.fft.rfft(i), np.fft.rfft(i), dtype=np.complex64)
    close(jnp.fft.fft(i.astype(np.float16)), np.fft.fft(i), 1e-3, dtype=np.complex64)
    assert jnp.fft.irfft(_cplx(5)).dtype == np.float32
    x64, z128 = _real((2, 1000), np.float64), _cplx((2, 97), np.complex128)
    close(jnp.fft.fft(x64), np.fft.fft(x64), 1e-12, dtype=np.complex128)
    close(jnp.fft.ifft(z128), np.fft.ifft(z128), 1e-12, dtype=np.complex128)
    close(jnp.fft.rfft(x64), np.fft.rfft(x64), 1e-12, dtype=np.complex128)
    close(jnp.fft.irfft(z128), np.fft.irfft(z128), 1e-12, dtype=np.float64)
    close(jnp.fft.hfft(z128, 130), np.fft.hfft(z128, 130), 1e-12, dtype=np.float64)
    with jax.enable_x64(True):
        close(jnp.fft.rfftn(x64), jjnp.fft.rfftn(x64), 1e-12, dtype=np.complex128)


def test_empty_batch():
    a = np.zeros((0, 8), np.float32)
    assert jnp.fft.fft(a).shape == (0, 8)
    assert jnp.fft.rfft(a).shape == (0, 5)
    assert jnp.fft.irfft(a.astype(np.complex64), 6).shape == (0, 6)


# --- frequencies and shifts -------------------------------------------------------------------

@pytest.mark.parametrize("n", [0, 1, 2, 5, 8, 101])
@pytest.mark.parametrize("d", [1.0, 0.25, 3])
def test_fftfreq_rfftfreq(n, d):
    close(jnp.fft.fftfreq(n, d), jjnp.fft.fftfreq(n, d), 1e-6, dtype=np.float32)
    close(jnp.fft.rfftfreq(n, d), jjnp.fft.rfftfreq(n, d), 1e-6, dtype=np.float32)
    if n:  # numpy divides by zero at n = 0
        close(jnp.fft.fftfreq(n, d, dtype=np.float64), np.fft.fftfreq(n, d), 1e-15,
              dtype=np.float64)


def test_fftfreq_traced_spacing():
    f = nova.jit(lambda d: jnp.fft.fftfreq(8, d))
    close(f(np.float32(0.5)), np.fft.fftfreq(8, 0.5), 1e-6, dtype=np.float32)
    g = nova.grad(lambda d: jnp.sum(jnp.fft.rfftfreq(9, d) ** 2))(np.float32(0.5))
    gj = jax.grad(lambda d: jjnp.sum(jjnp.fft.rfftfreq(9, d) ** 2))(np.float32(0.5))
    close(g, gj, 1e-5)


@pytest.mark.parametrize("axes", [None, 0, (1,), (0, 1), -1])
def test_shifts(axes):
    x = np.arange(35).reshape(5, 7)
    np.testing.assert_array_equal(jnp.fft.fftshift(x, axes), jjnp.fft.fftshift(x, axes))
    np.testing.assert_array_equal(jnp.fft.ifftshift(x, axes), jjnp.fft.ifftshift(x, axes))
    np.testing.assert_array_equal(jnp.fft.ifftshift(jnp.fft.fftshift(x, axes), axes), x)


# --- jit, vmap ------------------------------------------------------------------------------

@pytest.mark.parametrize("n", [12, 97, 128, 1000])
def test_under_jit(n):
    x = _real((4, n))
    f = nova.jit(lambda x: (jnp.fft.fft(x), jnp.fft.irfft(jnp.fft.rfft(x), n),
                            jnp.fft.ifft2(x.astype(jnp.complex64), norm="ortho")))
    a, b, c = f(x)
    close(a, np.fft.fft(x))
    close(b, x)
    close(c, np.fft.ifft2(x, norm="ortho"))


def test_under_vmap():
    x, z = _real((5, 3, 60)), _cplx((3, 5, 33))
    close(nova.vmap(jnp.fft.fft)(x), np.fft.fft(x))
    close(nova.vmap(lambda r: jnp.fft.rfft(r, axis=0), in_axes=2)(x),
          np.moveaxis(np.fft.rfft(x, axis=0), 2, 0))
    close(nova.vmap(lambda h: jnp.fft.irfft(h, 64), in_axes=1)(z),
          np.moveaxis(np.fft.irfft(z, 64), 1, 0))
    close(nova.jit(nova.vmap(jnp.fft.fft2))(x), np.fft.fft2(x))


# --- derivatives (JAX's convention for complex inputs) ----------------------------------------

def _weights(shape):
    return _real(shape), _real(shape)


@pytest.mark.parametrize("n", [8, 97, 128, 150])
def test_grad_real_losses(n):
    x = _real((3, n))
    u, v = _weights((3, n))
    uh, vh = _weights((3, n // 2 + 1))

    def loss(fft, x):
        y = fft.fft(x)
        r = fft.rfft(x, norm="ortho")
        return (fft.sum_(fft.real(y) * u + fft.imag(y) ** 2 * v)
                + fft.sum_(fft.abs(r) * uh + fft.imag(r) * vh))

    class N:
        fft, rfft, real, imag, abs, sum_ = (jnp.fft.fft, jnp.fft.rfft, jnp.real, jnp.imag,
                                            jnp.abs, jnp.sum)

    class J:
        fft, rfft, real, imag, abs, sum_ = (jjnp.fft.fft, jjnp.fft.rfft, jjnp.real, jjnp.imag,
                                            jjnp.abs, jjnp.sum)

    expected = jax.grad(lambda x: loss(J, x))(x)
    close(nova.grad(lambda x: loss(N, x))(x), expected)
    close(nova.jit(nova.grad(lambda x: loss(N, x)))(x), expected)


@pytest.mark.parametrize("n", [10, 97, 128, 129])
def test_grad_complex_inputs(n):
    z, h = _cplx((2, n)), _cplx((2, n // 2 + 1))
    w = _real((2, n))

    def loss(ns, z, h):
        return (ns.sum(jnp_abs2(ns, ns.fft.ifft(z, norm="forward")) * w)
                + ns.sum(ns.fft.irfft(h, n) * w) + ns.sum(ns.fft.hfft(h, n) * w))

    def jnp_abs2(ns, y):
        return ns.real(y) ** 2 + ns.imag(y) ** 2

    gz, gh = nova.grad(lambda z, h: loss(jnp, z, h), argnums=(0, 1))(z, h)
    ez, eh = jax.grad(lambda z, h: loss(jjnp, z, h), argnums=(0, 1))(z, h)
    close(gz, ez)
    close(gh, eh)


def test_grad_nd_and_vmap_of_grad():
    a = _real((4, 6, 20))
    w = _real((4, 6, 11))

    def loss(ns, a):
        return ns.sum(ns.abs(ns.fft.rfftn(a, axes=(0, 2))) * w)

    close(nova.grad(lambda a: loss(jnp, a))(a), jax.grad(lambda a: loss(jjnp, a))(a))
    per_row = nova.vmap(nova.grad(lambda r: jnp.sum(jnp.abs(jnp.fft.fft(r)))))(a[0])
    close(per_row, jax.vmap(jax.grad(lambda r: jjnp.sum(jjnp.abs(jjnp.fft.fft(r)))))(a[0]))


@pytest.mark.parametrize("n", [16, 100])
def test_jvp(n):
    x, t = _real((3, n)), _real((3, n))
    f = lambda ns: lambda x: ns.fft.fft2(x) * ns.fft.fft(x, 2 * n)[..., :n]
    p, tan = nova.jvp(f(jnp), (x,), (t,))
    pj, tj = jax.jvp(f(jjnp), (x,), (t,))
    close(p, pj)
    close(tan, tj)


# --- bad inputs -------------------------------------------------------------------------------

def test_bad_inputs():
    x = _real((4, 6))
    with pytest.raises(ValueError, match="n=0"):
        jnp.fft.fft(x, n=0)
    with pytest.raises(ValueError, match="n=-3"):
        jnp.fft.rfft(x, n=-3)
    with pytest.raises(ValueError, match="n=0"):
        jnp.fft.irfft(np.ones(1, np.complex64))  # default n = 2 (1 - 1), as numpy
    with pytest.raises(TypeError, match="n must be an integer"):
        jnp.fft.fft(x, n=3.0)
    with pytest.raises(ValueError, match="axis 2 is out of bounds"):
        jnp.fft.fft(x, axis=2)
    with pytest.raises(ValueError, match="out of bounds"):
        jnp.fft.ifft2(np.ones(3, np.float32))
    with pytest.raises(ValueError, match="0-d"):
        jnp.fft.fft(np.float32(1.0))
    with pytest.raises(ValueError, match="invalid norm 'bad'"):
        jnp.fft.fft(x, norm="bad")
    with pytest.raises(ValueError, match="invalid norm"):
        jnp.fft.irfftn(x, norm="Ortho")
    with pytest.raises(ValueError, match="repeated axes"):
        jnp.fft.fftn(x, axes=(1, -1))
    with pytest.raises(ValueError, match="different lengths"):
        jnp.fft.fftn(x, s=(3,), axes=(0, 1))
    with pytest.raises(ValueError, match="more entries"):
        jnp.fft.fftn(x, s=(2, 3, 4))
    with pytest.raises(ValueError, match="s entry=0"):
        jnp.fft.rfft2(x, s=(0, 3))
    with pytest.raises(ValueError, match="at least one axis"):
        jnp.fft.rfftn(x, axes=())
    with pytest.raises(TypeError, match="needs a real input, got complex64"):
        jnp.fft.rfft(x.astype(np.complex64))
    with pytest.raises(ValueError, match="n must be >= 0"):
        jnp.fft.fftfreq(-1)
    with pytest.raises(TypeError, match="n must be an integer"):
        jnp.fft.rfftfreq(4.0)
    with pytest.raises(ValueError, match="out of bounds"):
        jnp.fft.fftshift(x, axes=3)
