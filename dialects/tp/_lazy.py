"""Modules imported on first use.

``import tensorplay`` must stay fast; sympy (symbolic sizes) costs more to import than the rest
of the package, and a program with static shapes never needs it. ``sympy = lazy("sympy")``
gives a stand-in whose first attribute read imports the module and copies its namespace in,
so later reads are plain attribute lookups."""

from __future__ import annotations

import importlib
import sys
from types import ModuleType


class _Lazy(ModuleType):
    def __getattr__(self, name: str):
        module = importlib.import_module(self.__name__)
        self.__dict__.update((k, v) for k, v in vars(module).items() if not k.startswith("__"))
        try:
            return getattr(module, name)
        except AttributeError:
            raise AttributeError(f"module {self.__name__!r} has no attribute {name!r}") from None


_STANDINS: dict[str, ModuleType] = {}


def lazy(name: str) -> ModuleType:
    """The module ``name`` when it is imported already, else a stand-in importing it on first use."""
    if name in sys.modules:
        return sys.modules[name]
    return _STANDINS.setdefault(name, _Lazy(name))
