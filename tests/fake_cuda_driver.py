"""A stand-in for `cuda.bindings.driver` that runs on the CPU, for testing nova.gpu without a GPU.

Device memory is host memory (one NumPy byte array per allocation, at fake 256-byte-aligned
addresses); copies move bytes; a module is the PTX text, and a launch reads its kernelParams
exactly as the driver would (an array of pointers to 64-bit device addresses) and runs the
kernel's MLIR (registered for its module's PTX) through codegen/cuda/simulate.py. Stream capture records
launches and device-to-device copies into a graph that replays them. Calls return `(CUresult, values...)` tuples as
cuda-python does. It checks nova.gpu's own logic, not its reading of the real API.
"""

from __future__ import annotations

import ctypes
import enum
import re
import types

import numpy as np


class CUresult(enum.IntEnum):
    CUDA_SUCCESS = 0
    CUDA_ERROR_INVALID_VALUE = 1
    CUDA_ERROR_OUT_OF_MEMORY = 2
    CUDA_ERROR_NOT_INITIALIZED = 3
    CUDA_ERROR_INVALID_PTX = 218
    CUDA_ERROR_INVALID_HANDLE = 400
    CUDA_ERROR_ILLEGAL_ADDRESS = 700
    CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED = 900


OK = CUresult.CUDA_SUCCESS
ATTRS = {"COMPUTE_CAPABILITY_MAJOR": 9, "COMPUTE_CAPABILITY_MINOR": 0, "MULTIPROCESSOR_COUNT": 132,
         "MAX_THREADS_PER_BLOCK": 1024, "MAX_SHARED_MEMORY_PER_BLOCK": 49152,
         "MAX_SHARED_MEMORY_PER_BLOCK_OPTIN": 232448, "MAX_REGISTERS_PER_BLOCK": 65536,
         "L2_CACHE_SIZE": 52428800, "WARP_SIZE": 32, "MEMORY_CLOCK_RATE": 3201000,
         "GLOBAL_MEMORY_BUS_WIDTH": 6144}


def _names(prefix, names):
    return types.SimpleNamespace(**{prefix + n: prefix + n for n in names})


