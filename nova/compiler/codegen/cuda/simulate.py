"""A reference interpreter of generated `gpu.func` kernels on the CPU, for testing without a GPU.

Every thread of the grid runs in lockstep as one lane of NumPy arrays (a value is an array with
a leading axis of all threads), so a kernel runs one NumPy operation per MLIR operation:
- `scf.if` runs both regions under complementary masks and selects; `scf.for` iterates while any
  thread's induction variable is in range, each thread keeping its own trip count;
- loads and stores see only active threads; an active thread reading or writing outside its
  memref raises IndexError, and a `vector.load/store {alignment = A}` whose address is not a
  multiple of A raises AssertionError (base addresses taken as 256-byte aligned, as cuMemAlloc's);
- workgroup memory has one copy per block (dynamic shared memory too: each `memref.view` of it
  is a buffer of its own, and overlapping views are refused); `gpu.barrier` is a no-op
  (lockstep already orders every store before every later load, so a missing barrier cannot be
  detected), and so is `nvvm.bar.warp.sync`;
- `gpu.shuffle xor` exchanges lanes within each warp of 32;
- atomics: `memref.atomic_rmw` adds every thread's value; `memref.generic_atomic_rmw` runs its
  region for one thread after another;
- `nvgpu.device_async_copy` (cp.async) reads its source at issue (zero-filling past its source
  size) but poisons its destination until the `device_async_wait` that must cover its group
  lands it, so a wait too few or a read too early shows; addresses must be 16-byte aligned;
- `nvgpu.ldmatrix` distributes each warp's 8x8 matrices as the PTX ISA's ldmatrix does (rows
  from lanes 8i..8i+7, 16-byte aligned; .trans for 16-bit elements);
- `nvgpu.mma.sync` m16n8k8 (tf32; operands truncated to their upper 19 bits, as the tensor
  cores read them) and `nvvm.mma.sync` m16n8k16 (f16, bf16) assemble each warp's fragments
  with the PTX ISA layout (see codegen/cuda/mma.py) and multiply in float64, adding the
  float32 accumulator once (the hardware's accumulation order is not modelled);
- `nvvm.wgmma.mma_async` (sm_90a) runs per warpgroup of 128 threads, which must all be active and
  pass the same descriptors; it decodes them (K-major, 128-byte swizzle only) against simulated
  shared addresses (dynamic shared memory starts at DYNAMIC_SMEM_BASE, deliberately not
  1024-aligned, so a kernel that does not align its tiles reads the wrong swizzle), reads tf32
  operands truncated to 19 bits as the tensor cores do; until the `wgmma.wait_group` that
  covers its commit group, extracting an accumulator raises, and so does a store or cp.async
  into the shared bytes an in-flight wgmma reads (the ring's reuse); chained wgmmas may take
  an in-flight accumulator (the hardware orders them); `fence.proxy.async` and `wgmma.fence`
  are no-ops (ordering is not modelled).

What it cannot check: races between threads (lockstep orders everything; only writes into
shared memory an in-flight wgmma reads are caught), the mapping of nvgpu's vector operands to
PTX registers, and anything about real hardware (timing, the driver, PTX itself).
"""

from __future__ import annotations

import math

import numpy as np

_NP = {"f16": np.float16, "f32": np.float32, "f64": np.float64, "i1": np.bool_, "i8": np.int8,
       "i16": np.int16, "i32": np.int32, "i64": np.int64, "index": np.int64}
_UNS = {np.dtype(np.int8): np.uint8, np.dtype(np.int16): np.uint16,
        np.dtype(np.int32): np.uint32, np.dtype(np.int64): np.uint64, np.dtype(np.bool_): np.bool_}
_CMPF = {1: "oeq", 2: "ogt", 3: "oge", 4: "olt", 5: "ole", 6: "one", 7: "ord", 8: "ueq",
         9: "ugt", 10: "uge", 11: "ult", 12: "ule", 13: "une", 14: "uno"}
_CMPI = {0: "eq", 1: "ne", 2: "slt", 3: "sle", 4: "sgt", 5: "sge", 6: "ult", 7: "ule",
         8: "ugt", 9: "uge"}
_MATH = {"exp": np.exp, "exp2": np.exp2, "expm1": np.expm1, "log": np.log, "log2": np.log2,
         "log1p": np.log1p, "tanh": np.tanh, "sinh": np.sinh, "cosh": np.cosh, "sin": np.sin,
         "cos": np.cos, "tan": np.tan, "atan": np.arctan, "sqrt": np.sqrt, "floor": np.floor,
         "ceil": np.ceil, "roundeven": np.rint, "absf": np.abs, "absi": np.abs,
         "rsqrt": lambda x: (1 / np.sqrt(x)).astype(x.dtype),
         "erf": np.vectorize(math.erf, otypes=[np.float64])}
_MATH2 = {"powf": np.power, "atan2": np.arctan2}  # two operands (AdamW's b1 ** count: powf)


