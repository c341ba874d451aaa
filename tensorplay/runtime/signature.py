"""Entry point signatures of exported programs, as stored in the vmfb and checked on calls.

An exported vmfb carries, in each entry function's reflection map (what
``iree-dump-module`` prints under the function), ``tensorplay.signature`` (argument names,
shapes and dtypes, result types, how results nest) and ``tensorplay.module`` (module-wide
facts: backend, target, parameter archive). Both are JSON. This module reads and writes
them and checks call arguments with numpy only, so deployment needs no compiler.
"""

from __future__ import annotations

import ast
import json
from collections import namedtuple
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["TensorSpec", "EntrySignature", "ModuleInfo", "SIGNATURE_KEY", "MODULE_KEY", "FORMAT_VERSION",
           "numpy_dtype"]

#: reflection keys of an exported entry function
SIGNATURE_KEY = "tensorplay.signature"
MODULE_KEY = "tensorplay.module"
FORMAT_VERSION = 1
#: signatures with dynamic dimensions (named sizes and size checks) are written as version 2
DYNAMIC_FORMAT_VERSION = 2
_READABLE_VERSIONS = (FORMAT_VERSION, DYNAMIC_FORMAT_VERSION)


def numpy_dtype(name: str) -> np.dtype:
    """The numpy dtype of a tensorplay dtype name (``bfloat16`` comes from ml_dtypes)."""
    if name == "bfloat16":
        import ml_dtypes  # only programs that use bfloat16 need it

        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)


@dataclass(frozen=True)
class TensorSpec:
    """One tensor argument or result: name, shape, dtype, and the dtype the compiled
    function takes or returns (``abi_dtype``; differs where a target widens small types).

    A shape entry is an int (a static size) or, for a dynamic dimension, a text: the
    dimension's name (``"seq"``) or an expression over names (``"2 * seq"``)."""

    name: str
    shape: tuple[int | str, ...]
    dtype: str
    abi_dtype: str | None = None

    @property
    def wire_dtype(self) -> str:
        return self.abi_dtype or self.dtype

    @property
    def dynamic(self) -> bool:
        """Whether some dimension's size is only known at call time."""
        return any(isinstance(d, str) for d in self.shape)

    def __str__(self) -> str:
        return f"{self.dtype}[{', '.join(map(str, self.shape))}]"

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "shape": list(self.shape), "dtype": self.dtype}
        if self.abi_dtype and self.abi_dtype != self.dtype:
            out["abi"] = self.abi_dtype
        return out

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> TensorSpec:
        return cls(d["name"], tuple(s if isinstance(s, str) else int(s) for s in d["shape"]), d["dtype"],
                   d.get("abi"))


