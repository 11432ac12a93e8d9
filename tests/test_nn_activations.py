"""jax.nn's remaining functions in nova.nn against jax.nn itself: the activations (values and
gradients, kinks, tails, NaN, dtypes), glu / logmeanexp / standardize and softmax's `where`,
nova.nn.initializers (same key, same weights; variances, orthogonality) and
dot_product_attention (grouped heads, masks, lengths, windows, residual, gradients)."""

import jax
import jax.numpy as jjnp
import ml_dtypes
import numpy as np
import pytest

import nova
from nova import nn
from nova import numpy as jnp
from nova.nn import initializers as init
from tests.helpers import assert_close

RNG = np.random.default_rng(0)

# Every kink (-6 ... 6 and the log 2 switch of log1mexp) and random points in between.
KINKS = np.array([-6.0, -3.0, -1.0, 0.0, 1.0, 3.0, 6.0, np.log(2.0)], np.float32)
X = np.concatenate([KINKS, RNG.uniform(-8, 8, 24).astype(np.float32)])

ELEMENTWISE = ["celu", "elu", "hard_sigmoid", "hard_silu", "hard_swish", "hard_tanh",
               "identity", "leaky_relu", "log_sigmoid", "mish", "relu6", "selu", "sigmoid",
               "soft_sign", "softplus", "sparse_plus", "sparse_sigmoid", "squareplus", "swish",
               "tanh"]
WITH_ARGS = {  # name: (nova function, JAX function)
    "elu_alpha": (lambda x: nn.elu(x, 0.5), lambda x: jax.nn.elu(x, 0.5)),
    "celu_alpha": (lambda x: nn.celu(x, 2.0), lambda x: jax.nn.celu(x, 2.0)),
    "leaky_relu_0.2": (lambda x: nn.leaky_relu(x, 0.2), lambda x: jax.nn.leaky_relu(x, 0.2)),
    "squareplus_b1": (lambda x: nn.squareplus(x, 1.0), lambda x: jax.nn.squareplus(x, 1.0)),
    # x = e^X: 3e-4 ... 3e3, both sides of log1mexp's switch at log 2
    "log1mexp": (lambda x: nn.log1mexp(jnp.exp(x)), lambda x: jax.nn.log1mexp(jjnp.exp(x))),
}


def _pairs():
    pairs = {n: (getattr(nn, n), getattr(jax.nn, n)) for n in ELEMENTWISE}
    pairs.update(WITH_ARGS)
    return pairs


def _with_grads(fs: dict, grad, np_):
    """A function of x giving each f(x) and the elementwise derivative (grad of sum f)."""
    def run(x):
        return {n: (f(x), grad(lambda v, f=f: np_.sum(f(v)))(x)) for n, f in fs.items()}
    return run


def test_activations_and_gradients_match_jax_under_jit():
    """Values and elementwise derivatives (at the kinks too: relu6 and hard_sigmoid 0 at their
    corners, hard_tanh / leaky_relu / elu 1 at theirs, sparse_sigmoid 1/4 at +-1) equal
    jax.nn's, all in one jitted program."""
    pairs = _pairs()
    got = nova.jit(_with_grads({n: p[0] for n, p in pairs.items()}, nova.grad, jnp))(X)
    want = jax.jit(_with_grads({n: p[1] for n, p in pairs.items()}, jax.grad, jjnp))(X)
    for name in pairs:
        (y, g), (ry, rg) = got[name], want[name]
        assert_close(y, ry, rtol=2e-6, atol=1e-6, err_msg=name)
        assert_close(g, rg, rtol=2e-6, atol=1e-6, err_msg=f"gradient of {name}")
    kink = {v: i for i, v in enumerate(KINKS.tolist())}
    assert np.asarray(got["relu6"][1])[[kink[0.0], kink[6.0]]].tolist() == [0.0, 0.0]
    assert np.asarray(got["sparse_sigmoid"][1])[[kink[-1.0], kink[1.0]]].tolist() == [0.25] * 2
    assert nn.swish is nn.silu and nn.hard_swish is nn.hard_silu


