"""Device memory: a caching allocator with statistics, device buffers and host<->device copies.

Freed blocks go back to a per-size free list instead of to the driver (cuMemFree synchronizes
the device). Requests are rounded up (512 B below 1 MiB, 2 MiB above) so blocks are reused across
similar sizes. All of Nova's work on a device runs on one stream, so a block freed by the host may
be handed out again at once: the next use is ordered after the last one on that stream (the
rule PyTorch's caching allocator follows). When the driver reports out-of-memory the cache is
released and the allocation retried once; if it fails again `nova.OutOfMemoryError` names the
request and the statistics.
"""

from __future__ import annotations

import threading

import numpy as np

from nova.core.errors import OutOfMemoryError
from nova.gpu import driver as _drv
from nova.gpu.device import context

_SMALL = 1 << 20
_SMALL_ROUND = 512
_LARGE_ROUND = 2 << 20


def round_size(nbytes: int) -> int:
    """The block size a request of `nbytes` bytes is served with (at least 512 bytes)."""
    nbytes = max(int(nbytes), 1)
    q = _SMALL_ROUND if nbytes < _SMALL else _LARGE_ROUND
    return (nbytes + q - 1) // q * q


class CachingAllocator:
    """Per-device block cache. Not for direct use: see `allocate` and `memory_stats`."""

    def __init__(self, ordinal: int):
        self.ordinal = ordinal
        self.free_blocks: dict[int, list] = {}
        self.lock = threading.Lock()
        self.stats = {"allocated_bytes": 0, "reserved_bytes": 0, "peak_allocated_bytes": 0,
                      "peak_reserved_bytes": 0, "num_allocs": 0, "num_frees": 0,
                      "num_cache_hits": 0, "num_driver_allocs": 0, "num_ooms": 0}

    def _driver_alloc(self, size: int) -> int:
        d = _drv.driver()
        context(self.ordinal)
        _drv.init()
        err, ptr = d.cuMemAlloc(size)
        if err == d.CUresult.CUDA_ERROR_OUT_OF_MEMORY:
            self.empty_cache()
            err, ptr = d.cuMemAlloc(size)
            if err == d.CUresult.CUDA_ERROR_OUT_OF_MEMORY:
                self.stats["num_ooms"] += 1
                raise OutOfMemoryError(
                    f"out of GPU memory on cuda:{self.ordinal}: requested {size} bytes "
                    f"({size / 2**20:.1f} MiB); allocator: {self.describe()}")
        if err != d.CUresult.CUDA_SUCCESS:
            _drv.raise_for("cuMemAlloc", err)
        self.stats["num_driver_allocs"] += 1
        self.stats["reserved_bytes"] += size
        self.stats["peak_reserved_bytes"] = max(self.stats["peak_reserved_bytes"],
                                                self.stats["reserved_bytes"])
        return int(ptr)

    def allocate(self, nbytes: int) -> tuple[int, int]:
        """(device pointer, block size) for a request of nbytes (256-byte aligned)."""
        size = round_size(nbytes)
        with self.lock:
            blocks = self.free_blocks.get(size)
            if blocks:
                ptr = blocks.pop()
                self.stats["num_cache_hits"] += 1
            else:
                ptr = self._driver_alloc(size)
            s = self.stats
            s["num_allocs"] += 1
            s["allocated_bytes"] += size
            s["peak_allocated_bytes"] = max(s["peak_allocated_bytes"], s["allocated_bytes"])
        return ptr, size

    def release(self, ptr: int, size: int) -> None:
        """Returns a block to the cache (not to the driver)."""
        with self.lock:
            self.free_blocks.setdefault(size, []).append(ptr)
            self.stats["num_frees"] += 1
            self.stats["allocated_bytes"] -= size

    def empty_cache(self) -> None:
        """Returns every cached (free) block to the driver."""
        for size, blocks in list(self.free_blocks.items()):
            while blocks:
                ptr = blocks.pop()
                _drv.call("cuMemFree", ptr)
                self.stats["reserved_bytes"] -= size

    def describe(self) -> str:
        s = self.stats
        return (f"allocated {s['allocated_bytes']} B (peak {s['peak_allocated_bytes']} B), "
                f"reserved {s['reserved_bytes']} B, {s['num_allocs']} allocations, "
                f"{s['num_cache_hits']} from cache")


