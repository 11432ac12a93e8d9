"""nova.nn functions against JAX references (values and gradients, stability cases; the references
follow PyTorch's definitions where nova.nn follows PyTorch's API), layers, Module pytree behaviour,
freezing, dropout and GPT-2's API. (PyTorch is a benchmark-only dependency, not a test one.)"""

import dataclasses

import jax
import jax.numpy as jjnp
import numpy as np
import pytest

import nova
import nova.numpy as jnp
from nova import nn
from tests.helpers import assert_close

RNG = np.random.default_rng(0)


def _value_and_vjp(f, *args, ct=None):
    """Nova under one jit: f(*args) and the gradients of sum(f(*args) * ct) with respect to every
    argument, for a cotangent ct (random unless given; returned too)."""
    if ct is None:
        shape = nova.make_program(f)(*args).outputs[0].type.shape  # traced only, not compiled
        ct = RNG.standard_normal(shape).astype(np.float32)

    def run(args, ct):
        return f(*args), nova.grad(lambda a: jnp.sum(f(*a) * ct))(args)

    y, g = nova.jit(run)(list(args), ct)
    return np.asarray(y), [np.asarray(x) for x in g], ct


def _jax_value_and_vjp(f, args, ct):
    y, vjp = jax.vjp(f, *[jjnp.asarray(a) for a in args])
    return np.asarray(y), [np.asarray(g) for g in vjp(jjnp.asarray(ct))]


X = RNG.standard_normal((4, 7)).astype(np.float32) * 3

UNARY = [
    ("relu", nn.relu, jax.nn.relu),
    ("gelu", nn.gelu, lambda x: jax.nn.gelu(x, approximate=False)),
    ("gelu_tanh", lambda x: nn.gelu(x, approximate=True),
     lambda x: jax.nn.gelu(x, approximate=True)),
    ("silu", nn.silu, jax.nn.silu),
    ("softmax", nn.softmax, jax.nn.softmax),
    ("softmax_axis0", lambda x: nn.softmax(x, axis=0), lambda x: jax.nn.softmax(x, axis=0)),
    ("log_softmax", nn.log_softmax, jax.nn.log_softmax),
    ("logsumexp", lambda x: nn.logsumexp(x, axis=-1), lambda x: jax.nn.logsumexp(x, axis=-1)),
]


@pytest.mark.parametrize("name,f,ref", UNARY, ids=[u[0] for u in UNARY])
def test_unary_functions_match_jax(name, f, ref):
    y, (g,), ct = _value_and_vjp(f, X)
    ry, (rg,) = _jax_value_and_vjp(ref, [X], ct)
    assert_close(y, ry, rtol=1e-5, atol=1e-5, err_msg=name)
    assert_close(g, rg, rtol=1e-5, atol=1e-5, err_msg=f"gradient of {name}")


def test_relu_keeps_nan_and_integers_like_jax():
    """relu(NaN) is NaN (a diverging model stays visible; it was 0), integer arrays keep their
    dtype, and the gradient at 0 is 0, all as jax.nn.relu."""
    x = np.array([np.nan, -1.0, 0.0, 2.0, -np.inf, np.inf], np.float32)
    np.testing.assert_array_equal(np.asarray(nn.relu(x)), np.asarray(jax.nn.relu(x)))
    np.testing.assert_array_equal(np.asarray(nova.jit(nn.relu)(x)), np.asarray(jax.nn.relu(x)))
    xi = np.array([-3, 0, 4], np.int32)
    out = nn.relu(xi)
    assert out.dtype == np.int32 and np.asarray(out).tolist() == [0, 0, 4]
    g = nova.grad(lambda v: nova.numpy.sum(nn.relu(v)))(np.array([-1.0, 0.0, 2.0, np.nan],
                                                                 np.float32))
    assert np.asarray(g).tolist() == [0.0, 0.0, 1.0, 0.0]  # 0 at NaN too, as jax.nn.relu
    with pytest.raises(TypeError, match="relu: expected a floating-point or integer array"):
        nn.relu(np.array([True]))


