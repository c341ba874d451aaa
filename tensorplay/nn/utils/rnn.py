"""``tp.nn.utils.rnn``: padding and packing batches of sequences of different lengths, as
``torch.nn.utils.rnn``.

A ``PackedSequence`` holds the time steps of a batch of sequences sorted by decreasing length,
step by step: ``data`` has the first element of every sequence, then the second element of
every sequence that has one, and so on; ``batch_sizes[t]`` says how many sequences have a step
``t``. The recurrent layers (``nn.RNN``, ``nn.LSTM``, ``nn.GRU``) accept one and return one.
"""

from __future__ import annotations

import itertools
from collections import namedtuple
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..._tensor import Tensor
from ...dialects.tp import dtypes as dt
from ...ops import creation
from ...ops import indexing
from ...ops import shape as shape_ops

__all__ = [
    "PackedSequence", "invert_permutation", "pack_padded_sequence", "pad_packed_sequence",
    "pad_sequence", "unpad_sequence", "pack_sequence", "unpack_sequence",
]


def _int_list(values: Any, where: str, name: str) -> list[int]:
    """A 1-D list of Python ints from a list, tuple, numpy array or integer tensor."""
    if isinstance(values, Tensor):
        if values.dtype.is_floating_point or values.dtype.is_bool:
            raise TypeError(f"{where}: {name} must hold integers, got a tensor of dtype "
                            f"{values.dtype.name}")
        if values.ndim != 1:
            raise ValueError(f"{where}: {name} must be 1-D, got a {values.ndim}-D tensor")
        return [int(v) for v in values.tolist()]
    arr = np.asarray(values)
    if arr.ndim != 1 or not (arr.size == 0 or np.issubdtype(arr.dtype, np.integer)):
        raise TypeError(f"{where}: {name} must be a 1-D sequence of integers, got {values!r}")
    return [int(v) for v in arr.tolist()]


def _index(values: Sequence[int], device: Any = None) -> Tensor:
    return creation.tensor(np.asarray(values, dtype=np.int64), dtype=dt.int64, device=device)


def invert_permutation(permutation: Tensor | None) -> Tensor | None:
    """The permutation that undoes ``permutation`` (``None`` stays ``None``)."""
    if permutation is None:
        return None
    perm = np.asarray(_int_list(permutation, "invert_permutation", "permutation"), dtype=np.int64)
    inverse = np.empty_like(perm)
    inverse[perm] = np.arange(perm.size, dtype=np.int64)
    return _index(inverse, creation._device_like(permutation, None))


_PackedFields = namedtuple("_PackedFields", ["data", "batch_sizes", "sorted_indices", "unsorted_indices"])


class PackedSequence(_PackedFields):
    """A batch of variable-length sequences, packed step by step (see the module doc).

    ``data`` is (sum of lengths, *), ``batch_sizes`` an int64 tensor with one entry per time
    step, ``sorted_indices`` the batch order the sequences were sorted into (``None`` when they
    came sorted) and ``unsorted_indices`` its inverse. Build one with ``pack_padded_sequence``
    or ``pack_sequence``, not directly."""

    __slots__ = ()

    def __new__(cls, data: Tensor, batch_sizes: Tensor | None = None,
                sorted_indices: Tensor | None = None,
                unsorted_indices: Tensor | None = None) -> PackedSequence:
        if batch_sizes is None:
            raise TypeError("PackedSequence: batch_sizes is required; build one with "
                            "pack_padded_sequence or pack_sequence")
        if not isinstance(batch_sizes, Tensor):
            batch_sizes = _index(_int_list(batch_sizes, "PackedSequence", "batch_sizes"))
        if unsorted_indices is None:
            unsorted_indices = invert_permutation(sorted_indices)
        return super().__new__(cls, data, batch_sizes, sorted_indices, unsorted_indices)

    def to(self, *args: Any, **kwargs: Any) -> PackedSequence:
        """``data`` (and the indices, for a device) moved or cast like ``Tensor.to``;
        ``batch_sizes`` stays on the host."""
        data = self.data.to(*args, **kwargs)
        if data is self.data:
            return self
        device = data.device
        idx = [None if i is None else i.to(device) for i in (self.sorted_indices, self.unsorted_indices)]
        return type(self)(data, self.batch_sizes, idx[0], idx[1])

    def cpu(self) -> PackedSequence:
        return self.to("cpu")

    def double(self) -> PackedSequence:
        return self.to(dtype=dt.float64)

    def float(self) -> PackedSequence:
        return self.to(dtype=dt.float32)

    def half(self) -> PackedSequence:
        return self.to(dtype=dt.float16)

    @property
    def is_cuda(self) -> bool:
        return self.data.is_cuda


