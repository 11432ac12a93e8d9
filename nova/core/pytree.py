"""Pytrees: nested containers (dict, list, tuple, namedtuple, None, registered classes) of leaves."""

from __future__ import annotations

import collections
import dataclasses
import functools
import operator
from collections.abc import Callable
from typing import Any, NamedTuple


class _NodeType(NamedTuple):
    flatten: Callable  # node -> (children, aux_data)
    unflatten: Callable  # (aux_data, children) -> node


_REGISTRY: dict[type, _NodeType] = {}


def register_pytree_node(cls: type, flatten_func: Callable, unflatten_func: Callable) -> None:
    """Registers `cls` as a pytree node.

    flatten_func(node) -> (iterable of children, hashable aux_data);
    unflatten_func(aux_data, children) -> node.
    """
    if cls in _REGISTRY:
        raise ValueError(f"{cls.__name__} is already registered as a pytree node")
    _REGISTRY[cls] = _NodeType(flatten_func, unflatten_func)


# Names of the children of registered dataclasses, for key paths (GetAttrKey).
_DATA_FIELDS: dict[type, tuple] = {}


def register_dataclass(cls=None, *, data_fields=None, meta_fields=None):
    """Registers a dataclass: `data_fields` are children, `meta_fields` static aux data.

    With no field lists, every field is data except those declared with
    `field(metadata={"static": True})`. Usable as a decorator.
    """

    def wrap(c):
        fields = dataclasses.fields(c)
        data = data_fields
        meta = meta_fields
        if data is None:
            data = [f.name for f in fields if not f.metadata.get("static", False)]
            meta = [f.name for f in fields if f.metadata.get("static", False)]
        meta = list(meta or [])
        data = list(data)

        def getter(names):  # a tuple of the named attributes, by one C call
            if not names:
                return lambda node: ()
            if len(names) == 1:
                get1 = operator.attrgetter(names[0])
                return lambda node: (get1(node),)
            return operator.attrgetter(*names)

        get_data, get_meta = getter(data), getter(meta)

        def flatten(node):
            return get_data(node), get_meta(node)

        # Fields written straight into the instance's __dict__ (one update instead of a
        # frozen-safe setattr per field) unless a class on the MRO has slots or a field is a
        # descriptor on the class (a slot or a property would be bypassed: found by review).
        plain = not any("__slots__" in vars(k) for k in c.__mro__[:-1]) and not any(
            hasattr(getattr(c, n, None), "__set__") for n in data + meta)

        def unflatten(aux, children):
            obj = object.__new__(c)
            if len(children) != len(data) or len(aux) != len(meta):
                raise ValueError(f"{c.__name__}: expected {len(data)} children and "
                                 f"{len(meta)} aux values, got {len(children)} and {len(aux)}")
            d = obj.__dict__ if plain else None
            if d is not None:
                d.update(zip(data, children))
                d.update(zip(meta, aux))
                return obj
            for n, v in zip(data, children):
                object.__setattr__(obj, n, v)
            for n, v in zip(meta, aux):
                object.__setattr__(obj, n, v)
            return obj

        register_pytree_node(c, flatten, unflatten)
        _DATA_FIELDS[c] = tuple(data)
        return c

    return wrap(cls) if cls is not None else wrap


def _is_namedtuple(x) -> bool:
    return isinstance(x, tuple) and hasattr(type(x), "_fields")


