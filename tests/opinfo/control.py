"""Loop cases: ``tp.scan`` applied to a recurrent step (an Elman RNN cell with a per-step
output), forward and reverse, with two carried values. On PyTorch (which has no loop op) the
same function is a Python loop; ``ref`` is the loop in numpy."""

from __future__ import annotations

import numpy as np

import tensorplay as tp
from tensorplay._dispatch import apply
from tensorplay.dialects.tp.graph import Graph
from tensorplay.dialects.tp.types import TensorType
from tests.opinfo import FLOATS, ErrorCase, OpInfo, Sample, make_arg

_BODIES: dict[tuple, Graph] = {}


def _body(h_type: TensorType, x_type: TensorType, w_type: TensorType, two: bool) -> Graph:
    """(h[, c], x, w) -> (tanh(h @ w + x)[, c + h'], 2 h'): one graph per signature."""
    key = (h_type, x_type, w_type, two)
    static = all(t.has_static_shape for t in key[:3])
    body = _BODIES.get(key) if static else None  # (a capture rewrites its graphs' symbolic sizes)
    if body is None:
        dims = "x".join(str(d) for d in h_type.shape + x_type.shape)
        body = Graph(f"rnn_step_{h_type.dtype.name}_{dims}{'_2' if two else ''}")
        h = body.add_input(h_type)
        c = body.add_input(h_type) if two else None
        x = body.add_input(x_type)
        w = body.add_input(w_type)
        new = body.add1("tp.tanh", [body.add1("tp.add", [body.add1("tp.matmul", [h, w]), x])])
        two_h = body.add1("tp.add", [new, new])
        body.set_outputs([new, body.add1("tp.add", [c, new]), two_h] if two else [new, two_h])
        if static:
            _BODIES[key] = body
    return body


def _rnn(lib, h, xs, w, cell=None, *, reverse=False):
    """The final state(s) and the stacked per-step outputs."""
    if lib is not tp:  # PyTorch: the loop in Python
        n = xs.shape[0]
        ys = [None] * n
        for t in (range(n - 1, -1, -1) if reverse else range(n)):
            h = lib.tanh(h @ w + xs[t])
            if cell is not None:
                cell = cell + h
            ys[t] = h + h
        stacked = lib.stack(ys) if n else lib.zeros((0, *h.shape), dtype=h.dtype)
        return (h, stacked) if cell is None else (h, cell, stacked)
    two = cell is not None
    body = _body(h._tensor_type(), xs[0]._tensor_type() if xs.shape[0] else
                 TensorType(tuple(xs.shape[1:]), xs.dtype), w._tensor_type(), two)
    carries = (h, cell) if two else (h,)
    return apply("tp.scan", *carries, xs, w, body=body, num_carries=len(carries), num_xs=1,
                 length=xs.shape[0], reverse=reverse)


def _rnn_ref(h, xs, w, cell=None, *, reverse=False):
    h = np.asarray(h, np.float64)
    w = np.asarray(w, np.float64)
    n = xs.shape[0]
    ys = [None] * n
    for t in (range(n - 1, -1, -1) if reverse else range(n)):
        h = np.tanh(h @ w + np.asarray(xs[t], np.float64))
        if cell is not None:
            cell = np.asarray(cell, np.float64) + h
        ys[t] = 2 * h
    stacked = np.stack(ys) if n else np.zeros((0, *h.shape))
    return (h, stacked) if cell is None else (h, cell, stacked)


def _samples(rng, dtype):
    arg = lambda shape, s=1.0: make_arg(rng, shape, dtype, low=-s, high=s)
    return [Sample((arg((3, 4)), arg((5, 3, 4)), arg((4, 4), 0.5)), {}, "5 steps"),
            Sample((arg((2, 3)), arg((4, 2, 3)), arg((3, 3), 0.5)), {"reverse": True}, "reverse"),
            Sample((arg((2, 3)), arg((3, 2, 3)), arg((3, 3), 0.5), arg((2, 3))), {}, "two carries"),
            Sample((arg((4,)), arg((1, 4)), arg((4, 4), 0.5)), {}, "one step, unbatched")]


OPS = [
    # float16/bfloat16: each of the steps rounds its state to the half type, as PyTorch's loop
    # does; the numpy reference keeps float64 throughout (measured gap up to 4 half ulps)
    OpInfo("scan_rnn", _rnn, _rnn_ref, _samples, dtypes=FLOATS,
           tol={tp.float16: (4e-3, 4e-3), tp.bfloat16: (3e-2, 3e-2)}),
]


def _bad(lib, xs_shape, carry_shape=(2, 3)):
    body = _body(TensorType((2, 3), tp.float32), TensorType((2, 3), tp.float32), TensorType((3, 3), tp.float32),
                 False)
    return apply("tp.scan", tp.zeros(*carry_shape), tp.zeros(*xs_shape), tp.zeros(3, 3), body=body,
                 num_carries=1, num_xs=1, length=xs_shape[0])


ERRORS = [
    ErrorCase("scan_carry_changes_type", lambda lib: _bad(lib, (4, 2, 3), (3, 3)), tp.ShapeError,
              r"tp\.scan: carried value 0: the loop passes tensor<3x3xf32>, body @\w+ takes tensor<2x3xf32>"),
    ErrorCase("scan_sequence_wrong_slices", lambda lib: _bad(lib, (4, 3, 3)), tp.ShapeError,
              r"tp\.scan: sequence 0 has type tensor<4x3x3xf32>: body @\w+ takes slices of tensor<2x3xf32>"),
    ErrorCase("scan_operand_count", lambda lib: apply(
        "tp.scan", tp.zeros(2, 3), tp.zeros(4, 2, 3), body=_body(
            TensorType((2, 3), tp.float32), TensorType((2, 3), tp.float32), TensorType((3, 3), tp.float32), False),
        num_carries=1, num_xs=1, length=4), tp.OpError,
              r"tp\.scan: body @\w+ takes 3 argument\(s\), but the loop passes 2 \(1 carried, 1 per step, 0 invariant\)"),
]
