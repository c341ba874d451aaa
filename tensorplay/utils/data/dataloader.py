"""``DataLoader``: batches from a dataset, in the main process or in worker processes.

Worker processes start with the ``forkserver`` method by default (``spawn`` where the platform
has no ``forkserver``), from a server process that has imported tensorplay and never IREE. A
process forked from one whose IREE runtime is running holds copies of locks that the runtime's
threads may hold, and hangs the first time it runs a compiled function or touches a GPU
tensor; a worker started from the server can use everything. ``multiprocessing_context="fork"``
is accepted (faster to start, no pickling of the dataset) for workers that only run eager,
host code, and is the default while ``torch`` is resolved to tensorplay (``tensorplay.run``).
"""

from __future__ import annotations

import itertools
import os
import pickle
import queue
import sys
import time
import warnings
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from ...ops import random as _random
from .collate import default_collate, default_convert
from .dataset import Dataset, IterableDataset
from .sampler import (
    BatchSampler,
    RandomSampler,
    Sampler,
    SequentialSampler,
    _fresh_seed,
)
from .worker import (
    _CHECK_INTERVAL,
    _ExceptionWrapper,
    _fetcher,
    _IterableDatasetStopIteration,
    _ResumeIteration,
    _worker_loop,
)

if TYPE_CHECKING:
    import multiprocessing.context

__all__ = ["DataLoader"]

T_co = TypeVar("T_co", covariant=True)

# attributes a DataLoader fixes at construction
_FIXED = ("batch_size", "batch_sampler", "sampler", "drop_last", "dataset", "persistent_workers")


class _InfiniteConstantSampler(Sampler[None]):
    """The 'keys' of an iterable dataset: None, forever (the dataset decides when it ends)."""

    def __iter__(self):
        while True:
            yield None


def _default_context() -> multiprocessing.context.BaseContext:
    """``forkserver`` with tensorplay preloaded in the server, else ``spawn``; ``fork`` while
    ``torch`` is resolved to tensorplay (``tensorplay.run``), because a fresh process that
    imports the script again would resolve ``torch`` to PyTorch, or to nothing."""
    import multiprocessing

    alias = sys.modules.get("tensorplay._torch_alias")
    if alias is not None and alias.is_active() and "fork" in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("fork")
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    ctx = multiprocessing.get_context("forkserver")
    from multiprocessing import forkserver

    preload = list(getattr(forkserver._forkserver, "_preload_modules", ["__main__"]))
    if "tensorplay" not in preload:
        ctx.set_forkserver_preload(preload + ["tensorplay"])
    return ctx


def _max_workers() -> int | None:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count()


