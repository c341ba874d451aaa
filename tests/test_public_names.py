"""Every name an ``@public`` declaration asks for is reachable (``tp.X``, ``Tensor.X``,
``Tensor.X_``, ``F.X``, numpy's ufuncs and array functions), and every ``tp`` function from
the ops modules or nn.functional is declared."""

from __future__ import annotations

import sys
import types

import numpy as np
import pytest

import tensorplay as tp
import tensorplay.nn.functional as F
from tensorplay import _numpy_interop
from tensorplay.ops import _public

_public.load_all()
DECLS = list(_public.DECLARED.values())


def _ids(decls):
    return [f"{d.module.rsplit('.', 1)[-1]}.{d.name}" for d in decls]


@pytest.mark.parametrize("decl", DECLS, ids=_ids(DECLS))
def test_declared_names_are_reachable(decl):
    module = sys.modules[decl.module]
    for name in decl.names:
        assert getattr(module, name) is decl.obj, f"{decl.module}.{name}"
        if decl.module.startswith("tensorplay.ops."):
            assert name in module.__all__, f"{name} missing from {decl.module}.__all__"
        if decl.top:
            assert getattr(tp, name, None) is decl.obj, f"tp.{name} is not {decl.module}.{decl.name}"
        if decl.functional:
            assert getattr(F, name, None) is decl.obj, f"F.{name}"
            assert name in F.__all__
        if decl.method:
            method = tp.Tensor.__dict__.get(name)
            assert method is not None and method.__wrapped__ is decl.obj, f"Tensor.{name}"
        if decl.inplace:
            method = tp.Tensor.__dict__.get(name + "_")
            assert method is not None and method.__wrapped__ is decl.obj, f"Tensor.{name}_"
    for ufunc in decl.ufuncs:
        assert isinstance(getattr(np, ufunc, None), np.ufunc), f"np.{ufunc} is not a numpy ufunc"
        assert _numpy_interop.UFUNCS[ufunc] == decl.name
    for function in decl.array_functions:
        assert callable(getattr(np, function, None)), f"np.{function}"
        assert function in _numpy_interop.FUNCTIONS


UFUNCS = sorted(_numpy_interop.UFUNCS)


@pytest.mark.parametrize("ufunc", UFUNCS)
def test_numpy_ufuncs_run_as_tp_ops(ufunc):
    """``np.<ufunc>(tensor, ...)`` is the tp function's Tensor (not numpy's array)."""
    fn = getattr(np, ufunc)
    if fn.nin == 2 and ufunc == "matmul":
        args = [tp.ones(2, 2), tp.ones(2, 2)]
    else:
        args = None
        for dtype in (tp.float32, tp.int32, tp.bool):
            args = [tp.ones(3, dtype=dtype) for _ in range(fn.nin)]
            try:
                getattr(tp, _numpy_interop.UFUNCS[ufunc])(*args)
                break
            except (TypeError, tp.DTypeError):
                continue
    out = fn(*args)
    assert isinstance(out, tp.Tensor), f"np.{ufunc} returned {type(out).__name__}"


def test_every_tp_op_function_is_declared():
    top = {n for d in DECLS if d.top for n in d.names}
    undeclared = []
    for name in dir(tp):
        obj = getattr(tp, name)
        module = getattr(obj, "__module__", None) or ""
        if isinstance(obj, types.ModuleType) or name.startswith("_"):
            continue
        if module.startswith("tensorplay.ops.") or module == "tensorplay.nn.functional":
            if name not in top:
                undeclared.append(name)
    assert not undeclared, f"tp functions without an @public declaration: {undeclared}"


def test_generated_methods_take_the_function_signature():
    import inspect

    assert list(inspect.signature(tp.tensor([1.0]).add_).parameters) == ["other", "alpha"]
    t = tp.tensor([1.0, 4.0])
    assert t.sqrt_() is t and t.tolist() == [1.0, 2.0]
    assert tp.Tensor.add.__qualname__ == "Tensor.add" and tp.Tensor.add.__module__ == "tensorplay._tensor"


def test_declaration_errors():
    module = types.ModuleType("tensorplay_declaration_probe")
    sys.modules[module.__name__] = module
    try:
        def add(input):
            return input

        add.__module__ = module.__name__
        with pytest.raises(ValueError, match="tp.add is declared by both"):
            _public.public(add)
        with pytest.raises(ValueError, match="inplace=True needs method=True"):
            _public.public(inplace=True)(add)
        with pytest.raises(ValueError, match="numpy names need"):
            _public.public(top=False, ufunc="add")(add)
    finally:
        del sys.modules[module.__name__]
