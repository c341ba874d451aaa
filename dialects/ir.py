"""The one place that imports the MLIR Python bindings shipped in iree-base-compiler.

Everything else imports ``ir`` and the upstream dialect modules from here, so an IREE
upgrade that moves them touches one file.
"""

from __future__ import annotations

import threading

from iree.compiler import ir, passmanager
from iree.compiler.dialects import arith, func, linalg, math, scf, tensor

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
