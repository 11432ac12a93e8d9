"""nova.vmap: every primitive's batching rule against a loop over examples, the transforms
composed with vmap in both orders, custom rules under vmap, closures, and bad input."""

import nova.numpy as jnp
import numpy as np
import pytest

import nova
from nova.core.interpreter import run_program
from nova.core.primitive import all_primitives
from tests.helpers import assert_close
from tests.prim_examples import all_examples

PRIMS = all_primitives()
EXAMPLES = all_examples()
B = 3


def _examples(name, k):
    """B argument lists of one example (different random values, integer and bool arguments
    rolled so each example's differ) and its params."""
    sets, params = [], None
    for b in range(B):
        args, params = EXAMPLES[name][k](np.random.default_rng(100 * k + b))
        args = [np.asarray(a) for a in args]
        if b:
            args = [np.roll(a, b, axis=0) if a.dtype.kind in "biu" and a.ndim else a
                    for a in args]
        sets.append(args)
    shapes = [[(a.shape, a.dtype) for a in s] for s in sets]
    assert all(s == shapes[0] for s in shapes), f"{name}: example {k} changes shape with the seed"
    return sets, params


def _patterns(n):
    """Which arguments are mapped: all, and each one alone."""
    out = [(True,) * n]
    if n > 1:
        out += [tuple(i == j for i in range(n)) for j in range(n)]
    return out


CASES = [(name, k, pat) for name in sorted(PRIMS) if name != "constant"
         for k in range(len(EXAMPLES.get(name, [])))
         for pat in _patterns(len(EXAMPLES[name][k](np.random.default_rng(0))[0]))
         if pat]


@pytest.mark.parametrize("name,k,pattern", CASES)
def test_batching_rule_matches_a_loop(name, k, pattern):
    prim = PRIMS[name]
    sets, params = _examples(name, k)
    args = [np.stack([s[i] for s in sets]) if m else sets[0][i]
            for i, m in enumerate(pattern)]

    def f(*xs):
        return prim.bind(*xs, **params)

    in_axes = tuple(0 if m else None for m in pattern)
    program = nova.make_program(nova.vmap(f, in_axes=in_axes))(*args)
    got = run_program(program, args)
    for b in range(B):
        one = [sets[b][i] if m else sets[0][i] for i, m in enumerate(pattern)]
        ref = prim.impl(*one, **prim.canonical_params(params))
        ref = list(ref) if prim.multiple_results else [ref]
        assert len(got) == len(ref)
        for g, r in zip(got, ref, strict=True):
            assert_close(g[b], r, rtol=1e-12, atol=1e-12, err_msg=f"{name} example {k} {pattern}")


# --- transforms ------------------------------------------------------------------------------

RNG = np.random.default_rng(0)
W = RNG.standard_normal((3, 5)).astype(np.float32)
X = RNG.standard_normal((4, 3)).astype(np.float32)


def _loss(w, x):
    return jnp.sum(jnp.tanh(x @ w) ** 2)


def _per_example_grads():
    return np.stack([np.asarray(nova.grad(_loss)(W, x)) for x in X])


def test_vmap_eager_matches_loop():
    f = lambda x: jnp.tanh(x @ W).sum(axis=-1)
    got = nova.vmap(f)(X)
    assert got.shape == (4,)
    assert_close(got, np.stack([np.asarray(f(x)) for x in X]))


def test_per_example_gradients_eager_and_jit():
    g = nova.vmap(nova.grad(_loss), in_axes=(None, 0))
    ref = _per_example_grads()
    assert_close(g(W, X), ref, rtol=1e-5)
    assert_close(nova.jit(g)(W, X), ref, rtol=1e-5)


def test_grad_of_vmap():
    h = nova.grad(lambda w: nova.vmap(lambda x: _loss(w, x))(X).sum())
    assert_close(h(W), _per_example_grads().sum(0), rtol=1e-4, atol=1e-5)
    assert_close(nova.jit(h)(W), _per_example_grads().sum(0), rtol=1e-4, atol=1e-5)


