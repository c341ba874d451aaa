"""Recurrent layers: ``RNN``, ``LSTM``, ``GRU`` and their single-step cells ``RNNCell``,
``LSTMCell``, ``GRUCell``, with PyTorch's constructor arguments, parameter names and layouts
(``weight_ih_l0``, ``weight_hh_l0_reverse``, ``weight_hr_l0``, ...), so a PyTorch
``state_dict`` loads as it is.

Every layer runs through one time loop, ``_run_layer``: the input projections of all steps are
computed first with one matmul (``F.linear`` over the whole sequence), then a plain Python loop
applies the cell's step function, a pure function of (carried state, step input, weights), once
per step. Gradients come from autograd through the ops. Under ``tp.compile`` the loop is one
``tp.scan`` op (``tensorplay.func.scan``): one copy of the step whatever the length.
"""

from __future__ import annotations

import math
import numbers
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..._tensor import Tensor
from ...ops import creation
from ...ops import elementwise
from ...ops import indexing
from ...ops import shape as shape_ops
from .. import functional as F
from .. import init
from ..parameter import Parameter
from ..utils.rnn import PackedSequence, _int_list, _pack_rows, _unpack_rows
from .module import Module

__all__ = ["RNNBase", "RNN", "LSTM", "GRU", "RNNCellBase", "RNNCell", "LSTMCell", "GRUCell"]

State = tuple  # (h,) for RNN and GRU, (h, c) for LSTM
Step = Callable[[Tensor, State, tuple], State]


# --- the step functions: (input projection of one step, state, weights) -> new state ----------

def _rnn_tanh_step(xp: Tensor, state: State, weights: tuple) -> State:
    w_hh, b_hh, _ = weights
    return (elementwise.tanh(elementwise.add(xp, F.linear(state[0], w_hh, b_hh))),)


def _rnn_relu_step(xp: Tensor, state: State, weights: tuple) -> State:
    w_hh, b_hh, _ = weights
    return (elementwise.relu(elementwise.add(xp, F.linear(state[0], w_hh, b_hh))),)


def _lstm_step(xp: Tensor, state: State, weights: tuple) -> State:
    w_hh, b_hh, w_hr = weights
    h, c = state
    i, f, g, o = shape_ops.chunk(elementwise.add(xp, F.linear(h, w_hh, b_hh)), 4, -1)
    c = elementwise.add(elementwise.mul(elementwise.sigmoid(f), c), elementwise.mul(elementwise.sigmoid(i), elementwise.tanh(g)))
    h = elementwise.mul(elementwise.sigmoid(o), elementwise.tanh(c))
    if w_hr is not None:
        h = F.linear(h, w_hr)
    return (h, c)


def _gru_step(xp: Tensor, state: State, weights: tuple) -> State:
    w_hh, b_hh, _ = weights
    h = state[0]
    x_r, x_z, x_n = shape_ops.chunk(xp, 3, -1)
    h_r, h_z, h_n = shape_ops.chunk(F.linear(h, w_hh, b_hh), 3, -1)
    r = elementwise.sigmoid(elementwise.add(x_r, h_r))
    z = elementwise.sigmoid(elementwise.add(x_z, h_z))
    n = elementwise.tanh(elementwise.add(x_n, elementwise.mul(r, h_n)))
    return (elementwise.add(n, elementwise.mul(z, elementwise.sub(h, n))),)


_STEPS: dict[str, Step] = {
    "RNN_TANH": _rnn_tanh_step, "RNN_RELU": _rnn_relu_step, "LSTM": _lstm_step, "GRU": _gru_step,
}
_GATES = {"RNN_TANH": 1, "RNN_RELU": 1, "LSTM": 4, "GRU": 3}


