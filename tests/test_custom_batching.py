"""nova.custom_batching (custom_vmap, sequential_vmap): under vmap the rule runs instead of the
function's batched operations, checked against jax.custom_batching on the same functions and
rules; outside vmap the function itself; nesting, jit both ways, in_axes, derivatives; errors."""

import jax
import jax.numpy as jjnp
import nova.numpy as jnp
import numpy as np
import pytest
from jax import custom_batching as jcb

import nova
from nova.core.errors import ShapeError
from tests.helpers import assert_close

f32 = np.float32


def _sin_times(np_mod, cb, log):
    """f(x, y) = sin(x) * y whose rule adds 100 (so a result shows the rule ran) and logs
    (axis_size, in_batched)."""

    @cb.custom_vmap
    def f(x, y):
        return np_mod.sin(x) * y

    @f.def_vmap
    def rule(axis_size, in_batched, x, y):
        log.append((axis_size, [bool(b) for b in in_batched]))
        return np_mod.sin(x) * y + 100.0, any(in_batched)

    return f


def _pair(log_n, log_j):
    return _sin_times(jnp, nova.custom_batching, log_n), _sin_times(jjnp, jcb, log_j)


def _xy():
    rng = np.random.default_rng(0)
    return rng.standard_normal(4).astype(f32), rng.standard_normal(4).astype(f32)


def test_rule_runs_under_vmap_with_mixed_in_batched_eager_and_jit():
    ln, lj = [], []
    f, fj = _pair(ln, lj)
    x, y = _xy()
    s = f32(1.5)
    want = jax.vmap(fj, in_axes=(0, None))(x, s)
    assert_close(nova.vmap(f, in_axes=(0, None))(x, s), want)
    assert_close(nova.jit(nova.vmap(f, in_axes=(0, None)))(x, s), want)  # vmap under jit
    assert_close(nova.vmap(nova.jit(f), in_axes=(0, None))(x, s), want)  # jit under vmap
    assert np.all(np.asarray(want) > 90)  # the rule's result, not sin(x) * y
    assert ln[0] == lj[0] == (4, [True, False])
    assert_close(nova.vmap(f)(x, y), jax.vmap(fj)(x, y))
    assert ln[-1] == lj[-1] == (4, [True, True])


def test_outside_vmap_the_function_runs():
    f, fj = _pair([], [])
    x, y = _xy()
    want = fj(x, y)
    assert_close(f(x, y), want)
    assert_close(nova.jit(f)(x, y), want)
    assert_close(f(x=x, y=y), want)
    assert_close(np.sin(x) * y, want)


def test_no_mapped_argument_uses_the_function_as_jax():
    ln, lj = [], []
    f, fj = _pair(ln, lj)
    x, y = _xy()
    got = nova.vmap(f, in_axes=(None, None), axis_size=3)(x, y)
    assert_close(got, jax.vmap(fj, in_axes=(None, None), axis_size=3)(x, y))
    assert ln == lj == []


def test_pytree_arguments_and_outputs():
    def make(np_mod, cb, log):
        @cb.custom_vmap
        def f(d, z):
            return {"s": d["a"] * d["b"], "z": (z, z + 1.0)}

        @f.def_vmap
        def rule(n, in_batched, d, z):
            log.append(in_batched)
            bz = in_batched[1]
            return ({"s": d["a"] * d["b"] - 1.0, "z": (z * 2.0, z + 1.0)},
                    {"s": True, "z": (bz, bz)})

        return f

    ln, lj = [], []
    f, fj = make(jnp, nova.custom_batching, ln), make(jjnp, jcb, lj)
    x, _ = _xy()
    args = ({"a": x, "b": f32(3.0)}, f32(0.5))
    axes = ({"a": 0, "b": None}, None)
    got = nova.vmap(f, in_axes=axes)(*args)
    want = jax.vmap(fj, in_axes=axes)(*args)
    assert_close(got["s"], want["s"])
    assert_close(got["z"][0], want["z"][0])
    assert_close(got["z"][1], want["z"][1])
    assert got["z"][0].shape == (4,)  # an unbatched output broadcast by vmap
    assert ln == lj == [[{"a": True, "b": False}, False]]


