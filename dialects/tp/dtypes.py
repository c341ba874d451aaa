"""Element types of the tp dialect and PyTorch's type-promotion rules.

A :class:`DType` is both the user-facing ``tp.float32`` and the element type of a tp
tensor in MLIR (``f32``); every other part of the system derives its dtype facts from here.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = [
    "DType",
    "bool_",
    "uint8",
    "int8",
    "int16",
    "int32",
    "int64",
    "float16",
    "bfloat16",
    "float32",
    "float64",
    "ALL_DTYPES",
    "FLOAT_DTYPES",
    "INT_DTYPES",
    "as_dtype",
    "from_numpy_dtype",
    "promote_types",
    "result_type",
    "get_default_dtype",
    "set_default_dtype",
]

# Category order used by promotion: bool < integer < floating.
_BOOL, _INT, _FLOAT = 0, 1, 2


class DType:
    """A tensor element type: its PyTorch name, MLIR element type and numpy storage dtype."""

    __slots__ = ("name", "mlir", "np_dtype", "category", "bits", "is_signed", "_torch_aliases")

    def __init__(self, name: str, mlir: str, np_dtype: Any, category: int, bits: int, signed: bool,
                 aliases: tuple[str, ...] = ()):
        self.name = name
        self.mlir = mlir
        self.np_dtype = np.dtype(np_dtype)
        self.category = category
        self.bits = bits
        self.is_signed = signed
        self._torch_aliases = aliases

    @property
    def is_floating_point(self) -> bool:
        return self.category == _FLOAT

    @property
    def is_bool(self) -> bool:
        return self.category == _BOOL

    @property
    def is_integer(self) -> bool:
        """True for integer dtypes, excluding bool."""
        return self.category == _INT

    @property
    def itemsize(self) -> int:
        return max(1, self.bits // 8)

    @property
    def computes_in(self) -> DType:
        """The dtype arithmetic on this dtype runs in: the half types (float16, bfloat16)
        compute in float32 and round the result once, as PyTorch's CPU kernels do; every
        other dtype computes in itself."""
        return float32 if self is float16 or self is bfloat16 else self

    def to_complex(self) -> DType:
        raise TypeError(f"tensorplay has no complex dtypes (asked for the complex form of {self})")

    def __repr__(self) -> str:
        return f"tensorplay.{self.name}"

    def __reduce__(self):
        return (as_dtype, (self.name,))


class _MLDType(DType):
    """A dtype whose numpy form comes from ml_dtypes, imported on first use: importing it
    costs more than the rest of ``import tensorplay`` and most programs never need it."""

    __slots__ = ()

    @property
    def np_dtype(self) -> np.dtype:
        import ml_dtypes

        nd = np.dtype(getattr(ml_dtypes, self.name))
        _BY_NP.setdefault(nd, self)
        return nd

    @np_dtype.setter
    def np_dtype(self, value: Any) -> None:  # DType.__init__'s store: the property answers
        pass


bool_ = DType("bool", "i1", np.bool_, _BOOL, 8, False)
uint8 = DType("uint8", "ui8", np.uint8, _INT, 8, False)
int8 = DType("int8", "i8", np.int8, _INT, 8, True)
int16 = DType("int16", "i16", np.int16, _INT, 16, True, ("short",))
int32 = DType("int32", "i32", np.int32, _INT, 32, True, ("int",))
int64 = DType("int64", "i64", np.int64, _INT, 64, True, ("long",))
float16 = DType("float16", "f16", np.float16, _FLOAT, 16, True, ("half",))
bfloat16 = _MLDType("bfloat16", "bf16", None, _FLOAT, 16, True)
float32 = DType("float32", "f32", np.float32, _FLOAT, 32, True, ("float",))
float64 = DType("float64", "f64", np.float64, _FLOAT, 64, True, ("double",))

ALL_DTYPES: tuple[DType, ...] = (bool_, uint8, int8, int16, int32, int64, float16, bfloat16, float32, float64)
FLOAT_DTYPES: tuple[DType, ...] = (float16, bfloat16, float32, float64)
INT_DTYPES: tuple[DType, ...] = (uint8, int8, int16, int32, int64)

_BY_NAME: dict[str, DType] = {}
for _d in ALL_DTYPES:
    _BY_NAME[_d.name] = _d
    _BY_NAME[_d.mlir] = _d
    for _alias in _d._torch_aliases:
        _BY_NAME[_alias] = _d
_BY_NP: dict[np.dtype, DType] = {d.np_dtype: d for d in ALL_DTYPES if not isinstance(d, _MLDType)}

_default_float = float32


def get_default_dtype() -> DType:
    """The dtype of tensors made from Python floats (``float32`` unless changed)."""
    return _default_float


def set_default_dtype(dtype: Any) -> None:
    """Set the dtype of tensors made from Python floats; only floating dtypes are allowed."""
    global _default_float
    d = as_dtype(dtype)
    if not d.is_floating_point:
        raise TypeError(f"set_default_dtype: only floating-point dtypes are allowed, got {d}")
    _default_float = d


def from_numpy_dtype(np_dtype: Any) -> DType:
    """The tp dtype that stores as ``np_dtype``; a clear TypeError for dtypes tp lacks."""
    nd = np.dtype(np_dtype)
    try:
        return _BY_NP[nd]
    except KeyError:
        for d in ALL_DTYPES:  # an ml_dtypes dtype, before tp has needed ml_dtypes itself
            if isinstance(d, _MLDType) and nd.name == d.name and nd == d.np_dtype:
                return d
        supported = ", ".join(d.name for d in ALL_DTYPES)
        raise TypeError(
            f"numpy dtype {nd} has no tensorplay equivalent; supported dtypes: {supported}") from None


def as_dtype(value: Any) -> DType:
    """Normalize a DType, a name (``"float32"``, ``"f32"``, ``"long"``), a numpy dtype or a
    Python type (``float``, ``int``, ``bool``) to a DType."""
    if isinstance(value, DType):
        return value
    if isinstance(value, str):
        key = value[len("torch."):] if value.startswith("torch.") else value
        key = key[len("tensorplay."):] if key.startswith("tensorplay.") else key
        try:
            return _BY_NAME[key]
        except KeyError:
            names = ", ".join(d.name for d in ALL_DTYPES)
            raise TypeError(f"unknown dtype {value!r}; expected one of: {names}") from None
    if value is bool:
        return bool_
    if value is int:
        return int64
    if value is float:
        return _default_float
    name = getattr(value, "name", None)
    if name is not None and type(value).__module__.startswith("torch"):
        return as_dtype(str(value))
    try:
        return from_numpy_dtype(value)
    except TypeError:
        raise
    except Exception:
        raise TypeError(f"expected a dtype (tensorplay.float32, 'float32', numpy dtype), "
                        f"got {value!r} of type {type(value).__name__}") from None


def _promote_same_category(a: DType, b: DType) -> DType:
    if a is b:
        return a
    if a.category == _FLOAT:
        if {a, b} == {float16, bfloat16}:
            return float32  # neither holds the other's range and precision
        return a if a.bits >= b.bits else b
    if a.category == _INT:
        if a.is_signed == b.is_signed:
            return a if a.bits >= b.bits else b
        signed, unsigned = (a, b) if a.is_signed else (b, a)
        if signed.bits > unsigned.bits:
            return signed
        return {8: int16, 16: int32, 32: int64}.get(unsigned.bits, int64)
    return a


def promote_types(a: Any, b: Any) -> DType:
    """The smallest dtype both ``a`` and ``b`` convert to without losing category, as
    ``torch.promote_types``."""
    a, b = as_dtype(a), as_dtype(b)
    if a.category != b.category:
        return a if a.category > b.category else b
    return _promote_same_category(a, b)


def _promote_optional(a: DType | None, b: DType | None) -> DType | None:
    if a is None:
        return b
    if b is None:
        return a
    return promote_types(a, b)


def _combine_categories(higher: DType | None, lower: DType | None) -> DType | None:
    # A higher-priority group keeps its dtype unless a lower-priority group brings a
    # strictly higher category (torch's result_type rule).
    if higher is None:
        return lower
    if higher.is_floating_point:
        return higher
    if higher.is_bool or (lower is not None and lower.is_floating_point):
        return _promote_optional(higher, lower)
    return higher


def scalar_dtype(value: Any) -> DType:
    """The dtype a Python scalar gets when it becomes a tensor on its own."""
    if isinstance(value, (bool, np.bool_)):
        return bool_
    if isinstance(value, (int, np.integer)):
        return int64
    if isinstance(value, (float, np.floating)):
        return _default_float
    raise TypeError(f"expected a Python number, got {type(value).__name__}")


def result_type(*operands: Any) -> DType:
    """PyTorch's result type of an operation over tensors and Python scalars.

    Each operand is a DType with a rank (``(dtype, ndim)`` pair) or a Python scalar. Tensors
    with dimensions outrank zero-dimensional tensors, which outrank Python scalars; a lower
    group only matters when it brings a higher category (bool < integer < floating).
    """
    dim_result = zero_result = wrapped_result = None
    for operand in operands:
        if isinstance(operand, tuple):
            dtype, ndim = operand
            if ndim > 0:
                dim_result = _promote_optional(dim_result, dtype)
            else:
                zero_result = _promote_optional(zero_result, dtype)
        else:
            wrapped_result = _promote_optional(wrapped_result, scalar_dtype(operand))
    result = _combine_categories(dim_result, _combine_categories(zero_result, wrapped_result))
    if result is None:
        raise TypeError("result_type needs at least one operand")
    return result
