"""jit: signature cache, stages, static and donated arguments, inlining into other transforms."""

import numpy as np
import pytest

import nova
import nova.numpy as jnp
from tests.helpers import assert_close


def test_cache_hits_misses_and_reasons():
    calls = []

    def f(x, n):
        calls.append(1)
        return x * n

    jf = nova.jit(f, static_argnums=1)
    x = np.ones((2, 3), np.float32)
    assert_close(jf(x, 2), 2 * x)
    assert_close(jf(x + 1, 2), 2 * (x + 1))
    assert len(calls) == 1
    jf(np.ones((2, 4), np.float32), 2)
    jf(x, 3)
    jf(x.astype(np.float64), 3)
    info = jf.cache_info()
    assert (info.hits, info.misses, info.size) == (1, 4, 4)
    assert info.miss_reasons[0] == "first call"
    assert "argument 'x' changed: tensor<2x3xf32> -> tensor<2x4xf32>" in info.miss_reasons[1]
    assert "static argument 'n' changed: 2 -> 3" in info.miss_reasons[2]
    assert "f64" in info.miss_reasons[3]
    assert len(calls) == 4


def test_pytree_structure_change_retraces():
    jf = nova.jit(lambda d: d["a"] + d.get("b", 0.0))
    jf({"a": np.ones(2, np.float32)})
    jf({"a": np.ones(2, np.float32), "b": np.ones(2, np.float32)})
    assert "pytree structure changed" in jf.cache_info().miss_reasons[1]


def test_config_flag_is_part_of_the_key():
    jf = nova.jit(lambda x: x @ x)
    x = np.eye(3, dtype=np.float32)
    jf(x)
    nova.config.update("matmul_precision", "tf32")
    try:
        jf(x)
    finally:
        nova.config.update("matmul_precision", "highest")
    assert jf.cache_info().misses == 2
    assert "config flags changed" in jf.cache_info().miss_reasons[1]


def test_stages_as_text_cost_memory():
    def f(x, w):
        return jnp.tanh(x @ w).sum()

    x, w = np.ones((8, 16), np.float32), np.ones((16, 4), np.float32)
    traced = nova.jit(f).trace(x, w)
    assert "nova.dot_general" in traced.as_text()
    lowered = traced.lower()
    assert "func.func @main" in lowered.as_text()
    compiled = lowered.compile()
    assert_close(compiled(x, w), np.tanh(x @ w).sum())
    cost = compiled.cost_analysis()
    assert cost["flops"] >= 2 * 8 * 16 * 4
    mem = compiled.memory_analysis()
    assert mem["argument_bytes"] == x.nbytes + w.nbytes and mem["output_bytes"] == 4
    assert mem["peak_bytes"] >= mem["argument_bytes"]
    with pytest.raises(TypeError, match="different signature"):
        compiled(np.ones((8, 15), np.float32), w)


def test_shape_dtype_struct_lowering_without_data():
    s = nova.ShapeDtypeStruct((4, 4), "float32")
    text = nova.jit(lambda x: jnp.exp(x)).lower(s).as_text()
    assert "tensor<4x4xf32>" in text and "nova.exp" in text


def test_static_argnames_and_kwargs():
    jf = nova.jit(lambda x, *, axis: jnp.sum(x, axis=axis), static_argnames="axis")
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    assert_close(jf(x, axis=0), x.sum(0))
    assert_close(jf(x, axis=1), x.sum(1))


def test_unhashable_static_argument_raises():
    jf = nova.jit(lambda x, axes: jnp.sum(x, axis=axes), static_argnums=1)
    with pytest.raises(TypeError, match="static argument 'axes' must be hashable"):
        jf(np.ones((2, 2)), [0])


def test_donated_arguments_are_deleted():
    jf = nova.jit(lambda p, g: p - 0.1 * g, donate_argnums=0)
    p = jnp.ones(3)
    out = jf(p, jnp.ones(3))
    assert_close(out, np.full(3, 0.9, np.float32))
    assert p.is_deleted() and p.shape == (3,)
    with pytest.raises(nova.DeletedArrayError, match="donated"):
        np.asarray(p)


