"""Examples for the indexing primitives: slice, rev, pad, concatenate, gather, scatter_add, scatter.

Index arrays are int32/int64 and held fixed by the finite-difference helper. Some examples carry
out-of-range indices on purpose (gather clamps them, scatters drop them) and repeated indices
(scatter_add accumulates; scatter 'set' keeps the last). Values of min/max examples are distinct so
no ties sit on a kink.
"""

import numpy as np


def _x(rng, *shape):
    return rng.standard_normal(shape)


def _distinct(rng, *shape):
    n = int(np.prod(shape))
    return (rng.permutation(n).reshape(shape) * 0.37 - n * 0.15).astype(np.float64)


def _gather_1axis(rng):
    idx = np.array([[2], [0], [2], [4], [-1], [7]], np.int32)  # repeats; -1 and 7 clamp
    return [_x(rng, 5, 3), idx], {"axes": (0,)}


def _gather_2axes(rng):
    idx = rng.integers(0, 3, (2, 4, 2)).astype(np.int64)
    return [_x(rng, 3, 4, 3), idx], {"axes": (2, 0)}


def _gather_scalar_batch(rng):
    return [_x(rng, 4, 2), np.array([3], np.int32)], {"axes": (0,)}


def _scatter_args(rng, mode_values):
    operand = mode_values(rng, 5, 3)
    idx = np.array([[1], [3], [1], [9], [-2], [0]], np.int32)  # repeats; 9 and -2 are dropped
    updates = mode_values(rng, 6, 3)
    return operand, idx, updates


def _scatter_add(rng):
    operand, idx, updates = _scatter_args(rng, _x)
    return [operand, idx, updates], {"axes": (0,)}


def _scatter_add_2axes(rng):
    idx = np.array([[[0, 1], [2, 0]], [[0, 1], [1, 1]]], np.int32)
    return [_x(rng, 3, 4, 2), idx, _x(rng, 2, 2, 4)], {"axes": (0, 2)}


def _scatter(mode):
    def example(rng):
        if mode in ("min", "max"):
            # Distinct values so no ties; repeated indices still compete.
            vals = _distinct(rng, 11, 3)
            operand, updates = vals[:5], vals[5:]
        else:
            operand, updates = _x(rng, 5, 3), _x(rng, 6, 3)
        idx = np.array([[1], [3], [1], [9], [-2], [0]], np.int32)
        return [operand, idx, updates], {"axes": (0,), "mode": mode}

    return example


def _scatter_mul_with_zero(rng):
    operand, updates = _x(rng, 4, 2), _x(rng, 5, 2)
    updates[0, 0] = 0.0  # a zero among repeated indices: the product-of-others rule
    idx = np.array([[2], [2], [0], [2], [1]], np.int32)
    return [operand, idx, updates], {"axes": (0,), "mode": "mul"}


EXAMPLES = {
    "slice": [
        lambda rng: (
            [_x(rng, 5, 6)],
            {"start_indices": (1, 0), "limit_indices": (4, 6), "strides": (1, 2)},
        ),
        lambda rng: ([_x(rng, 7)], {"start_indices": (2,), "limit_indices": (7,), "strides": (3,)}),
        lambda rng: (
            [_x(rng, 3, 4)],
            {"start_indices": (1, 2), "limit_indices": (1, 4), "strides": (1, 1)},
        ),
    ],
    "rev": [
        lambda rng: ([_x(rng, 3, 4, 2)], {"dimensions": (0, 2)}),
        lambda rng: ([_x(rng, 5)], {"dimensions": (0,)}),
    ],
    "pad": [
        lambda rng: ([_x(rng, 3, 4), np.float64(0.5)], {"padding_config": ((1, 2, 0), (0, 1, 1))}),
        # Negative padding crops; interior padding with cropping on the same dimension.
        lambda rng: (
            [_x(rng, 4, 5), np.float64(-1.0)],
            {"padding_config": ((-1, 2, 1), (2, -3, 0))},
        ),
    ],
    "concatenate": [
        lambda rng: ([_x(rng, 2, 3), _x(rng, 4, 3), _x(rng, 1, 3)], {"dimension": 0}),
        lambda rng: ([_x(rng, 2, 1, 3), _x(rng, 2, 0, 3), _x(rng, 2, 2, 3)], {"dimension": 1}),
    ],
    "gather": [_gather_1axis, _gather_2axes, _gather_scalar_batch],
    "scatter_add": [_scatter_add, _scatter_add_2axes],
    "scatter": [
        _scatter("set"),
        _scatter("mul"),
        _scatter("min"),
        _scatter("max"),
        _scatter_mul_with_zero,
    ],
}
