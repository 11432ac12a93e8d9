"""`Module`: a frozen dataclass that is a pytree of arrays and sub-modules (Equinox/MLX style).

A subclass of `Module` becomes a frozen dataclass (``eq=False``) registered as a pytree node: its
fields hold arrays, sub-modules, lists/tuples/dicts of them, or None (the data, the pytree's
children), except fields declared with `static_field()` (Python values such as a head count or an
epsilon: the pytree's aux data, part of `jit`'s cache key). So a model passes through `nova.jit`,
`nova.grad` and `nova.tree_util.tree_map` like any pytree, and `nova.grad(loss)(model, x, y)`
returns a gradient of the model's own class and shape.

Parameters are named by dotted paths (PyTorch's `state_dict` convention): a field's name, a list
index, a dict key, e.g. ``h.0.attn.c_attn.weight``.

Freezing is by partition (as Equinox): `partition(model, frozen)` splits a model into two trees of
its own class, the trainable parameters (frozen ones replaced by None) and the frozen ones (the
rest None); `combine(trainable, frozen)` puts them back together. Differentiate and optimize only
the trainable tree, so a frozen parameter has no gradient, no optimizer state and no update::

    params, frozen = nova.nn.partition(model, ["wte.*", "wpe.*"])
    loss_fn = lambda p, x, y: nova.nn.combine(p, frozen).loss(x, y)
    grads = nova.grad(loss_fn)(params, x, y)   # None where a parameter is frozen
"""

from __future__ import annotations

import copy
import dataclasses
import fnmatch
import math
from collections.abc import Callable, Iterable

import numpy as np

from nova.core.array import Array
from nova.core.pytree import register_dataclass

__all__ = ["Module", "combine", "partition", "static_field"]


def static_field(**kwargs):
    """A dataclass field that is static (pytree aux data, hashed into `jit`'s cache key).

    Use it for hyperparameters (head counts, epsilons, rates); their values must be hashable.
    Keyword arguments go to `dataclasses.field` (e.g. ``default=1e-5``).
    """
    metadata = dict(kwargs.pop("metadata", None) or {})
    metadata["static"] = True
    return dataclasses.field(metadata=metadata, **kwargs)


def _is_leaf_array(x) -> bool:
    return isinstance(x, Array | np.ndarray | np.generic)


def _shape_str(x) -> str:
    return f"{np.dtype(x.dtype).name}[{','.join(str(d) for d in x.shape)}]"