def test_layer_norm_matches_reference():
    x = RNG.standard_normal((3, 5, 16)).astype(np.float32) * 4 + 2
    w = RNG.standard_normal(16).astype(np.float32)
    b = RNG.standard_normal(16).astype(np.float32)
    y, (gx, gw, gb), ct = _value_and_vjp(lambda x, w, b: nn.layer_norm(x, w, b), x, w, b)

    def ref(x, w, b):  # torch.nn.functional.layer_norm's definition (biased variance)
        mu = x.mean(-1, keepdims=True)
        var = ((x - mu) ** 2).mean(-1, keepdims=True)
        return (x - mu) / jjnp.sqrt(var + 1e-5) * w + b

    ry, rgrads = _jax_value_and_vjp(ref, [x, w, b], ct)
    assert_close(y, ry, rtol=1e-5, atol=1e-5)
    for a, r, n in zip((gx, gw, gb), rgrads, ("x", "weight", "bias"), strict=True):
        assert_close(a, r, rtol=1e-4, atol=1e-4, err_msg=f"gradient of {n}")
    with pytest.raises(ValueError, match=r"weight must have shape \(16,\)"):
        nn.layer_norm(x, w[:8], b)


def test_one_hot():
    labels = np.array([[0, 3], [5, -1]], np.int32)
    out = np.asarray(nn.one_hot(labels, 4))
    np.testing.assert_array_equal(out, np.asarray(jax.nn.one_hot(labels, 4)))
    assert out.dtype == np.float32 and out.shape == (2, 2, 4)
    with pytest.raises(TypeError, match="labels must be integers"):
        nn.one_hot(np.zeros(2, np.float32), 4)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_matches_reference_with_ignore_index(reduction):
    logits = RNG.standard_normal((6, 10)).astype(np.float32) * 3
    labels = np.array([1, 9, -100, 0, 4, -100], np.int32)
    y, (g,), ct = _value_and_vjp(lambda z: nn.cross_entropy(z, labels, reduction=reduction),
                                 logits)

    def ref(z):  # torch.nn.functional.cross_entropy: ignored rows count neither loss nor mean
        keep = labels != -100
        safe = np.where(keep, labels, 0)
        per = jax.nn.logsumexp(z, axis=-1) - z[np.arange(len(labels)), safe]
        per = jjnp.where(keep, per, 0.0)
        if reduction == "none":
            return per
        return per.sum() if reduction == "sum" else per.sum() / keep.sum()

    ry, (rg,) = _jax_value_and_vjp(ref, [logits], ct)
    assert_close(y, ry, rtol=1e-5, atol=1e-6)
    assert_close(g, rg, rtol=1e-5, atol=1e-6)


def test_cross_entropy_argument_errors():
    z = np.zeros((3, 4), np.float32)
    with pytest.raises(TypeError, match="labels must be integers"):
        nn.cross_entropy(z, np.zeros(3, np.float32))
    with pytest.raises(ValueError, match=r"labels of shape \(4,\) do not match logits"):
        nn.cross_entropy(z, np.zeros(4, np.int32))
    with pytest.raises(ValueError, match="reduction must be"):
        nn.cross_entropy(z, np.zeros(3, np.int32), reduction="avg")


