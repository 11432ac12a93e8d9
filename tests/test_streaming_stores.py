"""Non-temporal (streaming) stores in memory-bound loop kernels larger than the last-level cache.

The decision is the schedule's (codegen/cpu/loops.py `uses_nontemporal_stores`); the tests shrink
the host's last-level cache to 64 KiB so small arrays take the streaming path, and check the
chosen schedule, the stores in the generated MLIR and the results.
"""

import dataclasses

import numpy as np
import pytest

import nova
import nova.numpy as jnp
from nova.compiler.backend_cpu import compile_program
from nova.compiler.codegen.cpu import loops, matmul
from nova.compiler.fuse import fuse
from nova.compiler.pipeline import run_passes
from nova.core.interpreter import run_program
from tests.helpers import assert_close


@pytest.fixture
def small_llc(monkeypatch):
    """A host whose last-level cache is 64 KiB."""
    dev = dataclasses.replace(matmul.host_device(), l3=64 * 1024)
    monkeypatch.setattr(matmul, "host_device", lambda: dev)
    return dev


def _layer_norm(x, g, b):
    m = jnp.mean(x, -1, keepdims=True)
    v = jnp.mean((x - m) ** 2, -1, keepdims=True)
    return (x - m) / jnp.sqrt(v + 1e-5) * g + b


def _softmax(x):
    e = jnp.exp(x - jnp.max(x, -1, keepdims=True))
    return e / jnp.sum(e, -1, keepdims=True)


def _gelu(x):
    return 0.5 * x * (1 + jnp.tanh(0.7978845608 * (x + 0.044715 * x ** 3)))


def _scale(x, g, b):
    return x * 2.0 + 1.0


def _kernel(f, *args):
    """The single fused kernel of f, its MLIR text, and the compiled results vs the interpreter."""
    program = run_passes(nova.make_program(f)(*args))
    (kernel,) = fuse(program).kernels
    text = loops.emit_loop_kernel(kernel.name, kernel)
    exe = compile_program(program)
    values = [np.asarray(a) for a in args]
    for got, want in zip(exe(values), run_program(program, values), strict=True):
        assert_close(got, want, rtol=2e-5, atol=2e-5 * max(1.0, float(np.abs(want).max())))
    return kernel, text


@pytest.mark.parametrize("f,streams", [(_layer_norm, True), (_scale, True)],
                         ids=["layer_norm", "affine"])
def test_memory_bound_kernels_over_the_cache_stream_their_output(small_llc, f, streams):
    rng = np.random.default_rng(40)
    x = rng.standard_normal((136, 104)).astype(np.float32)  # 55 KiB in, 55 KiB out
    g, b = rng.standard_normal((2, 104)).astype(np.float32)
    kernel, text = _kernel(f, x, g, b)
    assert kernel.schedule["nontemporal_stores"] is streams
    stores = [line for line in text.splitlines() if "vector.store" in line and "%out0" in line]
    assert stores and all("nontemporal = true" in s and "alignment = 16" in s for s in stores)


@pytest.mark.parametrize("f", [_softmax, _gelu], ids=["softmax", "gelu_tanh"])
def test_kernels_bound_by_exp_or_tanh_keep_normal_stores(small_llc, f):
    """Their weighted intensity (exp and tanh count as their polynomial expansions) is above
    MAX_STREAMING_INTENSITY: measured, streaming made them slower."""
    x = np.random.default_rng(41).standard_normal((136, 104)).astype(np.float32)
    kernel, text = _kernel(f, x)
    assert loops.weighted_intensity(kernel) > loops.MAX_STREAMING_INTENSITY
    assert kernel.schedule["nontemporal_stores"] is False
    assert "nontemporal" not in text


def test_small_kernels_keep_normal_stores(small_llc):
    x = np.random.default_rng(42).standard_normal((24, 104)).astype(np.float32)  # 20 KiB
    g, b = np.ones((2, 104), np.float32)
    kernel, text = _kernel(_layer_norm, x, g, b)
    assert kernel.schedule["nontemporal_stores"] is False and "nontemporal" not in text


