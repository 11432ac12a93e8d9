"""nova.gpu's runtime logic on the CPU: the CUDA executable, caching allocator, copies, module
loading, kernel parameters and CUDA-graph replay driven through a fake `cuda.bindings.driver`
(tests/fake_cuda_driver.py) whose launches run the generated kernels in the SIMT simulator.

This checks Nova's own bookkeeping (slots, arena offsets, in-place aliases, constant uploads,
parameter packing, error mapping); whether the real driver behaves as the fake does is checked
only on a GPU (tests marked `gpu`, bench/device_check.py).
"""

import importlib
import threading

import numpy as np
import pytest

import nova
import nova.numpy as jnp
from nova import gpu
from nova.compiler import backend_cuda
from nova.compiler.pipeline import run_passes
from nova.core.interpreter import run_program
from nova.nn import functional as F
from tests.fake_cuda_driver import FakeDriver

S = nova.ShapeDtypeStruct
f32 = np.float32


@pytest.fixture
def fake(monkeypatch, tmp_path):
    import nova.gpu.device as dev
    import nova.gpu.driver as drv
    import nova.gpu.executable as exe
    import nova.gpu.memory as mem
    import nova.gpu.stream as st

    fake = FakeDriver(total_memory=64 << 20)
    monkeypatch.setattr(drv, "_driver", fake)
    monkeypatch.setattr(drv, "_initialized", False)
    monkeypatch.setattr(drv, "_init_error", None)
    for mod, name in ((dev, "_props_cache"), (dev, "_contexts"), (mem, "_allocators"),
                      (st, "_default"), (exe, "_modules")):
        monkeypatch.setattr(mod, name, {})
    monkeypatch.setattr(dev, "_tls", threading.local())
    # Eager ops found to have no GPU kernel under an earlier test's patched compiler get tried
    # again (the set is the process's: such a test left later tests computing on the host).
    monkeypatch.setattr(importlib.import_module("nova.jit"), "_HOST_ONLY", set())
    monkeypatch.setenv("NOVA_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(backend_cuda, "_mem", {})
    real = backend_cuda.compile_to_ptx

    def recording(modules, **kw):
        ptx = real(modules, **kw)
        for sym, text in modules.items():  # the fake runs a module's MLIR in the simulator
            fake.register(ptx[sym], text)
        return ptx

    monkeypatch.setattr(backend_cuda, "compile_to_ptx", recording)
    return fake


BIG = np.linspace(-1, 1, 5000, dtype=f32)  # over the inline limit: uploaded once as a constant


def _program(x, w, b):
    h = F.softmax(jnp.tanh(x @ w + b), axis=-1)
    return h * 2.0 + 1.0, jnp.sum(h, axis=0), jnp.asarray(BIG) * 3.0


def test_executable_runs_and_replays_a_graph(fake):
    specs = [S((64, 32), f32), S((32, 128), f32), S((128,), f32)]
    compiled = nova.jit(_program).lower(*specs, target="cuda:sm_90").compile()
    prog = run_passes(nova.make_program(_program)(*specs))
    rng = np.random.default_rng(0)
    for call in range(4):
        args = [rng.standard_normal(s.shape).astype(f32) for s in specs]
        got = compiled(*args)
        want = run_program(prog, args)
        for g, w in zip(got, want, strict=True):
            np.testing.assert_allclose(np.asarray(g), w, rtol=2e-5, atol=2e-6)
        if call == 1:
            assert "cuGraphLaunch" not in fake.calls  # calls 1 and 2 launch one by one
    assert fake.calls.count("cuGraphLaunch") == 2 and fake.calls.count("cuStreamBeginCapture") == 1
    exe = compiled._exe
    kernels = [l for l in exe.launches if l.ptx is not None]
    assert fake.launches == 4 * len(kernels) and len(kernels) >= 3
    assert any(l.host_value is not None for l in exe.launches)  # BIG, uploaded once
    assert fake.calls.count("cuMemcpyHtoDAsync") == 1 + 4 * 3  # the constant, then 3 inputs/call
    stats = gpu.memory_stats()
    assert stats["allocated_bytes"] > 0 and stats["num_ooms"] == 0


def test_allocator_caches_and_reports_out_of_memory(fake):
    a = gpu.DeviceBuffer(32 << 20)
    before = gpu.memory_stats()
    a.free()
    b = gpu.DeviceBuffer(32 << 20)  # the same block back from the cache: no driver call
    assert gpu.memory_stats()["num_cache_hits"] == before["num_cache_hits"] + 1
    assert gpu.memory_stats()["num_driver_allocs"] == before["num_driver_allocs"]
    with pytest.raises(nova.OutOfMemoryError, match=r"requested 41943040 bytes \(40\.0 MiB\); "
                                                      r"allocator: allocated 33554432 B"):
        gpu.DeviceBuffer(40 << 20)
    assert gpu.memory_stats()["num_ooms"] == 1
    b.free()  # cached, not freed: the next request frees the cache and retries
    c = gpu.DeviceBuffer(40 << 20)
    assert gpu.memory_stats()["reserved_bytes"] == 40 << 20
    x = np.arange(1000, dtype=f32)
    gpu.copy_host_to_device(c.ptr, x, gpu.default_stream())
    gpu.copy_device_to_device(c.ptr + 4000, c.ptr, 4000, gpu.default_stream())
    y = gpu.copy_device_to_host(np.empty(2000, f32), c.ptr, gpu.default_stream())
    np.testing.assert_array_equal(y, np.concatenate([x, x]))


def test_reset_peak_memory_stats_restarts_the_peaks_from_now(fake):
    a, b = gpu.DeviceBuffer(8 << 20), gpu.DeviceBuffer(4 << 20)
    b.free()
    assert gpu.memory_stats()["peak_allocated_bytes"] == 12 << 20
    gpu.reset_peak_memory_stats()
    s = gpu.memory_stats()
    assert (s["peak_allocated_bytes"], s["peak_reserved_bytes"]) == (8 << 20, 12 << 20)
    c = gpu.DeviceBuffer(2 << 20)
    assert gpu.memory_stats()["peak_allocated_bytes"] == 10 << 20
    a.free()
    c.free()


def test_properties_modules_and_launch_errors(fake):
    p = gpu.get_device_properties()
    assert (p.name, p.arch, p.sm_count) == ("Fake H200", "sm_90", 132)
    assert p.memory_bandwidth == pytest.approx(4.916736e12)
    with pytest.raises(gpu.CudaInvalidPTXError,
                       match="cuModuleLoadData failed: CUDA_ERROR_INVALID_PTX"):
        gpu.Module("not ptx")
    ptx = ".version 8.0\n.entry k("
    fake.register(ptx, """  gpu.module @m {
    gpu.func @k(%a: memref<64xf32>) kernel {
      %t = gpu.thread_id x
      %v = memref.load %a[%t] : memref<64xf32>
      %w = arith.addf %v, %v : f32
      memref.store %w, %a[%t] : memref<64xf32>
      gpu.return
    }
  }""")
    fn = gpu.Module(ptx).function("k")
    buf = gpu.DeviceBuffer(256)
    gpu.copy_host_to_device(buf.ptr, np.ones(64, f32), gpu.default_stream())
    fn.launch(gpu.LaunchConfig((1, 1, 1), (64, 1, 1)), [buf.ptr], gpu.default_stream())
    out = gpu.copy_device_to_host(np.empty(64, f32), buf.ptr, gpu.default_stream())
    np.testing.assert_array_equal(out, np.full(64, 2.0, f32))
    with pytest.raises(gpu.CudaLaunchError, match="CUDA_ERROR_ILLEGAL_ADDRESS"):
        fn.launch(gpu.LaunchConfig((1, 1, 1), (128, 1, 1)), [buf.ptr], gpu.default_stream())
    with pytest.raises(ValueError, match="LaunchConfig.block must be 3 positive ints"):
        gpu.LaunchConfig((1, 1, 1), (0, 1, 1))


def _mlp_step(w1, b1, w2, b2, g, x, labels):
    """One SGD step of a layer-normed GELU MLP classifier (forward, backward and update)."""

    def loss(params):
        w1, b1, w2, b2, g = params
        h = F.gelu(F.layer_norm(x, g, None) @ w1 + b1, approximate=True)
        return F.cross_entropy(h @ w2 + b2, labels)

    value, grads = nova.value_and_grad(loss)((w1, b1, w2, b2, g))
    return (value,) + tuple(p - 0.1 * d for p, d in zip((w1, b1, w2, b2, g), grads, strict=True))


def test_training_step_matches_reference(fake):
    specs = [S((64, 128), f32), S((128,), f32), S((128, 10), f32), S((10,), f32), S((64,), f32),
             S((32, 64), f32), S((32,), np.int32)]
    compiled = nova.jit(_mlp_step).lower(*specs, target="cuda:sm_90").compile()
    kinds = {l.kernel.kind for l in compiled._exe.launches if l.kernel is not None}
    assert {"loop", "contraction"} <= kinds
    prog = run_passes(nova.make_program(_mlp_step)(*specs))
    rng = np.random.default_rng(3)
    for _ in range(3):  # the third call replays the captured graph
        args = [rng.standard_normal(s.shape).astype(f32) * 0.3 for s in specs[:-1]]
        args.append(rng.integers(0, 10, 32).astype(np.int32))
        args[4] += 1.0  # layer-norm gain around 1
        got = compiled(*args)
        want = run_program(prog, args)
        for g_, w_ in zip(got, want, strict=True):
            np.testing.assert_allclose(np.asarray(g_), w_, rtol=1e-4, atol=1e-5)


def test_graph_capture_failure_leaves_the_stream_usable(fake):
    """An error while capturing ends the capture (no graph) and re-raises; events time work."""
    stream = gpu.Stream()

    def failing():
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        gpu.Graph.capture(stream, failing)
    assert not fake.capturing  # capture ended
    stream.synchronize()
    start = stream.record()
    end = stream.record()
    assert gpu.Event.elapsed_ms(start, end) == 0.0
    graph = gpu.Graph.capture(stream, lambda: None)  # an empty graph replays
    graph.replay()
    assert "cuGraphLaunch" in fake.calls


# --- devices and device-resident arrays -----------------------------------------------------------


def test_devices_and_device_put_on_the_fake_gpu(fake, monkeypatch):
    """nova.devices() lists the GPU (the default backend when one is present), device_put
    copies into GPU memory and back, and a CPU program reads a GPU array through its host
    copy; deleting returns the memory to the caching allocator."""
    monkeypatch.delenv("NOVA_DEVICE", raising=False)
    assert nova.devices() == [nova.Device("cuda", 0)] == nova.devices("cuda")
    assert nova.devices("cpu") == [nova.Device("cpu", 0)]
    assert nova.default_device() == nova.Device("cuda", 0)
    x = np.arange(12, dtype=f32).reshape(3, 4)
    before = gpu.memory_stats()["allocated_bytes"]
    y = nova.device_put(x)  # the default device: the GPU
    assert y.device == nova.Device("cuda", 0) and y.devices() == {nova.Device("cuda", 0)}
    assert (y.shape, y.dtype) == ((3, 4), np.dtype(f32))
    assert gpu.memory_stats()["allocated_bytes"] >= before + x.nbytes
    got = np.asarray(y)
    np.testing.assert_array_equal(got, x)
    assert not got.flags.writeable  # the cached host copy of an immutable array
    assert "device=cuda:0" in repr(y)
    np.testing.assert_array_equal(np.asarray(nova.jit(lambda a: a * 2.0 + 1.0)(y)), x * 2 + 1)
    h = nova.device_put(y, "cpu")
    assert h.device == nova.Device("cpu", 0) and type(h) is nova.Array
    np.testing.assert_array_equal(np.asarray(h), x)
    assert nova.device_put(y, "cuda:0") is y
    tree = nova.device_put({"w": x, "b": [1.0, 2.0]}, "cuda")
    assert tree["w"].device.platform == "cuda" and tree["b"][1].device.platform == "cuda"
    np.testing.assert_array_equal(np.asarray(tree["b"][1]), np.float32(2.0))
    y.delete()
    with pytest.raises(nova.DeletedArrayError):
        np.asarray(y)
    with pytest.raises(ValueError, match="out of range"):
        nova.device_put(x, "cuda:3")
    monkeypatch.setenv("NOVA_DEVICE", "cpu")
    assert nova.default_device() == nova.Device("cpu", 0)
    assert nova.device_put(x).device == nova.Device("cpu", 0)


def test_device_put_without_a_gpu(monkeypatch):
    """Without a GPU the CPU is the default device; asking for the GPU is a clear error."""
    import nova.gpu.driver as drv

    monkeypatch.delenv("NOVA_DEVICE", raising=False)
    monkeypatch.setattr(drv, "is_available", lambda: False)
    assert nova.devices() == [nova.Device("cpu", 0)]
    assert nova.default_device() == nova.Device("cpu", 0)
    x = nova.device_put(np.ones(3, f32))
    assert type(x) is nova.Array and x.device.platform == "cpu"
    with pytest.raises(gpu.GPUUnavailableError, match="no NVIDIA GPU"):
        nova.device_put(np.ones(3, f32), "cuda")
    with pytest.raises(RuntimeError, match="no NVIDIA GPU"):
        nova.devices("cuda")
    with pytest.raises(ValueError, match="expected 'cpu', 'cuda'"):
        nova.device_put(1.0, "tpu:0")
    with pytest.raises(TypeError, match="device must be"):
        nova.device_put(1.0, 3)
    a = nova.numpy.ones(2)
    assert nova.device_put(a, "cpu") is a


def test_attention_runs_on_cuda_with_flash_kernels(fake):
    """A program with causal attention (forward and backward) lowers for CUDA to the flash
    kernels (the forward, dq's zero fill, the backward with dq's atomics) and matches the CPU
    backend, on the first calls and on CUDA-graph replays (the fill runs again each time)."""
    def loss(q, k, v):
        return jnp.sum(F.scaled_dot_product_attention(q, k, v, causal=True) ** 2)

    f = nova.value_and_grad(loss, argnums=(0, 1, 2))
    specs = [S((1, 2, 40, 8), f32)] * 3
    compiled = nova.jit(f).lower(*specs, target="cuda:sm_90").compile()
    assert "flash_attention_bwd" in compiled.as_text()
    kinds = [l.info["kind"] for l in compiled._exe.launches if l.ptx is not None]
    assert kinds.count("attention") == 2
    rng = np.random.default_rng(4)
    args = [rng.standard_normal(s.shape).astype(f32) for s in specs]
    want = nova.tree_util.tree_leaves(nova.jit(f)(*args))
    for _ in range(3):
        got = nova.tree_util.tree_leaves(compiled(*args))
        for g, w in zip(got, want, strict=True):
            np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-4, atol=1e-5)