# The simulated shared-window address of dynamic shared memory: 16-byte but not 1024-byte
# aligned (wgmma swizzles by absolute address bits).
DYNAMIC_SMEM_BASE = 0x230


def _tf32_bits(x):
    """float32 values as a TF32 tensor-core operand sees them: the low 13 bits dropped."""
    bits = np.ascontiguousarray(x, np.float32).view(np.uint32) & np.uint32(0xFFFFE000)
    return bits.view(np.float32)


def _u(x):
    return x.view(_UNS[x.dtype]) if x.dtype in _UNS else x


def _elem(t) -> str:
    return str(t.element_type) if hasattr(t, "element_type") else str(t)


class _Sim:
    def __init__(self, ir, module, grid, block, dynamic_shared_bytes=0):
        self.ir = ir
        self.grid, self.B = tuple(grid), int(block[0])
        self.nblocks = int(np.prod(self.grid))
        self.T = self.nblocks * self.B
        t = np.arange(self.T, dtype=np.int64)
        self.tid, self.blk = t % self.B, t // self.B
        gx, gy = self.grid[0], self.grid[1]
        self.bid = {"x": self.blk % gx, "y": (self.blk // gx) % gy, "z": self.blk // (gx * gy)}
        self.globals = {}
        self.dynamic = set()  # extern workgroup globals: the launch's dynamic shared memory
        self.dynamic_bytes = int(dynamic_shared_bytes)
        self.views: list = []  # (byte offset, bytes) of the views taken of it
        self.in_flight: list = []  # cp.async copies not yet committed to a group
        self.groups: list = []  # committed groups, oldest first, each a list of copies
        for op in module.regions[0].blocks[0].operations:
            if op.operation.name == "memref.global":
                name = ir.StringAttr(op.attributes["sym_name"]).value
                mt = op.attributes["type"].value
                if "initial_value" not in op.attributes and "workgroup" in str(mt):
                    self.dynamic.add(name)
                    continue
                data = np.array(op.attributes["initial_value"]).astype(_NP[_elem(mt)])
                self.globals[name] = data.reshape(list(mt.shape))
        self.env: dict = {}
        self.shared = set()  # ids of workgroup arrays (indexed by block first)
        self.view_at: dict = {}  # id(view buffer) -> (shared address, buffer)
        self.wgmma_pending: list = []  # shared reads of wgmmas not yet committed
        self.wgmma_groups: list = []  # committed, not yet waited groups, oldest first

    # --- values ---------------------------------------------------------------------------------
    def uniform(self, value, dtype):
        return np.broadcast_to(np.asarray(value, dtype), (self.T,)).copy()

    def const(self, op, t):
        attr = op.attributes["value"]
        if isinstance(t, self.ir.VectorType):
            dt = _NP[_elem(t)]
            if attr.is_splat:
                v = attr.get_splat_value().value
                data = np.full(list(t.shape), v, dt)
            else:
                data = np.array(attr).astype(dt).reshape(list(t.shape))
            return np.broadcast_to(data, (self.T, *data.shape)).copy()
        return self.uniform(attr.value, _NP[_elem(t)])

    # --- memory ---------------------------------------------------------------------------------
    def _address(self, mem, idx, mask, width=1):
        """Flat element offsets per active thread (raises IndexError when out of range)."""
        arr = self.env[mem]
        shape = arr.shape[1:] if id(arr) in self.shared else arr.shape
        flat = np.zeros(self.T, np.int64)
        for d, (i, n) in enumerate(zip(idx, shape, strict=True)):
            last = d == len(shape) - 1
            bad = mask & ((i < 0) | (i + (width if last else 1) > n))
            if bad.any():
                t = int(np.argmax(bad))
                raise IndexError(f"thread {t}: index {[int(x[t]) for x in idx]} (+{width}) out of "
                                 f"range for memref {tuple(shape)}")
            flat = flat * n + np.where(mask, i, 0)
        if id(arr) in self.shared:
            flat = flat + self.blk * int(np.prod(shape))
        return arr.reshape(-1), flat

    def _check_alignment(self, op, flat, itemsize, mask):
        if "alignment" in op.attributes:
            a = self.ir.IntegerAttr(op.attributes["alignment"]).value
            bad = mask & ((flat * itemsize) % a != 0)
            if bad.any():
                byte = int(flat[bad][0]) * itemsize
                raise AssertionError(f"{op.operation.name} claims alignment {a} but thread "
                                     f"{int(np.argmax(bad))} accesses byte {byte}")

    def load(self, op, mask, width=0):
        mem, *idx = op.operands
        flat_arr, flat = self._address(mem, [self.env[i] for i in idx], mask, max(width, 1))
        if not width:
            return flat_arr[flat]
        self._check_alignment(op, flat, flat_arr.itemsize, mask)
        return flat_arr[flat[:, None] + np.arange(width)]

    def store(self, op, mask, width=0):
        val, mem, *idx = op.operands
        v = self.env[val]
        flat_arr, flat = self._address(mem, [self.env[i] for i in idx], mask, max(width, 1))
        if id(self.env[mem]) in self.view_at:
            self.check_wgmma_hazard(self.env[mem], flat[:, None] + np.arange(max(width, 1)),
                                    mask, op.operation.name)
        if width:
            self._check_alignment(op, flat, flat_arr.itemsize, mask)
            flat_arr[(flat[:, None] + np.arange(width))[mask]] = v[mask]
        else:
            flat_arr[flat[mask]] = v[mask]

    def view(self, op, ins, res_t):
        """memref.view of the dynamic shared memory: a workgroup array of its own per view
        (views must not overlap: overlapping ones raise NotImplementedError)."""
        if not isinstance(ins[0], tuple):
            raise NotImplementedError("simulate: memref.view of anything but dynamic shared memory")
        offset = ins[1]
        if np.any(offset != offset[0]):
            raise NotImplementedError("simulate: memref.view at a per-thread offset")
        start = int(offset[0])
        dt = _NP[_elem(res_t)]
        nbytes = int(np.prod(res_t.shape)) * np.dtype(dt).itemsize
        if start % 16 or start + nbytes > ins[0][1]:
            raise IndexError(f"simulate: view of {nbytes} B at byte {start} of {ins[0][1]} B "
                             "(16-byte aligned, inside) of dynamic shared memory")
        for s0, n0 in self.views:
            if start < s0 + n0 and s0 < start + nbytes:
                raise NotImplementedError("simulate: overlapping views of dynamic shared memory")
        self.views.append((start, nbytes))
        buf = np.zeros([self.nblocks] + list(res_t.shape), dt)
        self.shared.add(id(buf))
        self.view_at[id(buf)] = (DYNAMIC_SMEM_BASE + start, buf)
        return buf

    def shared_address(self, mem):
        """memref.extract_aligned_pointer_as_index of dynamic shared memory or a view of it."""
        if isinstance(mem, tuple):
            return self.uniform(DYNAMIC_SMEM_BASE, np.int64)
        if id(mem) in self.view_at:
            return self.uniform(self.view_at[id(mem)][0], np.int64)
        raise NotImplementedError("simulate: the address of anything but dynamic shared memory")

    def _read_operand(self, desc: int, rows: int, k: int, ty: str, block: int):
        """The rows x k operand a wgmma descriptor points to, in float64 (PTX ISA, "Matrix
        Descriptor Format"; K-major, 128-byte swizzle: byte address bits 4-6 ^= bits 7-9)."""
        start = (desc & 0x3FFF) << 4
        sbo = ((desc >> 32) & 0x3FFF) << 4
        if desc >> 62 != 1 or (desc >> 49) & 7:
            raise NotImplementedError(f"simulate: wgmma descriptor {desc:#x} (only 128-byte "
                                      "swizzle with base offset 0)")
        size = 2 if ty in ("f16", "bf16") else 4
        r, kk = np.arange(rows)[:, None], np.arange(k)[None, :]
        logical = start + (r // 8) * sbo + (r % 8) * 128 + kk * size
        phys = logical ^ (((logical >> 7) & 7) << 4)
        for at, buf in self.view_at.values():
            nbytes = buf[block].nbytes
            if at <= phys.min() and phys.max() + size <= at + nbytes:
                if buf.itemsize != size:
                    raise AssertionError(f"wgmma reads {ty} from a buffer of {buf.dtype}")
                idx = (phys - at) // size
                vals = buf[block].reshape(-1)[idx]
                self.wgmma_pending.append((id(buf), int(idx.min()), int(idx.max()) + 1))
                break
        else:
            raise IndexError(f"wgmma descriptor {desc:#x} reads bytes {int(phys.min())}.."
                             f"{int(phys.max())} outside every shared view")
        if ty == "tf32":  # the tensor cores read the upper 19 bits
            return _tf32_bits(vals).astype(np.float64)
        if ty == "bf16":
            return (vals.view(np.uint16).astype(np.uint32) << 16).view(np.float32).astype(
                np.float64)
        return vals.astype(np.float64)

    def wgmma(self, op, ins, mask):
        """wgmma.mma_async m64nNkK, D += A B with A and B from shared memory (see the module
        docstring); returns NaN for every thread until its wait lands the values."""
        acc, da, db = ins
        shape = dict(kv.split(" = ") for kv in
                     str(op.attributes["shape"]).split("<")[1].rstrip(">").split(", "))
        m, n, k = int(shape["m"]), int(shape["n"]), int(shape["k"])
        attr = {name: str(op.attributes[name]).split("<")[-1].rstrip(">")
                for name in ("typeA", "typeB", "layoutA", "layoutB", "scaleA", "scaleB",
                             "scaleD")}
        if (attr["layoutA"], attr["layoutB"]) != ("row", "col") or m != 64 or \
                {attr["scaleA"], attr["scaleB"], attr["scaleD"]} != {"one"}:
            raise NotImplementedError(f"simulate: wgmma {attr} of shape {shape}")
        out = np.array(acc, np.float32, copy=True)
        lane = np.arange(128) % 32
        w = np.arange(128) // 32
        cols = np.arange(n // 2)
        rows = (16 * w + lane // 4)[:, None] + 8 * ((cols // 2) % 2)[None, :]
        colj = (8 * (cols // 4))[None, :] + (2 * (lane % 4))[:, None] + (cols % 2)[None, :]
        for b in range(self.nblocks):
            for g in range(self.B // 128):
                th = b * self.B + 128 * g + np.arange(128)
                if not mask[th].any():
                    continue
                if not mask[th].all():
                    raise AssertionError("wgmma issued by part of a warpgroup")
                if np.any(da[th] != da[th[0]]) or np.any(db[th] != db[th[0]]):
                    raise AssertionError("wgmma descriptors differ within a warpgroup")
                A = self._read_operand(int(da[th[0]]), 64, k, attr["typeA"], b)
                Bt = self._read_operand(int(db[th[0]]), n, k, attr["typeB"], b)
                D = A @ Bt.T
                out[th] = (D[rows, colj] + out[th]).astype(np.float32)
        return out

    def wgmma_wait(self, op) -> None:
        """wgmma.wait_group N: every committed group but the N most recent completes."""
        keep = self.ir.IntegerAttr(op.attributes["group"]).value
        del self.wgmma_groups[:max(len(self.wgmma_groups) - keep, 0)]

    def check_wgmma_hazard(self, arr, flat, mask, what: str) -> None:
        """Raises when an active thread writes shared elements an in-flight wgmma reads."""
        for buf, lo, hi in [r for g in self.wgmma_groups for r in g] + self.wgmma_pending:
            if buf != id(arr):
                continue
            per = int(np.prod(arr.shape[1:]))
            local = flat.reshape(len(flat), -1) - (self.blk * per)[:, None]
            if np.any(mask[:, None] & (local >= lo) & (local < hi)):
                raise AssertionError(f"{what} into shared memory an in-flight wgmma reads "
                                     "(a stage rewritten before its wait_group)")

    def ldmatrix(self, op, mask, res_t):
        """ldmatrix.sync.aligned.m8n8.xN[.trans].b16: lanes 8i .. 8i + 7 of each warp give the
        16-byte rows of matrix i; lane L receives, of each matrix, the 32 bits at row L / 4,
        word L % 4 (with .trans: the 16-bit values at rows 2 (L % 4) and 2 (L % 4) + 1 of
        column L / 4). Each row address must be 16-byte aligned."""
        tiles = self.ir.IntegerAttr(op.attributes["numTiles"]).value
        trans = self.ir.BoolAttr(op.attributes["transpose"]).value
        mem, *idx = op.operands
        lane = np.arange(self.T) % 32
        gives = mask & (lane < 8 * tiles)
        arr = self.env[mem]
        size = arr.dtype.itemsize
        epr = 16 // size  # elements per 16-byte row
        flat_arr, flat = self._address(mem, [self.env[i] for i in idx], gives, epr)
        if np.any(gives & ((flat * size) % 16 != 0)):
            raise AssertionError("nvgpu.ldmatrix: a row address is not 16-byte aligned")
        rows = flat_arr[np.where(gives, flat, 0)[:, None] + np.arange(epr)]  # (T, epr)
        w = self.T // 32
        mats = rows.reshape(w, 32, epr)[:, :8 * tiles].reshape(w, tiles, 8, epr)
        L = np.arange(32)
        if trans:
            if size != 2:
                raise NotImplementedError("simulate: ldmatrix .trans of 32-bit elements")
            out = np.stack([mats[:, :, 2 * (L % 4) + j, L // 4] for j in range(2)], axis=-1)
        elif size == 2:
            out = np.stack([mats[:, :, L // 4, 2 * (L % 4) + j] for j in range(2)], axis=-1)
        else:
            out = mats[:, :, L // 4, L % 4][..., None]
        # (w, tiles, 32, k) -> (T, tiles, k)
        return np.ascontiguousarray(out.transpose(0, 2, 1, 3)).reshape(
            (self.T, *res_t.shape)).astype(_NP[_elem(res_t)], copy=False)

    def async_copy(self, op, mask):
        """cp.async of dstElements elements: the first srcElements (all when absent) read from
        the source at issue, the rest zero-filled. Until a wait lands it, the destination holds
        poison (NaN, or 0x7fc0 in 16-bit integers: bf16's NaN), so a read before the covering
        `device_async_wait` shows in the results. Both addresses must be aligned to the copy's
        size (16 bytes for `bypassL1`, cp.async.cg). Returns a dummy token."""
        v = op.opview
        width = self.ir.IntegerAttr(v.dstElements).value
        n = self.env[v.srcElements] if v.srcElements is not None else self.uniform(width, np.int64)
        if np.any(mask & (n > 0) & (n < width)):
            raise NotImplementedError("simulate: partial cp.async chunks")
        full = mask & (n > 0)
        src, s_flat = self._address(v.src, [self.env[i] for i in v.srcIndices], full, width)
        dst, d_flat = self._address(v.dst, [self.env[i] for i in v.dstIndices], mask, width)
        if id(self.env[v.dst]) in self.view_at:
            self.check_wgmma_hazard(self.env[v.dst], d_flat[:, None] + np.arange(width), mask,
                                    "cp.async")
        size = width * dst.itemsize
        if "bypassL1" in op.attributes and size != 16:
            raise AssertionError(f"cp.async.cg copies 16 bytes, not {size}")
        for flat, arr, live in ((s_flat, src, full), (d_flat, dst, mask)):
            if np.any(live & ((flat * arr.itemsize) % size != 0)):
                raise AssertionError(f"cp.async of {size} B at an address not {size}-aligned")
        vals = np.zeros((self.T, width), dst.dtype)
        vals[full] = src[s_flat[full, None] + np.arange(width)]
        at = (d_flat[:, None] + np.arange(width))[mask]
        dst[at] = np.nan if np.issubdtype(dst.dtype, np.floating) else 0x7FC0
        self.in_flight.append((dst, at, vals[mask]))
        return np.zeros(self.T, np.int32)

    def async_wait(self, op) -> None:
        """device_async_wait {numGroups = N}: every committed group but the N most recent
        lands (groups are the block-uniform sequence of create_group ops)."""
        keep = (self.ir.IntegerAttr(op.attributes["numGroups"]).value
                if "numGroups" in op.attributes else 0)
        while len(self.groups) > keep:
            for dst, at, vals in self.groups.pop(0):
                dst[at] = vals

    # --- execution ------------------------------------------------------------------------------
    def run_block(self, block, mask):
        for op in block.operations:
            name = op.operation.name
            if name in ("scf.yield", "gpu.return", "memref.atomic_yield"):
                return [self.env[v] for v in op.operands]
            self.run_op(op, name, mask)
        return []

    def run_op(self, op, name, mask):
        env, ir = self.env, self.ir
        ins = [env[v] for v in op.operands] if name not in ("scf.for",) else None
        res_t = op.results[0].type if len(op.results) else None
        if name == "arith.constant":
            out = self.const(op, res_t)
        elif name == "gpu.thread_id":
            out = self.tid.copy()
        elif name == "gpu.block_id":
            out = self.bid[str(op.attributes["dimension"]).split()[-1].strip(">")].copy()
        elif name in ("gpu.barrier", "nvvm.bar.warp.sync"):
            return
        elif name == "gpu.shuffle":
            x, off = ins[0], ins[1]
            partner = np.arange(self.T) ^ off.astype(np.int64)
            env[op.results[0]] = x[partner]
            env[op.results[1]] = np.ones(self.T, bool)
            return
        elif name == "memref.load":
            out = self.load(op, mask)
        elif name == "memref.store":
            return self.store(op, mask)
        elif name == "vector.load":
            out = self.load(op, mask, res_t.shape[0])
        elif name == "vector.store":
            return self.store(op, mask, op.operands[0].type.shape[0])
        elif name == "memref.atomic_rmw":
            val, mem, *idx = op.operands
            flat_arr, flat = self._address(mem, [env[i] for i in idx], mask)
            old = flat_arr[flat]
            kind = ir.IntegerAttr(op.attributes["kind"]).value  # arith::AtomicRMWKind
            if kind not in (0, 1):  # addf, addi
                raise NotImplementedError(f"simulate: atomic_rmw kind {kind}")
            np.add.at(flat_arr, flat[mask], env[val][mask])  # every thread's add lands
            out = old
        elif name == "memref.generic_atomic_rmw":
            out = self.run_cas(op, mask)
        elif name == "memref.get_global":
            sym = ir.FlatSymbolRefAttr(op.attributes["name"]).value
            out = ("dynamic", 0) if sym in self.dynamic else self.globals[sym]
        elif name == "memref.reinterpret_cast" and isinstance(ins[0], tuple):
            size = int(np.prod(res_t.shape)) * np.dtype(_NP[_elem(res_t)]).itemsize
            if size > self.dynamic_bytes:
                raise IndexError(f"simulate: the kernel takes {size} B of dynamic shared memory, "
                                 f"the launch gives {self.dynamic_bytes} B")
            out = ("dynamic", size)
        elif name == "memref.view":
            out = self.view(op, ins, res_t)
        elif name == "nvgpu.device_async_copy":
            out = self.async_copy(op, mask)
        elif name == "nvgpu.device_async_create_group":
            self.groups.append(self.in_flight)
            self.in_flight = []
            out = np.zeros(self.T, np.int32)
        elif name == "nvgpu.device_async_wait":
            return self.async_wait(op)
        elif name == "nvgpu.ldmatrix":
            out = self.ldmatrix(op, mask, res_t)
        elif name == "nvvm.mma.sync":
            out = self._mma16(op, ins)
        elif name == "memref.extract_aligned_pointer_as_index":
            out = self.shared_address(ins[0])
        elif name == "llvm.mlir.zero":  # a struct of f32 accumulators
            out = np.zeros((self.T, str(res_t).count("f32")), np.float32)
        elif name in ("nvvm.fence.proxy", "nvvm.wgmma.fence.aligned"):
            return
        elif name == "nvvm.wgmma.mma_async":
            out = self.wgmma(op, ins, mask)
        elif name == "nvvm.wgmma.commit.group.sync.aligned":
            if self.wgmma_pending:
                self.wgmma_groups.append(self.wgmma_pending)
            self.wgmma_pending = []
            return
        elif name == "nvvm.wgmma.wait.group.sync.aligned":
            return self.wgmma_wait(op)
        elif name == "llvm.extractvalue":
            if self.wgmma_groups or self.wgmma_pending:
                raise AssertionError("an accumulator read while a wgmma is in flight (no "
                                     "wgmma.wait_group covers it)")
            pos = list(ir.DenseI64ArrayAttr(op.attributes["position"]))
            out = ins[0][(slice(None), *pos)]
        elif name == "llvm.bitcast":  # i32 -> vector<2xf16> (the f16 mma operands)
            out = np.ascontiguousarray(ins[0]).view(_NP[_elem(res_t)]).reshape(
                (self.T, *getattr(res_t, "shape", ())))
        elif name == "scf.if":
            return self.run_if(op, ins[0], mask)
        elif name == "scf.for":
            return self.run_for(op, mask)
        else:
            out = self.compute(op, name, ins, res_t)
        env[op.results[0]] = out

    def run_cas(self, op, mask):
        """generic_atomic_rmw: the active threads' updates applied one after another (in thread
        order), each region run for one thread on the element's current value."""
        mem, *idx = op.operands
        flat_arr, flat = self._address(mem, [self.env[i] for i in idx], mask)
        block = op.regions[0].blocks[0]
        old = flat_arr[flat].copy()
        for t in np.flatnonzero(mask):
            self.env[block.arguments[0]] = np.full(self.T, flat_arr[flat[t]])
            only = np.zeros(self.T, bool)
            only[t] = True
            (new,) = self.run_block(block, only)
            old[t] = flat_arr[flat[t]]
            flat_arr[flat[t]] = new[t]
        return old

    def run_if(self, op, cond, mask):
        then = self.run_block(op.regions[0].blocks[0], mask & cond)
        has_else = len(op.regions[1].blocks) > 0
        other = self.run_block(op.regions[1].blocks[0], mask & ~cond) if has_else else []
        for r, a, b in zip(op.results, then, other, strict=True):
            c = cond.reshape(cond.shape + (1,) * (a.ndim - 1))
            self.env[r] = np.where(c, a, b)

    def run_for(self, op, mask):
        lb, ub, step, *inits = [self.env[v] for v in op.operands]
        body = op.regions[0].blocks[0]
        iv_arg, *carried = body.arguments
        iv = lb.copy()
        vals = [np.array(v, copy=True) for v in inits]
        while True:
            active = mask & (iv < ub)
            if not active.any():
                break
            self.env[iv_arg] = iv
            for a, v in zip(carried, vals, strict=True):
                self.env[a] = v
            new = self.run_block(body, active)
            for k, n in enumerate(new):
                m = active.reshape(active.shape + (1,) * (n.ndim - 1))
                vals[k] = np.where(m, n, vals[k])
            iv = np.where(active, iv + step, iv)
        for r, v in zip(op.results, vals, strict=True):
            self.env[r] = v

    def compute(self, op, name, x, res_t):
        dialect, _, kind = name.partition(".")
        dt = _NP[_elem(res_t)]
        if dialect == "math" and kind in _MATH:
            return _MATH[kind](x[0]).astype(dt)
        with np.errstate(all="ignore"):
            if dialect == "math" and kind in _MATH2:
                return _MATH2[kind](x[0], x[1]).astype(dt)
            return self._arith(op, kind, x, dt, res_t)

    def _arith(self, op, kind, x, dt, res_t):
        ir = self.ir
        simple = {"addf": np.add, "subf": np.subtract, "mulf": np.multiply, "divf": np.divide,
                  "maximumf": np.maximum, "minimumf": np.minimum, "addi": np.add,
                  "subi": np.subtract, "muli": np.multiply, "andi": np.bitwise_and,
                  "ori": np.bitwise_or, "xori": np.bitwise_xor, "maxsi": np.maximum,
                  "minsi": np.minimum, "copysign": np.copysign, "remf": np.fmod}
        if np.dtype(dt) == np.bool_ and kind in ("addi", "subi", "muli"):  # i1 arithmetic
            return (np.logical_and if kind == "muli" else np.logical_xor)(x[0], x[1])
        if kind in simple:
            return simple[kind](x[0], x[1]).astype(dt)
        if kind in ("maxui", "minui"):
            f = np.maximum if kind == "maxui" else np.minimum
            return f(_u(x[0]), _u(x[1])).view(dt)
        if kind == "negf":
            return -x[0]
        if kind == "fma":
            return (x[0].astype(np.float64) * x[1] + x[2]).astype(dt)
        if kind in ("divui", "remui", "divsi", "remsi"):
            a, b = (_u(x[0]), _u(x[1])) if kind.endswith("ui") else (x[0], x[1])
            safe = np.where(b == 0, 1, b)
            if kind.startswith("div"):
                q = np.trunc(a / safe).astype(a.dtype) if kind == "divsi" else a // safe
            else:
                q = np.fmod(a, safe) if kind == "remsi" else a % safe
            return q.astype(a.dtype).view(dt) if kind.endswith("ui") else q.astype(dt)
        if kind in ("shli", "shrsi", "shrui"):
            a = _u(x[0]) if kind == "shrui" else x[0]
            f = np.left_shift if kind == "shli" else np.right_shift
            return f(a, x[1].astype(a.dtype)).astype(a.dtype).view(dt)
        if kind == "cmpf":
            p = _CMPF[ir.IntegerAttr(op.attributes["predicate"]).value]
            a, b = x
            unordered = np.isnan(a) | np.isnan(b)
            base = {"eq": a == b, "gt": a > b, "ge": a >= b, "lt": a < b, "le": a <= b,
                    "ne": a != b}
            if p in ("ord", "uno"):
                return ~unordered if p == "ord" else unordered
            r = base[p[1:]] if p[1:] in base else None
            return (r & ~unordered) if p[0] == "o" else (r | unordered)
        if kind == "cmpi":
            p = _CMPI[ir.IntegerAttr(op.attributes["predicate"]).value]
            a, b = (_u(x[0]), _u(x[1])) if p[0] == "u" else (x[0], x[1])
            key = p[1:] if p[0] in "su" else p
            return {"eq": a == b, "ne": a != b, "lt": a < b, "le": a <= b, "gt": a > b,
                    "ge": a >= b}[key]
        if kind == "select":
            c = x[0]
            c = c.reshape(c.shape + (1,) * (x[1].ndim - c.ndim))
            return np.where(c, x[1], x[2])
        if kind == "bitcast":
            return x[0].view(dt)
        if kind in ("extui", "index_castui"):
            return _u(x[0]).astype(_UNS.get(np.dtype(dt), dt)).astype(dt)
        if kind in ("extsi", "trunci", "extf", "truncf", "sitofp", "fptosi", "index_cast"):
            return x[0].astype(dt)
        if kind in ("uitofp", "fptoui"):
            return (_u(x[0]) if kind == "uitofp" else x[0]).astype(dt)
        if kind == "broadcast":
            shape = list(res_t.shape)
            return np.broadcast_to(x[0].reshape((self.T,) + (1,) * len(shape)),
                                   (self.T, *shape)).copy()
        if kind == "reduction":
            k = str(op.attributes["kind"]).split("<")[-1].strip(">")
            red = {"add": np.sum, "mul": np.prod, "maximumf": np.max, "minimumf": np.min,
                   "maxsi": np.max, "minsi": np.min, "maxnumf": np.nanmax, "minnumf": np.nanmin}
            if k in ("maxui", "minui"):
                f = np.max if k == "maxui" else np.min
                return f(_u(x[0]), axis=1).view(dt)
            return red[k](x[0], axis=1).astype(dt)
        if kind == "from_elements":
            return np.stack(x, axis=1).reshape((self.T, *res_t.shape))
        if kind == "extract":
            pos = list(ir.DenseI64ArrayAttr(op.attributes["static_position"]))
            return x[0][(slice(None), *pos)]
        if kind == "mma.sync":
            return self._mma(*x)
        raise NotImplementedError(f"simulate: no rule for {op.operation.name}")

    def _mma(self, a, b, c):
        """D = A B + C for m16n8k8 tf32 per warp, fragments in the PTX ISA layout; the operands
        truncated to their upper 19 bits, as the tensor cores read them."""
        a, b = _tf32_bits(a), _tf32_bits(b)
        w = self.T // 32
        lane = np.arange(32)
        g, t = lane // 4, lane % 4
        A = np.zeros((w, 16, 8), np.float32)
        Bm = np.zeros((w, 8, 8), np.float32)
        C = np.zeros((w, 16, 8), np.float32)
        a, b, c = a.reshape(w, 32, 4), b.reshape(w, 32, 2), c.reshape(w, 32, 2, 2)
        A[:, g, t], A[:, g + 8, t] = a[..., 0], a[..., 1]
        A[:, g, t + 4], A[:, g + 8, t + 4] = a[..., 2], a[..., 3]
        Bm[:, t, g], Bm[:, t + 4, g] = b[..., 0], b[..., 1]
        for h in range(2):
            for j in range(2):
                C[:, g + 8 * h, 2 * t + j] = c[..., h, j]
        D = np.matmul(A.astype(np.float64), Bm).astype(np.float32) + C
        out = np.empty((w, 32, 2, 2), np.float32)
        for h in range(2):
            for j in range(2):
                out[..., h, j] = D[:, g + 8 * h, 2 * t + j]
        return out.reshape(self.T, 2, 2)


    def _mma16(self, op, ins):
        """nvvm.mma.sync m16n8k16 (f16 or bf16 operands, f32 accumulators), fragments in the PTX
        ISA layout (see codegen/cuda/mma.py); the result struct as an array of 4 per thread."""
        shape = str(op.attributes["shape"])
        kind = str(op.attributes["multiplicandAPtxType"])
        if "k = 16" not in shape or "m = 16" not in shape or "n = 8" not in shape:
            raise NotImplementedError(f"simulate: nvvm.mma.sync of shape {shape}")

        def pair(r):  # a register -> its two values (low half first) in float64
            if r.dtype == np.float16:
                return r.astype(np.float64)
            bits = r.astype(np.int32).view(np.uint32)
            halves = np.stack([bits & 0xFFFF, bits >> 16], axis=-1).astype(np.uint32)
            if "bf16" in kind:
                return (halves << 16).view(np.float32).astype(np.float64)
            if "f16" in kind:
                return halves.astype(np.uint16).view(np.float16).astype(np.float64)
            raise NotImplementedError(f"simulate: nvvm.mma.sync of {kind}")

        w = self.T // 32
        lane = np.arange(32)
        g, t = lane // 4, lane % 4
        a = [pair(r).reshape(w, 32, 2) for r in ins[:4]]
        b = [pair(r).reshape(w, 32, 2) for r in ins[4:6]]
        c = [r.reshape(w, 32) for r in ins[6:10]]
        A = np.zeros((w, 16, 16))
        Bm = np.zeros((w, 16, 8))
        for i in range(4):
            for h in range(2):
                A[:, g + 8 * (i % 2), 2 * t + 8 * (i // 2) + h] = a[i][..., h]
        for i in range(2):
            for h in range(2):
                Bm[:, 2 * t + 8 * i + h, g] = b[i][..., h]
        D = np.matmul(A, Bm)
        out = np.empty((w, 32, 4), np.float32)
        for j in range(4):
            out[..., j] = (D[:, g + 8 * (j // 2), 2 * t + j % 2] + c[j]).astype(np.float32)
        return out.reshape(self.T, 4)


def simulate(module_text: str, entry: str, grid, block, args: list,
             dynamic_shared_bytes: int = 0) -> None:
    """Runs kernel `entry` of a `gpu.module` text (as from wrap_module, without the outer
    container module) over `grid` x `block` threads with `dynamic_shared_bytes` of dynamic
    shared memory per block; `args` are NumPy arrays, one per kernel argument (bare pointers:
    any array of the argument's size), outputs written in place."""
    from nova.compiler.bindings import load_mlir

    load_mlir()
    from mlir import ir

    with ir.Context():
        module = ir.Module.parse("module attributes {gpu.container_module} {\n" + module_text
                                 + "\n}")
        gmod = module.body.operations[0]
        funcs = [op for op in gmod.regions[0].blocks[0].operations
                 if op.operation.name == "gpu.func"
                 and ir.StringAttr(op.attributes["sym_name"]).value == entry]
        if not funcs:
            raise KeyError(f"simulate: no gpu.func @{entry}")
        fn = funcs[0]
        sim = _Sim(ir, gmod, grid, block, dynamic_shared_bytes)
        body = fn.regions[0].blocks[0]
        n_wg = len(body.arguments) - len(args)
        for arg, a in zip(body.arguments[:len(args)], args, strict=True):
            shape = list(arg.type.shape)
            flat = a.reshape(-1).view(_NP[_elem(arg.type)])  # bool as i8, bf16 as i16 bits
            if flat.size < int(np.prod(shape)):
                raise ValueError(f"simulate: argument of {flat.size} elements for {arg.type}")
            sim.env[arg] = flat[: int(np.prod(shape))].reshape(shape)
        for arg in body.arguments[len(args):len(args) + n_wg]:
            buf = np.zeros([sim.nblocks] + list(arg.type.shape), _NP[_elem(arg.type)])
            sim.shared.add(id(buf))
            sim.env[arg] = buf
        sim.run_block(body, np.ones(sim.T, bool))
