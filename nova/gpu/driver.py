"""The CUDA driver API through cuda-python (`cuda.bindings.driver`), imported lazily.

Every driver call goes through `call(name, *args)`, which unpacks cuda-python's
`(CUresult, values...)` tuples and turns a failure into a `CudaError` subclass named after the
CUDA error (`CUDA_ERROR_ILLEGAL_ADDRESS` -> `CudaIllegalAddressError`). A machine without the
driver library, without a GPU or without cuda-python raises `GPUUnavailableError` (a
RuntimeError) from the first call that needs the GPU; importing `nova.gpu` never does.

Note (../shared/MLIR_NOTES.md §5): without libcuda, cuda-python's `cuInit` *raises* a RuntimeError
subclass (DynamicLibNotFoundError) instead of returning a CUresult.
"""

from __future__ import annotations

import threading

_lock = threading.Lock()
_driver = None
_init_error: Exception | None = None
_initialized = False


class GPUUnavailableError(RuntimeError):
    """No usable NVIDIA GPU: cuda-python, the driver library (libcuda) or a device is missing."""


class CudaError(RuntimeError):
    """A CUDA driver call failed. Attributes: `name` (e.g. "CUDA_ERROR_INVALID_VALUE"), `code`
    (the CUresult value) and `call` (the driver function)."""

    def __init__(self, call: str, name: str, code: int, detail: str = ""):
        self.call, self.name, self.code = call, name, code
        msg = f"{call} failed: {name} ({code})"
        super().__init__(msg + (f": {detail}" if detail else ""))


class CudaInvalidValueError(CudaError):
    """CUDA_ERROR_INVALID_VALUE / INVALID_HANDLE: a bad argument reached the driver."""


class CudaNotInitializedError(CudaError):
    """CUDA_ERROR_NOT_INITIALIZED / DEINITIALIZED / INVALID_CONTEXT."""


class CudaOutOfMemoryError(CudaError):
    """CUDA_ERROR_OUT_OF_MEMORY from a call other than an allocation (see nova.OutOfMemoryError)."""


class CudaInvalidPTXError(CudaError):
    """CUDA_ERROR_INVALID_PTX / UNSUPPORTED_PTX_VERSION / NO_BINARY_FOR_GPU: the driver rejected
    a module (PTX for a newer ISA than the driver knows, or for another architecture)."""


class CudaLaunchError(CudaError):
    """A kernel launch or the kernel itself failed (LAUNCH_FAILED, LAUNCH_OUT_OF_RESOURCES,
    ILLEGAL_ADDRESS, MISALIGNED_ADDRESS, ...). Errors inside a kernel are sticky: the context
    is unusable afterwards."""


class CudaGraphError(CudaError):
    """Stream capture or graph instantiation failed (STREAM_CAPTURE_*, GRAPH_* errors)."""


_CLASSES = {
    "CUDA_ERROR_INVALID_VALUE": CudaInvalidValueError,
    "CUDA_ERROR_INVALID_HANDLE": CudaInvalidValueError,
    "CUDA_ERROR_NOT_INITIALIZED": CudaNotInitializedError,
    "CUDA_ERROR_DEINITIALIZED": CudaNotInitializedError,
    "CUDA_ERROR_INVALID_CONTEXT": CudaNotInitializedError,
    "CUDA_ERROR_OUT_OF_MEMORY": CudaOutOfMemoryError,
    "CUDA_ERROR_INVALID_PTX": CudaInvalidPTXError,
    "CUDA_ERROR_UNSUPPORTED_PTX_VERSION": CudaInvalidPTXError,
    "CUDA_ERROR_NO_BINARY_FOR_GPU": CudaInvalidPTXError,
    "CUDA_ERROR_INVALID_IMAGE": CudaInvalidPTXError,
    "CUDA_ERROR_LAUNCH_FAILED": CudaLaunchError,
    "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES": CudaLaunchError,
    "CUDA_ERROR_LAUNCH_TIMEOUT": CudaLaunchError,
    "CUDA_ERROR_ILLEGAL_ADDRESS": CudaLaunchError,
    "CUDA_ERROR_MISALIGNED_ADDRESS": CudaLaunchError,
    "CUDA_ERROR_ILLEGAL_INSTRUCTION": CudaLaunchError,
    "CUDA_ERROR_INVALID_PC": CudaLaunchError,
    "CUDA_ERROR_HARDWARE_STACK_ERROR": CudaLaunchError,
}


