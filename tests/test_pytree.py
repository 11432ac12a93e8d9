"""Pytrees: containers, namedtuples, None, registered classes and dataclasses; transforms on them."""

import dataclasses
from collections import namedtuple

import numpy as np
import pytest

import nova
import nova.numpy as jnp
from nova import tree_util as tu
from tests.helpers import assert_close

Point = namedtuple("Point", ["x", "y"])


@tu.register_dataclass
@dataclasses.dataclass
class Linear:
    w: object
    b: object
    name: str = dataclasses.field(default="lin", metadata={"static": True})


class Pair:
    def __init__(self, a, b):
        self.a, self.b = a, b


tu.register_pytree_node(Pair, lambda p: ((p.a, p.b), None), lambda aux, ch: Pair(*ch))


def test_flatten_unflatten_round_trip_all_node_kinds():
    tree = {"b": [1, (2, None, Point(3, 4))], "a": Linear(5, 6), "c": Pair(7, {"z": 8})}
    leaves, td = tu.tree_flatten(tree)
    assert leaves == [5, 6, 1, 2, 3, 4, 7, 8]  # dict keys sorted; None is a node, not a leaf
    back = tu.tree_unflatten(td, leaves)
    assert back["b"][1][2] == Point(3, 4) and back["b"][1][1] is None
    assert isinstance(back["a"], Linear) and back["a"].name == "lin" and back["a"].w == 5
    assert isinstance(back["c"], Pair) and back["c"].b == {"z": 8}
    assert tu.tree_structure(tree) == td and hash(td) == hash(tu.tree_structure(tree))
    assert tu.tree_leaves(tree) == leaves


def test_static_fields_are_part_of_the_structure():
    a, b = Linear(1, 2, name="a"), Linear(1, 2, name="b")
    assert tu.tree_structure(a) != tu.tree_structure(b)


def test_tree_map_and_mismatch_error():
    t = {"p": [1.0, 2.0], "q": Point(3.0, 4.0)}
    out = tu.tree_map(lambda u, v: u + v, t, t)
    assert out == {"p": [2.0, 4.0], "q": Point(6.0, 8.0)}
    with pytest.raises(ValueError, match="structures differ"):
        tu.tree_map(lambda u, v: u, t, {"p": [1.0], "q": Point(1.0, 2.0)})
    with pytest.raises(ValueError, match="has 4 leaves, got 3"):
        tu.tree_unflatten(tu.tree_structure(t), [1, 2, 3])


def test_grad_and_jit_over_dataclasses_and_namedtuples():
    rng = np.random.default_rng(0)
    model = Linear(rng.standard_normal((3, 2)), rng.standard_normal(2))
    batch = Point(rng.standard_normal((4, 3)), rng.standard_normal((4, 2)))

    def loss(m, data):
        return jnp.mean((data.x @ m.w + m.b - data.y) ** 2)

    g = nova.jit(nova.grad(loss))(model, batch)
    assert isinstance(g, Linear) and g.name == "lin"
    r = batch.x @ model.w + model.b - batch.y
    assert_close(g.w, 2 * batch.x.T @ r / r.size, rtol=1e-10)
    assert_close(g.b, 2 * r.sum(0) / r.size, rtol=1e-10)


def test_register_twice_raises():
    with pytest.raises(ValueError, match="already registered"):
        tu.register_pytree_node(Pair, lambda p: ((), None), lambda a, c: Pair(0, 0))


