"""nova.numpy.convolve / correlate against NumPy: every mode, both length orders, integer
inputs, under jit and grad."""

from __future__ import annotations

import nova.numpy as jnp
import numpy as np
import pytest

import nova

RNG = np.random.default_rng(9)


@pytest.mark.parametrize("mode", ["full", "same", "valid"])
def test_against_numpy(mode):
    for n in (2, 8):  # v shorter, equal-ish and longer; odd and even lengths
        for m in (1, 4, 9):
            a, v = RNG.standard_normal(n), RNG.standard_normal(m)
            for ours, theirs in ((jnp.convolve, np.convolve), (jnp.correlate, np.correlate)):
                got, want = np.asarray(ours(a, v, mode)), theirs(a, v, mode)
                assert got.shape == want.shape, (ours.__name__, n, m)
                np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    got = nova.jit(lambda a, v: jnp.convolve(a, v, mode))(np.arange(6.0), np.ones(3))
    np.testing.assert_allclose(np.asarray(got), np.convolve(np.arange(6.0), np.ones(3), mode))


def test_integers_gradients_and_errors():
    got = jnp.convolve(np.array([1, 2, 3], np.int32), np.array([0, 1, 5], np.int32))
    assert got.dtype == np.int32 and np.asarray(got).tolist() == [0, 1, 7, 13, 15]
    a, v = RNG.standard_normal(6), RNG.standard_normal(3)
    ct = RNG.standard_normal(8)
    ga, gv = nova.grad(lambda a, v: jnp.sum(jnp.convolve(a, v) * ct), argnums=(0, 1))(a, v)
    # convolve is bilinear: the gradient in a is the correlation of ct with v, in v with a
    np.testing.assert_allclose(np.asarray(ga), np.correlate(ct, v, "valid"), rtol=1e-12)
    np.testing.assert_allclose(np.asarray(gv), np.correlate(ct, a, "valid"), rtol=1e-12)
    with pytest.raises(ValueError, match="must be 1-d"):
        jnp.convolve(np.ones((2, 2)), np.ones(2))
    with pytest.raises(ValueError, match="cannot be empty"):
        jnp.correlate(np.ones(0), np.ones(2))
    with pytest.raises(ValueError, match="mode must be 'full', 'same' or 'valid'"):
        jnp.convolve(np.ones(3), np.ones(2), "circular")