class DataLoader(Generic[T_co]):
    """Batches from ``dataset`` with PyTorch's ``DataLoader`` arguments and rules.

    - ``batch_size`` (default 1) samples per batch, collated by ``collate_fn``
      (``default_collate``); ``batch_size=None`` turns batching off (each sample goes through
      ``default_convert``); ``drop_last`` drops a last, shorter batch.
    - Order: ``shuffle=True`` (a ``RandomSampler`` drawing from ``generator``), a ``sampler``
      of keys, or a ``batch_sampler`` of lists of keys (then ``batch_size``, ``shuffle``,
      ``sampler`` and ``drop_last`` keep their defaults). An ``IterableDataset`` takes none of
      them.
    - ``num_workers > 0`` loads in that many worker processes, each with a copy of the
      dataset, ``prefetch_factor`` (default 2) batches ahead per worker, results in order
      (``in_order=False``: as they come). ``worker_init_fn(worker_id)`` runs first in each
      worker; ``get_worker_info()`` describes the worker; ``persistent_workers=True`` keeps
      the workers for the next epoch; ``timeout`` (seconds, 0 = wait forever) bounds the
      wait for one batch; ``multiprocessing_context`` picks the start method.
    - ``pin_memory`` and ``pin_memory_device`` are accepted and do nothing: batches are host
      tensors, and moving them to a device (``.to(device)``) uploads them.
    """

    dataset: Dataset[T_co]
    batch_size: int | None
    num_workers: int
    pin_memory: bool
    drop_last: bool
    timeout: float
    sampler: Sampler | Iterable
    prefetch_factor: int | None
    __initialized = False

    def __init__(self, dataset: Dataset[T_co], batch_size: int | None = 1, shuffle: bool | None = None,
                 sampler: Sampler | Iterable | None = None, batch_sampler: Sampler | Iterable | None = None,
                 num_workers: int = 0, collate_fn: Callable[[list], Any] | None = None, pin_memory: bool = False,
                 drop_last: bool = False, timeout: float = 0, worker_init_fn: Callable[[int], None] | None = None,
                 multiprocessing_context: Any = None, generator: _random.Generator | None = None, *,
                 prefetch_factor: int | None = None, persistent_workers: bool = False,
                 pin_memory_device: str = "", in_order: bool = True) -> None:
        if not isinstance(num_workers, int) or isinstance(num_workers, bool) or num_workers < 0:
            raise ValueError(f"DataLoader: num_workers option should be a non-negative int, got {num_workers!r}; "
                             f"use num_workers=0 to load in the main process")
        if timeout < 0:
            raise ValueError(f"DataLoader: timeout option should be non-negative, got {timeout!r}")
        if num_workers == 0 and prefetch_factor is not None:
            raise ValueError("DataLoader: prefetch_factor option could only be specified in multiprocessing: "
                             "let num_workers > 0 to enable multiprocessing, otherwise set prefetch_factor to None")
        if num_workers > 0 and prefetch_factor is None:
            prefetch_factor = 2
        if prefetch_factor is not None and (not isinstance(prefetch_factor, int) or prefetch_factor <= 0):
            raise ValueError(f"DataLoader: prefetch_factor option should be a positive int, got {prefetch_factor!r}")
        if persistent_workers and num_workers == 0:
            raise ValueError("DataLoader: persistent_workers option needs num_workers > 0")

        self.dataset = dataset
        self.num_workers = num_workers
        self.prefetch_factor = prefetch_factor
        self.pin_memory = pin_memory
        self.pin_memory_device = pin_memory_device
        self.timeout = timeout
        self.worker_init_fn = worker_init_fn
        self.multiprocessing_context = multiprocessing_context
        self.in_order = in_order

        if isinstance(dataset, IterableDataset):
            self._iterable = True
            if shuffle not in (False, None):
                raise ValueError(f"DataLoader with IterableDataset: expected unspecified shuffle option, but got "
                                 f"shuffle={shuffle}")
            if sampler is not None:
                raise ValueError(f"DataLoader with IterableDataset: expected unspecified sampler option, but got "
                                 f"sampler={sampler}")
            if batch_sampler is not None:
                raise ValueError(f"DataLoader with IterableDataset: expected unspecified batch_sampler option, but "
                                 f"got batch_sampler={batch_sampler}")
        else:
            self._iterable = False
            shuffle = bool(shuffle)

        if sampler is not None and shuffle:
            raise ValueError("DataLoader: sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError("DataLoader: batch_sampler option is mutually exclusive with batch_size, shuffle, "
                                 "sampler, and drop_last")
            batch_size = None
            drop_last = False
        elif batch_size is None and drop_last:
            raise ValueError("DataLoader: batch_size=None option disables auto-batching and is mutually exclusive "
                             "with drop_last")

        if sampler is None:
            if self._iterable:
                sampler = _InfiniteConstantSampler()
            elif shuffle:
                sampler = RandomSampler(dataset, generator=generator)  # type: ignore[arg-type]
            else:
                sampler = SequentialSampler(dataset)  # type: ignore[arg-type]
        if batch_size is not None and batch_sampler is None:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)

        self.batch_size = batch_size
        self.drop_last = drop_last
        self.sampler = sampler
        self.batch_sampler = batch_sampler
        self.generator = generator
        if collate_fn is None:
            collate_fn = default_collate if self._auto_collation else default_convert
        self.collate_fn = collate_fn
        self.persistent_workers = persistent_workers
        self.__initialized = True
        self._IterableDataset_len_called: int | None = None
        self._iterator: _MultiProcessingIter | None = None
        self._check_worker_number()

    @property
    def multiprocessing_context(self) -> multiprocessing.context.BaseContext | None:
        return self.__multiprocessing_context

    @multiprocessing_context.setter
    def multiprocessing_context(self, context: Any) -> None:
        if context is not None:
            import multiprocessing.context  # (imported when first needed)

            if self.num_workers == 0:
                raise ValueError(f"DataLoader: multiprocessing_context can only be used with multi-process loading "
                                 f"(num_workers > 0), but got num_workers={self.num_workers}")
            if isinstance(context, str):
                valid = multiprocessing.get_all_start_methods()
                if context not in valid:
                    raise ValueError(f"DataLoader: multiprocessing_context option should specify a valid start "
                                     f"method in {valid!r}, but got multiprocessing_context={context!r}")
                context = multiprocessing.get_context(context)
            if not isinstance(context, multiprocessing.context.BaseContext):
                raise TypeError(f"DataLoader: multiprocessing_context option should be a valid context object or a "
                                f"string specifying the start method, but got "
                                f"multiprocessing_context={context!r}")
        self.__multiprocessing_context = context

    def __setattr__(self, attr: str, val: Any) -> None:
        if self.__initialized and attr in _FIXED:
            raise ValueError(f"{attr} attribute should not be set after {self.__class__.__name__} is initialized")
        super().__setattr__(attr, val)

    @property
    def _auto_collation(self) -> bool:
        return self.batch_sampler is not None

    @property
    def _index_sampler(self) -> Any:
        return self.batch_sampler if self._auto_collation else self.sampler

    def __iter__(self) -> _BaseIter:
        if self.persistent_workers and self.num_workers > 0:
            if self._iterator is None or self._iterator._shutdown:  # (none yet, or stopped by an error)
                self._iterator = _MultiProcessingIter(self)
            else:
                self._iterator._reset(self)
            return self._iterator
        if self.num_workers == 0:
            return _SingleProcessIter(self)
        return _MultiProcessingIter(self)

    def __len__(self) -> int:
        if self._iterable:
            length = self._IterableDataset_len_called = len(self.dataset)  # type: ignore[arg-type]
            if self.batch_size is not None:
                length = length // self.batch_size if self.drop_last else -(-length // self.batch_size)
            return length
        return len(self._index_sampler)

    def _check_worker_number(self) -> None:
        most = _max_workers()
        if most is not None and self.num_workers > most:
            warnings.warn(f"DataLoader: num_workers={self.num_workers} is more than the {most} CPU cores this process "
                          f"may use, which can make loading slow or stall it; use num_workers <= {most}",
                          stacklevel=3)