def test_stability_huge_logits_and_all_masked_rows():
    big = np.array([[1e4, 0.0, -1e4], [1e4, 1e4 - 1.0, 3.0]], np.float32)

    def f(z):
        return (nn.softmax(z), nn.log_softmax(z), nn.logsumexp(z, axis=-1),
                nn.cross_entropy(z, np.array([1, 0], np.int32)))

    outs = [np.asarray(o) for o in nova.jit(f)(big)]
    refs = [jax.nn.softmax(big), jax.nn.log_softmax(big), jax.nn.logsumexp(big, axis=-1),
            -jax.nn.log_softmax(big)[np.arange(2), [1, 0]].mean()]
    for o, r in zip(outs, refs, strict=True):
        assert np.all(np.isfinite(o))
        assert_close(o, np.asarray(r), rtol=1e-6, atol=1e-6)
    g = np.asarray(nova.jit(nova.grad(
        lambda z: nn.cross_entropy(z, np.array([1, 0], np.int32))))(big))
    rg = jax.grad(lambda z: -jax.nn.log_softmax(z)[np.arange(2), [1, 0]].mean())(big)
    assert_close(g, np.asarray(rg), rtol=1e-6, atol=1e-6)
    # A softmax row of all -inf gives zeros (value and gradient), the others are untouched.
    z = np.array([[-np.inf] * 3, [0.0, 1.0, -np.inf]], np.float32)
    ct = np.array([[1.0, 2.0, 3.0], [1.0, -1.0, 0.5]], np.float32)
    def objective(z):
        p = nn.softmax(z)
        return jnp.sum(p**2 * ct), p

    (_, p), gs = nova.jit(nova.value_and_grad(objective, has_aux=True))(z)
    p, gs = np.asarray(p), np.asarray(gs)
    np.testing.assert_array_equal(p[0], 0.0)
    np.testing.assert_array_equal(gs[0], 0.0)
    assert_close(p[1], np.asarray(jax.nn.softmax(z[1])))
    assert_close(gs[1], np.asarray(jax.grad(lambda r: jjnp.sum(jax.nn.softmax(r) ** 2 * ct[1]))(
        z[1])), rtol=1e-5, atol=1e-6)


def _reference_sdpa(q, k, v, *, is_causal=False, attn_mask=None, scale=None):
    """torch.nn.functional.scaled_dot_product_attention's definition, in JAX: scores
    q kᵀ · scale (default 1/sqrt(D)); a causal or boolean mask (True = attend) sets the others to
    -inf, a float mask is added; softmax over keys; times v."""
    s = q @ jjnp.swapaxes(k, -1, -2) * (scale if scale is not None else q.shape[-1] ** -0.5)
    if is_causal:
        s = jjnp.where(np.tril(np.ones((q.shape[-2], k.shape[-2]), bool)), s, -jjnp.inf)
    if attn_mask is not None:
        s = jjnp.where(attn_mask, s, -jjnp.inf) if attn_mask.dtype == bool else s + attn_mask
    return jax.nn.softmax(s, axis=-1) @ v


SDPA_CASES = {
    "plain": ({}, {}),
    "causal": ({"causal": True}, {"is_causal": True}),
    "scale": ({"scale": 0.3}, {"scale": 0.3}),
    "bool_mask": ({"mask": RNG.random((5, 6)) < 0.7}, None),
    "float_mask": ({"mask": RNG.standard_normal((2, 1, 5, 6)).astype(np.float32)}, None),
}


@pytest.mark.parametrize("case", list(SDPA_CASES))
def test_scaled_dot_product_attention_matches_reference(case):
    kw, tkw = SDPA_CASES[case]
    tq = 5 if case != "causal" else 6
    q = RNG.standard_normal((2, 3, tq, 4)).astype(np.float32)
    k = RNG.standard_normal((2, 3, 6, 4)).astype(np.float32)
    v = RNG.standard_normal((2, 3, 6, 8)).astype(np.float32)
    if tkw is None:  # masks as PyTorch's attn_mask (bool True = attend, float added)
        mask = kw["mask"]
        if mask.dtype == bool:
            mask = mask.copy()
            mask[:, 0] = True  # the reference gives NaN for fully masked rows; tested separately
        kw, tkw = {"mask": mask}, {"attn_mask": mask}
    y, grads, ct = _value_and_vjp(lambda q, k, v: nn.scaled_dot_product_attention(q, k, v, **kw),
                                  q, k, v)
    ry, rgrads = _jax_value_and_vjp(lambda q, k, v: _reference_sdpa(q, k, v, **tkw), [q, k, v],
                                    ct)
    assert y.shape == (2, 3, tq, 8)
    assert_close(y, ry, rtol=1e-5, atol=1e-5)
    for g, r, n in zip(grads, rgrads, "qkv", strict=True):
        assert_close(g, r, rtol=1e-4, atol=1e-5, err_msg=f"gradient of {n}")


