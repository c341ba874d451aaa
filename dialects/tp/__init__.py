"""The ``tp`` dialect: the op registry, the element types and tensor types.

Ops are MLIR operations in the ``tp`` namespace, printed in MLIR's generic form
(``"tp.add"(%a, %b) : (...) -> ...``); this package is their single definition.
"""

from . import dtypes
from .errors import OpAttributeError, DimError, DTypeError, OpError, ShapeError, UnknownOpError
from .registry import REQUIRED, Attr, AttrKind, Op, Operand, all_ops, families, lookup, register
from .types import TensorType, type_of_array

__all__ = [
    "dtypes",
    "Op",
    "Operand",
    "Attr",
    "AttrKind",
    "REQUIRED",
    "register",
    "lookup",
    "all_ops",
    "families",
    "TensorType",
    "type_of_array",
    "OpError",
    "ShapeError",
    "DimError",
    "DTypeError",
    "OpAttributeError",
    "UnknownOpError",
]