class PyTreeDef:
    """The structure of a pytree: node kind, aux data and child structures. Hashable.

    Flattening interns structures (`_node`): the same structure flattened twice is the same
    object when its aux data are hashable, so a jitted call's signature lookups compare its
    arguments' structure by identity instead of walking it."""

    __slots__ = ("kind", "aux", "children", "num_leaves", "_hash", "_interned")

    def __init__(self, kind, aux, children, num_leaves: int | None = None):
        self.kind = kind  # "leaf", "none", or a type
        self.aux = aux
        self.children = tuple(children)
        if num_leaves is None:
            num_leaves = 1 if kind == "leaf" else sum(c.num_leaves for c in self.children)
        self.num_leaves = num_leaves
        self._hash = None  # computed once: a jitted call hashes its arguments' structure
        self._interned = False

    def _key(self):
        # aux data by `_aux_key` where it applies, so 1 / 1.0 / True and 0.0 / -0.0 stay
        # different structures (a jitted call recompiles for them; found by review)
        ak = _aux_key(self.aux)
        return (self.kind, self.aux if ak is _NOT_INTERNED else ak, self.children)

    def __eq__(self, other):
        # (no hash comparison first: aux data need not be hashable for tree_map & co.)
        return self is other or (isinstance(other, PyTreeDef) and self._key() == other._key())

    def __reduce__(self):
        # Pickled without the cached hash: hashes of strings and types differ between processes.
        return (PyTreeDef, (self.kind, self.aux, self.children))

    def __hash__(self):
        if self._hash is None:
            self._hash = hash(self._key())
        return self._hash

    def __repr__(self):
        if self.kind == "leaf":
            return "*"
        if self.kind == "none":
            return "None"
        inner = ", ".join(repr(c) for c in self.children)
        if self.kind is dict:
            return "{" + ", ".join(f"{k!r}: {c!r}" for k, c in zip(self.aux, self.children, strict=True)) + "}"
        if self.kind is list:
            return f"[{inner}]"
        if self.kind is tuple:
            return f"({inner}{',' if len(self.children) == 1 else ''})"
        return f"{getattr(self.kind, '__name__', self.kind)}({inner})"

    def unflatten(self, leaves):
        return tree_unflatten(self, leaves)

    @property
    def num_nodes(self) -> int:
        """The number of nodes of the structure, leaves and None included (as JAX's)."""
        return 1 + sum(c.num_nodes for c in self.children)


# Interned structures by (kind, aux, ids of the interned children): the table keeps them
# alive, so the ids stay theirs. Cleared when it outgrows _INTERN_MAX (structures made after
# that are interned afresh; older ones still compare equal, by walking them).
_INTERN: dict = {}
_INTERN_MAX = 100_000


_NOT_INTERNED = object()
_ATOMS = frozenset({str, int, bool, bytes, type(None)})


def _aux_key(aux):
    """A key for aux data made of plain values (str, int, bool, bytes, None, float, and tuples
    of them) that tells apart values equal across types (1, 1.0, True) or signs (0.0, -0.0),
    or _NOT_INTERNED for anything else: other objects would be kept alive by the table, and
    their equality may merge values the caller tells apart (found by review)."""
    t = type(aux)
    if t in _ATOMS:
        return (t, aux)
    if t is float:
        return (float, aux.hex())  # sign of zero and NaN included
    if t is tuple:
        if all(type(x) is str for x in aux):  # dict keys, field names: the common case
            return aux
        out = []
        for x in aux:
            k = _aux_key(x)
            if k is _NOT_INTERNED:
                return _NOT_INTERNED
            out.append(k)
        return (tuple, tuple(out))
    return _NOT_INTERNED


def _node(kind, aux, kids: tuple, num_leaves: int) -> PyTreeDef:
    """The PyTreeDef of a node, interned when its aux data are plain values (`_aux_key`) and
    its children are interned (a node holding a non-interned child is a new object on every
    flatten, so keying its parent by the child's id would only fill the table)."""
    for k in kids:
        if not k._interned:
            return PyTreeDef(kind, aux, kids, num_leaves)
    ak = _aux_key(aux)
    if ak is _NOT_INTERNED:
        return PyTreeDef(kind, aux, kids, num_leaves)
    key = (kind, ak, tuple(map(id, kids)))
    hit = _INTERN.get(key)
    if hit is None:
        if len(_INTERN) >= _INTERN_MAX:
            _INTERN.clear()
        hit = _INTERN[key] = PyTreeDef(kind, aux, kids, num_leaves)
        hit._interned = True
    return hit