NAN_KEEPING = ["relu6", "hard_tanh", "hard_sigmoid", "sparse_plus", "sparse_sigmoid", "elu",
               "celu", "leaky_relu", "softplus", "squareplus", "mish"]


def test_tails_stay_finite_and_nan_propagates():
    """softplus / log_sigmoid / mish at +-1e4 give finite values and exact tail gradients;
    log1mexp is accurate near 0 and for large x, -inf at 0 with an inf gradient; NaN stays
    NaN."""
    x = np.array([-1e4, -100.0, 100.0, 1e4], np.float32)
    tails = ("softplus", "log_sigmoid", "mish")

    def run(x, t, nan):
        out = _with_grads({n: getattr(nn, n) for n in tails}, nova.grad, jnp)(x)
        out["log1mexp"] = _with_grads({"f": nn.log1mexp}, nova.grad, jnp)(t)["f"]
        out["nan"] = [getattr(nn, n)(nan) for n in NAN_KEEPING]
        return out

    t = np.array([0.0, 1e-6, 1e-3, 30.0, 80.0], np.float32)  # log(1 - e^-t) ~ log t, ~ -e^-t
    got = nova.jit(run)(x, t, np.array([np.nan, 2.0], np.float32))
    want = jax.jit(_with_grads({n: getattr(jax.nn, n) for n in tails}, jax.grad, jjnp))(x)
    for n in tails:
        assert np.isfinite(np.asarray(got[n][0])).all() and np.isfinite(got[n][1]).all()
        assert_close(got[n][0], want[n][0], rtol=1e-6, atol=1e-30, err_msg=n)
        assert_close(got[n][1], want[n][1], rtol=1e-6, atol=1e-30, err_msg=f"gradient of {n}")
    t64 = t.astype(np.float64)
    with np.errstate(divide="ignore"):
        ref = np.where(t64 < 1, np.log(-np.expm1(-t64)), np.log1p(-np.exp(-t64)))  # float64
        dref = 1 / np.expm1(t64)
    assert_close(got["log1mexp"][0], ref, rtol=1e-6, atol=1e-30)
    assert_close(got["log1mexp"][1], dref, rtol=1e-6, atol=1e-30)
    assert np.asarray(got["log1mexp"][0])[0] == -np.inf
    for n, y in zip(NAN_KEEPING, got["nan"], strict=True):
        assert np.isnan(np.asarray(y)[0]) and not np.isnan(np.asarray(y)[1]), n


def test_dtypes_follow_jax():
    """Floats keep their dtype (float16 with weak Python-scalar parameters); integers become
    float32 except in identity and hard_tanh, as in jax.nn (traced only, nothing compiled)."""
    xi = np.array([-2, 0, 3], np.int32)
    xh = np.array([-2.0, 0.5, 3.0], np.float16)
    for name in ELEMENTWISE + ["log1mexp"]:
        assert nova.eval_shape(getattr(nn, name), xh).dtype == np.float16, name
        if name in ("swish", "sigmoid"):
            continue  # jax.nn refuses integers here; nova's sigmoid promotes, silu refuses
        want = jax.eval_shape(getattr(jax.nn, name), xi).dtype
        assert np.dtype(nova.eval_shape(getattr(nn, name), xi).dtype) == want, name
    assert nova.eval_shape(nn.sigmoid, xi).dtype == np.float32
    assert_close(nn.hard_tanh(xi), np.array([-1, 0, 1], np.int32))
    with pytest.raises(TypeError, match="silu: expected a floating-point array"):
        nn.swish(xi)


