"""Control flow on the CUDA target, run through the fake driver (tests/fake_cuda_driver.py,
whose launches run the generated kernels in the SIMT simulator): lax.scan, while_loop and cond
compiled for "cuda:sm_90" agree with the CPU backend, a scan is captured into the executable's
CUDA graph, while and cond (which read device values on the host) are not."""

import nova.numpy as jnp
import numpy as np
import pytest

import nova
from nova import lax
from tests.test_gpu_runtime_fake import fake as _fake_fixture

fake = _fake_fixture  # the fixture, under the name the tests take

S = nova.ShapeDtypeStruct
f32 = np.float32
RNG = np.random.default_rng(3)


def _cuda(f, *args):
    specs = [S(np.shape(a), np.asarray(a).dtype) for a in args]
    return nova.jit(f).lower(*specs, target="cuda:sm_90").compile()


def _close(got, want, tol=2e-5):
    for g, w in zip(nova.tree_util.tree_leaves(got), nova.tree_util.tree_leaves(want),
                    strict=True):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=tol, atol=tol)


def _rnn(w, h, xs):
    def step(h, x):
        h = jnp.tanh(h @ w + x)
        return h, (h.sum(), x * 2.0, h)

    return lax.scan(step, h, xs)


@pytest.mark.parametrize("length", [0, 1, 4])
def test_scan_matches_the_cpu_and_replays_as_a_graph(fake, length):
    w = (RNG.standard_normal((8, 8)) * 0.5).astype(f32)
    h = RNG.standard_normal((2, 8)).astype(f32)
    xs = RNG.standard_normal((length, 2, 8)).astype(f32)
    exe = _cuda(_rnn, w, h, xs)
    want = nova.jit(_rnn)(w, h, xs)
    for _ in range(3):
        _close(exe(w, h, xs), want)
    assert not exe._exe.needs_host
    assert fake.calls.count("cuStreamBeginCapture") == 1  # the third call replays a graph


def test_reverse_scan_with_swapped_and_passed_through_carries(fake):
    def f(a, b, xs):
        def step(c, x):
            a, b, keep = c
            return (b, a + x, keep), a * x

        return lax.scan(step, (a, b, a), xs, reverse=True)

    a, b = np.arange(3, dtype=f32), np.ones(3, f32)
    xs = RNG.standard_normal((5, 3)).astype(f32)
    _close(_cuda(f, a, b, xs)(a, b, xs), nova.jit(f)(a, b, xs))


def test_gradient_through_a_scan_on_the_gpu(fake):
    def loss(w, h, xs):
        hl, (s, _, _) = _rnn(w, h, xs)
        return (hl ** 2).sum() + s.sum()

    w = (RNG.standard_normal((8, 8)) * 0.5).astype(f32)
    h = RNG.standard_normal((2, 8)).astype(f32)
    xs = RNG.standard_normal((3, 2, 8)).astype(f32)
    g = nova.value_and_grad(loss, argnums=(0, 1))
    _close(_cuda(g, w, h, xs)(w, h, xs), nova.jit(g)(w, h, xs), tol=1e-4)


@pytest.mark.parametrize("n", [0, 3])
def test_while_loop_on_the_gpu_does_not_use_graphs(fake, n):
    def f(limit, v):
        return lax.while_loop(lambda c: c[0] < limit,
                              lambda c: (c[0] + 1, c[1] * 0.5 + 1.0, c[1].sum()),
                              (jnp.asarray(0, jnp.int32), v, jnp.asarray(0.0, jnp.float32)))

    limit, v = np.int32(n), np.arange(4, dtype=f32)
    exe = _cuda(f, limit, v)
    for _ in range(3):
        _close(exe(limit, v), nova.jit(f)(limit, v))
    assert exe._exe.needs_host and "cuStreamBeginCapture" not in fake.calls


def test_cond_and_switch_on_the_gpu(fake):
    def f(i, x):
        return lax.switch(i, [lambda x: x * 2.0, lambda x: jnp.sin(x), lambda x: x], x)

    x = RNG.standard_normal(5).astype(f32)
    exe = _cuda(f, np.int32(0), x)
    for i in (-1, 0, 1, 2, 7):
        _close(exe(np.int32(i), x), nova.jit(f)(np.int32(i), x))


def test_nested_scan_on_the_gpu(fake):
    def f(xs):
        def outer(c, row):
            inner, _ = lax.scan(lambda a, r: (a * 0.5 + r, None), c, row)
            return inner, inner.sum()

        return lax.scan(outer, jnp.zeros(2, jnp.float32), xs)

    xs = RNG.standard_normal((3, 4, 2)).astype(f32)
    _close(_cuda(f, xs)(xs), nova.jit(f)(xs))


def test_eager_and_jitted_loops_on_gpu_arrays_stay_on_the_gpu(fake):
    xs = RNG.standard_normal((4, 3)).astype(f32)
    xd = nova.device_put(xs, "cuda")
    f = lambda xs: lax.scan(lambda c, x: (c + x, c * x), jnp.zeros(3, jnp.float32), xs)
    want = f(xs)
    for run in (f, nova.jit(f)):  # an eager scan on GPU values, then under jit
        before = fake.launches
        got = run(xd)
        assert fake.launches >= before + 4  # the body's kernels ran on the (fake) GPU
        leaves = nova.tree_util.tree_leaves(got)
        assert all(type(x) is nova.runtime.devices.GPUArray for x in leaves)
        _close(got, want)


@pytest.mark.parametrize("name", ["scan_rnn_value_and_grad", "while_loop_and_switch"])
def test_the_device_checks_control_flow_cases(fake, name):
    """bench/gpu_cases.py's control-flow checks, as device_check.py runs them (three calls
    against the reference interpreter), here on the fake driver."""
    from bench.gpu_cases import CHECKS, compile_case, gpu_launches, random_args
    from nova.core.interpreter import run_program

    (case,) = [c for c in CHECKS if c.name == name]
    compiled = compile_case(case, "cuda:sm_90")
    assert any(l.loop is not None for l in compiled._exe.launches)
    assert len(gpu_launches(compiled._exe)) > len([l for l in compiled._exe.launches
                                                   if l.ptx is not None])
    args = random_args(case)
    want = run_program(nova.make_program(case.fn)(*case.specs), args)
    for _ in range(3):
        got = nova.tree_util.tree_leaves(compiled(*args))
        for g, w in zip(got, want, strict=True):
            scale = max(float(np.max(np.abs(w))), 1e-30) if np.size(w) else 1.0
            assert float(np.max(np.abs(np.asarray(g) - w), initial=0.0)) <= case.tol * scale
