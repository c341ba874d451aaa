"""The tp op registry: one declaration per op, shared by eager mode, capture, MLIR
emission, constant folding, lowering and the generated op reference.

An op is a subclass of :class:`Op` decorated with :func:`register`. It declares its
``name``, ``operands`` and typed ``attributes`` (with defaults) as class fields, its
result types in :meth:`Op.infer` (which is also the verifier: bad operands or attributes
raise an :class:`~.errors.OpError` naming the op), its reference semantics as numpy in
:meth:`Op.reference`, and a one-line doc as the first line of its docstring.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from . import dtypes as dt
from . import symbolic as sym
from .errors import OpAttributeError, DTypeError, OpError, UnknownOpError
from .types import TensorType, type_of_array

__all__ = [
    "AttrKind",
    "Attr",
    "Operand",
    "Op",
    "REQUIRED",
    "FuncSignature",
    "signature_of",
    "register",
    "lookup",
    "all_ops",
    "families",
]


class _Required:
    def __repr__(self) -> str:
        return "REQUIRED"


REQUIRED: Any = _Required()


class AttrKind(enum.Enum):
    """The value types a tp attribute can hold, with their MLIR spelling."""

    INT = "i64"
    FLOAT = "f64"
    BOOL = "bool"
    STR = "string"
    INTS = "array<i64>"
    DTYPE = "type"
    DENSE = "dense"
    #: a function of the same module (a loop body): a ``Graph`` while captured, a
    #: :class:`FuncSignature` when read from MLIR; spelled ``@name`` there
    FUNC = "symbol"


@dataclass(frozen=True)
class FuncSignature:
    """A function attribute as MLIR verification sees it: its name and types (the body's
    ops are in the function itself)."""

    name: str
    inputs: tuple[TensorType, ...]
    outputs: tuple[TensorType, ...]


def signature_of(value: Any) -> FuncSignature:
    """The signature of a function attribute's value (a ``Graph`` or a :class:`FuncSignature`)."""
    if isinstance(value, FuncSignature):
        return value
    return FuncSignature(value.name, tuple(v.type for v in value.inputs), tuple(v.type for v in value.outputs))


@dataclass(frozen=True)
class Attr:
    """A typed op attribute. ``optional`` attributes accept ``None``; ``choices`` restricts
    a string attribute to a fixed set. A ``symbolic`` int, ints or float attribute holds sizes
    and may hold symbolic ones (sympy expressions, from :class:`~.symbolic.SymInt` values);
    elsewhere a SymInt is made a plain int (specialized)."""

    name: str
    kind: AttrKind
    default: Any = REQUIRED
    optional: bool = False
    choices: tuple[str, ...] = ()
    doc: str = ""
    symbolic: bool = False

    def _int(self, v: Any) -> Any:
        if isinstance(v, sym.SymInt):
            return sym.as_size(v) if self.symbolic else int(v)
        if self.symbolic and sym.is_symbolic(v):
            return sym.as_size(v)
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)):
            raise TypeError
        return int(v)

    def normalize(self, op: str, value: Any) -> Any:
        if value is None:
            if self.optional:
                return None
            raise OpAttributeError(f"{op}: attribute '{self.name}' must not be None")
        kind = self.kind
        try:
            if kind is AttrKind.INT:
                return self._int(value)
            if kind is AttrKind.FLOAT:
                if isinstance(value, sym.SymInt) or (self.symbolic and sym.is_symbolic(value)):
                    size = self._int(value)
                    return float(size) if isinstance(size, int) else size
                if isinstance(value, (bool, np.bool_)) or not isinstance(
                        value, (int, float, np.integer, np.floating)):
                    raise TypeError
                return float(value)
            if kind is AttrKind.BOOL:
                if not isinstance(value, (bool, np.bool_)):
                    raise TypeError
                return bool(value)
            if kind is AttrKind.STR:
                if not isinstance(value, str):
                    raise TypeError
                if self.choices and value not in self.choices:
                    raise OpAttributeError(
                        f"{op}: attribute '{self.name}' must be one of "
                        f"{', '.join(repr(c) for c in self.choices)}, got {value!r}")
                return value
            if kind is AttrKind.INTS:
                if isinstance(value, (int, np.integer, sym.SymInt)) and not isinstance(value, bool):
                    return (self._int(value),)
                return tuple(self._int(v) for v in value)
            if kind is AttrKind.DTYPE:
                return dt.as_dtype(value)
            if kind is AttrKind.DENSE:
                return np.asarray(value)
            if kind is AttrKind.FUNC:
                if isinstance(value, FuncSignature) or (
                        isinstance(getattr(value, "name", None), str) and hasattr(value, "nodes")):
                    return value
                raise TypeError
        except (TypeError, ValueError) as exc:
            if isinstance(exc, OpError):
                raise
            raise OpAttributeError(
                f"{op}: attribute '{self.name}' expects {self.describe()}, "
                f"got {value!r} of type {type(value).__name__}") from None
        raise AssertionError(kind)

    def describe(self) -> str:
        text = {
            AttrKind.INT: "an int",
            AttrKind.FLOAT: "a float",
            AttrKind.BOOL: "a bool",
            AttrKind.STR: "a string",
            AttrKind.INTS: "a sequence of ints",
            AttrKind.DTYPE: "a dtype",
            AttrKind.DENSE: "an array",
            AttrKind.FUNC: "a function (a Graph)",
        }[self.kind]
        return text + (" or None" if self.optional else "")