def test_vmap_of_jit_and_jit_of_vmap():
    f = nova.jit(lambda x: jnp.exp(x) * x.sum())
    ref = np.stack([np.asarray(f(x)) for x in X])
    assert_close(nova.vmap(f)(X), ref)
    assert_close(nova.jit(nova.vmap(f))(X), ref)


def test_jvp_and_vmap_compose():
    f = lambda x: jnp.sin(x) * x
    t = np.ones_like(X)
    _, tan = nova.jvp(nova.vmap(f), (X,), (t,))
    assert_close(tan, np.cos(X) * X + np.sin(X), rtol=1e-5)
    _, tan2 = nova.vmap(lambda x, t: nova.jvp(f, (x,), (t,)))(X, t)
    assert_close(tan2, np.cos(X) * X + np.sin(X), rtol=1e-5)


def test_nested_vmap_closing_over_the_outer_example():
    a = RNG.standard_normal((2, 3)).astype(np.float32)
    b = RNG.standard_normal((4, 3)).astype(np.float32)
    got = nova.vmap(lambda ai: nova.vmap(lambda bj: jnp.dot(ai, bj))(b))(a)
    assert_close(got, a @ b.T, rtol=1e-5)
    # the same with the inner vmap mapping the closure's partner over axis 1
    got = nova.vmap(lambda ai: nova.vmap(lambda bj: ai * bj, in_axes=1, out_axes=1)(b.T))(a)
    assert_close(got, a[:, :, None] * b.T[None], rtol=1e-6)


@pytest.mark.parametrize("in_axis,out_axis", [(0, 0), (1, 0), (-1, 1), (1, -1)])
def test_in_and_out_axes(in_axis, out_axis):
    x = RNG.standard_normal((2, 5, 4)).astype(np.float32)
    got = nova.vmap(lambda v: v * 2 + v.sum(), in_axes=in_axis, out_axes=out_axis)(x)
    moved = np.moveaxis(x, in_axis, 0)
    ref = np.stack([m * 2 + m.sum() for m in moved])
    assert_close(got, np.moveaxis(ref, 0, out_axis), rtol=1e-5)


def test_pytree_in_axes_and_outputs():
    params = {"w": W, "b": np.ones(5, np.float32)}
    xs = {"x": X, "scale": np.arange(4, dtype=np.float32)}

    def f(p, d):
        y = d["x"] @ p["w"] + p["b"]
        return {"y": y * d["scale"], "norm": jnp.sum(y * y)}

    out = nova.vmap(f, in_axes=({"w": None, "b": None}, 0), out_axes={"y": 1, "norm": 0})(
        params, xs)
    assert out["y"].shape == (5, 4) and out["norm"].shape == (4,)
    for i in range(4):
        y = X[i] @ W + 1
        assert_close(np.asarray(out["y"])[:, i], y * i, rtol=1e-5)
        assert_close(np.asarray(out["norm"])[i], np.sum(y * y), rtol=1e-5)


def test_unmapped_output_broadcast_and_out_axes_none():
    got = nova.vmap(lambda x: (x * 0 + 1, jnp.ones(3)), out_axes=(0, None))(X)
    assert got[0].shape == (4, 3) and got[1].shape == (3,)
    got = nova.vmap(lambda x: jnp.ones(2))(X)
    assert got.shape == (4, 2)
    assert_close(got, np.ones((4, 2), np.float32))


def test_axis_size_without_mapped_arguments():
    got = nova.vmap(lambda c: c * 2, in_axes=None, axis_size=3)(np.float32(2.0))
    assert_close(got, np.full(3, 4.0, np.float32))


