"""Examples for the host-callback primitives (nova/ops/callback.py): NumPy functions as
callbacks, so every sweep can compare them with their references."""

import numpy as np

from nova.core.ir import TensorType
from nova.ops.callback import HostCallback

_SIN = HostCallback(np.sin, "np.sin")
_SEEN: list = []
_RECORD = HostCallback(lambda x: _SEEN.append(np.array(x)), "record")
_F64 = np.dtype(np.float64)

EXAMPLES = {
    "pure_callback": [lambda rng: ([rng.standard_normal((3, 4))],
                                   {"callback": _SIN, "result_types": (TensorType((3, 4), _F64),),
                                    "vmap_method": "sequential"})],
    "io_callback": [lambda rng: ([np.zeros((), np.int32), rng.standard_normal((3, 4))],
                                 {"callback": _RECORD, "result_types": ()})],
}