_allocators: dict[int, CachingAllocator] = {}


def allocator(ordinal: int | None = None) -> CachingAllocator:
    ctx = context(ordinal)
    a = _allocators.get(ctx.ordinal)
    if a is None:
        a = _allocators[ctx.ordinal] = CachingAllocator(ctx.ordinal)
    return a


def memory_stats(ordinal: int | None = None) -> dict:
    """The caching allocator's statistics for a device (bytes and counts): allocated_bytes (in
    use), reserved_bytes (held from the driver), their peaks, num_allocs, num_frees,
    num_cache_hits, num_driver_allocs, num_ooms. Raises GPUUnavailableError without a GPU."""
    return dict(allocator(ordinal).stats)


def reset_peak_memory_stats(ordinal: int | None = None) -> None:
    """Restarts the peaks of memory_stats (peak_allocated_bytes, peak_reserved_bytes) from the
    bytes allocated and reserved now, to measure one workload's peak (torch's function of the
    same name). Raises GPUUnavailableError without a GPU."""
    a = allocator(ordinal)
    with a.lock:
        a.stats["peak_allocated_bytes"] = a.stats["allocated_bytes"]
        a.stats["peak_reserved_bytes"] = a.stats["reserved_bytes"]


def empty_cache(ordinal: int | None = None) -> None:
    """Frees the allocator's cached blocks (memory in use is untouched)."""
    allocator(ordinal).empty_cache()


class DeviceBuffer:
    """`nbytes` bytes of device memory from the caching allocator; returned to it on `free()` or
    when garbage-collected. `ptr` is the device address (int)."""

    def __init__(self, nbytes: int, ordinal: int | None = None):
        if nbytes < 0:
            raise ValueError(f"DeviceBuffer: nbytes must be >= 0, got {nbytes}")
        self._alloc = allocator(ordinal)
        self.nbytes = int(nbytes)
        self.ptr, self._block = self._alloc.allocate(self.nbytes)

    def free(self) -> None:
        """Returns the memory to the caching allocator (idempotent)."""
        if self.ptr is not None:
            self._alloc.release(self.ptr, self._block)
            self.ptr = None

    def __del__(self):
        try:
            self.free()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass


def _stream_handle(stream):
    return stream.handle if stream is not None else 0


def copy_host_to_device(dst_ptr: int, src: np.ndarray, stream=None) -> None:
    """Copies a C-contiguous host array to device address dst_ptr (src.nbytes bytes)."""
    src = np.ascontiguousarray(src)
    if src.nbytes:
        _drv.call("cuMemcpyHtoDAsync", dst_ptr, src.ctypes.data, src.nbytes,
                  _stream_handle(stream))
        if stream is not None:
            stream.synchronize()  # the host array may be freed once we return


def copy_device_to_host(dst: np.ndarray, src_ptr: int, stream=None) -> np.ndarray:
    """Copies dst.nbytes bytes from device address src_ptr into the C-contiguous array dst."""
    if not dst.flags.c_contiguous:
        raise ValueError("copy_device_to_host: the destination must be C-contiguous")
    if dst.nbytes:
        _drv.call("cuMemcpyDtoHAsync", dst.ctypes.data, src_ptr, dst.nbytes,
                  _stream_handle(stream))
        if stream is not None:
            stream.synchronize()
        else:
            _drv.call("cuCtxSynchronize")
    return dst


def copy_device_to_device(dst_ptr: int, src_ptr: int, nbytes: int, stream=None) -> None:
    """Queues a device-to-device copy of nbytes bytes on the stream."""
    if nbytes:
        _drv.call("cuMemcpyDtoDAsync", dst_ptr, src_ptr, nbytes, _stream_handle(stream))