def test_attention_fully_masked_row_gives_zeros_not_nan():
    q = RNG.standard_normal((2, 4, 8)).astype(np.float32) * 100  # huge scores too
    k = RNG.standard_normal((2, 5, 8)).astype(np.float32) * 100
    v = RNG.standard_normal((2, 5, 8)).astype(np.float32)
    mask = RNG.random((4, 5)) < 0.6
    mask[2] = False  # query 2 may attend to nothing
    mask[0, 0] = True
    y, (gq, gk, gv), ct = _value_and_vjp(
        lambda q, k, v: nn.scaled_dot_product_attention(q, k, v, mask=mask), q, k, v)
    for a in (y, gq, gk, gv):
        assert np.all(np.isfinite(a))
    np.testing.assert_array_equal(y[:, 2], 0.0)
    np.testing.assert_array_equal(gq[:, 2], 0.0)
    # The other rows agree with the reference that leaves row 2 out.
    keep = [0, 1, 3]
    ry, (rq, rk, rv) = _jax_value_and_vjp(
        lambda q, k, v: jax.nn.dot_product_attention(
            q[:, :, None], k[:, :, None], v[:, :, None], mask=mask[keep])[:, :, 0],
        [q[:, keep], k, v], ct[:, keep])
    assert_close(y[:, keep], ry, rtol=1e-4, atol=1e-4)
    assert_close(gq[:, keep], rq, rtol=1e-4, atol=1e-3)
    assert_close(gk, rk, rtol=1e-4, atol=1e-3)
    assert_close(gv, rv, rtol=1e-4, atol=1e-4)
    # The same mask as an additive float mask (-inf where masked) behaves the same.
    additive = np.where(mask, 0.0, -np.inf).astype(np.float32)
    y2, grads2, _ = _value_and_vjp(
        lambda q, k, v: nn.scaled_dot_product_attention(q, k, v, mask=additive), q, k, v, ct=ct)
    assert_close(y2, y, rtol=1e-6, atol=1e-6)
    for a, b in zip(grads2, (gq, gk, gv), strict=True):
        assert_close(a, b, rtol=1e-5, atol=1e-5)


def test_attention_dropout_uses_the_key():
    q, k, v = (RNG.standard_normal((2, 5, 4)).astype(np.float32) for _ in range(3))
    key = nova.random.key(11)
    f = nova.jit(lambda q, k, v, key: nn.scaled_dot_product_attention(
        q, k, v, causal=True, dropout_p=0.5, key=key))
    y = np.asarray(f(q, k, v, key))
    np.testing.assert_array_equal(y, np.asarray(f(q, k, v, key)))
    # The same computation by hand: the weights masked with bernoulli(key, 1 - p), scaled by 2.
    keep = np.asarray(nova.random.bernoulli(key, 0.5, (2, 5, 5)))
    w = np.asarray(jax.nn.softmax(np.where(np.tril(np.ones((5, 5), bool)),
                                           q @ k.transpose(0, 2, 1) / 2.0, -np.inf)))
    assert_close(y, (w * keep * 2.0) @ v, rtol=1e-5, atol=1e-6)
    assert not np.allclose(y, np.asarray(f(q, k, v, nova.random.key(12))))
    with pytest.raises(ValueError, match="needs a nova.random key"):
        nn.scaled_dot_product_attention(q, k, v, dropout_p=0.1)


# --- layers ----------------------------------------------------------------------------------


def test_linear_embedding_layernorm():
    lin = nn.Linear.init(nova.random.key(0), 6, 3)
    assert lin.weight.shape == (6, 3) and lin.bias.shape == (3,)
    x = RNG.standard_normal((2, 6)).astype(np.float32)
    assert_close(np.asarray(lin(x)), x @ np.asarray(lin.weight) + np.asarray(lin.bias))
    with pytest.raises(ValueError, match=r"does not end in in_features = 6"):
        lin(np.zeros((2, 5), np.float32))
    assert nn.Linear.init(nova.random.key(0), 6, 3, bias=False).bias is None
    emb = nn.Embedding.init(nova.random.key(1), 10, 4)
    idx = np.array([[1, 9], [0, 1]], np.int32)
    assert_close(np.asarray(emb(idx)), np.asarray(emb.weight)[idx])
    with pytest.raises(TypeError, match="indices must be integers"):
        emb(np.zeros(2, np.float32))
    ln = nn.LayerNorm.init(4)
    np.testing.assert_array_equal(np.asarray(ln.weight), np.ones(4, np.float32))
    np.testing.assert_array_equal(np.asarray(ln.bias), np.zeros(4, np.float32))


