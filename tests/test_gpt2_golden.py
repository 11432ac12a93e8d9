"""Golden test: a tiny GPT-2 in Nova against an independent JAX implementation written here.

Same parameters (Nova's initialization, exported by name), same tokens: the logits, the loss and
every parameter's gradient from `nova.jit(nova.value_and_grad(...))` must match JAX's in float32
within 1e-4 relative, and so must the first five losses of plain SGD from that initialization.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import nova
from nova import nn

CFG = nn.GPT2Config(vocab_size=64, block_size=16, n_layer=2, n_head=2, n_embd=32)
B, T = 2, 16
LR = 0.5
N_STEPS = 5
RTOL = 1e-4

# --- the reference: GPT-2 in JAX from a {name: array} dict, nothing shared with nova.nn ----------


def _ref_layer_norm(x, w, b, eps=1e-5):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / jnp.sqrt(var + eps) * w + b


def _ref_attention(x, p, pre, n_head):
    b, t, c = x.shape
    qkv = x @ p[pre + "c_attn.weight"] + p[pre + "c_attn.bias"]
    q, k, v = (qkv[..., i * c:(i + 1) * c].reshape(b, t, n_head, c // n_head).transpose(0, 2, 1, 3)
               for i in range(3))
    att = jnp.einsum("bhqd,bhkd->bhqk", q, k) / np.sqrt(c // n_head).astype(np.float32)
    causal = np.tril(np.ones((t, t), bool))
    att = jax.nn.softmax(jnp.where(causal, att, -jnp.inf), axis=-1)
    y = jnp.einsum("bhqk,bhkd->bhqd", att, v).transpose(0, 2, 1, 3).reshape(b, t, c)
    return y @ p[pre + "c_proj.weight"] + p[pre + "c_proj.bias"]


def ref_logits(p, idx):
    t = idx.shape[1]
    x = p["wte.weight"][idx] + p["wpe.weight"][:t]
    for i in range(CFG.n_layer):
        pre = f"h.{i}."
        h = _ref_layer_norm(x, p[pre + "ln_1.weight"], p[pre + "ln_1.bias"])
        x = x + _ref_attention(h, p, pre + "attn.", CFG.n_head)
        h = _ref_layer_norm(x, p[pre + "ln_2.weight"], p[pre + "ln_2.bias"])
        h = jax.nn.gelu(h @ p[pre + "mlp.c_fc.weight"] + p[pre + "mlp.c_fc.bias"], approximate=True)
        x = x + h @ p[pre + "mlp.c_proj.weight"] + p[pre + "mlp.c_proj.bias"]
    x = _ref_layer_norm(x, p["ln_f.weight"], p["ln_f.bias"])
    return x @ p["wte.weight"].T


def ref_loss(p, idx, tgt):
    logits = ref_logits(p, idx)
    logp = jax.nn.log_softmax(logits, axis=-1)
    return -jnp.take_along_axis(logp, tgt[..., None], axis=-1).mean(), logits


# --- the runs ------------------------------------------------------------------------------------


def _batch():
    # Structured tokens (a noisy counting pattern) so that SGD makes visible progress.
    rng = np.random.default_rng(0)
    base = (np.arange(T + 1)[None, :] * 3 + rng.integers(0, 8, (B, 1))) % CFG.vocab_size
    noise = rng.integers(0, CFG.vocab_size, (B, T + 1))
    toks = np.where(rng.random((B, T + 1)) < 0.2, noise, base).astype(np.int32)
    return toks[:, :-1], toks[:, 1:]


@pytest.fixture(scope="module")
def runs():
    assert not jax.config.read("jax_enable_x64")  # the reference computes in float32
    model = nn.GPT2.init(CFG, nova.random.key(42))
    idx, tgt = _batch()

    def loss_fn(m, idx, tgt):
        logits = m(idx)
        return nn.cross_entropy(logits, tgt), logits

    def sgd_step(m, idx, tgt):
        (loss, logits), grads = nova.value_and_grad(loss_fn, has_aux=True)(m, idx, tgt)
        new = nova.tree_util.tree_map(lambda p, g: p - LR * g, m, grads)
        return loss, logits, grads, new

    step = nova.jit(sgd_step)
    nova_runs = []
    m = model
    for _ in range(N_STEPS):
        loss, logits, grads, m = step(m, idx, tgt)
        nova_runs.append((float(loss), np.asarray(logits),
                          {k: np.asarray(v) for k, v in grads.named_parameters().items()}))
    assert step.cache_info().misses == 1  # one compile serves every step

    @jax.jit
    def ref_step(p, idx, tgt):
        (loss, logits), grads = jax.value_and_grad(ref_loss, has_aux=True)(p, idx, tgt)
        return loss, logits, grads, jax.tree_util.tree_map(lambda a, g: a - LR * g, p, grads)

    p = {k: jnp.asarray(v) for k, v in model.state_dict().items()}
    ref_runs = []
    for _ in range(N_STEPS):
        loss, logits, grads, p = ref_step(p, idx, tgt)
        ref_runs.append((float(loss), np.asarray(logits),
                         {k: np.asarray(v) for k, v in grads.items()}))
    return nova_runs, ref_runs


def _assert_rel_close(actual, expected, name):
    actual = np.asarray(actual, np.float64)
    expected = np.asarray(expected, np.float64)
    assert actual.shape == expected.shape, name
    scale = np.max(np.abs(expected))
    assert scale > 0, f"{name}: the reference is all zeros, the comparison would be vacuous"
    np.testing.assert_allclose(actual, expected, rtol=RTOL, atol=RTOL * scale, err_msg=name)
    rel = np.linalg.norm(actual - expected) / np.linalg.norm(expected)
    assert rel <= RTOL, f"{name}: relative error {rel:.2e} > {RTOL}"


def test_logits_and_loss_match_jax(runs):
    nova_runs, ref_runs = runs
    loss, logits, _ = nova_runs[0]
    ref_loss_value, ref_logits_value, _ = ref_runs[0]
    assert logits.shape == (B, T, CFG.vocab_size) and logits.dtype == np.float32
    _assert_rel_close(logits, ref_logits_value, "logits")
    assert abs(loss - ref_loss_value) <= RTOL * abs(ref_loss_value)
    # A freshly initialized model predicts nearly uniformly: loss close to log(vocab).
    assert abs(loss - np.log(CFG.vocab_size)) < 0.6


def test_every_parameter_gradient_matches_jax(runs):
    nova_runs, ref_runs = runs
    grads, ref_grads = nova_runs[0][2], ref_runs[0][2]
    assert list(grads) == list(nn.GPT2.init(CFG, nova.random.key(0)).named_parameters())
    assert set(grads) == set(ref_grads) and len(grads) == 4 + 12 * CFG.n_layer
    for name in grads:
        _assert_rel_close(grads[name], ref_grads[name], f"gradient of {name}")


def test_first_sgd_losses_match_jax(runs):
    nova_runs, ref_runs = runs
    losses = np.array([r[0] for r in nova_runs])
    ref = np.array([r[0] for r in ref_runs])
    np.testing.assert_allclose(losses, ref, rtol=RTOL)
    assert losses[-1] < losses[0] - 0.3, f"SGD did not reduce the loss: {losses}"
    # The last step's gradients still agree after four updates.
    for name, g in nova_runs[-1][2].items():
        _assert_rel_close(g, ref_runs[-1][2][name], f"step {N_STEPS} gradient of {name}")
