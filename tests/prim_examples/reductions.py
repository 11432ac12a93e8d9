"""Examples for reduce_prod, argmax/argmin, the scans (cumsum, cumprod, cummax, cummin) and sort."""

import numpy as np


def _signed_away_from_zero(rng, shape):
    return rng.uniform(0.5, 1.5, shape) * rng.choice([-1.0, 1.0], shape)


def _prod(axes, shape=(3, 4, 5), zeros=0):
    def ex(rng):
        x = _signed_away_from_zero(rng, shape)
        flat = x.reshape(-1)
        flat[rng.choice(flat.size, zeros, replace=False)] = 0.0  # gradients must stay exact here
        return [x], {"axes": axes}

    return ex


def _distinct(shape, scale=0.3):
    # A permutation keeps values apart, so extrema and sort orders have no ties.
    return lambda rng: rng.permutation(int(np.prod(shape))).reshape(shape) * scale


def _arg(axis, shape=(3, 4, 5)):
    return lambda rng: ([_distinct(shape)(rng)], {"axis": axis, "index_dtype": np.dtype(np.int32)})


def _arg_nan(rng):
    x = rng.standard_normal((4, 6))
    x[1, 2] = x[1, 4] = np.nan  # the first NaN wins
    x[2, :] = 1.0  # ties: the first index
    return [x], {"axis": 1, "index_dtype": np.dtype(np.int32)}


def _scan(axis, reverse, shape=(3, 4, 5), values=None):
    def ex(rng):
        x = values(rng) if values is not None else rng.uniform(-2, 2, shape)
        return [x], {"axis": axis, "reverse": reverse}

    return ex


def _cumprod_with_zeros(reverse):
    def ex(rng):
        x = _signed_away_from_zero(rng, (3, 6))
        x[0, 2] = 0.0  # one zero
        x[1, 1] = x[1, 4] = 0.0  # two zeros
        return [x], {"axis": 1, "reverse": reverse}

    return ex


def _sort(dimension, num_keys, n_operands, shape=(3, 5, 4)):
    def ex(rng):
        ops = [_distinct(shape)(rng)] + [rng.standard_normal(shape) for _ in range(n_operands - 1)]
        return ops, {"dimension": dimension, "num_keys": num_keys}

    return ex


def _sort_two_keys(rng):
    # The first key (int, held fixed) has ties, the float second key breaks them; a third rides.
    k1 = rng.integers(0, 3, (4, 7)).astype(np.int32)
    k2 = _distinct((4, 7))(rng)
    return [k1, k2, rng.standard_normal((4, 7))], {"dimension": 1, "num_keys": 2}


def _argsort_like(rng):
    x = _distinct((3, 6))(rng)
    return [x, np.broadcast_to(np.arange(6, dtype=np.int32), (3, 6)).copy()], {
        "dimension": 1,
        "num_keys": 1,
    }


EXAMPLES = {
    "reduce_prod": [
        _prod((0, 2)),
        _prod((1,), zeros=1),
        _prod((1,), zeros=2),
        _prod((0, 1), shape=(2, 4), zeros=1),
        _prod((1,), shape=(3, 4)),
    ],
    "argmax": [_arg(1), _arg(0, shape=(6,)), _arg_nan],
    "argmin": [_arg(2), _arg(0), _arg_nan],
    "cumsum": [_scan(1, False), _scan(2, True), _scan(0, False, shape=(7,))],
    "cumprod": [
        _scan(1, False, values=lambda rng: _signed_away_from_zero(rng, (3, 4, 5))),
        _scan(2, True, values=lambda rng: _signed_away_from_zero(rng, (3, 4, 5))),
        _cumprod_with_zeros(False),
        _cumprod_with_zeros(True),
    ],
    "cummax": [
        _scan(1, False, values=_distinct((3, 6, 4))),
        _scan(0, True, values=_distinct((5, 3))),
    ],
    "cummin": [
        _scan(1, False, values=_distinct((3, 6, 4))),
        _scan(1, True, values=_distinct((2, 7))),
    ],
    "sort": [_sort(2, 1, 1), _sort(1, 1, 3), _sort_two_keys, _argsort_like],
}
