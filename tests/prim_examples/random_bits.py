"""Examples for the threefry2x32 primitive (uint32 words; not differentiable)."""

import numpy as np


def _words(shape):
    def make(rng):
        return [rng.integers(0, 2**32, shape, dtype=np.uint32) for _ in range(4)], {}

    return make


def _extremes(rng):
    # All-zero and all-one words: the known-answer inputs of Random123's kat_vectors.
    z = np.zeros((2, 3), np.uint32)
    o = np.full((2, 3), 0xFFFFFFFF, np.uint32)
    return [z, o, z, o], {}


EXAMPLES = {
    "threefry2x32": [_words((3, 4)), _words((5,)), _extremes],
}
