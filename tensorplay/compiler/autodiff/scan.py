"""The gradient of ``tp.scan``: a second loop, running the steps in the opposite order.

The forward loop saves each step's incoming carried values as extra stacked outputs (the
*saved carries*: memory of one carried state per step, never the body's intermediates): a
captured loop whose inputs may need gradients does so from the start (``saving_body``);
otherwise the rule runs the forward loop again to get them. The reverse loop's body
recomputes one step of the forward body from its saved carry, slice and invariants, then
applies the body's own backward (traced from the ops' gradient rules by
:func:`~.joint.build_joint`). It carries the gradient of the carried values
and the running sum of the invariants' gradients, and stacks the gradient of each slice. So
a step's intermediates live only while its backward step runs: the backward costs about two
forward steps per step, and memory grows with the length only by the saved carries.

Both loops are ``tp.scan`` ops, so the gradient of a loop is again one loop whatever the
length, and a loop inside a loop body differentiates the same way.
"""

from __future__ import annotations

import weakref
from typing import Any

from ..._capture_hooks import active_handler
from ...dialects.tp.graph import Graph, Value, copy_nodes
from ...dialects.tp.ops.control import scan_layout

__all__ = ["scan_vjp", "saving_body", "backward_body"]


def _cache(body: Graph) -> dict:
    cache = getattr(body, "_scan_gradients", None)
    if cache is None:
        cache = body._scan_gradients = {}  # the same body gives the same graphs (one name each)
    return cache


#: saving body -> the body it extends (a loop whose body is a key saves its carries already)
_SAVING: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def saving_body(body: Graph, nc: int) -> Graph:
    """``body`` also returning its incoming carried values (stacked by the loop: the carry
    before each step). A captured loop whose inputs may need gradients uses it from the start,
    so its gradient finds the saved carries among its results."""
    cache = _cache(body)
    hit = cache.get("saving")
    if hit is None:
        hit = Graph(name=f"{body.name}_saving")
        mapping = {v: hit.add_input(v.type) for v in body.inputs}
        copy_nodes(hit, body.nodes, mapping)
        hit.set_outputs([mapping[v] for v in body.outputs] + [mapping[v] for v in body.inputs[:nc]])
        cache["saving"] = hit
        _SAVING[hit] = body
    return hit


def _zeros(graph: Graph, t: Any) -> Value:
    return graph.add1("tp.full", [], {"shape": t.shape, "value": 0.0, "dtype": t.dtype})


def backward_body(body: Graph, nc: int, nx: int, fc: list[int], need_x: list[int], need_k: list[int],
                  fy: list[int], shape_env: Any = None) -> Graph:
    """One reverse step. Arguments: the gradients of the float carried values (``fc``), the
    running gradient sums of the invariants in ``need_k``, every slice, every saved carry, the
    gradients of the float per-step outputs (``fy``), every invariant. Returns the gradients
    of the carried values entering the step, the updated sums, and the gradients of the
    slices in ``need_x``."""
    from .joint import NotDifferentiable, build_joint

    key = ("backward", tuple(fc), tuple(need_x), tuple(need_k), tuple(fy))
    cache = _cache(body)
    hit = cache.get(key)
    if hit is not None:
        return hit
    nk = len(body.inputs) - nc - nx
    requires = list(fc) + [nc + j for j in need_x] + [nc + nx + k for k in need_k]
    joint = build_joint(body, requires, shape_env=shape_env)
    tangent_of = dict(zip(joint.grad_outputs, joint.tangents))
    bw = Graph(name=f"{body.name}_backward{len([k for k in cache if k != 'saving'])}")
    mapping: dict[Value, Value] = {}
    d_carry = {i: bw.add_input(body.inputs[i].type) for i in fc}
    d_sum = {k: bw.add_input(body.inputs[nc + nx + k].type) for k in need_k}
    for j in range(nx):
        mapping[body.inputs[nc + j]] = bw.add_input(body.inputs[nc + j].type)
    for i in range(nc):
        mapping[body.inputs[i]] = bw.add_input(body.inputs[i].type)
    d_y = {j: bw.add_input(body.outputs[nc + j].type) for j in fy}
    for k in range(nk):
        mapping[body.inputs[nc + nx + k]] = bw.add_input(body.inputs[nc + nx + k].type)
    for i, v in d_carry.items():
        if i in tangent_of:
            mapping[tangent_of[i]] = v
    for j, v in d_y.items():
        if nc + j in tangent_of:
            mapping[tangent_of[nc + j]] = v
    for tangent in tangent_of.values():  # an output whose gradient no argument brings: zero
        if tangent not in mapping:
            mapping[tangent] = _zeros(bw, tangent.type)
    copy_nodes(bw, list(body.nodes) + list(joint.backward), mapping)

    def gradient(n: int, position: int) -> Value:
        g = joint.gradients[n]
        want = body.inputs[position].type
        if g is None:
            return _zeros(bw, want)
        g = mapping[g]
        if g.type.dtype is not want.dtype or g.type.rank != want.rank:
            raise NotDifferentiable(f"loop body @{body.name}: the gradient of argument {position} has type "
                                    f"{g.type}, the argument {want}")
        return g

    outputs = [gradient(n, i) for n, i in enumerate(fc)]
    for n, k in enumerate(need_k):
        g = gradient(len(fc) + len(need_x) + n, nc + nx + k)
        outputs.append(bw.add1("tp.add", [d_sum[k], g]))
    outputs += [gradient(len(fc) + n, nc + j) for n, j in enumerate(need_x)]
    bw.set_outputs(outputs)
    cache[key] = bw
    return bw


