"""jax's top-level API beyond the core transforms: linearize, linear_transpose, jacobian,
nova.tree and the rest of tree_util, disable_jit, clear_caches, typeof, device counts,
nova.dtypes. Checked against jax where it has the same function."""

import functools

import jax
import jax.numpy as jjnp
import jax.tree_util as jtu
import nova.numpy as jnp
import numpy as np
import pytest

import nova
from nova import tree_util as tu

RNG = np.random.default_rng(0)
X = RNG.standard_normal((3, 4)).astype(np.float32)
Y = RNG.standard_normal((3, 4)).astype(np.float32)
TX = RNG.standard_normal((3, 4)).astype(np.float32)
TY = RNG.standard_normal((3, 4)).astype(np.float32)


def f_nova(x, y):
    return {"a": jnp.sin(x) * y, "b": jnp.tanh(x @ y.T).sum()}


def f_jax(x, y):
    return {"a": jjnp.sin(x) * y, "b": jjnp.tanh(x @ y.T).sum()}


def _close(a, b, tol=2e-6):
    for u, v in zip(jtu.tree_leaves(a), jtu.tree_leaves(b), strict=True):
        np.testing.assert_allclose(np.asarray(u), np.asarray(v), rtol=tol, atol=tol)


def test_linearize_matches_jax_and_runs_f_once():
    calls = []

    def f(x, y):
        calls.append(1)
        return f_nova(x, y)

    out, f_jvp = nova.linearize(f, X, Y)
    out_j, f_jvp_j = jax.linearize(f_jax, X, Y)
    _close(out, out_j)
    _close(f_jvp(TX, TY), f_jvp_j(TX, TY))
    _close(f_jvp(TY, TX), f_jvp_j(TY, TX))
    assert len(calls) == 1  # the forward is recorded once; f_jvp only pushes tangents
    # f_jvp is linear: under jit and vmap too
    _close(nova.jit(f_jvp)(TX, TY), f_jvp_j(TX, TY))
    batched = nova.vmap(f_jvp)(np.stack([TX, TY]), np.stack([TY, TX]))
    _close(batched["b"], np.stack([f_jvp_j(TX, TY)["b"], f_jvp_j(TY, TX)["b"]]))


def test_linearize_inside_jit_and_has_aux():
    @nova.jit
    def g(x, y, t):
        out, f_jvp, aux = nova.linearize(lambda a: (jnp.exp(a) * y, a.sum()), x, has_aux=True)
        return out, f_jvp(t), aux

    out, tan, aux = g(X, Y, TX)
    np.testing.assert_allclose(np.asarray(out), np.exp(X) * Y, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(tan), np.exp(X) * Y * TX, rtol=1e-6)
    np.testing.assert_allclose(float(aux), X.sum(), rtol=1e-6)


def test_linearize_errors():
    _, f_jvp = nova.linearize(jnp.sin, X)
    with pytest.raises(ValueError, match="shape"):
        f_jvp(TX[0])
    with pytest.raises(TypeError, match="dtype float64"):
        f_jvp(TX.astype(np.float64))
    with pytest.raises(TypeError, match="1 tangent"):
        f_jvp(TX, TY)
    with pytest.raises(TypeError, match="floating-point"):
        nova.linearize(jnp.sin, np.arange(3))
    with pytest.raises(nova.UnexpectedTracerError, match="finished"):
        leak = []
        nova.jit(lambda x: (leak.append(nova.linearize(jnp.sin, x)[1]), x)[1])(X)
        leak[0](TX)


def test_linear_transpose_matches_jax():
    A = RNG.standard_normal((5, 3)).astype(np.float32)

    def lin(v, w):
        return {"p": jnp.asarray(A) @ v, "q": 2.0 * w.sum()}

    def lin_j(v, w):
        return {"p": jjnp.asarray(A) @ v, "q": 2.0 * w.sum()}

    spec = (nova.ShapeDtypeStruct((3,), np.float32), nova.ShapeDtypeStruct((2, 2), np.float32))
    ct = {"p": RNG.standard_normal(5).astype(np.float32), "q": np.float32(1.5)}
    got = nova.linear_transpose(lin, *spec)(ct)
    want = jax.linear_transpose(lin_j, jax.ShapeDtypeStruct((3,), np.float32),
                                jax.ShapeDtypeStruct((2, 2), np.float32))(ct)
    _close(got, want)
    # <A v, c> == <v, A^T c>: the defining property
    v = RNG.standard_normal(3).astype(np.float32)
    np.testing.assert_allclose(float(np.dot(A @ v, ct["p"])), float(np.dot(v, got[0])),
                               rtol=1e-5)