def test_jit_inside_grad_and_jit_inside_jit():
    inner = nova.jit(lambda x: jnp.sin(x) * 2.0)
    outer = nova.jit(lambda x: inner(x) + inner(x * 2.0))
    x = np.array([0.1, 0.2, 0.3])
    assert_close(outer(x), 2 * np.sin(x) + 2 * np.sin(2 * x))
    assert_close(nova.grad(lambda x: jnp.sum(outer(x)))(x), 2 * np.cos(x) + 4 * np.cos(2 * x))
    # the inner function traced once per signature even though it is used twice
    assert inner.cache_info().misses == 1


def test_constants_and_python_scalars():
    c = jnp.asarray([1.0, 2.0])
    jf = nova.jit(lambda x, s: x * s + c)
    assert_close(jf(np.array([1.0, 1.0], np.float32), 3.0), [4.0, 5.0])
    out = jf(np.array([1.0, 1.0], np.float32), 3.0)
    assert out.dtype == np.float32


def test_outputs_can_be_inputs_and_constants():
    jf = nova.jit(lambda x: (x, 1.0, {"y": x + 1}))
    a, b, d = jf(np.ones(2, np.float32))
    assert_close(a, np.ones(2))
    assert_close(b, 1.0)
    assert_close(d["y"], 2 * np.ones(2))


def test_make_program():
    p = nova.make_program(lambda x: jnp.exp(x) + 1.0)(np.ones(3, np.float32))
    assert isinstance(p, nova.Program)
    assert p.count("exp") == 1 and p.count("add") == 1


@pytest.mark.parametrize("backend", ["interpreter", "compiled"])
def test_debug_nans_names_the_primitive_and_line(backend):
    nova.config.update("debug_nans", True)
    nova.config.update("backend", backend)
    try:
        @nova.jit
        def f(x):
            y = jnp.exp(x)
            z = jnp.log(x - 2.0)  # NaN for x < 2
            return y + z
        with pytest.raises(FloatingPointError, match=r"nova.log produced a NaN.*test_jit.py:\d+"):
            f(np.ones(3, np.float32))
        assert_close(f(np.full(3, 3.0, np.float32)), np.full(3, np.exp(3.0) + np.log(1.0)))
        with pytest.raises(FloatingPointError, match="nova.sqrt"):
            jnp.sqrt(jnp.asarray([-1.0]))
    finally:
        nova.config.update("debug_nans", False)
        nova.config.update("backend", "interpreter")


@pytest.mark.parametrize("backend", ["interpreter", "compiled"])
def test_memory_analysis_reports_bytes_saved_for_backward(backend):
    nova.config.update("backend", backend)

    def loss(w, x):
        h = jnp.tanh(x @ w)  # the backward of tanh needs h (32 x 16 float32 = 2048 bytes)
        return jnp.sum(h * h)

    w, x = np.ones((8, 16), np.float32) * 0.1, np.ones((32, 8), np.float32)
    mem = nova.jit(nova.value_and_grad(loss)).lower(w, x).compile().memory_analysis()
    assert 2048 <= mem["saved_for_backward_bytes"] <= 4 * 2048
    fwd_only = nova.jit(loss).lower(w, x).compile().memory_analysis()
    assert fwd_only["saved_for_backward_bytes"] == 0


def test_donation_never_writes_a_numpy_argument_or_memory_the_caller_can_see():
    """A donated buffer may be overwritten (an intermediate takes it): NumPy arguments, Arrays
    made by asarray from NumPy data and Arrays whose buffer was handed out by np.asarray are
    copied first; an Array that only Nova holds (a jitted call's result) is reused in place."""
    w = np.ones((24, 16), np.float32)
    f = nova.jit(lambda x, w: (x * 2.0 + 1.0) @ w, donate_argnums=0)
    want = np.full((40, 16), 72.0, np.float32)

    x = np.ones((40, 24), np.float32)
    np.testing.assert_array_equal(np.asarray(f(x, w)), want)
    np.testing.assert_array_equal(x, 1.0)  # the NumPy argument is untouched

    src = np.ones((40, 24), np.float32)
    a = jnp.asarray(src)
    np.testing.assert_array_equal(np.asarray(f(a, w)), want)
    assert a.is_deleted()
    np.testing.assert_array_equal(src, 1.0)  # asarray shared it; donation copied it

    b = nova.jit(lambda: jnp.ones((40, 24)))()
    view = np.asarray(b)
    np.testing.assert_array_equal(np.asarray(f(b, w)), want)
    np.testing.assert_array_equal(view, 1.0)  # a view handed out before the call

    c = nova.jit(lambda: jnp.ones((40, 24)))()
    buffer = c._value  # Nova's own buffer: the call may take it for x * 2 + 1
    np.testing.assert_array_equal(np.asarray(f(c, w)), want)
    np.testing.assert_array_equal(buffer, 3.0)


