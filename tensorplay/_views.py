"""Tensors that share storage: views, ``detach()`` and ``.data`` (PyTorch's aliasing rules).

Every tensor over another tensor's memory is an *alias* of that memory's root tensor:

- ``_root``: the tensor that owns the storage (a view of a view points at the first one's root);
- ``_steps``: the view ops that make the alias from the root, each ``(op name, attrs)`` of a tp
  view op (``tp.reshape``, ``tp.permute``, ``tp.slice``, ``tp.broadcast_to``): empty for
  ``detach()`` and ``.data``;
- ``_base_t``: PyTorch's ``_base`` (set for views only), ``_nb`` the number of trailing steps
  that make the view from it;
- ``_st``: the storage's write counter, one cell shared by the root and all its aliases;
- ``_vc``: PyTorch's version counter, shared by a base, its views and ``detach()`` (not by
  ``.data``).

On the host an alias is a numpy view of its root's array, so a write through any of them is
seen by all (:func:`write` copies into the memory). Device arrays are immutable IREE buffers
and captured tensors are graph values, so there an alias is *functional*: a write through it
computes the root's new value (the inverse of the view steps: ``tp.slice_update``, the inverse
permutation and reshape) and every other alias recomputes its value from the root when it is
next used (:func:`sync`, called by ``_dispatch.apply`` and by everything that reads a tensor's
data). Autograd follows PyTorch: an in-place op on a view rebases its base's history onto the
update, and views take a new ``grad_fn`` from their base when its version moved.
"""

from __future__ import annotations

import itertools
import weakref
from typing import Any

import numpy as np

from ._grad_mode import is_grad_enabled, no_grad
from .runtime.storage import DeviceArray, is_shared, note_host_write

__all__ = [
    # the storage interface: how every module outside the tensor core reads and replaces memory
    "has_memory", "held", "is_device", "array", "host_array", "device_array", "replace_array", "take_memory", "settle",
    "take_over", "hand_back", "version", "base", "root", "is_alias", "view_steps", "made_in", "mark_multi_view",
    "note_write",
    # the aliasing machinery the tensor core (Tensor, _dispatch) uses
    "VIEW_OPS", "STORAGE_FIELDS", "Storage", "made", "sync", "write", "alias", "adopt", "forget", "shared",
    "rematerialize", "check_pending", "layout", "OVERLAP"]

#: the tp ops whose result may share its operand's storage
VIEW_OPS = frozenset({"tp.reshape", "tp.permute", "tp.slice", "tp.broadcast_to"})

OVERLAP = ("unsupported operation: more than one element of the written-to tensor refers to a single memory "
           "location. Please clone() the tensor before performing the operation.")

_NOGRAD_VIEW = ("A view was created in no_grad mode and is being modified inplace with grad mode enabled. Given "
                "that this use case is ambiguous and error-prone, it is forbidden. You can clarify your code by "
                "moving both the view and the inplace either both inside the no_grad block (if you don't want "
                "the inplace to be tracked) or both outside (if you want the inplace to be tracked).")


class Storage:
    """What a root tensor and its aliases share: the count of writes to the memory, and the
    aliases alive (while none is, the root may take a new array instead of being written)."""

    __slots__ = ("writes", "aliases", "pending")

    def __init__(self) -> None:
        self.writes = 0
        self.aliases: weakref.WeakSet = weakref.WeakSet()
        #: the capture that wrote an alias made outside it (a weak reference), until it reads
        #: the root (which then breaks its graph: see :func:`check_pending`)
        self.pending: Any = None


def _storage(t: Any) -> Storage:
    st = t._st
    if st is None:
        st = t._st = Storage()
    return st


def shared(t: Any) -> bool:
    """Whether another live tensor aliases ``t``'s memory."""
    if t._root is not None:
        return True
    st = t._st
    return st is not None and len(st.aliases) > 0


def _counter(t: Any) -> list:
    vc = t._vc
    if vc is None:
        vc = t._vc = [0]
    return vc