class FakeDriver:
    """Create with the total device memory (bytes); `register(ptx, mlir)` says which MLIR
    (a gpu.module text) runs when a module with that PTX is launched."""

    CUresult = CUresult
    CUdevice_attribute = _names("CU_DEVICE_ATTRIBUTE_", ATTRS)
    CUfunction_attribute = _names("CU_FUNC_ATTRIBUTE_", ["NUM_REGS", "SHARED_SIZE_BYTES",
                                                         "MAX_THREADS_PER_BLOCK",
                                                         "MAX_DYNAMIC_SHARED_SIZE_BYTES"])
    CUstream_flags = types.SimpleNamespace(CU_STREAM_NON_BLOCKING=1)
    CUevent_flags = types.SimpleNamespace(CU_EVENT_DEFAULT=0, CU_EVENT_DISABLE_TIMING=2)
    CUstreamCaptureMode = types.SimpleNamespace(CU_STREAM_CAPTURE_MODE_THREAD_LOCAL=1)

    def __init__(self, total_memory: int = 1 << 30):
        self.total = total_memory
        self.mem: dict[int, np.ndarray] = {}
        self.next_addr = 1 << 20
        self.kernels: dict[str, str] = {}  # PTX text -> gpu.module text
        self.capturing: dict[int, list] = {}
        self.launches = 0
        self.calls: list[str] = []
        self._handles = 0
        self.shared_optin = ATTRS["MAX_SHARED_MEMORY_PER_BLOCK_OPTIN"]
        self.dynamic_optin: dict = {}  # (entry, module text) -> opted-in dynamic shared bytes

    def __getattribute__(self, name):
        if name.startswith("cu"):
            object.__getattribute__(self, "calls").append(name)
        return object.__getattribute__(self, name)

    def _handle(self):
        self._handles += 1
        return self._handles

    # --- init, devices, contexts ----------------------------------------------------------------
    def cuInit(self, flags):
        return (OK,)

    def cuDeviceGetCount(self):
        return OK, 1

    def cuDeviceGet(self, ordinal):
        return (OK, ordinal) if ordinal == 0 else (CUresult.CUDA_ERROR_INVALID_VALUE, None)

    def cuDeviceGetAttribute(self, attr, dev):
        return OK, ATTRS[attr.replace("CU_DEVICE_ATTRIBUTE_", "")]

    def cuDeviceGetName(self, length, dev):
        return OK, b"Fake H200\0"

    def cuDeviceTotalMem(self, dev):
        return OK, self.total

    def cuDevicePrimaryCtxRetain(self, dev):
        return OK, self._handle()

    def cuCtxSetCurrent(self, ctx):
        return (OK,)

    def cuCtxSynchronize(self):
        return (OK,)

    def cuGetErrorName(self, err):
        return OK, CUresult(err).name.encode()

    def cuGetErrorString(self, err):
        return OK, b"fake driver error"

    # --- memory -----------------------------------------------------------------------------------
    def cuMemAlloc(self, size):
        if sum(a.nbytes for a in self.mem.values()) + size > self.total:
            return CUresult.CUDA_ERROR_OUT_OF_MEMORY, None
        addr = self.next_addr
        self.next_addr += (size + 255) // 256 * 256 + 256
        self.mem[addr] = np.zeros(size, np.uint8)
        return OK, addr

    def cuMemFree(self, ptr):
        if self.mem.pop(int(ptr), None) is None:
            return (CUresult.CUDA_ERROR_INVALID_VALUE,)
        return (OK,)

    def view(self, addr: int, nbytes: int | None = None) -> np.ndarray:
        """The bytes of device memory from addr (to the end of its allocation)."""
        for base, buf in self.mem.items():
            if base <= addr < base + max(buf.nbytes, 1):
                part = buf[addr - base:]
                return part if nbytes is None else part[:nbytes]
        raise KeyError(f"fake driver: {addr:#x} is not device memory")

    def cuMemcpyHtoDAsync(self, dst, src, n, stream):
        ctypes.memmove(self.view(int(dst), n).ctypes.data, int(src), n)
        return (OK,)

    def cuMemcpyDtoHAsync(self, dst, src, n, stream):
        ctypes.memmove(int(dst), self.view(int(src), n).ctypes.data, n)
        return (OK,)

    def cuMemcpyDtoDAsync(self, dst, src, n, stream):
        if stream in self.capturing:  # a graph node, as the driver records it
            self.capturing[stream].append(("copy", int(dst), int(src), n))
            return (OK,)
        self._copy(("copy", int(dst), int(src), n))
        return (OK,)

    def _copy(self, node) -> None:
        _, dst, src, n = node
        self.view(dst, n)[:] = self.view(src, n)

    # --- streams, events, graphs --------------------------------------------------------------
    def cuStreamCreate(self, flags):
        return OK, self._handle()

    def cuStreamSynchronize(self, stream):
        if stream in self.capturing:
            return (CUresult.CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED,)
        return (OK,)

    def cuStreamDestroy(self, stream):
        return (OK,)

    def cuStreamWaitEvent(self, stream, event, flags):
        return (OK,)

    def cuEventCreate(self, flags):
        return OK, self._handle()

    def cuEventRecord(self, event, stream):
        return (OK,)

    def cuEventSynchronize(self, event):
        return (OK,)

    def cuEventElapsedTime(self, start, end):
        return OK, 0.0

    def cuEventDestroy(self, event):
        return (OK,)

    def cuStreamBeginCapture(self, stream, mode):
        self.capturing[stream] = []
        return (OK,)

    def cuStreamEndCapture(self, stream):
        return OK, ("graph", self.capturing.pop(stream))

    def cuGraphInstantiate(self, graph, flags):
        return OK, ("exec", graph[1])

    def cuGraphLaunch(self, graph_exec, stream):
        for args in graph_exec[1]:
            if args[0] == "copy":
                self._copy(args)
                continue
            err = self._run(*args)
            if err != OK:
                return (err,)
        return (OK,)

    def cuGraphExecDestroy(self, g):
        return (OK,)

    def cuGraphDestroy(self, g):
        return (OK,)

    # --- modules and launches -------------------------------------------------------------------
    def register(self, ptx: str, mlir: str) -> None:
        self.kernels[ptx] = mlir

    def cuModuleLoadData(self, image):
        text = bytes(image).rstrip(b"\0").decode()
        if ".entry" not in text or text not in self.kernels:
            return CUresult.CUDA_ERROR_INVALID_PTX, None
        return OK, ("module", re.findall(r"\.entry\s+(\w+)", text), self.kernels[text])

    def cuModuleUnload(self, module):
        return (OK,)

    def cuModuleGetFunction(self, module, name):
        name = name.decode()
        if name not in module[1]:
            return CUresult.CUDA_ERROR_INVALID_VALUE, None
        return OK, ("function", name, module[2])

    def cuFuncGetAttribute(self, attr, fn):
        return OK, 0

    def cuFuncSetAttribute(self, fn, attr, value):
        if "MAX_DYNAMIC_SHARED_SIZE_BYTES" not in str(attr):
            return (CUresult.CUDA_ERROR_INVALID_VALUE,)
        if value > self.shared_optin:
            return (CUresult.CUDA_ERROR_INVALID_VALUE,)
        self.dynamic_optin[(fn[1], fn[2])] = int(value)
        return (OK,)

    def cuLaunchKernel(self, fn, gx, gy, gz, bx, by, bz, smem, stream, params, extra):
        # As the driver: more than 48 KiB of dynamic shared memory needs the function's opt-in.
        if smem > 48 * 1024 and self.dynamic_optin.get((fn[1], fn[2]), 0) < smem:
            return (CUresult.CUDA_ERROR_INVALID_VALUE,)
        text = fn[2]
        signature = re.search(rf"gpu\.func @{fn[1]}\(([^)]*)\)", text).group(1)
        nargs = signature.count("memref<")
        slots = (ctypes.c_void_p * nargs).from_address(params)
        addrs = [ctypes.c_uint64.from_address(p).value for p in slots]
        args = (fn[1], text, (gx, gy, gz), (bx, by, bz), addrs, int(smem))
        if stream in self.capturing:
            self.capturing[stream].append(args)
            return (OK,)
        return (self._run(*args),)

    def _run(self, entry, text, grid, block, addrs, smem=0):
        from nova.compiler.codegen.cuda.simulate import simulate

        self.launches += 1
        arrays = []
        for a in addrs:
            buf = self.view(a)
            arrays.append(buf[: buf.nbytes // 8 * 8])
        try:
            simulate(text, entry, grid, block, arrays, dynamic_shared_bytes=smem)
        except IndexError:
            return CUresult.CUDA_ERROR_ILLEGAL_ADDRESS
        return OK