def test_glu_logmeanexp_standardize_and_softmax_where_match_jax():
    """glu along either axis; logmeanexp and standardize over axes and with `where`; softmax and
    log_softmax with `where` (masked elements 0 / -inf, no gradient) -- values and gradients,
    under jit."""
    x = RNG.standard_normal((4, 6)).astype(np.float32) * 2
    m = RNG.random((4, 6)) > 0.3
    m[1] = False  # a row with nothing to reduce
    cols = np.array([True, False, True, True, False, True])
    ct = RNG.standard_normal((4, 6)).astype(np.float32)
    cases = {
        "glu": (lambda a, nn_: nn_.glu(a), None),
        "glu0": (lambda a, nn_: nn_.glu(a, axis=0), None),
        "lme": (lambda a, nn_: nn_.logmeanexp(a, axis=1), None),
        "lme_all": (lambda a, nn_: nn_.logmeanexp(a), None),
        "lme_where": (lambda a, nn_: nn_.logmeanexp(a, axis=0, where=m, keepdims=True), None),
        "std": (lambda a, nn_: nn_.standardize(a), None),
        "std_axes": (lambda a, nn_: nn_.standardize(a, axis=(0, 1), epsilon=1e-3), None),
        "std_where": (lambda a, nn_: nn_.standardize(a, axis=0, where=m), None),
        "std_stable": (lambda a, nn_: nn_.standardize(a, where=cols, algorithm="stable"), None),
        "std_given": (lambda a, nn_: nn_.standardize(a, mean=0.5, variance=2.0), None),
        "softmax_where": (lambda a, nn_: nn_.softmax(a, where=m), 0.0),
        "log_softmax_where": (lambda a, nn_: nn_.log_softmax(a, axis=1, where=m), -np.inf),
    }

    def loss(f, lib, np_):
        def g(a):
            y = f(a, lib)
            c = ct.reshape(-1)[:y.size].reshape(y.shape)
            return np_.sum(np_.where(np_.isfinite(y), y, 0.0) * c)
        return g

    def run(lib, np_, grad):
        return lambda a: {k: (f(a, lib), grad(loss(f, lib, np_))(a)) for k, (f, _) in
                          cases.items()}

    got = nova.jit(run(nn, jnp, nova.grad))(x)
    want = jax.jit(run(jax.nn, jjnp, jax.grad))(x)
    for k, (_, fill) in cases.items():
        (y, g), (ry, rg) = got[k], want[k]
        if fill is not None:  # masked-out elements: 0 for softmax, -inf for log_softmax
            assert (np.asarray(y)[~m] == fill).all(), k
        assert_close(y, ry, rtol=1e-5, atol=2e-6, err_msg=k)
        # A slice with one element has variance 0: gradients of 1/sqrt(eps) ~ 300, in float32.
        assert_close(g, rg, rtol=5e-5, atol=2e-6, err_msg=f"gradient of {k}")
    assert np.isnan(np.asarray(got["lme_where"][0])).sum() == 0
    assert np.isnan(np.asarray(nn.logmeanexp(x[1], where=m[1]))), "an empty mean is NaN"


def test_bad_inputs_raise_precise_errors():
    x = np.ones((2, 3), np.float32)
    with pytest.raises(ValueError, match=r"glu: the length of axis -1 .*\(2, 3\).* even"):
        nn.glu(x)
    with pytest.raises(ValueError, match="glu: axis 2 is out of bounds"):
        nn.glu(x, axis=2)
    with pytest.raises(TypeError, match="softmax: where must be a bool array, got int32"):
        nn.softmax(x, where=np.ones((2, 3), np.int32))
    with pytest.raises(ValueError, match=r"standardize: where of shape \(4,\) does not"):
        nn.standardize(x, where=np.ones(4, bool))
    with pytest.raises(ValueError, match="standardize: algorithm must be 'fast' or 'stable'"):
        nn.standardize(x, algorithm="welford")


# --- initializers -------------------------------------------------------------------------------

KEY = nova.random.key(7)
JKEY = jax.random.PRNGKey(7)

