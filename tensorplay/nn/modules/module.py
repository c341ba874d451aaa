"""``nn.Module``: the base of every layer and model, with PyTorch's bookkeeping of
parameters, buffers and submodules, state dicts, hooks, modes and dtype conversion."""

from __future__ import annotations

import itertools
from collections import OrderedDict, namedtuple
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import numpy as np

from ... import _views
from ..._device import as_device, driver_of
from ..._grad_mode import no_grad
from ..._tensor import Tensor
from ...dialects.tp import dtypes as dt
from ..parameter import Buffer, Parameter

__all__ = ["Module", "RemovableHandle"]


class _IncompatibleKeys(namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])):
    """What ``load_state_dict`` found missing from, and unexpected in, a state dict."""

    __slots__ = ()

    def __repr__(self) -> str:
        if not self.missing_keys and not self.unexpected_keys:
            return "<All keys matched successfully>"
        return (f"_IncompatibleKeys(missing_keys={self.missing_keys!r}, "
                f"unexpected_keys={self.unexpected_keys!r})")

    __str__ = __repr__


#: Bumped whenever a module's attributes, parameters, buffers, children or hooks change;
#: compiled callables compare module state in full only when it moved.
state_version = 0


def _state_changed() -> None:
    global state_version
    state_version += 1


class RemovableHandle:
    """Returned by hook registration; ``remove()`` (or leaving its ``with`` block) unregisters."""

    _next_id = 0

    def __init__(self, *stores: dict | set) -> None:
        self.id = RemovableHandle._next_id
        RemovableHandle._next_id += 1
        self._stores = stores

    def remove(self) -> None:
        _state_changed()
        for store in self._stores:
            if isinstance(store, dict):
                store.pop(self.id, None)
            else:
                store.discard(self.id)

    def __enter__(self) -> RemovableHandle:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.remove()


def _indent_after_first_line(text: str, spaces: int) -> str:
    lines = text.split("\n")
    if len(lines) == 1:
        return text
    pad = " " * spaces
    return lines[0] + "\n" + "\n".join(pad + line for line in lines[1:])


def _to_tensor(value: Any) -> Tensor | None:
    """A checkpoint value as a tensorplay tensor: tensorplay tensors as they are, numpy
    arrays and array-likes (PyTorch tensors included, through numpy) converted."""
    if isinstance(value, Tensor):
        return value
    if isinstance(value, (np.ndarray, np.generic)):
        return Tensor._wrap(np.asarray(value))
    if hasattr(value, "detach") and hasattr(value, "numpy"):  # a PyTorch tensor
        value = value.detach()
        if hasattr(value, "cpu"):
            value = value.cpu()
        if str(getattr(value, "dtype", "")).endswith("bfloat16"):
            return Tensor._wrap(value.float().numpy().astype(dt.bfloat16.np_dtype))
        return Tensor._wrap(np.array(value.numpy()))
    if hasattr(value, "__array__") or hasattr(value, "__array_interface__"):
        return Tensor._wrap(np.asarray(value))
    return None


def _set_value(target: Tensor, value: Tensor) -> None:
    """Rebind ``target`` to ``value``, which may differ in dtype (``Module.to``)."""
    _state_changed()
    _views.take_memory(target, value)


def _check_name(kind: str, name: Any, module: Module, existing: dict) -> None:
    if not isinstance(name, str):
        raise TypeError(f"{kind} name should be a string. Got {type(name).__name__}")
    if "." in name:
        raise KeyError(f'{kind} name can\'t contain "."')
    if name == "":
        raise KeyError(f'{kind} name can\'t be empty string ""')
    if hasattr(module, name) and name not in existing:
        raise KeyError(f"attribute '{name}' already exists")


