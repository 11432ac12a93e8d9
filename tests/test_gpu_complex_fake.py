"""Complex values on the CUDA target, run through the fake driver (tests/fake_cuda_driver.py:
its launches run the generated kernels in the SIMT simulator): the kernels compute on float
parts (nova/compiler/legalize_complex.py), the planar copies at the boundaries are host calls
(nova/gpu/host_call.py), and the results equal the CPU backend's."""

import numpy as np

import nova
import nova.numpy as jnp
from tests.test_gpu_runtime_fake import fake as _fake_fixture

fake = _fake_fixture  # the fixture, under the name the tests take

RNG = np.random.default_rng(11)


def _z(shape):
    return (RNG.uniform(-2, 2, shape) + 1j * RNG.uniform(-2, 2, shape)).astype(np.complex64)


def test_complex_program_on_the_fake_gpu_matches_the_cpu(fake):
    z, w = _z((4, 8)), _z((8, 3))

    def f(a, b):
        return jnp.exp(a) @ b * (1 - 2j), jnp.abs(a).sum(axis=1)

    specs = [nova.ShapeDtypeStruct(x.shape, x.dtype) for x in (z, w)]
    exe = nova.jit(f).lower(*specs, target="cuda:sm_90").compile()
    kinds = [launch.info.get("kind") for launch in exe._exe.launches]
    assert "host:complex_as_pairs" in kinds and "host:pairs_as_complex" in kinds
    got = exe(z, w)
    want = (np.exp(z) @ w * (1 - 2j), np.abs(z).sum(axis=1))
    for g, x in zip(got, want, strict=True):
        assert np.asarray(g).dtype == x.dtype
        np.testing.assert_allclose(np.asarray(g), x, rtol=2e-5, atol=2e-5)
