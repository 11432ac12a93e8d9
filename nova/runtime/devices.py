"""Devices and device-resident arrays: `nova.devices()`, `nova.device_put(x, device)`.

A Device names where an array's buffer lives: the host (`CpuDevice(id=0)`) or an NVIDIA GPU
(`CudaDevice(id=N)`, through nova.gpu). `nova.device_put(x, "cuda")` copies x (an Array, a NumPy
array, a Python scalar, or a pytree of them) into GPU memory and returns Arrays that live there;
`np.asarray(y)` copies back (once; the host copy is kept, the array being immutable), and
`nova.device_put(y, "cpu")` gives a host Array. The default device is the first GPU -- or the one
`NOVA_DEVICE` ("cuda:N" or "N") names -- when a GPU is present, else the CPU; `NOVA_DEVICE=cpu`
keeps the default on the host.

Computation follows data, as in JAX: `nova.jit(f)(x)` with an argument on a GPU compiles f for
that GPU (target "cuda:sm_XX" of the device) and runs it there; host arguments of the same call
are uploaded, and the results are GPU Arrays on that device. Eager ops do the same (`x + 1`,
`jnp.sum(x)` on a GPU array: one compiled program per primitive and signature, cached); an
op with no GPU kernel, or one whose kernel cannot be compiled here (not in the kernel cache and
no MLIR bindings), takes the eager host path on the arrays' host copies instead. Eager
`grad` / `vjp` / `jvp` of GPU arguments compute their concrete trace the same way, equation by
equation on the GPU (nova/core/trace.py, Trace.device). Arguments on two different GPUs
are a ValueError. With only host arguments the program runs on the CPU. A program compiled with
`.lower(..., target="cuda:sm_XX").compile()` runs on the GPU whatever its arguments and returns
GPU Arrays as well. Results stay in the executable's buffers until its next call needs them
(then they are copied out, or, passed back as a donated argument, read in place: see
nova/gpu/executable.py), so a training loop keeps its state on the device.
"""

from __future__ import annotations

import contextlib
import os

import numpy as np

from nova.core.array import Array
from nova.core.errors import DeletedArrayError
from nova.core.ir import TensorType

PLATFORMS = ("cpu", "cuda")


class Device:
    """A place an array's buffer lives: `platform` ("cpu" or "cuda") and `id` (GPU ordinal)."""

    __slots__ = ("platform", "id")

    def __init__(self, platform: str, id: int = 0):  # noqa: A002 - JAX's attribute name
        if platform not in PLATFORMS:
            raise ValueError(f"unknown device platform {platform!r}; expected one of {PLATFORMS}")
        self.platform = platform
        self.id = int(id)

    def __repr__(self):
        return f"{'Cpu' if self.platform == 'cpu' else 'Cuda'}Device(id={self.id})"

    def __str__(self):
        return f"{self.platform}:{self.id}"

    def __eq__(self, other):
        return isinstance(other, Device) and (self.platform, self.id) == (other.platform, other.id)

    def __hash__(self):
        return hash((self.platform, self.id))


CPU = Device("cpu", 0)


def _gpu_count() -> int:
    from nova.gpu import device_count

    return device_count()


def devices(backend: str | None = None) -> list[Device]:
    """The devices of `backend` ("cpu" or "cuda"; None: the default backend, CUDA when a GPU is
    present unless NOVA_DEVICE=cpu). Raises RuntimeError for "cuda" without a GPU and
    ValueError for an unknown backend name."""
    if backend is None:
        backend = default_device().platform
    if backend == "cpu":
        return [CPU]
    if backend in ("cuda", "gpu"):
        n = _gpu_count()
        if n == 0:
            raise RuntimeError("nova.devices('cuda'): no NVIDIA GPU (or no driver / cuda-python) "
                               "is available")
        return [Device("cuda", i) for i in range(n)]
    raise ValueError(f"unknown backend {backend!r}; expected 'cpu' or 'cuda'")


def default_device() -> Device:
    """NOVA_DEVICE ("cpu", "cuda", "cuda:N" or "N") if set, else the first GPU when one is
    present, else the CPU. Raises ValueError for a malformed NOVA_DEVICE."""
    spec = os.environ.get("NOVA_DEVICE", "").strip()
    if spec == "cpu":
        return CPU
    if spec:
        from nova.gpu import default_ordinal

        return Device("cuda", default_ordinal())
    return Device("cuda", 0) if _gpu_count() > 0 else CPU


