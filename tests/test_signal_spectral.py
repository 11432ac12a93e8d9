"""nova.scipy.signal's FFT-based functions against scipy.signal and jax.scipy.signal: get_window,
fftconvolve and convolve / correlate with method="fft" / "auto", stft, istft, csd, welch,
spectrogram, coherence; float32 and float64, jit, vmap, grad, and bad inputs."""

from __future__ import annotations

import jax
import jax.numpy as jn
import jax.scipy.signal as jsig
import nova.numpy as jnp
import numpy as np
import pytest
import scipy.signal as ssig

import nova
import nova.scipy.signal as S
from tests.helpers import Jitted

RNG = np.random.default_rng(21)


J = Jitted(S)


def _close(got, want, rtol=1e-11, atol=1e-11, rel=None):
    """rel: an absolute tolerance of rel times the largest |want| instead of atol (float32
    spectra: an entry near zero carries the rounding of the largest ones)."""
    got = np.asarray(got)
    if rel is not None and np.size(want):
        atol = rel * np.abs(np.asarray(want)).max()
    assert got.shape == np.shape(want), (got.shape, np.shape(want))
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)


def _all_close(got, want, **kw):
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        _close(g, w, **kw)


# --- windows ---------------------------------------------------------------------------------

WINDOWS = ["hann", "hamming", "blackman", "bartlett", "boxcar", "triang", "cosine", "nuttall",
           "blackmanharris", "flattop", "parzen", "bohman", "tukey", "han", "rect",
           ("tukey", 0.3), ("gaussian", 2.5), ("kaiser", 8.6), ("general_hamming", 0.6)]


@pytest.mark.parametrize("window", WINDOWS)
def test_get_window_against_scipy(window):
    for n in (1, 2, 7, 16):
        for fftbins in (True, False):
            got = S.get_window(window, n, fftbins=fftbins)
            assert got.dtype == np.float32
            _close(got, ssig.get_window(window, n, fftbins=fftbins), rtol=1e-6, atol=1e-7)
    _close(S.get_window(window, 9, dtype=np.float64), ssig.get_window(window, 9), atol=1e-14)


def test_get_window_matches_nova_numpy_symmetric_windows():
    for name, fn in (("hann", jnp.hanning), ("hamming", jnp.hamming),
                     ("blackman", jnp.blackman), ("bartlett", jnp.bartlett)):
        _close(S.get_window(name, 11, fftbins=False), fn(11), rtol=1e-5, atol=1e-6)


def test_get_window_errors():
    with pytest.raises(ValueError, match="unknown window 'foo'"):
        S.get_window("foo", 8)
    with pytest.raises(ValueError, match="'kaiser' window takes 1 to 1 parameter"):
        S.get_window("kaiser", 8)
    with pytest.raises(ValueError, match="'hann' window takes no parameters"):
        S.get_window(("hann", 2.0), 8)
    with pytest.raises(ValueError, match="Nx must be >= 0"):
        S.get_window("hann", -1)
    with pytest.raises(TypeError, match="Nx must be an integer"):
        S.get_window("hann", 8.0)
    with pytest.raises(TypeError, match="must be a name"):
        S.get_window(3, 8)


# --- FFT convolution -------------------------------------------------------------------------

@pytest.mark.parametrize("sa,sb,axes", [
    ((50,), (7,), None), ((13,), (40,), None), ((10, 12), (3, 5), None),
    ((4, 70), (4, 9), [1]), ((4, 30), (1, 9), -1), ((6, 7, 8), (2, 1, 4), (0, 2))])
def test_fftconvolve_against_scipy(sa, sb, axes):
    a, b = RNG.standard_normal(sa), RNG.standard_normal(sb)
    for mode in ("full", "same", "valid"):
        _close(J.fftconvolve(a, b, mode, axes), ssig.fftconvolve(a, b, mode, axes))
    z1 = a + 1j * RNG.standard_normal(sa)
    z2 = b - 0.5j * RNG.standard_normal(sb)
    got = J.fftconvolve(z1, z2, "same", axes)
    assert got.dtype == np.complex128
    _close(got, ssig.fftconvolve(z1, z2, "same", axes))