# --- computation follows data: jit on GPU arguments -----------------------------------------


def _sgd_step(params, x, y):
    """One SGD step of a tanh regression (value, then the updated parameters)."""

    def loss(p):
        w, b = p
        return jnp.mean((jnp.tanh(x @ w) + b - y) ** 2)

    value, (gw, gb) = nova.value_and_grad(loss)(params)
    w, b = params
    return value, (w - 0.5 * gw, b - 0.5 * gb)


def _sgd_data():
    rng = np.random.default_rng(5)
    w = (rng.standard_normal((16, 8)) * 0.3).astype(f32)
    b = np.zeros(8, f32)
    x = rng.standard_normal((32, 16)).astype(f32)
    y = rng.standard_normal((32, 8)).astype(f32)
    return w, b, x, y


def test_jit_follows_gpu_arguments_and_keeps_a_training_loop_on_the_device(fake):
    """Arguments on the GPU compile the step for it; results are GPU Arrays; with the state
    donated the loop neither uploads nor downloads it (the first call adopts its buffers), and
    matches the same loop on the CPU."""
    w, b, x, y = _sgd_data()
    cpu_step = nova.jit(_sgd_step)
    params_cpu, losses_cpu = (w, b), []
    for _ in range(4):
        loss, params_cpu = cpu_step(params_cpu, x, y)
        losses_cpu.append(float(loss))

    step = nova.jit(_sgd_step, donate_argnums=0)
    params = nova.device_put((w, b), "cuda")
    xd, yd = nova.device_put((x, y), "cuda")
    fake.calls.clear()
    losses, first = [], None
    for i in range(4):
        old = params
        loss, params = step(params, xd, yd)
        assert all(p.is_deleted() for p in old)  # donated
        assert loss.device == nova.Device("cuda", 0) and params[0].device.platform == "cuda"
        if i == 0:
            first = loss
            # The donated parameters' buffers became the executable's input buffers, and the
            # (not donated) batch is read where it is: nothing copied in.
            assert "cuMemcpyDtoDAsync" not in fake.calls
        losses.append(float(loss))
    np.testing.assert_allclose(losses, losses_cpu, rtol=2e-5)
    for got, want in zip(params, params_cpu, strict=True):
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=2e-5, atol=1e-6)
    assert "cuMemcpyHtoDAsync" not in fake.calls  # nothing uploaded after device_put
    # Each previous loss was still bound (to `loss`, the first also to `first`) when the next
    # call overwrote the executable's buffer: copied out, 3 times; the state, passed back
    # donated, never (it would add 2 copies per call).
    np.testing.assert_allclose(float(first), losses_cpu[0], rtol=2e-5)
    exe = step._cache[next(iter(step._cache))]._exe
    assert exe.lent_copies == 3
    # Device-to-device copies: those 3, and b of calls 2-4 into its input buffer (its update
    # is written to an output buffer of its own). w is updated in place: w - 0.5 * gw is the
    # epilogue of gw's GEMM, whose output takes the buffer of the donated w read there.
    assert fake.calls.count("cuMemcpyDtoDAsync") == 3 + 1 * 3
    assert exe.graphs_captured == 1  # the batch at the same addresses every call
    assert 2 not in exe.buffers and 3 not in exe.buffers  # the batch's slots hold no buffers
    info = step.cache_info()
    assert (info.misses, info.hits) == (1, 3)
    with pytest.raises(nova.DeletedArrayError, match="argument 'params\\[0\\]'"):
        step(old, xd, yd)


