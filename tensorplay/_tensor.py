"""``tp.Tensor``: a PyTorch-style tensor stored as a numpy array on the host or as an IREE
buffer on a GPU device (``runtime.storage.DeviceArray``; docs/devices.md).

Every operation goes through :func:`tensorplay._dispatch.apply`, so the same Python code
runs eagerly or is captured into a graph. Methods here are thin: they forward to the
functions in :mod:`tensorplay.ops` and :mod:`tensorplay.nn.functional`.
"""

from __future__ import annotations

import builtins
from collections.abc import Iterator
from typing import Any

import numpy as np

from .dialects.tp import dtypes as dt
from .dialects.tp.types import TensorType, type_of_array
from ._device import CPU, DEVICE_TYPES, as_device, device, driver_of
from ._grad_mode import is_grad_enabled as _grad_enabled
from .runtime.storage import DeviceArray, aligned_copy, mark_shared
from . import _views

__all__ = ["Tensor", "Size"]


class Size(tuple):
    """A tensor's shape: a tuple of ints, as ``torch.Size``."""

    def numel(self) -> int:
        n = 1
        for d in self:
            n *= d
        return n

    def __repr__(self) -> str:
        return f"tensorplay.Size([{', '.join(map(str, self))}])"

    def __getitem__(self, key):  # slices stay Size
        out = tuple.__getitem__(self, key)
        return Size(out) if isinstance(key, slice) else out

    def __add__(self, other):
        return Size(tuple(self) + tuple(other))


