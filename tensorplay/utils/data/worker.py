"""What runs inside a ``DataLoader`` worker process, and ``get_worker_info``.

A worker receives ``(task, index)`` pairs on its own index queue, fetches and collates that
sample or batch, and sends ``(task, pickled result)`` back on the loader's shared result queue.
Results are pickled in the worker so that a result that cannot be sent becomes an error in the
main process instead of a lost message; tensors pickle as their numpy arrays.
"""

from __future__ import annotations

import pickle
import queue
import random
import sys
import traceback
from dataclasses import dataclass
from typing import Any

import numpy as np

from .dataset import _items

__all__ = ["WorkerInfo", "get_worker_info"]

# how often (seconds) a waiting worker checks that the main process is still there
_CHECK_INTERVAL = 1.0


class WorkerInfo:
    """What ``get_worker_info()`` returns inside a worker: ``id`` (``0 .. num_workers - 1``),
    ``num_workers``, ``seed`` (the seed this worker's ``random`` and ``tp`` generators were
    given) and ``dataset`` (this worker's own copy). Read-only."""

    __initialized = False

    def __init__(self, **kwargs: Any) -> None:
        for k, v in kwargs.items():
            setattr(self, k, v)
        self.__keys = tuple(kwargs)
        self.__initialized = True

    def __setattr__(self, key: str, val: Any) -> None:
        if self.__initialized:
            raise RuntimeError(f"Cannot assign attributes to {self.__class__.__name__} objects")
        super().__setattr__(key, val)

    def __repr__(self) -> str:
        items = ", ".join(f"{k}={getattr(self, k)!r}" for k in self.__keys)
        return f"{self.__class__.__name__}({items})"


_worker_info: WorkerInfo | None = None


def get_worker_info() -> WorkerInfo | None:
    """In a ``DataLoader`` worker process, this worker's ``WorkerInfo``; in the main process
    (including ``num_workers=0`` loading), None. An ``IterableDataset`` uses it to give each
    worker its own share of the samples, a ``worker_init_fn`` to configure the worker's copy
    of the dataset."""
    return _worker_info


class _KeyErrorMessage(str):
    """A KeyError message shown as written (KeyError prints the repr of its argument)."""

    def __repr__(self) -> str:
        return self


class _ExceptionWrapper:
    """An exception raised in a worker, carried to the main process as its type and the
    worker's traceback text."""

    def __init__(self, where: str) -> None:
        exc_type, exc, tb = sys.exc_info()
        self.exc_type = exc_type if _picklable(exc_type) else RuntimeError
        text = "".join(traceback.format_exception(exc_type, exc, tb))
        self.msg = f"Caught {exc_type.__name__} {where}.\nOriginal {text}"

    def reraise(self) -> None:
        msg: str = _KeyErrorMessage(self.msg) if self.exc_type is KeyError else self.msg
        try:
            exc = self.exc_type(msg)
        except Exception:  # noqa: BLE001 - a type that cannot be built from one message
            raise RuntimeError(msg) from None
        raise exc


def _picklable(obj: Any) -> bool:
    try:
        pickle.dumps(obj)
    except Exception:  # noqa: BLE001 - whatever pickling raises
        return False
    return True


@dataclass(frozen=True)
class _IterableDatasetStopIteration:
    """A worker's copy of an iterable dataset is exhausted."""

    worker_id: int


@dataclass(frozen=True)
class _ResumeIteration:
    """Persistent workers: start a new epoch (an iterable dataset is iterated afresh)."""


class _MapFetcher:
    def __init__(self, dataset: Any, auto_collation: bool, collate_fn: Any, drop_last: bool) -> None:
        self.dataset, self.auto_collation, self.collate_fn = dataset, auto_collation, collate_fn

    def fetch(self, index: Any) -> Any:
        data = _items(self.dataset, index) if self.auto_collation else self.dataset[index]
        return self.collate_fn(data)


