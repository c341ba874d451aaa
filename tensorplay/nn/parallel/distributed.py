"""``DistributedDataParallel``: one model replica per rank, gradients averaged during ``backward()``.

At construction the wrapper checks that every rank holds parameters of the same shapes, copies
rank 0's parameters and buffers to the others, and groups the parameters that require grad into
buckets (in reverse registration order, the order in which backward usually produces their
gradients; the first bucket 1 MiB, the others ``bucket_cap_mb``). A hook on each parameter
(``register_post_accumulate_grad_hook``) copies its gradient into its bucket; a full bucket
starts its all-reduce at once (non-blocking MPI, started in bucket order on every rank, so the
ranks' calls match) while the backward goes on. When the backward pass ends
(``autograd.engine.queue_callback``) the wrapper waits for the buckets and writes the averages
into the ``.grad`` tensors.

The gradient a hook copies is the parameter's whole ``.grad``, accumulated over every backward
since it was last cleared, so ``no_sync()`` accumulation followed by one synchronized backward
averages the summed gradients, as in PyTorch.
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Iterator
from typing import Any

import numpy as np

from ... import distributed as dist
from ..._grad_mode import no_grad
from ..._tensor import Tensor
from ...autograd import engine
from ...distributed import _api
from ...distributed._mpi import Work, mpi, reduce_dtype
from ...runtime.storage import aligned_copy
from ..modules.module import Module

__all__ = ["DistributedDataParallel"]

_FIRST_BUCKET_BYTES = 1024 * 1024


class _Bucket:
    """Parameters whose gradients are reduced together, and the flat buffer they meet in."""

    def __init__(self, index: int, params: list, dtype: np.dtype):
        self.index = index
        self.params = params
        self.sizes = [p.numel() for p in params]
        self.offsets = list(np.cumsum([0] + self.sizes[:-1]))
        self.dtype = dtype
        self.flat = aligned_copy(np.zeros(sum(self.sizes), dtype))
        self.ready = np.zeros(len(params), bool)
        self.used = np.zeros(len(params), np.uint8)  # which parameters got a gradient this pass
        self.work: Any = None

    def slot(self, k: int) -> np.ndarray:
        return self.flat[self.offsets[k]:self.offsets[k] + self.sizes[k]]


class DistributedDataParallel(Module):
    """Data parallelism across the ranks of a process group, with the signature of
    ``torch.nn.parallel.DistributedDataParallel``.

    Each rank runs the wrapped ``module`` on its part of the batch; ``backward()`` leaves
    every rank with the gradients averaged over all ranks, so equal optimizer steps keep the
    replicas equal. ``device_ids``, ``output_device`` and ``dim`` are accepted for PyTorch's
    sake (one device per process: the module's). ``static_graph`` changes nothing here (the
    buckets are always built in one fixed order)."""

    def __init__(self, module: Module, device_ids: Any = None, output_device: Any = None, dim: int = 0,
                 broadcast_buffers: bool = True, init_sync: bool = True, process_group: Any = None,
                 bucket_cap_mb: float | None = None, find_unused_parameters: bool = False,
                 check_reduction: bool = False, gradient_as_bucket_view: bool = False,
                 static_graph: bool = False, delay_all_reduce_named_params: Any = None,
                 param_to_hook_all_reduce: Any = None, mixed_precision: Any = None, device_mesh: Any = None):
        super().__init__()
        if not isinstance(module, Module):
            raise TypeError(f"DistributedDataParallel wraps a tensorplay.nn.Module, got {type(module).__name__}")
        if not dist.is_initialized():
            raise ValueError("DistributedDataParallel needs the default process group: call "
                             "tensorplay.distributed.init_process_group() first (and start the ranks with "
                             "python -m tensorplay.distributed.run)")
        for unsupported, name in ((delay_all_reduce_named_params, "delay_all_reduce_named_params"),
                                  (param_to_hook_all_reduce, "param_to_hook_all_reduce"),
                                  (mixed_precision, "mixed_precision"), (device_mesh, "device_mesh")):
            if unsupported is not None:
                raise ValueError(f"DistributedDataParallel({name}=...) is not supported by tensorplay "
                                 f"(docs/distributed.md lists the differences from torch)")
        self.module = module
        pg = _api._group(process_group)
        if pg is None:
            raise ValueError("DistributedDataParallel: this rank is not in process_group")
        object.__setattr__(self, "_pg", pg)
        self.process_group = pg
        self.device_ids = device_ids
        self.output_device = output_device
        self.dim = dim
        self.broadcast_buffers = broadcast_buffers
        self.find_unused_parameters = find_unused_parameters
        self.gradient_as_bucket_view = gradient_as_bucket_view
        self.static_graph = static_graph
        self.require_backward_grad_sync = True
        self.require_forward_param_sync = True
        self.bucket_bytes_cap = int((25 if bucket_cap_mb is None else bucket_cap_mb) * 1024 * 1024)
        named = []
        seen: set[int] = set()
        for name, p in module.named_parameters():
            if p.requires_grad and id(p) not in seen:
                seen.add(id(p))
                named.append((name, p))
        if not named:
            raise RuntimeError("DistributedDataParallel is not needed when a module doesn't have any parameter "
                               "that requires a gradient.")
        object.__setattr__(self, "_names", {id(p): name for name, p in named})
        self._verify_shapes(named)
        if init_sync:
            self._sync_states([p for _, p in module.named_parameters()] + [b for _, b in module.named_buffers()])
        object.__setattr__(self, "_buckets", self._make_buckets([p for _, p in named]))
        object.__setattr__(self, "_where", {id(p): (b, k) for b in self._buckets for k, p in enumerate(b.params)})
        object.__setattr__(self, "_in_backward", False)
        object.__setattr__(self, "_next", 0)
        me = weakref.ref(self)
        handles = []
        for _, p in named:
            handles.append(p.register_post_accumulate_grad_hook(
                lambda param, me=me: (lambda d: d is not None and d._grad_ready(param))(me())))
        object.__setattr__(self, "_handles", handles)

    # --- construction ----------------------------------------------------------------------------------------------

    def _verify_shapes(self, named: list) -> None:
        mine = [(name, tuple(p.shape), str(p.dtype)) for name, p in named]
        everyone = [None] * self._pg.size()
        _api.all_gather_object(everyone, mine, group=self._pg)
        for r, theirs in enumerate(everyone):
            if theirs != mine:
                diff = next(((a, b) for a, b in zip(mine, theirs) if a != b), None)
                detail = (f"this rank has {diff[0]}, rank {self._pg.ranks[r]} has {diff[1]}" if diff else
                          f"this rank has {len(mine)} parameters requiring grad, rank {self._pg.ranks[r]} "
                          f"{len(theirs)}")
                raise RuntimeError(f"DistributedDataParallel: the ranks' models differ ({detail}); every rank "
                                   f"must build the same model")

    def _sync_states(self, tensors: list) -> None:
        """Rank 0's values into every rank's ``tensors``, one broadcast per dtype."""
        if self._pg.size() == 1:
            return
        by_dtype: dict[str, list] = {}
        for t in tensors:
            by_dtype.setdefault(str(t.dtype), []).append(t)
        with no_grad():
            for group in by_dtype.values():
                flat = np.concatenate([np.ascontiguousarray(_api._values(t, "DistributedDataParallel")).reshape(-1)
                                       for t in group])
                holder = Tensor._wrap(flat)
                _api.broadcast(holder, src=self._pg.ranks[0], group=self._pg)
                start = 0
                for t in group:
                    n = t.numel()
                    _api.store(t, flat[start:start + n])
                    start += n

    def _make_buckets(self, params: list) -> list:
        buckets: list[_Bucket] = []
        current: dict[Any, list] = {}
        sizes: dict[Any, int] = {}
        for p in reversed(params):
            key = (str(p.dtype), str(p.device))
            dtype = reduce_dtype(np.dtype(p.dtype.np_dtype))
            cap = min(_FIRST_BUCKET_BYTES, self.bucket_bytes_cap) if not buckets else self.bucket_bytes_cap
            nbytes = p.numel() * dtype.itemsize
            if key in current and sizes[key] + nbytes > cap:
                buckets.append(_Bucket(len(buckets), current.pop(key), dtype))
                sizes[key] = 0
            current.setdefault(key, []).append(p)
            sizes[key] = sizes.get(key, 0) + nbytes
        for key, ps in current.items():
            buckets.append(_Bucket(len(buckets), ps, reduce_dtype(np.dtype(ps[0].dtype.np_dtype))))
        return buckets

    # --- the module -------------------------------------------------------------------------------------------------

    def forward(self, *inputs: Any, **kwargs: Any) -> Any:
        if self.broadcast_buffers and self.require_forward_param_sync and self._pg.size() > 1:
            buffers = [b for _, b in self.module.named_buffers()]
            if buffers:
                self._sync_states(buffers)
        return self.module(*inputs, **kwargs)

    @contextlib.contextmanager
    def no_sync(self) -> Iterator[None]:
        """Backward passes inside this block accumulate gradients locally, without communication;
        the first synchronized backward after it averages the accumulated gradients."""
        old = self.require_backward_grad_sync
        self.require_backward_grad_sync = False
        try:
            yield
        finally:
            self.require_backward_grad_sync = old

    def register_comm_hook(self, state: Any, hook: Any) -> None:
        raise NotImplementedError("torch.nn.parallel.DistributedDataParallel.register_comm_hook has no tensorplay "
                                  "counterpart: gradients are averaged by all-reduce (docs/distributed.md)")

    def join(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("torch.nn.parallel.DistributedDataParallel.join (uneven inputs) has no tensorplay "
                                  "counterpart: give every rank the same number of batches, e.g. with "
                                  "DistributedSampler (docs/distributed.md)")

    def __getstate__(self) -> dict:
        raise TypeError("DistributedDataParallel cannot be pickled or deep-copied (it holds an MPI communicator); "
                        "save model.module or its state_dict()")

    # --- the reducer ------------------------------------------------------------------------------------------------

    def _grad_ready(self, p: Tensor) -> None:
        if not self.require_backward_grad_sync:
            return
        # the first hook of a backward pass (or of one after a pass that failed before its end)
        if not self._in_backward or self._finish_backward not in engine._final_callbacks:
            self._reset()
            object.__setattr__(self, "_in_backward", True)
            engine.queue_callback(self._finish_backward)
        b, k = self._where[id(p)]
        grad = p.grad
        if grad is not None:
            np.copyto(b.slot(k), np.asarray(_api._values(grad, "DistributedDataParallel")).reshape(-1),
                      casting="unsafe")
            b.used[k] = 1
        else:
            b.slot(k)[...] = 0
        b.ready[k] = True
        if b.ready.all():
            self._launch()
        self._progress()

    def _reset(self) -> None:
        for b in self._buckets:
            b.ready[:] = False
            b.used[:] = 0
            b.work = None
        object.__setattr__(self, "_next", 0)

    def _launch(self) -> None:
        """Start the all-reduce of every full bucket whose predecessors have started (the same
        order on every rank)."""
        while self._next < len(self._buckets) and self._buckets[self._next].ready.all():
            b = self._buckets[self._next]
            if self._pg.size() > 1 and b.flat.size:
                b.work = self._pg.comm.Iallreduce(mpi().IN_PLACE, _api.mpi_buffer(b.flat), mpi().SUM)
            object.__setattr__(self, "_next", self._next + 1)

    def _progress(self) -> None:
        """Let MPI move the buckets in flight (its progress happens inside MPI calls)."""
        live = [b.work for b in self._buckets if b.work is not None]
        if live:
            mpi().Request.Testall(live)

    def _finish_backward(self) -> None:
        object.__setattr__(self, "_in_backward", False)
        missing = [(b, k) for b in self._buckets for k in range(len(b.params)) if not b.ready[k]]
        if missing and not self.find_unused_parameters:
            names = ", ".join(self._names[id(b.params[k])] for b, k in missing[:8])
            more = f" and {len(missing) - 8} more" if len(missing) > 8 else ""
            raise RuntimeError(f"DistributedDataParallel: parameters got no gradient in this backward pass ({names}"
                               f"{more}), so the ranks' gradient buckets cannot be reduced. Pass "
                               f"find_unused_parameters=True if the model does not use every parameter in every "
                               f"step, or make sure the loss depends on all of them")
        for b, k in missing:
            b.slot(k)[...] = 0
            b.ready[k] = True
        self._launch()
        used = np.concatenate([b.used for b in self._buckets])
        requests = [b.work for b in self._buckets if b.work is not None]
        if self.find_unused_parameters and self._pg.size() > 1:
            requests.append(self._pg.comm.Iallreduce(mpi().IN_PLACE, used, mpi().MAX))
        Work("DistributedDataParallel gradient all-reduce", requests, None, self._pg).wait()
        n = self._pg.size()
        start = 0
        for b in self._buckets:
            if n > 1:
                _api._divide(b.flat, n)
            for k, p in enumerate(b.params):
                if used[start + k]:
                    self._set_grad(p, b.slot(k).reshape(tuple(p.shape)))
            start += len(b.params)
            b.work = None

    def _set_grad(self, p: Tensor, avg: np.ndarray) -> None:
        g = p.grad
        if g is None:
            with no_grad():
                value = Tensor._wrap(aligned_copy(avg, p.dtype.np_dtype))
                p.grad = value if p.device.type == "cpu" else value.to(p.device)
            return
        _api.store(g, avg)