class Tensor:
    """A multi-dimensional array with PyTorch's API.

    ``tp.Tensor(data)`` makes a float tensor from nested lists or arrays; prefer
    ``tp.tensor(data)``, which infers the dtype.
    """

    __array_priority__ = 1000  # numpy defers binary operators to us

    # autograd state (class defaults: nothing to set per tensor until autograd touches it)
    _grad_fn: Any = None  # the Node that made this tensor (None for a leaf)
    _output_nr: int = 0  # which result of that node it is
    # storage sharing (tensorplay/_views.py): views, detach() and .data alias their root's memory
    _root: Any = None  # the tensor owning the storage this one aliases (None: its own)
    _steps: tuple = ()  # the view ops that make this alias from the root
    _base_t: Any = None  # PyTorch's _base (views only)
    _nb: int = 0  # how many of the steps make the view from _base_t
    _st: Any = None  # [writes]: the storage's write counter, shared by the root and its aliases
    _vc: Any = None  # [version]: PyTorch's version counter, shared by a base, its views, detach()
    _seen: int = 0  # storage writes this alias's value reflects
    _gfseen: int = 0  # version this view's grad_fn reflects
    _nograd_view: bool = False  # a view of a tensor requiring grad, made under no_grad
    _multi_view: Any = None  # (output index, node name) of a split/chunk/unbind view requiring grad
    _made_by: int = 0  # the capture that made this alias (0: none)
    #: (capture, symbolic TensorType) of a concrete tensor whose sizes a capture running its
    #: program in segments keeps symbolic (set and cleared by that capture)
    _sym: Any = None
    _grad_acc: Any = None  # weak reference to a leaf's AccumulateGrad node

    def __init__(self, data: Any = None, *, dtype: Any = None):
        if data is None:
            data = []
        if isinstance(data, Tensor):
            array = data._concrete("Tensor(tensor)")  # a device tensor's values come to the host
        else:
            array = np.asarray(data)
        target = dt.as_dtype(dtype) if dtype is not None else dt.get_default_dtype()
        self._data: np.ndarray | None = aligned_copy(array, target.np_dtype)
        self._init_meta()

    def _init_meta(self) -> None:
        self._type: TensorType | None = None
        self._requires_grad = False
        self.grad: Tensor | None = None
        self._capture: Any = None  # set by capture for tensors that stand for graph values
        self._static_dims: Any = None  # recorded by tensorplay.compiler.mark_static

    @classmethod
    def _wrap(cls, array: np.ndarray) -> Tensor:
        """A tensor over ``array`` without copying (internal)."""
        t = object.__new__(cls)
        t._data = array
        t._init_meta()
        return t

    @classmethod
    def _from_type(cls, ttype: TensorType, capture: Any) -> Tensor:
        """A tensor with no data that stands for a value being captured (internal)."""
        t = object.__new__(cls)
        t._data = None
        t._init_meta()
        t._type = ttype
        t._capture = capture
        return t

    @property
    def _version(self) -> int:
        """PyTorch's version counter: in-place changes of this tensor, its base and views."""
        return _views.version(self)

    @property
    def _base(self) -> Tensor | None:
        """The tensor this one is a view of (None if it is not a view), as in PyTorch."""
        return _views.base(self)

    def _is_view(self) -> builtins.bool:
        return self._base_t is not None

    def _tensor_type(self) -> TensorType:
        if self._data is None:
            return self._type
        if self._sym is not None:  # symbolic sizes for the capture running this tensor's segments
            from ._capture_hooks import concrete_symbolic_type

            ttype = concrete_symbolic_type(self)
            if ttype is not None:
                return ttype
        return type_of_array(self._data)

    def _concrete(self, why: str) -> np.ndarray:
        """The values of this tensor as a host array (a device tensor's read-only copy);
        capture tensors report a graph break for ``why``."""
        if self._root is not None:
            _views.sync(self)
        data = self._data
        if data is None:
            from ._capture_hooks import needs_concrete_value

            return needs_concrete_value(self, why)
        if type(data) is DeviceArray:
            return data.to_host()
        return data

    # -- metadata --------------------------------------------------------------------------
    @property
    def shape(self) -> Size:
        if self._data is not None:
            if self._sym is not None:  # a segment result or argument with symbolic sizes
                from ._capture_hooks import concrete_symbolic_type, symbolic_sizes

                ttype = concrete_symbolic_type(self)
                if ttype is not None:
                    return Size(symbolic_sizes(self, ttype.shape))
            return Size(self._data.shape)
        shape = self._type.shape
        if not self._type.has_static_shape:  # symbolic sizes: the capture's SymInts
            from ._capture_hooks import symbolic_sizes

            shape = symbolic_sizes(self, shape)
        return Size(shape)

    @property
    def dtype(self) -> dt.DType:
        if self._data is not None:
            return dt.from_numpy_dtype(self._data.dtype)
        return self._type.dtype

    @property
    def device(self) -> device:
        data = self._data
        if data is None:  # a borrowed tensor in a trace: where its data lives
            return getattr(self._capture, "device", None) or CPU
        return as_device(data.device) if type(data) is DeviceArray else CPU

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def is_floating_point(self) -> bool:
        return self.dtype.is_floating_point

    @property
    def is_cuda(self) -> bool:
        return self.device.type == "cuda"

    @property
    def layout(self) -> str:
        return "strided"

    def size(self, dim: int | None = None):
        shape = self.shape
        if dim is None:
            return shape
        return shape[_checked_dim("size", dim, len(shape))]

    def dim(self) -> int:
        return self.ndim

    def ndimension(self) -> int:
        return self.ndim

    def numel(self) -> int:
        return self.shape.numel()

    nelement = numel

    def element_size(self) -> int:
        return self.dtype.itemsize

    def stride(self, dim: int | None = None):
        """The step in elements between neighbours along each dim (PyTorch's strides: views
        share their base's memory; see docs/tensors.md)."""
        strides, _ = _views.layout(self)
        return strides if dim is None else strides[_checked_dim("stride", dim, self.ndim)]

    def storage_offset(self) -> int:
        """Where this tensor starts in its storage, in elements."""
        return _views.layout(self)[1]

    def is_contiguous(self, memory_format: Any = None) -> builtins.bool:
        if not all(type(d) is int for d in self.shape):
            # sizes known only at run time (a capture): decided from how the tensor was made,
            # without comparing sizes (which would specialize them): views that reorder or
            # skip elements are not contiguous
            return all(name == "tp.reshape" for name, _ in self._steps)
        strides, _ = _views.layout(self)
        if self.numel() == 0:
            return True
        expected = 1
        for size, stride in zip(reversed(self.shape), reversed(strides)):
            if size != 1 and stride != expected:
                return False
            expected *= size
        return True

    def data_ptr(self) -> int:
        """The address of this tensor's first element (host tensors)."""
        data = self._concrete("Tensor.data_ptr()") if type(self._data) is not DeviceArray else None
        if data is None:
            raise RuntimeError(f"data_ptr() of a {self.device} tensor is not available: its memory is an "
                               f"IREE device buffer")
        return data.__array_interface__["data"][0]

    def untyped_storage(self) -> UntypedStorage:
        """The memory this tensor and its aliases share."""
        root = self._root if self._root is not None else self
        return UntypedStorage(root)

    @property
    def T(self) -> Tensor:  # noqa: N802
        return _shape.permute(self, tuple(reversed(range(self.ndim))))

    @property
    def mT(self) -> Tensor:  # noqa: N802
        return _shape.transpose(self, -2, -1)

    @property
    def data(self) -> Tensor:
        """This tensor's memory as a tensor that does not require grad; writes to it are seen
        here and are not recorded by autograd."""
        from . import _dispatch

        if self._data is None or _dispatch.current_handler() is not None:
            from ._grad_mode import no_grad

            with no_grad():
                out = _elementwise.clone(self)
            return _views.alias(self, out, shares_version=False)
        return _views.alias(self, Tensor._wrap(self._data), shares_version=False)

    @data.setter
    def data(self, value: Tensor) -> None:
        if not isinstance(value, Tensor):
            raise TypeError(f"expected a Tensor, got {type(value).__name__}")
        if self._data is None or value._data is None or tuple(value.shape) != tuple(self.shape):
            self._assign(value, track=False)
            return
        # PyTorch's `x.data = y`: x takes y's storage (later writes to either are seen by both)
        if value.dtype is not self.dtype:
            raise RuntimeError(f"x.data = y: y must have x's dtype ({self.dtype}), got {value.dtype}")
        if self._st is not None or self._root is not None:
            self._assign(value, track=False)  # aliases of this tensor keep seeing its memory
            return
        self._data = value._data
        _views.alias(value, self, shares_version=False)

    # -- autograd --------------------------------------------------------------------------
    @property
    def requires_grad(self) -> builtins.bool:
        return self._requires_grad

    @requires_grad.setter
    def requires_grad(self, value: builtins.bool) -> None:
        value = builtins.bool(value)
        if self._grad_fn is not None:
            if not value:
                raise RuntimeError("you can only change requires_grad flags of leaf variables. If you want to use "
                                   "a computed variable in a subgraph that doesn't require differentiation use "
                                   "var_no_grad = var.detach().")
            return
        if value and not self.dtype.is_floating_point:
            raise RuntimeError("only Tensors of floating point and complex dtype can require gradients")
        self._requires_grad = value

    @property
    def grad_fn(self) -> Any:
        """The autograd node that computed this tensor (None for leaves)."""
        return self._grad_fn

    @property
    def is_leaf(self) -> builtins.bool:
        """True for tensors not computed by a recorded op (user-made, or not requiring grad)."""
        return self._grad_fn is None

    @property
    def retains_grad(self) -> builtins.bool:
        fn = self._grad_fn
        return fn is not None and self._output_nr in fn._retained and fn._retained[self._output_nr]() is self

    def retain_grad(self) -> None:
        """Keep ``.grad`` of this non-leaf tensor after backward (leaves always keep it)."""
        if not self._requires_grad:
            raise RuntimeError("can't retain_grad on Tensor that has requires_grad=False")
        if self._grad_fn is not None:
            import weakref

            self._grad_fn._retained[self._output_nr] = weakref.ref(self)

    def register_hook(self, hook: Any) -> Any:
        """``hook(grad)`` runs when this tensor's gradient is computed; a returned tensor
        replaces the gradient. Returns a handle with ``remove()``."""
        if not self._requires_grad:
            raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
        from .autograd.engine import RemovableHandle, edge_of

        node, nr = edge_of(self)
        if self._grad_fn is None:
            self._keep_acc = node  # the hook lives as long as the tensor
        hooks = node._pre_hooks.setdefault(nr, [])
        hooks.append(hook)
        return RemovableHandle(hooks, hook)

    def register_post_accumulate_grad_hook(self, hook: Any) -> Any:
        """``hook(tensor)`` after a leaf's ``.grad`` was accumulated."""
        if self._grad_fn is not None:
            raise RuntimeError("post accumulate grad hooks cannot be registered on non-leaf tensors")
        if not self._requires_grad:
            raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
        from .autograd.engine import edge_of

        node, _ = edge_of(self)
        self._keep_acc = node
        return node.register_hook(hook)

    def backward(self, gradient: Any = None, retain_graph: Any = None, create_graph: builtins.bool = False,
                 inputs: Any = None) -> None:
        """Accumulate d(self)/d(leaf) into each leaf's ``.grad`` (PyTorch's semantics)."""
        from .autograd import backward

        backward(self, gradient, retain_graph, create_graph, inputs=inputs)

    def detach_(self) -> Tensor:
        """Make this tensor a leaf that does not require grad."""
        self._grad_fn = None
        self._requires_grad = False
        return self

    # -- conversion ------------------------------------------------------------------------
    def numpy(self, *, force: bool = False) -> np.ndarray:
        """The numpy array behind a CPU tensor (shared, not copied); ``force=True`` copies a
        device tensor to the host, otherwise that is a TypeError as in PyTorch."""
        if self._requires_grad and not force:
            raise RuntimeError("Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() "
                               "instead.")
        if self._root is not None:
            _views.sync(self)
        data = self._data
        if type(data) is DeviceArray:
            if not force:
                raise TypeError(f"can't convert {data.device} device type tensor to numpy. Use Tensor.cpu() "
                                f"to copy the tensor to host memory first.")
            return data.host_copy()
        array = self._concrete("Tensor.numpy()")
        mark_shared(array)
        return array

    def item(self) -> Any:
        array = self._concrete("Tensor.item()")
        if array.size != 1:
            raise ValueError(f"a Tensor with {array.size} elements cannot be converted to Scalar")
        return array.reshape(()).item() if array.dtype.kind != "V" else float(array.reshape(()))

    def tolist(self) -> Any:
        array = self._concrete("Tensor.tolist()")
        if array.dtype == dt.bfloat16.np_dtype:
            array = array.astype(np.float32)
        return array.tolist()

    def clone(self) -> Tensor:
        return _elementwise.clone(self)

    def contiguous(self, memory_format: Any = None) -> Tensor:
        """Itself when its elements lie in order in memory, else a copy that does."""
        return self if self.is_contiguous() else _elementwise.clone(self)

    def detach(self) -> Tensor:
        from . import _dispatch

        if self._data is None or _dispatch.current_handler() is not None:
            # under a capture: a copy no gradient flows through, read from the traced value (a
            # parameter detached inside a compiled function is an input, never a constant)
            from ._grad_mode import no_grad

            with no_grad():
                out = _elementwise.clone(self)
            return _views.alias(self, out, shares_version=True)  # (writes to it reach self)
        return _views.alias(self, Tensor._wrap(self._data), shares_version=True)

    def cpu(self) -> Tensor:
        """This tensor on the host: itself if it is there, else a copy (a download)."""
        return self._moved(CPU)

    def pin_memory(self, device: Any = None) -> Tensor:
        """Itself: host tensors are numpy arrays, which IREE reads or uploads as they are, so
        there is no page-locked copy to make. RuntimeError for a device tensor, as PyTorch."""
        if self.device.type != "cpu":
            raise RuntimeError(f"pin_memory(): cannot pin a {self.device} tensor: only host tensors can be pinned")
        return self

    def get_device(self) -> int:
        """The index of the device this tensor is on: -1 on the host."""
        dev = self.device
        return -1 if dev.type == "cpu" else (dev.index or 0)

    def cuda(self, device: Any = None, non_blocking: builtins.bool = False) -> Tensor:
        """This tensor on the CUDA GPU (IREE's cuda driver)."""
        target = as_device("cuda" if device is None else device)
        if target.type != "cuda":
            raise ValueError(f"cuda(): expected a CUDA device, got {target}")
        return self._moved(target)

    def _moved(self, target: device, copy: builtins.bool = False) -> Tensor:
        """This tensor's value on ``target``: itself when it is there (a copy if ``copy``)."""
        if self._root is not None:
            _views.sync(self)
        data = self._data
        if data is None:  # a capture tensor: the whole graph runs on the compiled backend's device
            return self
        here = self.device
        if here == target or (target.index is None and here.type == target.type):
            return self.clone() if copy else self
        if self._requires_grad and _grad_enabled():  # differentiable: the gradient goes back to this device
            from .autograd.function import _Moved

            return _Moved.apply(self, target)
        return self._copied_to(target)

    def _copied_to(self, target: device) -> Tensor:
        data = self._data
        if target.type == "cpu":
            out = Tensor._wrap(data.host_copy())
        else:
            from .runtime.program import to_device

            host = data.to_host() if type(data) is DeviceArray else data
            out = Tensor._wrap(to_device(host, driver_of(target)))
        return out  # (not requiring grad: under grad mode _Moved makes it a differentiable result)

    def to(self, *args: Any, **kwargs: Any) -> Tensor:
        """``to(dtype)``, ``to(device)``, ``to(device, dtype)`` or ``to(other_tensor)``."""
        dtype = kwargs.pop("dtype", None)
        dev = kwargs.pop("device", None)
        kwargs.pop("non_blocking", None)
        copy = kwargs.pop("copy", False)
        if kwargs:
            raise TypeError(f"to() got unexpected keyword argument(s) {', '.join(kwargs)}")
        for arg in args:
            if isinstance(arg, Tensor):
                dtype = arg.dtype
            elif isinstance(arg, device) or (isinstance(arg, str) and _is_device_name(arg)):
                dev = arg
            else:
                dtype = arg
        out = self
        if dev is not None:
            out = self._moved(as_device(dev), copy=copy and dtype is None)
            copy = copy and out is self
        if dtype is None or dt.as_dtype(dtype) is out.dtype:
            return out.clone() if copy else out
        return _elementwise.cast(out, dt.as_dtype(dtype))

    def type(self, dtype: Any = None, non_blocking: builtins.bool = False):
        """The legacy type name (``'tensorplay.FloatTensor'``) without an argument; with a
        dtype, a legacy type (``tp.LongTensor``) or its name, this tensor converted to it."""
        if dtype is None:
            return f"tensorplay.{_TYPE_NAMES.get(self.dtype.name, self.dtype.name)}"
        if isinstance(dtype, _LegacyTensorType):
            dtype = dtype.dtype
        elif isinstance(dtype, str) and dtype.rpartition(".")[2] in _LEGACY_DTYPES:
            prefix = dtype.rpartition(".")[0]
            if prefix not in ("", "torch", "tensorplay"):
                raise ValueError(f"type(): unknown tensor type {dtype!r}")
            dtype = _LEGACY_DTYPES[dtype.rpartition(".")[2]]
        return self.to(dtype)

    def type_as(self, other: Tensor) -> Tensor:
        return self.to(other.dtype)

    def float(self) -> Tensor:
        return self.to(dt.float32)

    def double(self) -> Tensor:
        return self.to(dt.float64)

    def half(self) -> Tensor:
        return self.to(dt.float16)

    def bfloat16(self) -> Tensor:
        return self.to(dt.bfloat16)

    def int(self) -> Tensor:
        return self.to(dt.int32)

    def long(self) -> Tensor:
        return self.to(dt.int64)

    def short(self) -> Tensor:
        return self.to(dt.int16)

    def char(self) -> Tensor:
        return self.to(dt.int8)

    def byte(self) -> Tensor:
        return self.to(dt.uint8)

    def bool(self) -> Tensor:
        return self.to(dt.bool_)

    def new_tensor(self, data: Any, dtype: Any = None) -> Tensor:
        return _creation.tensor(data, dtype=dtype or self.dtype)

    def new_zeros(self, *size: Any, dtype: Any = None) -> Tensor:
        return _creation.zeros(*size, dtype=dtype or self.dtype)

    def new_ones(self, *size: Any, dtype: Any = None) -> Tensor:
        return _creation.ones(*size, dtype=dtype or self.dtype)

    def new_full(self, size: Any, fill_value: Any, dtype: Any = None) -> Tensor:
        return _creation.full(size, fill_value, dtype=dtype or self.dtype)

    def new_empty(self, *size: Any, dtype: Any = None) -> Tensor:
        return _creation.empty(*size, dtype=dtype or self.dtype)

    # -- numpy interop ---------------------------------------------------------------------
    def __array__(self, dtype: Any = None, copy: builtins.bool | None = None) -> np.ndarray:
        array = self._concrete("np.asarray(tensor)")  # a device tensor: its (read-only) host copy
        if dtype is not None and np.dtype(dtype) != array.dtype:
            return array.astype(dtype)
        if copy:
            return array.copy()
        if array.flags.writeable:
            mark_shared(array)
        return array

    def __array_ufunc__(self, ufunc: np.ufunc, method: str, *inputs: Any, **kwargs: Any) -> Any:
        from ._numpy_interop import array_ufunc

        return array_ufunc(ufunc, method, inputs, kwargs)

    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        from ._numpy_interop import array_function

        return array_function(func, types, args, kwargs)

    def __dlpack__(self, *args: Any, **kwargs: Any) -> Any:
        if type(self._data) is DeviceArray:
            raise TypeError(f"DLPack export of a {self.device} tensor is not supported; use .cpu() first")
        array = self._concrete("Tensor.__dlpack__()")
        mark_shared(array)
        if array.dtype == dt.bfloat16.np_dtype:
            raise TypeError("bfloat16 tensors cannot be exported through DLPack by the numpy "
                            "host storage; convert with .float() first")
        return array.__dlpack__(*args, **kwargs)

    def __dlpack_device__(self) -> tuple[int, int]:
        return (1, 0)  # kDLCPU

    # -- Python protocol -------------------------------------------------------------------
    def __repr__(self) -> str:
        from ._printing import tensor_repr

        if self._data is None:
            from ._capture_hooks import display_value

            display_value(self, "repr(tensor)")
        return tensor_repr(self)

    def __str__(self) -> str:
        from ._printing import tensor_repr

        if self._data is None:
            from ._capture_hooks import display_value

            display_value(self, "print(tensor)")
        return tensor_repr(self)

    def __len__(self) -> int:
        if self.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    def __iter__(self) -> Iterator[Tensor]:
        if self.ndim == 0:
            raise TypeError("iteration over a 0-d tensor")
        return iter(_shape.unbind(self, 0))

    def __bool__(self) -> builtins.bool:
        array = self._concrete("bool(tensor)")
        if array.size != 1:
            raise RuntimeError(f"Boolean value of Tensor with {array.size} elements is ambiguous; "
                               f"use .any() or .all()")
        return builtins.bool(array.reshape(()))

    def __float__(self) -> builtins.float:
        return builtins.float(self.item())

    def __int__(self) -> builtins.int:
        return builtins.int(self.item())

    def __index__(self) -> builtins.int:
        if self.dtype.is_floating_point or self.numel() != 1:
            raise TypeError("only integer tensors of a single element can be converted to an index")
        return builtins.int(self.item())

    def __complex__(self) -> complex:
        return complex(self.item())

    __hash__ = object.__hash__

    def __reduce_ex__(self, protocol: Any):
        return (_rebuild, (self._concrete("pickle"), self.requires_grad, type(self)))

    def __deepcopy__(self, memo: dict) -> Tensor:
        out = type(self).__new__(type(self))
        out.__dict__.update({k: v for k, v in self.__dict__.items() if k not in _ALIAS_FIELDS})
        data = self._data
        out._data = data if data is None or type(data) is DeviceArray else aligned_copy(data)  # device storage is immutable
        memo[id(self)] = out
        return out

    # -- operators -------------------------------------------------------------------------
    def __add__(self, other):
        return _elementwise.add(self, other)

    def __radd__(self, other):
        return _elementwise.add(other, self)

    def __sub__(self, other):
        return _elementwise.sub(self, other)

    def __rsub__(self, other):
        return _elementwise.sub(other, self)

    def __mul__(self, other):
        return _elementwise.mul(self, other)

    def __rmul__(self, other):
        return _elementwise.mul(other, self)

    def __truediv__(self, other):
        return _elementwise.div(self, other)

    def __rtruediv__(self, other):
        return _elementwise.div(other, self)

    def __floordiv__(self, other):
        return _elementwise.floor_divide(self, other)

    def __rfloordiv__(self, other):
        return _elementwise.floor_divide(other, self)

    def __mod__(self, other):
        return _elementwise.remainder(self, other)

    def __rmod__(self, other):
        return _elementwise.remainder(other, self)

    def __pow__(self, other):
        return _elementwise.pow(self, other)

    def __rpow__(self, other):
        return _elementwise.pow(other, self)

    def __matmul__(self, other):
        return _linalg.matmul(self, other)

    def __rmatmul__(self, other):
        return _linalg.matmul(other, self)

    def __neg__(self):
        return _elementwise.neg(self)

    def __pos__(self):
        return self

    def __abs__(self):
        return _elementwise.abs(self)

    def __invert__(self):
        return _elementwise.bitwise_not(self)

    def __and__(self, other):
        return _elementwise.bitwise_and(self, other)

    def __rand__(self, other):
        return _elementwise.bitwise_and(other, self)

    def __or__(self, other):
        return _elementwise.bitwise_or(self, other)

    def __ror__(self, other):
        return _elementwise.bitwise_or(other, self)

    def __xor__(self, other):
        return _elementwise.bitwise_xor(self, other)

    def __rxor__(self, other):
        return _elementwise.bitwise_xor(other, self)

    def __lshift__(self, other):
        return _elementwise.bitwise_left_shift(self, other)

    def __rlshift__(self, other):
        return _elementwise.bitwise_left_shift(other, self)

    def __rshift__(self, other):
        return _elementwise.bitwise_right_shift(self, other)

    def __rrshift__(self, other):
        return _elementwise.bitwise_right_shift(other, self)

    def __ilshift__(self, other):
        return self.bitwise_left_shift_(other)

    def __irshift__(self, other):
        return self.bitwise_right_shift_(other)

    def __eq__(self, other):  # type: ignore[override]
        return _elementwise.eq(self, other)

    def __ne__(self, other):  # type: ignore[override]
        return _elementwise.ne(self, other)

    def __lt__(self, other):
        return _elementwise.lt(self, other)

    def __le__(self, other):
        return _elementwise.le(self, other)

    def __gt__(self, other):
        return _elementwise.gt(self, other)

    def __ge__(self, other):
        return _elementwise.ge(self, other)

    def __getitem__(self, key):
        return _indexing.getitem(self, key)

    def __setitem__(self, key, value):
        self._assign(_indexing.setitem(self, key, value))

    # in-place operators rebind the tensor's value (the object stays the same)
    def __iadd__(self, other):
        return self.add_(other)

    def __isub__(self, other):
        return self.sub_(other)

    def __imul__(self, other):
        return self.mul_(other)

    def __itruediv__(self, other):
        return self.div_(other)

    # -- in-place methods ------------------------------------------------------------------
    def _assign(self, value: Tensor, track: builtins.bool = True) -> Tensor:
        """Write ``value`` (same shape) into this tensor in place: every tensor sharing its
        memory sees the change (tensorplay/_views.py), and autograd records it (``track``) as
        PyTorch does."""
        if not isinstance(value, Tensor):
            raise TypeError(f"expected a Tensor, got {type(value).__name__}")
        if tuple(value.shape) != tuple(self.shape):
            raise RuntimeError(f"in-place update of a tensor of shape {list(self.shape)} with a "
                               f"value of shape {list(value.shape)}")
        if track and self._requires_grad and _grad_enabled():
            base = self._base_t
            if base is not None and base._grad_fn is None and base._requires_grad:
                raise RuntimeError("a view of a leaf Variable that requires grad is being used in an in-place "
                                   "operation.")
            if self._grad_fn is None:
                raise RuntimeError("a leaf Variable that requires grad is being used in an in-place operation.")
            if self._multi_view is not None:
                i, node = self._multi_view
                raise RuntimeError(f"Output {i} of {node} is a view and is being modified inplace. This view is "
                                   f"the output of a function that returns multiple views. Such functions do not "
                                   f"allow the output views to be modified inplace. You should replace the "
                                   f"inplace operation by an out-of-place one.")
        if value.dtype is not self.dtype:
            value = _elementwise.cast(value, self.dtype)
        if value._data is not None and self._data is not None and (
                type(value._data) is not type(self._data) or value.device != self.device):
            value = value._moved(self.device)  # (a value made on the host: fill_, setitem of a scalar)
        _views.write(self, value, track)
        return self

    def random_(self, *args: Any, generator=None, **kwargs: Any) -> Tensor:
        """Fill with integers drawn uniformly: ``random_(to)`` from ``[0, to)``,
        ``random_(from, to)`` from ``[from, to)``, ``random_()`` from 0 to the largest integer
        the dtype holds exactly (``2**mantissa`` for floats; ``2**63 - 2`` for int64)."""
        bounds = list(args)
        if "from" in kwargs:
            bounds = [kwargs.pop("from")] + bounds
        if "to" in kwargs:
            bounds = (bounds or [0]) + [kwargs.pop("to")]
        if kwargs or len(bounds) > 2:
            raise TypeError(f"random_() takes (from=0, to=None, *, generator=None), got {len(bounds)} bounds"
                            + (f" and keyword(s) {', '.join(kwargs)}" if kwargs else ""))
        if len(bounds) == 1:
            bounds = [0] + bounds
        if bounds and bounds[1] is None:
            bounds = bounds[:1]
        low = int(bounds[0]) if bounds else 0
        d = self.dtype
        if len(bounds) == 2:
            high = int(bounds[1])
        elif d.is_bool:
            high = 2
        elif d.is_floating_point:
            high = 2 ** {"float32": 24, "float64": 53, "float16": 11, "bfloat16": 8}[d.name] + 1
        else:
            high = min(int(np.iinfo(d.np_dtype).max), 2 ** 63 - 2) + 1
        if low >= high:
            raise ValueError(f"random_ expects 'from' to be less than 'to', but got from={low} >= to={high}")
        if d.is_integer:
            info = np.iinfo(d.np_dtype)
            if low < info.min or high - 1 > info.max:
                raise ValueError(f"random_: [{low}, {high}) is out of bounds for {d.name}")
        return self._assign(_random.randint(low, high, tuple(self.shape), generator=generator))

    def bernoulli_(self, p: Any = 0.5, *, generator=None) -> Tensor:
        """Fill with 1 with probability ``p`` (a number or a tensor broadcast to this shape)
        and 0 otherwise."""
        if isinstance(p, Tensor):
            probs = _shape.broadcast_to(p.to(dt.float64), tuple(self.shape))
            return self._assign(_random.bernoulli(probs, generator=generator))
        if not 0 <= p <= 1:
            raise ValueError(f"bernoulli_ expects p to be in [0, 1], but got p={p}")
        return self._assign(_random.bernoulli(_creation.zeros(tuple(self.shape), dtype=dt.float64), p, generator=generator))

    def copy_(self, src: Any, non_blocking: builtins.bool = False) -> Tensor:
        src = src if isinstance(src, Tensor) else _creation.tensor(src)
        from .dialects.tp.errors import ShapeError

        try:
            if self._data is not None:  # the destination keeps its device, as in PyTorch
                src = src.to(self.device)
            value = _shape.broadcast_to(src.to(self.dtype), tuple(self.shape))
        except ShapeError:
            raise RuntimeError(f"copy_: in-place update of a tensor of shape {list(self.shape)} from a "
                               f"source of shape {list(src.shape)}, which does not broadcast to it") from None
        return self._assign(value.clone())

    def fill_(self, value: Any) -> Tensor:
        return self._assign(_creation.full(tuple(self.shape), value, dtype=self.dtype))

    def zero_(self) -> Tensor:
        return self.fill_(0)

    def normal_(self, mean: builtins.float = 0.0, std: builtins.float = 1.0, *, generator=None):
        return self._assign(_random.normal(mean, std, tuple(self.shape), generator=generator, dtype=self.dtype))

    def uniform_(self, a: builtins.float = 0.0, b: builtins.float = 1.0, *, generator=None):
        return self._assign(_random.uniform(a, b, tuple(self.shape), generator=generator, dtype=self.dtype))

    def requires_grad_(self, requires_grad: builtins.bool = True) -> Tensor:
        self.requires_grad = requires_grad
        return self


