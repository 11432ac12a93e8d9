"""The kernel cache: compiled kernels by structural hash, in memory and on disk.

Key = sha256 of the kernel's canonical text + kind + schedule + target (ISA flags, LLVM options,
usable cores) + codegen version (see Kernel.key). On disk (`NOVA_CACHE_DIR`, default ~/.cache/nova) each entry is a small JSON record
`<key>.json` naming a shared library and symbol plus the library's sha256; libraries are written
atomically (temporary file + rename) and checked against their hash when read, never pickled. A
corrupt or truncated entry is dropped with a warning and rebuilt; a read-only or full cache
directory falls back to the in-memory cache with one warning.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import tempfile
import threading
import warnings

# Bump when generated code changes meaning or ABI: old disk entries then miss.
CODEGEN_VERSION = "nova-cpu-2"

_mem: dict[str, object] = {}
_key_of: dict[int, str] = {}  # id(loaded function) -> its key (functions are never unloaded)
_lock = threading.Lock()
_warned_readonly = False
stats = {"memory_hits": 0, "disk_hits": 0, "misses": 0, "corrupt": 0}


def _fresh_locks_in_child() -> None:
    """A forked compile child (codegen/cpu/compile.py _fork_worker) starts with the cache lock
    free: another thread of the parent may have held it at the fork, and the child's cache
    writes would wait on it forever."""
    global _lock
    _lock = threading.Lock()


os.register_at_fork(after_in_child=_fresh_locks_in_child)


def cache_dir() -> str:
    return os.environ.get("NOVA_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "nova")


def host_target() -> str:
    """The CPU target string: the ISA flags the JIT compiles for (kernels are host-specific)
    and the cores this process may use (kernels split their loops over that many threads: an
    executable cached by a process with two cores ran two threads on one under `taskset -c 0`)."""
    flags = ""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    flags = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    from nova.compiler.codegen.cpu.compile import llvm_options
    from nova.compiler.codegen.cpu.matmul import host_device
    from nova.compiler.codegen.cpu.object_code import pipeline

    flags += "|" + " ".join(llvm_options()) + "|" + pipeline()  # they change the code too
    flags += f"|cores={host_device().cores}"
    return f"cpu:{platform.machine()}:{hashlib.sha1(flags.encode()).hexdigest()[:12]}"


def _sha256_file(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _entry_path(key: str) -> str:
    return os.path.join(cache_dir(), "cpu", key[:2], key + ".json")


def kernel_key(symbol: str, text: str, target: str) -> str:
    """The cache key of one generated kernel: its MLIR text (which names the kernel's canonical
    structure and schedule through its symbol and code), the target and the codegen version."""
    h = hashlib.sha256()
    for part in (symbol, text, target, CODEGEN_VERSION):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()


def memory_get(key: str):
    with _lock:
        fn = _mem.get(key)
    if fn is not None:
        stats["memory_hits"] += 1
    return fn


def memory_put(key: str, fn) -> None:
    with _lock:
        _mem[key] = fn
        _key_of[id(fn)] = key


def key_of(fn) -> str | None:
    """The key under which the loaded kernel function `fn` was cached (None if unknown)."""
    with _lock:
        k = _key_of.get(id(fn))
        return k if k is not None and _mem.get(k) is fn else None


def cached(key: str) -> bool:
    """Whether `key` is in the memory cache or has a disk entry (not checked, not counted in
    `stats`): a cheap look before deciding to build a kernel ahead of its batch."""
    with _lock:
        if key in _mem:
            return True
    return os.path.exists(_entry_path(key))


def disk_get(key: str) -> dict | None:
    """The record {'so', 'symbol', 'nargs'} of a valid disk entry, or None (dropping bad ones)."""
    path = _entry_path(key)
    try:
        with open(path) as f:
            rec = json.load(f)
        so = rec["so"]
        if not os.path.isabs(so):
            so = os.path.join(os.path.dirname(path), so)
        if _sha256_file(so) != rec["sha256"]:
            raise ValueError("shared library hash mismatch")
        rec["so"] = so
        stats["disk_hits"] += 1
        return rec
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, json.JSONDecodeError) as e:
        stats["corrupt"] += 1
        warnings.warn(f"nova: dropping corrupt kernel cache entry {path}: {e}", stacklevel=2)
        for p in (path,):
            try:
                os.remove(p)
            except OSError:
                pass
        return None


def _atomic_write(path: str, data: bytes) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".tmp-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.remove(tmp)
        except OSError:
            pass
        raise


def library_path(batch_key: str) -> str | None:
    """Where to build a new shared library, or None if the disk cache is unusable."""
    global _warned_readonly
    d = os.path.join(cache_dir(), "cpu", "lib")
    try:
        os.makedirs(d, exist_ok=True)
        if not os.access(d, os.W_OK):
            raise PermissionError(d)
        return os.path.join(d, batch_key + ".so")
    except OSError as e:
        if not _warned_readonly:
            warnings.warn(f"nova: kernel cache directory unusable ({e}); using the in-memory "
                          "cache only", stacklevel=2)
            _warned_readonly = True
        return None


def disk_put(key: str, so_path: str, symbol: str, nargs: int) -> None:
    global _warned_readonly
    path = _entry_path(key)
    rec = {"so": os.path.relpath(so_path, os.path.dirname(path)), "symbol": symbol,
           "nargs": nargs, "sha256": _sha256_file(so_path), "version": CODEGEN_VERSION}
    try:
        _atomic_write(path, json.dumps(rec).encode())
    except OSError as e:
        if not _warned_readonly:
            warnings.warn(f"nova: cannot write the kernel cache ({e}); using the in-memory cache "
                          "only", stacklevel=2)
            _warned_readonly = True


def clear_memory() -> None:
    with _lock:
        _mem.clear()
        _key_of.clear()