def test_integer_and_bool_inputs():
    idx = np.array([[0, 2], [1, 1], [2, 0]], np.int32)
    table = RNG.standard_normal((3, 4)).astype(np.float32)
    got = nova.vmap(lambda i: jnp.asarray(table)[i])(idx)
    assert_close(got, table[idx])
    mask = RNG.random((3, 4)) > 0.5
    got = nova.vmap(lambda m, t: jnp.where(m, t, -t), in_axes=(0, None))(mask, table[0])
    assert_close(got, np.where(mask, table[0], -table[0]))


def test_indexing_and_scatter_under_vmap():
    x = RNG.standard_normal((4, 6)).astype(np.float32)
    i = np.array([5, 0, 2, 2], np.int32)
    got = nova.vmap(lambda row, j: row.at[j].add(10.0))(x, i)
    ref = x.copy()
    ref[np.arange(4), i] += 10
    assert_close(got, ref)
    got = nova.vmap(lambda row, j: row[j])(x, i)
    assert_close(got, x[np.arange(4), i])


def test_softmax_attention_and_layer_norm_under_vmap():
    q = RNG.standard_normal((2, 8, 4)).astype(np.float32)

    def attn(q):
        s = q @ q.T / 2.0
        s = jnp.where(np.tril(np.ones((8, 8), bool)), s, -jnp.inf)
        return nova.nn.functional.softmax(s, axis=-1) @ q

    ref = np.stack([np.asarray(attn(qi)) for qi in q])
    assert_close(nova.vmap(attn)(q), ref, rtol=1e-5)
    assert_close(nova.jit(nova.vmap(attn))(q), ref, rtol=1e-5)
    g = nova.grad(lambda q: nova.vmap(attn)(q).sum())(q)
    g_ref = np.stack([np.asarray(nova.grad(lambda x: attn(x).sum())(qi)) for qi in q])
    assert_close(g, g_ref, rtol=1e-4, atol=1e-5)


def test_per_example_gradients_of_an_nn_module():
    model = nova.nn.Linear.init(nova.random.PRNGKey(0), 3, 2)

    def loss(m, x):
        return jnp.sum(m(x) ** 2)

    g = nova.vmap(nova.grad(loss), in_axes=(None, 0))(model, X)
    assert g.weight.shape == (4, *model.weight.shape)
    for i in range(4):
        gi = nova.grad(loss)(model, X[i])
        assert_close(np.asarray(g.weight)[i], gi.weight, rtol=1e-5)
        assert_close(np.asarray(g.bias)[i], gi.bias, rtol=1e-5)


def test_closures_over_an_enclosing_transform():
    # vmap inside grad, reading the differentiated value
    h = nova.grad(lambda s: nova.vmap(lambda x: jnp.sum(x * s))(X).sum())
    assert_close(h(np.float32(2.0)), X.sum(), rtol=1e-5)
    # jit inside grad closing over the grad's value (captured as an input of the inlined jit)
    k = nova.grad(lambda x: nova.jit(lambda y: jnp.sin(x) * y)(2.0))
    assert_close(k(np.float32(0.5)), 2 * np.cos(0.5), rtol=1e-6)
    assert_close(nova.jit(k)(np.float32(0.5)), 2 * np.cos(0.5), rtol=1e-6)


def test_a_jit_traced_with_a_capture_cannot_run_elsewhere():
    kept = {}

    def f(x):
        inner = nova.jit(lambda y: x * y)
        kept["traced"] = inner.trace(np.float32(1.0))
        return inner(2.0)

    nova.grad(f)(np.float32(3.0))
    with pytest.raises(nova.UnexpectedTracerError, match="traced inside another transform"):
        kept["traced"].lower()


# --- custom rules under vmap ------------------------------------------------------------------


@nova.custom_vjp
def clip_gradient(x):
    return x


def _clip_fwd(x):
    return x, None


def _clip_bwd(_, g):
    return (jnp.clip(g, -1.0, 1.0),)


clip_gradient.defvjp(_clip_fwd, _clip_bwd)