def test_linear_transpose_errors():
    with pytest.raises(ValueError, match="not linear"):
        nova.linear_transpose(lambda v: v + 1.0, np.zeros(3, np.float32))
    with pytest.raises(TypeError, match="floating point"):
        nova.linear_transpose(lambda v: v, np.zeros(3, np.int32))


def test_jacobian_is_jacrev():
    j = nova.jacobian(lambda v: jnp.sin(v) * v[0])(X[0])
    np.testing.assert_allclose(np.asarray(j), np.asarray(jax.jacobian(
        lambda v: jjnp.sin(v) * v[0])(X[0])), rtol=1e-6)


def test_custom_gradient_matches_jax():
    @nova.custom_gradient
    def f(x, y):
        s = jnp.sin(x) * y
        return s, lambda g: (g * jnp.cos(x) * 10.0, g * s)  # reads an intermediate

    @jax.custom_gradient
    def fj(x, y):
        s = jjnp.sin(x) * y
        return s, lambda g: (g * jjnp.cos(x) * 10.0, g * s)

    loss = lambda x, y: (f(x, y) ** 2).sum()
    loss_j = lambda x, y: (fj(x, y) ** 2).sum()
    want = jax.grad(loss_j, argnums=(0, 1))(X, Y)
    _close(nova.grad(loss, argnums=(0, 1))(X, Y), want, 1e-5)
    _close(nova.jit(nova.grad(loss, argnums=(0, 1)))(X, Y), want, 1e-5)
    per = nova.vmap(nova.grad(lambda x: (f(x, Y[0]) ** 2).sum()))(X)
    _close(per, jax.vmap(jax.grad(lambda x: (fj(x, Y[0]) ** 2).sum()))(X), 1e-5)
    one = nova.custom_gradient(lambda x: (x * 2.0, lambda g: g * 3.0))  # a bare cotangent
    np.testing.assert_allclose(np.asarray(nova.grad(lambda x: one(x).sum())(X)), 3.0)
    bad = nova.custom_gradient(lambda x: x * 2.0)
    with pytest.raises(TypeError, match=r"\(output, vjp_fn\)"):
        nova.grad(lambda x: bad(x).sum())(X)


# --- pytrees ----------------------------------------------------------------------------------

TREE = {"a": [1, 2], "b": (3, {"c": 4}), "d": None}


def test_nova_tree_namespace_matches_jax_tree():
    assert nova.tree.leaves(TREE) == jax.tree.leaves(TREE)
    assert nova.tree.map(lambda x: x * 2, TREE) == jax.tree.map(lambda x: x * 2, TREE)
    assert nova.tree.reduce(lambda a, b: a + b, TREE) == 10
    assert nova.tree.all([1, True]) and not nova.tree.all([1, 0])
    leaves, td = nova.tree.flatten(TREE)
    assert nova.tree.unflatten(td, leaves) == TREE
    assert nova.tree.structure(TREE) == td
    assert [tu.keystr(p) for p, _ in nova.tree.leaves_with_path(TREE)] == \
        [jtu.keystr(p) for p, _ in jax.tree.leaves_with_path(TREE)]


