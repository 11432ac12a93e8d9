"""Checkpoints: model, optimizer state, step and config in one safetensors file, written atomically.

Layout of the file (safetensors: a JSON header, then raw little-endian tensor bytes; no pickle):
- the model's parameters under their dotted names (GPT-2's names for `GPT2`: ``wte.weight``, ...);
- the optimizer state's leaves, in `nova.tree_util.tree_flatten` order, as ``opt.0``, ``opt.1``,
  ... (the state's structure comes from the `opt_state_like` given to `load_checkpoint`); when a
  parameter's name starts with ``opt.``, the prefix gets underscores (``_opt.0``, ...) until none
  does, and the header's ``opt_prefix`` names it;
- header metadata (strings): ``format`` = "nova.checkpoint", ``version`` = "1", ``step``,
  ``config`` (JSON), ``model`` (the model's class name), ``opt_leaves`` (their count, or absent),
  ``static`` (JSON: the modules' static fields by dotted name, e.g. ``h.0.attn.n_head``; they
  shape the computation but are no tensors, so loading compares them).

The file is written to a temporary file in the destination's directory, flushed and fsynced, then
renamed over the destination (os.replace, atomic on POSIX), and the directory is fsynced: an
interrupted save leaves the previous checkpoint as it was.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
import tempfile

import ml_dtypes
import numpy as np
import safetensors
import safetensors.numpy as st

from nova.core.pytree import tree_flatten, tree_unflatten
from nova.nn.module import Module

__all__ = ["CheckpointError", "checkpoint_metadata", "load_checkpoint", "save_checkpoint"]

_FORMAT = "nova.checkpoint"
_VERSION = "1"
_OPT_PREFIX = "opt."


class CheckpointError(ValueError):
    """A checkpoint file that cannot be read: truncated, corrupt, or not a Nova checkpoint."""


def _config_json(config) -> str | None:
    if config is None:
        return None
    if dataclasses.is_dataclass(config) and not isinstance(config, type):
        config = dataclasses.asdict(config)
    if not isinstance(config, dict):
        raise TypeError(
            f"save_checkpoint: config must be a dataclass instance, a dict or None, got "
            f"{type(config).__name__}"
        )
    try:
        return json.dumps(config, sort_keys=True)
    except TypeError as e:
        raise TypeError(f"save_checkpoint: config is not JSON-serializable: {e}") from None


def _umask() -> int:
    """The process umask, read from /proc (os.umask can only read it by setting it, which
    another thread's file creation could observe); the os.umask round trip elsewhere."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _write_atomically(path: str, data: bytes) -> None:
    """Writes data to path through a fsynced temporary file in the same directory + os.replace.
    A symbolic link at `path` stays a link (the file it points to is replaced); the file gets
    the mode an existing file had, else the one `open` would give (0o666 less the umask)."""
    path = os.path.realpath(path)
    directory = os.path.dirname(path)
    try:
        mode = os.stat(path).st_mode & 0o7777
    except FileNotFoundError:
        mode = 0o666 & ~_umask()
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{os.path.basename(path)}.", suffix=".tmp")
    try:
        try:
            os.fchmod(fd, mode)  # mkstemp creates 0o600
        except OSError:
            os.close(fd)
            raise
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        # Whatever stopped the save (disk full, KeyboardInterrupt), the destination is untouched.
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    try:
        dir_fd = os.open(directory, os.O_RDONLY)
    except OSError:  # platforms without directory descriptors
        return
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def _jsonable(v):
    """A JSON value standing for a static field's value, equal in every process for equal
    values: functions and classes by their qualified names, other objects by their repr
    without memory addresses."""
    try:
        return _plain_json(v)
    except (TypeError, ValueError):
        pass
    if isinstance(v, list | tuple):
        return [_jsonable(e) for e in v]
    if isinstance(v, dict):
        return {str(k): _jsonable(e) for k, e in v.items()}
    qualname = getattr(v, "__qualname__", None)
    if qualname is not None and callable(v):
        return f"{getattr(v, '__module__', None) or '?'}.{qualname}"
    return re.sub(r" at 0x[0-9a-fA-F]+", "", repr(v))


def _jsonable_v1(v):
    """The form files written before 2026-11-30 stored: JSON, else the plain repr (kept so
    that those files still load; their function reprs held addresses and never matched)."""
    try:
        return _plain_json(v)
    except (TypeError, ValueError):
        return repr(v)


def _plain_json(v):
    """v (a dataclass as a dict) through JSON; TypeError/ValueError when JSON cannot hold it."""
    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        v = dataclasses.asdict(v)
    return json.loads(json.dumps(v, sort_keys=True))


def _static_fields(tree, prefix: str = "", out: dict | None = None, form=None) -> dict:
    """{dotted name: JSON value} of the static fields of every Module in `tree` (form: the
    value -> JSON function, `_jsonable` by default)."""
    out = {} if out is None else out
    form = form or _jsonable
    if isinstance(tree, Module):
        for f in dataclasses.fields(tree):
            name = f"{prefix}.{f.name}" if prefix else f.name
            if f.metadata.get("static", False):
                out[name] = form(getattr(tree, f.name))
            else:
                _static_fields(getattr(tree, f.name), name, out, form)
    elif isinstance(tree, list | tuple):
        for i, e in enumerate(tree):
            _static_fields(e, f"{prefix}.{i}" if prefix else str(i), out, form)
    elif isinstance(tree, dict):
        for k, e in tree.items():
            _static_fields(e, f"{prefix}.{k}" if prefix else str(k), out, form)
    return out


def save_checkpoint(path, model: Module, opt_state=None, *, step: int = 0, config=None) -> None:
    """Saves `model`'s parameters, `opt_state` (any pytree of arrays, or None), `step` and
    `config` (a dataclass such as GPT2Config, a JSON-serializable dict, or None) to the
    safetensors file `path`, atomically (see the module docstring).

    Raises TypeError for a model that is not a Module, a step that is not an int, or a config
    that cannot be stored as JSON; ValueError for a negative step; FileNotFoundError naming the
    directory when it does not exist; OSError when the file cannot be written (the previous file
    at `path` is then unchanged).
    """
    if not isinstance(model, Module):
        raise TypeError(f"save_checkpoint: model must be a nova.nn.Module, got "
                        f"{type(model).__name__}")
    if isinstance(step, bool) or not isinstance(step, int | np.integer):
        raise TypeError(f"save_checkpoint: step must be an int, got {type(step).__name__} "
                        f"{step!r}")
    if step < 0:
        raise ValueError(f"save_checkpoint: step must be >= 0, got {step}")
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise FileNotFoundError(f"save_checkpoint: the directory {directory!r} of {path!r} does "
                                "not exist")
    tensors = {}
    for k, v in model.state_dict().items():
        arr = np.asarray(v, order="C")
        if arr.dtype not in _STORABLE:
            raise TypeError(f"save_checkpoint: parameter '{k}' has dtype {arr.dtype} "
                            f"({str(arr)[:40]}), which a checkpoint cannot store (numbers and "
                            "arrays of bool, integer or float dtypes only)")
        tensors[k] = arr
    metadata = {"format": _FORMAT, "version": _VERSION, "step": str(int(step)),
                "model": type(model).__name__,
                "static": json.dumps(_static_fields(model), sort_keys=True)}
    cfg = _config_json(config)
    if cfg is not None:
        metadata["config"] = cfg
    if opt_state is not None:
        leaves, _ = tree_flatten(opt_state)
        # A prefix no parameter name starts with (a module field or dict key named "opt").
        prefix = _OPT_PREFIX
        while any(k.startswith(prefix) for k in tensors):
            prefix = "_" + prefix
        paths = None
        for i, leaf in enumerate(leaves):
            arr = np.asarray(leaf, order="C")
            if arr.dtype not in _STORABLE:
                if paths is None:
                    from nova.core.pytree import keystr, tree_leaves_with_path
                    paths = [keystr(p) for p, _ in tree_leaves_with_path(opt_state)]
                raise TypeError(
                    f"save_checkpoint: optimizer state leaf {i} (opt_state{paths[i]}) is a "
                    f"{type(leaf).__name__} of dtype {arr.dtype}, which a checkpoint cannot "
                    "store (numbers and arrays of bool, integer or float dtypes only)")
            tensors[f"{prefix}{i}"] = arr
        metadata["opt_leaves"] = str(len(leaves))
        metadata["opt_prefix"] = prefix
    _write_atomically(path, st.save(tensors, metadata=metadata))


# safetensors' dtype names -> NumPy (safetensors.numpy.load lacks BF16, which it can save).
_DTYPES = {
    "F64": np.float64, "F32": np.float32, "F16": np.float16, "BF16": ml_dtypes.bfloat16,
    "I64": np.int64, "U64": np.uint64, "I32": np.int32, "U32": np.uint32, "I16": np.int16,
    "U16": np.uint16, "I8": np.int8, "U8": np.uint8, "BOOL": np.bool_,
}


_STORABLE = frozenset(np.dtype(d) for d in _DTYPES.values())


def _load_tensors(data: bytes) -> dict[str, np.ndarray]:
    out = {}
    for name, view in safetensors.deserialize(data):
        if view["dtype"] not in _DTYPES:
            raise ValueError(f"tensor '{name}' has the unsupported dtype {view['dtype']}")
        # A writable copy: the arrays may become donated buffers that a step updates in place.
        arr = np.frombuffer(view["data"], _DTYPES[view["dtype"]]).reshape(view["shape"])
        out[name] = arr.copy()
    return out


def _read_header_metadata(data: bytes) -> dict:
    n = int.from_bytes(data[:8], "little")
    header = json.loads(data[8:8 + n])
    return header.get("__metadata__") or {}


def _read(path: str) -> tuple[dict, dict]:
    with open(path, "rb") as f:
        data = f.read()
    try:
        tensors = _load_tensors(data)
        metadata = _read_header_metadata(data)
    except (safetensors.SafetensorError, ValueError, UnicodeDecodeError) as e:
        raise CheckpointError(
            f"checkpoint {path!r} cannot be read ({len(data)} bytes; truncated or corrupt): {e}"
        ) from None
    if metadata.get("format") != _FORMAT:
        raise CheckpointError(
            f"checkpoint {path!r} is a safetensors file but not a Nova checkpoint (its metadata "
            f"has format={metadata.get('format')!r}, expected {_FORMAT!r})"
        )
    return tensors, _parse_metadata(path, metadata)


def _parse_metadata(path: str, meta: dict) -> dict:
    """The header metadata of a Nova checkpoint with step, opt_leaves as ints and config, static
    as JSON values. Raises CheckpointError for another version or a malformed entry."""
    if meta.get("version") != _VERSION:
        raise CheckpointError(f"checkpoint {path!r} has format version {meta.get('version')!r}; "
                              f"this Nova reads version {_VERSION!r}")
    out = dict(meta)
    try:
        out["step"] = int(meta.get("step", 0))
        out["opt_leaves"] = int(meta["opt_leaves"]) if "opt_leaves" in meta else None
        for key in ("config", "static"):
            out[key] = json.loads(meta[key]) if key in meta else None
    except ValueError as e:  # json.JSONDecodeError is a ValueError
        raise CheckpointError(f"checkpoint {path!r} has malformed metadata ({e})") from None
    return out


def checkpoint_metadata(path) -> dict:
    """What a checkpoint holds besides tensors, read from its header only (cheap for big files):
    {"step": int, "config": dict or None, "model": class name, "opt_leaves": int or None}.

    Use it to build the `model_like` that `load_checkpoint` needs, e.g.
    ``GPT2.init(GPT2Config(**checkpoint_metadata(p)["config"]), key)``. Raises OSError when the
    file cannot be opened, CheckpointError naming the path when the header is truncated, corrupt
    or not a Nova checkpoint's, or has another format version or malformed metadata.
    """
    path = os.fspath(path)
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        head = f.read(8)
        n = int.from_bytes(head, "little") if len(head) == 8 else -1
        if not 0 < n <= size - 8:
            raise CheckpointError(f"checkpoint {path!r} cannot be read ({size} bytes; truncated "
                                  f"or corrupt): bad header length")
        try:
            header = json.loads(f.read(n))
            meta = header.get("__metadata__") or {}
        except (ValueError, AttributeError) as e:
            raise CheckpointError(f"checkpoint {path!r} cannot be read ({size} bytes; truncated "
                                  f"or corrupt): {e}") from None
        if not isinstance(meta, dict):
            raise CheckpointError(f"checkpoint {path!r} cannot be read ({size} bytes; truncated "
                                  f"or corrupt): its metadata is not a JSON object")
    if meta.get("format") != _FORMAT:
        raise CheckpointError(
            f"checkpoint {path!r} is not a Nova checkpoint (its metadata has "
            f"format={meta.get('format')!r}, expected {_FORMAT!r})"
        )
    meta = _parse_metadata(path, meta)
    return {k: meta.get(k) for k in ("step", "config", "model", "opt_leaves")}


def _check_leaf(path, name, stored: np.ndarray, like_shape, like_dtype) -> None:
    if tuple(stored.shape) != tuple(like_shape):
        raise ValueError(
            f"checkpoint {path!r}: '{name}' has shape {tuple(stored.shape)} in the checkpoint but "
            f"{tuple(like_shape)} in the model/state it is loaded into"
        )
    if np.dtype(stored.dtype) != np.dtype(like_dtype):
        raise ValueError(
            f"checkpoint {path!r}: '{name}' has dtype {np.dtype(stored.dtype).name} in the "
            f"checkpoint but {np.dtype(like_dtype).name} in the model/state it is loaded into"
        )


def _python_number(like, stored, what: str):
    """`stored` (a 0-d array) as a Python number of like's type. Raises ValueError when that
    type cannot hold it exactly (2.75 into an int field, 2 into a bool)."""
    v = stored.item() if hasattr(stored, "item") else stored
    out = type(like)(v)
    if out != v and not (isinstance(out, float) and math.isnan(out)):  # NaN stays NaN
        raise ValueError(f"{what} holds {v!r}, which the model's {type(like).__name__} field "
                         "cannot hold exactly")
    return out


def load_checkpoint(path, model_like: Module, opt_state_like=None):
    """Loads a checkpoint written by `save_checkpoint`: returns (model, opt_state, step, config).

    model_like: a Module of the saved structure (e.g. ``GPT2.init(config, key)``); the result is
    a new module of its class with the stored parameters (nova Arrays). opt_state_like: a pytree of
    the saved optimizer state's structure (e.g. ``tx.init(model)``), or None to skip the optimizer
    state (then opt_state is None). step: int. config: the stored config as a dict (None if none
    was saved), e.g. ``GPT2Config(**config)``.

    Raises FileNotFoundError/OSError when the file cannot be opened; CheckpointError (a
    ValueError) naming the path for a truncated, corrupt or foreign file; KeyError naming missing
    or unexpected parameters; ValueError naming a parameter (or ``opt.i`` leaf) and both shapes
    or dtypes when they differ, or a static field (a hyperparameter such as ``h.0.attn.n_head``)
    and both values.
    """
    from nova.numpy_impl.util import asarray

    path = os.fspath(path)
    if not isinstance(model_like, Module):
        raise TypeError(f"load_checkpoint: model_like must be a nova.nn.Module, got "
                        f"{type(model_like).__name__}")
    tensors, metadata = _read(path)
    prefix = metadata.get("opt_prefix", _OPT_PREFIX)
    opt_names = [f"{prefix}{i}" for i in range(metadata["opt_leaves"] or 0)]
    params = {k: v for k, v in tensors.items() if k not in set(opt_names)}
    own = model_like.named_parameters()
    missing = [k for k in own if k not in params]
    extra = sorted(k for k in params if k not in own)
    if missing or extra:
        parts = ([f"missing parameters {missing}"] if missing else []) + \
                ([f"unexpected parameters {extra}"] if extra else [])
        raise KeyError(f"checkpoint {path!r} does not match {type(model_like).__name__}: "
                       + "; ".join(parts))
    for name, p in own.items():
        if isinstance(p, bool | int | float):  # a Python number field: any real value, shape ()
            _check_leaf(path, name, params[name], (), params[name].dtype)
        else:
            _check_leaf(path, name, params[name], p.shape, p.dtype)
    if metadata["static"] is not None:  # absent from files written before it was stored
        here = _static_fields(model_like)
        legacy = _static_fields(model_like, form=_jsonable_v1)
        for name in sorted(set(here) | set(metadata["static"])):
            a, b = metadata["static"].get(name, "(absent)"), here.get(name, "(absent)")
            if a != b and a != legacy.get(name, "(absent)"):
                raise ValueError(
                    f"checkpoint {path!r}: the static field '{name}' is {a!r} in the checkpoint "
                    f"but {b!r} in the {type(model_like).__name__} it is loaded into"
                )
    model = model_like.map_parameters(
        lambda name, p: _python_number(p, params[name], f"checkpoint {path!r}: '{name}'")
        if isinstance(p, bool | int | float) else asarray(params[name]))

    opt_state = None
    if opt_state_like is not None:
        like_leaves, treedef = tree_flatten(opt_state_like)
        stored = [k for k in opt_names if k in tensors]
        if metadata["opt_leaves"] is None:
            raise KeyError(f"checkpoint {path!r} holds no optimizer state, but opt_state_like "
                           "was given")
        if len(stored) != len(opt_names):
            raise CheckpointError(f"checkpoint {path!r} lists {len(opt_names)} optimizer state "
                                  f"leaves but holds {len(stored)}")
        if len(stored) != len(like_leaves):
            raise ValueError(
                f"checkpoint {path!r}: the optimizer state has {len(stored)} leaves in the "
                f"checkpoint but {len(like_leaves)} in opt_state_like ({treedef})"
            )
        leaves = []
        for i, like in enumerate(like_leaves):
            name = opt_names[i]
            like_np = like if hasattr(like, "dtype") else np.asarray(like)
            _check_leaf(path, name, tensors[name], np.shape(like_np), like_np.dtype)
            leaves.append(asarray(tensors[name]))
        opt_state = tree_unflatten(treedef, leaves)

    return model, opt_state, metadata["step"], metadata["config"]