def test_nested_vmap_calls_the_rule_of_the_inner_axis():
    ln, lj = [], []
    f, fj = _pair(ln, lj)
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 3)).astype(f32)
    y = rng.standard_normal(3).astype(f32)
    inner = (0, 0)
    got = nova.vmap(nova.vmap(f, in_axes=inner), in_axes=(0, None))(x, y)
    want = jax.vmap(jax.vmap(fj, in_axes=inner), in_axes=(0, None))(x, y)
    assert_close(got, want)
    assert ln == lj == [(3, [True, True])]
    # the inner vmap maps nothing of f's: the outer one meets the rule
    ln.clear(), lj.clear()
    got = nova.vmap(lambda a: nova.vmap(lambda b: f(a, b))(y))(x[:, 0])
    want = jax.vmap(lambda a: jax.vmap(lambda b: fj(a, b))(y))(x[:, 0])
    assert_close(got, want)
    assert ln[0][0] == lj[0][0] == 3


def test_in_axes_and_out_axes_other_than_zero():
    ln, lj = [], []
    f, fj = _pair(ln, lj)
    rng = np.random.default_rng(2)
    x = rng.standard_normal((5, 3)).astype(f32)
    y = rng.standard_normal((3, 5)).astype(f32)
    got = nova.vmap(f, in_axes=(1, 0), out_axes=1)(x, y)
    want = jax.vmap(fj, in_axes=(1, 0), out_axes=1)(x, y)
    assert got.shape == (5, 3)
    assert_close(got, want)
    assert_close(nova.vmap(f, in_axes=(-1, None))(x, f32(2.0)),
                 jax.vmap(fj, in_axes=(-1, None))(x, f32(2.0)))


def test_sequential_vmap_equals_plain_vmap_and_runs_per_example():
    def g(x, w):
        return {"y": jnp.tanh(x @ w), "n": jnp.sum(x * x)}

    def gj(x, w):
        return {"y": jjnp.tanh(x @ w), "n": jjnp.sum(x * x)}

    s, sj = nova.custom_batching.sequential_vmap(g), jcb.sequential_vmap(gj)
    rng = np.random.default_rng(3)
    xs = rng.standard_normal((4, 3)).astype(f32)
    w = rng.standard_normal((3, 2)).astype(f32)
    plain = nova.vmap(g, in_axes=(0, None))(xs, w)
    for got in (nova.vmap(s, in_axes=(0, None))(xs, w),
                nova.jit(nova.vmap(s, in_axes=(0, None)))(xs, w)):
        want = jax.vmap(sj, in_axes=(0, None))(xs, w)
        for k in ("y", "n"):
            assert_close(got[k], plain[k])
            assert_close(got[k], want[k])
    assert_close(s(xs[0], w)["y"], g(xs[0], w)["y"])
    # a callback that only takes one example sees one at a time, through nested vmaps too
    shapes = []

    def cb(v):
        shapes.append(np.shape(v))
        return np.asarray(v * 2, f32)

    c = nova.custom_batching.sequential_vmap(
        lambda v: nova.pure_callback(cb, nova.ShapeDtypeStruct((), f32), v) + 1.0)
    grid = rng.standard_normal((2, 3)).astype(f32)
    assert_close(nova.vmap(nova.vmap(c))(grid), grid * 2 + 1)
    assert shapes == [()] * 6
    shapes.clear()
    assert_close(nova.vmap(nova.jit(c))(grid[0]), grid[0] * 2 + 1)
    assert shapes == [()] * 3


def test_forward_mode_differentiates_the_function_outside_and_the_rule_inside_vmap():
    f, fj = _pair([], [])
    x, y = _xy()
    t = np.ones(4, f32)
    p, tn = nova.jvp(f, (x, y), (t, np.zeros(4, f32)))
    pj, tj = jax.jvp(fj, (x, y), (t, np.zeros(4, f32)))
    assert_close(p, pj)
    assert_close(tn, tj)  # cos(x) * y: the function's derivative
    want = jax.jvp(jax.vmap(fj), (x, y), (t, t))
    for got in (nova.jvp(nova.vmap(f), (x, y), (t, t)),
                nova.vmap(lambda a, b: nova.jvp(f, (a, b), (f32(1), f32(1))))(x, y),
                nova.jit(nova.vmap(lambda a, b: nova.jvp(f, (a, b), (f32(1), f32(1)))))(x, y)):
        assert_close(got[0], want[0])
        assert_close(got[1], want[1])


