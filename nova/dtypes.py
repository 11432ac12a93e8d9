"""nova.dtypes: dtype utilities under jax.dtypes's names (Nova's dtype lattice is
nova/core/dtypes.py; these are its public face)."""

import numpy as np

from nova.core import dtypes as _core
from nova.numpy_api import bfloat16, finfo, iinfo, issubdtype, result_type

__all__ = ["bfloat16", "canonicalize_dtype", "finfo", "iinfo", "issubdtype", "result_type",
           "scalar_type_of"]


def canonicalize_dtype(dtype) -> np.dtype:
    """The np.dtype Nova uses for `dtype` (a NumPy dtype, a type such as float or np.int16, or
    a name such as "bfloat16"): Python's float/int/bool become float32/int32/bool. Raises
    TypeError for a dtype Nova does not support (complex, uint64, object, ...)."""
    return _core.canonicalize(dtype)


def scalar_type_of(x) -> type:
    """The Python scalar type (bool, int or float) of a scalar or an array's elements.
    Raises TypeError for a dtype Nova does not support."""
    d = _core.dtype_of_value(x) if not hasattr(x, "dtype") else _core.canonicalize(x.dtype)
    if _core.is_bool(d):
        return bool
    if _core.is_int(d):
        return int
    return float