class Module:
    """Base class of layers and models: subclasses become frozen, pytree-registered dataclasses.

    Declare fields with annotations (data: arrays, sub-modules, containers of them; hyperparameters
    with `static_field()`). Do not also decorate subclasses with `@dataclass`. Instances are
    immutable: methods that change something (`load_state_dict`, `map_parameters`, `replace`)
    return a new module sharing the unchanged arrays.
    """

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        dataclasses.dataclass(cls, frozen=True, eq=False, repr=False)
        register_dataclass(cls)

    # --- structure ------------------------------------------------------------------------------

    @classmethod
    def _data_field_names(cls) -> list[str]:
        return [f.name for f in dataclasses.fields(cls) if not f.metadata.get("static", False)]

    def replace(self, **changes) -> Module:
        """A copy with the given fields replaced (no validation; static fields allowed too)."""
        names = {f.name for f in dataclasses.fields(self)}
        unknown = sorted(set(changes) - names)
        if unknown:
            raise TypeError(f"{type(self).__name__}.replace: unknown fields {unknown}")
        new = copy.copy(self)
        for k, v in changes.items():
            object.__setattr__(new, k, v)
        return new

    def map_parameters(self, fn: Callable[[str, Array], object]) -> Module:
        """A module of the same structure with every parameter p replaced by fn(name, p).

        name is the parameter's dotted path. fn may return None (the parameter is left out, as in
        `partition`). Missing (None) parameters are not visited.
        """
        return _map_named(self, "", fn)

    # --- parameters -----------------------------------------------------------------------------

    def named_parameters(self) -> dict[str, Array]:
        """{dotted name: array} for every parameter, in pytree order (fields as declared).

        Works on any tree of this class, e.g. a gradient, a `partition` half (None entries are
        skipped) or a `tree_map` of the model to booleans (a mask). Raises ValueError when two
        leaves get the same name (dict keys "a.b" beside a nested "a" -> "b", or 1 beside "1"):
        a checkpoint or state dict could not tell them apart."""
        out: dict[str, Array] = {}

        def visit(name, leaf):
            if name in out:
                raise ValueError(
                    f"{type(self).__name__}: two parameters are both named '{name}' (a dict key "
                    "containing '.' beside a nested key, or an int key beside the same string); "
                    "rename one so that checkpoints and state dicts can tell them apart")
            out[name] = leaf
            return leaf

        _map_named(self, "", visit)
        return out

    def parameters(self) -> list[Array]:
        """The parameters as a list, in the order of `named_parameters`."""
        return list(self.named_parameters().values())

    def num_parameters(self) -> int:
        """The total number of scalar parameters (elements), an int."""
        return sum(math.prod(np.shape(p)) for p in self.named_parameters().values())

    def state_dict(self) -> dict[str, np.ndarray]:
        """{dotted name: NumPy array} (host copies of the parameters)."""
        return {k: np.asarray(v) for k, v in self.named_parameters().items()}

    def load_state_dict(self, state_dict: dict) -> Module:
        """A new module with the parameters taken from `state_dict` ({dotted name: array}).

        Every parameter of this module must be present with the same shape and dtype, and no other
        key may be. Raises KeyError naming the missing or unexpected names; ValueError naming the
        parameter and both shapes (or both dtypes) on a mismatch. NumPy (or other array-like)
        values are copied, as `jax.device_put` and PyTorch's `load_state_dict` copy them: later
        writes to them do not reach the module, and a jitted training step that donates the
        parameters writes them in place without copying them first. nova Arrays are taken as
        they are.
        """
        from nova.numpy_impl.creation import array

        own = self.named_parameters()
        missing = [k for k in own if k not in state_dict]
        extra = sorted(k for k in state_dict if k not in own)
        if missing or extra:
            parts = []
            if missing:
                parts.append(f"missing parameters {missing}")
            if extra:
                parts.append(f"unexpected parameters {extra}")
            raise KeyError(f"load_state_dict into {type(self).__name__}: " + "; ".join(parts))
        for name, p in own.items():
            v = state_dict[name]
            if tuple(np.shape(v)) != tuple(np.shape(p)):
                raise ValueError(
                    f"load_state_dict: parameter '{name}' has shape {tuple(np.shape(p))} in the "
                    f"model but {tuple(np.shape(v))} in the state dict"
                )
            if isinstance(p, bool | int | float):
                continue  # a Python number field: any real value of shape ()
            vd = np.dtype(v.dtype) if hasattr(v, "dtype") else np.asarray(v).dtype
            if vd != np.dtype(p.dtype):
                raise ValueError(
                    f"load_state_dict: parameter '{name}' has dtype {np.dtype(p.dtype).name} in "
                    f"the model but {vd.name} in the state dict"
                )

        def take(name, p):
            v = state_dict[name]
            if isinstance(p, bool | int | float):  # stays a Python number of the field's type
                from nova.nn.checkpoint import _python_number

                return _python_number(p, np.asarray(v), f"load_state_dict: parameter '{name}'")
            return v if isinstance(v, Array) else array(np.asarray(v))

        return self.map_parameters(take)

    def __repr__(self) -> str:
        parts = []
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            parts.append(f"{f.name}={_short_repr(v)}")
        return f"{type(self).__name__}({', '.join(parts)})"


def _short_repr(v) -> str:
    if _is_leaf_array(v):
        return _shape_str(v)
    if isinstance(v, list | tuple):
        inner = ", ".join(_short_repr(e) for e in v)
        return f"[{inner}]" if isinstance(v, list) else f"({inner})"
    return repr(v)


def _join(prefix: str, part) -> str:
    return f"{prefix}.{part}" if prefix else str(part)