INITS = [  # (name, builder of an initializer from a module, shape)
    ("zeros", lambda m: m.zeros, (3, 4)),
    ("ones", lambda m: m.ones, (3, 4)),
    ("constant", lambda m: m.constant(-1.5), (3, 4)),
    ("uniform", lambda m: m.uniform(0.5), (64, 32)),
    ("normal", lambda m: m.normal(0.3), (64, 32)),
    ("truncated_normal", lambda m: m.truncated_normal(0.3, lower=-1.0, upper=3.0), (64, 32)),
    ("glorot_uniform", lambda m: m.glorot_uniform(), (64, 32)),
    ("xavier_normal", lambda m: m.xavier_normal(), (64, 32)),
    ("lecun_uniform", lambda m: m.lecun_uniform(), (64, 32)),
    ("lecun_normal", lambda m: m.lecun_normal(), (64, 32)),
    ("kaiming_uniform", lambda m: m.kaiming_uniform(), (64, 32)),
    ("he_normal", lambda m: m.he_normal(), (64, 32)),
    # (Shapes that XLA compiles fast: the JAX side is the slow part of this test.)
    ("conv_fan_out", lambda m: m.variance_scaling(3.0, "fan_out", "normal"), (2, 32, 32)),
    ("axes", lambda m: m.variance_scaling(0.5, "fan_geo_avg", "uniform", in_axis=2,
                                          out_axis=(0, 3), batch_axis=1), (2, 2, 16, 32)),
    ("orthogonal", lambda m: m.orthogonal(), (64, 32)),
    ("orthogonal_wide", lambda m: m.orthogonal(2.0), (32, 64)),
    ("orthogonal_axis0", lambda m: m.orthogonal(column_axis=0), (16, 8, 4)),
    ("delta_orthogonal", lambda m: m.delta_orthogonal(), (3, 3, 16, 32)),
]


BIG = (3, 3, 64, 128)  # fan_in 576, fan_out 1152
FANS = {"fan_in": 576, "fan_out": 1152, "fan_avg": 864, "fan_geo_avg": np.sqrt(576 * 1152)}
SCALED = [("fan_in", "truncated_normal"), ("fan_out", "normal"), ("fan_avg", "uniform"),
          ("fan_geo_avg", "normal")]


def test_initializers_give_jax_weights_of_the_formulas_variance():
    """The same key gives jax.nn.initializers' weights (nova.random is jax.random's), all in
    one jitted program; the empirical variance of variance_scaling is scale / fan for each
    mode and distribution (the truncated normal corrected to it), uniform weights fill
    [-sqrt(3 v), sqrt(3 v)), truncated ones stop at 2 standard deviations of the normal, and
    orthogonal weights have orthonormal columns or rows."""
    def weights(key):
        out = {n: b(init)(key, s) for n, b, s in INITS}
        keys = nova.random.split(key, len(SCALED))
        out["scaled"] = [init.variance_scaling(2.0, mode, dist)(k, BIG)
                         for k, (mode, dist) in zip(keys, SCALED, strict=True)]
        out["vector"] = init.lecun_normal(in_axis=0, out_axis=())(key, (64,))
        return out

    got = nova.jit(weights)(KEY)
    want = jax.jit(lambda k: {n: b(jax.nn.initializers)(k, s) for n, b, s in INITS})(JKEY)
    want["vector"] = jax.nn.initializers.lecun_normal(in_axis=0, out_axis=())(JKEY, (64,))
    for name, _, shape in INITS:
        w = got[name]
        assert w.shape == shape and w.dtype == np.float32, name
        assert_close(w, want[name], rtol=1e-5, atol=1e-6, err_msg=name)
    assert_close(got["vector"], want["vector"], rtol=1e-5, atol=1e-6)
    for w, (mode, dist) in zip(got["scaled"], SCALED, strict=True):
        w = np.asarray(w)
        var = 2.0 / FANS[mode]
        assert abs(w.var() / var - 1) < 0.02 and abs(w.mean()) < 2e-3, (mode, dist, w.var())
        bound = {"uniform": np.sqrt(3 * var), "truncated_normal": 2 * np.sqrt(var) / 0.8796}
        if dist in bound:
            assert np.abs(w).max() < bound[dist] and np.abs(w).max() > 0.99 * bound[dist]
    q = np.asarray(got["orthogonal"], np.float64)
    np.testing.assert_allclose(q.T @ q, np.eye(32), atol=2e-6)
    r = np.asarray(got["orthogonal_wide"], np.float64)
    np.testing.assert_allclose(r @ r.T, 4 * np.eye(32), atol=1e-5)
    c = np.asarray(got["orthogonal_axis0"], np.float64).reshape(16, 32)  # columns on axis 0
    np.testing.assert_allclose(c @ c.T, np.eye(16), atol=2e-6)
    d = np.asarray(got["delta_orthogonal"], np.float64)
    np.testing.assert_allclose(d[1, 1] @ d[1, 1].T, np.eye(16), atol=2e-6)
    assert np.count_nonzero(d) == np.count_nonzero(d[1, 1])


