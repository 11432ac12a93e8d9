"""nova.numpy.linalg (norms, the array API helpers) and nova.eval_shape / device_get /
block_until_ready, against NumPy and JAX's documented behaviour."""

from __future__ import annotations

import math

import nova.numpy as jnp
import numpy as np
import pytest

import nova
from nova.core.errors import ShapeError

RNG = np.random.default_rng(11)
M = RNG.standard_normal((3, 4))
B = RNG.standard_normal((2, 3, 4))


@pytest.mark.parametrize("ord", [None, "fro", 1, -1, math.inf, -math.inf])
def test_matrix_norms(ord):
    np.testing.assert_allclose(float(jnp.linalg.norm(M, ord)), np.linalg.norm(M, ord),
                               rtol=1e-13)
    got = jnp.linalg.norm(B, ord, axis=(2, 1), keepdims=True)
    np.testing.assert_allclose(np.asarray(got), np.linalg.norm(B, ord, axis=(2, 1),
                                                               keepdims=True), rtol=1e-13)
    if ord is not None:
        got = nova.jit(lambda b: jnp.linalg.matrix_norm(b, ord=ord))(B)
        np.testing.assert_allclose(np.asarray(got), np.linalg.norm(B, ord, axis=(-2, -1)),
                                   rtol=1e-13)


@pytest.mark.parametrize("ord", [None, 2, 1, 0, math.inf, -math.inf, 3, 0.5])
def test_vector_norms(ord):
    for axis in (0, -1, 1):
        np.testing.assert_allclose(np.asarray(jnp.linalg.norm(M, ord, axis=axis)),
                                   np.linalg.norm(M, ord, axis=axis), rtol=1e-13)
    v = np.array([0.0, -3.0, 4.0])
    np.testing.assert_allclose(float(nova.jit(lambda v: jnp.linalg.norm(v, ord))(v)),
                               np.linalg.norm(v, ord), rtol=1e-13)
    want = np.linalg.norm(B.reshape(-1), 2 if ord is None else ord)
    got = jnp.linalg.vector_norm(B, ord=2 if ord is None else ord)
    np.testing.assert_allclose(float(got), want, rtol=1e-13)


def test_norm_defaults_dtypes_and_gradients():
    np.testing.assert_allclose(float(jnp.linalg.norm(B)), np.linalg.norm(B), rtol=1e-13)
    assert jnp.linalg.norm(B, keepdims=True).shape == (1, 1, 1)
    n = jnp.linalg.norm(np.arange(4, dtype=np.int32))
    assert n.dtype == np.float32 and abs(float(n) - math.sqrt(14)) < 1e-6
    g = nova.grad(lambda v: jnp.linalg.norm(v))(np.array([3.0, 4.0]))
    np.testing.assert_allclose(np.asarray(g), [0.6, 0.8], rtol=1e-15)
    g = nova.grad(lambda m: jnp.linalg.norm(m, "fro"))(M)
    np.testing.assert_allclose(np.asarray(g), M / np.linalg.norm(M), rtol=1e-13)
    # global-norm gradient clipping, as optax writes it
    grads = {"w": M, "b": np.arange(3.0)}
    total = jnp.sqrt(sum(jnp.linalg.norm(g) ** 2 for g in nova.tree_util.tree_leaves(grads)))
    np.testing.assert_allclose(float(total), math.sqrt((M ** 2).sum() + 5.0), rtol=1e-13)


def test_array_api_helpers():
    x, y = RNG.standard_normal((2, 5)), RNG.standard_normal(5)
    np.testing.assert_allclose(np.asarray(jnp.linalg.vecdot(x, y)), x @ y, rtol=1e-13)
    np.testing.assert_allclose(np.asarray(jnp.linalg.vecdot(B, B, axis=1)),
                               (B * B).sum(1), rtol=1e-13)
    np.testing.assert_array_equal(np.asarray(jnp.linalg.matrix_transpose(B)),
                                  B.transpose(0, 2, 1))
    np.testing.assert_allclose(np.asarray(jnp.linalg.matmul(M, M.T)), M @ M.T, rtol=1e-13)
    from nova.numpy import linalg

    assert linalg is jnp.linalg and linalg.norm is jnp.linalg.norm


def test_linalg_errors():
    with pytest.raises(ValueError, match="invalid ord 'bad'"):
        jnp.linalg.norm(M, "bad")
    with pytest.raises(ValueError, match="is for matrices"):
        jnp.linalg.norm(M, "fro", axis=0)
    with pytest.raises(ValueError, match="needs a 1-d or 2-d array"):
        jnp.linalg.norm(B, 1)
    with pytest.raises(ShapeError, match="axis -1 has size 4 in x1"):
        jnp.linalg.vecdot(M, np.ones(3))
    with pytest.raises(ValueError, match="at least 2 dimensions"):
        jnp.linalg.matrix_norm(np.ones(3))


def test_eval_shape_traces_without_computing():
    calls = []

    def f(x, y, scale):
        calls.append(1)
        return {"prod": x @ y * scale, "parts": (jnp.sum(x), y.astype(jnp.bfloat16))}

    out = nova.eval_shape(f, nova.ShapeDtypeStruct((3, 4), jnp.float32), np.ones((4, 2)), 2.0)
    assert out["prod"] == nova.ShapeDtypeStruct((3, 2), np.float64)
    assert out["parts"][0].shape == () and out["parts"][0].dtype == np.float32
    assert out["parts"][1].dtype == jnp.bfloat16 and out["parts"][1].shape == (4, 2)
    assert calls == [1]
    with pytest.raises(ShapeError):
        nova.eval_shape(lambda a: a @ a, nova.ShapeDtypeStruct((3, 4), jnp.float32))


def test_device_get_and_block_until_ready():
    tree = {"a": jnp.arange(3), "b": [np.ones(2), 7, "name"]}
    assert nova.block_until_ready(tree) is tree
    got = nova.device_get(tree)
    assert type(got["a"]) is np.ndarray and got["a"].tolist() == [0, 1, 2]
    assert type(got["b"][0]) is np.ndarray and got["b"][0] is not tree["b"][0]
    assert got["b"][1:] == [7, "name"]
    x = jnp.ones(3)
    f = nova.jit(lambda x: x * 2, donate_argnums=0)
    f(x)
    with pytest.raises(nova.DeletedArrayError):
        nova.device_get(x)
