"""Examples for the complex primitives (nova/ops/complex.py). Their derivatives follow JAX's
convention for complex values and are checked against JAX in tests/test_complex.py."""

import numpy as np


def _z(rng, shape=(3, 4)):
    return rng.uniform(-2, 2, shape) + 1j * rng.uniform(-2, 2, shape)


EXAMPLES = {
    "real": [lambda rng: ([_z(rng)], {})],
    "imag": [lambda rng: ([_z(rng).astype(np.complex64)], {})],
    "conj": [lambda rng: ([_z(rng, (5,))], {})],
    "complex": [lambda rng: ([rng.uniform(-2, 2, (3, 4)), rng.uniform(-2, 2, (3, 4))], {})],
    "complex_as_pairs": [lambda rng: ([_z(rng).astype(np.complex64)], {})],
    "pairs_as_complex": [lambda rng: ([rng.uniform(-2, 2, (2, 3, 4))], {})],
}
