"""nova.scipy.fft against scipy.fft and jax.scipy.fft: dct / idct of types 1-4 under every norm,
on the dense (short) and FFT (long) paths, dctn / idctn, float32 and float64, complex input,
jit, vmap and grad, next_fast_len, the re-exported transforms, and bad inputs."""

from __future__ import annotations

import jax
import jax.scipy.fft as jfft
import nova.numpy as jnp
import numpy as np
import pytest
import scipy.fft as sfft

import nova
from nova.scipy import fft as nfft
from tests.helpers import Jitted

RNG = np.random.default_rng(20)


J = Jitted(nfft)


def _close(got, want, rtol=1e-11, atol=1e-11):
    got = np.asarray(got)
    assert got.shape == np.shape(want)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)


@pytest.mark.parametrize("kind", [1, 2, 3, 4])
@pytest.mark.parametrize("norm", [None, "backward", "ortho", "forward"])
def test_dct_idct_against_scipy(kind, norm):
    # 9 and 16: one cosine matmul; 97 (odd, prime) and 130: through the FFT (> DENSE_MAX)
    for n in (9, 16, 97, 130):
        x = RNG.standard_normal((2, n))
        scale = np.abs(sfft.dct(x, type=kind, norm=norm)).max()
        _close(J.dct(x, type=kind, norm=norm), sfft.dct(x, type=kind, norm=norm),
               atol=1e-12 * scale)
        _close(J.idct(x, type=kind, norm=norm), sfft.idct(x, type=kind, norm=norm),
               atol=1e-12 * max(1.0, np.abs(sfft.idct(x, type=kind, norm=norm)).max()))
        _close(J.idct(J.dct(x, type=kind, norm=norm), type=kind, norm=norm), x,
               atol=1e-11)


def test_lengths_axes_and_nd_against_scipy():
    x = RNG.standard_normal((5, 6, 70))
    for n in (3, 40, 100):  # truncate, and zero-pad on both paths
        _close(J.dct(x, n=n), sfft.dct(x, n=n), atol=1e-10)
        _close(J.idct(x, type=3, n=n, axis=1), sfft.idct(x, type=3, n=n, axis=1),
               atol=1e-10)
    _close(J.dct(x, type=1, axis=0, norm="ortho"), sfft.dct(x, type=1, axis=0, norm="ortho"))
    _close(J.dctn(x, norm="ortho"), sfft.dctn(x, norm="ortho"), atol=1e-10)
    _close(J.dctn(x, type=4, s=(4, 80)), sfft.dctn(x, type=4, s=(4, 80)), atol=1e-9)
    _close(J.idctn(x, type=1, axes=(0, 2)), sfft.idctn(x, type=1, axes=(0, 2)), atol=1e-10)
    _close(J.idctn(J.dctn(x, axes=[-1, 0]), axes=[-1, 0]), x, atol=1e-11)


def test_float32_against_jax_and_float64_with_x64():
    x = RNG.standard_normal((3, 8, 75)).astype(np.float32)
    for norm in (None, "ortho"):
        got = J.dct(x, norm=norm)
        assert got.dtype == np.float32
        _close(got, jfft.dct(x, norm=norm), rtol=2e-5, atol=2e-4)
        _close(J.idct(x, n=50, axis=-1, norm=norm), jfft.idct(x, n=50, norm=norm),
               rtol=2e-5, atol=2e-5)
        _close(J.dctn(x, s=(2, 9), axes=(0, 1), norm=norm),
               jfft.dctn(x, s=(2, 9), axes=(0, 1), norm=norm), rtol=2e-5, atol=2e-4)
        _close(J.idctn(x, norm=norm), jfft.idctn(x, norm=norm), rtol=2e-5, atol=2e-5)
    x64 = x.astype(np.float64)
    with jax.enable_x64(True):
        want = np.asarray(jfft.dctn(x64, norm="ortho"))
        want_i = np.asarray(jfft.idct(x64, n=90, axis=1))
    got = J.dctn(x64, norm="ortho")
    assert got.dtype == np.float64
    _close(got, want, atol=1e-11)
    _close(J.idct(x64, n=90, axis=1), want_i, atol=1e-12)