def test_dropout_is_key_deterministic_and_identity_in_eval():
    x = jnp.ones((64, 64))
    drop = nn.Dropout(0.25)
    k1, k2 = nova.random.split(nova.random.key(3))
    a, b, c = (np.asarray(drop(x, key=k, train=True)) for k in (k1, k1, k2))
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    assert set(np.unique(a)) == {0.0, np.float32(1 / 0.75)}
    assert abs((a == 0).mean() - 0.25) < 0.03
    np.testing.assert_array_equal(np.asarray(drop(x, key=k1)), 1.0)  # train=False: identity
    np.testing.assert_array_equal(np.asarray(nn.Dropout(0.0)(x, train=True)), 1.0)
    with pytest.raises(ValueError, match="needs a nova.random key"):
        drop(x, train=True)
    with pytest.raises(ValueError, match=r"rate must be in \[0, 1\)"):
        nn.Dropout(1.0)
    # Under jit the same key gives the same mask as eagerly.
    jitted = nova.jit(lambda x, k: drop(x, key=k, train=True))
    np.testing.assert_array_equal(np.asarray(jitted(x, k1)), a)


def test_causal_self_attention_does_not_look_ahead():
    attn = nn.CausalSelfAttention.init(nova.random.key(0), 16, 4)
    f = nova.jit(lambda m, x: m(x))
    x = RNG.standard_normal((2, 6, 16)).astype(np.float32)
    x2 = x.copy()
    x2[:, 4:] += 5.0
    y, y2 = np.asarray(f(attn, x)), np.asarray(f(attn, x2))
    assert y.shape == (2, 6, 16)
    assert_close(y2[:, :4], y[:, :4], rtol=1e-5, atol=1e-6)
    assert not np.allclose(y2[:, 4:], y[:, 4:])


# --- Module ------------------------------------------------------------------------------------

CFG = nn.GPT2Config(vocab_size=64, block_size=16, n_layer=2, n_head=2, n_embd=32)


@pytest.fixture(scope="module")
def gpt():
    return nn.GPT2.init(CFG, nova.random.key(0))


def test_gpt2_parameter_names_and_count(gpt):
    names = list(gpt.named_parameters())
    per_block = ["ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias",
                 "attn.c_proj.weight", "attn.c_proj.bias", "ln_2.weight", "ln_2.bias",
                 "mlp.c_fc.weight", "mlp.c_fc.bias", "mlp.c_proj.weight", "mlp.c_proj.bias"]
    assert names == (["wte.weight", "wpe.weight"]
                     + [f"h.{i}.{n}" for i in range(2) for n in per_block]
                     + ["ln_f.weight", "ln_f.bias"])
    d, v, t, L = 32, 64, 16, 2
    expected = v * d + t * d + L * (12 * d * d + 13 * d) + 2 * d
    assert gpt.num_parameters() == expected == sum(p.size for p in gpt.parameters())
    assert nn.GPT2Config.tiny().n_embd == 128 and nn.GPT2Config.tiny(vocab_size=80).vocab_size == 80
    # GPT-2 small's 124,439,808 parameters (tied head), counted from the traced initialization.
    prog = nova.make_program(lambda k: nn.GPT2.init(nn.GPT2Config.gpt2(), k))(nova.random.key(0))
    assert sum(int(np.prod(o.type.shape)) for o in prog.outputs) == 124_439_808
    sd = gpt.state_dict()
    assert isinstance(sd["h.1.mlp.c_fc.weight"], np.ndarray)
    assert sd["h.1.mlp.c_fc.weight"].shape == (32, 128)


