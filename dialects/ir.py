"""The one place that imports the MLIR Python bindings shipped in iree-base-compiler.

Everything else imports ``ir`` and the upstream dialect modules from here, so an IREE
upgrade that moves them touches one file.
"""

from __future__ import annotations

import importlib
import threading
from typing import Any

from iree.compiler import ir, passmanager

#: upstream dialect modules, imported on first use: emitting tp MLIR (all a compiled call with
#: a warm disk cache does) needs none of them, and linalg's alone costs ~0.2 s to import
_DIALECTS = ("arith", "func", "linalg", "math", "scf", "tensor")


def __getattr__(name: str) -> Any:
    if name in _DIALECTS:
        module = importlib.import_module(f"iree.compiler.dialects.{name}")
        globals()[name] = module
        return module
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["ir", "passmanager", "arith", "func", "linalg", "math", "scf", "tensor", "context"]

_local = threading.local()


def context() -> ir.Context:
    """This thread's MLIR context: upstream and IREE dialects registered, ``tp`` ops
    accepted as unregistered operations (the registry verifies them)."""
    ctx = getattr(_local, "ctx", None)
    if ctx is None:
        ctx = ir.Context()
        ctx.allow_unregistered_dialects = True
        _local.ctx = ctx
    return ctx