@dataclass(frozen=True)
class Operand:
    """An op operand. A ``variadic`` operand takes any number of tensors and must be the
    last; an ``optional`` operand may be absent (``None``)."""

    name: str
    variadic: bool = False
    optional: bool = False
    doc: str = ""


_REGISTRY: dict[str, Op] = {}


class Op:
    """Base of every tp op. Subclasses set the class fields and implement
    :meth:`infer` and :meth:`reference`."""

    name: ClassVar[str]
    family: ClassVar[str] = "misc"
    operands: ClassVar[tuple[Operand, ...]] = ()
    attributes: ClassVar[tuple[Attr, ...]] = ()
    results: ClassVar[tuple[str, ...]] = ("result",)
    #: operand dtypes the op accepts; ``None`` accepts every dtype.
    operand_dtypes: ClassVar[tuple[dt.DType, ...] | None] = None
    #: False for ops whose results carry no gradient (comparisons, integer-valued results,
    #: ops without tensor operands); every other op defines :meth:`vjp`.
    differentiable: ClassVar[bool] = True
    #: True for ops whose result sizes the data decides (``tp.nonzero``'s row count): their
    #: inference gives those dims as None, and a capture makes each one a new *unbacked*
    #: size symbol (``u0``, ...) computed by the program, one per application (every None dim of
    #: its results is that one size); at most :meth:`size_bound`.
    data_dependent: ClassVar[bool] = False
    #: what that size is, for messages ("the number of nonzero elements")
    data_size: ClassVar[str] = "a size its data decides"
    #: the gradient rule: ``vjp(ctx, grads)`` returns one gradient (or None) per operand, given
    #: the gradients of the results, built from tp ops applied to tensors (tensor methods or
    #: ``ctx.apply_op``), so the same rule serves eager autograd and backward graphs. ``ctx``
    #: gives ``input(i)``, ``output(i)``, ``attrs``, ``needs(i)`` (whether operand i wants a
    #: gradient) and ``input_meta`` / ``output_meta`` ((shape, dtype) of each). A rule returns
    #: gradients in the shape and dtype of the computation: summing over broadcast dims and
    #: casting to each operand's dtype is the engine's (tensorplay/autograd/engine.py).
    vjp: ClassVar[Any] = None

    def size_bound(self, types: Sequence[TensorType | None], attrs: dict[str, Any]) -> Any:
        """For a :attr:`data_dependent` op: an upper bound of its data-decided sizes (an int
        or a size expression; None when unknown). The element count of the first operand."""
        t = types[0] if types else None
        return None if t is None else t.numel()

    # -- description ---------------------------------------------------------------------
    @property
    def summary(self) -> str:
        doc = (type(self).__doc__ or "").strip()
        return doc.splitlines()[0] if doc else ""

    @property
    def description(self) -> str:
        doc = (type(self).__doc__ or "").strip()
        lines = doc.splitlines()
        return "\n".join(line.strip() for line in lines[1:]).strip()

    def attr(self, name: str) -> Attr:
        for a in self.attributes:
            if a.name == name:
                return a
        raise KeyError(name)

    def __repr__(self) -> str:
        return f"<tp op {self.name}>"

    # -- verification and inference ------------------------------------------------------
    def error(self, cls: type[OpError], message: str) -> OpError:
        """An error of ``cls`` whose message starts with the op name."""
        return cls(f"{self.name}: {message}")

    def normalize_attrs(self, attrs: Mapping[str, Any]) -> dict[str, Any]:
        """Fill defaults, check types and reject unknown attribute names."""
        known = {a.name for a in self.attributes}
        unknown = [k for k in attrs if k not in known]
        if unknown:
            valid = ", ".join(sorted(known)) or "none"
            raise OpAttributeError(
                f"{self.name}: unknown attribute(s) {', '.join(map(repr, unknown))}; "
                f"valid attributes: {valid}")
        out: dict[str, Any] = {}
        for a in self.attributes:
            if a.name in attrs:
                out[a.name] = a.normalize(self.name, attrs[a.name])
            elif a.default is REQUIRED:
                raise OpAttributeError(f"{self.name}: missing required attribute '{a.name}'")
            else:
                out[a.name] = a.default
        return out

    def check_operands(self, types: Sequence[TensorType | None]) -> None:
        """Check operand count, presence and dtypes against the declaration."""
        fixed = [o for o in self.operands if not o.variadic]
        variadic = bool(self.operands) and self.operands[-1].variadic
        n = len(types)
        if (n < len(fixed)) or (not variadic and n != len(fixed)):
            expected = f"at least {len(fixed)}" if variadic else f"{len(fixed)}"
            raise self.error(OpError, f"expected {expected} operand(s) "
                                      f"({', '.join(o.name for o in self.operands)}), got {n}")
        for i, t in enumerate(types):
            decl = self.operands[min(i, len(self.operands) - 1)]
            if t is None:
                if not decl.optional:
                    raise self.error(OpError, f"operand '{decl.name}' is required")
                continue
            if not isinstance(t, TensorType):
                raise self.error(OpError, f"operand '{decl.name}' must be a tensor, got "
                                          f"{type(t).__name__}")
            if self.operand_dtypes is not None and t.dtype not in self.operand_dtypes:
                allowed = ", ".join(d.name for d in self.operand_dtypes)
                raise self.error(DTypeError, f"operand '{decl.name}' has dtype {t.dtype.name}, "
                                             f"which this op does not support (supported: {allowed})")

    def infer(self, types: Sequence[TensorType | None], attrs: dict[str, Any]) -> tuple[TensorType, ...]:
        """Result types for operand types and normalized attributes; raises on bad input."""
        raise NotImplementedError(f"{self.name} declares no type inference")

    def verify(self, types: Sequence[TensorType | None], attrs: Mapping[str, Any]) -> tuple[TensorType, ...]:
        """Full verification: operands, attributes, then inference. Returns the result types."""
        self.check_operands(types)
        return self.infer(types, dict(attrs))

    # -- reference semantics -------------------------------------------------------------
    def reference(self, arrays: Sequence[np.ndarray | None], attrs: dict[str, Any]) -> Any:
        """The op's meaning as numpy: one array per result (a tuple when several)."""
        raise NotImplementedError(f"{self.name} declares no reference implementation")

    def evaluate(self, arrays: Sequence[np.ndarray | None], attrs: dict[str, Any],
                 result_types: Sequence[TensorType] | None = None) -> tuple[np.ndarray, ...]:
        """Run the reference and return arrays of exactly the inferred result types."""
        if result_types is None:
            result_types = self.verify(
                [None if a is None else type_of_array(a) for a in arrays], attrs)
        with np.errstate(all="ignore"):
            raw = self.reference(arrays, attrs)
        outs = raw if isinstance(raw, tuple) else (raw,)
        if len(outs) != len(result_types):
            raise AssertionError(f"{self.name}: reference returned {len(outs)} results, "
                                 f"inference {len(result_types)}")
        fixed = []
        for out, rt in zip(outs, result_types):
            out = np.asarray(out)
            if out.dtype != rt.dtype.np_dtype:
                out = out.astype(rt.dtype.np_dtype)
            fixed.append(out)
        return tuple(fixed)


