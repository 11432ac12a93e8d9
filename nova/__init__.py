"""Nova: a JAX-style functional array framework with its own MLIR compiler.

`nova.numpy` for arrays, `nova.grad`/`value_and_grad`/`vjp`/`jvp` for derivatives (`jacfwd`,
`jacrev`, `hessian` for whole Jacobians; `custom_vjp`, `custom_jvp` for a rule of one's own),
`nova.vmap` to map over a batch axis, `nova.jit` to trace a function into one Program and
compile it. See DESIGN.md (../shared) for the architecture.
"""

import importlib as _importlib
import sys as _sys

from nova import numpy_api as numpy
from nova import ops as _ops  # noqa: F401  (fills the primitive registry)
from nova import dtypes, tree, tree_util
from nova.config import config
from nova.core.array import Array
from nova.core.errors import (
    CompilerError,
    ConcretizationTypeError,
    DeletedArrayError,
    NovaError,
    OutOfMemoryError,
    ShapeError,
    TracerBoolConversionError,
    UnexpectedTracerError,
)
from nova.core.ir import Program, TensorType, parse_program
from nova.core.trace import ensure_compile_time_eval
from nova.batching import vmap
from nova.checkpoint import checkpoint, checkpoint_policies, remat
from nova.ops.structural import checkpoint_name
from nova import control_flow as _control_flow  # noqa: F401  (registers cond, while, scan)
from nova.custom_derivatives import custom_gradient, custom_jvp, custom_vjp
from nova import custom_batching
from nova.callbacks import pure_callback
from nova import debug, experimental
from nova.grad import (
    grad,
    hessian,
    jacfwd,
    jacobian,
    jacrev,
    jvp,
    linear_transpose,
    linearize,
    value_and_grad,
    vjp,
)
from nova.jit import (
    ShapeDtypeStruct,
    clear_caches,
    disable_jit,
    eval_shape,
    jit,
    make_jaxpr,
    make_program,
    typeof,
)
from nova.ops import lax
from nova.pmap import pmap
from nova.runtime.devices import (
    Device,
    block_until_ready,
    default_backend,
    default_device,
    device_count,
    device_get,
    device_put,
    devices,
    local_device_count,
    local_devices,
    process_count,
    process_index,
)

_sys.modules["nova.numpy"] = numpy
_sys.modules["nova.numpy.linalg"] = numpy.linalg
_sys.modules["nova.lax"] = lax

__version__ = "0.1.0"

__all__ = [
    "Array",
    "CompilerError",
    "ConcretizationTypeError",
    "DeletedArrayError",
    "Device",
    "NovaError",
    "OutOfMemoryError",
    "Program",
    "ShapeDtypeStruct",
    "ShapeError",
    "TensorType",
    "TracerBoolConversionError",
    "UnexpectedTracerError",
    "block_until_ready",
    "checkpoint",
    "checkpoint_name",
    "checkpoint_policies",
    "clear_caches",
    "config",
    "custom_batching",
    "custom_gradient",
    "custom_jvp",
    "custom_vjp",
    "debug",
    "default_backend",
    "default_device",
    "device_count",
    "device_get",
    "device_put",
    "devices",
    "disable_jit",
    "dtypes",
    "ensure_compile_time_eval",
    "eval_shape",
    "experimental",
    "grad",
    "hessian",
    "jacfwd",
    "jacobian",
    "jacrev",
    "jit",
    "jvp",
    "lax",
    "linear_transpose",
    "linearize",
    "local_device_count",
    "local_devices",
    "make_jaxpr",
    "make_program",
    "pmap",
    "numpy",
    "parse_program",
    "process_count",
    "process_index",
    "pure_callback",
    "remat",
    "tree",
    "tree_util",
    "typeof",
    "value_and_grad",
    "vjp",
    "vmap",
]


def __getattr__(name):
    # Lazily imported subpackages keep `import nova` fast (no MLIR, no nn/optim until used).
    if name in ("random", "nn", "optim", "scipy", "image"):
        mod = _importlib.import_module(f"nova.{name}")
        globals()[name] = mod
        return mod
    raise AttributeError(f"module 'nova' has no attribute {name!r}")