def _host(t: Any) -> bool:
    """Whether ``t`` is an eager host tensor (its memory is a numpy array it reads directly)."""
    return type(t._data) is np.ndarray and t._capture is None


#: what ties a tensor to a storage it shares (the version counter ``_vc`` aside)
STORAGE_FIELDS = ("_root", "_steps", "_base_t", "_nb", "_st", "_seen", "_gfseen", "_nograd_view", "_multi_view",
                  "_made_by")


def _join(src: Any, out: Any, steps: tuple) -> Any:
    """Make ``out`` an alias of ``src``'s storage, made from its root by ``steps``; returns
    the root."""
    root = src._root if src._root is not None else src
    out._root = root
    out._steps = steps
    st = _storage(root)
    src._st = st
    out._st = st
    st.aliases.add(out)
    out._seen = st.writes
    handler = _capturing()
    if handler is not None:
        out._made_by = _serial(handler)
    return root


def alias(t: Any, out: Any, *, shares_version: bool) -> Any:
    """Make ``out`` (a tensor over ``t``'s data: ``detach()``, ``.data``) an alias of ``t``'s
    storage that is not a view."""
    _join(t, out, t._steps)
    out._vc = _counter(t) if shares_version else [0]
    return out


def made(src: Any, out: Any, name: str, attrs: dict) -> None:
    """``out`` is the result of view op ``name`` applied to ``src``: record it as a view of
    ``src``'s storage when it is one (a reshape that had to copy is not)."""
    if name == "as_strided":  # addresses the root's storage: the step replaces the chain
        _record(src, out, ((name, attrs),))
        return
    if type(out._data) is np.ndarray and type(src._data) is np.ndarray:
        if out._data.size and not np.may_share_memory(out._data, src._data):
            return  # numpy copied (a reshape of a non-contiguous array): a new tensor
    elif name == "tp.reshape" and not _reshape_is_view(src, tuple(out.shape)):
        return
    _record(src, out, src._steps + ((name, attrs),))


def _record(src: Any, out: Any, steps: tuple) -> None:
    root = _join(src, out, steps)
    if src._base_t is not None:
        out._base_t, out._nb = src._base_t, min(src._nb + 1, len(steps))
    else:
        out._base_t, out._nb = src, 1
    vc = out._vc = _counter(src)
    out._gfseen = vc[0]
    if root._requires_grad and not is_grad_enabled():
        out._nograd_view = True


def _contiguous_strides(shape: tuple) -> list[int]:
    strides, acc = [], 1
    for d in reversed(shape):
        strides.append(acc)
        acc *= max(d, 1) if type(d) is int else d  # (a run-time size is not compared: no guard)
    return strides[::-1]


def layout(t: Any) -> tuple[tuple[int, ...], int]:
    """``t``'s strides and storage offset in elements, as PyTorch would have them: an alias's
    follow from its root's by PyTorch's rules for each view step (numpy's differ for dims of
    size 0 and 1, where any stride addresses the same elements)."""
    root = t._root
    if root is None:
        return _own_strides(t), 0
    shape, strides, offset = tuple(root.shape), list(_own_strides(root)), 0
    for name, attrs in t._steps:
        shape, strides, offset = _step_layout(name, attrs, shape, strides, offset)
    return tuple(strides), offset


def _own_strides(t: Any) -> tuple[int, ...]:
    data = t._data
    shape = tuple(t.shape)
    if type(data) is np.ndarray and t._capture is None and data.size:
        item = data.itemsize or 1
        return tuple(c if type(n) is int and n == 1 else s // item
                     for s, n, c in zip(data.strides, shape, _contiguous_strides(shape)))
    return tuple(_contiguous_strides(shape))