def test_tree_transpose_broadcast_and_reduce_associative():
    outer, inner = tu.tree_structure([0, 0, 0]), tu.tree_structure((0, 0))
    pairs = [(1, 2), (3, 4), (5, 6)]
    assert tu.tree_transpose(outer, inner, pairs) == ([1, 3, 5], [2, 4, 6])
    assert tu.tree_transpose(outer, None, pairs) == ([1, 3, 5], [2, 4, 6])
    with pytest.raises(ValueError, match="differs"):
        tu.tree_transpose(outer, inner, [(1, 2), (3, 4), [5, 6]])
    full = [[3, 4], {"x": 5}]
    assert tu.tree_broadcast([1, 2], full) == jtu.tree_broadcast([1, 2], full)
    with pytest.raises(ValueError, match="prefix"):
        tu.tree_broadcast([1, 2, 3], full)
    order = []
    total = tu.tree_reduce_associative(lambda a, b: (order.append((a, b)), a + b)[1],
                                       [1, 2, 3, 4, 5])
    assert total == 15 and order[:2] == [(1, 2), (3, 4)]  # balanced, not left to right
    assert tu.tree_reduce_associative(max, [], identity=-1) == -1
    with pytest.raises(TypeError, match="identity"):
        tu.tree_reduce_associative(max, [])


def test_treedef_helpers():
    td = tu.tree_structure((1, [2, 3]))
    assert [str(c) for c in tu.treedef_children(td)] == ["*", "[*, *]"]
    assert tu.treedef_is_leaf(tu.tree_structure(1)) and not tu.treedef_is_leaf(td)
    tup = tu.treedef_tuple([tu.tree_structure(1), tu.tree_structure([1, 2])])
    assert tu.tree_unflatten(tup, [7, 8, 9]) == (7, [8, 9])
    assert tu.flatten_one_level({"a": 1, "b": [2]}) == ([1, [2]], ("a", "b"))
    with pytest.raises(ValueError, match="leaf"):
        tu.flatten_one_level(3)
    assert tu.all_leaves([1, 2.0, X]) and not tu.all_leaves([1, [2]])


def test_registration_forms():
    @tu.register_pytree_node_class
    class Pair:
        def __init__(self, a, b, tag):
            self.a, self.b, self.tag = a, b, tag

        def tree_flatten(self):
            return (self.a, self.b), self.tag

        @classmethod
        def tree_unflatten(cls, tag, children):
            return cls(*children, tag)

    p = nova.jit(lambda p: nova.tree.map(lambda x: x * 2, p))(Pair(X, Y, "t"))
    assert isinstance(p, Pair) and p.tag == "t"
    np.testing.assert_allclose(np.asarray(p.b), 2 * Y)

    class Keyed:
        def __init__(self, w, b):
            self.w, self.b = w, b

    tu.register_pytree_with_keys(
        Keyed, lambda k: (((tu.GetAttrKey("w"), k.w), (tu.GetAttrKey("b"), k.b)), None),
        lambda aux, ch: Keyed(*ch))
    paths = [tu.keystr(p) for p, _ in tu.tree_leaves_with_path({"m": Keyed(1, [2])})]
    assert paths == ["['m'].w", "['m'].b[0]"]

    @tu.register_static
    class Static:
        def __init__(self, v):
            self.v = v

        def __hash__(self):
            return hash(self.v)

        def __eq__(self, other):
            return isinstance(other, Static) and self.v == other.v

    assert nova.tree.leaves([Static(1), 2]) == [2]
    assert tu.tree_structure([Static(1)]) != tu.tree_structure([Static(2)])


def test_partial_is_a_pytree():
    p = tu.Partial(lambda x, y, z=0.0: x * y + z, X, z=np.float32(1))
    out = nova.jit(lambda p, y: p(y))(p, Y)
    np.testing.assert_allclose(np.asarray(out), X * Y + 1, rtol=1e-6)
    assert len(nova.tree.leaves(p)) == 2  # X and z; the function is aux data
    q = tu.Partial(p, Y)  # merged: every bound argument stays a child
    assert q.func is p.func and len(q.args) == 2
    assert isinstance(tu.Partial(functools.partial(max, 1)), functools.partial)


# --- runtime and configuration ---------------------------------------------------------------

def test_disable_jit_runs_python_op_by_op():
    seen = []

    @nova.jit
    def f(x):
        seen.append(type(x).__name__)
        return x * 2 if float(x.sum()) > 0 else -x  # Python control flow on a value

    with nova.disable_jit():
        np.testing.assert_allclose(np.asarray(f(np.ones(3, np.float32))), 2.0)
        np.testing.assert_allclose(np.asarray(f(-np.ones(3, np.float32))), 1.0)
    assert seen == ["Array", "Array"]
    assert f.cache_info().misses == 0
    with pytest.raises(nova.ConcretizationTypeError):
        f(np.ones(3, np.float32))  # jit is back on after the block