def _run_layer(cell_fn: Step, x_steps: Tensor, h0: State, weights: tuple, reverse: bool = False,
               masks: Tensor | None = None) -> tuple[Tensor, State]:
    """Run one direction of one layer over time.

    ``x_steps`` is (T, B, G): the input projections of every step. ``cell_fn(x_t, state,
    weights)`` gives the next state, whose first element is the step's output. ``masks``
    (T, B, 1) bool, for packed batches, says which sequences have step t: the others keep their
    state, so the final state of each sequence is the one at its own length (also when running
    in reverse, where a sequence starts from ``h0`` at its own last step). Returns the outputs
    (T, B, H) in time order and the final state.

    Eagerly the loop is Python; inside a compiled function it is one ``tp.scan`` (the step
    traced once, weights as loop invariants), so the program does not grow with the length
    and, with dynamic sizes, serves every length."""
    from ...compiler.capture import current_capture

    if current_capture() is not None:
        from ...func import scan

        def step(state: State, inputs: tuple) -> tuple[State, Tensor]:
            new = cell_fn(inputs[0], state, weights)
            if masks is not None:
                new = tuple(elementwise.where(inputs[1], n, s) for n, s in zip(new, state))
            return new, new[0]

        sequences = (x_steps,) if masks is None else (x_steps, masks)
        state, outputs = scan(step, tuple(h0), sequences, reverse=reverse)
        return outputs, state
    xs = shape_ops.unbind(x_steps, 0)
    ms = shape_ops.unbind(masks, 0) if masks is not None else None
    order = range(len(xs) - 1, -1, -1) if reverse else range(len(xs))
    outputs: list[Any] = [None] * len(xs)
    state = h0
    for t in order:
        new = cell_fn(xs[t], state, weights)
        if ms is not None:
            new = tuple(elementwise.where(ms[t], n, s) for n, s in zip(new, state))
        state = new
        outputs[t] = state[0]
    return shape_ops.stack(outputs, 0), state


def _check_positive_int(value: Any, name: str, where: str) -> None:
    if not isinstance(value, numbers.Integral) or isinstance(value, bool):
        raise TypeError(f"{where}: {name} should be of type int, got: {type(value).__name__}")
    if value <= 0:
        raise ValueError(f"{where}: {name} must be greater than zero, got {value}")


def _check_input_size(value: Any, where: str) -> None:
    if not isinstance(value, numbers.Integral) or isinstance(value, bool):
        raise TypeError(f"{where}: input_size should be of type int, got: {type(value).__name__}")
    if value < 0:
        raise ValueError(f"{where}: input_size must not be negative, got {value}")


def _check_dtype(where: str, name: str, value: Tensor, want: Any) -> None:
    if value.dtype != want:
        raise TypeError(f"{where}: {name} must have the dtype of the parameters, {want.name}, got "
                        f"{value.dtype.name}")