def test_the_intensity_weights_transcendentals():
    x = np.ones((64, 96), np.float32)
    (plain,) = fuse(run_passes(nova.make_program(lambda x: x * 3.0 + 1.0)(x))).kernels
    (expo,) = fuse(run_passes(nova.make_program(lambda x: jnp.exp(x) + 1.0)(x))).kernels
    # x * 3 + 1: 2 flops per 8 bytes; exp(x) + 1: (16 + 1) flops per 8 bytes.
    assert loops.weighted_intensity(plain) == pytest.approx(2 / 8)
    assert loops.weighted_intensity(expo) == pytest.approx(17 / 8)


def test_a_donated_input_that_is_not_aligned_for_streaming_stores_is_not_reused(small_llc):
    """Streaming stores fault on an address that is not 16-byte aligned: an intermediate that
    would reuse such a donated buffer (here x * 2 + 1, then read by the matmul) gets a fresh one
    (donation permits reuse, it does not ask it)."""
    rng = np.random.default_rng(43)
    want = rng.standard_normal((136, 104)).astype(np.float32)
    w = rng.standard_normal((104, 8)).astype(np.float32)
    program = run_passes(nova.make_program(lambda x, w: (x * 2.0 + 1.0) @ w)(want, w))
    exe = compile_program(program, donated=(0,))
    assert exe.plan.aliases == {2: 0}  # the elementwise result takes x's buffer
    # written in place over x: plain stores (backend_cpu._temporal_where_in_place)
    assert exe.launches[0].kernel.schedule["nontemporal_stores"] is False
    for offset in (0, 4):  # aligned: reused in place; 4 bytes past: a fresh buffer
        raw = np.empty(want.size + 4, np.float32)
        start = next(k for k in range(4) if raw[k:].ctypes.data % 16 == offset)
        x = raw[start:start + want.size].reshape(want.shape)
        x[...] = want
        (out,) = exe([x, w])
        assert_close(out, (want * 2.0 + 1.0) @ w, rtol=1e-5, atol=1e-4)
        np.testing.assert_array_equal(x == want, offset != 0)  # overwritten only when reused


def test_a_kernel_written_in_place_keeps_plain_stores(small_llc):
    """The same memory-bound elementwise kernel streams its stores into a fresh buffer, but not
    when the memory plan writes it in place over a donated input (whose lines it has just read):
    that launch runs a plain-store variant of its own symbol, with the same results."""
    rng = np.random.default_rng(44)
    x = rng.standard_normal((136, 104)).astype(np.float32)
    w = rng.standard_normal((104, 8)).astype(np.float32)
    f = lambda x, w: (x * 2.0 + 1.0) @ w  # noqa: E731
    fresh = compile_program(run_passes(nova.make_program(f)(x, w)))
    in_place = compile_program(run_passes(nova.make_program(f)(x, w)), donated=(0,))
    assert fresh.plan.aliases == {} and in_place.plan.aliases == {2: 0}
    assert fresh.launches[0].kernel.schedule["nontemporal_stores"] is True
    assert in_place.launches[0].kernel.schedule["nontemporal_stores"] is False
    assert fresh.launches[0].fn is not in_place.launches[0].fn
    want = (x * 2.0 + 1.0) @ w
    assert_close(fresh([x.copy(), w])[0], want, rtol=1e-5, atol=1e-4)
    assert_close(in_place([x.copy(), w])[0], want, rtol=1e-5, atol=1e-4)


def test_lowered_kernels_are_memoized_per_host_device(monkeypatch):
    """The process-wide memo of lowered kernels (backend_cpu._LOWER_MEMO) is keyed by the host
    device too: a kernel lowered for a host with a 64 KiB last-level cache (streaming stores)
    is not reused for the real host (found by review: the schedule leaked between tests)."""
    rng = np.random.default_rng(41)
    x = rng.standard_normal((136, 104)).astype(np.float32)
    program = run_passes(nova.make_program(lambda x: x * 3.0 - 1.0)(x))
    real = matmul.host_device()
    small = dataclasses.replace(real, l3=64 * 1024)
    monkeypatch.setattr(matmul, "host_device", lambda: small)
    exe = compile_program(program)
    assert exe.launches[0].kernel.schedule["nontemporal_stores"] is True
    monkeypatch.setattr(matmul, "host_device", lambda: real)
    exe = compile_program(run_passes(nova.make_program(lambda x: x * 3.0 - 1.0)(x)))
    assert exe.launches[0].kernel.schedule["nontemporal_stores"] is False
    np.testing.assert_allclose(exe([x])[0], x * 3.0 - 1.0, rtol=1e-6)