def _map_named(tree, prefix: str, fn):
    """Rebuilds `tree` with each array leaf replaced by fn(dotted name, leaf)."""
    if tree is None:
        return None
    if isinstance(tree, Module):
        changes = {n: _map_named(getattr(tree, n), _join(prefix, n), fn)
                   for n in type(tree)._data_field_names()}
        return tree.replace(**changes)
    if isinstance(tree, list | tuple) and not hasattr(type(tree), "_fields"):
        return type(tree)(_map_named(e, _join(prefix, i), fn) for i, e in enumerate(tree))
    if isinstance(tree, dict):
        return {k: _map_named(tree[k], _join(prefix, k), fn) for k in tree}
    # Python numbers are leaves too, so model-shaped trees of masks or scalars (from tree_map)
    # can be named like the model.
    if _is_leaf_array(tree) or isinstance(tree, bool | int | float):
        return fn(prefix, tree)
    raise TypeError(
        f"Module field '{prefix}' holds a {type(tree).__name__}, which is neither an array, a "
        "number, a Module, a list/tuple/dict of them nor None; declare hyperparameters with "
        "static_field()"
    )


def _frozen_predicate(model: Module, frozen) -> Callable[[str, Array], bool]:
    if callable(frozen):
        return frozen
    patterns = [frozen] if isinstance(frozen, str) else list(frozen)
    if not all(isinstance(p, str) for p in patterns):
        raise TypeError(f"partition: `frozen` must be a callable or glob patterns, got {frozen!r}")
    names = list(model.named_parameters())
    unused = [p for p in patterns if not any(fnmatch.fnmatchcase(n, p) for n in names)]
    if unused:
        raise ValueError(
            f"partition: the patterns {unused} match no parameter of {type(model).__name__} "
            f"(names look like {names[:3]})"
        )
    return lambda name, _: any(fnmatch.fnmatchcase(name, p) for p in patterns)


def partition(model: Module, frozen: Callable[[str, Array], bool] | str | Iterable[str]):
    """Splits `model` into (trainable, frozen) trees of its class; each holds None where the other
    holds the parameter.

    frozen: a predicate fn(dotted name, array) -> bool, or glob pattern(s) over dotted names
    (fnmatch syntax: ``"h.0.*"``, ``"*.bias"``) selecting the parameters to freeze. Raises
    ValueError for a pattern that matches no parameter (a typo would otherwise freeze nothing),
    TypeError for anything else than a callable or strings.
    """
    pred = _frozen_predicate(model, frozen)
    mask = {n: bool(pred(n, p)) for n, p in model.named_parameters().items()}
    trainable = model.map_parameters(lambda n, p: None if mask[n] else p)
    frozen_part = model.map_parameters(lambda n, p: p if mask[n] else None)
    return trainable, frozen_part


def combine(*trees: Module) -> Module:
    """Merges trees of one structure from `partition`: each parameter from the first tree that
    holds it (not None). Raises ValueError when the trees' structures differ."""
    if not trees:
        raise TypeError("combine: needs at least one tree")
    classes = [type(t) for t in trees]
    if any(c is not classes[0] for c in classes):
        raise ValueError(f"combine: trees of different classes {[c.__name__ for c in classes]}")

    def merge(parts, prefix):
        present = [p for p in parts if p is not None]
        if not present:
            return None
        first = present[0]
        parts = [p for p in parts if p is not None]
        if isinstance(first, Module):
            changes = {n: merge([getattr(p, n) for p in parts], _join(prefix, n))
                       for n in type(first)._data_field_names()}
            return first.replace(**changes)
        if isinstance(first, list | tuple) and not hasattr(type(first), "_fields"):
            if any(len(p) != len(first) for p in parts):
                raise ValueError(f"combine: '{prefix}' has different lengths in the trees")
            return type(first)(merge([p[i] for p in parts], _join(prefix, i))
                               for i in range(len(first)))
        if isinstance(first, dict):
            return {k: merge([p[k] for p in parts], _join(prefix, k)) for k in first}
        return first

    return merge(list(trees), "")