def test_fftconvolve_float32_and_float64_against_jax():
    a = RNG.standard_normal((3, 100)).astype(np.float32)
    b = RNG.standard_normal((3, 17)).astype(np.float32)
    for mode in ("full", "same", "valid"):
        got = J.fftconvolve(a, b, mode, axes=[1])
        assert got.dtype == np.float32
        _close(got, jsig.fftconvolve(a, b, mode, axes=[1]), rtol=1e-4, atol=2e-5)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    with jax.enable_x64(True):
        want = np.asarray(jsig.fftconvolve(a64, b64, "same"))
    got = J.fftconvolve(a64, b64, "same")
    assert got.dtype == np.float64
    _close(got, want)
    assert J.fftconvolve(np.arange(4), np.arange(3)).dtype == np.float32
    _close(J.fftconvolve(np.float32(2.0), np.float32(3.0)), 6.0)


def test_fftconvolve_jit_vmap_grad():
    a = RNG.standard_normal((4, 90)).astype(np.float32)
    b = RNG.standard_normal(12).astype(np.float32)
    f = nova.jit(lambda u, v: S.fftconvolve(u, v, "valid"))
    _close(f(a[0], b), ssig.fftconvolve(a[0], b, "valid"), rtol=1e-4, atol=1e-5)
    got = nova.vmap(lambda u: S.fftconvolve(u, b, "same"))(a)
    _close(got, ssig.fftconvolve(a, b[None], "same", axes=1), rtol=1e-4, atol=1e-5)

    def loss(m, u, v):
        return (m.fftconvolve(u, v, "same") ** 2).sum()

    got = nova.grad(lambda u, v: loss(S, u, v), argnums=(0, 1))(a[0], b)
    want = jax.grad(lambda u, v: loss(jsig, u, v), argnums=(0, 1))(a[0], b)
    for g, w in zip(got, want, strict=True):
        _close(g, w, rtol=1e-4, atol=1e-3)


def test_convolve_correlate_methods():
    a, b = RNG.standard_normal((9, 11)), RNG.standard_normal((4, 6))
    for mode in ("full", "same", "valid"):
        for method in ("direct", "fft", "auto"):
            _close(J.convolve(a, b, mode, method), ssig.convolve(a, b, mode))
            _close(J.correlate(a, b, mode, method), ssig.correlate(a, b, mode))
    # complex inputs: the complex convolution, and correlate conjugates in2 (as scipy)
    z, w = RNG.standard_normal(30) + 1j * RNG.standard_normal(30), 1j + RNG.standard_normal(7)
    for method in ("direct", "fft"):
        _close(J.convolve(z, w, "same", method), ssig.convolve(z, w, "same"))
        _close(J.correlate(z, w, "full", method), ssig.correlate(z, w, "full"))
    assert S.choose_conv_method(np.ones(100), np.ones(3)) == "direct"
    assert S.choose_conv_method(np.ones(4096), np.ones(512)) == "fft"
    assert S.choose_conv_method(np.ones((256, 256)), np.ones((32, 32)), "same") == "fft"
    big, kern = RNG.standard_normal(3000), RNG.standard_normal(600)
    _close(J.convolve(big, kern, "same"), ssig.convolve(big, kern, "same"), atol=1e-10)
    with pytest.raises(NotImplementedError, match="measure=True"):
        S.choose_conv_method(np.ones(3), np.ones(3), measure=True)


def test_fftconvolve_errors():
    with pytest.raises(ValueError, match="mode must be"):
        S.fftconvolve(np.ones(4), np.ones(2), "middle")
    with pytest.raises(ValueError, match="same number of dimensions"):
        S.fftconvolve(np.ones((4, 4)), np.ones(2))
    with pytest.raises(ValueError, match="cannot be empty"):
        S.fftconvolve(np.ones(0), np.ones(2))
    with pytest.raises(ValueError, match="at least as large"):
        S.fftconvolve(np.ones((3, 5)), np.ones((5, 3)), "valid")
    with pytest.raises(ValueError, match="must agree"):
        S.fftconvolve(np.ones((3, 5)), np.ones((2, 3)), axes=1)
    with pytest.raises(ValueError, match="repeated axes"):
        S.fftconvolve(np.ones((3, 5)), np.ones((2, 3)), axes=(1, -1))
    with pytest.raises(ValueError, match="method must be"):
        S.correlate(np.ones(3), np.ones(2), method="winograd")