class Module:
    """Base class of neural network layers and models.

    Subclasses call ``super().__init__()``, assign Parameters, Modules and buffers as
    attributes (they are registered in assignment order) and define ``forward``.
    """

    training: bool
    _version: int = 1

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if args or kwargs:
            given = ", ".join([repr(a) for a in args] + [f"{k}={v!r}" for k, v in kwargs.items()])
            raise TypeError(f"{type(self).__name__}.__init__() got unexpected argument(s): {given}")
        setattr_ = object.__setattr__
        setattr_(self, "training", True)
        setattr_(self, "_parameters", {})
        setattr_(self, "_buffers", {})
        setattr_(self, "_non_persistent_buffers_set", set())
        setattr_(self, "_modules", {})
        setattr_(self, "_forward_pre_hooks", OrderedDict())
        setattr_(self, "_forward_pre_hooks_with_kwargs", set())
        setattr_(self, "_forward_hooks", OrderedDict())
        setattr_(self, "_forward_hooks_with_kwargs", set())
        setattr_(self, "_forward_hooks_always_called", set())

    # -- forward -----------------------------------------------------------------------------
    def forward(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(f'Module [{type(self).__name__}] is missing the required '
                                  f'"forward" function')

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        compiled = self.__dict__.get("_compiled_call")
        if compiled is not None:
            return compiled(*args, **kwargs)
        return self._call_impl(*args, **kwargs)

    def _call_impl(self, *args: Any, **kwargs: Any) -> Any:
        """The call itself: pre-hooks, ``forward``, hooks (what ``compile`` captures)."""
        if not (self._forward_pre_hooks or self._forward_hooks):
            return self.forward(*args, **kwargs)
        return self._call_with_hooks(args, kwargs)

    def compile(self, *args: Any, **kwargs: Any) -> None:
        """Compile this module's calls in place, with ``tensorplay.compile``'s keywords; the
        module keeps its type and identity."""
        from ... import compile as compile_  # (tensorplay.compile: the compiler loads on first use)

        object.__setattr__(self, "_compiled_call", compile_(self._call_impl, *args, **kwargs))
        _state_changed()

    def _call_with_hooks(self, args: tuple, kwargs: dict) -> Any:
        for hook_id, hook in list(self._forward_pre_hooks.items()):
            if hook_id in self._forward_pre_hooks_with_kwargs:
                out = hook(self, args, kwargs)
                if out is not None:
                    if not (isinstance(out, tuple) and len(out) == 2):
                        raise RuntimeError("forward pre-hook must return None or a tuple of "
                                           f"(new_args, new_kwargs), but got {out}.")
                    args, kwargs = out
            else:
                out = hook(self, args)
                if out is not None:
                    args = out if isinstance(out, tuple) else (out,)
        called = set()
        try:
            result = self.forward(*args, **kwargs)
            for hook_id, hook in list(self._forward_hooks.items()):
                called.add(hook_id)
                if hook_id in self._forward_hooks_with_kwargs:
                    out = hook(self, args, kwargs, result)
                else:
                    out = hook(self, args, result)
                if out is not None:
                    result = out
        except Exception:
            for hook_id, hook in list(self._forward_hooks.items()):
                if hook_id in self._forward_hooks_always_called and hook_id not in called:
                    try:
                        if hook_id in self._forward_hooks_with_kwargs:
                            hook(self, args, kwargs, None)
                        else:
                            hook(self, args, None)
                    except Exception:
                        pass
            raise
        return result

    def register_forward_pre_hook(self, hook: Callable, *, prepend: bool = False,
                                  with_kwargs: bool = False) -> RemovableHandle:
        """Call ``hook(module, args)`` before ``forward``; a non-None result replaces the args."""
        _state_changed()
        handle = RemovableHandle(self._forward_pre_hooks, self._forward_pre_hooks_with_kwargs)
        self._forward_pre_hooks[handle.id] = hook
        if with_kwargs:
            self._forward_pre_hooks_with_kwargs.add(handle.id)
        if prepend:
            self._forward_pre_hooks.move_to_end(handle.id, last=False)
        return handle

    def register_forward_hook(self, hook: Callable, *, prepend: bool = False,
                              with_kwargs: bool = False, always_call: bool = False) -> RemovableHandle:
        """Call ``hook(module, args, output)`` after ``forward``; a non-None result replaces
        the output."""
        _state_changed()
        handle = RemovableHandle(self._forward_hooks, self._forward_hooks_with_kwargs,
                                 self._forward_hooks_always_called)
        self._forward_hooks[handle.id] = hook
        if with_kwargs:
            self._forward_hooks_with_kwargs.add(handle.id)
        if always_call:
            self._forward_hooks_always_called.add(handle.id)
        if prepend:
            self._forward_hooks.move_to_end(handle.id, last=False)
        return handle

    # -- registration ------------------------------------------------------------------------
    def _require_init(self, what: str) -> None:
        if "_parameters" not in self.__dict__:
            raise AttributeError(f"cannot assign {what} before Module.__init__() call")

    def register_parameter(self, name: str, param: Parameter | None) -> None:
        """Add ``param`` (or None, a declared but absent parameter) under ``name``."""
        _state_changed()
        self._require_init("parameter")
        _check_name("parameter", name, self, self._parameters)
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(f"cannot assign '{type(param).__name__}' object to parameter '{name}' "
                            f"(tensorplay.nn.Parameter or None required)")
        self._parameters[name] = param

    def register_buffer(self, name: str, tensor: Tensor | None, persistent: bool = True) -> None:
        """Add a buffer: state that is not a parameter. ``persistent`` buffers are saved in
        ``state_dict()``."""
        _state_changed()
        self._require_init("buffer")
        _check_name("buffer", name, self, self._buffers)
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(f"cannot assign '{type(tensor).__name__}' object to buffer '{name}' "
                            f"(tensorplay Tensor or None required)")
        if isinstance(tensor, Buffer):
            persistent = tensor.persistent
            tensor = tensor.detach()
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent_buffers_set.discard(name)
        else:
            self._non_persistent_buffers_set.add(name)

    def add_module(self, name: str, module: Module | None) -> None:
        """Add a child module under ``name`` (None declares an absent one)."""
        _state_changed()
        if not isinstance(module, Module) and module is not None:
            raise TypeError(f"{type(module).__name__} is not a Module subclass")
        self._require_init("module")
        _check_name("module", name, self, self._modules)
        self._modules[name] = module

    register_module = add_module

    # -- attribute protocol ------------------------------------------------------------------
    def __getattr__(self, name: str) -> Any:
        d = self.__dict__
        for store in ("_parameters", "_buffers", "_modules"):
            items = d.get(store)
            if items is not None and name in items:
                return items[name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __setattr__(self, name: str, value: Any) -> None:
        _state_changed()
        d = self.__dict__
        params = d.get("_parameters")

        def forget(*stores: dict | set) -> None:
            d.pop(name, None)
            for s in stores:
                if isinstance(s, dict):
                    s.pop(name, None)
                else:
                    s.discard(name)

        if isinstance(value, Parameter):
            self._require_init("parameters")
            forget(self._buffers, self._modules, self._non_persistent_buffers_set)
            self.register_parameter(name, value)
        elif params is not None and name in params:
            if value is not None:
                raise TypeError(f"cannot assign '{type(value).__name__}' as parameter '{name}' "
                                f"(tensorplay.nn.Parameter or None expected)")
            params[name] = None
        elif isinstance(value, Module):
            self._require_init("module")
            forget(self._parameters, self._buffers, self._non_persistent_buffers_set)
            self._modules[name] = value
        elif d.get("_modules") is not None and name in d["_modules"]:
            if value is not None:
                raise TypeError(f"cannot assign '{type(value).__name__}' as child module '{name}' "
                                f"(tensorplay.nn.Module or None expected)")
            self._modules[name] = None
        elif isinstance(value, Buffer) or (d.get("_buffers") is not None and name in d["_buffers"]):
            if value is not None and not isinstance(value, Tensor):
                raise TypeError(f"cannot assign '{type(value).__name__}' as buffer '{name}' "
                                f"(tensorplay Tensor or None expected)")
            if isinstance(value, Buffer):
                self._require_init("buffer")
                forget(self._parameters, self._modules)
                self.register_buffer(name, value)
            else:
                self._buffers[name] = value
        else:
            object.__setattr__(self, name, value)

    def __delattr__(self, name: str) -> None:
        _state_changed()
        if name in self._parameters:
            del self._parameters[name]
        elif name in self._buffers:
            del self._buffers[name]
            self._non_persistent_buffers_set.discard(name)
        elif name in self._modules:
            del self._modules[name]
        else:
            object.__delattr__(self, name)

    def __dir__(self) -> list[str]:
        keys = (list(dir(type(self))) + list(self.__dict__) + list(self._parameters)
                + list(self._modules) + list(self._buffers))
        return sorted(k for k in set(keys) if not k[0].isdigit())

    def __setstate__(self, state: dict) -> None:
        _state_changed()
        self.__dict__.update(state)
        for key, default in (("_forward_pre_hooks_with_kwargs", set), ("_forward_hooks_with_kwargs", set),
                             ("_forward_hooks_always_called", set),
                             ("_non_persistent_buffers_set", set)):
            self.__dict__.setdefault(key, default())

    # -- traversal ---------------------------------------------------------------------------
    def _named_members(self, get_members: Callable[[Module], Any], prefix: str = "",
                       recurse: bool = True, remove_duplicate: bool = True) -> Iterator[tuple[str, Any]]:
        seen: set[int] = set()
        modules = (self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate)
                   if recurse else [(prefix, self)])
        for module_prefix, module in modules:
            for name, value in get_members(module):
                if value is None:
                    continue
                if remove_duplicate:
                    if id(value) in seen:
                        continue
                    seen.add(id(value))
                yield (module_prefix + "." + name if module_prefix else name), value

    def named_parameters(self, prefix: str = "", recurse: bool = True,
                         remove_duplicate: bool = True) -> Iterator[tuple[str, Parameter]]:
        """``(dotted name, parameter)`` pairs; a parameter shared by several modules (tied
        weights) appears once, under its first name, unless ``remove_duplicate=False``."""
        return self._named_members(lambda m: m._parameters.items(), prefix, recurse, remove_duplicate)

    def parameters(self, recurse: bool = True) -> Iterator[Parameter]:
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix: str = "", recurse: bool = True,
                      remove_duplicate: bool = True) -> Iterator[tuple[str, Tensor]]:
        return self._named_members(lambda m: m._buffers.items(), prefix, recurse, remove_duplicate)

    def buffers(self, recurse: bool = True) -> Iterator[Tensor]:
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    def named_children(self) -> Iterator[tuple[str, Module]]:
        seen: set[int] = set()
        for name, module in self._modules.items():
            if module is not None and id(module) not in seen:
                seen.add(id(module))
                yield name, module

    def children(self) -> Iterator[Module]:
        for _, module in self.named_children():
            yield module

    def named_modules(self, memo: set | None = None, prefix: str = "",
                      remove_duplicate: bool = True) -> Iterator[tuple[str, Module]]:
        """This module and all below it, depth first, as ``(dotted name, module)``."""
        if memo is None:
            memo = set()
        if remove_duplicate:
            if self in memo:
                return
            memo.add(self)
        yield prefix, self
        for name, module in self._modules.items():
            if module is None:
                continue
            child_prefix = prefix + ("." if prefix else "") + name
            yield from module.named_modules(memo, child_prefix, remove_duplicate)

    def modules(self) -> Iterator[Module]:
        for _, module in self.named_modules():
            yield module

    __hash__ = object.__hash__

    def get_submodule(self, target: str) -> Module:
        """The submodule at dotted path ``target`` (``""`` is this module)."""
        if target == "":
            return self
        module: Module = self
        for item in target.split("."):
            if not isinstance(module, Module) or item not in module._modules:
                raise AttributeError(f"{module._get_name()} has no attribute `{item}`")
            module = module._modules[item]
            if not isinstance(module, Module):
                raise AttributeError(f"`{item}` is not an nn.Module")
        return module

    def set_submodule(self, target: str, module: Module, strict: bool = False) -> None:
        """Replace (or, unless ``strict``, add) the submodule at dotted path ``target``."""
        if target == "":
            raise ValueError("Cannot set the submodule without a target name!")
        parent_path, _, name = target.rpartition(".")
        parent = self.get_submodule(parent_path)
        if strict and name not in parent._modules:
            raise AttributeError(f"{parent._get_name()} has no attribute `{name}`")
        if not isinstance(module, Module):
            raise ValueError(f"`module` is not an nn.Module, found {type(module)}")
        setattr(parent, name, module)

    def get_parameter(self, target: str) -> Parameter:
        module_path, _, name = target.rpartition(".")
        module = self.get_submodule(module_path)
        if not hasattr(module, name):
            raise AttributeError(f"{module._get_name()} has no attribute `{name}`")
        param = getattr(module, name)
        if not isinstance(param, Parameter):
            raise AttributeError(f"`{name}` is not an nn.Parameter")
        return param

    def get_buffer(self, target: str) -> Tensor:
        module_path, _, name = target.rpartition(".")
        module = self.get_submodule(module_path)
        if not hasattr(module, name):
            raise AttributeError(f"{module._get_name()} has no attribute `{name}`")
        if name not in module._buffers:
            raise AttributeError(f"`{name}` is not a buffer")
        return module._buffers[name]

    # -- state dicts -------------------------------------------------------------------------
    def get_extra_state(self) -> Any:
        raise RuntimeError("Reached a code path in Module.get_extra_state() that should never be "
                           "called; override it together with set_extra_state()")

    def set_extra_state(self, state: Any) -> None:
        raise RuntimeError("Reached a code path in Module.set_extra_state() that should never be "
                           "called; override it together with get_extra_state()")

    def _has_extra_state(self) -> bool:
        return type(self).get_extra_state is not Module.get_extra_state

    def _save_to_state_dict(self, destination: dict, prefix: str, keep_vars: bool) -> None:
        for name, param in self._parameters.items():
            if param is not None:
                destination[prefix + name] = param if keep_vars else param.detach()
        for name, buf in self._buffers.items():
            if buf is not None and name not in self._non_persistent_buffers_set:
                destination[prefix + name] = buf if keep_vars else buf.detach()
        if self._has_extra_state():
            destination[prefix + "_extra_state"] = self.get_extra_state()

    def state_dict(self, *args: Any, destination: dict | None = None, prefix: str = "",
                   keep_vars: bool = False) -> dict[str, Any]:
        """Parameters and persistent buffers by dotted name, in PyTorch's order: a module's
        own entries, then its children's. Values are detached unless ``keep_vars``."""
        if args:
            names = ("destination", "prefix", "keep_vars")
            if len(args) > len(names):
                raise TypeError(f"state_dict() takes at most {len(names)} positional arguments")
            values = dict(zip(names, args))
            destination = values.get("destination", destination)
            prefix = values.get("prefix", prefix)
            keep_vars = values.get("keep_vars", keep_vars)
        if destination is None:
            destination = OrderedDict()
        self._save_to_state_dict(destination, prefix, keep_vars)
        for name, module in self._modules.items():
            if module is not None:
                module.state_dict(destination=destination, prefix=prefix + name + ".",
                                  keep_vars=keep_vars)
        return destination

    def _load_from_state_dict(self, state_dict: Mapping[str, Any], prefix: str, missing: list[str],
                              unexpected: list[str], errors: list[str], assign: bool) -> None:
        persistent = {k: v for k, v in self._buffers.items()
                      if k not in self._non_persistent_buffers_set}
        local = {k: v for k, v in itertools.chain(self._parameters.items(), persistent.items())
                 if v is not None}
        for name, current in local.items():
            key = prefix + name
            if key not in state_dict:
                missing.append(key)
                continue
            given = state_dict[key]
            value = _to_tensor(given)
            if value is None:
                errors.append(f'While copying the parameter named "{key}", expected a Tensor or '
                              f'Tensor-like object from checkpoint but received {type(given)}')
                continue
            if current.ndim == 0 and value.ndim == 1 and value.shape[0] == 1:
                value = value.reshape(())
            if tuple(value.shape) != tuple(current.shape):
                errors.append(f"size mismatch for {key}: copying a param with shape {value.shape} "
                              f"from checkpoint, the shape in current model is {current.shape}.")
                continue
            try:
                with no_grad():
                    if assign:
                        if isinstance(current, Parameter):
                            value = Parameter(value.detach(), requires_grad=current.requires_grad)
                        setattr(self, name, value)
                    else:
                        current._assign(value.to(current.dtype, copy=True))
            except Exception as exc:  # noqa: BLE001 - reported like PyTorch, with the key
                errors.append(f'While copying the parameter named "{key}", whose dimensions in the '
                              f'model are {current.shape} and whose dimensions in the checkpoint '
                              f'are {value.shape}, an exception occurred : {exc.args}.')
        extra_key = prefix + "_extra_state"
        if self._has_extra_state():
            if extra_key in state_dict:
                self.set_extra_state(state_dict[extra_key])
            else:
                missing.append(extra_key)
        for key in state_dict:
            if key.startswith(prefix) and key != extra_key:
                head = key[len(prefix):].split(".", 1)[0]
                if head not in self._modules and head not in local:
                    unexpected.append(key)

    def load_state_dict(self, state_dict: Mapping[str, Any], strict: bool = True,
                        assign: bool = False) -> _IncompatibleKeys:
        """Copy values into this module's parameters and buffers, in place, keeping their
        dtypes. Values may be tensorplay tensors, numpy arrays or PyTorch tensors.

        Size mismatches always raise RuntimeError; missing and unexpected keys raise when
        ``strict`` and are returned as ``(missing_keys, unexpected_keys)`` otherwise.
        ``assign=True`` makes the given tensors the new parameters instead of copying.
        """
        if not isinstance(state_dict, Mapping):
            raise TypeError(f"Expected state_dict to be dict-like, got {type(state_dict)}.")
        missing: list[str] = []
        unexpected: list[str] = []
        errors: list[str] = []

        def load(module: Module, local: Mapping[str, Any], prefix: str) -> None:
            module._load_from_state_dict(local, prefix, missing, unexpected, errors, assign)
            for name, child in module._modules.items():
                if child is not None:
                    child_prefix = prefix + name + "."
                    child_state = {k: v for k, v in local.items() if k.startswith(child_prefix)}
                    load(child, child_state, child_prefix)

        load(self, state_dict, "")
        if strict:
            if unexpected:
                errors.insert(0, "Unexpected key(s) in state_dict: "
                              + ", ".join(f'"{k}"' for k in unexpected) + ". ")
            if missing:
                errors.insert(0, "Missing key(s) in state_dict: "
                              + ", ".join(f'"{k}"' for k in missing) + ". ")
        if errors:
            raise RuntimeError(f"Error(s) in loading state_dict for {type(self).__name__}:\n\t"
                               + "\n\t".join(errors))
        return _IncompatibleKeys(missing, unexpected)

    # -- modes and conversion ----------------------------------------------------------------
    def train(self, mode: bool = True) -> Module:
        """Set training mode (``mode=True``) or evaluation mode on this module and below."""
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        self.training = mode
        for module in self.children():
            module.train(mode)
        return self

    def eval(self) -> Module:
        return self.train(False)

    def requires_grad_(self, requires_grad: bool = True) -> Module:
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Clear the gradients of every parameter (to None by default)."""
        from ...autograd.engine import zero_grads

        zero_grads(self.parameters(), set_to_none)

    def apply(self, fn: Callable[[Module], Any]) -> Module:
        """Call ``fn`` on every submodule (children first) and then on this module."""
        for module in self.children():
            module.apply(fn)
        fn(self)
        return self

    def _apply(self, fn: Callable[[Tensor], Tensor]) -> Module:
        """Convert every parameter, gradient and buffer with ``fn``; parameters keep their
        identity (so tied weights stay tied)."""
        _state_changed()
        for module in self.children():
            module._apply(fn)
        with no_grad():
            for p in self._parameters.values():
                if p is None:
                    continue
                new = fn(p)
                if new is not p:
                    _set_value(p, new)
                if p.grad is not None:
                    g = fn(p.grad)
                    if g is not p.grad:
                        _set_value(p.grad, g)
            for name, b in self._buffers.items():
                if b is not None:
                    self._buffers[name] = fn(b)
        return self

    def to(self, *args: Any, **kwargs: Any) -> Module:
        """``to(dtype)``, ``to(device)``, ``to(device, dtype)`` or ``to(tensor)``: floating
        point parameters and buffers take the dtype; integer ones keep theirs."""
        dtype = kwargs.pop("dtype", None)
        device = kwargs.pop("device", None)
        kwargs.pop("non_blocking", None)
        kwargs.pop("memory_format", None)
        if kwargs:
            raise TypeError(f"to() received an invalid combination of arguments: {', '.join(kwargs)}")
        for arg in args:
            if isinstance(arg, Tensor):
                dtype = arg.dtype
            elif isinstance(arg, dt.DType):
                dtype = arg
            elif isinstance(arg, bool) or arg is None:
                continue
            else:
                try:
                    device = as_device(arg)
                except (TypeError, ValueError):
                    dtype = dt.as_dtype(arg)
        if dtype is not None:
            dtype = dt.as_dtype(dtype)
            if not dtype.is_floating_point:
                raise TypeError(f"nn.Module.to only accepts floating point or complex dtypes, but got "
                                f"desired dtype={dtype!r}")
        if device is not None:
            target = as_device(device)
            if target.type != "cpu":
                driver_of(target)  # a device tensors can live on (a clear error otherwise)
            if any(t.device != target for t in self._tensors()):
                self._apply(lambda t: t._moved(target))
        if dtype is None:
            return self
        return self._apply(lambda t: t.to(dtype) if t.is_floating_point() else t)

    def _tensors(self) -> list[Tensor]:
        return [*(p for p in self.parameters()), *(b for b in self.buffers())]

    def _cast_floating(self, dtype: dt.DType) -> Module:
        return self._apply(lambda t: t.to(dtype) if t.is_floating_point() else t)

    def float(self) -> Module:
        return self._cast_floating(dt.float32)

    def double(self) -> Module:
        return self._cast_floating(dt.float64)

    def half(self) -> Module:
        return self._cast_floating(dt.float16)

    def bfloat16(self) -> Module:
        return self._cast_floating(dt.bfloat16)

    def type(self, dst_type: Any) -> Module:
        """Cast every parameter and buffer (integer ones too) to ``dst_type``."""
        dtype = dt.as_dtype(dst_type)
        return self._apply(lambda t: t.to(dtype))

    def cpu(self) -> Module:
        """Parameters and buffers moved to the host."""
        return self.to("cpu")

    def cuda(self, device: Any = None) -> Module:
        """Parameters and buffers moved to the CUDA GPU."""
        return self.to("cuda" if device is None else device)

    def share_memory(self) -> Module:
        return self

    # -- printing ----------------------------------------------------------------------------
    def _get_name(self) -> str:
        return type(self).__name__

    def extra_repr(self) -> str:
        """The module's own settings for its repr; subclasses override it."""
        return ""

    def __repr__(self) -> str:
        extra = self.extra_repr()
        extra_lines = extra.split("\n") if extra else []
        child_lines = [f"({name}): " + _indent_after_first_line(repr(module), 2)
                       for name, module in self._modules.items()]
        lines = extra_lines + child_lines
        text = self._get_name() + "("
        if len(extra_lines) == 1 and not child_lines:
            text += extra_lines[0]
        elif lines:
            text += "\n  " + "\n  ".join(lines) + "\n"
        return text + ")"

