"""Turning the samples a dataset returns into batches: ``default_collate`` (stack along a new
first dim) and ``default_convert`` (arrays to tensors, nothing stacked)."""

from __future__ import annotations

import collections.abc
import copy
from typing import Any

import numpy as np

from ..._tensor import Tensor
from ...dialects.tp import dtypes as dt
from ...dialects.tp.errors import ShapeError
from ...ops.creation import as_tensor, tensor
from ...ops.shape import stack

__all__ = ["default_collate", "default_convert"]

_UNSUPPORTED = ("default_collate: batch must contain tensors, numpy arrays, numbers, dicts or lists; "
                "found {}")


def _is_text_array(array: np.ndarray) -> bool:
    """Strings, bytes, unicode and Python objects: arrays that do not become tensors."""
    return array.dtype.kind in "SaUO"


def _has_tensor_dtype(array: np.ndarray) -> bool:
    try:
        dt.from_numpy_dtype(array.dtype)
    except (TypeError, ValueError):
        return False
    return True


def _rebuilt_mapping(elem: Any, values: dict) -> Any:
    """A mapping of ``elem``'s type holding ``values`` (a plain dict if the type cannot be
    rebuilt that way)."""
    if isinstance(elem, collections.abc.MutableMapping):
        clone = copy.copy(elem)  # keeps the type and any attributes (e.g. OrderedDict, defaultdict)
        clone.update(values)
        return clone
    try:
        return type(elem)(values)
    except TypeError:
        return values


def _rebuilt_sequence(elem: Any, values: list) -> Any:
    if isinstance(elem, collections.abc.MutableSequence):
        clone = copy.copy(elem)
        clone[:] = values
        return clone
    try:
        return type(elem)(values)
    except TypeError:
        return values


def _is_namedtuple(obj: Any) -> bool:
    return isinstance(obj, tuple) and hasattr(obj, "_fields")


def default_convert(data: Any) -> Any:
    """``data`` with every numpy array and numpy scalar turned into a tensor, through dicts,
    namedtuples, tuples and lists; nothing is stacked. Arrays of strings or objects, Python
    numbers and anything else are returned as they are. The ``collate_fn`` a ``DataLoader``
    uses when ``batch_size=None``."""
    if isinstance(data, Tensor):
        return data
    if isinstance(data, np.ndarray):
        return data if _is_text_array(data) else as_tensor(data)
    if isinstance(data, (np.bool_, np.number)):
        return as_tensor(data)
    if isinstance(data, collections.abc.Mapping):
        return _rebuilt_mapping(data, {key: default_convert(data[key]) for key in data})
    if _is_namedtuple(data):
        return type(data)(*(default_convert(d) for d in data))
    if isinstance(data, tuple):
        return [default_convert(d) for d in data]
    if isinstance(data, collections.abc.Sequence) and not isinstance(data, (str, bytes)):
        return _rebuilt_sequence(data, [default_convert(d) for d in data])
    return data


def _stack_tensors(batch: list[Tensor]) -> Tensor:
    first = tuple(batch[0].shape)
    for i, t in enumerate(batch[1:], start=1):
        if tuple(t.shape) != first:
            raise ShapeError(f"default_collate: stack expects each tensor to be equal size, but got {list(first)} "
                             f"at entry 0 and {list(t.shape)} at entry {i}")
    return stack(batch, 0)


def default_collate(batch: Any) -> Any:
    """One batch from a list of samples, as PyTorch's ``default_collate``: tensors are stacked
    along a new first dim; numpy arrays become tensors (their dtype) and are stacked; numpy
    scalars give a 1-D tensor of their dtype; Python floats give float64, ints int64 and bools
    bool; strings and bytes stay a list; dicts, namedtuples, tuples and lists are collated
    field by field (a tuple gives a list, as in PyTorch).

    >>> default_collate([(1, 2.0), (3, 4.0)])
    [tensor([1, 3]), tensor([2., 4.], dtype=tensorplay.float64)]
    """
    if not isinstance(batch, collections.abc.Sequence) or isinstance(batch, (str, bytes)):
        raise TypeError(f"default_collate: expected a list of samples, got {type(batch).__name__}")
    if len(batch) == 0:
        raise ValueError("default_collate: the batch is empty (no samples to collate)")
    elem = batch[0]
    if isinstance(elem, Tensor):
        return _stack_tensors([_as_tensor_sample(b) for b in batch])
    if isinstance(elem, np.ndarray):
        if _is_text_array(elem) or not _has_tensor_dtype(elem):
            raise TypeError(_UNSUPPORTED.format(elem.dtype))
        return _stack_tensors([_as_tensor_sample(b) for b in batch])
    if isinstance(elem, (np.bool_, np.number)):
        return as_tensor(np.asarray(batch))
    if isinstance(elem, float):
        return tensor(batch, dtype=dt.float64)
    if isinstance(elem, int):  # bool too: tensor() gives a bool tensor for a list of bools
        return tensor(batch)
    if isinstance(elem, (str, bytes)):
        return batch
    if isinstance(elem, collections.abc.Mapping):
        try:
            values = {key: default_collate([d[key] for d in batch]) for key in elem}
        except KeyError as e:
            raise KeyError(f"default_collate: a sample lacks the key {e.args[0]!r} that the first sample has") from None
        return _rebuilt_mapping(elem, values)
    if _is_namedtuple(elem):
        return type(elem)(*(default_collate(samples) for samples in zip(*batch)))
    if isinstance(elem, collections.abc.Sequence):
        size = len(elem)
        if any(len(b) != size for b in batch):
            raise ShapeError("default_collate: each element in list of batch should be of equal size")
        transposed = [default_collate(samples) for samples in zip(*batch)]  # (strings stay tuples)
        if isinstance(elem, tuple):
            return transposed
        return _rebuilt_sequence(elem, transposed)
    raise TypeError(_UNSUPPORTED.format(type(elem)))


def _as_tensor_sample(sample: Any) -> Tensor:
    if isinstance(sample, Tensor):
        return sample
    if isinstance(sample, np.ndarray):
        return as_tensor(sample)
    raise TypeError(f"default_collate: the first sample is a tensor or array, but another sample is a "
                    f"{type(sample).__name__}")
