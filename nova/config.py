"""Global configuration flags. Flags that change generated code are part of every cache key."""

from __future__ import annotations

import os

_DEFAULTS = {
    # "highest" (full float32) or "tf32"; changes generated contraction kernels.
    "matmul_precision": "highest",
    # Re-run a program equation by equation when it produces a NaN, naming the culprit.
    "debug_nans": False,
    # "compiled" (MLIR-generated kernels once the compiler is present) or "interpreter" (the
    # NumPy reference implementations).
    "backend": os.environ.get("NOVA_BACKEND", "compiled"),
    # Verify the Program after every pass (the test suite turns this on; otherwise the Program
    # is verified once, after the last pass, before anything reaches code generation).
    "verify_passes": os.environ.get("NOVA_VERIFY_PASSES") == "1",
    # Recompute cheap forward values in the backward instead of keeping them (compiler/remat.py):
    # "auto" on CUDA targets only, True on every target, False nowhere.
    "rematerialize": "auto",
    # (BM, BN): the tensor-core tile every GPU GEMM takes when its schedule has that tile
    # (codegen/cuda/matmul.py, wgmma.py), instead of the analytic choice. None: the choice. For
    # measuring the tiles (bench/device_check.py's gemm_tiles section), not for use.
    "gemm_tile": None,
    # Run `nova.jit` functions as plain Python, op by op (`nova.disable_jit()`), for debugging
    # with print and pdb; NOVA_DISABLE_JIT=1 sets it for a whole run.
    "disable_jit": os.environ.get("NOVA_DISABLE_JIT") == "1",
}
_CODE_FLAGS = ("matmul_precision", "backend", "rematerialize", "gemm_tile")
_ALLOWED = {
    "matmul_precision": ("highest", "tf32"),
    "backend": ("interpreter", "compiled"),
    "verify_passes": (True, False),
    "rematerialize": ("auto", True, False),
    "disable_jit": (True, False),
}


class _Flags(dict):
    """The flag values: a dict whose every mutation (update(), the test suite's clear() and
    update() restoring a snapshot, item assignment, ...) drops the cached code key."""

    __slots__ = ("code_keys",)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.code_keys: dict = {}  # NOVA_CUDA_ARCH's raw value -> code_key()


def _mutating(name):
    method = getattr(dict, name)

    def wrapper(self, *args, **kwargs):
        out = method(self, *args, **kwargs)
        # After the change: a code_key() running meanwhile in another thread stores what it
        # built in the dict dropped here, never in the new one.
        self.code_keys = {}
        return out

    wrapper.__name__ = name
    return wrapper


for _name in ("__setitem__", "__delitem__", "__ior__", "clear", "pop", "popitem", "setdefault",
              "update"):
    setattr(_Flags, _name, _mutating(_name))
del _name

# os.environ's own dict (encoded keys and values) and NOVA_CUDA_ARCH's key in it: reading it
# there costs ~40 ns, `os.environ.get` of a missing name ~700 ns (it raises and catches a
# KeyError). Where os.environ has no such dict (another Python, or a replaced os.environ),
# code_key reads os.environ.get.
_ARCH = "NOVA_CUDA_ARCH"
try:
    _ARCH_KEY = os.environ.encodekey(_ARCH)
except AttributeError:
    _ARCH_KEY = None


class Config:
    def __init__(self):
        self._values = _Flags(_DEFAULTS)

    def update(self, name: str, value) -> None:
        """Sets flag `name`. Raises KeyError for an unknown flag, ValueError for a bad value."""
        if name not in self._values:
            raise KeyError(f"unknown config flag {name!r}; known: {sorted(self._values)}")
        if name == "gemm_tile":
            ok = value is None or (isinstance(value, tuple) and len(value) == 2
                                   and all(isinstance(d, int) and d > 0 for d in value))
            if not ok:
                raise ValueError(f"config 'gemm_tile' must be None or a (BM, BN) tuple of "
                                 f"positive ints, got {value!r}")
        allowed = _ALLOWED.get(name)
        if allowed is not None and value not in allowed:
            raise ValueError(f"config {name!r} must be one of {allowed}, got {value!r}")
        self._values[name] = value

    def read(self, name: str):
        return self._values[name]

    def __getattr__(self, name):
        try:
            return self.__dict__["_values"][name]
        except KeyError:
            raise AttributeError(name) from None

    def code_key(self) -> tuple:
        """The flags that change generated code (part of jit and kernel cache keys), and
        NOVA_CUDA_ARCH (it changes the target a GPU's programs compile for).

        Built once per setting (a jitted call reads it every time): cached per raw value of
        NOVA_CUDA_ARCH, and dropped whenever a flag changes (`_Flags`)."""
        data = getattr(os.environ, "_data", None) if _ARCH_KEY is not None else None
        raw = data.get(_ARCH_KEY) if type(data) is dict else os.environ.get(_ARCH)
        values = self._values
        keys = values.code_keys
        key = keys.get(raw)
        if key is None:
            # (the value read again through os.environ: the raw value only finds the entry)
            key = tuple((k, values[k]) for k in _CODE_FLAGS) + (
                (_ARCH, os.environ.get(_ARCH, "")),)
            keys[raw] = key
        return key


config = Config()
