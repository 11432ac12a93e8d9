"""Convolution, pooling, dynamic slicing and checkpointing compiled for "cuda:sm_90" and run
through the fake driver (kernels in the SIMT simulator): they are compositions of primitives
with GPU kernels, so they agree with the CPU backend."""

import numpy as np

import nova
import nova.numpy as jnp
from nova import lax
from tests.test_gpu_runtime_fake import fake as _fake_fixture

fake = _fake_fixture  # the fixture, under the name the tests take
S = nova.ShapeDtypeStruct
RNG = np.random.default_rng(8)


def test_conv_pool_and_dynamic_slice_on_cuda(fake):
    x = RNG.standard_normal((1, 2, 5, 4)).astype(np.float32)
    w = RNG.standard_normal((3, 2, 3, 3)).astype(np.float32)

    def f(x, w, i):
        y = lax.conv_general_dilated(x, w, (1, 1), "SAME")
        p = lax.reduce_window(y, -np.inf, lax.max, (1, 1, 2, 2), (1, 1, 2, 2))
        return jnp.sum(lax.dynamic_slice(p, (0, i, 0, 0), (1, 2, 2, 2)) ** 2)

    g = nova.value_and_grad(nova.checkpoint(f), argnums=(0, 1))
    i = np.int32(1)
    exe = nova.jit(g).lower(S(x.shape, x.dtype), S(w.shape, w.dtype), S((), np.int32),
                            target="cuda:sm_90").compile()
    got = exe(x, w, i)
    want = nova.jit(g)(x, w, i)
    for a, b in zip(nova.tree_util.tree_leaves(got), nova.tree_util.tree_leaves(want),
                    strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=2e-5, atol=2e-5)
    assert fake.launches > 0