#: what makes a tensor share another's storage and version counter (a deep copy has its own)
_ALIAS_FIELDS = frozenset(_views.STORAGE_FIELDS) | {"_vc"}


class UntypedStorage:
    """The memory a tensor and its aliases share (``Tensor.untyped_storage()``): equal for
    tensors over the same storage."""

    def __init__(self, root: Tensor):
        self._root = root

    def data_ptr(self) -> int:
        return self._root.data_ptr()

    def nbytes(self) -> int:
        return self._root.numel() * self._root.element_size()

    def size(self) -> int:
        return self.nbytes()

    __len__ = size

    def __eq__(self, other: Any) -> builtins.bool:
        return isinstance(other, UntypedStorage) and other._root is self._root

    def __hash__(self) -> int:
        return id(self._root)

    def __repr__(self) -> str:
        return f"tensorplay.UntypedStorage(nbytes={self.nbytes()})"


def _rebuild(array: np.ndarray, requires_grad: builtins.bool, cls: type) -> Tensor:
    t = cls._wrap(aligned_copy(array))
    t.requires_grad = requires_grad
    return t


def _checked_dim(op: str, dim: int, rank: int) -> int:
    from .dialects.tp.shapes import normalize_dim

    return normalize_dim(op, dim, rank)


def _is_device_name(value: str) -> builtins.bool:
    return value.partition(":")[0] in DEVICE_TYPES