def test_eager_results_are_novas_own_buffers_for_donation():
    """An eager op's result (an optimizer's zeros_like state, x * 2) is a fresh buffer: donated
    to a jitted call it is taken in place, not copied first; a result that shares memory with
    its argument or with another result stays the caller's (copied before it is written)."""
    w = np.ones((24, 16), np.float32)
    f = nova.jit(lambda x, w: (x * 2.0 + 1.0) @ w, donate_argnums=0)
    want = np.full((40, 16), 72.0, np.float32)

    for make in (lambda: jnp.ones((40, 24)), lambda: jnp.zeros_like(jnp.ones((40, 24))) + 1.0,
                 lambda: jnp.asarray(np.ones((40, 24), np.float32)) * 1.0):
        a = make()
        assert a._owned
        buffer = a._value
        np.testing.assert_array_equal(np.asarray(f(a, w)), want)
        assert a.is_deleted()
        np.testing.assert_array_equal(buffer, 3.0)  # written in place: no copy was made

    src = np.ones((40, 24), np.float32)
    s = jnp.asarray(src)
    r = nova.numpy.reshape(s, (40, 24))  # may return s itself or a view of it
    if np.shares_memory(np.asarray(r._value), src):
        assert not r._owned
    f(r, w)
    np.testing.assert_array_equal(src, 1.0)  # the caller's NumPy memory is never written

    opt = nova.optim.adam(1e-3)
    state = opt.init({"w": jnp.ones((8, 8))})
    assert all(x._owned for x in nova.tree_util.tree_leaves(state) if x.ndim > 0)


def test_donation_after_switching_backends_never_writes_a_visible_buffer():
    """The reference interpreter's eager reshape returns a view of its argument, and a jitted
    identity returns a closed-over Array's own data: neither the argument nor that result may
    then be written in place when donated under the compiled backend (found by review)."""
    saved = nova.config.backend
    f = nova.jit(lambda x: x * 0 + 123.0, donate_argnums=0)
    try:
        nova.config.update("backend", "interpreter")
        a = jnp.arange(12.0) * 1
        b = a.reshape(3, 4)
        c = jnp.arange(5000.0) * 1
        r = nova.jit(lambda: c)()
        nova.config.update("backend", "compiled")
        before_b, before_c = np.array(b), np.array(c)
        f(a)
        f(r)
        np.testing.assert_array_equal(np.asarray(b), before_b)
        np.testing.assert_array_equal(np.asarray(c), before_c)
    finally:
        nova.config.update("backend", saved)


def test_negative_static_and_donated_positions_count_from_the_signature():
    """static_argnums=-1 names the last positional parameter (it was ignored), a negative
    donate_argnums too even when that argument is passed by keyword (it deleted the first one),
    and an argument both static and donated is an error (found by review)."""
    g = nova.jit(lambda x, n: x * n if isinstance(n, int) else x, static_argnums=-1)
    np.testing.assert_array_equal(np.asarray(g(jnp.ones(2), 3)), [3.0, 3.0])
    f = nova.jit(lambda x, y: x + y, donate_argnums=-1)
    x, y = jnp.ones(2), jnp.ones(2)
    f(x, y=y)
    assert not x.is_deleted()
    x, y = jnp.ones(2), jnp.ones(2)
    f(x, y)
    assert y.is_deleted() and not x.is_deleted()
    with pytest.raises(ValueError, match="both static and donated"):
        nova.jit(lambda x, n: x, static_argnums=1, donate_argnums=1)


def test_array_copies_by_default():
    src = np.arange(6, dtype=np.float32)
    assert not np.shares_memory(np.asarray(jnp.array(src)), src)
    assert np.shares_memory(np.asarray(jnp.asarray(src)), src)
    a = jnp.asarray(src)
    assert not np.shares_memory(np.asarray(jnp.array(a)), src)