def test_ensure_compile_time_eval():
    kinds = []

    @nova.jit
    def f(x):
        with nova.ensure_compile_time_eval():
            n = jnp.arange(4).sum()  # concrete operands: computed while tracing
            y = x * n if int(n) > 5 else x  # Python control flow on it
            kinds.append((type(n).__name__, type(jnp.sin(x)).__name__))
        return y

    np.testing.assert_allclose(np.asarray(f(X)), X * 6)
    assert kinds == [("Array", "Tracer")]  # the traced operand's op is still recorded
    with pytest.raises(nova.ConcretizationTypeError):
        nova.jit(lambda x: int(jnp.arange(4).sum()) + x)(X)  # outside the block: traced


def test_clear_caches_retraces():
    g = nova.jit(lambda x: x + 1)
    g(X)
    assert g.cache_info().size == 1
    nova.clear_caches()
    assert g.cache_info().size == 0
    np.testing.assert_allclose(np.asarray(g(X)), X + 1)
    assert g.cache_info().misses == 1


def test_typeof_and_devices():
    t = nova.typeof(X)
    assert t.shape == (3, 4) and t.dtype == np.float32
    assert nova.typeof(1.0).dtype == np.float32 and nova.typeof(jnp.ones(2)).shape == (2,)
    with pytest.raises(TypeError, match="typeof"):
        nova.typeof("x")
    assert nova.default_backend() == nova.default_device().platform
    assert nova.device_count() == len(nova.devices()) == nova.local_device_count()
    assert nova.local_devices() == nova.devices()
    assert nova.process_index() == 0 and nova.process_count() == 1
    with pytest.raises(ValueError, match="process_index"):
        nova.local_devices(process_index=1)


def test_dtypes_module():
    assert nova.dtypes.canonicalize_dtype(float) == np.float32
    assert nova.dtypes.canonicalize_dtype("bfloat16") == nova.dtypes.bfloat16
    assert nova.dtypes.issubdtype(nova.dtypes.bfloat16, np.floating)
    assert nova.dtypes.scalar_type_of(np.int16(3)) is int
    assert nova.dtypes.scalar_type_of(X) is float and nova.dtypes.scalar_type_of(True) is bool
    assert nova.dtypes.finfo(np.float32).eps == np.finfo(np.float32).eps
    with pytest.raises(TypeError, match="not supported"):
        nova.dtypes.canonicalize_dtype(np.uint64)
    assert nova.dtypes.canonicalize_dtype(complex) == np.complex64


# --- found by review (session 23) ---------------------------------------------------------------


def test_tree_util_edge_cases_match_jax():
    path = tu.tree_flatten_with_path({"w": {"q": 1}, "l": [5]})[0][0][0]
    jpath = jtu.tree_flatten_with_path({"w": {"q": 1}, "l": [5]})[0][0][0]
    assert tu.keystr(path, simple=True, separator="/") == jtu.keystr(jpath, simple=True,
                                                                     separator="/") == "l/0"
    assert tu.keystr(path) == jtu.keystr(jpath)
    assert tu.flatten_one_level(None) == ((), None)
    for empty in ([], {}, ()):
        assert tu.treedef_is_leaf(tu.tree_structure(empty)) is True
    assert tu.treedef_is_leaf(tu.tree_structure([1])) is False


def test_linear_transpose_checks_the_cotangent_dtype():
    f_t = nova.linear_transpose(lambda x: 2.0 * x, jnp.ones(2, dtype=np.float32))
    np.testing.assert_array_equal(np.asarray(f_t(jnp.ones(2, dtype=np.float32))[0]), [2.0, 2.0])
    with pytest.raises(TypeError, match="cotangent leaf 0 has dtype int32, but f's output leaf 0 "
                                        "has dtype float32"):
        f_t(jnp.ones(2, dtype=np.int32))
