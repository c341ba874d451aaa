"""Argument borrowing: tensors from outside the capture (arguments, parameters, buffers, tensors
updated in place) turned into capture tensors for its duration, and given back."""

from __future__ import annotations

import weakref

from ... import _views
from ..._tensor import Tensor
from ...dialects.tp import symbolic as sym
from ...dialects.tp.graph import Value
from ...dialects.tp.types import TensorType
from .bindings import ArgInput, AttachedInput, Binding
from .records import _Borrow, _Ref


class ArgumentBorrowing:
    """The capture's part that borrows outside tensors and reads them as graph inputs.

    One part of :class:`~.session.Capture`: it works on the session's state, set up in
    ``Capture.__init__`` and, per graph, in :meth:`~.segments.Segments._new_graph`."""

    def borrow_argument(self, tensor: Tensor, index: int, path: str) -> None:
        dims = (self.config.dynamic_dims or {}).get(index)
        ttype = self._symbolic_type(tensor, index, path, dims) if dims and _views.has_memory(tensor) else None
        self._borrow(tensor, ArgInput(index, _views.held(tensor), path), ttype)

    def borrow_attached(self, tensor: Tensor, what: str) -> None:
        self._borrow(tensor, AttachedInput(tensor, _views.held(tensor), what))

    def _borrow(self, tensor: Tensor, binding: Binding, ttype: TensorType | None = None) -> _Borrow | None:
        if id(tensor) in self._borrowed or not _views.has_memory(tensor):
            return None
        ttype = ttype or tensor._tensor_type()
        lifted = self._lifted.pop(id(tensor), None)
        value = lifted[1] if lifted is not None else self._add_input(ttype, binding)
        if lifted is not None:
            binding = self._bindings[value.index]
        borrow = _Borrow(tensor, _views.held(tensor), value, binding)
        self._borrowed[id(tensor)] = borrow
        # this thread only: another one running the same module eagerly still sees the data
        _views.take_over(tensor, ttype, _Ref(self, self.graph, value, tensor.device))
        return borrow

    def _restore_borrowed(self) -> None:
        for b in self._borrowed.values():
            _views.hand_back(b.tensor)
        self._borrowed.clear()

    def _convert(self, tensor: Tensor, value: Value) -> None:
        """Lazy mode: a concrete tensor updated in place becomes a capture tensor until the
        next flush makes it concrete again (with the new value)."""
        self._converted.append((tensor, _views.held(tensor)))
        ttype = tensor._tensor_type()
        if tensor._sym is not None:
            tensor._sym = None
        _views.take_over(tensor, ttype, _Ref(self, self.graph, value))
        self._live.append(weakref.ref(tensor))

    def _binding_of(self, t: Tensor) -> Binding | None:
        """How the program reads ``t``, a tensor from outside the capture (None: it does not)."""
        borrow = self._borrowed.get(id(t))
        lifted = self._lifted.get(id(t))
        return borrow.binding if borrow is not None else (
            self._bindings[lifted[1].index] if lifted is not None else None)

    def _view_of_input(self, t: Tensor) -> tuple | None:
        """``("view", binding, steps)`` for a result that is a view, made here, of a tensor the
        function was given or reads (an argument, a parameter): eagerly it shares that
        tensor's memory, so each call makes it again from that tensor after the write-backs.
        None for other results (and for views that require grad, or reshape to or slice at
        sizes known only at run time: those come back as new tensors)."""
        steps_made = _views.view_steps(t)
        if not _views.is_alias(t) or not _views.made_in(t, self) or t._requires_grad or not steps_made:
            return None
        root = _views.root(t)
        from ...dialects.tp import registry
        from ...dialects.tp.ops.shape import SLICE_END

        steps = []
        ttype = root._tensor_type()
        for name, attrs in steps_made:
            op = registry.lookup(name)
            after = op.verify([ttype], op.normalize_attrs(attrs))[0]
            if name == "tp.slice":  # a slice to the end of a dim of run-time size
                ends = tuple(SLICE_END if type(e) is not int and sym.known_eq(e, ttype.shape[d]) else e
                             for d, e in enumerate(attrs["ends"]))
                attrs = dict(attrs, ends=ends)
            ttype = after
            if not all(type(d) is int for v in attrs.values() if isinstance(v, tuple) for d in v):
                return None
            steps.append((name, attrs))
        binding = self._binding_of(root)
        if not _alive(binding):
            return None
        return ("view", binding, tuple(steps))


def _describe(t: Tensor) -> str:
    from ...nn.parameter import Parameter

    return "parameter" if isinstance(t, Parameter) else "tensor"


def _alive(binding: Binding | None) -> bool:
    """Whether a binding still reaches a tensor after the call: an argument, or an attached
    tensor alive."""
    return isinstance(binding, ArgInput) or (isinstance(binding, AttachedInput) and binding.tensor is not None)