class _IterableFetcher:
    def __init__(self, dataset: Any, auto_collation: bool, collate_fn: Any, drop_last: bool) -> None:
        self.auto_collation, self.collate_fn, self.drop_last = auto_collation, collate_fn, drop_last
        self.iterator = iter(dataset)
        self.ended = False

    def fetch(self, index: Any) -> Any:
        if self.ended:
            raise StopIteration
        if not self.auto_collation:
            return self.collate_fn(next(self.iterator))
        data = []
        for _ in index:
            try:
                data.append(next(self.iterator))
            except StopIteration:
                self.ended = True
                break
        if not data or (self.drop_last and len(data) < len(index)):
            raise StopIteration
        return self.collate_fn(data)


def _fetcher(iterable: bool, dataset: Any, auto_collation: bool, collate_fn: Any, drop_last: bool) -> Any:
    return (_IterableFetcher if iterable else _MapFetcher)(dataset, auto_collation, collate_fn, drop_last)


def _seed_worker(base_seed: int, worker_id: int) -> int:
    """Seed this process's generators for worker ``worker_id``: ``random`` and tensorplay's
    default generator with ``base_seed + worker_id``, numpy's legacy global generator with a
    state derived from both."""
    from ...ops.random import manual_seed

    seed = base_seed + worker_id
    random.seed(seed)
    manual_seed(seed)
    np.random.seed(np.random.SeedSequence([worker_id, base_seed]).generate_state(4))
    return seed


def _worker_loop(iterable: bool, dataset: Any, index_queue: Any, data_queue: Any, done_event: Any,
                 auto_collation: bool, collate_fn: Any, drop_last: bool, base_seed: int, init_fn: Any,
                 worker_id: int, num_workers: int) -> None:
    import multiprocessing

    global _worker_info
    where = f"in DataLoader worker process {worker_id}"
    try:
        seed = _seed_worker(base_seed, worker_id)
        _worker_info = WorkerInfo(id=worker_id, num_workers=num_workers, seed=seed, dataset=dataset)
        init_exception = None
        fetcher = None
        try:
            if init_fn is not None:
                init_fn(worker_id)
            fetcher = _fetcher(iterable, dataset, auto_collation, collate_fn, drop_last)
        except Exception:  # noqa: BLE001 - user code: reported in the main process
            init_exception = _ExceptionWrapper(where)
        iteration_end = False
        parent = multiprocessing.parent_process()
        while True:
            try:
                r = index_queue.get(timeout=_CHECK_INTERVAL)
            except queue.Empty:
                if done_event.is_set() or (parent is not None and not parent.is_alive()):
                    break
                continue
            if r is None:
                break
            if isinstance(r, _ResumeIteration):
                iteration_end = False
                if init_exception is None:
                    try:
                        fetcher = _fetcher(iterable, dataset, auto_collation, collate_fn, drop_last)
                    except Exception:  # noqa: BLE001 - user code: reported in the main process
                        init_exception = _ExceptionWrapper(where)
                data_queue.put((r, None))
                continue
            if done_event.is_set() or iteration_end:
                continue  # this epoch is over for this worker: wait for the next signal
            task, index = r
            if init_exception is not None:
                result: Any = init_exception
                init_exception = None
            else:
                try:
                    result = fetcher.fetch(index)
                except StopIteration:
                    if not iterable:
                        result = _ExceptionWrapper(where)
                    else:
                        iteration_end = True
                        data_queue.put((task, _IterableDatasetStopIteration(worker_id)))
                        continue
                except Exception:  # noqa: BLE001 - user code: reported in the main process
                    result = _ExceptionWrapper(where)
            try:
                payload = pickle.dumps(result, protocol=pickle.HIGHEST_PROTOCOL)
            except Exception:  # noqa: BLE001 - whatever pickling raises
                try:
                    raise TypeError(f"DataLoader: a result of worker {worker_id} cannot be sent to the main process "
                                    f"(it cannot be pickled)") from sys.exc_info()[1]
                except TypeError:
                    payload = pickle.dumps(_ExceptionWrapper(where))
            data_queue.put((task, payload))
            del result, payload
    except KeyboardInterrupt:
        pass  # the main process handles it
    if done_event.is_set():
        data_queue.cancel_join_thread()  # nobody reads what is still queued: do not wait to flush it
        data_queue.close()
