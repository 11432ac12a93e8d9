"""dot_generals whose operands are not a GEMM over their memory (a contracted middle axis,
batch axes that do not lead, contracting axes interleaved with free ones) run as a transpose
plus a GEMM (nova/compiler/dot_layout.py), with the same values as NumPy's einsum."""

import numpy as np
import pytest

import nova
from nova import lax
from nova.compiler.dot_layout import gemm_operands
from nova.compiler.kernel import gemm_layout
from tests.helpers import assert_close

RNG = np.random.default_rng(3)

# (x shape, y shape, dimension numbers, einsum spec)
CASES = [
    ((6, 5, 7), (5, 4), (((1,), (0,)), ((), ())), "ijk,jl->ikl"),
    ((5, 6, 7), (7, 3, 5), (((0,), (2,)), ((), ())), "jik,laj->ikla"),
    ((6, 3, 5), (4, 3, 5), (((2,), (2,)), ((1,), (1,))), "ibk,lbk->bil"),
    ((2, 5, 3, 4), (3, 5, 6), (((1, 2), (1, 0)), ((), ())), "ijkl,kjm->ilm"),
    ((4, 3, 5), (3, 5, 2), (((2,), (1,)), ((1,), (0,))), "abk,bkc->bac"),
]


def _operands(xs, ys):
    return RNG.standard_normal(xs).astype(np.float32), RNG.standard_normal(ys).astype(np.float32)


@pytest.mark.parametrize("xs,ys,dn,spec", CASES)
def test_values_eager_jit_and_grad(xs, ys, dn, spec):
    x, y = _operands(xs, ys)
    want = np.einsum(spec, x.astype(np.float64), y.astype(np.float64))
    f = lambda a, b: lax.dot_general(a, b, dn)  # noqa: E731
    assert_close(f(x, y), want, rtol=1e-4, atol=1e-4)
    assert_close(nova.jit(f)(x, y), want, rtol=1e-4, atol=1e-4)
    g = nova.jit(nova.grad(lambda a, b: (f(a, b) ** 2).sum(), argnums=(0, 1)))(x, y)
    ga = 2 * np.einsum(f"{spec.split('->')[1]},{spec.split(',')[1].split('->')[0]}->"
                       f"{spec.split(',')[0]}", want, y.astype(np.float64))
    assert_close(g[0], ga, rtol=1e-3, atol=1e-3)
    assert g[1].shape == y.shape


@pytest.mark.parametrize("xs,ys,dn,spec", CASES)
def test_every_dot_becomes_a_gemm(xs, ys, dn, spec):
    x, y = _operands(xs, ys)
    program = nova.jit(lambda a, b: lax.dot_general(a, b, dn)).lower(x, y).program
    out = gemm_operands(program)
    dots = [e for e in out.eqns if e.prim.name == "dot_general"]
    assert dots and all(gemm_layout(*(v.type for v in e.inputs), e.params["dimension_numbers"])
                        is not None for e in dots)
    assert [v.type for v in out.outputs] == [v.type for v in program.outputs]
    compiled = nova.jit(lambda a, b: lax.dot_general(a, b, dn)).lower(x, y).compile()
    text = compiled.as_text()
    assert 'kind = "contraction"' in text  # a GEMM kernel, not the scalar loop fallback


def test_gemm_layouts_are_left_alone():
    x, y = _operands((4, 5), (5, 3))
    program = nova.jit(lambda a, b: a @ b).lower(x, y).program
    assert gemm_operands(program) is program


def test_cuda_target_compiles_a_middle_axis_contraction():
    # CUDA's GEMM refused such a dot_general outright; the PTX is built without a GPU.
    pytest.importorskip("mlir")
    S = nova.ShapeDtypeStruct
    exe = nova.jit(lambda a, b: lax.dot_general(a, b, CASES[0][2])).lower(
        S(CASES[0][0], np.float32), S(CASES[0][1], np.float32), target="cuda:sm_90").compile()
    assert 'kind = "contraction"' in exe.as_text()