def _is_dtype_name(value: Any) -> builtins.bool:
    if not isinstance(value, str):
        return False
    try:
        dt.as_dtype(value)
        return True
    except TypeError:
        return False


_TYPE_NAMES = {
    "float32": "FloatTensor", "float64": "DoubleTensor", "float16": "HalfTensor",
    "bfloat16": "BFloat16Tensor", "int64": "LongTensor", "int32": "IntTensor",
    "int16": "ShortTensor", "int8": "CharTensor", "uint8": "ByteTensor", "bool": "BoolTensor",
}


_LEGACY_DTYPES = {name: dt.as_dtype(dtype) for dtype, name in _TYPE_NAMES.items()}


class _LegacyTensorType(type):
    """The type of ``tp.FloatTensor`` and the other legacy constructors: calling one with
    data gives a tensor of its dtype, with sizes a zero-filled one; ``isinstance`` holds for
    host tensors of its dtype."""

    dtype: dt.DType

    def __instancecheck__(cls, obj: Any) -> builtins.bool:
        return isinstance(obj, Tensor) and obj.dtype is cls.dtype and obj.device.type == "cpu"

    def __call__(cls, *args: Any) -> Tensor:
        name = cls.__name__
        if not args:
            return _creation.zeros(0, dtype=cls.dtype)
        if builtins.all(isinstance(a, (builtins.int, np.integer)) and not isinstance(a, (builtins.bool, np.bool_))
                        for a in args) or (len(args) == 1 and isinstance(args[0], Size)):
            return _creation.zeros(*args, dtype=cls.dtype)
        if len(args) != 1:
            raise TypeError(f"{name}(): expected sizes (ints) or one sequence of data, got {len(args)} arguments")
        data = args[0]
        if isinstance(data, Tensor):
            if data.dtype is not cls.dtype:
                raise TypeError(f"{name}(): expected a {cls.dtype.name} tensor, got {data.dtype.name}; "
                                f"use .to(tp.{cls.dtype.name})")
            return data
        if not isinstance(data, (list, tuple, np.ndarray)):
            raise TypeError(f"{name}(): data must be a sequence, got {type(data).__name__}")
        return _creation.tensor(data, dtype=cls.dtype)