class _BaseIter:
    def __init__(self, loader: DataLoader) -> None:
        self._dataset = loader.dataset
        self._iterable = loader._iterable
        self._auto_collation = loader._auto_collation
        self._drop_last = loader.drop_last
        self._index_sampler = loader._index_sampler
        self._collate_fn = loader.collate_fn
        self._num_workers = loader.num_workers
        self._timeout = loader.timeout
        self._base_seed = _fresh_seed(loader.generator)
        self._IterableDataset_len_called = loader._IterableDataset_len_called
        self._sampler_iter = iter(self._index_sampler)
        self._num_yielded = 0

    def __iter__(self) -> _BaseIter:
        return self

    def _reset(self, loader: DataLoader, first_iter: bool = False) -> None:
        self._sampler_iter = iter(self._index_sampler)
        self._num_yielded = 0
        self._IterableDataset_len_called = loader._IterableDataset_len_called

    def _next_index(self) -> Any:
        return next(self._sampler_iter)

    def __next__(self) -> Any:
        data = self._next_data()
        self._num_yielded += 1
        reported = self._IterableDataset_len_called
        if self._iterable and reported is not None and self._num_yielded > reported:
            warnings.warn(f"DataLoader: len() of the IterableDataset {self._dataset!r} was {reported} when len() of "
                          f"the DataLoader was taken, but {self._num_yielded} samples have been fetched; with "
                          f"num_workers > 0, each worker's copy should yield its own share of the samples",
                          stacklevel=2)
        return data

    def __len__(self) -> int:
        return len(self._index_sampler)