def default_backend() -> str:
    """The platform of the default device: "cuda" or "cpu" (jax.default_backend)."""
    return default_device().platform


def device_count(backend: str | None = None) -> int:
    """The number of devices of `backend` (None: the default backend); see `devices`."""
    return len(devices(backend))


def local_devices(process_index: int | None = None, backend: str | None = None) -> list[Device]:
    """The devices of this process: all of `devices(backend)` (Nova runs in one process).
    Raises ValueError for a process_index other than 0."""
    if process_index not in (None, 0):
        raise ValueError(f"local_devices: process_index {process_index}: Nova runs in one "
                         "process, index 0")
    return devices(backend)


def local_device_count(backend: str | None = None) -> int:
    """len(local_devices(backend))."""
    return device_count(backend)


def process_index() -> int:
    """This process's index among the processes of a computation: always 0 (one process)."""
    return 0


def process_count() -> int:
    """The number of processes of a computation: always 1 (Nova is single-process)."""
    return 1


def _as_device(device) -> Device:
    if device is None:
        return default_device()
    if isinstance(device, Device):
        return device
    if isinstance(device, str):
        name, _, ordinal = device.partition(":")
        if name == "gpu":
            name = "cuda"
        if name not in PLATFORMS or (ordinal and not ordinal.isdigit()):
            raise ValueError(f"device {device!r}: expected 'cpu', 'cuda' or 'cuda:N'")
        return Device(name, int(ordinal) if ordinal else 0)
    raise TypeError(f"device must be a nova Device or a string like 'cuda:0', got "
                    f"{type(device).__name__}")


class GPUArray(Array):
    """An Array whose buffer is GPU memory (a nova.gpu.DeviceBuffer). Values are read through a
    host copy made on first use (`np.asarray`, printing, a CPU program's argument)."""

    __slots__ = ("_buffer", "_device", "_host")
    _on_device = True  # eager ops on it run on its GPU (nova/jit.py _eager_on_device)

    def __init__(self, host: np.ndarray, device: Device):
        from nova.gpu import DeviceBuffer, copy_host_to_device, default_stream

        host = np.asarray(host, order="C")  # (ascontiguousarray would make a 0-d array 1-d)
        self._deleted = False
        self._owned = False  # donation copies it to the host first
        self._aval = TensorType(host.shape, host.dtype)
        self._device = device
        self._buffer = DeviceBuffer(host.nbytes, device.id)
        copy_host_to_device(self._buffer.ptr, host, default_stream(device.id))
        self._host = None
        self._value = None

    @classmethod
    def _from_buffer(cls, buffer, aval: TensorType, device: Device) -> GPUArray:
        """An Array over `buffer` (a DeviceBuffer, or a SlotView lent by a CUDA executable) of
        type `aval` on `device`; no copy."""
        self = cls.__new__(cls)
        self._deleted = False
        self._owned = False
        self._aval = aval
        self._device = device
        self._buffer = buffer
        self._host = None
        self._value = None
        return self

    @property
    def device(self) -> Device:
        return self._device

    @property
    def unsafe_buffer_pointer(self) -> int:
        """The device address of the buffer (for passing to a CUDA kernel)."""
        if self._deleted:
            raise DeletedArrayError(f"unsafe_buffer_pointer: this Array of {self.aval} was "
                                    "deleted")
        return self._buffer.ptr

    def _concrete(self, what: str) -> np.ndarray:
        if self._deleted:
            raise DeletedArrayError(f"{what}: this Array of {self.aval} on {self._device} was "
                                    "deleted (or donated to a jitted call)")
        if self._host is None:
            from nova.gpu import copy_device_to_host, default_stream

            out = np.empty(self.shape, self.dtype)
            # A result lent by an executable (a SlotView) is read under that executable's lock:
            # a call on another thread could otherwise move it (copy-on-write) or overwrite
            # its buffer between reading the address and the copy.
            lock = getattr(self._buffer, "lock", None)
            with lock if lock is not None else contextlib.nullcontext():
                copy_device_to_host(out, self._buffer.ptr, default_stream(self._device.id))
            out.flags.writeable = False  # the cached copy must not be changed through a view
            self._host = out
        return self._host

    def block_until_ready(self):
        """Waits until the GPU work queued so far on this array's device (the call that
        computes it included) has finished; returns self. GPU calls return as soon as their
        work is queued: time them with this (as in JAX) or by reading a result. Raises
        DeletedArrayError for a deleted array."""
        if self._deleted:
            raise DeletedArrayError(f"block_until_ready: this Array of {self.aval} on "
                                    f"{self._device} was deleted (or donated to a jitted call)")
        from nova.gpu import default_stream

        default_stream(self._device.id).synchronize()
        return self

    def __array__(self, dtype=None, copy=None):
        v = self._concrete("np.asarray")
        if dtype is not None and np.dtype(dtype) != v.dtype:
            return v.astype(dtype)
        return v.copy() if copy else v

    def __repr__(self):
        if self._deleted:
            return (f"Array(<deleted>, shape={self.shape}, dtype={self.dtype}, "
                    f"device={self._device})")
        body = np.array2string(self._concrete("repr"), separator=", ", prefix="Array(",
                               threshold=1000, max_line_width=100)
        return f"Array({body}, dtype={self.dtype}, device={self._device})"

    def delete(self) -> None:
        """Returns the device memory to the caching allocator; later use raises."""
        self._deleted = True
        self._buffer.free()
        self._host = None

    def __getstate__(self):
        return {"value": np.array(self._concrete("pickle"))}

    def __setstate__(self, state):  # unpickled on the host
        raise TypeError("a GPU Array cannot be unpickled in place; pickle np.asarray(x) or "
                        "nova.device_put(x, 'cpu') instead")