def _legacy_type(name: str) -> _LegacyTensorType:
    return _LegacyTensorType(name, (), {"dtype": _LEGACY_DTYPES[name], "__module__": "tensorplay",
                                        "__doc__": f"The legacy constructor of {_LEGACY_DTYPES[name].name} "
                                                   f"tensors: ``{name}(data)`` or ``{name}(*sizes)``."})


FloatTensor = _legacy_type("FloatTensor")
DoubleTensor = _legacy_type("DoubleTensor")
HalfTensor = _legacy_type("HalfTensor")
BFloat16Tensor = _legacy_type("BFloat16Tensor")
LongTensor = _legacy_type("LongTensor")
IntTensor = _legacy_type("IntTensor")
ShortTensor = _legacy_type("ShortTensor")
CharTensor = _legacy_type("CharTensor")
ByteTensor = _legacy_type("ByteTensor")
BoolTensor = _legacy_type("BoolTensor")


# The methods that are a frontend function with the tensor first (``Tensor.add``) and their
# in-place forms (``Tensor.add_``) are set by the ``@public(method=True, inplace=...)``
# declarations of tensorplay/ops when those modules are imported below.


def _view(self: Tensor, *shape: Any) -> Tensor:
    if len(shape) == 1 and not isinstance(shape[0], (int, np.integer)) and _is_dtype_like(shape[0]):
        raise TypeError("view(dtype) reinterpretation is not supported; use .to(dtype)")
    out = _shape.reshape(self, *shape)
    if type(self._data) is np.ndarray and self._capture is None and self._sym is None and \
            out is not self and out._base_t is None and self.numel() > 1:
        raise RuntimeError("view size is not compatible with input tensor's size and stride (at least one "
                           "dimension spans across two contiguous subspaces). Use .reshape(...) instead.")
    return out


def _expand(self: Tensor, *sizes: Any) -> Tensor:
    return _shape.expand(self, *sizes)


def _where(self: Tensor, condition: Any, other: Any) -> Tensor:
    """``self`` where ``condition`` holds, else ``other`` (the condition comes first in
    ``tp.where``)."""
    return _elementwise.where(condition, self, other)


def _is_dtype_like(value: Any) -> builtins.bool:
    return isinstance(value, dt.DType) or _is_dtype_name(value)


Tensor.view = _view
Tensor.expand = _expand
Tensor.where = _where

# Imported last: these modules import Tensor from here.
from .ops import creation as _creation  # noqa: E402
from .ops import counting as _counting  # noqa: E402
from .ops import elementwise as _elementwise  # noqa: E402
from .ops import indexing as _indexing  # noqa: E402
from .ops import linalg as _linalg  # noqa: E402
from .ops import random as _random  # noqa: E402
from .ops import reduction as _reduction  # noqa: E402
from .ops import shape as _shape  # noqa: E402
from .ops import sorting as _sorting  # noqa: E402
