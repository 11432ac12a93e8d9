"""nova.nn's convolution and pooling (F.conv2d, F.max_pool2d, F.avg_pool2d, Conv2d) against
direct NumPy definitions in PyTorch's conventions, and a small CNN trained a few steps."""

from __future__ import annotations

import nova.numpy as jnp
import numpy as np
import pytest

import nova
from nova import nn
from nova.nn import functional as F

RNG = np.random.default_rng(4)


def _np_conv2d(x, w, b, stride, pad, dil, groups):
    n, _, h, wd = x.shape
    o, ig, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad[0], pad[0]), (pad[1], pad[1])))
    ho = (h + 2 * pad[0] - dil[0] * (kh - 1) - 1) // stride[0] + 1
    wo = (wd + 2 * pad[1] - dil[1] * (kw - 1) - 1) // stride[1] + 1
    out = np.zeros((n, o, ho, wo))
    og = o // groups
    for i in range(ho):
        for j in range(wo):
            for a in range(kh):
                for bb in range(kw):
                    v = xp[:, :, i * stride[0] + a * dil[0], j * stride[1] + bb * dil[1]]
                    for g in range(groups):
                        out[:, g * og:(g + 1) * og, i, j] += \
                            v[:, g * ig:(g + 1) * ig] @ w[g * og:(g + 1) * og, :, a, bb].T
    return out + (0 if b is None else b[None, :, None, None])


@pytest.mark.parametrize("stride,pad,dil,groups", [(1, 1, 1, 1), (2, 0, 1, 1), ((1, 2), (2, 1),
                                                   (2, 1), 2), (1, 1, 1, 4)])
def test_conv2d_matches_pytorchs_definition(stride, pad, dil, groups):
    x = RNG.standard_normal((2, 4, 7, 6))
    w = RNG.standard_normal((4, 4 // groups, 3, 3))
    b = RNG.standard_normal(4)
    pair = lambda v: (v, v) if isinstance(v, int) else v
    want = _np_conv2d(x, w, b, pair(stride), pair(pad), pair(dil), groups)
    got = nova.jit(lambda x, w, b: F.conv2d(x, w, b, stride, pad, dil, groups))(x, w, b)
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(np.asarray(F.conv2d(x[0], w, None, stride, pad, dil, groups)),
                               want[0] - b[:, None, None], rtol=1e-12, atol=1e-12)


def test_same_valid_and_layer():
    x = RNG.standard_normal((1, 3, 5, 5))
    layer = nn.Conv2d.init(nova.random.key(0), 3, 6, 3, padding="same")
    assert layer.weight.shape == (6, 3, 3, 3) and layer.bias.shape == (6,)
    bound = 1 / np.sqrt(27)
    assert np.abs(np.asarray(layer.weight)).max() <= bound
    want = _np_conv2d(x, np.asarray(layer.weight, np.float64), np.asarray(layer.bias, np.float64),
                      (1, 1), (1, 1), (1, 1), 1)
    got = layer(x.astype(np.float32))
    assert got.shape == (1, 6, 5, 5)
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-5)
    v = F.conv2d(x, np.ones((2, 3, 3, 3)), padding="valid")
    assert v.shape == (1, 2, 3, 3)
    np.testing.assert_allclose(np.asarray(v)[0, 0, 0, 0], x[0, :, :3, :3].sum(), rtol=1e-12)


def test_pooling():
    x = RNG.standard_normal((2, 3, 6, 7))
    mp = F.max_pool2d(x, 2)
    np.testing.assert_array_equal(np.asarray(mp), x[:, :, :6, :6].reshape(2, 3, 3, 2, 3, 2)
                                  .max(axis=(3, 5)))
    ap = F.avg_pool2d(x, (3, 3), stride=1, padding=1)
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    want = sum(xp[:, :, i:i + 6, j:j + 7] for i in range(3) for j in range(3)) / 9
    np.testing.assert_allclose(np.asarray(ap), want, rtol=1e-12)
    ex = F.avg_pool2d(x, 3, stride=1, padding=1, count_include_pad=False)
    cnt = sum(np.pad(np.ones((6, 7)), 1)[i:i + 6, j:j + 7] for i in range(3) for j in range(3))
    np.testing.assert_allclose(np.asarray(ex), want * 9 / cnt, rtol=1e-12)
    g = nova.grad(lambda x: jnp.sum(F.max_pool2d(x, 2)))(np.array([[[[1.0, 4.0], [3.0, 2.0]]]]))
    np.testing.assert_array_equal(np.asarray(g), [[[[0.0, 1.0], [0.0, 0.0]]]])
    with pytest.raises(ValueError, match="at most half the kernel"):
        F.max_pool2d(x, 2, padding=2)
    with pytest.raises(ValueError, match="kernel_size must be an int or 2 positive ints"):
        F.max_pool2d(x, 0)
    with pytest.raises(ValueError, match="stride must be an int or 2 positive ints"):
        F.avg_pool2d(x, 2, stride=(1, 0))
    with pytest.raises(ValueError, match="dilation must be an int or 2 positive ints"):
        F.conv2d(x, np.ones((1, 3, 1, 1)), dilation=0)
    with pytest.raises(ValueError, match="padding must be an int or 2 non-negative ints"):
        F.conv2d(x, np.ones((1, 3, 1, 1)), padding=-1)


def test_max_pool_ties_send_the_gradient_to_the_first_maximum():
    # PyTorch's max_pool2d picks the first maximum of each window; so does Nova's
    x = np.array([[[[2.0, 2.0, 1.0, 1.0],
                    [2.0, 0.0, 1.0, 1.0],
                    [0.0, 0.0, 3.0, 0.0],
                    [0.0, 0.0, 0.0, 3.0]]]])
    g = nova.jit(nova.grad(lambda v: jnp.sum(F.max_pool2d(v, 2))))(x)
    want = np.zeros_like(x)
    want[0, 0, 0, 0] = want[0, 0, 0, 2] = want[0, 0, 2, 0] = want[0, 0, 2, 2] = 1.0
    np.testing.assert_array_equal(np.asarray(g), want)
    g = nova.grad(lambda v: jnp.sum(F.max_pool2d(v, 3, stride=1, padding=1)))(x)
    assert float(np.asarray(g).sum()) == 16.0  # one element per window


def test_a_small_cnn_learns():
    key = nova.random.key(1)
    k1, k2, k3 = nova.random.split(key, 3)
    model = {"c1": nn.Conv2d.init(k1, 1, 4, 3, padding=1),
             "c2": nn.Conv2d.init(k2, 4, 8, 3, padding=1),
             "fc": nn.Linear.init(k3, 8 * 2 * 2, 2, std=0.1)}
    # two classes: a bright top half or a bright bottom half
    x = RNG.standard_normal((16, 1, 8, 8)).astype(np.float32) * 0.1
    y = np.arange(16) % 2
    x[y == 0, :, :4] += 1.0
    x[y == 1, :, 4:] += 1.0

    def loss(m, x, y):
        h = F.max_pool2d(F.relu(m["c1"](x)), 2)
        h = F.avg_pool2d(F.relu(m["c2"](h)), 2)
        return F.cross_entropy(m["fc"](jnp.reshape(h, (h.shape[0], -1))), y)

    step = nova.jit(nova.value_and_grad(loss))
    first = None
    for _ in range(30):
        value, g = step(model, x, y)
        first = float(value) if first is None else first
        model = nova.tree_util.tree_map(lambda p, d: p - 0.5 * d, model, g)
    assert float(step(model, x, y)[0]) < 0.25 * first