def _check_lengths(lengths: list[int], where: str) -> None:
    if any(n <= 0 for n in lengths):
        raise ValueError(f"{where}: every length must be greater than 0, got lengths {lengths}")


def _batch_sizes(sorted_lengths: list[int]) -> list[int]:
    """Entry t: how many of the (decreasingly sorted) sequences have a step t."""
    return [sum(1 for n in sorted_lengths if n > t) for t in range(sorted_lengths[0])]


def _pack_rows(padded: Tensor, batch_sizes: list[int]) -> Tensor:
    """(T, B, *) time-major padded rows, batch sorted by decreasing length -> packed data."""
    steps, batch = padded.shape[0], padded.shape[1]
    rows = [t * batch + b for t in range(len(batch_sizes)) for b in range(batch_sizes[t])]
    flat = shape_ops.reshape(padded, (steps * batch,) + tuple(padded.shape[2:]))
    return indexing.index_select(flat, 0, _index(rows, creation._device_like(padded, None)))


def _unpack_rows(data: Tensor, batch_sizes: list[int], padding_value: float = 0.0,
                 total_length: int | None = None) -> Tensor:
    """Packed data -> (T, B, *) time-major padded rows, batch in sorted order."""
    steps = len(batch_sizes) if total_length is None else total_length
    batch = batch_sizes[0] if batch_sizes else 0
    n = data.shape[0]
    feature = tuple(data.shape[1:])
    pad_row = creation.full((1,) + feature, padding_value, dtype=data.dtype, device=creation._device_like(data, None))
    rows = np.full((steps, batch), n, dtype=np.int64)  # row n: the padding row appended below
    offset = 0
    for t, size in enumerate(batch_sizes):
        rows[t, :size] = np.arange(offset, offset + size)
        offset += size
    table = shape_ops.cat([data, pad_row], 0)
    picked = indexing.index_select(table, 0, _index(rows.reshape(-1), creation._device_like(data, None)))
    return shape_ops.reshape(picked, (steps, batch) + feature)


def pack_padded_sequence(input: Tensor, lengths: Any, batch_first: bool = False,
                         enforce_sorted: bool = True) -> PackedSequence:
    """Pack a padded batch ``input`` of shape (T, B, *) (``batch_first``: (B, T, *)) whose
    sequence ``b`` has ``lengths[b]`` steps. With ``enforce_sorted`` the lengths must be in
    decreasing order; otherwise the batch is sorted first and the order kept in the result."""
    if not isinstance(input, Tensor):
        raise TypeError(f"pack_padded_sequence: input must be a Tensor, got {type(input).__name__}")
    if input.ndim < 2:
        raise ValueError(f"pack_padded_sequence: input must have at least 2 dims (time and batch), "
                         f"got {input.ndim}")
    lens = _int_list(lengths, "pack_padded_sequence", "lengths")
    batch_dim = 0 if batch_first else 1
    if len(lens) != input.shape[batch_dim]:
        raise ValueError(f"pack_padded_sequence: expected len(lengths) to equal the batch size, got "
                         f"{len(lens)} lengths for a batch of {input.shape[batch_dim]}")
    _check_lengths(lens, "pack_padded_sequence")
    sorted_indices = None
    if enforce_sorted:
        if any(a < b for a, b in itertools.pairwise(lens)):
            raise ValueError("pack_padded_sequence: lengths must be sorted in decreasing order when "
                             f"enforce_sorted=True, got {lens}; pass enforce_sorted=False to sort "
                             "the batch here")
    else:
        order = [int(i) for i in np.argsort(-np.asarray(lens), kind="stable")]
        sorted_indices = _index(order, creation._device_like(input, None))
        input = indexing.index_select(input, batch_dim, sorted_indices)
        lens = [lens[i] for i in order]
    steps = input.shape[1 - batch_dim]
    if lens[0] > steps:
        raise ValueError(f"pack_padded_sequence: a length of {lens[0]} is longer than the "
                         f"{steps} steps of input")
    if batch_first:
        input = shape_ops.transpose(input, 0, 1)
    sizes = _batch_sizes(lens)
    data = _pack_rows(input, sizes)
    return PackedSequence(data, _index(sizes), sorted_indices, None)


