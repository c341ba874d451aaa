"""Backward in the graph: ``backward()`` and ``zero_grad()`` inside a trace, and the ``.grad``
of the tensors they set."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ... import _views
from ..._tensor import Tensor
from ...dialects.tp.graph import Node, Value
from .active import without_capture
from .records import TRACE
from .user_frames import user_loc


class BackwardInGraph:
    """The capture's part that builds ``backward()`` into the traced graph and keeps the ``.grad``
    it sets (see the comment above :meth:`zero_grad`).

    One part of :class:`~.session.Capture`: it works on the session's state, set up in
    ``Capture.__init__`` and, per graph, in :meth:`~.segments.Segments._new_graph`."""

    def backward_in_graph(self, outputs: Sequence[Tensor], grads: Sequence[Any], inputs: Sequence[Any] | None,
                          create_graph: bool) -> bool:
        """``backward()`` of tensors of this trace: the gradients of the leaves that require
        grad are built into the same graph from the ops' gradient rules and set as their
        ``.grad`` (a whole training step compiles to one program); every call sets them
        again. Returns False after a graph break (the caller then runs eager autograd)."""
        from ..autodiff.joint import NotDifferentiable, build_joint

        why = None
        if self.mode != TRACE or self._regions:
            why = "backward() inside a segmented function or a nested region"
        elif create_graph:
            why = "backward(create_graph=True) inside a compiled function"
        if why is not None:
            self.graph_break(why)
            return False
        graph = self.graph
        sources = self._input_tensors()
        wanted = None if inputs is None else {id(t) for t in inputs}
        requires = []
        made = []  # inputs an eager autograd graph made: fine while no gradient reaches them
        for i, v in enumerate(graph.inputs):
            t = sources.get(v)
            if t is None or not t._requires_grad or not t.dtype.is_floating_point:
                continue
            if wanted is not None and id(t) not in wanted:
                continue
            if t._grad_fn is not None:
                made.append(i)
            requires.append(i)
        hooked = [sources[graph.inputs[i]] for i in requires if _has_grad_hooks(sources[graph.inputs[i]])]
        if hooked:
            # (DistributedDataParallel's all-reduce of gradient buckets is such a hook)
            self.graph_break(f"backward() reaches {len(hooked)} tensor(s) with gradient hooks (register_hook, "
                             f"register_post_accumulate_grad_hook, DistributedDataParallel): the hooks run eagerly "
                             f"during the backward of the compiled forward")
            return False
        roots = [self.value_of(t) for t in outputs]
        kept = list(graph.outputs)
        graph.set_outputs(roots)
        try:
            joint = build_joint(graph, requires, shape_env=self.shape_env)
        except NotDifferentiable as exc:
            self.graph_break(f"backward(): {exc}")
            return False
        finally:
            graph.set_outputs(kept)
        if any(g is not None for i, g in zip(requires, joint.gradients) if i in made):
            # (a hidden state carried over from the previous step and detached inside is not)
            self.graph_break("backward() into a tensor that an eager autograd graph made")
            return False
        if not joint.grad_outputs:
            raise RuntimeError("element 0 of tensors does not require grad and does not have a grad_fn")
        seeds: dict[Value, Value] = {}
        for tangent, k in zip(joint.tangents, joint.grad_outputs):
            g = grads[k] if k < len(grads) else None
            if g is None:
                root = outputs[k]
                if root.numel() != 1:
                    raise RuntimeError("grad can be implicitly created only for scalar outputs")
                node = Node("tp.constant", (), {"value": np.ones(tuple(root.shape), root.dtype.np_dtype)}, (),
                            user_loc(3))
                node.results = (Value(tangent.type, node, 0),)
                graph.nodes.append(node)
                seeds[tangent] = node.results[0]
            else:
                seeds[tangent] = self.value_of(g)
        for node in joint.backward:
            node.inputs = tuple(seeds.get(v, v) if v is not None else None for v in node.inputs)
        graph.nodes.extend(joint.backward)
        for i, gv in zip(requires, joint.gradients):
            if gv is None:
                continue
            t = sources[graph.inputs[i]]
            self._accumulate_grad(t, self._wrap_results([seeds.get(gv, gv)], graph))
        return True

    # .grad of the tensors library code of the trace sets (a backward, zero_grad). The .grad left
    # at the end is set again on every call, and guards keep what the program relies on of the
    # .grad a call finds. None and a tensor of the parameter's own shape, dtype and device differ
    # only where something reads the difference: a backward gives the same values either way
    # (None: its gradient; a tensor G: G + its gradient, read as an input, zeros while None), and
    # zero_grad(set_to_none=False) leaves None or zeros. So a parameter whose .grad the trace's
    # first touch is a backward, or a zero_grad(set_to_none=False) that a backward follows before
    # library code looks at it (an optimizer step, clip_grad_norm_: ``note_grad_read``), is guarded
    # by "None or such a tensor": the step compiles once whether a call finds the gradients of the
    # previous step or None (the first call, or after zero_grad()). Anything else keeps the exact
    # state the trace found (None, or a tensor of that shape, dtype and device).

    def zero_grad(self, t: Tensor, set_to_none: bool) -> bool:
        """``zero_grad()`` of ``t`` inside a trace (False elsewhere: the caller clears it
        eagerly). ``set_to_none`` as the first touch needs no guard: nothing read the old
        ``.grad``."""
        if self.mode != TRACE:
            return False
        first = id(t) not in self._grad_targets
        self._grad_targets[id(t)] = t
        g = t.grad
        if set_to_none:
            t.grad = None
            if self._grad_pending.get(id(t), ("",))[0] == "zeroed":
                self._settle_grad(t, relaxed=True)  # None either way now
            return True
        if first:
            self._grad_pending[id(t)] = ("zeroed", _meta(g))
        if g is not None:
            from ..._grad_mode import no_grad
            from ...ops import creation

            with no_grad():  # zeros made in the graph: the old values are not read
                t.grad = creation.zeros(*g.shape, dtype=g.dtype, device=g.device)
        return True

    def note_grad_read(self, t: Tensor, guarded: bool = False) -> None:
        """Library code of the trace reads ``t.grad`` (whether it is None, its values): a
        guard keeps what it found at the call's start (``guarded``: the caller's own guard
        does), unless a backward or zero_grad of the trace set it before (then that one's
        guard covers it)."""
        if self.mode != TRACE:
            return
        if id(t) in self._grad_targets:
            if self._grad_pending.get(id(t), ("",))[0] == "zeroed":
                self._settle_grad(t, relaxed=False)
            return
        if not guarded and id(t) not in self._grad_read:
            self._grad_read.add(id(t))
            self._guard_grad(t, _meta(t.grad))

    def _accumulate_grad(self, t: Tensor, new: Tensor) -> None:
        """A backward of the trace adds ``new`` to ``t.grad``."""
        key = id(t)
        first = key not in self._grad_targets
        self._grad_targets[key] = t
        g = t.grad
        if not first:
            if self._grad_pending.get(key, ("",))[0] == "zeroed":
                self._settle_grad(t, relaxed=True)
            t.grad = new if g is None else g + new
            return
        if g is not None and (not _views.has_memory(g) or _meta(g) != _meta(t)):
            self._guard_grad(t, _meta(g))  # (a .grad the function set itself, or of another shape)
            if _views.has_memory(g):
                g = self.input_from(lambda t=t: t.grad, "a parameter's .grad")
            t.grad = g + new
            return
        if g is None and (new.dtype != t.dtype or tuple(new.shape) != tuple(t.shape)):
            self._guard_grad(t, None)
            t.grad = new
            return
        held = self.input_from(lambda t=t: _grad_or_zeros(t), "a parameter's .grad")
        total = held + new
        t.grad = total
        if g is not None:
            self._guard_grad(t, _meta(t), relaxed=True)
        else:  # settled at the end: if the call leaves None there, nothing is read
            self._grad_pending[key] = ("added", self.value_of(total).node)

    def _settle_grad(self, t: Tensor, relaxed: bool) -> None:
        """The guard of a pending first touch of ``t.grad`` (see above)."""
        pending = self._grad_pending.pop(id(t), None)
        if pending is None:
            return
        meta = pending[1] if pending[0] == "zeroed" else None
        if relaxed and meta in (None, _meta(t)):
            self._guard_grad(t, _meta(t), relaxed=True)
        else:
            self._guard_grad(t, meta)

    def _settle_grads(self) -> None:
        """At the end of a trace: a backward's sum with the .grad found is kept where the call
        leaves a tensor in .grad (the next call finds one to add to), and is the backward's
        gradient alone where it leaves None (then the .grad found must be None)."""
        for key, pending in list(self._grad_pending.items()):
            t = self._grad_targets[key]
            if pending[0] == "added" and t.grad is None:
                del self._grad_pending[key]
                node = pending[1]
                node.op, node.inputs, node.attrs = "tp.cast", (node.inputs[1],), {"dtype": node.results[0].type.dtype}
                self._guard_grad(t, None)
            else:
                self._settle_grad(t, relaxed=pending[0] == "added")

    def _guard_grad(self, t: Tensor, meta: tuple | None, relaxed: bool = False) -> None:
        if relaxed:
            self.add_guard("the .grad of each tensor a compiled backward() adds to (or zero_grad() zeroes "
                           "before a backward()) is None or of the tensor's shape, dtype and device",
                           lambda t=t, meta=meta: t.grad is None or _meta(t.grad) == meta)
        else:
            self.add_guard("the .grad of each tensor a compiled backward() or zero_grad() sets is as it was "
                           "(None, or a tensor of the same shape)",
                           lambda t=t, meta=meta: _meta(t.grad) == meta)


def _meta(t: Any) -> tuple | None:
    return None if t is None else (tuple(t.shape), t.dtype, str(t.device))


def _grad_or_zeros(t: Tensor) -> Tensor:
    """``t.grad``, or zeros of ``t``'s type while it is None (what a backward adds to)."""
    if t.grad is not None:
        return t.grad
    from ...ops import creation

    with without_capture():
        return creation.zeros(*t.shape, dtype=t.dtype, device=t.device)


def _has_grad_hooks(t: Tensor) -> bool:
    """Whether leaf ``t`` has hooks on its gradient (``register_hook``,
    ``register_post_accumulate_grad_hook``), which an in-graph backward could not run."""
    acc = t.__dict__.get("_keep_acc")
    return acc is not None and (bool(acc._hooks) or any(acc._pre_hooks.values()))