class RNNBase(Module):
    """The multi-layer recurrent layer behind ``RNN``, ``LSTM`` and ``GRU``; ``mode`` is one of
    'RNN_TANH', 'RNN_RELU', 'LSTM', 'GRU'."""

    def __init__(self, mode: str, input_size: int, hidden_size: int, num_layers: int = 1,
                 bias: bool = True, batch_first: bool = False, dropout: float = 0.0,
                 bidirectional: bool = False, proj_size: int = 0, device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__()
        where = type(self).__name__
        if mode not in _GATES:
            raise ValueError(f"RNNBase: unrecognized mode {mode!r}; expected one of "
                             f"{sorted(_GATES)}")
        if (not isinstance(dropout, numbers.Number) or isinstance(dropout, bool)
                or not 0 <= dropout <= 1):
            raise ValueError(f"{where}: dropout should be a number in range [0, 1] representing the "
                             f"probability of an element being zeroed, got {dropout!r}")
        _check_positive_int(hidden_size, "hidden_size", where)
        _check_positive_int(num_layers, "num_layers", where)
        _check_input_size(input_size, where)
        if not isinstance(proj_size, numbers.Integral) or proj_size < 0:
            raise ValueError(f"{where}: proj_size should be a positive integer or zero to disable "
                             f"projections, got {proj_size!r}")
        if proj_size >= hidden_size:
            raise ValueError(f"{where}: proj_size has to be smaller than hidden_size, got "
                             f"proj_size={proj_size} and hidden_size={hidden_size}")
        if proj_size and mode != "LSTM":
            raise ValueError(f"{where}: proj_size argument is only supported for LSTM, not RNN or GRU")
        if dropout > 0 and num_layers == 1:
            warnings.warn(f"{where}: dropout is applied between recurrent layers, after all but the "
                          f"last, so a non-zero dropout expects num_layers greater than 1, but got "
                          f"dropout={dropout} and num_layers={num_layers}", UserWarning, stacklevel=3)
        self.mode = mode
        self.input_size = int(input_size)
        self.hidden_size = int(hidden_size)
        self.num_layers = int(num_layers)
        self.bias = bool(bias)
        self.batch_first = bool(batch_first)
        self.dropout = float(dropout)
        self.bidirectional = bool(bidirectional)
        self.proj_size = int(proj_size)
        directions = 2 if bidirectional else 1
        gate_size = _GATES[mode] * hidden_size
        real_hidden = proj_size if proj_size > 0 else hidden_size
        self._flat_weights_names: list[str] = []
        self._all_weights: list[list[str]] = []
        for layer in range(num_layers):
            layer_input = input_size if layer == 0 else real_hidden * directions
            for direction in range(directions):
                suffix = f"_l{layer}" + ("_reverse" if direction == 1 else "")
                shapes = [("weight_ih", (gate_size, layer_input)), ("weight_hh", (gate_size, real_hidden))]
                if bias:
                    shapes += [("bias_ih", (gate_size,)), ("bias_hh", (gate_size,))]
                if proj_size > 0:
                    shapes.append(("weight_hr", (proj_size, hidden_size)))
                names = []
                for stem, shape in shapes:
                    name = stem + suffix
                    setattr(self, name, Parameter(creation.empty(shape, dtype=dtype, device=device)))
                    names.append(name)
                self._flat_weights_names.extend(names)
                self._all_weights.append(names)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0.0
        for weight in self.parameters():
            init.uniform_(weight, -stdv, stdv)

    def flatten_parameters(self) -> None:
        """Does nothing: PyTorch packs the weights into one buffer for cuDNN; tensorplay keeps
        them as they are."""

    @property
    def _flat_weights(self) -> list[Parameter | None]:
        return [getattr(self, name, None) for name in self._flat_weights_names]

    @property
    def all_weights(self) -> list[list[Parameter]]:
        return [[getattr(self, name) for name in names] for names in self._all_weights]

    def _layer_weights(self, layer: int, direction: int) -> tuple:
        suffix = f"_l{layer}" + ("_reverse" if direction == 1 else "")
        get = self._parameters.get
        return (get("weight_ih" + suffix), get("bias_ih" + suffix)), \
            (get("weight_hh" + suffix), get("bias_hh" + suffix), get("weight_hr" + suffix))

    def _where(self) -> str:
        return type(self).__name__

    def _check_hidden(self, hx: Any, name: str, shape: tuple, batched: bool, dtype: Any) -> Tensor:
        where = self._where()
        if not isinstance(hx, Tensor):
            raise TypeError(f"{where}: {name} must be a Tensor, got {type(hx).__name__}")
        if batched and hx.ndim != 3:
            raise ValueError(f"{where}: for batched 3-D input, {name} should also be 3-D but got "
                             f"{hx.ndim}-D tensor")
        if not batched and hx.ndim != 2:
            raise ValueError(f"{where}: for unbatched 2-D input, {name} should also be 2-D but got "
                             f"{hx.ndim}-D tensor")
        if not batched:
            hx = shape_ops.unsqueeze(hx, 1)
        if tuple(hx.shape) != shape:
            raise ValueError(f"{where}: expected {name} of size {shape}, got {tuple(hx.shape)}")
        _check_dtype(where, name, hx, dtype)
        return hx

    def forward(self, input: Any, hx: Any = None) -> tuple[Any, Any]:
        where = self._where()
        is_lstm = self.mode == "LSTM"
        packed = isinstance(input, PackedSequence)
        masks = None
        if packed:
            data, batch_sizes, sorted_indices, unsorted_indices = input
            sizes = _int_list(batch_sizes, where, "batch_sizes")
            x = _unpack_rows(data, sizes)
            live = np.arange(sizes[0])[None, :] < np.asarray(sizes)[:, None]
            masks = creation.tensor(live[:, :, None], device=creation._device_like(data, None))
            batched = True
        else:
            if not isinstance(input, Tensor):
                raise TypeError(f"{where}: input must be a Tensor or a PackedSequence, got "
                                f"{type(input).__name__}")
            if input.ndim not in (2, 3):
                raise ValueError(f"{where}: Expected input to be 2D or 3D, got {input.ndim}D tensor "
                                 f"instead")
            batched = input.ndim == 3
            if not batched:
                x = shape_ops.unsqueeze(input, 1)
            elif self.batch_first:
                x = shape_ops.transpose(input, 0, 1)
            else:
                x = input
            sorted_indices = unsorted_indices = None
        if x.shape[-1] != self.input_size:
            raise ValueError(f"{where}: input.size(-1) must be equal to input_size. Expected "
                             f"{self.input_size}, got {x.shape[-1]}")
        if x.shape[0] == 0:
            raise ValueError(f"{where}: expected a sequence of at least one step, got 0")
        dtype = self.weight_ih_l0.dtype
        _check_dtype(where, "input", x, dtype)
        directions = 2 if self.bidirectional else 1
        batch = x.shape[1]
        real_hidden = self.proj_size if self.proj_size > 0 else self.hidden_size
        h_shape = (self.num_layers * directions, batch, real_hidden)
        c_shape = (self.num_layers * directions, batch, self.hidden_size)
        device = creation._device_like(x, None)
        if hx is None:
            h0 = creation.zeros(h_shape, dtype=x.dtype, device=device)
            c0 = creation.zeros(c_shape, dtype=x.dtype, device=device) if is_lstm else None
        else:
            if is_lstm:
                if not isinstance(hx, (tuple, list)) or len(hx) != 2:
                    raise TypeError(f"{where}: hx must be a tuple (h_0, c_0) of two Tensors, got "
                                    f"{type(hx).__name__}")
                h0 = self._check_hidden(hx[0], "h_0", h_shape, batched, dtype)
                c0 = self._check_hidden(hx[1], "c_0", c_shape, batched, dtype)
            else:
                h0 = self._check_hidden(hx, "hx", h_shape, batched, dtype)
                c0 = None
            if sorted_indices is not None:
                h0 = indexing.index_select(h0, 1, sorted_indices)
                c0 = indexing.index_select(c0, 1, sorted_indices) if c0 is not None else None
        step = _STEPS[self.mode]
        h_init = shape_ops.unbind(h0, 0)
        c_init = shape_ops.unbind(c0, 0) if c0 is not None else None
        h_n: list[Tensor] = []
        c_n: list[Tensor] = []
        layer_input = x
        for layer in range(self.num_layers):
            outs = []
            for direction in range(directions):
                idx = layer * directions + direction
                (w_ih, b_ih), recurrent = self._layer_weights(layer, direction)
                projections = F.linear(layer_input, w_ih, b_ih)
                state0 = (h_init[idx],) if c_init is None else (h_init[idx], c_init[idx])
                out, state = _run_layer(step, projections, state0, recurrent,
                                        reverse=direction == 1, masks=masks)
                outs.append(out)
                h_n.append(state[0])
                if is_lstm:
                    c_n.append(state[1])
            layer_input = outs[0] if directions == 1 else shape_ops.cat(outs, 2)
            if self.dropout > 0 and self.training and layer < self.num_layers - 1:
                layer_input = F.dropout(layer_input, self.dropout, True)
        output = layer_input
        hidden: Any = shape_ops.stack(h_n, 0)
        cell = shape_ops.stack(c_n, 0) if is_lstm else None
        if packed:
            output = PackedSequence(_pack_rows(output, sizes), batch_sizes, sorted_indices,
                                    unsorted_indices)
            if unsorted_indices is not None:
                hidden = indexing.index_select(hidden, 1, unsorted_indices)
                cell = indexing.index_select(cell, 1, unsorted_indices) if cell is not None else None
        elif not batched:
            output = shape_ops.squeeze(output, 1)
            hidden = shape_ops.squeeze(hidden, 1)
            cell = shape_ops.squeeze(cell, 1) if cell is not None else None
        elif self.batch_first:
            output = shape_ops.transpose(output, 0, 1)
        return output, ((hidden, cell) if is_lstm else hidden)

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        if self.proj_size != 0:
            s += f", proj_size={self.proj_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        if self.batch_first is not False:
            s += f", batch_first={self.batch_first}"
        if self.dropout != 0:
            s += f", dropout={self.dropout}"
        if self.bidirectional is not False:
            s += f", bidirectional={self.bidirectional}"
        return s


class RNN(RNNBase):
    """Elman RNN: ``h_t = nonlinearity(x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh)`` with
    ``nonlinearity`` 'tanh' or 'relu'. ``forward(input, hx=None)`` returns
    ``(output, h_n)``."""

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1,
                 nonlinearity: str = "tanh", bias: bool = True, batch_first: bool = False,
                 dropout: float = 0.0, bidirectional: bool = False, device: Any = None,
                 dtype: Any = None) -> None:
        if nonlinearity == "tanh":
            mode = "RNN_TANH"
        elif nonlinearity == "relu":
            mode = "RNN_RELU"
        else:
            raise ValueError(f"RNN: unknown nonlinearity {nonlinearity!r}; select from 'tanh' or "
                             f"'relu'")
        super().__init__(mode, input_size, hidden_size, num_layers, bias, batch_first, dropout,
                         bidirectional, device=device, dtype=dtype)
        self.nonlinearity = nonlinearity