def test_reverse_mode_raises_as_jax_and_works_over_vmap_or_with_custom_vjp():
    f, fj = _pair([], [])
    x, y = _xy()
    with pytest.raises(ValueError):
        jax.grad(fj)(f32(1.0), f32(2.0))
    with pytest.raises(ValueError, match=r"custom_vmap .*\bf: reverse-mode differentiation"):
        nova.grad(f)(f32(1.0), f32(2.0))
    with pytest.raises(ValueError, match="custom_vjp"):
        nova.jit(nova.vmap(nova.grad(f)))(x, y)
    # grad over the vmap differentiates the rule's operations, in both frameworks
    assert_close(nova.grad(lambda a: nova.vmap(f)(a, y).sum())(x),
                 jax.grad(lambda a: jax.vmap(fj)(a, y).sum())(x))

    def both(np_mod, cb, custom_vjp):
        inner = cb.custom_vmap(lambda a, b: np_mod.sin(a) * b)
        inner.def_vmap(lambda n, bat, a, b: (np_mod.cos(a) * b, True))
        g = custom_vjp(inner)
        g.defvjp(lambda a, b: (g(a, b), (np_mod.cos(a), np_mod.sin(a), b)),
                 lambda res, ct: (res[0] * ct * res[2], res[1] * ct))
        return g

    g, gj = both(jnp, nova.custom_batching, nova.custom_vjp), both(jjnp, jcb, jax.custom_vjp)
    assert_close(nova.vmap(g)(x, y), jax.vmap(gj)(x, y))
    assert_close(nova.grad(g)(f32(0.3), f32(2.0)), jax.grad(gj)(f32(0.3), f32(2.0)))
    assert_close(nova.vmap(nova.grad(g))(x, y), jax.vmap(jax.grad(gj))(x, y))


def _with_rule(rule):
    f = nova.custom_batching.custom_vmap(lambda x: (x, x * 2.0))
    f.def_vmap(rule)
    return f


@pytest.mark.parametrize("rule, err, match", [
    (lambda n, b, x: ((x, x * 2.0), True), ValueError, "out_batched has the structure"),
    (lambda n, b, x: ((x, x), (True, True, True)), ValueError, "out_batched has the structure"),
    (lambda n, b, x: ([x], [True]), ValueError, "output has the structure"),
    (lambda n, b, x: ((x, x), (True, True), 1), TypeError, "must return a pair"),
    (lambda n, b, x: x, TypeError, "must return a pair"),
    (lambda n, b, x: ((x, x), (1, True)), TypeError, "out_batched leaf 0 is a int"),
    (lambda n, b, x: ((x[:2], x), (True, True)), ShapeError, r"leaf 0 has shape \(2,\)"),
    (lambda n, b, x: ((x, x), (False, True)), ShapeError, r"must return shape \(\)"),
    (lambda n, b, x: ((x.astype(np.int32), x), (True, True)), TypeError, "dtype int32"),
])
def test_bad_rules_raise_clear_errors(rule, err, match):
    f = _with_rule(rule)
    x = np.arange(3, dtype=f32)
    with pytest.raises(err, match=match):
        nova.vmap(f)(x)
    with pytest.raises(err, match=match):
        nova.jit(nova.vmap(f))(x)


def test_bad_use_raises():
    g = nova.custom_batching.custom_vmap(lambda x: x)
    with pytest.raises(AttributeError, match="no batching rule defined"):
        g(np.ones(2, f32))
    with pytest.raises(TypeError, match="def_vmap takes a function"):
        g.def_vmap(3)
    g.def_vmap(lambda n, b, x: (x, True))
    with pytest.raises(TypeError, match="argument 'x' holds a str"):
        nova.jit(lambda: g("a"))()
    with pytest.raises(TypeError, match="expected a function"):
        nova.custom_batching.sequential_vmap(1)

    def closes(a):  # the function reads a mapped value that is not its argument
        h = nova.custom_batching.custom_vmap(lambda c: c + a)
        h.def_vmap(lambda n, b, c: (c + 1.0, False))
        return h(f32(1.0))

    with pytest.raises(ValueError, match="closes over a value mapped by this vmap"):
        nova.vmap(closes)(np.ones(3, f32))


def test_rule_reading_a_value_of_the_vmapped_function_raises():
    def outer(x):
        w = jnp.sin(x)
        h = nova.custom_batching.custom_vmap(lambda a: a * 2.0)
        h.def_vmap(lambda n, b, a: (a * w, True))  # w: a value of vmap's finished trace
        return h(x)

    with pytest.raises(nova.UnexpectedTracerError, match="escaped"):
        nova.vmap(outer)(np.arange(3, dtype=f32))