def test_custom_vjp_rule_kept_by_vmap():
    x = np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3)
    # d/dx sum(5 * clip_gradient(x)): the rule clips each cotangent 5 to 1
    g = nova.grad(lambda x: nova.vmap(lambda r: jnp.sum(5.0 * clip_gradient(r)))(x).sum())(x)
    assert_close(g, np.ones_like(x))
    g = nova.jit(nova.grad(lambda x: nova.vmap(lambda r: jnp.sum(5.0 * clip_gradient(r)))(x)
                          .sum()))(x)
    assert_close(g, np.ones_like(x))
    # per-example gradients through the rule
    g = nova.vmap(nova.grad(lambda r: jnp.sum(5.0 * clip_gradient(r))))(x)
    assert_close(g, np.ones_like(x))


@nova.custom_vjp
def scaled(x, s):
    return x * s


def _scaled_fwd(x, s):
    return x * s, (x, s)


def _scaled_bwd(res, g):
    x, s = res
    return (2.0 * g * s, jnp.sum(g * x))  # twice the true dx: the rule must be the one used


scaled.defvjp(_scaled_fwd, _scaled_bwd)


def test_custom_vjp_with_an_unmapped_argument_sums_its_cotangent():
    s = np.float32(3.0)
    gx, gs = nova.grad(lambda x, s: nova.vmap(scaled, in_axes=(0, None))(x, s).sum(),
                       argnums=(0, 1))(X, s)
    assert_close(gx, np.full_like(X, 6.0))
    assert_close(gs, X.sum(), rtol=1e-5)


@nova.custom_jvp
def soft_relu(x):
    return jnp.log1p(jnp.exp(x))


@soft_relu.defjvp
def _soft_relu_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    return soft_relu(x), 10.0 * t  # not the true derivative: the rule must be the one used


def test_custom_jvp_rule_kept_by_vmap():
    _, tan = nova.jvp(nova.vmap(soft_relu), (X,), (np.ones_like(X),))
    assert_close(tan, np.full_like(X, 10.0))
    g = nova.grad(lambda x: nova.vmap(soft_relu)(x).sum())(X)
    assert_close(g, np.full_like(X, 10.0))
    g = nova.vmap(nova.grad(lambda r: soft_relu(r).sum()))(X)
    assert_close(g, np.full_like(X, 10.0))


# --- bad input ---------------------------------------------------------------------------------


def test_mapped_sizes_differ():
    with pytest.raises(ValueError, match=r"different sizes: 'x' 4, 'y' 5"):
        nova.vmap(lambda x, y: x + y.sum())(X, np.ones((5, 3), np.float32))


def test_in_axes_structure_and_range_errors():
    with pytest.raises(ValueError, match="in_axes has 1 entries but 2 positional"):
        nova.vmap(lambda x, y: x, in_axes=(0,))(X, X)
    with pytest.raises(ValueError, match="not a prefix"):
        nova.vmap(lambda d: d["a"], in_axes=({"b": 0},))({"a": X})
    with pytest.raises(ValueError, match="axis 2 is out of range for a value of rank 2"):
        nova.vmap(lambda x: x, in_axes=2)(X)
    with pytest.raises(ValueError, match="no argument is mapped"):
        nova.vmap(lambda x: x, in_axes=None)(X)
    with pytest.raises(ValueError, match="out_axes=None depends on a mapped"):
        nova.vmap(lambda x: x, out_axes=None)(X)
    with pytest.raises(TypeError, match="not an array"):
        nova.vmap(lambda x: x)("abc")
    with pytest.raises(TypeError, match="expected a function"):
        nova.vmap(3)


def test_python_control_flow_on_a_mapped_value_raises():
    def f(x):
        return x if x.sum() > 0 else -x

    with pytest.raises(nova.TracerBoolConversionError):
        nova.vmap(f)(X)


def test_shape_error_inside_names_the_users_line():
    with pytest.raises(nova.ShapeError) as info:
        nova.vmap(lambda x: x @ np.ones((4, 4), np.float32))(X)
    assert "test_vmap.py" in str(info.value)