def _flatten(x, leaves, is_leaf):
    if is_leaf is not None and is_leaf(x):
        leaves.append(x)
        return _LEAF
    if x is None:
        return _NONE
    t = type(x)
    node = _REGISTRY.get(t)
    n0 = len(leaves)
    if node is not None:
        children, aux = node.flatten(x)
        kids = tuple([_flatten(c, leaves, is_leaf) for c in children])
        return _node(t, aux, kids, len(leaves) - n0)
    if t is dict or isinstance(x, dict):
        keys = sorted(x.keys(), key=lambda k: (str(type(k)), k))
        kids = tuple([_flatten(x[k], leaves, is_leaf) for k in keys])
        return _node(dict, tuple(keys), kids, len(leaves) - n0)
    if t is tuple or t is list or _is_namedtuple(x):
        kids = tuple([_flatten(c, leaves, is_leaf) for c in x])
        return _node(t, None, kids, len(leaves) - n0)
    leaves.append(x)
    return _LEAF


# Structures without children are immutable and equal to any other of their kind: one each.
_LEAF = PyTreeDef("leaf", None, ())
_NONE = PyTreeDef("none", None, ())
_LEAF._interned = _NONE._interned = True


def tree_flatten(tree, is_leaf: Callable | None = None) -> tuple[list, PyTreeDef]:
    """Returns (leaves in a deterministic order, treedef). dict keys are sorted."""
    leaves: list = []
    return leaves, _flatten(tree, leaves, is_leaf)


def tree_unflatten(treedef: PyTreeDef, leaves) -> Any:
    """Rebuilds a pytree of structure `treedef` from `leaves`."""
    leaves = list(leaves)
    if len(leaves) != treedef.num_leaves:
        raise ValueError(
            f"tree_unflatten: the structure {treedef} has {treedef.num_leaves} leaves, "
            f"got {len(leaves)}"
        )
    it = iter(leaves)
    return _build(treedef, it)


def _build(td: PyTreeDef, it):
    if td is _LEAF:
        return next(it)
    kind = td.kind
    if kind == "leaf":
        return next(it)
    if kind == "none":
        return None
    children = [next(it) if c is _LEAF else _build(c, it) for c in td.children]
    if kind is dict:
        return dict(zip(td.aux, children, strict=True))
    if kind is list:
        return children
    if kind is tuple:
        return tuple(children)
    node = _REGISTRY.get(kind)
    if node is not None:
        return node.unflatten(td.aux, children)
    return kind(*children)  # namedtuple


def tree_leaves(tree, is_leaf=None) -> list:
    return tree_flatten(tree, is_leaf)[0]


def tree_structure(tree, is_leaf=None) -> PyTreeDef:
    return tree_flatten(tree, is_leaf)[1]


def tree_map(f: Callable, tree, *rest, is_leaf=None):
    """Applies f to corresponding leaves of `tree` and `rest` (which must share its structure)."""
    leaves, td = tree_flatten(tree, is_leaf)
    others = []
    for r in rest:
        rl, rtd = tree_flatten(r, is_leaf)
        if rtd != td:
            raise ValueError(f"tree_map: structures differ: {td} and {rtd}")
        others.append(rl)
    return tree_unflatten(td, [f(*xs) for xs in zip(leaves, *others, strict=True)])


# collections' dict subclasses keep their type through a flatten/unflatten (as in JAX): an
# OrderedDict's children in insertion order, a defaultdict's sorted like a dict's, with its
# default_factory in the structure.
def _sorted_keys(d) -> tuple:
    return tuple(sorted(d.keys(), key=lambda k: (str(type(k)), k)))


register_pytree_node(
    collections.OrderedDict,
    lambda d: (list(d.values()), tuple(d.keys())),
    lambda keys, children: collections.OrderedDict(zip(keys, children, strict=True)))


def _flatten_defaultdict(d):
    keys = _sorted_keys(d)
    return [d[k] for k in keys], (d.default_factory, keys)


register_pytree_node(
    collections.defaultdict, _flatten_defaultdict,
    lambda aux, children: collections.defaultdict(aux[0], zip(aux[1], children, strict=True)))


# --- key paths (jax.tree_util's *_with_path) ---------------------------------------------------


@dataclasses.dataclass(frozen=True)
class DictKey:
    """A dict (OrderedDict, defaultdict) entry in a key path: `key`."""

    key: Any

    def __str__(self):
        return f"[{self.key!r}]"


@dataclasses.dataclass(frozen=True)
class SequenceKey:
    """A list or tuple entry in a key path: `idx`."""

    idx: int

    def __str__(self):
        return f"[{self.idx}]"


