"""nova.nn.layers_extra against PyTorch: the normalizations (values, gradients, BatchNorm's
running statistics over several steps), Conv1d, Bilinear, PReLU, MultiheadAttention loaded from
a torch state dict (masks, layouts, kdim/vdim, bias_kv, zero attention), and the containers."""

from __future__ import annotations

import nova.numpy as jnp
import numpy as np
import pytest

import nova
from nova import nn
from nova.nn import layers_extra as L

torch = pytest.importorskip("torch")
TF = torch.nn.functional
RNG = np.random.default_rng(11)


def _randn(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def _close(got, want, tol=1e-5):
    want = want.detach().numpy() if isinstance(want, torch.Tensor) else np.asarray(want)
    got = np.asarray(got)
    assert got.shape == want.shape, (got.shape, want.shape)
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


def _check_vjp(nova_fn, torch_fn, *arrays, tol=1e-5):
    """Values and the gradients of <ct, f(arrays)> in every argument, nova (jitted) vs torch."""
    ts = [torch.tensor(a, requires_grad=True) for a in arrays]
    want = torch_fn(*ts)
    ct = _randn(*want.shape)
    want.backward(torch.from_numpy(ct))
    _close(nova.jit(nova_fn)(*arrays), want, tol)
    grads = nova.jit(nova.grad(lambda *a: jnp.sum(nova_fn(*a) * ct),
                               argnums=tuple(range(len(arrays)))))(*arrays)
    for g, t in zip(grads, ts, strict=True):
        _close(g, t.grad, tol)


def test_rms_norm():
    x, w = _randn(3, 5, 8), _randn(8)
    _check_vjp(lambda x, w: L.rms_norm(x, w, 1e-6),
               lambda x, w: TF.rms_norm(x, (8,), w, 1e-6), x, w)
    # eps None is the dtype's epsilon, as PyTorch's
    _close(nova.jit(L.rms_norm)(x * 1e-4), TF.rms_norm(torch.from_numpy(x * 1e-4), (8,)))
    layer = L.RMSNorm.init(8)
    assert layer.weight.shape == (8,) and layer.eps is None
    _close(layer(x), TF.rms_norm(torch.from_numpy(x), (8,)))
    assert L.RMSNorm.init(8, elementwise_affine=False).weight is None
    with pytest.raises(ValueError, match=r"rms_norm: weight must have shape \(8,\)"):
        L.rms_norm(x, _randn(5))


def test_group_norm():
    x, w, b = _randn(2, 6, 4, 3), _randn(6), _randn(6)
    _check_vjp(lambda x, w, b: L.group_norm(x, 3, w, b),
               lambda x, w, b: TF.group_norm(x, 3, w, b), x, w, b)
    layer = L.GroupNorm.init(2, 6, eps=1e-3)
    _close(nova.jit(lambda m, x: m(x))(layer, x),
           TF.group_norm(torch.from_numpy(x), 2, eps=1e-3))
    x1 = _randn(4, 6)  # no spatial axes
    _close(L.group_norm(x1, 6), TF.group_norm(torch.from_numpy(x1), 6))
    with pytest.raises(ValueError, match="num_groups=4 must be >= 1 and divide the 6 channels"):
        L.group_norm(x, 4)
    with pytest.raises(ValueError, match="must be >= 1 and divide num_channels=6"):
        L.GroupNorm.init(4, 6)


@pytest.mark.parametrize("momentum", [0.1, None])
def test_batch_norm_tracks_pytorchs_running_statistics(momentum):
    ref = torch.nn.BatchNorm2d(3, momentum=momentum)
    with torch.no_grad():
        ref.weight.copy_(torch.from_numpy(_randn(3)))
        ref.bias.copy_(torch.from_numpy(_randn(3)))
    bn = L.BatchNorm.init(3, momentum=momentum)
    bn = bn.replace(weight=jnp.asarray(ref.weight.detach().numpy()),
                    bias=jnp.asarray(ref.bias.detach().numpy()))
    state = bn.initial_state()
    step = nova.jit(lambda bn, s, x: bn(x, s, train=True))
    for _ in range(3):
        x = _randn(4, 3, 5, 2) * 2 + 1
        y, state = step(bn, state, x)
        _close(y, ref.train()(torch.from_numpy(x)))
    _close(state.running_mean, ref.running_mean)
    _close(state.running_var, ref.running_var)
    assert int(np.asarray(state.num_batches_tracked)) == 3
    x = _randn(2, 3, 5, 2)
    y, same = nova.jit(lambda bn, s, x: bn(x, s))(bn, state, x)
    _close(y, ref.eval()(torch.from_numpy(x)))
    _close(same.running_mean, ref.running_mean)


def test_batch_norm_gradients_and_options():
    x, w, b = _randn(4, 3, 5), _randn(3), _randn(3)

    def nova_fn(x, w, b):
        return L.batch_norm(x, None, None, w, b, training=True)[0]

    _check_vjp(nova_fn, lambda x, w, b: TF.batch_norm(x, None, None, w, b, training=True),
               x, w, b, tol=2e-5)
    # no gradient flows into the running statistics
    rm, rv = np.zeros(3, np.float32), np.ones(3, np.float32)
    g = nova.grad(lambda x: jnp.sum(L.batch_norm(x, rm, rv, training=True)[1]))(x)
    np.testing.assert_array_equal(np.asarray(g), 0.0)
    # without running statistics: always the batch's; state stays None
    bn = L.BatchNorm.init(3, track_running_stats=False, affine=False)
    assert bn.initial_state() is None and bn.weight is None
    y, s = bn(x, None)
    assert s is None
    _close(y, TF.batch_norm(torch.from_numpy(x), None, None, training=True))
    with pytest.raises(ValueError, match="more than one value per channel"):
        L.batch_norm(_randn(1, 3), None, None, training=True)
    with pytest.raises(ValueError, match="training=False normalizes by the running"):
        L.batch_norm(x, None, None)
    with pytest.raises(TypeError, match="state must be a BatchNormState"):
        L.BatchNorm.init(3)(x, None, train=True)


@pytest.mark.parametrize("stride,padding,dilation,groups", [(1, 1, 1, 1), (2, 0, 2, 2),
                                                            (1, "same", 2, 1)])
def test_conv1d(stride, padding, dilation, groups):
    x, w, b = _randn(2, 4, 11), _randn(6, 4 // groups, 3), _randn(6)
    _check_vjp(lambda x, w, b: L.conv1d(x, w, b, stride, padding, dilation, groups),
               lambda x, w, b: TF.conv1d(x, w, b, stride, padding, dilation, groups), x, w, b)


def test_conv1d_layer():
    layer = L.Conv1d.init(nova.random.key(0), 4, 6, 3, padding="same")
    assert layer.weight.shape == (6, 4, 3) and layer.bias.shape == (6,)
    assert np.abs(np.asarray(layer.weight)).max() <= 1 / np.sqrt(12)
    x = _randn(4, 9)  # unbatched
    want = TF.conv1d(torch.from_numpy(x), torch.from_numpy(np.asarray(layer.weight)),
                     torch.from_numpy(np.asarray(layer.bias)), padding="same")
    _close(nova.jit(lambda m, x: m(x))(layer, x), want)
    with pytest.raises(ValueError, match="padding='same' needs stride 1"):
        L.conv1d(x, np.asarray(layer.weight), stride=2, padding="same")
    with pytest.raises(ValueError, match="conv1d: x has 4 channels"):
        L.conv1d(x, _randn(6, 3, 3))


def test_bilinear_and_prelu():
    x1, x2, w, b = _randn(2, 3, 4), _randn(2, 3, 5), _randn(6, 4, 5), _randn(6)
    _check_vjp(L.bilinear, TF.bilinear, x1, x2, w, b)
    layer = L.Bilinear.init(nova.random.key(1), 4, 5, 6)
    assert layer.weight.shape == (6, 4, 5) and np.abs(np.asarray(layer.weight)).max() <= 0.5
    x, slopes = _randn(2, 3, 4), _randn(3)
    _check_vjp(L.prelu, TF.prelu, x, slopes)
    shared = L.PReLU.init()
    _close(shared(x), TF.prelu(torch.from_numpy(x), torch.tensor([0.25])))
    with pytest.raises(ValueError, match=r"prelu: weight must have shape \(1,\) or \(3,\)"):
        L.prelu(x, _randn(4))


def _torch_mha(seed, e, h, **kw):
    torch.manual_seed(seed)
    ref = torch.nn.MultiheadAttention(e, h, **kw)
    with torch.no_grad():  # non-zero biases, so that they are checked too
        for name, p in ref.named_parameters():
            if "bias" in name:
                p.copy_(torch.randn(p.shape))
    mine = L.MultiheadAttention.init(nova.random.key(seed), e, h, **kw)
    state = {k: v.detach().numpy() for k, v in ref.state_dict().items()}
    return ref, mine.load_state_dict(state)


@pytest.mark.filterwarnings("ignore:Support for mismatched key_padding_mask")
def test_multihead_attention_masks_and_weights():
    ref, mha = _torch_mha(0, 8, 2)
    q, k = _randn(5, 3, 8), _randn(6, 3, 8)  # (L, N, E), (S, N, E)
    pad = np.zeros((3, 6), bool)
    pad[1, 4:] = True
    attn = _randn(5, 6)
    run = nova.jit(lambda m, q, k, pad, attn: m(q, k, k, key_padding_mask=pad, attn_mask=attn))
    y, w = run(mha, q, k, pad, attn)
    wy, ww = ref(*(torch.from_numpy(t) for t in (q, k, k)), key_padding_mask=torch.from_numpy(pad),
                 attn_mask=torch.from_numpy(attn))
    _close(y, wy)
    _close(w, ww)
    # per-head weights, a bool 3-d mask, need_weights=False (through sdpa), is_causal
    mask3 = RNG.random((6, 5, 6)) < 0.3
    mask3[..., 0] = False
    y, w = mha(q, k, k, attn_mask=mask3, average_attn_weights=False)
    wy, ww = ref(*(torch.from_numpy(t) for t in (q, k, k)), attn_mask=torch.from_numpy(mask3),
                 average_attn_weights=False)
    _close(y, wy)
    _close(w, ww)
    y, none = mha(q, k, k, attn_mask=mask3, need_weights=False)
    assert none is None
    _close(y, wy)
    causal = np.triu(np.ones((5, 6), bool), 1)
    y, _ = mha(q, k, k, is_causal=True, need_weights=False)
    _close(y, ref(*(torch.from_numpy(t) for t in (q, k, k)), attn_mask=torch.from_numpy(causal),
                  is_causal=True, need_weights=False)[0])


def test_multihead_attention_layouts_and_options():
    ref, mha = _torch_mha(1, 8, 4, kdim=6, vdim=5, add_bias_kv=True, add_zero_attn=True,
                          batch_first=True)
    assert mha.in_proj_weight is None and mha.k_proj_weight.shape == (8, 6)
    q, k, v = _randn(2, 5, 8), _randn(2, 7, 6), _randn(2, 7, 5)
    pad = np.zeros((2, 7), bool)
    pad[0, 5:] = True
    y, w = nova.jit(lambda m, q, k, v, p: m(q, k, v, key_padding_mask=p))(mha, q, k, v, pad)
    wy, ww = ref(*(torch.from_numpy(t) for t in (q, k, v)), key_padding_mask=torch.from_numpy(pad))
    assert w.shape == (2, 5, 9)  # S + bias_k + the zero key
    _close(y, wy)
    _close(w, ww)
    # unbatched
    y, w = mha(q[0], k[0], v[0])
    wy, ww = ref(*(torch.from_numpy(t[0]) for t in (q, k, v)))
    _close(y, wy)
    _close(w, ww)


def test_multihead_attention_gradients_and_dropout():
    ref, mha = _torch_mha(2, 8, 2, batch_first=True)
    q, k = _randn(2, 4, 8), _randn(2, 6, 8)
    ct = _randn(2, 4, 8)

    def loss(m, q, k):
        return jnp.sum(m(q, k, k, need_weights=False)[0] * ct)

    g_model, g_q = nova.jit(nova.grad(loss, argnums=(0, 1)))(mha, q, k)
    tq = torch.tensor(q, requires_grad=True)
    tk = torch.from_numpy(k)
    (ref(tq, tk, tk, need_weights=False)[0] * torch.from_numpy(ct)).sum().backward()
    _close(g_q, tq.grad)
    _close(g_model.in_proj_weight, ref.in_proj_weight.grad)
    _close(g_model.out_proj.weight, ref.out_proj.weight.grad)
    # a query that may attend to nothing: zeros, where PyTorch gives NaN
    pad = np.ones((2, 6), bool)
    _, w = mha(q, k, k, key_padding_mask=pad)
    np.testing.assert_array_equal(np.asarray(w), 0.0)
    # dropout only when training, from the key; the same key gives the same output
    drop = L.MultiheadAttention.init(nova.random.key(3), 8, 2, dropout=0.5, batch_first=True)
    ev, _ = drop(q, k, k)
    tr1, w1 = drop(q, k, k, dropout_key=nova.random.key(4), train=True)
    tr2, _ = drop(q, k, k, dropout_key=nova.random.key(4), train=True)
    np.testing.assert_array_equal(np.asarray(tr1), np.asarray(tr2))
    assert not np.allclose(np.asarray(tr1), np.asarray(ev))
    assert set(np.unique(np.asarray(w1) == 0)) == {True, False}
    with pytest.raises(ValueError, match="needs a nova.random key"):
        drop(q, k, k, train=True)
    with pytest.raises(ValueError, match=r"key_padding_mask must have shape \(N, S\)"):
        mha(q, k, k, key_padding_mask=pad[:, :3])
    with pytest.raises(ValueError, match="must be >= 1 and divide embed_dim"):
        L.MultiheadAttention.init(nova.random.key(0), 8, 3)


def test_sequential_identity_lambda():
    keys = nova.random.split(nova.random.key(5), 2)
    model = L.Sequential([nn.Linear.init(keys[0], 4, 8), L.Lambda(nn.relu), L.Identity(),
                          nn.Dropout(0.5), nn.Linear.init(keys[1], 8, 2)])
    assert len(model) == 5 and isinstance(model[1], L.Lambda)
    assert list(model.named_parameters()) == ["layers.0.weight", "layers.0.bias",
                                              "layers.4.weight", "layers.4.bias"]
    x = _randn(3, 4)
    w0, b0 = np.asarray(model[0].weight), np.asarray(model[0].bias)
    w4, b4 = np.asarray(model[4].weight), np.asarray(model[4].bias)
    want = np.maximum(x @ w0 + b0, 0) @ w4 + b4
    run = nova.jit(lambda m, x: m(x))
    _close(run(model, x), want)
    _close(model[:2](x), np.maximum(x @ w0 + b0, 0))
    # training: dropout gets its own key
    a = model(x, key=nova.random.key(6), train=True)
    b = model(x, key=nova.random.key(6), train=True)
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert not np.allclose(np.asarray(a), want)
    # a gradient of the model's shape
    g = nova.grad(lambda m, x: jnp.sum(m(x)))(model, x)
    assert isinstance(g, L.Sequential) and g[4].weight.shape == (8, 2)
    _close(g[4].bias, np.full(2, 3.0))
    with pytest.raises(TypeError, match="Lambda: fn must be callable"):
        L.Lambda(3)
    with pytest.raises(TypeError, match=r"Sequential: layers \[1\] are not Modules"):
        L.Sequential([L.Identity(), nn.relu])