def pad_packed_sequence(sequence: PackedSequence, batch_first: bool = False,
                        padding_value: float = 0.0,
                        total_length: int | None = None) -> tuple[Tensor, Tensor]:
    """The inverse of ``pack_padded_sequence``: the padded batch, (T, B, *) or (B, T, *), in
    the original batch order, and the int64 tensor of lengths. ``total_length`` pads to that
    many steps (at least the longest sequence)."""
    if not isinstance(sequence, PackedSequence):
        raise TypeError(f"pad_packed_sequence: expected a PackedSequence, got "
                        f"{type(sequence).__name__}")
    sizes = _int_list(sequence.batch_sizes, "pad_packed_sequence", "batch_sizes")
    if total_length is not None and total_length < len(sizes):
        raise ValueError(f"pad_packed_sequence: expected total_length to be at least the length "
                         f"of the longest sequence in input, but got total_length={total_length} "
                         f"and max sequence length being {len(sizes)}")
    out = _unpack_rows(sequence.data, sizes, padding_value, total_length)
    lengths = [sum(1 for s in sizes if s > b) for b in range(sizes[0])]
    if sequence.unsorted_indices is not None:
        out = indexing.index_select(out, 1, sequence.unsorted_indices)
        order = _int_list(sequence.unsorted_indices, "pad_packed_sequence", "unsorted_indices")
        lengths = [lengths[i] for i in order]
    if batch_first:
        out = shape_ops.transpose(out, 0, 1)
    return out, _index(lengths)


def pad_sequence(sequences: Any, batch_first: bool = False, padding_value: float = 0.0,
                 padding_side: str = "right") -> Tensor:
    """Stack tensors of shape (L_i, *) into (max L, B, *) (``batch_first``: (B, max L, *)),
    filling with ``padding_value`` on the ``padding_side`` ("right" or "left")."""
    if padding_side not in ("right", "left"):
        raise ValueError(f"pad_sequence: padding_side must be 'left' or 'right', got "
                         f"{padding_side!r}")
    if isinstance(sequences, Tensor):
        sequences = list(sequences.unbind(0))
    sequences = list(sequences)
    if not sequences:
        raise ValueError("pad_sequence: received an empty list of sequences")
    for i, s in enumerate(sequences):
        if not isinstance(s, Tensor):
            raise TypeError(f"pad_sequence: expected a list of Tensors, element {i} is "
                            f"{type(s).__name__}")
        if s.ndim == 0:
            raise ValueError(f"pad_sequence: element {i} is 0-d; every sequence needs a time dim")
    trailing = tuple(sequences[0].shape[1:])
    for i, s in enumerate(sequences):
        if tuple(s.shape[1:]) != trailing:
            raise ValueError(f"pad_sequence: every sequence must have the trailing shape {trailing} "
                             f"of the first, element {i} has {tuple(s.shape[1:])}")
    longest = max(s.shape[0] for s in sequences)
    padded = []
    for s in sequences:
        missing = longest - s.shape[0]
        if missing:
            fill = creation.full((missing,) + trailing, padding_value, dtype=s.dtype,
                          device=creation._device_like(s, None))
            s = shape_ops.cat([s, fill] if padding_side == "right" else [fill, s], 0)
        padded.append(s)
    return shape_ops.stack(padded, 0 if batch_first else 1)


def unpad_sequence(padded_sequences: Tensor, lengths: Any,
                   batch_first: bool = False) -> list[Tensor]:
    """The inverse of ``pad_sequence`` (right padding): the list of sequences, sequence ``b``
    its first ``lengths[b]`` steps."""
    lens = _int_list(lengths, "unpad_sequence", "lengths")
    if not batch_first:
        padded_sequences = shape_ops.transpose(padded_sequences, 0, 1)
    if len(lens) != padded_sequences.shape[0]:
        raise ValueError(f"unpad_sequence: got {len(lens)} lengths for a batch of "
                         f"{padded_sequences.shape[0]}")
    return [padded_sequences[b][:n] for b, n in enumerate(lens)]


def pack_sequence(sequences: Sequence[Tensor], enforce_sorted: bool = True) -> PackedSequence:
    """Pack a list of tensors of shape (L_i, *); with ``enforce_sorted`` they must come in
    decreasing length."""
    sequences = list(sequences)
    lengths = [s.shape[0] if isinstance(s, Tensor) and s.ndim else 0 for s in sequences]
    return pack_padded_sequence(pad_sequence(sequences), lengths, enforce_sorted=enforce_sorted)


def unpack_sequence(packed_sequences: PackedSequence) -> list[Tensor]:
    """The inverse of ``pack_sequence``: the list of sequences in their original order."""
    padded, lengths = pad_packed_sequence(packed_sequences, batch_first=True)
    return unpad_sequence(padded, lengths, batch_first=True)
