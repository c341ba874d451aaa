"""tensorplay.export: capture a model for deployment as one IREE VM flatbuffer.

``tp.export(model, args)`` (this package is callable; it is also ``tp.export.export``)
captures ``forward`` and every ``@tp.compiler.export`` method as entry points of one module
sharing one copy of the weights, and returns an :class:`ExportedProgram`. Its ``save(path)``
writes a ``.vmfb`` that :func:`tensorplay.runtime.load` (iree.runtime and numpy only) and
IREE's own ``iree-run-module`` run. docs/export.md walks through a deployment.

>>> import tensorplay as tp
>>> program = tp.export(lambda x: x * 2 + 1, (tp.ones(3),))
>>> program.entry_points
['forward']
"""

from __future__ import annotations

import sys
import types
from typing import Any

from .api import Args, export
from .program import ExportedProgram
from ..compiler.symbolic import Dim
from ..runtime.signature import EntrySignature, TensorSpec

__all__ = ["export", "ExportedProgram", "Args", "Dim", "EntrySignature", "TensorSpec"]


class _CallableModule(types.ModuleType):
    """Lets ``tp.export(model, args)`` call :func:`export` while ``tp.export`` stays this package."""

    def __call__(self, *args: Any, **kwargs: Any) -> ExportedProgram:
        return export(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