@dataclass(frozen=True)
class EntrySignature:
    """What an entry point takes and returns.

    ``tree`` describes the Python structure of the results: ``{"t": "out", "i": k}`` for the
    k-th result tensor, ``{"t": "const", "v": ...}`` for a constant (e.g. None), and
    ``tuple``/``list``/``dict``/``namedtuple`` containers of those.

    ``dims`` describes the dynamic dimensions of the arguments (None when every size is
    static): ``{"bind": [[var, argument, dim], ...], "checks": [[expression, description],
    ...]}``. A call binds each ``var`` to that argument's size; every expression (integer
    arithmetic over ``aN[d]``, argument N's shape, and the bound vars) must hold, e.g.
    ``a1[0] == v0`` (two inputs share a size) or ``v0 <= 512`` (a bound).
    """

    name: str
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    tree: Any = None
    method: str | None = None
    overload: int | None = None
    dims: dict[str, Any] | None = None

    @property
    def dynamic(self) -> bool:
        """Whether the entry point takes arguments of more than one shape."""
        return self.dims is not None and any(s.dynamic for s in self.inputs)

    def __str__(self) -> str:
        args = ", ".join(f"{s.name}: {s}" for s in self.inputs)
        return f"{self.name}({args}) -> {self._format_tree(self.tree)}"

    def __repr__(self) -> str:
        return f"<EntrySignature {self}>"

    def _format_tree(self, node: Any) -> str:
        if node is None:
            return "()"
        kind = node["t"]
        if kind == "out":
            return str(self.outputs[node["i"]])
        if kind == "const":
            return repr(node["v"])
        parts = [self._format_tree(c) for c in node["c"]]
        if kind == "dict":
            return "{" + ", ".join(f"{k!r}: {p}" for k, p in zip(node["k"], parts)) + "}"
        if kind == "list":
            return "[" + ", ".join(parts) + "]"
        name = node.get("n", "")
        return f"{name}({', '.join(parts)}{',' if len(parts) == 1 and not name else ''})"

    # -- JSON ------------------------------------------------------------------------------
    def to_json(self) -> str:
        d: dict[str, Any] = {"v": DYNAMIC_FORMAT_VERSION if self.dynamic else FORMAT_VERSION,
                             "name": self.name, "method": self.method, "overload": self.overload,
                             "inputs": [s.to_json() for s in self.inputs],
                             "outputs": [s.to_json() for s in self.outputs], "tree": self.tree}
        if self.dynamic:
            d["dims"] = self.dims
        return json.dumps(d, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> EntrySignature:
        d = json.loads(text)
        if d.get("v") not in _READABLE_VERSIONS:
            raise ValueError(f"exported signature format {d.get('v')!r} is not supported by this "
                             f"tensorplay.runtime (it reads formats "
                             f"{', '.join(map(str, _READABLE_VERSIONS))}); update tensorplay")
        dims = d.get("dims")
        if dims is not None:
            _SizeChecks.of(dims)  # a malformed check fails at load, not at the first call
        return cls(d["name"], tuple(TensorSpec.from_json(s) for s in d["inputs"]),
                   tuple(TensorSpec.from_json(s) for s in d["outputs"]), d.get("tree"), d.get("method"),
                   d.get("overload"), dims)

    # -- calls -----------------------------------------------------------------------------
    def check_inputs(self, args: Sequence[Any]) -> list[np.ndarray]:
        """The arguments as contiguous arrays of the compiled function's dtypes; TypeError
        (count, dtype) or ValueError (shape) naming this signature when one does not fit."""
        if len(args) != len(self.inputs):
            raise TypeError(f"{self} takes {len(self.inputs)} tensor argument(s) but {len(args)} "
                            f"{'was' if len(args) == 1 else 'were'} given")
        arrays = []
        for spec, value in zip(self.inputs, args):
            want = numpy_dtype(spec.dtype)
            array = _as_array(value)
            if array is None:  # a Python number or nested list: converted to the declared dtype
                try:
                    array = np.asarray(value, dtype=want)
                except (TypeError, ValueError) as exc:
                    raise TypeError(f"{self}: argument {spec.name!r} must be an array or tensor of "
                                    f"{spec}, got {type(value).__name__} ({exc})") from None
            elif array.dtype != want:
                raise TypeError(f"{self}: argument {spec.name!r} has dtype {_dtype_name(array.dtype)}, "
                                f"expected {spec.dtype} (convert it with .astype({spec.dtype!r}))")
            self._check_shape(spec, array.shape)
            if spec.abi_dtype and spec.abi_dtype != spec.dtype:
                array = array.astype(numpy_dtype(spec.abi_dtype))
            arrays.append(np.ascontiguousarray(array))
        if self.dims is not None:
            failed = _SizeChecks.of(self.dims).failure([a.shape for a in arrays])
            if failed is not None:
                shapes = ", ".join(f"{s.name}={list(a.shape)}" for s, a in zip(self.inputs, arrays))
                raise ValueError(f"{self}: the argument sizes break {failed} (got {shapes})")
        return arrays

    def _check_shape(self, spec: TensorSpec, shape: tuple[int, ...]) -> None:
        if len(shape) == len(spec.shape) and all(isinstance(w, str) or w == g for w, g in zip(spec.shape, shape)):
            return
        if not spec.dynamic:
            raise ValueError(f"{self}: argument {spec.name!r} has shape {list(shape)}, expected "
                             f"{list(spec.shape)} (this entry point was exported with static shapes; "
                             f"export again with example arguments of the new shape, or with "
                             f"dynamic_shapes naming the dims that vary)")
        if len(shape) != len(spec.shape):
            raise ValueError(f"{self}: argument {spec.name!r} has {len(shape)} dims {list(shape)}, "
                             f"expected {len(spec.shape)}: [{', '.join(map(str, spec.shape))}]")
        d = next(i for i, (w, g) in enumerate(zip(spec.shape, shape)) if not isinstance(w, str) and w != g)
        raise ValueError(f"{self}: argument {spec.name!r} has size {shape[d]} at dim {d}, expected "
                         f"{spec.shape[d]} (only the named dims of [{', '.join(map(str, spec.shape))}] "
                         f"may vary)")

    def result_dtypes(self) -> list[np.dtype]:
        """How to read the compiled function's results back (its ABI dtypes)."""
        return [numpy_dtype(s.wire_dtype) for s in self.outputs]

    def restore(self, results: Sequence[np.ndarray]) -> Any:
        """The results in the entry point's Python structure, with the declared dtypes."""
        typed = []
        for spec, r in zip(self.outputs, results):
            if spec.abi_dtype and spec.abi_dtype != spec.dtype:
                r = (r != 0) if spec.dtype == "bool" else r.astype(numpy_dtype(spec.dtype))
            typed.append(r)
        if self.tree is None:
            return tuple(typed)
        return _build(self.tree, typed)


class _SizeChecks:
    """The size checks of a dynamic signature, compiled once: Python integer expressions
    over argument shapes, validated to hold nothing but arithmetic, comparisons,
    ``min``/``max``/``abs`` and names bound to sizes (the vmfb is data; it must not run code
    in the caller's process)."""

    _cache: dict[str, _SizeChecks] = {}
    _NODES = (ast.Expression, ast.Compare, ast.BoolOp, ast.BinOp, ast.UnaryOp, ast.Name, ast.Load,
              ast.Subscript, ast.Constant, ast.Call, ast.And, ast.Or, ast.Not, ast.USub, ast.UAdd, ast.Add,
              ast.Sub, ast.Mult, ast.FloorDiv, ast.Mod, ast.Pow, ast.Eq, ast.NotEq, ast.Lt, ast.LtE, ast.Gt,
              ast.GtE)
    _CALLS = {"min": min, "max": max, "abs": abs}

    def __init__(self, dims: dict[str, Any]):
        try:
            self.bind = [(str(v), int(a), int(d)) for v, a, d in dims.get("bind", ())]
            checks = [(str(e), str(why)) for e, why in dims.get("checks", ())]
        except (TypeError, ValueError) as exc:
            raise ValueError(f"malformed size checks in an exported signature: {exc}") from None
        self.checks = [(self._compile(e), why) for e, why in checks]

    @classmethod
    def of(cls, dims: dict[str, Any]) -> _SizeChecks:
        key = json.dumps(dims, sort_keys=True)
        hit = cls._cache.get(key)
        if hit is None:
            hit = cls._cache[key] = cls(dims)
        return hit

    def _compile(self, text: str) -> Any:
        try:
            tree = ast.parse(text, mode="eval")
        except SyntaxError as exc:
            raise ValueError(f"malformed size check {text!r} in an exported signature: {exc}") from None
        for node in ast.walk(tree):
            ok = isinstance(node, self._NODES)
            if isinstance(node, ast.Constant):
                ok = type(node.value) in (int, bool)
            elif isinstance(node, ast.Call):
                ok = isinstance(node.func, ast.Name) and node.func.id in self._CALLS and not node.keywords
            elif isinstance(node, ast.Name):
                ok = node.id in self._CALLS or node.id.isidentifier() and not node.id.startswith("_")
            if not ok:
                raise ValueError(f"size check {text!r} in an exported signature holds "
                                 f"{type(node).__name__}, which size checks never use")
        return compile(tree, "<size check>", "eval")

    def failure(self, shapes: Sequence[tuple[int, ...]]) -> str | None:
        """The description of the first check ``shapes`` break, None when all hold."""
        scope: dict[str, Any] = {f"a{i}": tuple(s) for i, s in enumerate(shapes)}
        for var, a, d in self.bind:
            scope[var] = shapes[a][d]
        globs = {"__builtins__": {}, **self._CALLS}
        for code, why in self.checks:
            try:
                ok = bool(eval(code, globs, scope))  # noqa: S307 - validated arithmetic only
            except (ArithmeticError, IndexError, NameError, TypeError):
                ok = False
            if not ok:
                return why
        return None


def _as_array(value: Any) -> np.ndarray | None:
    if isinstance(value, np.ndarray):
        return value
    if isinstance(value, np.generic):
        return np.asarray(value)
    numpy = getattr(value, "numpy", None)  # tensorplay (or torch) tensors
    if callable(numpy) and not isinstance(value, (list, tuple)):
        return np.asarray(numpy())
    return None


def _dtype_name(d: np.dtype) -> str:
    return "bool" if d == np.bool_ else str(d)


_namedtuples: dict[tuple[str, tuple[str, ...]], type] = {}


def _build(node: dict[str, Any], results: list[np.ndarray]) -> Any:
    kind = node["t"]
    if kind == "out":
        return results[node["i"]]
    if kind == "const":
        return node["v"]
    children = [_build(c, results) for c in node["c"]]
    if kind == "tuple":
        return tuple(children)
    if kind == "list":
        return children
    if kind == "dict":
        return dict(zip(node["k"], children))
    if kind == "namedtuple":
        key = (node["n"], tuple(node["k"]))
        cls = _namedtuples.get(key)
        if cls is None:
            cls = _namedtuples[key] = namedtuple(node["n"], node["k"])
        return cls(*children)
    raise ValueError(f"unknown result structure {kind!r} in an exported signature")


@dataclass(frozen=True)
class ModuleInfo:
    """Module-wide facts of an exported vmfb."""

    name: str
    backend: str
    target: str
    entries: tuple[str, ...] = ()
    parameter_scope: str | None = None      # set when weights live in a parameter archive
    parameter_archive: str | None = None    # the archive's file name, next to the vmfb by default
    parameters: tuple[TensorSpec, ...] = field(default=())  # name = the key in the archive

    def to_json(self) -> str:
        d: dict[str, Any] = {"v": FORMAT_VERSION, "name": self.name, "backend": self.backend,
                             "target": self.target, "entries": list(self.entries)}
        if self.parameter_scope is not None:
            d["parameters"] = {"scope": self.parameter_scope, "archive": self.parameter_archive,
                               "entries": [s.to_json() for s in self.parameters]}
        return json.dumps(d, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> ModuleInfo:
        d = json.loads(text)
        if d.get("v") != FORMAT_VERSION:
            raise ValueError(f"exported module format {d.get('v')!r} is not supported by this "
                             f"tensorplay.runtime (it reads format {FORMAT_VERSION})")
        p = d.get("parameters") or {}
        return cls(d["name"], d["backend"], d["target"], tuple(d.get("entries", ())), p.get("scope"),
                   p.get("archive"), tuple(TensorSpec.from_json(s) for s in p.get("entries", ())))