def test_dtypes_and_complex_input():
    assert nfft.dct(np.arange(5)).dtype == np.float32  # integers compute in float32, as jax
    _close(nfft.dct(np.arange(5)), sfft.dct(np.arange(5.0)), rtol=1e-6, atol=1e-5)
    z = RNG.standard_normal((2, 70)) + 1j * RNG.standard_normal((2, 70))
    for kind in (2, 3):
        got = nfft.dct(z, type=kind, norm="ortho")
        assert got.dtype == np.complex128
        _close(got, sfft.dct(z, type=kind, norm="ortho"))
    assert nfft.dct(z.astype(np.complex64)).dtype == np.complex64
    assert nfft.dct(np.zeros((0, 4))).shape == (0, 4)


def test_jit_vmap_grad():
    x = RNG.standard_normal((4, 100))
    f = nova.jit(lambda a: nfft.dct(a, type=3, norm="ortho"))
    _close(f(x), sfft.dct(x, type=3, norm="ortho"))
    got = nova.vmap(lambda a: nfft.idct(a, type=4), in_axes=1, out_axes=1)(x.T)
    _close(got, sfft.idct(x, type=4).T)
    # each dct is linear: the gradient of sum(w * dct(x)) is C^T w, with C the transform's
    # matrix (scipy's dct of the identity)
    for n, kind in ((12, 1), (12, 2), (100, 2), (100, 4), (77, 3)):
        w = RNG.standard_normal(n)
        mat = sfft.dct(np.eye(n), type=kind, norm="ortho", axis=0)
        g = nova.grad(lambda a, w=w, kind=kind: jnp.sum(nfft.dct(a, type=kind,
                                                                 norm="ortho") * w))(x[0, :n])
        _close(g, mat.T @ w, atol=1e-11)
    # a nonlinear loss, float32, against jax's gradient
    x32 = x.astype(np.float32)
    g = nova.jit(nova.grad(lambda a: jnp.sum(nfft.dctn(a, norm="ortho") ** 3)))(x32)
    gj = jax.grad(lambda a: jax.numpy.sum(jfft.dctn(a, norm="ortho") ** 3))(x32)
    _close(g, gj, rtol=1e-4, atol=1e-3)


def test_next_fast_len_and_reexports():
    for t in list(range(300)) + [1009, 4097, 65537, 999_983]:
        assert nfft.next_fast_len(t) == sfft.next_fast_len(t), t
        assert nfft.next_fast_len(t, real=True) == sfft.next_fast_len(t, real=True), t
    with pytest.raises(ValueError, match="target must be >= 0"):
        nfft.next_fast_len(-1)
    with pytest.raises(TypeError, match="target must be an integer"):
        nfft.next_fast_len(2.5)
    assert nfft.rfft is jnp.fft.rfft and nfft.fftfreq is jnp.fft.fftfreq
    x = RNG.standard_normal((3, 10))
    _close(nfft.rfft(x), sfft.rfft(x))
    _close(nfft.ifftn(nfft.fftn(x)), x.astype(complex), atol=1e-12)
    assert nova.scipy.fft is nfft


def test_bad_inputs():
    x = np.ones(8)
    with pytest.raises(ValueError, match="type must be 1, 2, 3 or 4, got 5"):
        nfft.dct(x, type=5)
    with pytest.raises(TypeError, match="type must be an integer"):
        nfft.idct(x, type="2")
    with pytest.raises(ValueError, match="invalid norm"):
        nfft.dct(x, norm="unitary")
    with pytest.raises(ValueError, match="invalid number of FFT data points n=0"):
        nfft.dct(x, n=0)
    with pytest.raises(TypeError, match="n must be an integer"):
        nfft.dct(x, n=2.0)
    with pytest.raises(ValueError, match="type 1 transform needs a length of at least 2"):
        nfft.dct(np.ones(1), type=1)
    with pytest.raises(ValueError, match="out of bounds"):
        nfft.dct(x, axis=1)
    with pytest.raises(ValueError, match="out of bounds for a 0-d"):
        nfft.idct(np.float32(1.0))
    with pytest.raises(ValueError, match="repeated axes"):
        nfft.dctn(np.ones((3, 3)), axes=(0, -2))
    with pytest.raises(ValueError, match="different lengths"):
        nfft.idctn(np.ones((3, 3)), s=(3,), axes=(0, 1))