@dataclasses.dataclass(frozen=True)
class GetAttrKey:
    """A namedtuple field or registered dataclass field in a key path: `name`."""

    name: str

    def __str__(self):
        return f".{self.name}"


@dataclasses.dataclass(frozen=True)
class FlattenedIndexKey:
    """The i-th child of another registered node in a key path: `key`."""

    key: int

    def __str__(self):
        return f"[<flat index {self.key}>]"


def keystr(path, *, simple: bool = False, separator: str = "") -> str:
    """A key path as text, e.g. ``['h'][0].w`` (as jax.tree_util.keystr); simple=True gives
    each key bare (``h``, ``0``, ``w``), and the keys are joined by `separator`."""
    if not simple:
        return separator.join(str(k) for k in path)

    def bare(k):
        for attr in ("key", "idx", "name"):
            if hasattr(k, attr):
                return str(getattr(k, attr))
        return str(k)

    return separator.join(bare(k) for k in path)


def _keys_of(x, children) -> list:
    t = type(x)
    with_keys = _KEYED.get(t)
    if with_keys is not None:  # register_pytree_with_keys: the node's own keys
        return [k for k, _ in with_keys(x)[0]]
    if t in _DATA_FIELDS:
        return [GetAttrKey(n) for n in _DATA_FIELDS[t]]
    if t is collections.OrderedDict:  # children in insertion order
        return [DictKey(k) for k in x.keys()]
    if t is collections.defaultdict:  # children in sorted key order
        return [DictKey(k) for k in _sorted_keys(x)]
    # Another registered node (a user's dict subclass too: its flatten decides the order).
    return [FlattenedIndexKey(i) for i in range(len(children))]


def _paths(x, prefix: tuple, out: list, is_leaf) -> None:
    if is_leaf is not None and is_leaf(x):
        out.append((prefix, x))
        return
    if x is None:
        return
    node = _REGISTRY.get(type(x))
    if node is not None:
        children = list(node.flatten(x)[0])
        for k, c in zip(_keys_of(x, children), children, strict=True):
            _paths(c, prefix + (k,), out, is_leaf)
        return
    if isinstance(x, dict):
        for k in _sorted_keys(x):
            _paths(x[k], prefix + (DictKey(k),), out, is_leaf)
        return
    if type(x) is tuple or type(x) is list or _is_namedtuple(x):
        named = _is_namedtuple(x)
        for i, c in enumerate(x):
            _paths(c, prefix + (GetAttrKey(x._fields[i]) if named else SequenceKey(i),), out,
                   is_leaf)
        return
    out.append((prefix, x))


def tree_flatten_with_path(tree, is_leaf: Callable | None = None) -> tuple[list, PyTreeDef]:
    """([(key path, leaf), ...], treedef), leaves in tree_flatten's order; a key path is a
    tuple of DictKey / SequenceKey / GetAttrKey / FlattenedIndexKey (as jax.tree_util)."""
    out: list = []
    _paths(tree, (), out, is_leaf)
    return out, tree_structure(tree, is_leaf)


def tree_leaves_with_path(tree, is_leaf: Callable | None = None) -> list:
    """[(key path, leaf), ...] in tree_flatten's order."""
    out: list = []
    _paths(tree, (), out, is_leaf)
    return out


def tree_map_with_path(f: Callable, tree, *rest, is_leaf=None):
    """tree_map with the key path as f's first argument: f(path, leaf, *others)."""
    pairs, td = tree_flatten_with_path(tree, is_leaf)
    others = []
    for r in rest:
        rl, rtd = tree_flatten(r, is_leaf)
        if rtd != td:
            raise ValueError(f"tree_map_with_path: structures differ: {td} and {rtd}")
        others.append(rl)
    return tree_unflatten(td, [f(p, x, *xs) for (p, x), *xs in zip(pairs, *others, strict=True)])


_NO_INITIALIZER = object()


