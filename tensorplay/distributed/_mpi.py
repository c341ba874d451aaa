"""Collectives on numpy buffers over MPI (``mpi4py``): the engine under ``tensorplay.distributed``.

Every operation is started as a non-blocking MPI call and finished by :class:`Work`: ``wait()``
polls the requests until they complete or the process group's timeout passes, then runs the
operation's epilogue (copy a staged result back into its tensor, divide an average). A blocking
call is a started operation waited on at once, so a peer that never arrives (it died, or it
called something else) is a :class:`DistBackendError` after the timeout instead of a hang.

MPI itself is imported on first use: ``from mpi4py import MPI`` initializes MPI, which a
process that never asks for a process group must not pay for.
"""

from __future__ import annotations

import enum
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

__all__ = ["ReduceOp", "DistError", "DistBackendError", "Work", "mpi", "reduce_dtype", "byte_view"]

_MPI: Any = None


def mpi() -> Any:
    """The ``mpi4py.MPI`` module (initializes MPI on first use)."""
    global _MPI
    if _MPI is None:
        import mpi4py

        # one thread makes MPI calls at a time (the autograd hooks and the user's code run on
        # the thread that runs backward()); "serialized" keeps MPICH off its thread locks
        mpi4py.rc.thread_level = "serialized"
        from mpi4py import MPI

        _MPI = MPI
    return _MPI


class DistError(RuntimeError):
    """An error of the distributed package (``torch.distributed.DistError``)."""

    __module__ = "tensorplay.distributed"


class DistBackendError(DistError):
    """The communication backend failed or timed out (``torch.distributed.DistBackendError``)."""

    __module__ = "tensorplay.distributed"


class ReduceOp(enum.Enum):
    """How ``all_reduce``, ``reduce`` and ``reduce_scatter_tensor`` combine the ranks' values."""

    SUM = "sum"
    AVG = "avg"
    PRODUCT = "product"
    MIN = "min"
    MAX = "max"
    BAND = "band"
    BOR = "bor"
    BXOR = "bxor"

    def __repr__(self) -> str:
        return f"<ReduceOp.{self.name}>"


def _mpi_op(op: ReduceOp, dtype: np.dtype) -> Any:
    MPI = mpi()
    if dtype == np.bool_:  # logical forms, as PyTorch's bool reductions
        table = {ReduceOp.SUM: MPI.LOR, ReduceOp.MAX: MPI.LOR, ReduceOp.BOR: MPI.LOR,
                 ReduceOp.PRODUCT: MPI.LAND, ReduceOp.MIN: MPI.LAND, ReduceOp.BAND: MPI.LAND,
                 ReduceOp.BXOR: MPI.LXOR}
        if op not in table:
            raise TypeError(f"ReduceOp.{op.name} is not defined for bool tensors")
        return table[op]
    if op in (ReduceOp.BAND, ReduceOp.BOR, ReduceOp.BXOR) and dtype.kind not in "iu":
        raise TypeError(f"ReduceOp.{op.name} needs an integer or bool tensor, got {dtype}")
    if op in (ReduceOp.MIN, ReduceOp.MAX) and dtype.kind == "c":
        raise TypeError(f"ReduceOp.{op.name} is not defined for complex tensors")
    if op is ReduceOp.AVG and dtype.kind not in "fc":
        raise TypeError(f"ReduceOp.AVG needs a floating-point or complex tensor, got {dtype}; "
                        f"use ReduceOp.SUM and divide")
    return {ReduceOp.SUM: MPI.SUM, ReduceOp.AVG: MPI.SUM, ReduceOp.PRODUCT: MPI.PROD,
            ReduceOp.MIN: MPI.MIN, ReduceOp.MAX: MPI.MAX, ReduceOp.BAND: MPI.BAND,
            ReduceOp.BOR: MPI.BOR, ReduceOp.BXOR: MPI.BXOR}[op]


def reduce_dtype(dtype: np.dtype) -> np.dtype:
    """The dtype a reduction of ``dtype`` runs in: MPI has no 16-bit floats, so float16 and
    bfloat16 are reduced in float32 and rounded once at the end."""
    if dtype.kind == "V" or dtype == np.float16 or dtype.name == "bfloat16":
        return np.dtype(np.float32)
    return dtype


def byte_view(array: np.ndarray) -> np.ndarray:
    """A contiguous array's memory as flat bytes (what moves between ranks for every dtype)."""
    return array.reshape(-1).view(np.uint8)


def mpi_buffer(array: np.ndarray) -> np.ndarray:
    """``array`` (contiguous, of a reducible dtype) as an mpi4py buffer specification."""
    return array.reshape(-1)  # mpi4py takes the MPI datatype from the array's buffer format


class Work:
    """A started collective or point-to-point operation (``torch.distributed.Work``).

    ``wait()`` blocks until it is done (or raises :class:`DistBackendError` when the group's
    timeout passes first) and applies the result to the tensors; ``is_completed()`` asks
    without blocking."""

    def __init__(self, name: str, requests: Sequence[Any], finish: Callable[[], Any] | None,
                 group: Any):
        self._name = name
        self._requests = list(requests)
        self._finish = finish
        self._group = group
        self._done = False
        self._exception: BaseException | None = None
        self._result: Any = None
        self._started = time.monotonic()
        self.statuses = [mpi().Status() for _ in self._requests]  # the requests' (sender, size)

    def _complete(self) -> None:
        self._done = True
        self._requests = []
        if self._finish is not None:
            finish, self._finish = self._finish, None
            self._result = finish()

    def is_completed(self) -> bool:
        if not self._done and self._exception is None and mpi().Request.Testall(self._requests, self.statuses):
            self._complete()
        return self._done

    def is_success(self) -> bool:
        return self.is_completed() and self._exception is None

    def exception(self) -> BaseException | None:
        return self._exception

    def wait(self, timeout: Any = None) -> bool:
        if self._done:
            return True
        if self._exception is not None:
            raise self._exception
        limit = self._group.timeout_s if timeout is None else _seconds(timeout)
        Request = mpi().Request
        spins = 0
        while not Request.Testall(self._requests, self.statuses):
            waited = time.monotonic() - self._started
            if waited > limit:
                self._exception = DistBackendError(
                    f"{self._name} timed out after {waited:.1f} s (timeout {limit:g} s) on rank "
                    f"{self._group.global_rank} of {self._group.world_size}: another rank did not take "
                    f"part (it stopped, failed, or called a different collective). The process group "
                    f"is unusable now; pass a longer timeout= to init_process_group if that rank is "
                    f"only slow")
                self._group.broken = self._exception
                raise self._exception
            spins += 1
            if spins > 50:  # let the peer's process run on a machine with few cores
                time.sleep(min(1e-3, 1e-5 * (spins - 50)))
        self._complete()
        return True

    def result(self) -> Any:
        self.wait()
        return self._result

    def __repr__(self) -> str:
        return f"<Work {self._name} {'completed' if self._done else 'pending'}>"


def _seconds(timeout: Any) -> float:
    total = getattr(timeout, "total_seconds", None)
    value = float(total() if total is not None else timeout)
    if value <= 0:
        raise ValueError(f"timeout must be positive, got {timeout!r}")
    return value