def _put_leaf(x, device: Device):
    if isinstance(x, GPUArray):
        if device.platform == "cuda" and x.device == device:
            return x
        host = x._concrete("device_put")
    elif isinstance(x, Array):
        host = x._concrete("device_put")
        if device.platform == "cpu":
            return x  # already there (Arrays are immutable: no copy needed)
    else:
        import nova.numpy as jnp  # Nova's dtype rules for NumPy values and Python scalars

        host = np.asarray(jnp.asarray(x))
    if device.platform == "cpu":
        return Array(np.array(host), owned=True)
    return GPUArray(host, device)


def device_put(x, device=None):
    """`x` (an Array, NumPy array, scalar or a pytree of them) placed on `device` (a Device, or
    "cpu", "cuda", "cuda:N"; None: default_device()). Arrays already there are returned as they
    are. Raises GPUUnavailableError (nova.gpu) for a GPU device without one, ValueError for a
    malformed device name or an ordinal out of range."""
    from nova.core.pytree import tree_map

    dev = _as_device(device)
    if dev.platform == "cuda":
        from nova.gpu import device_count

        n = device_count()
        if dev.id >= n:
            if n == 0:
                from nova.gpu import GPUUnavailableError

                raise GPUUnavailableError(f"device_put(..., {dev}): no NVIDIA GPU is available")
            raise ValueError(f"device_put(..., {dev}): GPU ordinal {dev.id} out of range "
                             f"({n} device(s))")
    return tree_map(lambda leaf: _put_leaf(leaf, dev), x)


def _array_device(self) -> Device:
    """The device holding this Array's buffer (the host for every non-GPU Array)."""
    return CPU


def _array_devices(self) -> set:
    """{self.device} (JAX's `Array.devices()`)."""
    return {self.device}


Array.device = property(_array_device)
Array.devices = _array_devices


def block_until_ready(x):
    """Waits until every array of the pytree `x` is computed (jax.block_until_ready) and
    returns x. Host arrays are always ready; GPU arrays wait for the work queued on their
    stream. Leaves that are not arrays are left alone. Raises DeletedArrayError for a donated
    or deleted array."""
    from nova.core.pytree import tree_leaves

    for leaf in tree_leaves(x):
        wait = getattr(leaf, "block_until_ready", None)
        if wait is not None and callable(wait) and not isinstance(leaf, type):
            wait()
    return x


def device_get(x):
    """The pytree `x` with every array copied to a host NumPy array (jax.device_get): nova
    Arrays on any device (GPU arrays are copied back) and NumPy arrays; other leaves (Python
    scalars, strings) are returned as they are. Raises DeletedArrayError for a donated or
    deleted array."""
    import numpy as np

    from nova.core.array import Array
    from nova.core.pytree import tree_map

    def get(leaf):
        if isinstance(leaf, Array):
            return np.asarray(leaf)
        if isinstance(leaf, np.ndarray):
            return leaf.copy()
        return leaf

    return tree_map(get, x)