def tree_reduce(function: Callable, tree, initializer=_NO_INITIALIZER, is_leaf=None):
    """functools.reduce(function, leaves of tree[, initializer]) (as jax.tree_util). Raises
    TypeError for a tree without leaves and no initializer."""
    leaves = tree_leaves(tree, is_leaf)
    if initializer is _NO_INITIALIZER:
        if not leaves:
            raise TypeError("tree_reduce() of a tree with no leaves and no initializer")
        return functools.reduce(function, leaves)
    return functools.reduce(function, leaves, initializer)


def tree_all(tree, is_leaf=None) -> bool:
    """Whether every leaf is truthy (True for a tree without leaves)."""
    return all(tree_leaves(tree, is_leaf))


# --- the rest of jax.tree_util ------------------------------------------------------------------

# flatten_with_keys functions of nodes registered by register_pytree_with_keys.
_KEYED: dict[type, Callable] = {}

KeyEntry = DictKey | SequenceKey | GetAttrKey | FlattenedIndexKey
KeyPath = tuple


def register_pytree_with_keys(cls: type, flatten_with_keys: Callable, unflatten_func: Callable,
                              flatten_func: Callable | None = None) -> None:
    """Registers `cls` as a node whose children carry key path entries of its own choosing.

    flatten_with_keys(node) -> (iterable of (key, child), aux_data); unflatten_func as for
    register_pytree_node; flatten_func (optional, faster) -> (children, aux_data) in the same
    order. Raises ValueError if cls is already registered."""
    if flatten_func is None:
        def flatten_func(node):
            pairs, aux = flatten_with_keys(node)
            return [c for _, c in pairs], aux
    register_pytree_node(cls, flatten_func, unflatten_func)
    _KEYED[cls] = lambda node: (list(flatten_with_keys(node)[0]), None)


def register_pytree_node_class(cls: type) -> type:
    """Class decorator: registers cls with its `tree_flatten(self)` method and its
    `tree_unflatten(cls, aux_data, children)` classmethod (as jax.tree_util). Returns cls."""
    register_pytree_node(cls, lambda node: node.tree_flatten(), cls.tree_unflatten)
    return cls


def register_pytree_with_keys_class(cls: type) -> type:
    """Class decorator: register_pytree_with_keys with `tree_flatten_with_keys(self)`, the
    `tree_unflatten` classmethod and, if defined, `tree_flatten(self)`. Returns cls."""
    flat = getattr(cls, "tree_flatten", None)
    register_pytree_with_keys(cls, lambda node: node.tree_flatten_with_keys(), cls.tree_unflatten,
                              (lambda node: node.tree_flatten()) if flat is not None else None)
    return cls


def register_static(cls: type) -> type:
    """Registers cls as a node without children: its instances are aux data (static under jit,
    part of the structure), so they must be hashable. Returns cls (usable as a decorator)."""
    register_pytree_node(cls, lambda node: ((), node), lambda aux, _: aux)
    return cls


def all_leaves(iterable, is_leaf: Callable | None = None) -> bool:
    """Whether every element of `iterable` is a leaf (flattens to itself)."""
    for x in iterable:
        if tree_structure(x, is_leaf).kind != "leaf":
            return False
    return True


def treedef_is_leaf(treedef: PyTreeDef) -> bool:
    """Whether the structure is one node without children: a leaf, None, or an empty
    container (as jax.tree_util.treedef_is_leaf, which counts nodes)."""
    return not treedef.children


def treedef_children(treedef: PyTreeDef) -> list:
    """The structures of the node's children (empty for a leaf)."""
    return list(treedef.children)


def treedef_tuple(treedefs) -> PyTreeDef:
    """The structure of a tuple whose children have the structures `treedefs`."""
    kids = tuple(treedefs)
    return PyTreeDef(tuple, None, kids)


def flatten_one_level(tree) -> tuple[list, Any]:
    """(children, aux data) of the root node (None: no children, aux None). Raises
    ValueError for a leaf."""
    if tree is None:
        return (), None
    td = tree_structure(tree, is_leaf=lambda x: x is not tree)
    if td.kind == "leaf":
        raise ValueError(f"flatten_one_level: {type(tree).__name__} is a leaf, not a node")
    children, _ = tree_flatten(tree, is_leaf=lambda x: x is not tree)
    return children, td.aux