def test_gpu_results_are_copied_before_the_next_call_overwrites_them(fake):
    """A kept result of a non-donating jit keeps its value across later calls (copy-on-write of
    the executable's output buffer); host arguments of the same call are uploaded; a host-only
    call runs on the CPU (a new signature); arguments on two GPUs are an error."""
    f = nova.jit(lambda a, s: (a * s + 1.0, jnp.sum(a)))
    a = nova.device_put(np.arange(6, dtype=f32).reshape(2, 3), "cuda")
    r1 = f(a, np.float32(2.0))  # a host scalar beside a GPU array: uploaded
    r2 = f(a, np.float32(3.0))
    r3 = f(r2[0], np.float32(1.0))  # a lent result as an argument of the same executable
    base = np.arange(6, dtype=f32).reshape(2, 3)
    np.testing.assert_array_equal(np.asarray(r1[0]), base * 2 + 1)
    np.testing.assert_array_equal(np.asarray(r2[0]), base * 3 + 1)
    np.testing.assert_array_equal(np.asarray(r3[0]), base * 3 + 2)
    assert float(r1[1]) == float(r2[1]) == 15.0 and float(r3[1]) == float((base * 3 + 1).sum())
    assert all(r.device.platform == "cuda" for r in (*r1, *r2, *r3))
    host = f(np.asarray(a), np.float32(2.0))
    assert type(host[0]) is nova.Array
    assert f.cache_info().miss_reasons[-1] == "arguments moved: cuda:0 -> cpu:0"
    from nova.core.ir import TensorType
    from nova.runtime.devices import GPUArray

    # An array claiming to live on a second GPU (the fake has one): rejected before any copy.
    other = GPUArray._from_buffer(a._buffer, TensorType((), np.dtype(f32)), nova.Device("cuda", 1))
    with pytest.raises(ValueError, match="argument 'a' is on cuda:0 and argument 's' on cuda:1"):
        f(a, other)


def test_compiled_for_cuda_returns_gpu_arrays(fake):
    """An ahead-of-time compiled CUDA program takes host or GPU arguments and returns GPU
    Arrays; the signature check ignores where the arguments are."""
    compiled = nova.jit(lambda a: jnp.exp(a) * 2.0).lower(S((4, 8), f32),
                                                        target="cuda:sm_90").compile()
    x = np.linspace(-1, 1, 32, dtype=f32).reshape(4, 8)
    out = compiled(x)
    assert out.device == nova.Device("cuda", 0)
    np.testing.assert_allclose(np.asarray(out), np.exp(x) * 2, rtol=1e-6)
    again = compiled(nova.device_put(x, "cuda"))
    np.testing.assert_allclose(np.asarray(again), np.exp(x) * 2, rtol=1e-6)
    with pytest.raises(TypeError, match="different signature"):
        compiled(np.zeros((4, 9), f32))


def test_scalar_results_keep_their_shape_when_passed_back(fake):
    """A scalar result (an optimizer's step count) is a 0-d GPU Array, so the next call with it
    hits the same compiled program (kernels may see it as a 1-element vector)."""
    step = nova.jit(lambda n, x: (n + 1, x * 2.0), donate_argnums=(0, 1))
    n, x = nova.device_put((np.int32(0), np.ones(5, f32)), "cuda")
    for _ in range(3):
        n, x = step(n, x)
        assert n.shape == () and x.shape == (5,)
    assert int(n) == 3 and np.asarray(x).tolist() == [8.0] * 5
    assert step.cache_info().misses == 1
    fake.calls.clear()
    assert x.block_until_ready() is x and fake.calls == ["cuStreamSynchronize"]
    x.delete()
    with pytest.raises(nova.DeletedArrayError, match="block_until_ready"):
        x.block_until_ready()


def _gpu(x):
    return nova.device_put(x, "cuda")


def test_swapped_and_ping_pong_state_reads_its_sources_before_writing(fake):
    """A lent result can show an input buffer (an input returned unchanged, an output updated
    in place over a donated input); passed back where another argument's copy writes that
    buffer first, it is staged through a temporary buffer (found by review: wrong values)."""
    step = nova.jit(lambda a, b: (a * 2.0, b * 3.0), donate_argnums=(0, 1))
    x, y = np.arange(4, dtype=f32), np.arange(4, dtype=f32) + 10
    a, b = step(*_gpu((x, y)))
    a2, b2 = step(b, a)  # swapped
    np.testing.assert_array_equal(np.asarray(a2), y * 3 * 2)
    np.testing.assert_array_equal(np.asarray(b2), x * 2 * 3)
    swap = nova.jit(lambda a, b: (b, a), donate_argnums=(0, 1))
    a, b = swap(*_gpu((np.zeros(3, f32), np.ones(3, f32))))
    a, b = swap(a, b)
    np.testing.assert_array_equal(np.asarray(a), np.zeros(3))
    np.testing.assert_array_equal(np.asarray(b), np.ones(3))
    f = nova.jit(lambda a, b: (a, b + 1.0), donate_argnums=1)
    r = f(_gpu(np.arange(4, dtype=f32)), _gpu(np.zeros(4, f32)))  # r[0] shows input buffer 0
    out = f(_gpu(np.full(4, 100, f32)), r[0])
    np.testing.assert_array_equal(np.asarray(out[1]), np.arange(4) + 1)
    np.testing.assert_array_equal(np.asarray(out[0]), np.full(4, 100))
    # r[0], argument a read in place and returned, is a copy of its own (the executable does
    # not own a's buffer): passed back, nothing needs staging.
    assert f._cache[next(iter(f._cache))]._exe.staged_copies == 0
    assert swap._cache[next(iter(swap._cache))]._exe.staged_copies == 2  # each the other's


