"""An op's public names, declared once beside its frontend function.

::

    @public(method=True, inplace=True, aliases=("arcsinh",), ufunc="arcsinh")
    def asinh(input): ...

declares ``tp.asinh`` and ``tp.arcsinh``, the methods ``Tensor.asinh``/``Tensor.arcsinh``, their
in-place forms ``Tensor.asinh_``/``Tensor.arcsinh_`` and ``np.arcsinh(t)`` as ``tp.asinh(t)``.
Everything is bound when the declaring module is imported; the function itself is returned
unchanged, so a call costs what it cost before. The names are read from here by:

* the declaring module: its aliases are set in its namespace at once, and its ``__all__`` is
  :func:`exported` (every name it declares, in declaration order);
* ``Tensor``: the methods are set on the class at once (``Tensor.x(...)`` is ``x(self, ...)``,
  ``Tensor.x_(...)`` writes ``x(self, ...)`` into ``self``);
* ``tensorplay._numpy_interop``: ``UFUNCS`` and ``FUNCTIONS`` are filled at once;
* ``tensorplay/__init__.py`` binds :func:`top_level` (``tp.x``) and ``nn/functional.py`` binds
  :func:`functional` (``F.x`` for the declarations with ``functional=True``).
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .. import _numpy_interop
from .._tensor import Tensor

__all__ = ["public", "declare", "Declaration", "DECLARED", "REDUCTION", "REDUCTION_DDOF", "exported",
           "top_level", "functional", "load_all"]

#: ``array_function`` adapters for numpy's reduction signature (``axis``, ``keepdims``, ...);
#: the second also passes ``ddof`` on as ``correction``
REDUCTION = _numpy_interop.Reduction(ddof=False)
REDUCTION_DDOF = _numpy_interop.Reduction(ddof=True)


@dataclass(frozen=True)
class Declaration:
    """The public names of one object of an ops module (or ``nn.functional``)."""

    name: str
    module: str
    obj: Any
    top: bool
    method: bool
    inplace: bool
    aliases: tuple[str, ...]
    ufuncs: tuple[str, ...]
    array_functions: dict[str, Any]
    functional: bool

    @property
    def names(self) -> tuple[str, ...]:
        """The name and its aliases: each gets every binding the declaration asks for."""
        return (self.name, *self.aliases)


#: (module, name) -> its declaration, in declaration order
DECLARED: dict[tuple[str, str], Declaration] = {}
_TOP: dict[str, Declaration] = {}


def public(obj: Any = None, /, *, top: bool = True, method: bool = False, inplace: bool = False,
           aliases: tuple[str, ...] = (), ufunc: str | tuple[str, ...] = (),
           array_function: str | tuple[str, ...] | dict[str, Any] = (),
           functional: bool = False) -> Any:
    """Declare a frontend function (or class) public; used bare (``@public``) or with options:

    - ``top``: ``tp.<name>`` (default); ``False`` for names only the module and methods use;
    - ``method``: ``Tensor.<name>`` with the tensor as first argument; ``inplace``:
      ``Tensor.<name>_`` too, which assigns the result to the tensor;
    - ``aliases``: more names of the same object, bound wherever the name is;
    - ``ufunc``: the numpy ufunc(s) that run as this function on tensors;
    - ``array_function``: the numpy function(s) that run as this function, each a name (called
      with numpy's arguments unchanged), or a dict from name to :data:`REDUCTION`,
      :data:`REDUCTION_DDOF` or ``adapt(*args, **kwargs) -> (args, kwargs)``;
    - ``functional``: ``tp.nn.functional.<name>`` as well.
    """

    def decorate(target: Any) -> Any:
        _register(target, target.__name__, target.__module__, top=top, method=method, inplace=inplace,
                  aliases=aliases, ufunc=ufunc, array_function=array_function, functional=functional)
        return target

    return decorate if obj is None else decorate(obj)


def declare(module: str, name: str, **options: Any) -> None:
    """:func:`public` for an object that is not a function or class (``default_generator``):
    ``declare(__name__, "default_generator")`` after it is made."""
    _register(getattr(sys.modules[module], name), name, module, **options)


def _register(obj: Any, name: str, module: str, *, top: bool = True, method: bool = False,
              inplace: bool = False, aliases: tuple[str, ...] = (), ufunc: Any = (),
              array_function: Any = (), functional: bool = False) -> None:
    if inplace and not method:
        raise ValueError(f"@public on {module}.{name}: inplace=True needs method=True")
    if isinstance(aliases, str):
        aliases = (aliases,)
    ufuncs = (ufunc,) if isinstance(ufunc, str) else tuple(ufunc)
    if isinstance(array_function, str):
        array_function = (array_function,)
    functions = dict(array_function) if isinstance(array_function, dict) else {n: None for n in array_function}
    if (ufuncs or functions) and not top:
        raise ValueError(f"@public on {module}.{name}: numpy names need the tp.{name} name (top=True)")
    decl = Declaration(name, module, obj, top, method, inplace, tuple(aliases), ufuncs, functions,
                       functional)
    if (module, name) in DECLARED:
        raise ValueError(f"{module}.{name} is declared public twice")
    namespace = vars(sys.modules[module])
    for public_name in decl.names:
        if top:
            other = _TOP.get(public_name)
            if other is not None:
                raise ValueError(f"tp.{public_name} is declared by both {other.module}.{other.name} and "
                                 f"{module}.{name}")
            _TOP[public_name] = decl
        if public_name != name:
            namespace[public_name] = obj
        if method:
            _bind_method(public_name, obj, inplace)
    DECLARED[(module, name)] = decl
    for numpy_name in ufuncs:
        _numpy_interop.UFUNCS[numpy_name] = name
    for numpy_name, adapt in functions.items():
        _numpy_interop.FUNCTIONS[numpy_name] = _numpy_interop.adapter(name, adapt)


def _bind_method(name: str, fn: Callable, inplace: bool) -> None:
    for method_name in (name, name + "_") if inplace else (name,):
        if method_name in vars(Tensor) and not getattr(vars(Tensor)[method_name], "_declared", False):
            raise ValueError(f"Tensor.{method_name} is written in Tensor and declared public from "
                             f"{fn.__module__}.{fn.__name__}: keep one")

    def method(self: Tensor, *args: Any, **kwargs: Any) -> Any:
        return fn(self, *args, **kwargs)

    _describe(method, name, fn)
    setattr(Tensor, name, method)
    if inplace:
        def method_(self: Tensor, *args: Any, **kwargs: Any) -> Tensor:
            return self._assign(fn(self, *args, **kwargs))

        _describe(method_, name + "_", fn)
        setattr(Tensor, name + "_", method_)


def _describe(method: Callable, name: str, fn: Callable) -> None:
    method.__name__ = name
    method.__qualname__ = f"Tensor.{name}"
    method.__module__ = Tensor.__module__
    method.__doc__ = fn.__doc__
    method.__wrapped__ = fn  # inspect.signature shows the function's parameters
    method._declared = True


def exported(module: str) -> list[str]:
    """The names ``module`` declares public (its ``__all__``)."""
    return [n for (m, _), d in DECLARED.items() if m == module for n in d.names]


def _load_ops() -> None:
    from .. import ops

    for info in pkgutil.iter_modules(ops.__path__):
        if not info.name.startswith("_"):
            importlib.import_module(f"{ops.__name__}.{info.name}")


def load_all() -> None:
    """Import every module that declares names: the ops modules and ``nn.functional``."""
    _load_ops()
    importlib.import_module("tensorplay.nn.functional")


def top_level() -> dict[str, Any]:
    """``tp``'s declared names and their objects."""
    load_all()
    return {n: d.obj for n, d in _TOP.items()}


def functional() -> dict[str, Any]:
    """The names ``tp.nn.functional`` takes from the ops modules (``functional=True``)."""
    _load_ops()
    return {n: d.obj for d in DECLARED.values() if d.functional for n in d.names}
