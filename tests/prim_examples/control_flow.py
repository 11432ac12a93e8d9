"""Examples for the control-flow primitives: scan, while, cond (nova/control_flow.py).

Each holds Regions traced here from small functions. Integer operands (loop counters, trip
counts, the branch index) are held fixed by the finite-difference helper, so each example's
trip count and branch stay put while the float operands move.
"""

import nova.numpy as jnp
import numpy as np

from nova.control_flow import trace_region
from nova.core.ir import Region
from nova.core.ir import TensorType as T

F, I = np.dtype(np.float64), np.dtype(np.int32)


def _region(fun, types):
    program, consts, _ = trace_region(fun, types)
    assert not consts
    return Region(program)


def _scan_rnn(rng):
    def body(W, h, x):
        h2 = jnp.tanh(W @ h + x)
        return [h2, jnp.sin(h2).sum() * h2[0]]

    region = _region(body, [T((3, 3), F), T((3,), F), T((3,), F)])
    args = [rng.standard_normal((3, 3)) * 0.5, rng.standard_normal(3), rng.standard_normal((4, 3))]
    return args, {"body": region, "length": 4, "reverse": False, "n_consts": 1, "n_carry": 1}


def _scan_reverse_with_counter(rng):
    def body(s, k, acc, x, m):
        k2 = k + m
        acc2 = acc * s + x * m.astype(np.float64)
        return [k2, acc2, acc2 * k2.astype(np.float64), m * 2]

    region = _region(body, [T((), F), T((), I), T((2,), F), T((2,), F), T((), I)])
    args = [np.asarray(rng.uniform(0.5, 0.9)), np.array(1, np.int32), rng.standard_normal(2),
            rng.standard_normal((3, 2)), np.array([2, -1, 3], np.int32)]
    return args, {"body": region, "length": 3, "reverse": True, "n_consts": 1, "n_carry": 2}


def _scan_no_carry(rng):
    region = _region(lambda x: [jnp.exp(x) * x.sum()], [T((2,), F)])
    return [rng.standard_normal((3, 2))], {"body": region, "length": 3, "reverse": False,
                                           "n_consts": 0, "n_carry": 0}


def _while_counted(rng):
    cond = _region(lambda n, i, x: [i < n], [T((), I), T((), I), T((3,), F)])
    body = _region(lambda c, i, x: [i + 1, x * 0.8 + jnp.sin(x) * c],
                   [T((3,), F), T((), I), T((3,), F)])
    args = [np.array(4, np.int32), rng.standard_normal(3), np.array(0, np.int32),
            rng.standard_normal(3)]
    return args, {"cond": cond, "body": body, "n_cond_consts": 1, "n_body_consts": 1}


def _while_on_values(rng):
    # Stops on a float carry's value: the trip count is the same under small perturbations
    # (3 doublings from [0.5, 0.75) pass 4), so derivatives exist.
    cond = _region(lambda x, y: [x < 4.0], [T((), F), T((2,), F)])
    body = _region(lambda x, y: [x * 2.0, jnp.tanh(y) * x], [T((), F), T((2,), F)])
    return [np.asarray(rng.uniform(0.55, 0.7)), rng.standard_normal(2)], {
        "cond": cond, "body": body, "n_cond_consts": 0, "n_body_consts": 0}


def _cond_branches(index):
    def ex(rng):
        types = [T((3,), F), T((3,), F)]
        branches = (_region(lambda x, y: [x * y, jnp.sin(x)], types),
                    _region(lambda x, y: [x + y, jnp.cos(y) * x], types),
                    _region(lambda x, y: [x - y, jnp.exp(x)], types))
        args = [np.array(index, np.int32), rng.standard_normal(3), rng.standard_normal(3)]
        return args, {"branches": branches}

    return ex


EXAMPLES = {
    "scan": [_scan_rnn, _scan_reverse_with_counter, _scan_no_carry],
    "while": [_while_counted, _while_on_values],
    "cond": [_cond_branches(1), _cond_branches(0), _cond_branches(7)],  # 7 clamps to 2
}