def test_compiled_calls_protect_and_delete_donated_arguments_too():
    """`jit(f).lower(...).compile()` calls follow the same donation rules as `jit(f)(...)`, and
    only arguments an intermediate actually takes are copied."""
    w = np.ones((24, 16), np.float32)
    f = nova.jit(lambda x, w: (x * 2.0 + 1.0) @ w, donate_argnums=(0, 1))
    x = np.ones((40, 24), np.float32)
    compiled = f.lower(x, w).compile()
    assert compiled._overwritten() == (0,)  # x * 2 + 1 takes x's buffer; w is only read
    np.testing.assert_array_equal(np.asarray(compiled(x, w)), np.full((40, 16), 72.0))
    np.testing.assert_array_equal(x, 1.0)
    a = jnp.asarray(x)
    compiled(a, w)
    assert a.is_deleted()


def test_an_output_returned_twice_is_not_owned_by_either_array():
    """(y, y) gives two Arrays over one buffer: donating one must not change the other."""
    f = nova.jit(lambda x: (lambda y: (y, y))(x + 1))
    a, b = f(np.zeros(4, np.float32))
    g = nova.jit(lambda v: v * 10, donate_argnums=0)
    c = g(a)
    np.testing.assert_array_equal(np.asarray(b), np.ones(4, np.float32))
    np.testing.assert_array_equal(np.asarray(c), np.full(4, 10.0, np.float32))


def test_results_that_are_one_value_are_distinct_buffers():
    """(y, y), (y, y.T) and (x, x): a result repeated is a buffer of its own, so writing one
    through np.asarray (results are the caller's to write) leaves the others, and the argument,
    as they were. (The first of (x, x) is the argument's own buffer, as an identity jit's.)"""
    x0 = np.arange(6, dtype=np.float32).reshape(2, 3)
    for fn in (lambda x: (x * 2, x * 2), lambda x: (x + 1, (x + 1).T), lambda x: (x, x)):
        x = x0.copy()
        a, b = nova.jit(fn)(x)
        want_a = np.array(np.asarray(a))
        np.asarray(b)[...] = -7.0
        np.testing.assert_array_equal(np.asarray(a), want_a)
        np.testing.assert_array_equal(x, x0)
    a, b = nova.jit(lambda x: (x * 2, x * 2))(x0)
    np.asarray(a)[...] = 5.0
    np.testing.assert_array_equal(np.asarray(b), x0 * 2)


def test_a_large_closed_over_array_returned_from_jit_is_the_callers_copy(tmp_path, monkeypatch):
    """A closed-over Array of more than 4096 elements is a host constant of the executable;
    returned as a result it is copied, so donating (or writing) that result changes neither the
    original nor the next call's result — compiled, and loaded from the executable cache
    (found by review: C ended at 2.0, and the cached executable's constant at 2.0)."""
    monkeypatch.setenv("NOVA_CACHE_DIR", str(tmp_path))
    C = jnp.ones((300, 300))
    for _ in range(2):  # compiled, then (a new jit object) from the executable cache
        f = nova.jit(lambda x: (x + 1, C))
        _, c = f(jnp.zeros((300, 300)))
        r = nova.jit(lambda c: c * 2.0, donate_argnums=0)(c)
        _, c2 = f(jnp.zeros((300, 300)))
        assert float(np.asarray(r)[0, 0]) == 2.0
        assert float(np.asarray(C)[7, 9]) == 1.0 and float(np.asarray(c2)[7, 9]) == 1.0


def test_donation_never_writes_a_buffer_another_array_shows():
    """Found by review: an output that is an argument's own buffer (an identity jit) and a
    shallow copy share the buffer with an owned Array; donating that Array must copy it first,
    so neither the result nor the other Array changes."""
    import copy

    mk = nova.jit(lambda x: x + 1.0)
    g = nova.jit(lambda a, y: jnp.exp(a) * 2 + y[::-1, ::-1] * 3, donate_argnums=0)
    want = np.float32(np.exp(1.0) * 2 + 3)
    for share in (lambda a: nova.jit(lambda x: x)(a), copy.copy):
        a = mk(np.zeros((16, 16), np.float32))
        y = share(a)
        out = np.asarray(g(a, y))
        assert_close(out, np.full((16, 16), want), rtol=1e-6)
        np.testing.assert_array_equal(np.asarray(y), 1.0)
    # a later call donating the argument alone must not write the earlier output either
    a = mk(np.zeros((16, 16), np.float32))
    y = nova.jit(lambda x: x)(a)
    nova.jit(lambda a: jnp.exp(a) * 2, donate_argnums=0)(a)
    np.testing.assert_array_equal(np.asarray(y), 1.0)


