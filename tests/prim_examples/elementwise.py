"""Examples for elementwise, structural, reduction and contraction primitives."""

import numpy as np


def _u(*shapes, lo=-2.0, hi=2.0):
    return lambda rng: ([rng.uniform(lo, hi, s) for s in shapes], {})


def _pos(*shapes):
    return _u(*shapes, lo=0.5, hi=2.0)


def _apart(rng):
    x = rng.uniform(-2, 2, (3, 4))
    return [x, x + rng.choice([-1.0, 1.0], x.shape) * rng.uniform(0.2, 1.0, x.shape)], {}


def _div(rng):
    return [rng.uniform(-2, 2, (3, 4)), rng.uniform(0.5, 2, (3, 4)) * rng.choice([-1, 1], (3, 4))], {}


def _away_from_int(rng):
    return [rng.integers(-3, 3, (3, 4)) + rng.uniform(0.2, 0.8, (3, 4))], {}


def _ints(rng):
    return [rng.integers(-5, 5, (3, 4)).astype(np.int32), rng.integers(1, 5, (3, 4)).astype(np.int32)], {}


def _bools(rng):
    return [rng.random((3, 4)) > 0.5, rng.random((3, 4)) > 0.5], {}


def _one_bool(rng):
    return [rng.random((3, 4)) > 0.5], {}


def _select(rng):
    return [rng.random((3, 4)) > 0.5, rng.standard_normal((3, 4)), rng.standard_normal((3, 4))], {}


EXAMPLES = {
    "neg": [_u((3, 4))],
    "exp": [_u((3, 4)), _u(())],
    "exp2": [_u((3, 4))],
    "expm1": [_u((5,))],
    "log": [_pos((3, 4))],
    "log2": [_pos((3, 4))],
    "log1p": [_pos((3, 4))],
    "tanh": [_u((3, 4))],
    "logistic": [_u((3, 4))],
    "sinh": [_u((3, 4))],
    "cosh": [_u((3, 4))],
    "sin": [_u((3, 4))],
    "cos": [_u((3, 4))],
    "tan": [_u((3, 4), lo=-1.0, hi=1.0)],
    "atan": [_u((3, 4))],
    "sqrt": [_pos((3, 4))],
    "rsqrt": [_pos((3, 4))],
    "reciprocal": [_pos((3, 4))],
    "erf": [_u((3, 4))],
    "abs": [_pos((3, 4))],
    "sign": [_u((3, 4))],
    "floor": [_away_from_int],
    "ceil": [_away_from_int],
    "round": [_away_from_int],
    "isnan": [_u((3, 4))],
    "isinf": [_u((3, 4))],
    "not": [_one_bool],
    "add": [_u((3, 4), (3, 4)), _u((), ())],
    "sub": [_u((3, 4), (3, 4))],
    "mul": [_u((3, 4), (3, 4))],
    "div": [_div, _ints],
    "rem": [_div],
    "pow": [lambda rng: ([rng.uniform(0.5, 2, (3, 4)), rng.uniform(-2, 2, (3, 4))], {})],
    "max": [_apart],
    "min": [_apart],
    "atan2": [_div],
    "eq": [_u((3, 4), (3, 4))],
    "ne": [_u((3, 4), (3, 4))],
    "lt": [_u((3, 4), (3, 4))],
    "le": [_u((3, 4), (3, 4))],
    "gt": [_u((3, 4), (3, 4))],
    "ge": [_u((3, 4), (3, 4))],
    "and": [_bools],
    "or": [_bools],
    "xor": [_bools],
    "select": [_select],
    "shift_left": [lambda rng: ([rng.integers(-50, 50, (3, 4)).astype(np.int32),
                                 rng.integers(-2, 40, (3, 4)).astype(np.int32)], {})],
    "shift_right_arithmetic": [lambda rng: ([rng.integers(-50, 50, (3, 4)).astype(np.int32),
                                             rng.integers(-2, 40, (3, 4)).astype(np.int32)], {})],
    "shift_right_logical": [lambda rng: ([rng.integers(-50, 50, (3, 4)).astype(np.int64),
                                          rng.integers(-2, 70, (3, 4)).astype(np.int64)], {})],
    "convert_element_type": [
        # float32 -> float64 keeps finite differences exact; narrowing is checked by the sweep.
        lambda rng: ([rng.standard_normal((3, 4)).astype(np.float32).astype(np.float64)],
                     {"new_dtype": np.dtype(np.float64)}),
        lambda rng: ([rng.standard_normal((3, 4)) * 5], {"new_dtype": np.dtype(np.int32)}),
    ],
    "bitcast_convert_type": [
        lambda rng: ([rng.standard_normal((3, 4)).astype(np.float32)],
                     {"new_dtype": np.dtype(np.int32)}),
        lambda rng: ([rng.integers(0, 1 << 15, (3, 4)).astype(np.int16)],
                     {"new_dtype": np.dtype(np.float16)}),
    ],
    "constant": [lambda rng: ([], {"value": rng.standard_normal((2, 3))})],
    "copy": [_u((3, 4))],
    "optimization_barrier": [
        _u((3, 4), (2,)),
        lambda rng: ([rng.standard_normal(3), rng.integers(0, 5, (2,)).astype(np.int32)], {}),
    ],
    "stop_gradient": [_u((3, 4))],
    "checkpoint_name": [lambda rng: ([rng.standard_normal((3, 4))], {"name": "h"})],
    "iota": [lambda rng: ([], {"dtype": np.dtype(np.int32), "shape": (3, 4), "dimension": 1})],
    "broadcast_in_dim": [
        lambda rng: ([rng.standard_normal((3, 1))], {"shape": (2, 3, 4), "broadcast_dimensions": (1, 2)}),
        lambda rng: ([rng.standard_normal(())], {"shape": (2, 3), "broadcast_dimensions": ()}),
    ],
    "reshape": [lambda rng: ([rng.standard_normal((3, 4))], {"new_sizes": (2, 6)})],
    "transpose": [lambda rng: ([rng.standard_normal((2, 3, 4))], {"permutation": (2, 0, 1)})],
    "reduce_sum": [
        lambda rng: ([rng.standard_normal((3, 4, 5))], {"axes": (0, 2)}),
        lambda rng: ([rng.standard_normal((3, 4))], {"axes": (0, 1)}),
    ],
    "reduce_max": [lambda rng: ([rng.permutation(12).reshape(3, 4) * 0.3], {"axes": (1,)})],
    "reduce_min": [lambda rng: ([rng.permutation(12).reshape(3, 4) * 0.3], {"axes": (0,)})],
    "dot_general": [
        lambda rng: ([rng.standard_normal((3, 4)), rng.standard_normal((4, 5))],
                     {"dimension_numbers": (((1,), (0,)), ((), ()))}),
        lambda rng: ([rng.standard_normal((2, 3, 4)), rng.standard_normal((2, 5, 4))],
                     {"dimension_numbers": (((2,), (2,)), ((0,), (0,)))}),
        lambda rng: ([rng.standard_normal((4, 2, 3)), rng.standard_normal((3, 2, 5))],
                     {"dimension_numbers": (((2,), (0,)), ((1,), (1,)))}),
    ],
}