def test_gpt2_init_is_deterministic_and_gpt2_scaled(gpt):
    again = nn.GPT2.init(CFG, nova.random.key(0)).state_dict()
    other = nn.GPT2.init(CFG, nova.random.key(1)).state_dict()
    sd = gpt.state_dict()
    for k in sd:
        np.testing.assert_array_equal(sd[k], again[k], err_msg=k)
    assert not np.array_equal(sd["wte.weight"], other["wte.weight"])
    proj = np.concatenate([sd[f"h.{i}.{n}.c_proj.weight"].ravel() for i in range(2)
                           for n in ("attn", "mlp")])
    assert abs(proj.std() / (0.02 / np.sqrt(4)) - 1) < 0.05
    fc = np.concatenate([sd[f"h.{i}.mlp.c_fc.weight"].ravel() for i in range(2)])
    assert abs(fc.std() / 0.02 - 1) < 0.05 and abs(fc.mean()) < 0.002
    assert abs(sd["wpe.weight"].std() / 0.01 - 1) < 0.1
    np.testing.assert_array_equal(sd["h.0.attn.c_attn.bias"], 0.0)
    np.testing.assert_array_equal(sd["h.1.ln_2.weight"], 1.0)
    # Independent draws per layer.
    assert not np.array_equal(sd["h.0.mlp.c_fc.weight"], sd["h.1.mlp.c_fc.weight"])


def test_module_is_a_pytree_and_grad_is_model_shaped(gpt):
    leaves, td = nova.tree_util.tree_flatten(gpt)
    assert len(leaves) == len(gpt.parameters())
    rebuilt = nova.tree_util.tree_unflatten(td, leaves)
    assert isinstance(rebuilt, nn.GPT2) and rebuilt.config == CFG
    # Static fields are part of the structure: another head count is another treedef.
    other = nn.GPT2.init(dataclasses.replace(CFG, n_head=4), nova.random.key(0))
    assert nova.tree_util.tree_structure(other) != td
    with pytest.raises(dataclasses.FrozenInstanceError):
        gpt.wte = None
    idx = np.arange(32, dtype=np.int32).reshape(2, 16) % 64
    g = nova.jit(nova.grad(lambda m: m.loss(idx, (idx + 1) % 64)))(gpt)
    assert isinstance(g, nn.GPT2) and isinstance(g.h[1].attn, nn.CausalSelfAttention)
    shapes = {k: v.shape for k, v in gpt.named_parameters().items()}
    assert {k: v.shape for k, v in g.named_parameters().items()} == shapes
    assert float(jnp.sum(jnp.abs(g.h[0].mlp.c_fc.weight))) > 0
    assert "Linear(weight=float32[32,96], bias=float32[96])" in repr(gpt)


def test_load_state_dict_errors(gpt):
    sd = gpt.state_dict()
    restored = gpt.load_state_dict({k: v * 2 for k, v in sd.items()})
    assert_close(np.asarray(restored.ln_f.weight), 2 * sd["ln_f.weight"])
    bad = dict(sd)
    del bad["h.1.ln_2.bias"]
    with pytest.raises(KeyError, match=r"missing parameters \['h.1.ln_2.bias'\]"):
        gpt.load_state_dict(bad)
    with pytest.raises(KeyError, match=r"unexpected parameters \['lm_head.weight'\]"):
        gpt.load_state_dict({**sd, "lm_head.weight": sd["wte.weight"]})
    with pytest.raises(ValueError, match=r"'wpe.weight' has shape \(16, 32\) in the model but "
                                         r"\(8, 32\)"):
        gpt.load_state_dict({**sd, "wpe.weight": sd["wpe.weight"][:8]})
    with pytest.raises(ValueError, match="'wpe.weight' has dtype float32 in the model but float64"):
        gpt.load_state_dict({**sd, "wpe.weight": sd["wpe.weight"].astype(np.float64)})