# --- stft / istft ----------------------------------------------------------------------------

STFT_CASES = [{"nperseg": 32}, {"nperseg": 30, "noverlap": 7, "nfft": 40},
              {"nperseg": 32, "boundary": "even", "detrend": "linear"},
              {"nperseg": 32, "boundary": "odd", "padded": False},
              {"nperseg": 24, "boundary": None, "window": "hamming", "fs": 10.0},
              {"nperseg": 33, "return_onesided": False, "boundary": "constant"},
              {"nperseg": 20, "noverlap": 3, "window": ("kaiser", 5.0), "detrend": "constant"},
              {"nperseg": 16, "noverlap": 1}]  # many pieces per frame: the gather path


@pytest.mark.parametrize("kw", STFT_CASES)
def test_stft_against_scipy_and_jax(kw):
    x = RNG.standard_normal((2, 300))
    _all_close(J.stft(x, **kw), ssig.stft(x, **kw), atol=1e-12)
    x32 = x.astype(np.float32)
    got, want = J.stft(x32, **kw), jsig.stft(x32, **kw)
    assert got[2].dtype == np.complex64 and got[0].dtype == np.float32
    _all_close(got, want, rtol=1e-5, rel=1e-5)
    with jax.enable_x64(True):
        want = [np.asarray(t) for t in jsig.stft(x, **kw)]
    _all_close(J.stft(x, **kw), want, atol=1e-12)


def test_stft_axes_complex_and_array_window():
    x = RNG.standard_normal((100, 3))
    _all_close(J.stft(x, nperseg=16, axis=0), ssig.stft(x, nperseg=16, axis=0), atol=1e-12)
    z = RNG.standard_normal(120) + 1j * RNG.standard_normal(120)
    with pytest.warns(UserWarning, match="two-sided"):
        got = J.stft(z, nperseg=16)
    _all_close(got, ssig.stft(z, nperseg=16, return_onesided=False), atol=1e-12)
    win = RNG.uniform(0.5, 1.0, 20)
    _all_close(J.stft(x[:, 0], window=win, nperseg=None, noverlap=5),
               ssig.stft(x[:, 0], window=win, nperseg=20, noverlap=5), atol=1e-12)
    _all_close(J.stft(x[:, 0], nperseg=16, scaling="psd"),
               ssig.stft(x[:, 0], nperseg=16, scaling="psd"), atol=1e-12)


@pytest.mark.parametrize("kw", [{"nperseg": 32}, {"nperseg": 33, "noverlap": 20, "nfft": 40},
                                {"nperseg": 32, "window": "hamming", "noverlap": 24},
                                {"nperseg": 24, "noverlap": 5, "fs": 4.0}])
def test_istft_against_scipy_and_round_trip(kw):
    x = RNG.standard_normal((2, 257))
    z = ssig.stft(x, **kw)[2]
    _all_close(J.istft(z, **kw), ssig.istft(z, **kw), atol=1e-12)
    _, back = J.istft(J.stft(x, **kw)[2], **kw)
    _close(np.asarray(back)[:, :257], x, atol=1e-11)
    z2 = ssig.stft(x, return_onesided=False, **kw)[2]
    _all_close(J.istft(z2, input_onesided=False, **kw),
               ssig.istft(z2, input_onesided=False, **kw), atol=1e-12)
    zt = np.moveaxis(z, -1, 0)  # frames first, frequencies last
    _all_close(J.istft(zt, time_axis=0, freq_axis=-1, **kw),
               ssig.istft(zt, time_axis=0, freq_axis=-1, **kw), atol=1e-12)
    z32 = z.astype(np.complex64)
    got = J.istft(z32, **kw)
    assert got[1].dtype == np.float32
    _all_close(got, jsig.istft(z32, **kw), rtol=1e-5, atol=1e-5)