def test_treedef_pickles_without_its_cached_hash_and_allows_unhashable_aux():
    """A treedef hashed in one process and unpickled in another still equals (and finds in a
    dict) the same structure built there (string and type hashes differ between processes);
    equality never hashes, so aux data that is not hashable still compares (found by review)."""
    import pickle
    import subprocess
    import sys

    td = tu.tree_structure({"a": 1, "b": (2, None)})
    hash(td)
    blob = pickle.dumps(td)
    code = ("import pickle; from nova import tree_util as tu; "
            f"old = pickle.loads({blob!r}); new = tu.tree_structure({{'a': 1, 'b': (2, None)}}); "
            "print(old == new, {new: 'hit'}.get(old))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.split() == ["True", "hit"], out.stdout + out.stderr

    class Box:
        def __init__(self, x, meta):
            self.x, self.meta = x, meta

    tu.register_pytree_node(Box, lambda b: ([b.x], b.meta), lambda a, c: Box(c[0], a))
    assert tu.tree_map(lambda a, b: a + b, Box(1, ["relu"]), Box(2, ["relu"])).x == 3
    assert tu.tree_structure(Box(1, ["relu"])) == tu.tree_structure(Box(5, ["relu"]))


def test_equal_structures_flatten_to_one_interned_treedef():
    """Flattening interns structures, so a jitted call's signature lookups compare them by
    identity; aux data that is not hashable (and everything above it) is left out of the table
    (a new object per flatten would only fill it), and still compares equal."""
    from nova.core import pytree

    tree = {"b": [1, (2, None, Point(3, 4))], "a": Linear(5, 6), "c": Pair(7, {"z": 8})}
    assert tu.tree_structure(tree) is tu.tree_structure(tree)
    assert tu.tree_structure(Linear(1, 2, name="a")) is not tu.tree_structure(
        Linear(1, 2, name="b"))

    class Box:
        def __init__(self, x, meta):
            self.x, self.meta = x, meta

    tu.register_pytree_node(Box, lambda b: ([b.x], b.meta), lambda a, c: Box(c[0], a))
    size = len(pytree._INTERN)
    one, two = tu.tree_structure([Box(1, ["relu"])]), tu.tree_structure([Box(2, ["relu"])])
    assert one is not two and one == two and one.num_leaves == 1
    assert len(pytree._INTERN) == size
    # an interned subtree keeps its identity under a non-interned parent
    assert one.children[0].children[0] is tu.tree_structure(1)


def test_dataclass_unflatten_checks_counts_and_skips_init():
    leaves, td = tu.tree_flatten(Linear(np.ones(2), 3.0, name="x"))
    back = tu.tree_unflatten(td, [10, 20])
    assert (back.w, back.b, back.name) == (10, 20, "x")
    from nova.core.pytree import _REGISTRY

    with pytest.raises(ValueError, match="expected 2 children"):
        _REGISTRY[Linear].unflatten(("x",), [1])


def test_interning_keeps_aux_types_signs_and_frees_objects():
    """Found by review: interned structures must not merge aux data that compare equal across
    types or signs ({1: 0} and {True: 0}, 1 and 1.0, 0.0 and -0.0), must not keep arbitrary aux
    objects alive, and dataclass unflatten must honour slots on the class's bases."""
    import gc
    import weakref

    tu.tree_flatten({1: 0})
    assert list(tu.tree_map(lambda v: v, {True: 0})) == [True]
    assert type(list(tu.tree_map(lambda v: v, {True: 0}))[0]) is bool
    tu.tree_flatten(Linear(0, 1, name=1.0))
    assert type(tu.tree_map(lambda v: v, Linear(0, 1, name=1)).name) is int
    tu.tree_flatten(Linear(0, 1, name=0.0))
    assert np.signbit(tu.tree_map(lambda v: v, Linear(0, 1, name=-0.0)).name)

    class Big:
        pass

    refs = []
    for _ in range(5):
        b = Big()
        refs.append(weakref.ref(b))
        tu.tree_flatten(Linear(0, 1, name=b))
        del b
    gc.collect()
    assert not any(r() is not None for r in refs)

    @dataclasses.dataclass(slots=True)
    class Base:
        x: object

    @tu.register_dataclass
    @dataclasses.dataclass
    class Derived(Base):
        y: object

    back = tu.tree_map(lambda v: v * 10, Derived(1, 2))
    assert (back.x, back.y) == (10, 20)


def test_aux_values_of_other_types_or_signs_are_other_structures():
    """Found by review: equality and hashing of treedefs (so jit's signature cache) tell aux
    values equal across types or signs apart, as interning does."""
    assert tu.tree_structure(Linear(0, 1, name=1)) != tu.tree_structure(Linear(0, 1, name=1.0))
    assert tu.tree_structure(Linear(0, 1, name=0.0)) != tu.tree_structure(
        Linear(0, 1, name=-0.0))
    f = nova.jit(lambda p: p.w / p.name)
    x = np.ones(3, np.float32)
    assert np.all(np.asarray(f(Linear(x, 0, name=0.0))) == np.inf)
    assert np.all(np.asarray(f(Linear(x, 0, name=-0.0))) == -np.inf)


def test_ordered_and_default_dicts_keep_their_type():
    """OrderedDict (children in insertion order) and defaultdict (its default_factory kept)
    come back as themselves from tree_map, jit and grad, as in JAX (they became plain dicts)."""
    import collections

    od = collections.OrderedDict([("b", np.float32(1.0)), ("a", np.float32(2.0))])
    out = tu.tree_map(lambda x: x * 2, od)
    assert type(out) is collections.OrderedDict and list(out) == ["b", "a"]
    assert tu.tree_leaves(od) == [1.0, 2.0]  # insertion order, not sorted
    g = nova.grad(lambda t: t["a"] * t["b"] * 3.0)(od)
    assert type(g) is collections.OrderedDict and float(g["b"]) == 6.0
    dd = collections.defaultdict(list, {"z": np.float32(1.0), "y": np.float32(3.0)})
    r = nova.jit(lambda t: tu.tree_map(lambda x: x + 1.0, t))(dd)
    assert type(r) is collections.defaultdict and r.default_factory is list
    assert float(r["y"]) == 4.0 and float(r["z"]) == 2.0
    assert tu.tree_structure(dd) != tu.tree_structure(collections.defaultdict(dict, dd))
    assert tu.tree_structure(od) != tu.tree_structure(dict(od))


def test_key_paths_reduce_and_node_counts_match_jax():
    """tree_flatten_with_path / tree_leaves_with_path / tree_map_with_path, keystr,
    tree_reduce, tree_all and PyTreeDef.num_nodes give what jax.tree_util gives."""
    import collections

    import jax

    P = namedtuple("P", "a b")
    tree = {"h": [np.ones(2), (3.0, None)], "p": P(1, 2), "0": [4.0],
            "o": collections.OrderedDict([("z", 1), ("y", 2)])}
    ours = [(tu.keystr(p), x) for p, x in tu.tree_leaves_with_path(tree)]
    theirs = [(jax.tree_util.keystr(p), x) for p, x in jax.tree_util.tree_leaves_with_path(tree)]
    assert [k for k, _ in ours] == [k for k, _ in theirs]
    pairs, td = tu.tree_flatten_with_path(tree)
    assert td == tu.tree_structure(tree) and len(pairs) == td.num_leaves
    assert td.num_nodes == jax.tree_util.tree_structure(tree).num_nodes
    named = tu.tree_map_with_path(lambda p, x, y: (tu.keystr(p), y), tree,
                                  tu.tree_map(lambda x: 7, tree))
    assert named["p"].b == ("['p'].b", 7) and named["h"][1][1] is None
    assert tu.tree_reduce(lambda a, b: a + b, [1, 2, (3, 4)]) == 10
    assert tu.tree_reduce(lambda a, b: a + b, [], 5) == 5
    with pytest.raises(TypeError, match="no leaves and no initializer"):
        tu.tree_reduce(lambda a, b: a + b, [None])
    assert tu.tree_all([True, (1, 2)]) and not tu.tree_all([True, (1, 0)]) and tu.tree_all([])

    @dataclasses.dataclass
    class W:
        w: object
        n: int = dataclasses.field(default=3, metadata={"static": True})

    tu.register_dataclass(W)
    assert [tu.keystr(p) for p, _ in tu.tree_leaves_with_path({"x": W(1.0)})] == ["['x'].w"]


def test_key_paths_of_a_registered_dict_subclass_follow_its_flatten():
    """A user-registered dict subclass flattens in its own order: its key path entries are
    flat indices, as in JAX (they were dict keys in sorted order, mispaired; found by review)."""
    class MyDict(dict):
        pass

    tu.register_pytree_node(MyDict, lambda d: (list(d.values()), tuple(d.keys())),
                            lambda k, c: MyDict(zip(k, c, strict=True)))
    pairs = tu.tree_leaves_with_path(MyDict([("z", 1), ("a", 2)]))
    assert [(tu.keystr(p), x) for p, x in pairs] == [("[<flat index 0>]", 1),
                                                      ("[<flat index 1>]", 2)]