def test_initializer_dtypes_and_edge_cases():
    def dtype(initializer, shape, *dt):
        return nova.eval_shape(lambda k: initializer(k, shape, *dt), KEY).dtype

    assert dtype(init.he_uniform(), (8, 4), jnp.float16) == np.float16
    assert dtype(init.normal(dtype=jnp.float64), (8,)) == np.float64
    assert dtype(init.orthogonal(), (8, 4), jnp.bfloat16) == ml_dtypes.bfloat16
    assert dtype(init.constant(3, jnp.int32), (2,)) == np.int32
    assert init.zeros(KEY, (2,), jnp.bfloat16).dtype == ml_dtypes.bfloat16
    assert init.orthogonal()(KEY, (4, 0)).shape == (4, 0)
    assert init.glorot_normal()(KEY, (0, 4)).shape == (0, 4)
    assert isinstance(init.glorot_uniform(), init.Initializer)
    with pytest.raises(ValueError, match="variance_scaling: mode must be one of"):
        init.variance_scaling(1.0, "fan_max", "normal")
    with pytest.raises(ValueError, match="variance_scaling: distribution must be one of"):
        init.variance_scaling(1.0, "fan_in", "cauchy")
    with pytest.raises(ValueError, match="variance_scaling: scale must be >= 0"):
        init.variance_scaling(-1.0, "fan_in", "normal")
    with pytest.raises(ValueError, match=r"at least 2 dimensions .* got shape \(5,\)"):
        init.glorot_uniform()(KEY, (5,))
    with pytest.raises(ValueError, match="must be distinct axes"):
        init.variance_scaling(1.0, "fan_in", "normal", in_axis=0, out_axis=0)(KEY, (4, 4))
    with pytest.raises(ValueError, match="variance_scaling: out_axis 3 is out of bounds"):
        init.variance_scaling(1.0, "fan_in", "normal", out_axis=3)(KEY, (4, 4))
    with pytest.raises(TypeError, match="normal: dtype must be a floating-point dtype"):
        init.normal()(KEY, (4,), jnp.int32)
    with pytest.raises(ValueError, match="orthogonal: the shape must have at least 2"):
        init.orthogonal()(KEY, (4,))
    with pytest.raises(ValueError, match="delta_orthogonal: the shape must have 3, 4 or 5"):
        init.delta_orthogonal()(KEY, (4, 4))
    with pytest.raises(ValueError, match=r"input size shape\[-2\] = 8 must not exceed"):
        init.delta_orthogonal()(KEY, (3, 8, 4))
    with pytest.raises(TypeError, match="uniform: expected a key"):
        init.uniform()(np.zeros(3, np.float32), (2,))


# --- dot_product_attention ----------------------------------------------------------------------

B, T, S, N, K, H = 2, 5, 6, 4, 2, 8
Q = RNG.standard_normal((B, T, N, H)).astype(np.float32)
KV = RNG.standard_normal((2, B, S, K, H)).astype(np.float32)
BIAS = RNG.standard_normal((1, N, T, S)).astype(np.float32)
MASK = RNG.random((B, 1, T, S)) > 0.3
MASK[0, 0, 2] = False  # a query that may attend to nothing: the values' mean, as JAX
QLEN = np.array([3, 5], np.int32)
KVLEN = np.array([6, 2], np.int32)

ATTENTION = {
    "plain": {},
    "bias": {"bias": BIAS},
    "mask": {"mask": MASK},
    "causal": {"is_causal": True},
    "lengths": {"query_seq_lengths": QLEN, "key_value_seq_lengths": KVLEN},
    "window": {"local_window_size": (1, 2)},
    "all": {"local_window_size": 2, "is_causal": True, "bias": BIAS[0], "mask": MASK,
            "scale": 0.3, "key_value_seq_lengths": KVLEN, "implementation": "xla"},
}