class _SingleProcessIter(_BaseIter):
    def __init__(self, loader: DataLoader) -> None:
        super().__init__(loader)
        self._fetcher = _fetcher(self._iterable, self._dataset, self._auto_collation, self._collate_fn,
                                 self._drop_last)

    def _next_data(self) -> Any:
        return self._fetcher.fetch(self._next_index())  # StopIteration ends the loop


class _MultiProcessingIter(_BaseIter):
    def __init__(self, loader: DataLoader) -> None:
        super().__init__(loader)
        self._shutdown = True  # (nothing to shut down until the queues exist)
        n = self._num_workers
        self._prefetch_factor = loader.prefetch_factor
        self._in_order = loader.in_order
        self._persistent = loader.persistent_workers
        context = loader.multiprocessing_context or _default_context()
        self._start_method = context.get_start_method()
        self._data_queue = context.Queue()
        self._done_event = context.Event()
        self._index_queues: list = []
        self._workers: list = []
        self._shutdown = False
        try:
            for worker_id in range(n):
                index_queue = context.Queue()
                index_queue.cancel_join_thread()
                worker = context.Process(
                    target=_worker_loop, daemon=True,
                    args=(self._iterable, self._dataset, index_queue, self._data_queue, self._done_event,
                          self._auto_collation, self._collate_fn, self._drop_last, self._base_seed,
                          loader.worker_init_fn, worker_id, n))
                self._index_queues.append(index_queue)
                try:
                    worker.start()
                except (pickle.PicklingError, AttributeError, TypeError) as e:
                    raise TypeError(
                        f"DataLoader: num_workers={n} starts worker processes with the {self._start_method!r} "
                        f"method, which sends each worker the dataset, collate_fn and worker_init_fn by pickling, "
                        f"and that failed: {e}. Define them at module level (not inside a function or as "
                        f"lambdas), or pass multiprocessing_context='fork' if the workers run only eager host code"
                    ) from e
                self._workers.append(worker)
        except BaseException:
            self._shutdown_workers()
            raise
        self._reset(loader, first_iter=True)

    def _reset(self, loader: DataLoader, first_iter: bool = False) -> None:
        super()._reset(loader, first_iter)
        n = self._num_workers
        self._send_idx = 0  # the next task to send
        self._rcvd_idx = 0  # the next task to return
        self._task_info: dict[int, tuple] = {}  # task -> (worker,) while pending, (worker, payload) once here
        self._tasks_outstanding = 0
        self._workers_status = [True] * n
        self._worker_cycle = itertools.cycle(range(n))
        if not first_iter:  # persistent workers: wait until each has finished the last epoch's tasks
            for index_queue in self._index_queues:
                index_queue.put(_ResumeIteration())
            waiting = n
            while waiting:
                task, _ = self._get_data()
                if isinstance(task, _ResumeIteration):
                    waiting -= 1
        for _ in range(self._prefetch_factor * n):
            self._try_put_index()

    def _try_put_index(self) -> None:
        if self._tasks_outstanding >= self._prefetch_factor * self._num_workers:
            return
        for _ in range(self._num_workers):
            worker_id = next(self._worker_cycle)
            if self._workers_status[worker_id]:
                break
        else:
            return  # every worker's iterable dataset is exhausted
        try:
            index = self._next_index()
        except StopIteration:
            return
        self._index_queues[worker_id].put((self._send_idx, index))
        self._task_info[self._send_idx] = (worker_id,)
        self._tasks_outstanding += 1
        self._send_idx += 1

    def _dead_workers(self) -> list:
        return [w for i, w in enumerate(self._workers) if self._workers_status[i] and not w.is_alive()]

    def _get_data(self) -> tuple:
        """The next message from any worker (a timeout, or a worker that died, raises)."""
        deadline = time.monotonic() + self._timeout if self._timeout > 0 else None
        while True:
            wait = _CHECK_INTERVAL if deadline is None else max(0.0, min(_CHECK_INTERVAL, deadline - time.monotonic()))
            try:
                return self._data_queue.get(timeout=wait)
            except queue.Empty:
                dead = self._dead_workers()
                if dead:
                    codes = ", ".join(f"pid {w.pid}: exit code {w.exitcode}" for w in dead)
                    self._shutdown_workers()
                    raise RuntimeError(
                        f"DataLoader worker ({codes}) exited unexpectedly. A worker that could not load the "
                        f"dataset or collate_fn (a class defined in an interactive session or a script's "
                        f"'__main__' the {self._start_method!r} start method cannot import) prints why on "
                        f"stderr; a negative exit code is the signal that ended it") from None
                if deadline is not None and time.monotonic() >= deadline:
                    raise RuntimeError(f"DataLoader timed out after {self._timeout} seconds") from None

    def _next_data(self) -> Any:
        if self._shutdown:  # after an error, or exhausted
            raise StopIteration
        while True:
            while self._rcvd_idx < self._send_idx:  # skip tasks an exhausted worker will not answer
                info = self._task_info.get(self._rcvd_idx)
                if info is not None:
                    if len(info) == 2 or self._workers_status[info[0]]:
                        break
                    del self._task_info[self._rcvd_idx]
                    self._tasks_outstanding -= 1
                self._rcvd_idx += 1
            else:
                if not self._persistent:
                    self._shutdown_workers()
                raise StopIteration
            info = self._task_info[self._rcvd_idx]
            if len(info) == 2:
                del self._task_info[self._rcvd_idx]
                self._rcvd_idx += 1
                return self._process(info[1])
            task, payload = self._get_data()
            if isinstance(task, _ResumeIteration):
                continue
            self._tasks_outstanding -= 1
            if isinstance(payload, _IterableDatasetStopIteration):
                self._task_info.pop(task, None)
                self._workers_status[payload.worker_id] = False
                if not self._persistent:
                    self._index_queues[payload.worker_id].put(None)  # it may exit now
                self._try_put_index()
                continue
            if task == self._rcvd_idx:
                del self._task_info[task]
                self._rcvd_idx += 1
                return self._process(payload)
            if not self._in_order:
                del self._task_info[task]
                return self._process(payload)
            self._task_info[task] += (payload,)

    def _process(self, payload: bytes) -> Any:
        self._try_put_index()
        data = pickle.loads(payload)
        if isinstance(data, _ExceptionWrapper):
            self._shutdown_workers()
            data.reraise()
        return data

    def _shutdown_workers(self) -> None:
        if getattr(self, "_shutdown", True):
            return
        self._shutdown = True
        try:
            self._done_event.set()
            for index_queue in self._index_queues:
                try:
                    index_queue.put(None)
                except (OSError, ValueError):
                    pass
            deadline = time.monotonic() + 5 * _CHECK_INTERVAL
            for w in self._workers:
                w.join(timeout=max(0.0, deadline - time.monotonic()))
            for w in self._workers:
                if w.is_alive():  # still busy in the dataset's code: stop it
                    w.terminate()
                    w.join()
            for q in (*self._index_queues, self._data_queue):
                q.cancel_join_thread()
                q.close()
        except Exception:  # noqa: BLE001, S110 - also runs from __del__ at interpreter exit, when modules go away
            pass

    def __del__(self) -> None:
        self._shutdown_workers()