def _step_layout(name: str, attrs: dict, shape: tuple, strides: list, offset: int):
    if name == "as_strided":
        return tuple(attrs["size"]), list(attrs["stride"]), attrs["offset"]
    if name == "tp.permute":
        dims = attrs["dims"]
        return tuple(shape[d] for d in dims), [strides[d] for d in dims], offset
    if name == "tp.broadcast_to":
        target = tuple(attrs["shape"])
        lead = len(target) - len(shape)
        new_strides = [0] * lead
        new_shape = list(target[:lead])
        for i, (s, st) in enumerate(zip(shape, strides)):
            want = target[lead + i]
            if want == -1 or want == s:
                new_shape.append(s)
                new_strides.append(st)
            else:
                new_shape.append(want)
                new_strides.append(0)
        return tuple(new_shape), new_strides, offset
    if name == "tp.slice":
        new_shape, new_strides = [], []
        for d, (s, st) in enumerate(zip(shape, strides)):
            start, end, step = attrs["starts"][d], attrs["ends"][d], attrs["steps"][d]
            start, end, _ = slice(start, end, step).indices(s)
            n = max(0, -(-(end - start) // step))
            offset += start * st
            new_shape.append(n)
            new_strides.append(st * step)
        return tuple(new_shape), new_strides, offset
    # tp.reshape
    target = list(attrs["shape"])
    if -1 in target:
        known = 1
        for d in target:
            if d != -1:
                known *= d
        numel = 1
        for d in shape:
            numel *= d
        target[target.index(-1)] = numel // known if known else 0
    new_strides = view_strides(tuple(shape), list(strides), tuple(target))
    if new_strides is None:
        new_strides = _contiguous_strides(tuple(target))
    return tuple(target), new_strides, offset


def view_strides(sizes: tuple, strides: list, new_sizes: tuple) -> list | None:
    """The strides of ``new_sizes`` over the memory of a tensor with ``sizes`` and ``strides``
    when a reshape can view it, else None (the reshape copies)."""
    numel = 1
    for d in sizes:
        numel *= d
    if numel == 0 or not sizes:
        return _contiguous_strides(new_sizes)
    out = [0] * len(new_sizes)
    vd = len(new_sizes) - 1
    base = strides[-1]
    chunk = 1
    view_n = 1
    for td in range(len(sizes) - 1, -1, -1):
        chunk *= sizes[td]
        if td == 0 or (sizes[td - 1] != 1 and strides[td - 1] != chunk * base):
            while vd >= 0 and (view_n < chunk or new_sizes[vd] == 1):
                out[vd] = view_n * base
                view_n *= new_sizes[vd]
                vd -= 1
            if view_n != chunk:
                return None
            if td > 0:
                base = strides[td - 1]
                chunk = 1
                view_n = 1
    return out if vd == -1 else None


def _reshape_is_view(src: Any, new_shape: tuple) -> bool:
    """Whether a reshape of a functional (device or captured) tensor is a view in PyTorch."""
    shape = tuple(src.shape)
    if all(type(d) is int for d in shape) and all(type(d) is int for d in new_shape):
        try:
            strides, _ = layout(src)
            return view_strides(shape, list(strides), tuple(new_shape)) is not None
        except TypeError:  # its root's sizes are known only at run time
            pass
    # sizes known only at run time: a view of a contiguous tensor, or one that only adds or
    # drops dims of size 1 (squeeze, unsqueeze, select)
    if not src._steps:
        return True
    from .dialects.tp import symbolic as sym

    kept = [d for d in shape if not (type(d) is int and d == 1)]
    target = [d for d in new_shape if not (type(d) is int and d == 1)]
    return len(kept) == len(target) and all(a is b or sym.known_eq(a, b) for a, b in zip(kept, target))


# --- reading and writing through aliases ----------------------------------------------------------

_serials: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_next_serial = itertools.count(1)


def _serial(handler: Any) -> int:
    """A number of ``handler`` (a capture) no other capture has had."""
    n = _serials.get(handler)
    if n is None:
        n = _serials[handler] = next(_next_serial)
    return n


def _capturing() -> Any:
    from ._dispatch import current_handler

    return current_handler()


def check_pending(t: Any) -> None:
    """``t``'s storage was written through an alias made outside the running capture: the
    graph's value of ``t`` is the one from before, so the capture breaks its graph here (the
    write reaches ``t``'s memory when the part before runs)."""
    st = t._st
    handler = _capturing()
    if handler is None or st.pending() is not handler:
        return
    st.pending = None
    from ._capture_hooks import active_handler

    hooks = active_handler()  # (the handler above, where it declares the interface)
    if not hooks.captures_program:
        raise RuntimeError("a tensor read after a write through a view of it made outside the capture")
    hooks.graph_break("a tensor is read after a write through a view of it that was made outside the compiled "
                      "function")


def _functional(t: Any) -> bool:
    data = t._data
    return data is None or type(data) is DeviceArray or t._capture is not None or _capturing() is not None


def replay(root: Any, steps: tuple) -> Any:
    """The alias that ``steps`` make of ``root``'s current value (tp ops: captured or
    differentiated like any other)."""
    from ._dispatch import apply

    x = root
    for name, attrs in steps:
        x = _strided_take(x, attrs) if name == "as_strided" else apply(name, x, **attrs)
    return x


def strided_index(attrs: dict) -> np.ndarray:
    """The storage positions of the elements of an ``as_strided`` view (its shape)."""
    idx = np.full(tuple(attrs["size"]), attrs["offset"], dtype=np.int64)
    for d, (n, st) in enumerate(zip(attrs["size"], attrs["stride"])):
        shape = [1] * len(attrs["size"])
        shape[d] = n
        idx = idx + (np.arange(n, dtype=np.int64) * st).reshape(shape)
    return idx


def _strided_take(root: Any, attrs: dict) -> Any:
    from ._dispatch import apply
    from ._tensor import Tensor

    flat = apply("tp.reshape", root, shape=(-1,))
    idx = Tensor._wrap(strided_index(attrs))
    if type(root._data) is DeviceArray:
        idx = idx.to(root.device)
    return apply("tp.index", flat, idx, dims=(0,))


def _strided_put(parent: Any, value: Any, attrs: dict) -> Any:
    from ._dispatch import apply
    from ._tensor import Tensor

    idx = strided_index(attrs)
    if np.unique(idx).size != idx.size:
        raise RuntimeError(OVERLAP)
    flat = apply("tp.reshape", parent, shape=(-1,))
    it = Tensor._wrap(idx.reshape(-1))
    if type(parent._data) is DeviceArray:
        it = it.to(parent.device)
    new = apply("tp.index_put", flat, apply("tp.reshape", value, shape=(-1,)), it, dims=(0,), accumulate=False)
    return apply("tp.reshape", new, shape=tuple(-1 if d is None else d for d in parent.shape))


def _put(root: Any, steps: tuple, value: Any) -> Any:
    """``root``'s value with the alias that ``steps`` make of it replaced by ``value``."""
    from ._dispatch import apply

    parents = [root]
    for name, attrs in steps[:-1]:
        parents.append(_strided_take(parents[-1], attrs) if name == "as_strided" else
                       apply(name, parents[-1], **attrs))
    v = value
    for (name, attrs), parent in zip(reversed(steps), reversed(parents)):
        if name == "as_strided":
            v = _strided_put(parent, v, attrs)
        elif name == "tp.slice":
            v = apply("tp.slice_update", parent, v, **attrs)
        elif name == "tp.permute":
            dims = attrs["dims"]
            v = apply("tp.permute", v, dims=tuple(int(i) for i in np.argsort(dims)))
        elif name == "tp.broadcast_to":
            from .dialects.tp import symbolic as sym

            if len(v.shape) != len(parent.shape) or not all(
                    a is b or sym.known_eq(a, b) for a, b in zip(v.shape, parent.shape)):
                raise RuntimeError(OVERLAP)
        else:
            v = apply("tp.reshape", v, shape=tuple(-1 if d is None else d for d in parent.shape))
    return v


def host_strided(array: np.ndarray, attrs: dict) -> np.ndarray:
    """The numpy view of root ``array``'s memory that an ``as_strided`` step makes (written
    only where no two elements share memory)."""
    flat = array.reshape(-1)
    item = array.itemsize
    out = np.lib.stride_tricks.as_strided(flat[attrs["offset"]:], shape=tuple(attrs["size"]),
                                          strides=tuple(st * item for st in attrs["stride"]),
                                          writeable=array.flags.writeable)
    if out.flags.writeable and out.size > 1:
        idx = strided_index(attrs)
        if np.unique(idx).size != idx.size:
            out.flags.writeable = False  # (a write raises PyTorch's overlap error)
    return out


def _take_value(t: Any, fresh: Any) -> None:
    """``t`` (a functional alias) now has ``fresh``'s value."""
    if fresh._data is not None and t._data is not None and fresh._capture is None and t._capture is None:
        t._data = fresh._data
    else:
        from ._capture_hooks import rebind

        rebind(t, fresh)


def sync(t: Any) -> None:
    """Bring alias ``t`` up to date with its root: a functional alias recomputes its value after
    a write to the storage; a view of a base that requires grad takes its new history."""
    root = t._root
    st = root._st
    stale = st is not None and t._seen != st.writes
    regrad = (t._base_t is not None and t._vc is not None and t._gfseen != t._vc[0] and
              root._requires_grad and is_grad_enabled())
    if not stale and not regrad:
        return
    if stale and _functional(t):
        with no_grad():
            fresh = replay(root, t._steps)
        _take_value(t, fresh)
    if st is not None:
        t._seen = st.writes
    if regrad:
        _regrad(t)


def _regrad(t: Any) -> None:
    base = t._base_t
    steps = t._steps[len(t._steps) - t._nb:]
    r = replay(base, steps)
    if r._grad_fn is not None:
        t._grad_fn, t._output_nr, t._requires_grad = r._grad_fn, r._output_nr, True
    t._gfseen = t._vc[0]


def write(t: Any, value: Any, track: bool) -> None:
    """Write ``value`` (a tensor of ``t``'s shape and dtype) into ``t`` in place: seen by every
    alias of ``t``'s storage; recorded by autograd if ``track``."""
    root = t._root
    is_view = t._base_t is not None
    grad = track and is_grad_enabled()
    if grad and t._nograd_view:
        raise RuntimeError(_NOGRAD_VIEW)
    differentiable = grad and is_view and (value._requires_grad or t._base_t._requires_grad)
    if root is not None:
        sync(t)
    handler = _capturing()
    outside = root is not None and handler is not None and t._made_by != _serial(handler)
    if outside:
        # an alias made before the capture (an argument that is a view): the graph writes it
        # alone, and the call writes its new value back into its memory, which the root
        # shares; the graph must not bind the root (the next call's argument may view
        # another tensor). A read of the root later in this capture breaks the graph first.
        differentiable = False
        _storage(root).pending = weakref.ref(handler)
    vnode = value._grad_fn if track else None
    if vnode is not None:  # the op that made the value saved this tensor as it was: keep that
        vnode._rebased(t, _host(t) and t._data is not value._data)
    new_base = None
    if differentiable:  # the base's new value, as an op autograd (and a capture) records
        base = t._base_t
        new_base = _put(base, t._steps[len(t._steps) - t._nb:], value)
    if _host(t) and _host(value):
        _write_host(t, value)
    elif outside:
        _take_value(t, value)
    elif root is not None:  # a functional alias: the root takes the update, the others follow
        if new_base is not None and t._nb == len(t._steps) and t._base_t is root:
            new_root = new_base
        else:
            with no_grad():
                new_root = _put(root, t._steps, value)
        _take_value(root, new_root)
        _take_value(t, value)
    else:
        _rebind_or_copy(t, value)
    st = t._st
    if st is not None:
        st.writes += 1
        t._seen = st.writes
    if not track:
        return
    vc = _counter(t)
    vc[0] += 1
    if differentiable:
        base = t._base_t
        node = new_base._grad_fn
        if node is not None:
            node._rebased(base)
            base._grad_fn, base._output_nr, base._requires_grad = node, new_base._output_nr, True
        _regrad(t)
    elif grad:
        node = value._grad_fn
        if node is not None:  # this tensor now is that result
            t._grad_fn, t._output_nr, t._requires_grad = node, value._output_nr, True
        if is_view:
            t._gfseen = vc[0]


def _write_host(t: Any, value: Any) -> None:
    array = t._data
    new = value._data
    if not shared(t) and array.flags.writeable and not is_shared(array) and value._root is None \
            and new.flags.writeable and not is_shared(new):
        # memory no other tensor or array sees: take the value's array (no copy)
        t._data = new
        return
    if not array.flags.writeable:
        if any(s == 0 and n > 1 for s, n in zip(array.strides, array.shape)) or any(
                name == "as_strided" for name, _ in t._steps):
            raise RuntimeError(OVERLAP)
        raise RuntimeError("the tensor being written in place wraps read-only memory (a read-only numpy "
                           "array given to tensorplay.from_numpy or tensorplay.as_tensor); copy it first "
                           "with .clone()")
    np.copyto(array, value._data)
    note_host_write(array)


def _rebind_or_copy(t: Any, value: Any) -> None:
    if value._data is not None and t._data is not None and value._capture is None:
        t._data = value._data
    else:
        from ._capture_hooks import rebind

        rebind(t, value)


def adopt(target: Any, data: Any) -> None:
    """``target`` (a new Parameter) takes ``data``'s memory, as ``nn.Parameter(data)`` shares
    it in PyTorch: when ``data`` has no aliases yet, it becomes an alias of ``target`` (so the
    parameter owns its storage once ``data`` is gone), else ``target`` joins its storage."""
    target._data = data._data
    target._type = data._type
    target._capture = data._capture
    if data._root is None and (data._st is None or not len(data._st.aliases)) and data._data is not None:
        st = Storage()
        target._st = st
        data._root, data._steps, data._st = target, (), st
        data._seen = 0
        st.aliases.add(data)
    elif data._data is not None:
        alias(data, target, shares_version=False)


def forget(t: Any) -> None:
    """``t`` takes a new storage of its own (``Module.to``): its old aliases keep the old one."""
    for field in STORAGE_FIELDS:
        t.__dict__.pop(field, None)


def replace_array(t: Any, array: Any) -> None:
    """Give ``t`` the contents ``array`` (a compiled call's new value of a tensor it updated):
    the array itself when nothing else sees ``t``'s memory, else copied into that memory."""
    old = t._data
    if t._root is not None and type(old) is DeviceArray:  # a functional alias: through its root
        from ._tensor import Tensor

        write(t, Tensor._wrap(array), False)
        return
    if type(old) is np.ndarray and type(array) is not DeviceArray and (shared(t) or is_shared(old)):
        if old is not array:
            np.copyto(old, np.asarray(array))
            note_host_write(old)
        st = t._st
        if st is not None:
            st.writes += 1
            t._seen = st.writes
        return
    t._data = array
    st = t._st
    if st is not None:
        st.writes += 1
        if t._root is None:
            t._seen = st.writes


def rematerialize(t: Any) -> None:
    """``t``, a captured alias made concrete (a graph break), becomes a numpy view of its
    root's memory again, so later eager writes through either are seen by both."""
    root = t._root
    if root is None or type(root._data) is not np.ndarray or type(t._data) is not np.ndarray:
        return
    from .dialects.tp import registry

    array = root._data
    try:
        for name, attrs in t._steps:
            attrs = {k: tuple(int(d) for d in v) if isinstance(v, tuple) else v for k, v in attrs.items()}
            array = (host_strided(array, attrs) if name == "as_strided" else
                     registry.lookup(name).reference([array], attrs))
    except (TypeError, ValueError):  # (sizes that have no value now)
        array = None
    if array is not None and array.shape == t._data.shape and (
            array.size == 0 or np.may_share_memory(array, root._data)):
        t._data = array
        t._seen = root._st.writes if root._st is not None else 0
    else:  # it cannot view the memory: a tensor of its own from now on
        forget(t)


# --- the storage interface ------------------------------------------------------------------------
#
# A tensor's memory is its ``_data`` field: a host numpy array, an IREE ``DeviceArray``, or None
# while a capture holds the tensor as a graph value. Only the tensor core (``_tensor``, this
# module, ``_dispatch``) touches the field; every other module reads and replaces memory through
# the functions below, so the aliasing rules above apply to every reader and writer.


def has_memory(t: Any) -> bool:
    """Whether ``t`` has memory now (False: a graph value of a running capture)."""
    return t._data is not None


def held(t: Any) -> Any:
    """The array ``t`` holds (host ``ndarray``, ``DeviceArray``, None for a graph value), as it
    is: for its kind, shape, dtype and identity. A functional alias may hold a value from before
    a write through another alias of its memory; :func:`array` brings it up to date."""
    return t._data


def is_device(t: Any) -> bool:
    """Whether ``t``'s memory is an IREE device buffer."""
    return type(t._data) is DeviceArray


def array(t: Any) -> Any:
    """``t``'s contents (host ``ndarray`` or ``DeviceArray``; None for a graph value), with every
    write through its aliases applied."""
    if t._root is not None:
        sync(t)
    return t._data


def host_array(t: Any) -> np.ndarray | None:
    """``t``'s contents when they live on the host (None for device tensors and graph values)."""
    data = array(t)
    return data if type(data) is np.ndarray else None


def device_array(t: Any) -> DeviceArray | None:
    """``t``'s contents when they live on a device (None for host tensors and graph values)."""
    data = array(t)
    return data if type(data) is DeviceArray else None


def take_memory(t: Any, source: Any) -> None:
    """``t`` leaves its storage (its aliases keep it) and takes ``source``'s memory, which may
    differ in dtype and device (``Module.to`` moving a parameter)."""
    forget(t)
    t._data = source._data
    t._type = source._type
    t._capture = source._capture


def settle(t: Any, new: Any) -> None:
    """``t``, a graph value of a capture that ended (or broke), is concrete again with the
    contents ``new`` (seen by its aliases, as :func:`replace_array`)."""
    replace_array(t, new)
    t._capture = None
    t._type = None


def take_over(t: Any, ttype: Any, ref: Any) -> None:
    """A capture holds ``t`` as a graph value (of type ``ttype``, described by ``ref``) for the
    capturing thread only; other threads still see its memory (:mod:`._thread_views`)."""
    from ._thread_views import open_view

    open_view(t, _data=None, _type=ttype, _capture=ref)


def hand_back(t: Any) -> None:
    """The capture that took ``t`` over lets it go: its memory is as it was (a new value comes
    with :func:`settle`)."""
    from ._thread_views import close_view

    close_view(t)


def version(t: Any) -> int:
    """PyTorch's version counter of ``t`` (in-place changes of it, its base and its views)."""
    vc = t._vc
    return 0 if vc is None else vc[0]


def base(t: Any) -> Any:
    """The tensor ``t`` is a view of (None when it is not a view)."""
    return t._base_t


def root(t: Any) -> Any:
    """The tensor that owns ``t``'s storage (``t`` itself unless it is an alias)."""
    r = t._root
    return t if r is None else r


def is_alias(t: Any) -> bool:
    """Whether ``t`` is over another tensor's storage (a view, ``detach()``, ``.data``)."""
    return t._root is not None


def view_steps(t: Any) -> tuple:
    """The view ops, ``(tp op name, attrs)``, that make alias ``t`` from its root."""
    return t._steps


def made_in(t: Any, capture: Any) -> bool:
    """Whether alias ``t`` was made while ``capture`` ran."""
    return t._made_by == _serial(capture)


def mark_multi_view(t: Any, index: int, node: str) -> None:
    """``t`` is output ``index`` of a view function returning several (``node``: its name),
    which PyTorch forbids modifying in place when it requires grad."""
    t._multi_view = (index, node)


def note_write(t: Any) -> None:
    """``t``'s host memory was written in place by code outside the tensor core (a collective
    receiving into it): every alias sees the new values, and the version moves as for ``copy_``."""
    st = t._st
    if st is not None:
        st.writes += 1
        t._seen = st.writes
    _counter(t)[0] += 1
