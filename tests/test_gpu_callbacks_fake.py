"""Host callbacks on the CUDA target, run through the fake driver (tests/fake_cuda_driver.py,
whose launches run the generated kernels in the SIMT simulator): debug.print, pure_callback
and io_callback compiled for "cuda:sm_90" give the CPU backend's results and printed output,
in the same order, between GPU kernels and inside scan / while / cond bodies (once per
iteration); an executable holding one is never captured into a CUDA graph (nova/gpu/host_call.py);
a callback's exception propagates as on the CPU."""

import nova.numpy as jnp
import numpy as np
import pytest

import nova
from nova import lax
from nova.gpu.host_call import HostCall
from tests.test_gpu_runtime_fake import fake as _fake_fixture

fake = _fake_fixture  # the fixture, under the name the tests take

S = nova.ShapeDtypeStruct
f32 = np.float32
RNG = np.random.default_rng(7)


def _cuda(f, *args):
    specs = [S(np.shape(a), np.asarray(a).dtype) for a in args]
    return nova.jit(f).lower(*specs, target="cuda:sm_90").compile()


def _close(got, want, tol=2e-5):
    got, want = nova.tree_util.tree_leaves(got), nova.tree_util.tree_leaves(want)
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=tol, atol=tol)


def _same_as_cpu(capsys, f, *args, calls=3):
    """Runs f compiled for the GPU and for the CPU `calls` times each; asserts equal results
    and equal printed output. Returns (the CUDA executable, the printed text of one run)."""
    exe = _cuda(f, *args)
    capsys.readouterr()
    got = [exe(*args) for _ in range(calls)]
    printed = capsys.readouterr().out
    want = [nova.jit(f)(*args) for _ in range(calls)]
    assert printed == capsys.readouterr().out
    for g, w in zip(got, want, strict=True):
        _close(g, w)
    return exe, printed[: len(printed) // calls]


def _host_calls(exe) -> list:
    return [l for l in exe._exe.launches if l.host_call is not None]


def test_callbacks_between_gpu_kernels_match_the_cpu(fake, capsys):
    driver_calls_seen = []

    def host_cos(a):
        driver_calls_seen.append(fake.calls[-2:])  # (on the CPU run: whatever came last)
        return np.cos(a) - 1.0

    def f(x):
        y = jnp.sin(x) * 2.0  # a GPU kernel before
        nova.debug.print("y={y} first={f}", y=y, f=y[0])
        z = nova.pure_callback(host_cos, S(x.shape, x.dtype), y)
        return jnp.tanh(z) * 3.0 + y  # a GPU kernel after, reading both

    x = RNG.standard_normal(6).astype(f32)
    before = fake.launches
    exe, printed = _same_as_cpu(capsys, f, x)
    y = np.sin(x) * np.float32(2.0)
    assert printed.startswith("y=[") and printed.count("\n") == 1
    np.testing.assert_allclose(np.asarray(exe(x)), np.tanh(np.cos(y) - 1) * 3 + y, rtol=1e-5)
    assert {l.info["kind"] for l in _host_calls(exe)} == {"host:io_callback",
                                                            "host:pure_callback"}
    assert fake.launches >= before + 3 * 2  # kernels ran on the (fake) GPU around the calls
    # The operands were copied from the device and the stream synchronized before the call.
    assert driver_calls_seen[0] == ["cuMemcpyDtoHAsync", "cuStreamSynchronize"]
    assert exe._exe.needs_host and not exe._exe.use_graph
    assert "cuStreamBeginCapture" not in fake.calls and exe._exe.graphs_captured == 0


def test_io_callbacks_keep_program_order_and_their_results_feed_kernels(fake):
    def run(target_cuda):
        log = []

        def record(tag):
            def cb(v):
                log.append((tag, np.asarray(v).copy()))
                return (v * 10.0).astype(np.float32)
            return cb

        def f(x):
            a = nova.experimental.io_callback(record("a"), S(x.shape, x.dtype), x + 1.0)
            b = nova.experimental.io_callback(record("b"), S(x.shape, x.dtype), a * 2.0)
            nova.debug.callback(lambda v: log.append(("c", np.asarray(v).copy())), 7.0)
            return b - a

        x = np.arange(4, dtype=f32)
        fn = _cuda(f, x) if target_cuda else nova.jit(f)
        outs = [fn(x) for _ in range(2)]
        return outs, log

    (gpu, log_gpu), (cpu, log_cpu) = run(True), run(False)
    for g, c in zip(gpu, cpu, strict=True):
        _close(g, c)
    assert [t for t, _ in log_gpu] == ["a", "b", "c"] * 2 == [t for t, _ in log_cpu]
    for (_, g), (_, c) in zip(log_gpu, log_cpu, strict=True):
        np.testing.assert_array_equal(g, c)


def test_print_inside_a_scan_body_runs_once_per_iteration(fake, capsys):
    def f(h, xs):
        def step(h, x):
            h = jnp.tanh(h * 0.5 + x)  # computed by the body's GPU kernel
            nova.debug.print("h={}", h)
            g = nova.pure_callback(lambda a: a[::-1].copy(), S(h.shape, h.dtype), h)
            return h + g * 0.25, g.sum()

        return lax.scan(step, h, xs)

    h = RNG.standard_normal(3).astype(f32)
    xs = RNG.standard_normal((5, 3)).astype(f32)
    exe, printed = _same_as_cpu(capsys, f, h, xs)
    assert printed.count("h=") == 5
    (loop,) = [l.loop for l in exe._exe.launches if l.loop is not None]
    assert any(isinstance(l.host_call, HostCall) for l in loop.regions["body"].launches)
    assert loop.needs_host and exe._exe.needs_host
    assert "cuStreamBeginCapture" not in fake.calls


def test_callbacks_in_while_and_cond_on_the_gpu(fake, capsys):
    def f(n, v):
        def body(c):
            i, v = c
            nova.debug.print("trip {} {}", i, v.sum())
            return i + 1, v * 1.5

        i, v = lax.while_loop(lambda c: c[0] < n, body, (jnp.asarray(0, jnp.int32), v))
        return lax.cond(i > 2, lambda v: (nova.debug.print("big"), v + 1.0)[1],
                        lambda v: (nova.debug.print("small"), v - 1.0)[1], v)

    v = np.arange(3, dtype=f32)
    for n, last in ((4, "big"), (1, "small")):
        _, printed = _same_as_cpu(capsys, f, np.int32(n), v, calls=2)
        assert printed.count("trip") == n and printed.endswith(last + "\n")


def test_print_under_value_and_grad_on_the_gpu_prints_once(fake, capsys):
    def loss(w, x):
        h = jnp.tanh(x @ w)
        nova.debug.print("loss {}", (h ** 2).sum())
        return (h ** 2).sum()

    w = (RNG.standard_normal((4, 3)) * 0.5).astype(f32)
    x = RNG.standard_normal((2, 4)).astype(f32)
    g = nova.value_and_grad(loss)
    exe = _cuda(g, w, x)
    capsys.readouterr()
    got = exe(w, x)
    printed = capsys.readouterr().out
    want = nova.jit(g)(w, x)
    assert printed == capsys.readouterr().out and printed.count("loss") == 1
    _close(got, want, tol=1e-4)


def test_a_callback_of_constants_runs_on_every_call_with_read_only_operands(fake, capsys):
    seen = []

    def f(x):
        nova.debug.print("const {}", 3.0)
        nova.debug.callback(seen.append, x * 2.0)
        return x + 1.0

    exe = _cuda(f, np.ones(2, f32))
    assert capsys.readouterr().out == ""  # nothing runs at compile time
    exe(np.ones(2, f32))
    exe(np.full(2, 4.0, f32))
    assert capsys.readouterr().out == "const 3.0\nconst 3.0\n"
    np.testing.assert_array_equal(np.stack(seen), [[2.0, 2.0], [8.0, 8.0]])
    assert all(type(a) is np.ndarray and not a.flags.writeable for a in seen)


def test_an_exception_in_a_callback_propagates_as_on_the_cpu(fake):
    def boom(a):
        if a[0] > 0:
            raise ZeroDivisionError(f"callback saw {a[0]:.1f}")
        return a

    f = lambda x: nova.pure_callback(boom, S(x.shape, x.dtype), jnp.exp(x) - 1.0) * 2.0
    good, bad = np.zeros(3, f32), np.full(3, np.log(3.0), f32)
    exe = _cuda(f, good)
    for run in (exe, nova.jit(f)):
        with pytest.raises(ZeroDivisionError, match="callback saw 2.0"):
            run(bad)
        _close(run(good), np.zeros(3, f32))  # the executable still runs afterwards
    scribble = lambda x: nova.pure_callback(lambda a: a.__setitem__(0, 1.0) or a,
                                            S((3,), f32), x)
    with pytest.raises(ValueError, match="read-only"):
        _cuda(scribble, good)(good)


def test_callbacks_on_gpu_arrays_eager_and_jitted(fake, capsys):
    x = RNG.standard_normal(4).astype(f32)
    xd = nova.device_put(x, "cuda")

    def f(x):
        nova.debug.print("x={}", x * 2.0)
        return nova.pure_callback(np.negative, S(x.shape, x.dtype), x) + 1.0

    capsys.readouterr()
    for run in (f, nova.jit(f)):
        out = run(xd)
        assert type(out) is nova.runtime.devices.GPUArray
        _close(out, 1.0 - x)
    assert capsys.readouterr().out == f"x={x * 2.0}\n" * 2