def test_load_state_dict_copies_numpy_values(gpt):
    """NumPy values are copied into the module (as jax.device_put and torch's load_state_dict
    do): writing the source afterwards leaves the module unchanged, and a jitted step that
    donates the parameters takes their buffers without copying them first."""
    sd = {k: np.array(v) for k, v in gpt.state_dict().items()}
    restored = gpt.load_state_dict(sd)
    before = np.array(restored.ln_f.weight)
    sd["ln_f.weight"][:] = 123.0
    np.testing.assert_array_equal(np.asarray(restored.ln_f.weight), before)
    leaves = nova.tree_util.tree_leaves(gpt.load_state_dict(sd))
    assert all(leaf._owned for leaf in leaves)
    w = restored.ln_f.weight
    assert gpt.load_state_dict({**sd, "ln_f.weight": w}).ln_f.weight is w  # Arrays as they are


def test_freezing_by_partition(gpt):
    params, frozen = nn.partition(gpt, ["wte.*", "h.0.*"])
    assert params.wte.weight is None and frozen.wte.weight is not None
    assert params.h[1].mlp.c_fc.weight is not None and frozen.h[1].mlp.c_fc.weight is None
    assert set(params.named_parameters()).isdisjoint(frozen.named_parameters())
    idx = (np.arange(32, dtype=np.int32).reshape(2, 16) * 5) % 64

    @nova.jit
    def step(params, frozen):
        loss, g = nova.value_and_grad(lambda p: nn.combine(p, frozen).loss(idx, idx))(params)
        return loss, g, nova.tree_util.tree_map(lambda p, g: p - 0.1 * g, params, g)

    loss, g, new_params = step(params, frozen)
    assert g.wte.weight is None and g.h[0].attn.c_attn.weight is None  # no gradient at all
    assert set(g.named_parameters()) == set(params.named_parameters())
    new = nn.combine(new_params, frozen)
    before, after = gpt.state_dict(), new.state_dict()
    for k in before:
        same = np.array_equal(before[k], after[k])
        if k.startswith(("wte.", "h.0.")):
            assert same, f"frozen {k} changed"
        elif k.endswith(".weight") and "ln" not in k:
            assert not same, f"trainable {k} did not change"
    # The full model's loss equals the partitioned one; a predicate works as well as patterns.
    assert_close(float(loss), float(nova.jit(lambda m: m.loss(idx, idx))(gpt)), rtol=1e-6)
    p2, _ = nn.partition(gpt, lambda name, p: name.endswith(".bias"))
    assert all(not k.endswith(".bias") for k in p2.named_parameters())
    with pytest.raises(ValueError, match=r"patterns \['h.9.\*'\] match no parameter"):
        nn.partition(gpt, ["h.9.*"])
    with pytest.raises(TypeError, match="must be a callable or glob patterns"):
        nn.partition(gpt, [3])
    with pytest.raises(ValueError, match="trees of different classes"):
        nn.combine(params, gpt.wte)
    with pytest.raises(TypeError, match=r"unknown fields \['lm_head'\]"):
        gpt.replace(lm_head=None)


def test_custom_module_static_fields_and_containers():
    class Head(nn.Module):
        layers: list
        scale: float = nn.static_field(default=2.0)

        def __call__(self, x):
            for layer in self.layers:
                x = nn.relu(layer(x))
            return x * self.scale

    layers = [nn.Linear.init(k, 3, 3) for k in nova.random.split(nova.random.key(0), 2)]
    head = Head(layers)
    assert list(head.named_parameters()) == ["layers.0.weight", "layers.0.bias",
                                             "layers.1.weight", "layers.1.bias"]
    _, td = nova.tree_util.tree_flatten(head)
    assert nova.tree_util.tree_structure(Head(layers, 3.0)) != td
    g = nova.grad(lambda h: jnp.sum(h(np.ones((2, 3), np.float32))))(head)
    assert isinstance(g, Head) and g.scale == 2.0 and len(g.layers) == 2

    class Bad(nn.Module):
        w: object

    with pytest.raises(TypeError, match="field 'w' holds a str"):
        Bad("oops").named_parameters()
    mask = nova.tree_util.tree_map(lambda p: p.ndim >= 2, head)
    assert mask.named_parameters() == {"layers.0.weight": True, "layers.0.bias": False,
                                       "layers.1.weight": True, "layers.1.bias": False}