def test_stft_istft_jit_vmap_grad():
    x = RNG.standard_normal((3, 200)).astype(np.float32)
    f = nova.jit(lambda u: S.stft(u, nperseg=32)[2])
    _close(f(x), jsig.stft(x, nperseg=32)[2], rtol=1e-5, rel=1e-5)
    got = nova.vmap(lambda u: S.stft(u, nperseg=32, noverlap=20)[2], in_axes=1, out_axes=0)(x.T)
    _close(got, jsig.stft(x, nperseg=32, noverlap=20)[2], rtol=1e-5, rel=1e-5)
    z = np.asarray(jsig.stft(x, nperseg=32)[2])
    g = nova.jit(lambda u: S.istft(u, nperseg=32)[1])
    _close(g(z), jsig.istft(z, nperseg=32)[1], rtol=1e-5, atol=1e-5)

    def loss(m, u):
        spec = m.stft(u, nperseg=32, noverlap=12, detrend="linear")[2]
        return (spec.real ** 2 + spec.imag ** 3).sum()

    _close(nova.grad(lambda u: loss(S, u))(x[0]), jax.grad(lambda u: loss(jsig, u))(x[0]),
           rtol=1e-4, atol=1e-5)
    fs = jnp.asarray(np.float32(8.0))  # a traced sampling frequency
    got = nova.jit(lambda u, r: S.stft(u, fs=r, nperseg=32, noverlap=12))(x, fs)
    _all_close(got, jsig.stft(x, fs=8.0, nperseg=32, noverlap=12), rtol=1e-5, rel=1e-5)


# --- welch / csd / spectrogram / coherence ---------------------------------------------------

WELCH_CASES = [{"nperseg": 32}, {"nperseg": 30, "noverlap": 7, "nfft": 40, "scaling": "spectrum"},
               {"nperseg": 33, "average": "median"}, {"nperseg": 32, "return_onesided": False},
               {"window": "blackman", "nperseg": 64, "fs": 3.0, "detrend": "linear"},
               {"nperseg": 300, "detrend": False}]  # one frame


@pytest.mark.parametrize("kw", WELCH_CASES)
def test_welch_csd_against_scipy_and_jax(kw):
    x, y = RNG.standard_normal((2, 300)), RNG.standard_normal(300)
    _all_close(J.welch(x, **kw), ssig.welch(x, **kw), atol=1e-12)
    _all_close(J.csd(x, y, **kw), ssig.csd(x, y, **kw), atol=1e-12)
    x32 = x.astype(np.float32)
    got = J.welch(x32, **kw)
    assert got[1].dtype == np.float32
    _all_close(got, jsig.welch(x32, **kw), rtol=1e-5, rel=1e-5)
    y32 = y.astype(np.float32)[None]  # jax wants equal ranks; nova broadcasts as scipy
    _all_close(J.csd(x32, y32, **kw), jsig.csd(x32, y32, **kw), rtol=1e-5, rel=1e-5)
    with jax.enable_x64(True):
        want = [np.asarray(t) for t in jsig.welch(x, **kw)]
    _all_close(J.welch(x, **kw), want, atol=1e-12)


def test_spectrogram_and_coherence_against_scipy():
    x, y = RNG.standard_normal((2, 400)), RNG.standard_normal(400)
    _all_close(J.spectrogram(x), ssig.spectrogram(x), atol=1e-12)
    for mode in ("psd", "complex", "magnitude", "phase"):
        _all_close(J.spectrogram(x, nperseg=32, mode=mode, axis=1),
                   ssig.spectrogram(x, nperseg=32, mode=mode, axis=1), atol=1e-11)
    # angle: equal modulo 2 pi (a real bin's sign of zero may differ)
    got = np.asarray(J.spectrogram(x, nperseg=32, mode="angle")[2])
    want = ssig.spectrogram(x, nperseg=32, mode="angle")[2]
    assert np.allclose(np.exp(1j * got), np.exp(1j * want), atol=1e-10)
    _all_close(J.coherence(x, y, nperseg=64), ssig.coherence(x, y, nperseg=64), atol=1e-12)
    assert np.all(np.asarray(J.coherence(x, y, nperseg=64)[1]) <= 1 + 1e-12)