def error_class(name: str) -> type:
    """The CudaError subclass for a CUDA error name (CudaError itself for the rest)."""
    if name in _CLASSES:
        return _CLASSES[name]
    if name.startswith(("CUDA_ERROR_STREAM_CAPTURE", "CUDA_ERROR_GRAPH")):
        return CudaGraphError
    return CudaError


def driver():
    """The `cuda.bindings.driver` module; GPUUnavailableError if cuda-python is missing."""
    global _driver
    if _driver is None:
        try:
            from cuda.bindings import driver as d
        except ImportError as e:
            raise GPUUnavailableError(
                f"nova.gpu needs cuda-python to use an NVIDIA GPU (pip install cuda-python): {e}"
            ) from None
        _driver = d
    return _driver


def _error_name(d, err) -> str:
    name = getattr(err, "name", None)
    if name:
        return name
    try:
        res, text = d.cuGetErrorName(err)
        if res == d.CUresult.CUDA_SUCCESS:
            return text.decode()
    except Exception:  # noqa: BLE001 - naming an error must not raise another
        pass
    return f"CUresult {int(err)}"


def _error_string(d, err) -> str:
    try:
        res, text = d.cuGetErrorString(err)
        if res == d.CUresult.CUDA_SUCCESS and text:
            return text.decode()
    except Exception:  # noqa: BLE001
        pass
    return ""


def raise_for(name: str, err) -> None:
    """Raises the named exception for a failed CUresult `err` of driver call `name`."""
    d = driver()
    ename = _error_name(d, err)
    raise error_class(ename)(name, ename, int(err), _error_string(d, err))


def call(name: str, *args):
    """Calls driver function `name`; returns its outputs (None, one value, or a tuple).

    Raises GPUUnavailableError when the driver cannot be used, a CudaError subclass naming the
    CUDA error otherwise."""
    d = driver()
    init()
    res = getattr(d, name)(*args)
    err, rest = res[0], res[1:]
    if err != d.CUresult.CUDA_SUCCESS:
        raise_for(name, err)
    if not rest:
        return None
    return rest[0] if len(rest) == 1 else tuple(rest)


def init() -> None:
    """cuInit(0), once per process. Raises GPUUnavailableError with the reason when there is no
    driver library or no device (the reason is remembered: later calls raise it again fast)."""
    global _initialized, _init_error
    if _initialized:
        return
    with _lock:
        if _initialized:
            return
        if _init_error is not None:
            raise GPUUnavailableError(str(_init_error))
        d = driver()
        try:
            (err,) = d.cuInit(0)
        except RuntimeError as e:  # libcuda.so not found (cuda.pathfinder)
            _init_error = GPUUnavailableError(
                "no NVIDIA GPU driver: the CUDA driver library (libcuda.so) cannot be loaded "
                f"({e})")
            raise _init_error from None
        if err != d.CUresult.CUDA_SUCCESS:
            _init_error = GPUUnavailableError(
                f"no usable NVIDIA GPU: cuInit failed with {_error_name(d, err)}")
            raise _init_error
        res = d.cuDeviceGetCount()
        if res[0] != d.CUresult.CUDA_SUCCESS or res[1] == 0:
            _init_error = GPUUnavailableError("no NVIDIA GPU: cuDeviceGetCount reports 0 devices")
            raise _init_error
        _initialized = True


def is_available() -> bool:
    """True when cuda-python, the driver and at least one GPU are present (never raises)."""
    try:
        init()
        return True
    except GPUUnavailableError:
        return False