def _attention_cases(attention, grad, np_, ct):
    """A function of (q, k, v, bias, bfloat16 q, k, v) giving, per ATTENTION case, the output
    and the gradients of sum(output * ct) with respect to q, k, v and bias; and the residual
    of unbatched inputs, multi-query attention (K = 1) and bfloat16."""
    def run(q, k, v, bias, qb, kb, vb):
        out = {}
        for name, kw in ATTENTION.items():
            def f(q, k, v, bias, kw=kw):
                return attention(q, k, v, **dict(kw, bias=bias if "bias" in kw else None))
            out[name] = (f(q, k, v, bias), grad(lambda *a, f=f: np_.sum(f(*a) * ct),
                                                argnums=(0, 1, 2, 3))(q, k, v, bias))
        out["residual"] = attention(q[0], k[0], v[0], is_causal=True, return_residual=True)
        out["mqa"] = attention(q, k[:, :, :1], v[:, :, :1], mask=MASK)
        out["bfloat16"] = attention(qb, kb, vb, is_causal=True)
        return out
    return run


def test_dot_product_attention_matches_jax():
    """Grouped-query attention (N = 4 query heads over K = 2) with every option and its
    gradient with respect to query, key, value and bias; the logsumexp residual of unbatched
    (T, N, H) inputs; multi-query attention (K = 1); bfloat16 -- under jit, against
    jax.nn.dot_product_attention."""
    k, v = KV
    ct = RNG.standard_normal(Q.shape).astype(np.float32)
    args = (Q, k, v, BIAS, *(a.astype(ml_dtypes.bfloat16) for a in (Q, k, v)))
    got = nova.jit(_attention_cases(nn.dot_product_attention, nova.grad, jnp, ct))(*args)
    want = jax.jit(_attention_cases(jax.nn.dot_product_attention, jax.grad, jjnp, ct))(*args)
    for name in ATTENTION:
        (y, grads), (ry, rgrads) = got[name], want[name]
        assert_close(y, ry, rtol=1e-5, atol=2e-6, err_msg=name)
        for which, g, rg in zip("qkvb", grads, rgrads, strict=True):
            assert_close(g, rg, rtol=1e-5, atol=2e-6, err_msg=f"d{which} of {name}")
    (y, lse), (ry, rlse) = got["residual"], want["residual"]
    assert y.shape == (T, N, H) and lse.shape == (T, N)
    assert_close(y, ry, rtol=1e-5, atol=2e-6)
    assert_close(lse, rlse, rtol=1e-5, atol=2e-6)
    assert_close(got["mqa"], want["mqa"], rtol=1e-5, atol=2e-6)
    assert got["bfloat16"].dtype == ml_dtypes.bfloat16
    assert_close(got["bfloat16"], want["bfloat16"], rtol=1e-2, atol=1e-2)


def test_dot_product_attention_bad_inputs():
    k, v = KV
    with pytest.raises(ValueError, match="N a multiple of the key/value heads K; got H = 8, "
                                         "N = 3, K = 2"):
        nn.dot_product_attention(Q[:, :, :3], k, v)
    with pytest.raises(ValueError, match=r"with one B and H"):
        nn.dot_product_attention(Q, k, v[:, :5])
    with pytest.raises(TypeError, match="mask must be bool .* pass an additive mask as bias"):
        nn.dot_product_attention(Q, k, v, mask=BIAS)
    with pytest.raises(ValueError, match=r"bias of shape \(1, 1, 3, 6\) does not broadcast"):
        nn.dot_product_attention(Q, k, v, bias=BIAS[:1, :1, :3])
    with pytest.raises(ValueError, match=r"query_seq_lengths must be an integer array of "
                                         r"shape \(2,\)"):
        nn.dot_product_attention(Q, k, v, query_seq_lengths=np.array([3.0, 1.0]))
    with pytest.raises(ValueError, match="local_window_size must be an int or 2 non-negative"):
        nn.dot_product_attention(Q, k, v, local_window_size=(1, -1))
    with pytest.raises(TypeError, match="query, key and value must have one dtype"):
        nn.dot_product_attention(Q.astype(np.float64), k, v)
    with pytest.raises(NotImplementedError, match="implementation='cudnn' is not available"):
        nn.dot_product_attention(Q, k, v, implementation="cudnn")
    with pytest.raises(ValueError, match="implementation must be None or 'xla', got 'flash'"):
        nn.dot_product_attention(Q, k, v, implementation="flash")