def test_unpickled_arrays_sharing_a_buffer_are_not_donated_in_place():
    """Found by review: pickle and deepcopy keep one ndarray for a buffer met twice, so the
    loaded Arrays share it; donating one must not write what the other shows."""
    import copy
    import pickle

    mk = nova.jit(lambda x: x + 1.0)
    g = nova.jit(lambda a: jnp.exp(a) * 2, donate_argnums=0)
    for load in (lambda t: pickle.loads(pickle.dumps(t)), copy.deepcopy):
        a = mk(np.zeros((16, 16), np.float32))
        b = copy.copy(a)
        a2, b2 = load([a, b])
        g(a2)
        np.testing.assert_array_equal(np.asarray(b2), 1.0)


def test_input_free_values_are_recorded_once_per_trace():
    # Constants, iotas and their broadcasts are hash-consed while tracing: the zero-cotangent
    # masks of a backward pass ask for the same zeros hundreds of times.
    def f(x):
        a = x + jnp.zeros((4, 3)) + 2.0
        b = x * jnp.zeros((4, 3)) + 2.0
        return a + b + jnp.zeros(3) + jnp.arange(3.0) + jnp.arange(3.0)

    x = np.ones((4, 3), np.float32)
    prog = nova.jit(f).trace(x).program
    names = [e.prim.name for e in prog.eqns]
    consts = [e.params["value"] for e in prog.eqns if e.prim.name == "constant"]
    assert len(consts) == len({(c.dtype, c.shape, c.tobytes()) for c in consts})  # no repeat
    assert names.count("iota") == 1
    bcasts = [(e.inputs[0], e.params["shape"]) for e in prog.eqns
              if e.prim.name == "broadcast_in_dim"]
    assert len(bcasts) == len({(id(v), s) for v, s in bcasts})
    np.testing.assert_allclose(np.asarray(nova.jit(f)(x)), f(x))
    # -0.0 and 0.0 are different constants (their bytes differ).
    g = nova.jit(lambda x: (x * 0.0, x * -0.0))
    pos, neg = g(np.float32([-1.0]))
    assert np.signbit(np.asarray(pos)[0]) and not np.signbit(np.asarray(neg)[0])


def test_hash_consing_keeps_each_transform_region_differentiable():
    # Two gradients of the same function of the same value inside one trace, a gradient
    # nested in another, and a forward-mode derivative through a VJP rule: each region's
    # equations must stay its own (only input-free values are shared).
    def loss(w):
        return jnp.sum(jnp.tanh(w * jnp.arange(1.0, 4.0)) ** 2)

    def f(w):
        g1 = nova.grad(loss)(w)
        g2 = nova.grad(loss)(w)
        h = nova.grad(lambda v: jnp.sum(nova.grad(loss)(v) * jnp.ones(3)))(w)
        return g1, g2, h

    w = np.float32([0.3, -0.2, 0.5])
    g1, g2, h = nova.jit(f)(w)
    e1, e2, eh = f(w)
    for got, want in ((g1, e1), (g2, e2), (h, eh)):
        assert_close(np.asarray(got), np.asarray(want), rtol=1e-5, atol=1e-6)
    assert np.abs(np.asarray(g1)).min() > 0  # neither region was emptied
    a = np.arange(1.0, 4.0, dtype=np.float32)
    t = np.tanh(w * a)
    assert_close(np.asarray(g1), 2 * t * (1 - t * t) * a, rtol=1e-5, atol=1e-6)
    _, tangent = nova.jvp(lambda v: nova.grad(loss)(v), (w,), (np.ones(3, np.float32),))
    _, tangent_jit = nova.jit(lambda v: nova.jvp(lambda u: nova.grad(loss)(u), (v,),
                                                 (jnp.ones(3),)))(w)
    assert_close(np.asarray(tangent_jit), np.asarray(tangent), rtol=1e-5, atol=1e-6)