@pytest.mark.filterwarnings("ignore:invalid value encountered in log:RuntimeWarning")
def test_a_call_that_raises_after_taking_donated_buffers_deletes_them(fake):
    """debug_nans raising after the kernels ran: the donated argument's buffer is the
    executable's now, so the argument is deleted rather than left showing other values."""
    f = nova.jit(jnp.log, donate_argnums=0)
    x = _gpu(np.array([1.0, -1.0, 2.0, 3.0], f32))
    nova.config.update("debug_nans", True)
    try:
        with pytest.raises(FloatingPointError):
            f(x)
    finally:
        nova.config.update("debug_nans", False)
    assert x.is_deleted()
    y = _gpu(np.ones(2, f32))
    with pytest.raises(ValueError, match="runs on cuda:0"):  # refused before anything is taken
        f._cache[next(iter(f._cache))]._exe.call_on_device([y], frozenset({0}), ordinal=1)
    assert not y.is_deleted() and np.asarray(y).tolist() == [1.0, 1.0]


def test_reading_a_result_waits_for_a_call_on_another_thread(fake):
    """Results read on one thread while other threads call the same function keep their own
    values (the read holds the executable's lock; found by review)."""
    import sys

    f = nova.jit(lambda a, k: a * k)
    x = _gpu(np.arange(64, dtype=f32))
    errors = []

    def work(k):
        try:
            for _ in range(20):
                v = np.asarray(f(x, np.float32(k)))
                if not np.array_equal(v, np.arange(64, dtype=f32) * k):
                    errors.append((k, float(v[1])))
        except Exception as e:  # noqa: BLE001 - a failing thread fails the test
            errors.append(e)

    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        threads = [threading.Thread(target=work, args=(k,)) for k in (2, 3, 4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(old)
    assert not errors


def test_a_small_result_does_not_keep_its_executable_alive(fake):
    """A kept 0-d result holds only its own bytes once its executable is gone (moved out when
    the executable is collected; found by review: it pinned the whole program's memory)."""
    import gc

    x = _gpu(np.ones((64, 64), f32))
    gc.collect()
    base = gpu.memory_stats()["allocated_bytes"]
    loss = nova.jit(lambda a: jnp.sum(jnp.tanh(a @ a) * 2.0))(x)  # the jit function is dropped
    gc.collect()
    assert gpu.memory_stats()["allocated_bytes"] - base == 512  # one block for the 0-d result
    want = float(np.sum(np.tanh(np.ones((64, 64)) @ np.ones((64, 64))) * 2.0))
    np.testing.assert_allclose(float(loss), want, rtol=1e-5)


def test_gpu_arguments_lower_for_their_gpu_by_every_route(fake):
    """jit(f).trace(x).lower() and jit(f).lower(x) both target the arguments' GPU; "cpu"
    targets the host; a matmul whose operands are one array, with an epilogue, compiles."""
    x = _gpu(np.eye(4, dtype=f32) * 2.0)
    f = nova.jit(lambda a: a @ a + 1.0)
    assert f.trace(x).lower().compile()._on_gpu and f.lower(x).compile()._on_gpu

    assert not f.lower(x, target="cpu").compile()._on_gpu
    np.testing.assert_array_equal(np.asarray(f(x)), np.eye(4) * 4 + 1)


def test_jit_on_a_gpu_array_finds_the_kernels_compiled_ahead_of_time(fake, monkeypatch):
    """The program device_check.py jits on a GPU array compiles to the kernels that
    bench/build_gpu_cache.py puts in the carried cache (the GPU machine has no MLIR)."""
    from bench.gpu_cases import DOUBLE, DOUBLE_SHAPE

    nova.jit(DOUBLE).lower(S(DOUBLE_SHAPE, f32), target="cuda:sm_90a").compile()

    def no_compiling(*args, **kwargs):
        raise AssertionError("a kernel was compiled again")

    monkeypatch.setattr(backend_cuda, "compile_to_ptx", no_compiling)
    monkeypatch.setattr(backend_cuda, "_mem", {})  # only the disk cache remains
    x = np.random.default_rng(0).standard_normal(DOUBLE_SHAPE).astype(f32)
    out = nova.jit(DOUBLE)(_gpu(x))
    assert out.device.platform == "cuda"
    np.testing.assert_array_equal(np.asarray(out), x * 2)


def test_eager_ops_on_gpu_arrays_run_on_the_gpu(fake):
    """Eager ops follow their GPU arguments (as JAX's do): results are GPU Arrays with the
    host computation's values."""
    host = np.arange(12, dtype=f32).reshape(3, 4) - 5.0
    x = _gpu(host)
    xh = jnp.asarray(host)
    key = nova.random.key(0)
    cases = {
        "x + 1": lambda a: a + 1, "x * x": lambda a: a * a, "exp": jnp.exp,
        "sum": jnp.sum, "sum axis": lambda a: jnp.sum(a, axis=0), "T": lambda a: a.T,
        "reshape": lambda a: a.reshape(12), "getitem": lambda a: a[1],
        "where": lambda a: jnp.where(a > 0, a, 0.0), "matmul": lambda a: a @ a.T,
        "astype": lambda a: a.astype(np.int32), "cumsum": lambda a: jnp.cumsum(a, axis=1),
        "sort": lambda a: jnp.sort(-a, axis=-1), "argmax": lambda a: jnp.argmax(a, axis=1),
    }
    for name, f in cases.items():
        got, want = f(x), f(xh)
        assert got.device == nova.Device("cuda", 0), name
        assert got.dtype == want.dtype and got.shape == want.shape, name
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6, err_msg=name)
    r = nova.random.normal(_gpu(key), (5,))
    assert r.device.platform == "cuda"
    # The same bits; the normal transform may differ in the last ulp between the two backends.
    np.testing.assert_allclose(np.asarray(r), np.asarray(nova.random.normal(key, (5,))), rtol=1e-6)


def test_eager_op_without_a_gpu_kernel_computes_on_the_host(fake, monkeypatch):
    """A primitive the CUDA backend has no kernel for runs on the host from host copies (once
    found out, without trying again)."""
    tries = []

    def no_gpu_kernel(program, **kwargs):
        tries.append(1)
        raise NotImplementedError("cuda backend: no GPU kernel (test)")

    monkeypatch.setattr(backend_cuda, "compile_program", no_gpu_kernel)
    x = _gpu(np.arange(4, dtype=f32))
    for _ in range(3):
        y = jnp.negative(x)
        assert type(y) is nova.Array
        np.testing.assert_array_equal(np.asarray(y), -np.arange(4))
    assert len(tries) == 1


def test_eager_gpu_ops_keep_no_buffers_and_own_their_results(fake):
    """An eager op's executable reads its arguments where they are and writes results that own
    their memory: nothing stays allocated once the results are dropped, and a kept result
    keeps its value across later calls of the same op."""
    import gc

    x = _gpu(np.arange(1024, dtype=f32))
    gc.collect()
    base = gpu.memory_stats()["allocated_bytes"]
    r1 = x * 2.0  # compiles; the executable is cached
    fake.calls.clear()
    r2 = x * 3.0
    np.testing.assert_array_equal(np.asarray(r1), np.arange(1024) * 2.0)
    np.testing.assert_array_equal(np.asarray(r2), np.arange(1024) * 3.0)
    assert "cuMemcpyDtoDAsync" not in fake.calls  # the argument read in place
    del r1, r2
    gc.collect()
    assert gpu.memory_stats()["allocated_bytes"] == base  # the executable holds nothing


def test_eager_gpu_ops_with_debug_nans_name_the_line(fake):
    x = _gpu(np.array([0.0, 1.0], f32))
    nova.config.update("debug_nans", True)
    try:
        with pytest.raises(FloatingPointError, match="test_gpu_runtime_fake.py"):
            x * float("inf")
    finally:
        nova.config.update("debug_nans", False)


def test_eager_gpu_ops_that_cannot_compile_compute_on_the_host(fake, monkeypatch):
    """A kernel missing from the cache on a machine without MLIR, or a shape the CUDA codegen
    cannot take (an empty reduction), leaves an eager op on the host (found by review: they
    raised CompilerError)."""
    from nova.compiler.bindings import MLIRUnavailableError

    empty = jnp.sum(_gpu(np.zeros((0, 3), f32)), axis=0)
    np.testing.assert_array_equal(np.asarray(empty), np.zeros(3))

    def no_mlir(*args, **kwargs):
        raise MLIRUnavailableError("no MLIR here (test)")

    monkeypatch.setattr(backend_cuda, "compile_to_ptx", no_mlir)
    x = _gpu(np.arange(4, dtype=f32))
    np.testing.assert_array_equal(np.asarray(jnp.tanh(x) * 0.0 - 1.0), [-1.0] * 4)


def test_an_eager_op_on_a_lent_result_does_not_race_its_lender(fake):
    """An eager op reading a jit's lent result first gives it a buffer of its own (under the
    lender's lock), so the lender's next call on another thread cannot change what it reads."""
    f = nova.jit(lambda a: a + 1.0)
    p = f(_gpu(np.zeros(4, f32)))
    q = jnp.negative(p)
    f(_gpu(np.full(4, 100.0, f32)))  # the lender's next call
    np.testing.assert_array_equal(np.asarray(q), [-1.0] * 4)
    np.testing.assert_array_equal(np.asarray(p), [1.0] * 4)
    assert type(p._buffer) is gpu.DeviceBuffer  # its own buffer now


def test_graph_capture_leaves_the_shared_stream_usable(fake, monkeypatch):
    """The third call captures the CUDA graph on a stream of its own: another thread reading a
    result meanwhile (a synchronize of the shared stream) is no error (on the shared stream it
    was CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED; found by a thread test)."""
    f = nova.jit(lambda a: a * 2.0)
    host = np.arange(8, dtype=f32)
    x = _gpu(host)
    f(x)
    f(x)  # two calls launch one by one
    exe = f._cache[next(iter(f._cache))]._exe
    real = exe._launch_all

    def launching(stream=None, addr=None):
        gpu.default_stream().synchronize()  # what another thread's read does meanwhile
        real(stream, addr)

    monkeypatch.setattr(exe, "_launch_all", launching)
    fake.calls.clear()
    out = f(x)
    assert "cuStreamBeginCapture" in fake.calls and "cuGraphLaunch" in fake.calls
    np.testing.assert_array_equal(np.asarray(out), host * 2)


def test_arguments_not_donated_are_read_where_they_are(fake):
    """A GPU argument that is not donated is neither copied nor held twice: the kernels read
    its own buffer (JAX's behaviour). The CUDA graph holds addresses, so there is one graph
    per set of argument addresses (the last GRAPHS_KEPT kept); values stay right as the
    arguments move, and host values in the same slot are uploaded into a buffer made then."""
    from nova.gpu import executable as gexe

    f = nova.jit(lambda w, x: jnp.tanh(x @ w) * 2.0)
    rng = np.random.default_rng(3)
    w_host = rng.standard_normal((64, 32)).astype(f32)
    w = _gpu(w_host)
    before = gpu.memory_stats()["allocated_bytes"]
    xs = [rng.standard_normal((8, 64)).astype(f32) for _ in range(gexe.GRAPHS_KEPT + 3)]
    fake.calls.clear()
    for call, xh in enumerate(xs * 2):
        x = _gpu(xh)  # a new array every call (addresses repeat as the allocator reuses)
        keep = x if call % 3 == 0 else None  # noqa: F841 - some stay alive: new addresses
        out = f(w, x)
        np.testing.assert_allclose(np.asarray(out), np.tanh(xh @ w_host) * 2, rtol=2e-5,
                                   atol=2e-5)
    exe = f._cache[next(iter(f._cache))]._exe
    # Device-to-device copies: only the previous result, still bound to `out` when the next
    # call writes its buffer (copy-on-write); no argument copied in.
    assert fake.calls.count("cuMemcpyDtoDAsync") == exe.lent_copies == len(xs) * 2 - 1
    assert 0 not in exe.buffers and 1 not in exe.buffers
    assert exe.graphs_captured >= 2 and len(exe._graphs) <= gexe.GRAPHS_KEPT
    # Neither w (8 KiB) nor the batch is held a second time: what stays allocated is the
    # output (1 KiB) and the batch `keep` holds (2 KiB); input buffers would add 10 KiB.
    grown = gpu.memory_stats()["allocated_bytes"] - before
    assert grown < w_host.nbytes
    # A host value in the slot of a GPU argument: uploaded into a buffer made for it.
    out = f(w_host, _gpu(xs[0]))
    np.testing.assert_allclose(np.asarray(out), np.tanh(xs[0] @ w_host) * 2, rtol=2e-5,
                               atol=2e-5)


def test_an_argument_returned_unchanged_is_a_copy_of_its_own(fake):
    """An output that is a non-donated argument read in place gets a buffer of its own: the
    argument may be donated or deleted later without changing the result."""
    f = nova.jit(lambda a, b: (a, a + b))
    a, b = _gpu(np.arange(4, dtype=f32)), _gpu(np.ones(4, f32))
    same, total = f(a, b)
    assert same._buffer.ptr != a._buffer.ptr
    a.delete()
    np.testing.assert_array_equal(np.asarray(same), np.arange(4))
    np.testing.assert_array_equal(np.asarray(total), np.arange(4) + 1)
    g = nova.jit(lambda a: a * 0.0, donate_argnums=0)
    zeros = g(same)
    assert same.is_deleted() and np.asarray(zeros).tolist() == [0.0] * 4
    np.testing.assert_array_equal(np.asarray(total), np.arange(4) + 1)


def test_a_lent_result_read_in_another_slot_keeps_its_value(fake):
    """A result lent by the executable, passed back (not donated) in another argument's slot,
    moves to a buffer of its own before the call writes its outputs, then is read in place."""
    f = nova.jit(lambda a, b: (a * 2.0, b + 1.0))
    x, y = _gpu(np.arange(3, dtype=f32)), _gpu(np.zeros(3, f32))
    r = f(x, y)
    r2 = f(r[1], r[0])  # swapped: r[1] (b + 1) in a's slot, r[0] in b's
    np.testing.assert_array_equal(np.asarray(r2[0]), np.ones(3) * 2)
    np.testing.assert_array_equal(np.asarray(r2[1]), np.arange(3) * 2 + 1)
    np.testing.assert_array_equal(np.asarray(r[0]), np.arange(3) * 2)
    np.testing.assert_array_equal(np.asarray(r[1]), np.ones(3))


def test_eager_transforms_of_gpu_arguments_return_gpu_arrays(fake):
    """grad, value_and_grad, vjp and jvp called eagerly on GPU arguments give results on that
    GPU (they came back as host Arrays), with the host's values."""
    w, b, x, y = _sgd_data()
    params, xd, yd = _gpu((w, b)), _gpu(x), _gpu(y)

    def loss(p, x, y):
        return jnp.mean((jnp.tanh(x @ p[0]) + p[1] - y) ** 2)

    value, grads = nova.value_and_grad(loss)(params, xd, yd)
    want_v, want_g = nova.value_and_grad(loss)((w, b), x, y)
    assert value.device == nova.Device("cuda", 0)
    assert all(g.device == nova.Device("cuda", 0) for g in grads)
    np.testing.assert_allclose(float(value), float(want_v), rtol=1e-6)
    for g, wg in zip(grads, want_g, strict=True):
        np.testing.assert_allclose(np.asarray(g), np.asarray(wg), rtol=1e-6)
    g_batch = nova.grad(loss, argnums=1)((w, b), xd, y)  # the differentiated x on the GPU
    assert g_batch.device.platform == "cuda"
    out, vjp_fn = nova.vjp(lambda v: jnp.sin(v) * 2.0, xd)
    (ct,) = vjp_fn(jnp.ones_like(np.asarray(out)))
    assert out.device.platform == "cuda" and ct.device.platform == "cuda"
    np.testing.assert_allclose(np.asarray(ct), 2 * np.cos(x), rtol=1e-6)
    p_out, t_out = nova.jvp(jnp.tanh, (xd,), (np.ones_like(x),))
    assert p_out.device.platform == "cuda" and t_out.device.platform == "cuda"
    np.testing.assert_allclose(np.asarray(t_out), 1 - np.tanh(x) ** 2, rtol=1e-5, atol=1e-6)
    host = nova.grad(loss)((w, b), x, y)  # host arguments: host results
    assert type(host[0]) is nova.Array


class _HostEvaluations:
    """Counts what an eager transform computes where: equations evaluated on the host (their
    primitive names), kernel launches and device-to-host copies on the fake driver."""

    def __init__(self, fake, monkeypatch):
        from nova.core import trace

        self.fake, self.names, self.sizes = fake, [], []
        real = trace._eager_executor

        def recording(prim, values, params, out_types):
            self.names.append(prim.name)
            self.sizes.append(sum(t.size for t in out_types))
            return real(prim, values, params, out_types)

        monkeypatch.setattr(trace, "_eager_executor", recording)

    def __enter__(self):
        self.names.clear()
        self.sizes.clear()
        self.fake.calls.clear()
        self.launches = self.fake.launches
        return self

    def __exit__(self, *exc):
        self.launches = self.fake.launches - self.launches
        self.reads = self.fake.calls.count("cuMemcpyDtoHAsync")
        return False


_HEAVY = {"dot_general", "tanh", "sin", "cos", "integer_pow", "reduce_sum", "exp", "log"}


def _all_on_gpu(tree):
    leaves = nova.tree_util.tree_leaves(tree)
    assert leaves and all(type(x) is nova.runtime.devices.GPUArray for x in leaves), tree
    assert all(x.device == nova.Device("cuda", 0) for x in leaves)


def _loss(p, x, y):
    return jnp.mean((jnp.tanh(x @ p[0]) + p[1] - y) ** 2)


def test_eager_grad_of_gpu_arguments_computes_on_the_gpu(fake, monkeypatch):
    """value_and_grad (with has_aux) on GPU arguments runs each equation on the GPU: kernels
    launch, nothing is read back to the host, the host evaluates only equations of host
    constants (the mean's 1/n), and the values are the host computation's."""
    w, b, x, y = _sgd_data()
    params, xd, yd = _gpu((w, b)), _gpu(x), _gpu(y)

    def loss_aux(p, x, y):
        pred = jnp.tanh(x @ p[0]) + p[1]
        return jnp.mean((pred - y) ** 2), {"pred": pred, "n": 3}

    count = _HostEvaluations(fake, monkeypatch)
    with count:
        (value, aux), grads = nova.value_and_grad(loss_aux, has_aux=True)(params, xd, yd)
    assert count.reads == 0 and count.launches >= 10
    assert not _HEAVY & set(count.names), count.names
    _all_on_gpu((value, aux["pred"], grads))
    assert aux["n"] == 3
    (want_v, want_aux), want_g = nova.value_and_grad(loss_aux, has_aux=True)((w, b), x, y)
    np.testing.assert_allclose(float(value), float(want_v), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(aux["pred"]), np.asarray(want_aux["pred"]), rtol=1e-6)
    for g, wg in zip(grads, want_g, strict=True):
        np.testing.assert_allclose(np.asarray(g), np.asarray(wg), rtol=1e-6, atol=1e-7)
    with count:
        host = nova.grad(_loss)((w, b), x, y)  # host arguments: the host, as before
    assert count.launches == 0 and "dot_general" in count.names
    assert type(host[0]) is nova.Array


def test_eager_vjp_and_jvp_of_gpu_arguments_compute_on_the_gpu(fake, monkeypatch):
    """vjp (a GPU cotangent, and a host one uploaded) and jvp (host and GPU tangents) run on
    the GPU and return GPU Arrays of their own (an output that is the argument is a copy)."""
    x = np.linspace(-2, 2, 24, dtype=f32).reshape(4, 6)
    xd = _gpu(x)
    count = _HostEvaluations(fake, monkeypatch)
    with count:
        out, vjp_fn = nova.vjp(lambda v: jnp.sin(v) * v, xd)
        (ct,) = vjp_fn(_gpu(np.full_like(x, 2.0)))
        (ct_host,) = vjp_fn(np.ones_like(x))
    assert count.reads == 0 and count.launches >= 4 and not _HEAVY & set(count.names)
    _all_on_gpu((out, ct, ct_host))
    np.testing.assert_allclose(np.asarray(out), np.sin(x) * x, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(ct), 2 * (np.cos(x) * x + np.sin(x)), rtol=1e-5,
                               atol=1e-6)
    np.testing.assert_allclose(np.asarray(ct_host), np.cos(x) * x + np.sin(x), rtol=1e-5,
                               atol=1e-6)
    with count:
        p_out, t_out = nova.jvp(lambda v: jnp.tanh(v) * 3.0, (xd,), (np.ones_like(x),))
        _, t_gpu = nova.jvp(lambda v: jnp.tanh(v) * 3.0, (xd,), (_gpu(np.full_like(x, 0.5)),))
    assert count.reads == 0 and count.launches >= 4 and not _HEAVY & set(count.names)
    _all_on_gpu((p_out, t_out, t_gpu))
    np.testing.assert_allclose(np.asarray(p_out), np.tanh(x) * 3, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(t_out), 3 * (1 - np.tanh(x) ** 2), rtol=1e-5,
                               atol=1e-6)
    np.testing.assert_allclose(np.asarray(t_gpu), 1.5 * (1 - np.tanh(x) ** 2), rtol=1e-5,
                               atol=1e-6)
    same, _ = nova.vjp(lambda v: v, xd)
    _all_on_gpu(same)
    assert same is not xd and same._buffer.ptr != xd._buffer.ptr
    xd.delete()
    np.testing.assert_array_equal(np.asarray(same), x)


def test_eager_grad_of_grad_and_control_flow_on_gpu_values(fake, monkeypatch):
    """grad of grad records both backwards into the one GPU trace; Python control flow on a
    value reads that value back (one device-to-host copy, as in JAX) and nothing else."""
    x = np.array([0.3, -1.2, 2.0, 0.7], f32)
    xd = _gpu(x)

    def f(v):
        return jnp.sum(jnp.sin(v) * v)

    gg = nova.grad(lambda v: jnp.sum(nova.grad(f)(v)))
    count = _HostEvaluations(fake, monkeypatch)
    with count:
        got = gg(xd)
    assert count.reads == 0 and count.launches >= 6 and not _HEAVY & set(count.names)
    _all_on_gpu(got)
    # d/dx (cos x * x + sin x) = 2 cos x - x sin x
    np.testing.assert_allclose(np.asarray(got), 2 * np.cos(x) - x * np.sin(x), rtol=1e-5,
                               atol=1e-6)

    def branchy(v):
        s = jnp.sum(v * v)
        if s > 1.0:  # a concrete value on the host: one copy back
            return jnp.sum(jnp.sin(v)) * s
        return jnp.sum(jnp.cos(v))

    for scale, want in ((1.0, lambda v: np.cos(v) * (v * v).sum() + np.sin(v).sum() * 2 * v),
                        (0.1, lambda v: -np.sin(v))):
        with count:
            g = nova.grad(branchy)(_gpu(x * scale))
        assert count.reads == 1 and not _HEAVY & set(count.names)
        _all_on_gpu(g)
        np.testing.assert_allclose(np.asarray(g), want(x * scale), rtol=1e-5, atol=1e-6)


def test_eager_grad_mixing_host_and_gpu_arguments_follows_the_gpu(fake, monkeypatch):
    """argnums may select host arguments and GPU ones: host values are uploaded when combined
    with GPU values (once each), everything computes on the GPU and the gradients are GPU
    Arrays. A GPU Array closed over moves a transform of host arguments onto its GPU."""
    w, b, x, y = _sgd_data()
    count = _HostEvaluations(fake, monkeypatch)
    want = nova.grad(_loss, argnums=(0, 1))((w, b), x, y)
    for args in (((w, b), _gpu(x), y), (_gpu((w, b)), x, _gpu(y))):
        with count:
            got = nova.grad(_loss, argnums=(0, 1))(*args)
        assert count.reads == 0 and not _HEAVY & set(count.names), count.names
        _all_on_gpu(got)
        for g, wg in zip(nova.tree_util.tree_leaves(got), nova.tree_util.tree_leaves(want),
                         strict=True):
            np.testing.assert_allclose(np.asarray(g), np.asarray(wg), rtol=1e-6, atol=1e-7)
    # A GPU Array closed over: the host argument is uploaded once, and the seed's broadcast
    # to the gradient's shape (over the host result limit) is made on the GPU, not uploaded.
    rng = np.random.default_rng(1)
    x, w = rng.standard_normal((96, 64)).astype(f32), rng.standard_normal((64, 64)).astype(f32)
    wd = _gpu(w * 0.1)
    with count:
        g = nova.grad(lambda x: jnp.sum(jnp.tanh(x @ wd)))(x)
    assert count.reads == 0 and not _HEAVY & set(count.names)
    assert max(count.sizes) <= 4096, list(zip(count.names, count.sizes))
    # uploads: x, the seed 1.0 and the 0 its zero-cotangent mask compares with
    assert count.fake.calls.count("cuMemcpyHtoDAsync") == 3
    _all_on_gpu(g)
    np.testing.assert_allclose(np.asarray(g), (1 - np.tanh(x @ w * 0.1) ** 2) @ w.T * 0.1,
                               rtol=1e-5, atol=1e-6)


def test_eager_grad_without_a_gpu_kernel_computes_that_op_on_the_host(fake, monkeypatch):
    """A primitive with no GPU kernel for its arguments computes on the host from host copies
    inside a GPU transform too (remembered per signature, as for eager ops); the others stay
    on the GPU, and the results are GPU Arrays with the host's values."""
    # (no executable of an earlier test's eager tanh: this one must meet the patched compiler)
    monkeypatch.setattr(importlib.import_module("nova.jit"), "_DEVICE_EAGER", {})
    real = backend_cuda.compile_program
    tries = []

    def no_tanh_kernel(program, **kwargs):
        if any(e.prim.name == "tanh" for e in program.eqns):
            tries.append(1)
            raise NotImplementedError("cuda backend: no GPU kernel for tanh (test)")
        return real(program, **kwargs)

    monkeypatch.setattr(backend_cuda, "compile_program", no_tanh_kernel)
    w, b, x, y = _sgd_data()
    want = nova.grad(_loss)((w, b), x, y)
    count = _HostEvaluations(fake, monkeypatch)
    for _ in range(2):
        with count:
            got = nova.grad(_loss)(_gpu((w, b)), _gpu(x), _gpu(y))
        assert count.names.count("tanh") == 1 and "dot_general" not in count.names
        assert count.reads == 1  # the operand of tanh (x @ w)
        _all_on_gpu(got)
        for g, wg in zip(got, want, strict=True):
            np.testing.assert_allclose(np.asarray(g), np.asarray(wg), rtol=1e-6, atol=1e-7)
    assert len(tries) == 1


def test_eager_grad_of_gpu_arguments_with_debug_nans_names_the_line(fake):
    """With debug_nans a GPU transform computes on the host (as eager GPU ops do), so the first
    NaN is caught at its equation and the user's line is named."""
    xd = _gpu(np.array([1.0, -1.0], f32))
    nova.config.update("debug_nans", True)
    try:
        with pytest.raises(FloatingPointError, match=r"nova\.log.*test_gpu_runtime_fake\.py"):
            nova.grad(lambda v: jnp.sum(jnp.log(v)))(xd)
    finally:
        nova.config.update("debug_nans", False)


def test_reductions_over_an_empty_axis_run_on_the_gpu(fake):
    """sum / prod / max / min over an empty axis are their identities, computed on the GPU (the
    CUDA codegen could not compile them: a jit on GPU arrays raised CompilerError)."""
    x = np.zeros((4, 0), f32)
    xd = _gpu(x)
    got = nova.jit(lambda a: (jnp.sum(a, axis=1), jnp.prod(a, axis=1), jnp.max(a, axis=1,
                                                                                initial=-2.0),
                              jnp.min(a, axis=1, initial=3.0)))(xd)
    assert all(g.device.platform == "cuda" for g in got)
    for g, want in zip(got, (np.sum(x, 1), np.prod(x, 1), np.max(x, 1, initial=-2.0),
                             np.min(x, 1, initial=3.0)), strict=True):
        np.testing.assert_array_equal(np.asarray(g), want)
    assert np.asarray(nova.jit(lambda a: jnp.sum(a))(_gpu(np.zeros((0, 3), np.int32)))) == 0


def test_a_batch_beyond_grid_z_folds_into_grid_x(fake, monkeypatch):
    """A batched matmul whose batch exceeds CUDA's grid-z limit (65,535) runs its batch along
    grid x (it raised CompilerError). The limit is lowered here so the simulator stays small;
    a real 70,000-batch program is checked to compile."""
    from nova.compiler.codegen.cuda import matmul as cm

    big = nova.jit(lambda a, b: a @ b).lower(S((70000, 4, 8), f32), S((70000, 8, 4), f32),
                                             target="cuda:sm_90").compile()
    assert max(big._exe.launches[0].config.grid[1:]) <= 65535
    monkeypatch.setattr(cm, "MAX_GRID_Z", 2)
    rng = np.random.default_rng(2)
    a = rng.standard_normal((5, 70, 33)).astype(f32)
    b = rng.standard_normal((5, 33, 66)).astype(f32)
    f = nova.jit(lambda x, y: x @ y + 1.0)
    out = f(_gpu(a), _gpu(b))
    (launch,) = [l for l in f._cache[next(iter(f._cache))]._exe.launches if l.ptx is not None]
    assert launch.config.grid[2] == 1 and launch.config.grid[0] % 5 == 0  # folded
    np.testing.assert_allclose(np.asarray(out), a @ b + 1.0, rtol=2e-2, atol=2e-2)


def test_a_result_passed_donated_and_not_donated_is_read_before_it_is_overwritten(fake):
    """r in a donated slot (already the executable's buffer, updated in place) and the same r
    in a slot read in place: the in-place read is staged first (found by review: the
    kernel writing a * 2 over the buffer ran before the flip read it)."""
    f = nova.jit(lambda a, b: (a * 2.0, jnp.flip(b)), donate_argnums=0)
    x = _gpu(np.arange(4, dtype=f32))
    r, _ = f(x, _gpu(np.zeros(4, f32)))
    doubled, flipped = f(r, r)
    np.testing.assert_array_equal(np.asarray(flipped), [6.0, 4.0, 2.0, 0.0])
    np.testing.assert_array_equal(np.asarray(doubled), [0.0, 4.0, 8.0, 12.0])


def test_contractions_over_an_empty_axis_bf16_einsum_and_simulated_remainders(fake):
    """Found by the CUDA fuzzing review: a matmul with k = 0 did not parse (now zeros at the
    Program level, as on the CPU); a bfloat16 contraction that is no GEMM raised
    NotImplementedError (its loop kernel was refused by a dtype-kind test); float remainder
    and boolean floor division could not be simulated."""
    import ml_dtypes

    for dt in (f32, np.float16):
        out = nova.jit(lambda a, b: a @ b)(_gpu(np.zeros((3, 0), dt)), _gpu(np.zeros((0, 4), dt)))
        assert out.device.platform == "cuda" and np.asarray(out).tolist() == [[0.0] * 4] * 3
    bf = ml_dtypes.bfloat16
    a = np.arange(30).reshape(2, 3, 5).astype(bf)
    b = np.arange(40).reshape(5, 2, 4).astype(bf)
    got = nova.jit(lambda a, b: jnp.einsum("bij,jbk->bik", a, b))(_gpu(a), _gpu(b))
    want = np.einsum("bij,jbk->bik", a.astype(f32), b.astype(f32))
    np.testing.assert_allclose(np.asarray(got).astype(f32), want, rtol=1e-2)
    x = np.array([5.5, -5.5, 7.0, 0.25], f32)
    got = nova.jit(lambda x: jnp.remainder(x, 2.0))(_gpu(x))
    np.testing.assert_array_equal(np.asarray(got), np.remainder(x, 2.0))
    p = np.array([True, False, True])
    got = nova.jit(lambda p, q: jnp.floor_divide(p, q))(_gpu(p), _gpu(np.array([True] * 3)))
    np.testing.assert_array_equal(np.asarray(got), np.floor_divide(p, np.array([True] * 3)))


def test_arguments_cycling_through_many_addresses_stop_capturing_graphs(fake):
    """More rotating argument addresses than graphs kept: after GRAPHS_KEPT misses in a row
    the calls launch their kernels directly instead of capturing a graph each (found by
    review: 19 captures in 21 calls); an address set used twice in a row gets a graph again."""
    from nova.gpu import executable as gexe

    f = nova.jit(lambda x: jnp.tanh(x) * 2.0)
    host = [np.full(16, i, f32) for i in range(gexe.GRAPHS_KEPT + 3)]
    batches = [_gpu(h) for h in host]
    for call in range(3 * len(batches)):
        i = call % len(batches)
        np.testing.assert_allclose(np.asarray(f(batches[i])), np.tanh(host[i]) * 2, rtol=1e-6)
    exe = f._cache[next(iter(f._cache))]._exe
    assert exe.graphs_captured <= gexe.GRAPHS_KEPT + 1
    before = exe.graphs_captured
    for _ in range(3):
        np.testing.assert_allclose(np.asarray(f(batches[0])), np.tanh(host[0]) * 2, rtol=1e-6)
    assert exe.graphs_captured <= before + 1 and "cuGraphLaunch" in fake.calls


def test_a_lent_output_passed_donated_and_not_donated_is_staged(fake):
    """A result lent from the executable's own output memory, passed donated in one slot and
    read in place in another, is staged before the kernels overwrite that memory (found by
    review); after cycling through many addresses, two batches used in turn get graphs."""
    f = nova.jit(lambda a, b: (a * 2.0, a + 1.0, jnp.flip(b) * 3.0), donate_argnums=0)
    r, _, _ = f(_gpu(np.arange(8, dtype=f32)), _gpu(np.arange(8, dtype=f32) * 10))
    hr = np.asarray(r).copy()
    d, p, fl = f(r, r)
    np.testing.assert_array_equal(np.asarray(fl), np.flip(hr) * 3)
    np.testing.assert_array_equal(np.asarray(d), hr * 2)
    from nova.gpu import executable as gexe

    g = nova.jit(lambda x: x + 1.0)
    batches = [_gpu(np.full(4, i, f32)) for i in range(gexe.GRAPHS_KEPT + 3)]
    for _ in range(2):
        for b in batches:
            g(b)
    fake.calls.clear()
    for i in range(8):
        assert np.asarray(g(batches[i % 2])).tolist() == [float(i % 2) + 1.0] * 4
    assert fake.calls.count("cuGraphLaunch") >= 5


def test_a_gemm_with_dynamic_shared_memory_opts_in_once(fake):
    """A TF32 GEMM whose cp.async ring needs more than 48 KiB takes dynamic shared memory: the
    executable opts its function in once (cuFuncSetAttribute, as the driver requires before
    such a launch), every launch passes the bytes, and the result is the product."""
    nova.config.update("matmul_precision", "tf32")
    try:
        f = nova.jit(lambda a, b: a @ b)
        rng = np.random.default_rng(0)
        a = rng.standard_normal((64, 96)).astype(f32)
        b = rng.standard_normal((96, 128)).astype(f32)
        first = f(nova.device_put(a, "cuda"), nova.device_put(b, "cuda"))
        again = f(nova.device_put(b.T.copy(), "cuda"), nova.device_put(a.T.copy(), "cuda"))
    finally:
        nova.config.update("matmul_precision", "highest")
    opted = list(fake.dynamic_optin.values())
    assert opted and all(v > 48 * 1024 for v in opted), opted
    assert fake.calls.count("cuFuncSetAttribute") == len(opted)  # once per function
    want = a.astype(np.float64) @ b
    np.testing.assert_allclose(np.asarray(first), want, atol=2e-3 * np.abs(want).max())
    want2 = b.T.astype(np.float64) @ a.T
    np.testing.assert_allclose(np.asarray(again), want2, atol=2e-3 * np.abs(want2).max())
    # What the device check reports of such a kernel (bench/gpu_cases.py kernel_facts).
    from bench.gpu_cases import kernel_facts

    exe = nova.jit(lambda a, b: a @ b).lower(S(a.shape, f32), S(b.shape, f32),
                                             target="cuda:sm_90").compile()._exe
    exe._ensure_ready(None)
    (facts,) = kernel_facts(exe)
    assert facts["gpu_schedule"] == "simt" and facts["dynamic_shared_bytes"] == 0
    assert facts["grid"] == [2, 1, 1] and facts["num_regs"] == 0  # the fake reports 0


def test_nova_cuda_arch_retargets_a_jitted_function(fake, monkeypatch):
    """The compile target of GPU arguments (sm_90a on the fake H200, NOVA_CUDA_ARCH=sm_90 for
    the portable kernels) is part of jit's signature: changing it recompiles, with the reason
    named, and the two executables run wgmma and mma.sync GEMMs with the same results."""
    monkeypatch.delenv("NOVA_CUDA_ARCH", raising=False)
    rng = np.random.default_rng(3)
    a, b = (rng.standard_normal((64, 64)).astype(f32) for _ in range(2))
    f = nova.jit(lambda a, b: a @ b)
    nova.config.update("matmul_precision", "tf32")
    try:
        first = np.asarray(f(_gpu(a), _gpu(b)))
        targets = [f.lower(_gpu(a), _gpu(b)).compile()._exe.target]
        monkeypatch.setenv("NOVA_CUDA_ARCH", "sm_90")
        second = np.asarray(f(_gpu(a), _gpu(b)))
    finally:
        nova.config.update("matmul_precision", "highest")
    info = f.cache_info()
    assert info.misses == 2 and "NOVA_CUDA_ARCH" in info.miss_reasons[-1]
    targets.append(f.lower(_gpu(a), _gpu(b)).compile()._exe.target)
    assert targets == ["cuda:sm_90a", "cuda:sm_90"]
    np.testing.assert_allclose(first, second, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(first, a.astype(np.float64) @ b, rtol=0, atol=2e-2)