def test_all_patterns_are_checked():
    # every primitive with operands is covered by the loop test above, for each pattern
    names = {name for name, _, _ in CASES}
    assert names == {n for n in PRIMS if n not in ("constant", "iota")}
    assert any(p != (True,) * len(p) for _, _, p in CASES)


def test_narrow_index_dtypes_past_their_range():
    # the example number joins each index row: uint8 indices with 300 examples must not wrap
    from nova import lax

    b = 300
    op = np.zeros((b, 4), np.float32)
    idx = np.zeros((b, 2, 1), np.uint8)
    idx[:, 1, 0] = 3
    got = np.asarray(nova.vmap(lambda o, i: lax.scatter_add(o, i, np.ones(2, np.float32), (0,)))(
        op, idx))
    assert_close(got, np.tile([1.0, 0.0, 0.0, 1.0], (b, 1)).astype(np.float32))
    table = np.arange(b * 4, dtype=np.float32).reshape(b, 4)
    got = np.asarray(nova.vmap(lambda o, i: lax.gather(o, i, (0,)))(table, idx))
    assert_close(got, table[:, [0, 3]])


@pytest.mark.parametrize("bad", [0.5, True, "0", np.array(0)])
def test_in_and_out_axes_of_the_wrong_type(bad):
    with pytest.raises(TypeError, match="expected an int, None, or a container"):
        nova.vmap(lambda a: a, in_axes=bad)(X)
    with pytest.raises(TypeError, match="expected an int, None, or a container"):
        nova.vmap(lambda a: a, out_axes=bad)(X)


@pytest.mark.parametrize("bad", [-1, 2.0, True])
def test_bad_axis_size(bad):
    with pytest.raises(ValueError, match="axis_size must be a non-negative int"):
        nova.vmap(lambda a: a, in_axes=None, axis_size=bad)(X)


def test_full_with_a_traced_fill_value():
    # jnp.full / full_like broadcast an Array fill value, so its derivative flows (it was
    # taken out of the trace by .item(): a zero gradient) and vmap maps it
    assert_close(nova.grad(lambda a: jnp.full((2,), a).sum())(np.float32(3.0)), np.float32(2.0))
    assert_close(nova.grad(lambda a: jnp.full_like(jnp.ones(3), a).sum())(np.float32(3.0)),
                 np.float32(3.0))
    got = nova.vmap(lambda a: jnp.full((2,), a))(np.arange(3, dtype=np.float32))
    assert_close(got, np.repeat(np.arange(3, dtype=np.float32)[:, None], 2, 1))


def test_values_independent_of_the_mapped_axis_stay_concrete():
    # as under jax.vmap: constants, unmapped arguments and what is computed from them only
    x = np.ones((4, 3), np.float32)
    got = nova.vmap(lambda a: a * 2 if jnp.sum(jnp.arange(3)) > 2 else a)(x)
    assert_close(got, 2 * x)
    got = nova.vmap(lambda a, n: a * (n + 1).item(), in_axes=(0, None))(x, jnp.asarray(3.0))
    assert_close(got, 4 * x)
    got = nova.vmap(lambda a, n: jnp.zeros(int(n * 2)) + a.sum(), in_axes=(0, None))(
        x, jnp.asarray(2))
    assert_close(got, np.full((4, 4), 3.0, np.float32))
    # a value of an enclosing eager grad, read through the closure
    g = nova.grad(lambda s: nova.vmap(lambda a: a.sum() * s if s > 0 else a.sum())(x).sum())
    assert_close(g(np.float32(2.0)), np.float32(12.0))
    with pytest.raises(nova.TracerBoolConversionError, match="inside `vmap` that depends on a "
                       "mapped argument"):
        nova.vmap(lambda a: a if a.sum() > 0 else -a)(x)
    with pytest.raises(nova.ConcretizationTypeError, match="inside `vmap`"):
        nova.vmap(lambda a: a * a.sum().item())(x)