def scan_vjp(ctx: Any, grads: list[Any]) -> list[Any]:
    """The gradient rule of ``tp.scan`` (``Op.vjp``): the saving forward loop, then the
    reverse loop; one gradient per operand."""
    attrs = ctx.attrs
    body = attrs["body"]
    if not isinstance(body, Graph):
        raise TypeError(f"tp.scan: the gradient needs the body's graph, got {type(body).__name__}")
    inputs = list(ctx.inputs)
    nc, nx, nk = scan_layout(len(inputs), attrs)
    saved = None
    if body in _SAVING:  # the loop saved its carries: they are its last results
        body = _SAVING[body]
        saved = list(ctx.outputs)[len(body.outputs):]
        grads = list(grads)[:len(body.outputs)]
    ny = len(body.outputs) - nc
    length, reverse = attrs["length"], attrs["reverse"]
    fc = [i for i in range(nc) if body.inputs[i].type.dtype.is_floating_point]
    fy = [j for j in range(ny) if body.outputs[nc + j].type.dtype.is_floating_point]
    need_x = [j for j in range(nx) if ctx.needs(nc + j) and body.inputs[nc + j].type.dtype.is_floating_point]
    need_k = [k for k in range(nk) if ctx.needs(nc + nx + k)
              and body.inputs[nc + nx + k].type.dtype.is_floating_point]
    out = [None] * len(inputs)
    if not fc and not need_x and not need_k:
        return out
    shape_env = active_handler().shape_env
    if saved is None:  # the forward loop again, saving them
        saving = saving_body(body, nc)
        loop = dict(num_carries=nc, num_xs=nx, length=length, reverse=reverse)
        saved = ctx.apply_op("tp.scan", *inputs, body=saving, **loop)
        saved = list(saved if isinstance(saved, tuple) else (saved,))[nc + ny:]
    bw = backward_body(body, nc, nx, fc, need_x, need_k, fy, shape_env)

    def grad_or_zeros(g: Any, like: Any) -> Any:
        return g if g is not None else ctx.zeros(tuple(like.shape), like.dtype, like)

    outputs = list(ctx.outputs)[:len(body.outputs)]
    operands = [grad_or_zeros(grads[i], outputs[i]) for i in fc]
    operands += [ctx.zeros(tuple(inputs[nc + nx + k].shape), inputs[nc + nx + k].dtype, inputs[nc + nx + k])
                 for k in need_k]
    operands += inputs[nc:nc + nx] + saved
    operands += [grad_or_zeros(grads[nc + j], outputs[nc + j]) for j in fy]
    operands += inputs[nc + nx:]
    results = ctx.apply_op("tp.scan", *operands, body=bw, num_carries=len(fc) + len(need_k),
                           num_xs=nx + nc + len(fy), length=length, reverse=not reverse)
    results = list(results if isinstance(results, tuple) else (results,))
    for n, i in enumerate(fc):
        out[i] = results[n]
    for n, k in enumerate(need_k):
        out[nc + nx + k] = results[len(fc) + n]
    for n, j in enumerate(need_x):
        out[nc + j] = results[len(fc) + len(need_k) + n]
    return out
