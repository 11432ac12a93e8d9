"""Column reductions split over their rows on the GPU (codegen/cuda/column_split.py): which
kernels split and into how many parts, and the two launches against the NumPy reference in the
SIMT simulator."""

import nova.numpy as jnp
import numpy as np
import pytest

from nova.compiler import backend_cuda
from nova.compiler.codegen.cuda.column_split import column_splits, split_column_kernel
from nova.core import dtypes
from nova.nn import functional as F
from nova.ops.reduction import reduce_sum_p
from tests.test_cuda_codegen import S, _fused, _simulate_program

f32, bf16 = np.float32, dtypes.bfloat16


def _bias_grad_update(h, dy, b, m):
    """GELU's backward, its column sum (a bias gradient) and a momentum update of the bias: the
    shape of the GPT-2 step's fc bias kernels."""
    dh = dy * (0.5 + 0.5 * jnp.tanh(h))
    g = jnp.sum(dh, axis=(0, 1))
    m2 = 0.9 * m + 0.1 * g
    return dh, b - 0.01 * m2, m2


def _ln_weight_grads(x, dy, w):
    """A LayerNorm's weight and bias gradients with an SGD update: two sums, no full output."""
    dw = jnp.sum(dy * x, axis=0)
    db = jnp.sum(dy, axis=0)
    return w - 0.1 * dw, db


def _column_max(x):
    return jnp.max(jnp.abs(x), axis=0) + 1.0


def _loop_kernels(fn, specs):
    return [k for k in _fused(fn, specs).kernels if k.kind == "loop"]


def _close(got, want, tol):
    for g, w in zip(got, want, strict=True):
        g64, w64 = np.asarray(g, np.float64), np.asarray(w, np.float64)
        assert g64.shape == w64.shape and np.asarray(g).dtype == np.asarray(w).dtype
        scale = max(float(np.max(np.abs(w64))), 1e-30)
        assert float(np.max(np.abs(g64 - w64))) <= tol * scale


@pytest.mark.parametrize("name,fn,specs,parts,tol", [
    ("bias_grad_update", _bias_grad_update,
     [S((4, 512, 256), f32), S((4, 512, 256), f32), S((256,), f32), S((256,), f32)], 16, 1e-5),
    ("ln_weight_grads", _ln_weight_grads,
     [S((2048, 96), f32), S((2048, 96), f32), S((96,), f32)], 16, 1e-5),
    ("column_max", _column_max, [S((4096, 100), f32)], 32, 0.0),
    ("bf16_sum", lambda x: jnp.sum(x * 2.0, axis=0), [S((8192, 64), bf16)], 64, 1e-2),
])
def test_split_column_kernels_match_reference(name, fn, specs, parts, tol):
    """The kernel splits into `parts` (the smallest power of two giving 4 blocks per SM of
    132, at least 128 rows a part), and the partials + finishing launches give the reference's
    results: full-shape outputs stored through the reshaped index, per-column updates after
    the partials are reduced (bfloat16 partials in float32)."""
    (k,) = [k for k in _loop_kernels(fn, specs) if k.schedule.get("red_axes")]
    assert column_splits(k, 132) == parts
    part, finish = split_column_kernel(k, 132)
    assert part.schedule["iter_shape"][0] == parts and finish.schedule["iter_shape"][0] == parts
    for v in part.program.outputs[-1:]:  # a partial
        assert v.type.shape == (parts, specs[0].shape[-1]) and v.type.dtype == np.float32
    lowered = backend_cuda.lower_kernel(k, "sm_90", "highest", 132)
    assert [gk.name for gk, _ in lowered] == [part.name, finish.name]
    tiles = -(-k.schedule["iter_shape"][-1] // 32)
    assert lowered[0][1].grid == (parts * tiles, 1, 1)
    got, want = _simulate_program(fn, specs, "highest", sm_count=132)
    _close(got, want, tol)


def test_split_bfloat16_sum_accumulates_in_float32():
    """A sum bound in bfloat16 (the primitive's own semantics: the element type) still gets
    float32 partials when split: within bfloat16's rounding of the float64 sum, where adding
    8192 rows in bfloat16 is ~10 % off."""
    fn, specs = (lambda x: reduce_sum_p.bind(x, axes=(0,))), [S((8192, 64), bf16)]
    (k,) = _loop_kernels(fn, specs)
    part, _ = split_column_kernel(k, 132)
    assert part.program.outputs[0].type.dtype == np.float32
    got, _ = _simulate_program(fn, specs, "highest", sm_count=132)
    x = np.random.default_rng(0).standard_normal((8192, 64)).astype(bf16)  # the helper's input
    truth = x.astype(np.float64).sum(axis=0)
    err = np.abs(np.asarray(got[0], np.float64) - truth).max()
    assert err <= 4e-3 * np.abs(truth).max()


def test_unsplit_column_kernels():
    """No split where it would not pay or does not apply: a kernel that already fills the SMs,
    one under 1 MiB, a second reduction level (a column softmax), an argmax."""
    wide = _loop_kernels(lambda x: jnp.sum(x, axis=0), [S((1024, 9000), f32)])
    small = _loop_kernels(lambda x: jnp.sum(x, axis=0), [S((512, 256), f32)])
    softmax = _loop_kernels(lambda x: F.softmax(x, axis=0), [S((4096, 128), f32)])
    arg = _loop_kernels(lambda x: jnp.argmax(x, axis=0), [S((4096, 128), f32)])
    (w,), (s,) = wide, small
    assert column_splits(w, 132) == 1 and column_splits(s, 132) == 1
    for k in softmax + arg:
        assert split_column_kernel(k, 132) is None
    # More SMs split the same kernel more; rows that do not divide evenly split less.
    (k,) = _loop_kernels(lambda x: jnp.sum(x, axis=0), [S((4096, 256), f32)])
    assert column_splits(k, 8) == 4 and column_splits(k, 132) == 32
    (odd,) = _loop_kernels(lambda x: jnp.sum(x, axis=0), [S((3000, 256), f32)])
    assert column_splits(odd, 132) == 8  # 3000 = 8 x 375
