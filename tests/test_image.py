"""nova.image (resize, scale_and_translate) against jax.image, torch's interpolate, and
jax.grad for the gradients in the image, the scale and the translation."""

from __future__ import annotations

import jax
import jax.numpy as jjnp
import nova.numpy as jnp
import numpy as np
import pytest

import nova
from nova import image

RNG = np.random.default_rng(7)
X = RNG.standard_normal((2, 7, 9)).astype(np.float32)
# jax.image.scale_and_translate is not jitted: op by op JAX compiles for every primitive.
_jax_sat = jax.jit(jax.image.scale_and_translate, static_argnums=(1, 2, 5, 6))
METHODS = ["nearest", "linear", "cubic", "lanczos3", "lanczos5", "cubic-pytorch", "area"]


def _close(got, want, tol=1e-5):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=tol,
                               atol=tol)


@pytest.mark.parametrize("method", METHODS)
def test_resize_matches_jax(method):
    # Axis 0 to less than half its size, axis 1 up, axis 2 a little down (JAX compiles one
    # program per call, so one shape covers the three regimes).
    vol = RNG.standard_normal((7, 9, 8)).astype(np.float32)
    for antialias in (True, False):
        want = jax.image.resize(vol, (3, 14, 5), method, antialias=antialias)
        got = image.resize(vol, (3, 14, 5), method, antialias=antialias)
        assert got.dtype == jnp.float32
        _close(got, want)


def test_resize_ranks_and_names():
    v = RNG.standard_normal(11).astype(np.float32)
    _close(image.resize(v, (4,), "lanczos3"), jax.image.resize(v, (4,), "lanczos3"))
    nhwc = RNG.standard_normal((1, 6, 5, 3)).astype(np.float32)
    got = image.resize(nhwc, (1, 9, 4, 3), image.ResizeMethod.LINEAR)
    _close(got, jax.image.resize(nhwc, (1, 9, 4, 3), "bilinear"))
    for name, method in [("trilinear", "linear"), ("tricubic", "cubic"),
                         ("bicubic-pytorch", "cubic-pytorch")]:
        np.testing.assert_array_equal(np.asarray(image.resize(nhwc, (1, 9, 4, 3), name)),
                                      np.asarray(image.resize(nhwc, (1, 9, 4, 3), method)))


def test_resize_dtypes_and_identity():
    ints = RNG.integers(0, 100, (7, 9)).astype(np.int32)
    near = image.resize(ints, (10, 4), "nearest")
    assert near.dtype == jnp.int32
    np.testing.assert_array_equal(np.asarray(near), np.asarray(jax.image.resize(ints, (10, 4),
                                                                                  "nearest")))
    lin = image.resize(ints, (10, 4), "linear")
    assert lin.dtype == jnp.float32
    _close(lin, image.resize(ints.astype(np.float32), (10, 4), "linear"))
    # float64 stays float64 (weights in float64; JAX without x64 computes in float32)
    out = image.resize(ints.astype(np.float64), (10, 4), "linear")
    assert out.dtype == jnp.float64
    _close(out, lin, 1e-4)
    same = image.resize(ints, ints.shape, "lanczos5")
    assert same.dtype == jnp.float32
    np.testing.assert_array_equal(np.asarray(same), ints.astype(np.float32))
    empty = image.resize(X[0], (0, 4), "linear")
    assert empty.shape == (0, 4)


def test_nearest_picks_jaxs_samples():
    # floor((j + 0.5) * in / out) in float32: the same picks for sizes whose ratios round.
    for m, n in [(7, 3), (3, 7), (10, 15), (13, 6), (1, 4)]:
        v = np.arange(m, dtype=np.float32)
        np.testing.assert_array_equal(np.asarray(image.resize(v, (n,), "nearest")),
                                      np.asarray(jax.image.resize(v, (n,), "nearest")))


@pytest.mark.parametrize("method,antialias", [("linear", True), ("linear", False),
                                              ("cubic", True), ("lanczos5", True),
                                              ("area", True), ("cubic-pytorch", False)])
def test_scale_and_translate_matches_jax(method, antialias):
    scale, shift = np.array([1.37, 0.63], np.float32), np.array([0.31, -0.77], np.float32)
    want = _jax_sat(X, (2, 10, 6), (1, 2), scale, shift, method, antialias)
    got = image.scale_and_translate(X, (2, 10, 6), (1, 2), scale, shift, method,
                                    antialias=antialias)
    _close(got, want)


def test_scale_and_translate_arguments():
    # negative axes and lists of numbers, nova Arrays, nothing to do
    want = _jax_sat(X, (2, 10, 9), (1,), jjnp.array([1.37]), jjnp.array([0.31]), "cubic", True)
    _close(image.scale_and_translate(X, (2, 10, 9), (-2,), [1.37], [0.31], "cubic"), want)
    _close(image.scale_and_translate(X, (2, 10, 9), (1,), jnp.asarray([1.37]),
                                     jnp.asarray([0.31]), image.ResizeMethod.CUBIC), want)
    got = image.scale_and_translate(X, X.shape, (), [], [], "linear")
    np.testing.assert_array_equal(np.asarray(got), X)