class LSTM(RNNBase):
    """Long short-term memory layer; with ``proj_size > 0`` the hidden state is projected by
    ``weight_hr_l{k}`` to ``proj_size``. ``forward(input, (h_0, c_0)=None)`` returns
    ``(output, (h_n, c_n))``."""

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
                 batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False,
                 proj_size: int = 0, device: Any = None, dtype: Any = None) -> None:
        super().__init__("LSTM", input_size, hidden_size, num_layers, bias, batch_first, dropout,
                         bidirectional, proj_size, device, dtype)


class GRU(RNNBase):
    """Gated recurrent unit layer. ``forward(input, hx=None)`` returns ``(output, h_n)``."""

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
                 batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False,
                 device: Any = None, dtype: Any = None) -> None:
        super().__init__("GRU", input_size, hidden_size, num_layers, bias, batch_first, dropout,
                         bidirectional, device=device, dtype=dtype)


# --- cells ------------------------------------------------------------------------------------

class RNNCellBase(Module):
    """One step of a recurrent layer: parameters ``weight_ih`` (chunks * hidden, input),
    ``weight_hh`` (chunks * hidden, hidden) and, with ``bias``, ``bias_ih``/``bias_hh``."""

    _mode = "RNN_TANH"

    def __init__(self, input_size: int, hidden_size: int, bias: bool, num_chunks: int,
                 device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        where = type(self).__name__
        _check_positive_int(hidden_size, "hidden_size", where)
        _check_input_size(input_size, where)
        self.input_size = int(input_size)
        self.hidden_size = int(hidden_size)
        self.bias = bool(bias)
        gates = num_chunks * hidden_size
        self.weight_ih = Parameter(creation.empty((gates, input_size), dtype=dtype, device=device))
        self.weight_hh = Parameter(creation.empty((gates, hidden_size), dtype=dtype, device=device))
        if bias:
            self.bias_ih = Parameter(creation.empty(gates, dtype=dtype, device=device))
            self.bias_hh = Parameter(creation.empty(gates, dtype=dtype, device=device))
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0.0
        for weight in self.parameters():
            init.uniform_(weight, -stdv, stdv)

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        nonlinearity = getattr(self, "nonlinearity", "tanh")
        if nonlinearity != "tanh":
            s += f", nonlinearity={nonlinearity}"
        return s

    def _run(self, input: Any, states: Sequence[Any] | None) -> State:
        """The cell's step on ``input`` (1-D or 2-D) from ``states`` (zeros when None)."""
        where = type(self).__name__
        if not isinstance(input, Tensor):
            raise TypeError(f"{where}: input must be a Tensor, got {type(input).__name__}")
        if input.ndim not in (1, 2):
            raise ValueError(f"{where}: Expected input to be 1D or 2D, got {input.ndim}D instead")
        batched = input.ndim == 2
        x = input if batched else shape_ops.unsqueeze(input, 0)
        if x.shape[1] != self.input_size:
            raise ValueError(f"{where}: input has inconsistent input_size: got {x.shape[1]} "
                             f"expected {self.input_size}")
        dtype = self.weight_ih.dtype
        _check_dtype(where, "input", x, dtype)
        n = 2 if self._mode == "LSTM" else 1
        shape = (x.shape[0], self.hidden_size)
        if states is None:
            state = tuple(creation.zeros(shape, dtype=x.dtype, device=creation._device_like(x, None))
                          for _ in range(n))
        else:
            state = []
            for i, s in enumerate(states):
                name = "hx" if n == 1 else ("h_0", "c_0")[i]
                if not isinstance(s, Tensor):
                    raise TypeError(f"{where}: {name} must be a Tensor, got {type(s).__name__}")
                if s.ndim != input.ndim:
                    raise ValueError(f"{where}: Expected {name} to be {input.ndim}D like the "
                                     f"input, got {s.ndim}D instead")
                s = s if batched else shape_ops.unsqueeze(s, 0)
                if tuple(s.shape) != shape:
                    raise ValueError(f"{where}: expected {name} of size {shape}, got "
                                     f"{tuple(s.shape)}")
                _check_dtype(where, name, s, dtype)
                state.append(s)
            state = tuple(state)
        new = _STEPS[self._mode](F.linear(x, self.weight_ih, self.bias_ih), state,
                                 (self.weight_hh, self.bias_hh, None))
        return new if batched else tuple(shape_ops.squeeze(s, 0) for s in new)


class RNNCell(RNNCellBase):
    """One Elman RNN step: ``h' = nonlinearity(x W_ih^T + b_ih + h W_hh^T + b_hh)``."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True,
                 nonlinearity: str = "tanh", device: Any = None, dtype: Any = None) -> None:
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"RNNCell: unknown nonlinearity {nonlinearity!r}; select from 'tanh' "
                             f"or 'relu'")
        super().__init__(input_size, hidden_size, bias, 1, device, dtype)
        self.nonlinearity = nonlinearity
        self._mode = "RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU"

    def forward(self, input: Any, hx: Any = None) -> Tensor:
        return self._run(input, None if hx is None else (hx,))[0]


class LSTMCell(RNNCellBase):
    """One LSTM step: ``forward(input, (h, c)=None)`` returns ``(h', c')``."""

    _mode = "LSTM"

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__(input_size, hidden_size, bias, 4, device, dtype)

    def forward(self, input: Any, hx: Any = None) -> tuple[Tensor, Tensor]:
        if hx is not None and (not isinstance(hx, (tuple, list)) or len(hx) != 2):
            raise TypeError(f"LSTMCell: hx must be a tuple (h_0, c_0) of two Tensors, got "
                            f"{type(hx).__name__}")
        h, c = self._run(input, hx)
        return h, c


class GRUCell(RNNCellBase):
    """One GRU step: ``forward(input, hx=None)`` returns ``h'``."""

    _mode = "GRU"

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, device: Any = None,
                 dtype: Any = None) -> None:
        super().__init__(input_size, hidden_size, bias, 3, device, dtype)

    def forward(self, input: Any, hx: Any = None) -> Tensor:
        return self._run(input, None if hx is None else (hx,))[0]
