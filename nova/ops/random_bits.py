"""threefry2x32: the counter-based hash behind nova.random (Salmon et al., SC 2011).

Threefry-2x32 with 20 rounds from "Parallel random numbers: as easy as 1, 2, 3" (Salmon, Moraes,
Dror, Shaw; SC 2011), the same function as JAX's `threefry2x32_p`, so Nova's keys and bits equal
`jax.random`'s bit for bit. It maps a 64-bit key (k0, k1) and a 64-bit counter (x0, x1), each
given as two uint32 words, to two uint32 words; every element is independent, so it is an
elementwise primitive with two results.
"""

from __future__ import annotations

import numpy as np

from nova.core import dtypes
from nova.core.errors import ShapeError
from nova.core.primitive import Cost, Elementwise, FusionKind, Primitive
from nova.ops import elementwise as ew

# Rotation constants R_{2x32} of Table 4 in Salmon et al.; rounds alternate between the two rows.
ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))
# The key-schedule parity constant C240 of Threefish (Skein 1.3), used by Threefry.
KS_PARITY = 0x1BD11BDA
# Each of the 20 rounds is an add, a rotate (2 shifts + or) and a xor; 6 key injections of 3 adds.
_OPS_PER_ELEMENT = 20 * 5 + 6 * 3


def _schedule(k0, k1, x0, x1, *, add, xor, rotl, const):
    """The 20 rounds over abstract word ops, shared by the NumPy reference and the kernel body."""
    ks = (k0, k1, xor(xor(k0, k1), const(KS_PARITY)))
    x0 = add(x0, ks[0])
    x1 = add(x1, ks[1])
    for i in range(5):
        for r in ROTATIONS[i % 2]:
            x0 = add(x0, x1)
            x1 = xor(rotl(x1, r), x0)
        # Key injection after every 4 rounds: words rotate through the schedule, plus the count.
        x0 = add(x0, ks[(i + 1) % 3])
        x1 = add(add(x1, ks[(i + 2) % 3]), const(i + 1))
    return x0, x1


def _threefry_rule(k0, k1, x0, x1):
    for name, t in zip(("k0", "k1", "x0", "x1"), (k0, k1, x0, x1), strict=True):
        if t.dtype != dtypes.uint32:
            raise TypeError(f"threefry2x32: operand {name} must be uint32, got {t.dtype}")
        if t.shape != k0.shape:
            raise ShapeError(
                f"threefry2x32: operand shapes differ: k0 {k0.shape}, {name} {t.shape}"
            )
    return (k0, k0)


def _threefry_impl(k0, k1, x0, x1):
    shape = np.shape(k0)
    # 1-d views keep NumPy in array arithmetic (wrapping uint32, no scalar overflow warnings).
    k0, k1, x0, x1 = (np.asarray(a, np.uint32).reshape(-1) for a in (k0, k1, x0, x1))
    u32 = np.uint32

    def rotl(x, r):
        return (x << u32(r)) | (x >> u32(32 - r))

    y0, y1 = _schedule(
        k0, k1, x0, x1, add=np.add, xor=np.bitwise_xor, rotl=rotl, const=lambda v: u32(v)
    )
    return y0.reshape(shape), y1.reshape(shape)


def _threefry_body(b, k0, k1, x0, x1):
    # The builder protocol has no shifts: on unsigned words x * 2**r is a left shift (wrapping
    # modulo 2**32) and x / 2**(32 - r) a logical right shift; LLVM folds the pair into a rotate.
    def const(v):
        return b.const(v, dtypes.uint32)

    def rotl(x, r):
        return b.or_(b.mul(x, const(1 << r)), b.div(x, const(1 << (32 - r))))

    return _schedule(k0, k1, x0, x1, add=b.add, xor=b.xor, rotl=rotl, const=const)


def _threefry_vjp(ct, k0, k1, x0, x1, *, out):
    return (None, None, None, None)


def _threefry_jvp(tangents, k0, k1, x0, x1, *, out):
    return tuple(ew.zeros_like(o) for o in out)


def _threefry_cost(in_types, out_types):
    moved = sum(t.nbytes for t in in_types) + sum(t.nbytes for t in out_types)
    return Cost(_OPS_PER_ELEMENT * out_types[0].size, moved)


threefry2x32_p = Primitive(
    "threefry2x32",
    shape_rule=_threefry_rule,
    impl=_threefry_impl,
    vjp=_threefry_vjp,
    jvp=_threefry_jvp,
    fusion=FusionKind.ELEMENTWISE,
    kernel=Elementwise(_threefry_body),
    cost=_threefry_cost,
    multiple_results=True,
    differentiable=False,
)


def threefry2x32(k0, k1, x0, x1):
    """Threefry-2x32 (20 rounds) of the counters (x0, x1) under the key (k0, k1).

    All four operands are uint32 arrays of one shape; returns two uint32 arrays of that shape.
    """
    return tuple(threefry2x32_p.bind(k0, k1, x0, x1))