def register(cls: type[Op]) -> type[Op]:
    """Class decorator: add one instance of the op to the registry."""
    name = cls.__dict__.get("name")
    if not isinstance(name, str) or not name.startswith("tp."):
        raise TypeError(f"{cls.__name__}: a tp op needs a name of the form 'tp.<op>'")
    if name in _REGISTRY:
        raise ValueError(f"tp op {name} is registered twice")
    if not (cls.__doc__ or "").strip():
        raise TypeError(f"{name}: a tp op needs a docstring (its one-line doc)")
    variadic = [o for o in cls.operands if o.variadic]
    if variadic and cls.operands[-1] is not variadic[0] or len(variadic) > 1:
        raise TypeError(f"{name}: only the last operand may be variadic")
    _REGISTRY[name] = cls()
    return cls


def lookup(name: str) -> Op:
    """The registered op called ``name`` (``tp.`` prefix optional)."""
    _ensure_loaded()
    key = name if name.startswith("tp.") else f"tp.{name}"
    try:
        return _REGISTRY[key]
    except KeyError:
        import difflib

        close = difflib.get_close_matches(key, list(_REGISTRY), n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise UnknownOpError(f"unknown tp op '{name}'{hint}") from None


def all_ops() -> list[Op]:
    """Every registered op, sorted by family then name."""
    _ensure_loaded()
    return sorted(_REGISTRY.values(), key=lambda op: (op.family, op.name))


def families() -> dict[str, list[Op]]:
    out: dict[str, list[Op]] = {}
    for op in all_ops():
        out.setdefault(op.family, []).append(op)
    return out


def _ensure_loaded() -> None:
    from . import ops  # noqa: F401  (importing the families registers their ops)
