"""Examples for the collective primitives (nova/collectives.py): their references are what
member 0 of a vmap axis of size 3 sees when the operand is replicated over it."""


def _x(rng):
    return rng.standard_normal((3, 4))


_AX = {"axis_name": "i", "axis_size": 3}

EXAMPLES = {
    "psum": [lambda rng: ([_x(rng)], dict(_AX))],
    "pmax": [lambda rng: ([_x(rng)], dict(_AX))],
    "pmin": [lambda rng: ([_x(rng)], dict(_AX))],
    "all_gather": [lambda rng: ([_x(rng)], dict(_AX, axis=1, tiled=False)),
                   lambda rng: ([_x(rng)], dict(_AX, axis=0, tiled=True))],
    "psum_scatter": [lambda rng: ([_x(rng)], dict(_AX, scatter_dimension=0, tiled=False))],
    "ppermute": [lambda rng: ([_x(rng)], dict(_AX, perm=((0, 1), (2, 0))))],
    "all_to_all": [lambda rng: ([rng.standard_normal((3, 6))],
                                dict(_AX, split_axis=1, concat_axis=0, tiled=True))],
}