def _flatten_up_to(prefix: PyTreeDef, tree, what: str) -> list:
    """The subtrees of `tree` at the leaves of `prefix` (a structure that is a prefix of
    tree's). Raises ValueError where they disagree."""
    if prefix.kind == "leaf":
        return [tree]
    if prefix.kind == "none":
        if tree is not None:
            raise ValueError(f"{what}: expected None, got {type(tree).__name__}")
        return []
    kids, td = tree_flatten(tree, is_leaf=lambda x: x is not tree)
    if td.kind != prefix.kind or td.aux != prefix.aux or len(kids) != len(prefix.children):
        raise ValueError(f"{what}: the tree {td} does not have the prefix structure {prefix}")
    out = []
    for c, k in zip(prefix.children, kids, strict=True):
        out += _flatten_up_to(c, k, what)
    return out


def tree_transpose(outer_treedef: PyTreeDef, inner_treedef: PyTreeDef | None, pytree_to_transpose):
    """An outer-of-inner pytree turned into inner-of-outer (as jax.tree_util.tree_transpose):
    e.g. a list of (a, b) pairs into a pair of lists. inner_treedef None: the structure of the
    first inner tree. Raises ValueError when the inner trees differ."""
    subtrees = _flatten_up_to(outer_treedef, pytree_to_transpose, "tree_transpose")
    if inner_treedef is None:
        if not subtrees:
            raise ValueError("tree_transpose: inner_treedef None needs at least one inner tree")
        inner_treedef = tree_structure(subtrees[0])
    cols = []
    for st in subtrees:
        leaves, td = tree_flatten(st)
        if td != inner_treedef:
            raise ValueError(f"tree_transpose: an inner tree {td} differs from {inner_treedef}")
        cols.append(leaves)
    per_inner = [tree_unflatten(outer_treedef, [c[i] for c in cols])
                 for i in range(inner_treedef.num_leaves)]
    return tree_unflatten(inner_treedef, per_inner)


def tree_broadcast(prefix_tree, full_tree, is_leaf: Callable | None = None):
    """prefix_tree with each of its leaves repeated over the matching subtree of full_tree
    (as jax.tree_util.tree_broadcast). Raises ValueError if prefix_tree is not a prefix."""
    leaves, td = tree_flatten(prefix_tree, is_leaf)
    subtrees = _flatten_up_to(td, full_tree, "tree_broadcast")
    return tree_unflatten(td, [tree_map(lambda _, x=x: x, st, is_leaf=is_leaf)
                               for x, st in zip(leaves, subtrees, strict=True)])


def tree_reduce_associative(operation: Callable, tree, *, identity=_NO_INITIALIZER,
                            is_leaf: Callable | None = None):
    """Reduces the leaves with an associative `operation` as a balanced tree (depth log2 n),
    so the result of n leaves takes log n sequential steps. An empty tree returns `identity`
    (TypeError when it is not given)."""
    leaves = tree_leaves(tree, is_leaf)
    if not leaves:
        if identity is _NO_INITIALIZER:
            raise TypeError("tree_reduce_associative() of a tree with no leaves and no identity")
        return identity
    while len(leaves) > 1:
        nxt = [operation(leaves[i], leaves[i + 1]) for i in range(0, len(leaves) - 1, 2)]
        if len(leaves) % 2:
            nxt.append(leaves[-1])
        leaves = nxt
    return leaves[0]


class Partial(functools.partial):
    """functools.partial as a pytree: the bound arguments are its children, the function its
    aux data, so a Partial passes through jit and other transforms as an argument (as
    jax.tree_util.Partial). A Partial of a Partial is merged into one, so all the bound
    arguments stay children."""

    def __new__(cls, func, *args, **kw):
        if isinstance(func, Partial):
            args, kw, func = func.args + args, {**func.keywords, **kw}, func.func
        return super().__new__(cls, func, *args, **kw)


def _flatten_partial(p: Partial):
    keys = tuple(sorted(p.keywords))
    return (p.args, tuple(p.keywords[k] for k in keys)), (p.func, keys)


def _unflatten_partial(aux, children):
    func, keys = aux
    args, vals = children
    return Partial(func, *args, **dict(zip(keys, vals, strict=True)))


register_pytree_node(Partial, _flatten_partial, _unflatten_partial)
