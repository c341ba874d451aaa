"""``torch`` as another name of ``tensorplay``: ``import torch.nn`` gives ``tensorplay.nn``
(the same module object), while :func:`torch_alias` is active (docs/runner.md).

How it works:

* a meta-path finder, first on ``sys.meta_path``, maps ``torch`` and ``torch.X.Y`` to
  ``tensorplay`` and ``tensorplay.X.Y``; its loader hands the import system the tensorplay
  module itself, so ``sys.modules["torch.nn"] is tensorplay.nn`` and
  ``torch.nn.Module is tensorplay.nn.Module``. A torch module tensorplay lacks is a
  ``ModuleNotFoundError`` naming ``torch.X`` and docs/coverage.md;
* a missing attribute (``torch.foo``, ``torch.nn.Foo``, ``F.bar``) is a :class:`TorchNameError`
  (an ``AttributeError``, so ``hasattr`` and ``getattr(m, name, default)`` work) naming
  ``torch.foo`` and docs/coverage.md. It comes from a module-level ``__getattr__`` that the
  alias puts on the tensorplay modules with a PyTorch counterpart while it is active (chained
  to a module's own ``__getattr__``) and removes afterwards; it also imports a submodule on
  first access (``torch.utils.data`` after ``import torch``), as PyTorch's packages do;
* entries of a real PyTorch already in ``sys.modules`` are set aside while the alias is active
  and put back afterwards.

Outside the alias nothing of this is installed: ``import tensorplay`` users see tensorplay's
modules exactly as they are.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.abc
import importlib.util
import sys
import threading
import types
from collections.abc import Iterator
from typing import Any

__all__ = ["torch_alias", "TorchNameError", "COVERAGE_PAGE", "to_tensorplay_name", "to_torch_name", "is_active"]

#: the page listing which PyTorch names tensorplay provides
COVERAGE_PAGE = "docs/coverage.md"

_TORCH = "torch"
_TP = "tensorplay"

#: tensorplay's own packages, with no PyTorch counterpart of the same meaning: their modules get
#: no attribute hook (every other public module does: nn, optim, autograd, utils, cuda, amp, ...);
#: tensorplay.compiler itself is torch.compiler, its internals have no torch name
_OWN = frozenset({"ops", "dialects", "passes", "tools", "runtime", "examples", "export", "compiler"})
_MIRRORED_EXACT = (_TP, f"{_TP}.compiler")

_ABSENT = object()


class TorchNameError(AttributeError):
    """A PyTorch name tensorplay does not provide, read while ``torch`` is tensorplay."""

    __module__ = "tensorplay.run"  # where users import it from


def to_tensorplay_name(name: str) -> str:
    """``torch.nn.functional`` -> ``tensorplay.nn.functional``."""
    if name != _TORCH and not name.startswith(_TORCH + "."):
        raise ValueError(f"to_tensorplay_name(): {name!r} is not a torch module name")
    return _TP + name[len(_TORCH):]


def to_torch_name(name: str) -> str:
    """``tensorplay.nn.functional`` -> ``torch.nn.functional``."""
    if name != _TP and not name.startswith(_TP + "."):
        raise ValueError(f"to_torch_name(): {name!r} is not a tensorplay module name")
    return _TORCH + name[len(_TP):]


def _mirrored(name: str) -> bool:
    if name in _MIRRORED_EXACT:
        return True
    parts = name.split(".")
    return (len(parts) > 1 and parts[0] == _TP and parts[1] not in _OWN
            and not any(p.startswith("_") for p in parts[1:]))


class _Alias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """The finder and loader of the torch names, and the state to undo."""

    def __init__(self) -> None:
        self.depth = 0
        self.set_aside: dict[str, types.ModuleType] = {}
        self.hooked: dict[str, tuple[types.ModuleType, Any, Any]] = {}
        self.specs: dict[str, Any] = {}

    # -- finder and loader ---------------------------------------------------------------------
    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname != _TORCH and not fullname.startswith(_TORCH + "."):
            return None
        tp_name = to_tensorplay_name(fullname)
        try:
            module = importlib.import_module(tp_name)
        except ModuleNotFoundError as exc:
            missing = exc.name or ""
            if missing == tp_name or tp_name.startswith(missing + "."):
                raise ModuleNotFoundError(
                    f"No module named {fullname!r}: tensorplay has no {missing} (PyTorch's "
                    f"{to_torch_name(missing)}); see {COVERAGE_PAGE} for the PyTorch modules and names "
                    "tensorplay provides", name=fullname) from None
            raise
        self.hook(module)
        spec = importlib.util.spec_from_loader(fullname, self, is_package=hasattr(module, "__path__"))
        assert spec is not None
        spec.loader_state = module
        return spec

    def create_module(self, spec: Any) -> types.ModuleType:
        module = spec.loader_state
        self.specs[spec.name] = module.__dict__.get("__spec__")
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        # the import system set the torch spec on the module: give it its own back
        spec = module.__dict__.get("__spec__")
        if spec is not None and spec.name in self.specs:
            module.__spec__ = self.specs.pop(spec.name)

    # -- the attribute hook --------------------------------------------------------------------
    def hook(self, module: types.ModuleType) -> None:
        name = module.__name__
        if name in self.hooked or not (name == _TP or name.startswith(_TP + ".")):
            return
        previous = module.__dict__.get("__getattr__", _ABSENT)
        alias = self

        def __getattr__(attr: str) -> Any:
            if previous is not _ABSENT:
                try:
                    found = previous(attr)
                except AttributeError:
                    pass
                else:
                    if isinstance(found, types.ModuleType) and _mirrored(found.__name__):
                        alias.hook(found)  # a lazily loaded module (torch.compiler)
                    return found
            if attr.startswith("__") and attr.endswith("__"):
                raise AttributeError(f"module {name!r} has no attribute {attr!r}", name=attr, obj=module)
            if not attr.startswith("_") and "__path__" in module.__dict__:
                sub = f"{name}.{attr}"
                try:
                    found = importlib.util.find_spec(sub) is not None
                except (ImportError, ValueError):
                    found = False
                if found:
                    child = importlib.import_module(sub)
                    alias.hook(child)
                    return child
            torch_module = to_torch_name(name)
            raise TorchNameError(f"{torch_module}.{attr} is not provided by tensorplay (module {name} has no "
                                 f"attribute {attr!r}); see {COVERAGE_PAGE} for the PyTorch names tensorplay "
                                 "provides", name=attr, obj=module)

        module.__getattr__ = __getattr__  # type: ignore[method-assign]
        self.hooked[name] = (module, previous, __getattr__)

    def unhook_all(self) -> None:
        for module, previous, ours in self.hooked.values():
            d = module.__dict__
            if d.get("__getattr__") is not ours:
                continue  # replaced since: leave what is there
            if previous is _ABSENT:
                del d["__getattr__"]
            else:
                d["__getattr__"] = previous
        self.hooked.clear()

    # -- on and off ----------------------------------------------------------------------------
    def enable(self) -> None:
        self.set_aside = {k: m for k, m in sys.modules.items() if k == _TORCH or k.startswith(_TORCH + ".")}
        for k in self.set_aside:
            del sys.modules[k]
        sys.meta_path.insert(0, self)
        tp = importlib.import_module(_TP)
        for name, module in list(sys.modules.items()):
            if isinstance(module, types.ModuleType) and _mirrored(name):
                self.hook(module)
        sys.modules[_TORCH] = tp

    def disable(self) -> None:
        with contextlib.suppress(ValueError):
            sys.meta_path.remove(self)
        for k in [k for k in sys.modules if k == _TORCH or k.startswith(_TORCH + ".")]:
            del sys.modules[k]
        sys.modules.update(self.set_aside)
        self.set_aside = {}
        self.specs.clear()
        self.unhook_all()


_alias = _Alias()
_lock = threading.RLock()


def is_active() -> bool:
    """True while :func:`torch_alias` is active."""
    return _alias.depth > 0


@contextlib.contextmanager
def torch_alias() -> Iterator[types.ModuleType]:
    """While active, ``import torch`` (and every ``torch.X`` module) gives the tensorplay
    module of the same name, and a PyTorch name tensorplay lacks is an error naming it and
    docs/coverage.md. Yields ``tensorplay``. ``sys.modules``, ``sys.meta_path`` and the
    modules are as they were afterwards; nested uses share the outermost one.

    >>> import tensorplay as tp
    >>> from tensorplay.run import torch_alias
    >>> with torch_alias():
    ...     import torch.nn
    ...     torch.nn.Module is tp.nn.Module
    True
    """
    with _lock:
        if _alias.depth == 0:
            _alias.enable()
        _alias.depth += 1
    try:
        yield sys.modules[_TORCH]
    finally:
        with _lock:
            _alias.depth -= 1
            if _alias.depth == 0:
                _alias.disable()
