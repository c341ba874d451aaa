"""The pytree module (flatten for compiled calls, leaves for marker boundaries: one path syntax)
and the call keys built from its leaves."""

from __future__ import annotations

import dataclasses
import enum
from collections import OrderedDict, namedtuple

import numpy as np
import pytest

import tensorplay as tp
import tensorplay.compiler as tpc
from tensorplay.compiler.capture import pytree
from tensorplay.compiler.capture.guards import (CallKey, FloatKey, ObjectKey, TensorKey, ValueKey, call_key,
                                                describe_change, mask_key, size_changes)

Pair = namedtuple("Pair", "a b")


@dataclasses.dataclass
class Params:
    w: object
    scale: float = 1.0


class Color(enum.Enum):
    RED = 1


def _tree():
    x = tp.ones(2)
    return ((x, [1.5, {"k": Pair(2, x)}], Params(x, 3.0)), {"flag": None})


def test_flatten_and_leaves_name_each_leaf_by_one_path_syntax():
    leaves, treedef = pytree.flatten(_tree())
    paths = ["[0][0]", "[0][1][0]", "[0][1][1]['k'][0]", "[0][1][1]['k'][1]", "[0][2].w", "[0][2].scale",
             "[1]['flag']"]
    assert pytree.leaf_paths(treedef) == paths
    assert [leaf.path for leaf in pytree.leaves(_tree(), "")] == paths
    assert pytree.leaf_paths(treedef, "args") == ["args" + p for p in paths]


def test_unflatten_rebuilds_new_containers_of_the_same_types():
    tree = _tree()
    leaves, treedef = pytree.flatten(tree)
    again = pytree.unflatten(treedef, leaves)
    assert again == tree and again[0][1] is not tree[0][1]
    assert type(again[0][1][1]["k"]) is Pair and type(again[0][2]) is Params
    assert pytree.flatten(again)[1] == treedef and hash(pytree.flatten(again)[1]) == hash(treedef)


def test_flatten_opens_only_what_it_rebuilds_while_leaves_read_subclasses():
    od = OrderedDict(a=tp.ones(1))
    leaves, treedef = pytree.flatten((od,))
    assert leaves == [od] and pytree.leaf_paths(treedef) == ["[0]"]  # a dict subclass is one leaf
    assert [leaf.path for leaf in pytree.leaves((od,), "args")] == ["args[0]['a']"]


def test_constants_are_one_list():
    for value in (None, True, 3, 2.5, 1j, "s", b"b", tp.float32, Color.RED, ..., range(2), slice(1, None)):
        assert pytree.is_constant(value), value
    assert not pytree.is_constant(object()) and not pytree.is_constant(slice(object()))
    assert set(pytree.CONSTANT_TYPES) >= {type(None), bool, int, float, complex, str, bytes}


def test_a_container_that_contains_itself_is_rejected_by_leaves():
    loop: list = []
    loop.append(loop)
    with pytest.raises(TypeError, match=r"args\[0\] contains itself"):
        list(pytree.leaves(loop, "args"))


def test_marker_boundary_errors_use_the_same_paths(backend):
    @tpc.nonstrict_trace
    def apply(x, pair):
        return x * pair.a

    def f(x):
        return apply(x, Pair(2.0, object()))

    with pytest.raises(TypeError, match=r"args\[1\]\[1\] is a object"):
        tpc.compile(f, backend=backend)(tp.ones(2))


def _key(*args, **kwargs):
    leaves, treedef = pytree.flatten((args, kwargs))
    return call_key(treedef, leaves)


def test_call_keys_are_named_records():
    x = tp.ones(2, 3)
    key = _key(x, 1.5, 2, object(), k=x)
    assert isinstance(key, CallKey) and key.alias == ((4, 0),)
    t, f, v, o, _ = key.leaves
    assert type(t) is TensorKey and t.shape == (2, 3) and t.dtype == np.float32 and t.requires_grad is False
    assert type(f) is FloatKey and f.hex == (1.5).hex()
    assert type(v) is ValueKey and (v.type, v.value) == (int, 2)
    assert type(o) is ObjectKey and o.type is object
    assert key.modes == (tp.is_grad_enabled(), False, tp.get_default_dtype(), None)  # no autocast
    assert key == tuple(key) and hash(key) == hash(tuple(key))  # plain tuples to dict lookups


def test_keys_of_equal_values_of_other_types_differ():
    assert _key(1) != _key(1.0) != _key(True)
    assert _key(0.0) != _key(-0.0) and _key(float("nan")) == _key(float("nan"))


def test_mask_key_and_size_changes_read_the_tensor_sizes():
    a, b = _key(tp.ones(2, 3)), _key(tp.ones(4, 3))
    assert size_changes(a, b) == [(0, 0)]
    assert mask_key(a, ((0, 0),)) == mask_key(b, ((0, 0),)) != a
    assert mask_key(a, ((0, 2),)) is None and mask_key(_key(1), ((0, 0),)) is None
    assert size_changes(a, _key(tp.ones(2, 3, dtype=tp.float64))) == []
    assert describe_change(a, ["x"], b, ["x"]) == "x: shape (2, 3) -> (4, 3)"
    assert describe_change(_key(2), ["k"], _key(3), ["k"]) == "k: 2 -> 3"