def test_matches_torch_interpolate():
    torch = pytest.importorskip("torch")
    tf = torch.nn.functional
    img = RNG.standard_normal((1, 2, 6, 8)).astype(np.float32)
    t = torch.from_numpy(img)
    # align_corners=True through scale_and_translate (the recipe of jax.image's docs)
    n, m = np.array([9, 5]), np.array([6, 8])
    scale = (n - 1) / (m - 1)
    got = image.scale_and_translate(img, (1, 2, 9, 5), (2, 3), scale, 0.5 * (1 - scale),
                                    "linear", antialias=False)
    want = tf.interpolate(t, size=(9, 5), mode="bilinear", align_corners=True)
    _close(got, want.numpy())
    want = tf.interpolate(t, size=(9, 5), mode="bicubic", align_corners=False)
    _close(image.resize(img, (1, 2, 9, 5), "bicubic-pytorch", antialias=False), want.numpy())
    want = tf.interpolate(t, size=(4, 3), mode="bilinear", antialias=True)
    _close(image.resize(img, (1, 2, 4, 3), "bilinear"), want.numpy())


def test_gradients_match_jax():
    x = X[0]
    ct = RNG.standard_normal((10, 6)).astype(np.float32)
    scale, shift = np.array([1.37, 0.63], np.float32), np.array([0.31, -0.77], np.float32)

    def loss_jax(x, s, t):
        return jjnp.sum(jax.image.scale_and_translate(x, (10, 6), (0, 1), s, t, "lanczos3")
                        * ct)

    def loss_nova(x, s, t):
        return jnp.sum(image.scale_and_translate(x, (10, 6), (0, 1), s, t, "lanczos3") * ct)

    # in the image, the scale and the translation (the weights are traced then)
    want = jax.jit(jax.grad(loss_jax, argnums=(0, 1, 2)))(x, scale, shift)
    got = nova.jit(nova.grad(loss_nova, argnums=(0, 1, 2)))(x, scale, shift)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=2e-5, atol=2e-5)
    # resize: the gradient in the image under jit, and eagerly for nearest (a gather)
    for m in ("linear", "nearest"):
        want = jax.grad(lambda x, m=m: jjnp.sum(jax.image.resize(x, (10, 6), m) * ct))(x)
        fn = nova.grad(lambda x, m=m: jnp.sum(image.resize(x, (10, 6), m) * ct))
        _close(nova.jit(fn)(x), want)
    _close(fn(x), want)


def test_under_jit_and_vmap():
    f = nova.jit(lambda x: image.resize(x, (2, 4, 14), "cubic"))
    _close(f(X), jax.image.resize(X, (2, 4, 14), "cubic"))
    per_image = nova.vmap(lambda x: image.resize(x, (4, 14), "cubic"))(X)
    _close(per_image, jax.image.resize(X, (2, 4, 14), "cubic"))


def test_resize_method_enum():
    assert image.ResizeMethod.from_string("bilinear") is image.ResizeMethod.LINEAR
    assert {m.name: m.value for m in image.ResizeMethod} == \
        {m.name: m.value for m in jax.image.ResizeMethod}
    with pytest.raises(ValueError, match="unknown resize method 'bogus'"):
        image.ResizeMethod.from_string("bogus")


def test_bad_arguments():
    with pytest.raises(ValueError, match="resize: unknown method 'bilinar'"):
        image.resize(X, (2, 3, 4), "bilinar")
    with pytest.raises(TypeError, match="resize: method must be"):
        image.resize(X, (2, 3, 4), 1)
    with pytest.raises(ValueError, match=r"resize: shape \(3, 4\) must have one entry"):
        image.resize(X, (3, 4), "linear")
    with pytest.raises(ValueError, match="negative size"):
        image.resize(X, (2, -3, 4), "linear")
    with pytest.raises(TypeError, match="shape must be a sequence of ints"):
        image.resize(X, (2, 3.5, 4), "linear")
    with pytest.raises(ValueError, match="cannot resample axis 0 of size 0"):
        image.resize(np.zeros((0, 3), np.float32), (2, 3), "linear")
    with pytest.raises(TypeError, match="not supported"):
        image.resize(np.array(["a"]), (2,), "linear")
    fn = image.scale_and_translate
    with pytest.raises(ValueError, match="nearest method is not supported"):
        fn(X, (2, 4, 9), (1,), [0.5], [0.0], "nearest")
    with pytest.raises(ValueError, match=r"axis 0 is not in spatial_dims \(1,\)"):
        fn(X, (3, 4, 9), (1,), [0.5], [0.0], "linear")
    with pytest.raises(ValueError, match=r"scale must have one entry per spatial dimension"):
        fn(X, (2, 4, 9), (1,), [0.5, 1.0], [0.0], "linear")
    with pytest.raises(ValueError, match="repeat an axis"):
        fn(X, (2, 4, 9), (1, -2), [0.5, 0.5], [0.0, 0.0], "linear")
    with pytest.raises(ValueError, match="spatial_dims"):
        fn(X, (2, 4, 9), (3,), [0.5], [0.0], "linear")