def test_a_numpy_array_changed_after_the_trace_took_it_keeps_its_value():
    """The trace copies a NumPy constant (JAX copies it to the device): a buffer the caller
    reuses later neither changes the use already traced nor a fresh array with its old bytes
    (recorded once per trace), found by review."""
    def f(x):
        scratch = np.zeros(3, np.float32)
        first = x + scratch
        scratch[:] = 5.0
        return first, x + np.zeros(3, np.float32), x + scratch

    x = np.ones(3, np.float32)
    first, fresh, changed = nova.jit(f)(x)
    np.testing.assert_array_equal(np.asarray(first), [1, 1, 1])
    np.testing.assert_array_equal(np.asarray(fresh), [1, 1, 1])
    np.testing.assert_array_equal(np.asarray(changed), [6, 6, 6])


def test_a_jitted_function_inside_other_traces_counts_and_clears_like_a_call():
    """Traced inside another trace first, then called: one miss; clear_cache forgets the traced
    program too (a changed global is seen afterwards, as by a fresh trace); found by review."""
    scale = [2.0]
    k = nova.jit(lambda x: x * scale[0])
    x = jnp.asarray(np.array([1.0, 2.0, 3.0], np.float32))
    np.testing.assert_allclose(np.asarray(nova.jit(lambda x: jnp.sum(k(x)))(x)), 12.0)
    np.testing.assert_allclose(np.asarray(k(x)), [2, 4, 6])
    info = k.cache_info()
    assert info.misses == 1 and info.miss_reasons == ["first call"], info
    scale[0] = 5.0
    k.clear_cache()
    np.testing.assert_allclose(np.asarray(nova.grad(lambda x: jnp.sum(k(x)))(x)), [5, 5, 5])
    np.testing.assert_allclose(np.asarray(k(x)), [5, 10, 15])


def test_eager_grad_of_a_jitted_function_runs_its_optimized_program_unless_it_stops_gradients():
    x = np.array([0.5, -1.0, 2.0], np.float32)
    plain = nova.jit(lambda w: jnp.sum(jnp.tanh(w) * w))
    stopped = nova.jit(lambda w: jnp.sum(nova.lax.stop_gradient(jnp.tanh(w)) * w))
    np.testing.assert_allclose(np.asarray(nova.grad(plain)(x)),
                               np.tanh(x) + x * (1 - np.tanh(x) ** 2), rtol=1e-5)
    np.testing.assert_allclose(np.asarray(nova.grad(stopped)(x)), np.tanh(x), rtol=1e-5)
    assert plain.cache_info().size == 1  # compiled: its fused program replayed eagerly
    assert stopped.cache_info().size == 0  # replayed as traced, stop_gradient kept


def test_a_large_closed_over_numpy_array_is_one_constant_however_often_it_is_used():
    big = np.arange(100_000, dtype=np.float32)

    def f(x):
        s = x
        for _ in range(8):
            s = s + jnp.sum(big)
        return s

    prog = nova.jit(f).trace(np.float32(1)).program
    large = [e for e in prog.eqns if e.prim.name == "constant" and e.params["value"].size > 64]
    assert len(large) == 1
    np.testing.assert_allclose(np.asarray(nova.jit(f)(np.float32(1))),
                               1 + 8 * float(np.sum(big, dtype=np.float64)), rtol=1e-5)


def test_eager_and_jitted_scalar_operands_refuse_the_same_huge_integers():
    x = jnp.asarray(np.ones(3, np.float32))
    with pytest.raises((TypeError, OverflowError)):
        x + 2**70
    with pytest.raises((TypeError, OverflowError)):
        nova.jit(lambda x: x + 2**70)(x)
    np.testing.assert_array_equal(np.asarray(x + 2**40), np.float32(2**40 + 1))


def test_eager_grad_of_a_jitted_function_counts_one_lookup_per_call():
    k = nova.jit(lambda w: jnp.sum(jnp.sin(w) * w))
    x = np.array([0.5, -1.0], np.float32)
    for _ in range(3):
        nova.grad(k)(x)
    info = k.cache_info()
    assert (info.misses, info.hits, info.size) == (1, 2, 1), info
