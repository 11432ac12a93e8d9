"""nova.gpu: NVIDIA GPUs through cuda-python's driver API (`cuda.bindings.driver`).

Importing this package needs neither a GPU nor cuda-python; the first call that needs the device
raises `GPUUnavailableError` (a RuntimeError) saying what is missing. CUDA failures raise
`CudaError` subclasses named after the CUDA error; allocation failures raise
`nova.OutOfMemoryError` with the request and the allocator's statistics.
"""

from nova.core.errors import OutOfMemoryError
from nova.gpu.device import (
    ARCHS,
    DeviceProperties,
    context,
    default_ordinal,
    describe,
    device_count,
    get_device_properties,
    synchronize,
)
from nova.gpu.driver import (
    CudaError,
    CudaGraphError,
    CudaInvalidPTXError,
    CudaInvalidValueError,
    CudaLaunchError,
    CudaNotInitializedError,
    CudaOutOfMemoryError,
    GPUUnavailableError,
    is_available,
)
from nova.gpu.graph import Graph
from nova.gpu.memory import (
    DeviceBuffer,
    copy_device_to_device,
    copy_device_to_host,
    copy_host_to_device,
    empty_cache,
    memory_stats,
    reset_peak_memory_stats,
)
from nova.gpu.module import Function, LaunchConfig, Module, launch
from nova.gpu.stream import Event, Stream, default_stream

__all__ = [
    "ARCHS", "CudaError", "CudaGraphError", "CudaInvalidPTXError", "CudaInvalidValueError",
    "CudaLaunchError", "CudaNotInitializedError", "CudaOutOfMemoryError", "DeviceBuffer",
    "DeviceProperties", "Event", "Function", "GPUUnavailableError", "Graph", "LaunchConfig",
    "Module", "OutOfMemoryError", "Stream", "context", "copy_device_to_device",
    "copy_device_to_host", "copy_host_to_device", "default_ordinal", "default_stream", "describe",
    "device_count", "empty_cache", "get_device_properties", "is_available", "launch",
    "memory_stats", "reset_peak_memory_stats", "synchronize",
]