def test_welch_jit_vmap_grad():
    x = RNG.standard_normal((4, 256)).astype(np.float32)
    got = nova.jit(lambda u: S.welch(u, nperseg=64, average="median")[1])(x)
    _close(got, jsig.welch(x, nperseg=64, average="median")[1], rtol=1e-5, rel=1e-5)
    got = nova.vmap(lambda u: S.csd(u, x[0], nperseg=64)[1])(x)
    _close(got, jsig.csd(x, x[:1], nperseg=64)[1], rtol=1e-5, rel=1e-5)

    def loss(m, u):
        return jn.sum(jn.log(m.welch(u, nperseg=64)[1])) if m is jsig else \
            jnp.sum(jnp.log(m.welch(u, nperseg=64)[1]))

    _close(nova.grad(lambda u: loss(S, u))(x[0]), jax.grad(lambda u: loss(jsig, u))(x[0]),
           rtol=2e-3, atol=1e-3)


# --- bad inputs ------------------------------------------------------------------------------

def test_spectral_errors():
    x = np.ones(100)
    with pytest.raises(ValueError, match=r"noverlap must be in \[0, nperseg\)"):
        S.stft(x, nperseg=16, noverlap=16)
    with pytest.raises(ValueError, match="noverlap must be in"):
        S.welch(x, nperseg=16, noverlap=-1)
    with pytest.raises(ValueError, match="unknown window 'foo'"):
        S.welch(x, window="foo", nperseg=16)
    with pytest.raises(ValueError, match="nfft = 8 must be >= nperseg = 16"):
        S.csd(x, x, nperseg=16, nfft=8)
    with pytest.raises(ValueError, match="nperseg must be a positive integer"):
        S.stft(x, nperseg=0)
    with pytest.raises(ValueError, match="longer than the input"):
        S.welch(x[:10], window=np.ones(16))
    with pytest.raises(ValueError, match="differs from the window's length"):
        S.stft(x, window=np.ones(16), nperseg=12)
    with pytest.raises(ValueError, match="window must be 1-d"):
        S.stft(x, window=np.ones((4, 4)))
    with pytest.warns(UserWarning, match="nperseg = 256 is greater than the input length"):
        f, _, _ = S.stft(x)  # a named window shrinks to the signal, as scipy
    assert f.shape == (51,)
    with pytest.raises(ValueError, match="boundary must be one of"):
        S.stft(x, nperseg=16, boundary="reflect")
    with pytest.raises(ValueError, match="scaling must be"):
        S.welch(x, nperseg=16, scaling="power")
    with pytest.raises(ValueError, match="average must be"):
        S.welch(x, nperseg=16, average="max")
    with pytest.raises(ValueError, match="mode must be one of"):
        S.spectrogram(x, nperseg=16, mode="power")
    with pytest.raises(ValueError, match="do not broadcast"):
        S.csd(np.ones((3, 50)), np.ones((2, 50)), nperseg=16)
    with pytest.raises(ValueError, match="at least 1-d"):
        S.welch(np.float32(1.0))
    with pytest.raises(ValueError, match="Zxx must be at least 2-d"):
        S.istft(np.ones(9))
    with pytest.raises(ValueError, match="time_axis and freq_axis must differ"):
        S.istft(np.ones((9, 4)), time_axis=0, freq_axis=-2)
    with pytest.raises(ValueError, match="window must have length nperseg = 16"):
        S.istft(np.ones((9, 4)), window=np.ones(8))
    with pytest.raises(ValueError, match="noverlap must be in"):
        S.istft(np.ones((9, 4)), noverlap=20)
