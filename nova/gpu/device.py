"""GPU devices: properties queried from the driver, architecture descriptions for cross-compilation,
and the current context (the device's primary context, as the CUDA runtime uses).

`NOVA_DEVICE=cuda:N` (or `N`) chooses the default device; otherwise device 0.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass

from nova.gpu import driver as _drv


@dataclass(frozen=True)
class DeviceProperties:
    """What codegen and the runtime need to know about a GPU (sizes in bytes).

    compute_capability: (major, minor), e.g. (9, 0) for H100/H200; sm_count: streaming
    multiprocessors; max_threads_per_block; max_shared_memory_per_block: static limit (48 KiB);
    max_shared_memory_per_block_optin: the limit a kernel may opt into (dynamic shared memory);
    max_registers_per_block and max_registers_per_thread; l2_cache_size; warp_size;
    memory_bandwidth: peak bytes/s (0 if unknown); total_memory: bytes of device memory.
    """

    name: str
    compute_capability: tuple
    sm_count: int
    max_threads_per_block: int = 1024
    max_shared_memory_per_block: int = 48 * 1024
    max_shared_memory_per_block_optin: int = 48 * 1024
    max_registers_per_block: int = 65536
    max_registers_per_thread: int = 255
    l2_cache_size: int = 0
    warp_size: int = 32
    memory_bandwidth: float = 0.0
    total_memory: int = 0

    @property
    def arch(self) -> str:
        """The PTX target name, e.g. "sm_90"."""
        major, minor = self.compute_capability
        return f"sm_{major}{minor}"

    @property
    def target_arch(self) -> str:
        """The architecture Nova compiles for this device by default: "sm_90a" on compute
        capability 9.0 (Hopper's architecture-specific instructions: wgmma GEMMs), else `arch`.
        `NOVA_CUDA_ARCH` overrides it (e.g. "sm_90" for the portable mma.sync kernels) when it
        names this device's architecture or its "a" variant.

        Raises ValueError when NOVA_CUDA_ARCH names another architecture."""
        want = os.environ.get("NOVA_CUDA_ARCH", "")
        if want:
            if want not in (self.arch, self.arch + "a"):
                raise ValueError(f"NOVA_CUDA_ARCH={want!r} does not run on {self.name} "
                                 f"({self.arch}); use {self.arch!r} or {self.arch + 'a'!r}")
            return want
        return "sm_90a" if self.compute_capability == (9, 0) else self.arch

    def runs(self, arch: str) -> bool:
        """Whether PTX for `arch` ("sm_90", "sm_90a") runs on this device: its own architecture,
        or that architecture's "a" variant (which runs on exactly that compute capability)."""
        return arch in (self.arch, self.arch + "a")


# Cross-compilation targets (no GPU needed): limits from NVIDIA's CUDA C++ Programming Guide,
# "Compute Capabilities" table; SM count and L2 of the flagship part of each architecture.
ARCHS = {
    "sm_80": DeviceProperties("A100 (description)", (8, 0), 108, 1024, 48 * 1024, 163 * 1024,
                              65536, 255, 40 * 2**20, 32, 1.555e12, 40 * 2**30),
    "sm_86": DeviceProperties("GA10x (description)", (8, 6), 84, 1024, 48 * 1024, 99 * 1024,
                              65536, 255, 6 * 2**20, 32, 0.936e12, 24 * 2**30),
    "sm_89": DeviceProperties("AD10x (description)", (8, 9), 128, 1024, 48 * 1024, 99 * 1024,
                              65536, 255, 72 * 2**20, 32, 1.008e12, 24 * 2**30),
    "sm_90": DeviceProperties("H100/H200 (description)", (9, 0), 132, 1024, 48 * 1024,
                              227 * 1024, 65536, 255, 50 * 2**20, 32, 4.8e12, 141 * 2**30),
    "sm_100": DeviceProperties("B200 (description)", (10, 0), 148, 1024, 48 * 1024,
                               227 * 1024, 65536, 255, 126 * 2**20, 32, 8.0e12, 180 * 2**30),
    "sm_120": DeviceProperties("GB20x (description)", (12, 0), 170, 1024, 48 * 1024,
                               99 * 1024, 65536, 255, 96 * 2**20, 32, 1.79e12, 32 * 2**30),
}
ARCHS["sm_90a"] = ARCHS["sm_90"]  # Hopper with its architecture-specific instructions


def describe(arch: str) -> DeviceProperties:
    """The DeviceProperties of a target architecture name ("sm_90"), for compiling without a GPU.

    Raises ValueError for an architecture Nova has no description of."""
    if arch not in ARCHS:
        raise ValueError(f"unknown CUDA architecture {arch!r}; known: {sorted(ARCHS)}")
    return ARCHS[arch]


def device_count() -> int:
    """Number of GPUs (0 when there is no driver or no device; never raises)."""
    if not _drv.is_available():
        return 0
    return _drv.call("cuDeviceGetCount")


def default_ordinal() -> int:
    """The default device: NOVA_DEVICE ("cuda:N" or "N"), else 0. ValueError if malformed."""
    spec = os.environ.get("NOVA_DEVICE", "").strip()
    if not spec:
        return 0
    tail = spec.split(":", 1)[1] if spec.startswith("cuda") and ":" in spec else spec
    if spec == "cuda":
        return 0
    if not tail.isdigit():
        raise ValueError(f"NOVA_DEVICE must be 'cuda', 'cuda:N' or 'N', got {spec!r}")
    return int(tail)


_props_cache: dict[int, DeviceProperties] = {}


def get_device_properties(ordinal: int | None = None) -> DeviceProperties:
    """DeviceProperties of GPU `ordinal` (default: the default device), from cuDeviceGetAttribute.

    Raises GPUUnavailableError without a GPU, ValueError for an ordinal out of range."""
    ordinal = default_ordinal() if ordinal is None else ordinal
    if ordinal in _props_cache:
        return _props_cache[ordinal]
    d = _drv.driver()
    n = _drv.call("cuDeviceGetCount")
    if not 0 <= ordinal < n:
        raise ValueError(f"GPU ordinal {ordinal} out of range: {n} device(s)")
    dev = _drv.call("cuDeviceGet", ordinal)
    A = d.CUdevice_attribute

    def attr(name):
        return _drv.call("cuDeviceGetAttribute", getattr(A, "CU_DEVICE_ATTRIBUTE_" + name), dev)

    raw = _drv.call("cuDeviceGetName", 256, dev)
    name = raw.split(b"\0", 1)[0].decode(errors="replace")
    # Peak bandwidth = 2 (DDR) * memory clock (kHz) * bus width (bits) / 8; informational, and
    # newer drivers deprecate the clock attributes, so 0 when they are refused.
    try:
        bw = 2.0 * attr("MEMORY_CLOCK_RATE") * 1e3 * attr("GLOBAL_MEMORY_BUS_WIDTH") / 8
    except _drv.CudaError:
        bw = 0.0
    props = DeviceProperties(
        name=name,
        compute_capability=(attr("COMPUTE_CAPABILITY_MAJOR"), attr("COMPUTE_CAPABILITY_MINOR")),
        sm_count=attr("MULTIPROCESSOR_COUNT"),
        max_threads_per_block=attr("MAX_THREADS_PER_BLOCK"),
        max_shared_memory_per_block=attr("MAX_SHARED_MEMORY_PER_BLOCK"),
        max_shared_memory_per_block_optin=attr("MAX_SHARED_MEMORY_PER_BLOCK_OPTIN"),
        max_registers_per_block=attr("MAX_REGISTERS_PER_BLOCK"),
        max_registers_per_thread=255,
        l2_cache_size=attr("L2_CACHE_SIZE"),
        warp_size=attr("WARP_SIZE"),
        memory_bandwidth=bw,
        total_memory=int(_drv.call("cuDeviceTotalMem", dev)),
    )
    _props_cache[ordinal] = props
    return props


class Context:
    """The primary context of one device, retained once and made current on the calling thread."""

    def __init__(self, ordinal: int):
        self.ordinal = ordinal
        self.device = _drv.call("cuDeviceGet", ordinal)
        self.handle = _drv.call("cuDevicePrimaryCtxRetain", self.device)
        self.make_current()

    def make_current(self) -> None:
        _drv.call("cuCtxSetCurrent", self.handle)

    def synchronize(self) -> None:
        """Waits for all work of this context (cuCtxSynchronize); raises a kernel's sticky error."""
        self.make_current()
        _drv.call("cuCtxSynchronize")


_contexts: dict[int, Context] = {}
_ctx_lock = threading.Lock()
_tls = threading.local()


def context(ordinal: int | None = None) -> Context:
    """The (process-wide) Context of device `ordinal`, current on this thread afterwards.

    Raises GPUUnavailableError without a GPU."""
    ordinal = default_ordinal() if ordinal is None else ordinal
    with _ctx_lock:
        ctx = _contexts.get(ordinal)
        if ctx is None:
            get_device_properties(ordinal)  # validates the ordinal
            ctx = _contexts[ordinal] = Context(ordinal)
    if getattr(_tls, "current", None) is not ctx:
        ctx.make_current()
        _tls.current = ctx
    return ctx


def synchronize(ordinal: int | None = None) -> None:
    """Waits for all work queued on the device (and raises errors of kernels that failed)."""
    context(ordinal).synchronize()