def test_gpt2_call_errors_and_dropout():
    cfg = dataclasses.replace(CFG, n_layer=1, dropout=0.1)
    m = nn.GPT2.init(cfg, nova.random.key(0))
    idx = np.zeros((1, 8), np.int32)
    with pytest.raises(ValueError, match="T = 17 exceeds block_size = 16"):
        m(np.zeros((1, 17), np.int32))
    with pytest.raises(TypeError, match="must be an integer array"):
        m(np.zeros((1, 8), np.float32))
    with pytest.raises(ValueError, match=r"must have shape \(B, T\)"):
        m(np.zeros(8, np.int32))
    with pytest.raises(ValueError, match="not divisible by n_head"):
        nn.GPT2Config(n_embd=30, n_head=4)
    f = nova.jit(lambda m, k: (m(idx, key=k, train=True), m(idx)), static_argnums=())
    k1, k2 = nova.random.split(nova.random.key(7))
    a, ev = (np.asarray(o) for o in f(m, k1))
    b, ev2 = (np.asarray(o) for o in f(m, k2))
    np.testing.assert_array_equal(ev, ev2)  # eval ignores the key
    assert not np.allclose(a, b) and not np.allclose(a, ev)
    np.testing.assert_array_equal(a, np.asarray(f(m, k1)[0]))
    with pytest.raises(ValueError, match="needs a nova.random key"):
        m(idx, train=True)


def test_gpt2_training_program_structure(gpt):
    # Traced only. wpe is sliced (its gradient a pad), so the one gather/scatter-add pair is wte's;
    # one row maximum per attention and one for the loss, none differentiated through (the
    # loss's shift is floor(max)): no argmax-counting pass in the backward.
    idx = np.zeros((2, 16), np.int32)
    prog = nova.make_program(nova.value_and_grad(lambda m: m.loss(idx, idx)))(gpt)
    assert prog.count("gather") == 1 and prog.count("scatter_add") == 1
    assert prog.count("reduce_max") == CFG.n_layer + 1
    assert prog.count("floor") == 1


def test_gpt2_remat_same_loss_and_gradients_less_memory():
    # GPT2Config.remat checkpoints every block: the same step, a smaller planned arena.
    import dataclasses

    cfg = nn.GPT2Config(vocab_size=64, block_size=64, n_layer=4, n_head=2, n_embd=128)
    gpt = nn.GPT2.init(cfg, nova.random.key(1))
    ck = dataclasses.replace(gpt, config=dataclasses.replace(cfg, remat=True))
    dots = dataclasses.replace(gpt, config=dataclasses.replace(cfg, remat="dots"))
    rng = np.random.default_rng(0)
    idx = rng.integers(0, cfg.vocab_size, (8, 64)).astype(np.int32)
    tgt = rng.integers(0, cfg.vocab_size, (8, 64)).astype(np.int32)
    step = lambda m: nova.value_and_grad(lambda m: m.loss(idx, tgt))(m)  # noqa: E731
    (v0, g0) = nova.jit(step)(gpt)
    for m in (ck, dots):
        v1, g1 = nova.jit(step)(m)
        np.testing.assert_allclose(float(v1), float(v0), rtol=1e-6)
        for a, b in zip(nova.tree_util.tree_leaves(g1), nova.tree_util.tree_leaves(g0),
                        strict=True):
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=2e-4, atol=1e-6)
    arena = [nova.jit(step).lower(m).compile().memory_analysis()["arena_bytes"]
             for m in (gpt, ck, dots)]
    assert arena[1] < 0.8 * arena[0], arena  # measured 0.68 (the activations are ~half)
    assert arena[1] < arena[2] < arena[0], arena  # the projections' outputs kept
    with pytest.raises(ValueError, match="remat must be False, True or 'dots'"):
        nn.GPT2Config(remat="all")
