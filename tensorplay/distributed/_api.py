"""``tensorplay.distributed``'s process groups and collectives (``torch.distributed``'s names).

Tensors on the host take part with their own memory: a contiguous, writable tensor is the MPI
buffer itself (``all_reduce`` reduces in place, ``broadcast`` receives into it). Other tensors
(device tensors, non-contiguous views, the values of a compiled function's graph) are staged
through a host copy and written back with the usual in-place rules, so views of them see the
result. A collective on a tensor a compiled function is capturing needs its value: a graph
break there (``GraphCaptureError`` under ``fullgraph=True``).
"""

from __future__ import annotations

import datetime
import importlib.util
import os
import pickle
import warnings
import zlib
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .. import _views
from .._grad_mode import no_grad
from .._tensor import Tensor
from ..runtime.storage import note_host_write
from ._mpi import (DistBackendError, DistError, ReduceOp, Work, _seconds, byte_view, mpi, mpi_buffer,
                   reduce_dtype)
from ._mpi import _mpi_op

__all__ = [
    "Backend", "DistBackendError", "DistError", "GroupMember", "ProcessGroup", "ReduceOp", "Work",
    "all_to_all", "all_to_all_single", "all_gather", "all_gather_into_tensor", "all_gather_object", "all_reduce", "barrier", "broadcast",
    "broadcast_object_list", "destroy_process_group", "gather", "get_backend", "get_local_rank",
    "get_default_backend_for_device", "get_node_local_rank", "get_rank", "get_world_size", "group", "init_process_group", "irecv",
    "is_available", "is_initialized", "is_mpi_available", "is_nccl_available", "is_torchelastic_launched",
    "isend", "new_group", "recv", "reduce", "reduce_scatter", "reduce_scatter_tensor", "scatter", "send",
]

#: torch.distributed's default timeout for collectives
default_pg_timeout = datetime.timedelta(minutes=10)

_INSTALL = ('pip install "tensorplay[distributed]" (mpi4py and the mpich wheel), or mpi4py built '
            'against your cluster\'s MPI')


def is_available() -> bool:
    """Whether the distributed package can run here: ``mpi4py`` is installed (MPI is not
    initialized by asking)."""
    return importlib.util.find_spec("mpi4py") is not None


def is_mpi_available() -> bool:
    return is_available()


def is_nccl_available() -> bool:
    """NCCL collectives are not part of this build: device tensors are staged through host MPI
    (docs/distributed.md)."""
    return False


def is_torchelastic_launched() -> bool:
    """Whether this process was started by ``python -m tensorplay.distributed.run``."""
    return os.environ.get("TENSORPLAY_DISTRIBUTED_LAUNCHED") == "1"


class Backend(str):
    """Backend names as ``torch.distributed.Backend``: ``"mpi"``, and ``"gloo"`` / ``"nccl"``
    accepted as aliases of it (docs/distributed.md)."""

    MPI = "mpi"
    GLOO = "gloo"
    NCCL = "nccl"
    UNDEFINED = "undefined"

    def __new__(cls, name: str) -> Backend:
        return str.__new__(cls, name.lower())


class ProcessGroup:
    """A set of ranks that communicate: an MPI communicator, the global ranks in it, its
    timeout."""

    def __init__(self, comm: Any, ranks: Sequence[int], timeout_s: float, name: str, backend: str):
        self.comm = comm
        self.ranks = list(ranks)
        self._local = {g: i for i, g in enumerate(self.ranks)}
        self.timeout_s = timeout_s
        self.group_name = name
        self.backend = backend
        self.broken: BaseException | None = None
        self.global_rank = mpi().COMM_WORLD.Get_rank()
        self.world_size = mpi().COMM_WORLD.Get_size()

    def rank(self) -> int:
        return self.comm.Get_rank()

    def size(self) -> int:
        return self.comm.Get_size()

    def group_rank(self, global_rank: int, what: str) -> int:
        if global_rank not in self._local:
            raise ValueError(f"{what}: rank {global_rank} is not in the group (its global ranks are "
                             f"{self.ranks})")
        return self._local[global_rank]

    def __repr__(self) -> str:
        return f"<ProcessGroup {self.group_name!r} ranks={self.ranks} backend={self.backend}>"


class GroupMember:
    WORLD: ProcessGroup | None = None
    NON_GROUP_MEMBER = object()


class _Group:
    """``torch.distributed.group``: ``group.WORLD`` is the default process group."""

    @property
    def WORLD(self) -> ProcessGroup | None:  # noqa: N802
        return GroupMember.WORLD


group = _Group()

_local_rank: int = 0
_local_size: int = 1
_groups: list[ProcessGroup] = []
_check_calls = os.environ.get("TENSORPLAY_DISTRIBUTED_DEBUG", "").upper() != "OFF"


def _launcher_env(name: str, *fallbacks: str) -> int | None:
    for key in (name,) + fallbacks:
        value = os.environ.get(key)
        if value not in (None, ""):
            return int(value)
    return None


def init_process_group(backend: str | None = None, init_method: str | None = None, timeout: Any = None,
                       world_size: int = -1, rank: int = -1, store: Any = None, group_name: str = "",
                       pg_options: Any = None, device_id: Any = None) -> None:
    """Join the default process group: the ranks ``mpiexec`` (or ``python -m
    tensorplay.distributed.run``, Slurm's ``srun``) started. A process started alone is a group
    of one. ``world_size`` and ``rank``, when given, must agree with the launcher's."""
    global _local_rank, _local_size
    if GroupMember.WORLD is not None:
        raise ValueError("trying to initialize the default process group twice!")
    if not is_available():
        raise RuntimeError(f"tensorplay.distributed needs mpi4py and an MPI library: {_INSTALL}")
    name = _backend_name(backend)
    if init_method not in (None, "env://") and not str(init_method).startswith("mpi"):
        raise ValueError(f"init_method={init_method!r}: tensorplay's process groups meet through MPI; start "
                         f"the ranks with `python -m tensorplay.distributed.run` or mpiexec and leave "
                         f"init_method unset (or 'env://')")
    if store is not None:
        raise ValueError("store=: tensorplay's process groups meet through MPI and take no store")
    timeout_s = _seconds(timeout) if timeout is not None else default_pg_timeout.total_seconds()
    MPI = mpi()
    world = MPI.COMM_WORLD
    size, me = world.Get_size(), world.Get_rank()
    for given, actual, what in ((world_size, size, "world_size"), (rank, me, "rank")):
        if given not in (-1, None) and int(given) != actual:
            raise ValueError(f"init_process_group({what}={given}) but MPI started this process as {what} "
                             f"{actual}: leave {what} unset or launch {size if what == 'rank' else given} "
                             f"processes")
    env_rank = _launcher_env("RANK")
    if env_rank is not None and env_rank != me and os.environ.get("WORLD_SIZE") == str(size):
        raise ValueError(f"RANK={env_rank} in the environment but MPI numbers this process {me}")
    comm = world.Dup()
    GroupMember.WORLD = ProcessGroup(comm, range(size), timeout_s, group_name or "default_pg", name)
    _groups.append(GroupMember.WORLD)
    node = world.Split_type(MPI.COMM_TYPE_SHARED, key=me)
    _local_rank, _local_size = node.Get_rank(), node.Get_size()
    node.Free()
    if name == "nccl":
        warnings.warn("backend='nccl': this build has no NCCL collectives; tensors on CUDA devices are "
                      "staged through host memory over MPI (docs/distributed.md)", stacklevel=2)


def get_default_backend_for_device(device: Any) -> str:
    """PyTorch's default backend name for a device (``"gloo"`` on the CPU, ``"nccl"`` on CUDA);
    both run over MPI here."""
    kind = str(getattr(device, "type", device)).split(":")[0]
    return "nccl" if kind == "cuda" else "gloo"


def _backend_name(backend: str | None) -> str:
    if backend is None:
        return "mpi"
    text = str(backend).lower()
    names = {part.split(":")[-1] for part in text.split(",")}  # "cpu:gloo,cuda:nccl"
    unknown = names - {"mpi", "gloo", "nccl"}
    if unknown:
        raise ValueError(f"backend={backend!r}: unknown backend {sorted(unknown)[0]!r}; tensorplay has 'mpi' "
                         f"(also reached as 'gloo' and 'nccl')")
    return "nccl" if "nccl" in names else "mpi"


def is_initialized() -> bool:
    return GroupMember.WORLD is not None


def _world() -> ProcessGroup:
    pg = GroupMember.WORLD
    if pg is None:
        raise ValueError("Default process group has not been initialized, please make sure to call "
                         "tensorplay.distributed.init_process_group().")
    return pg


def _group(g: Any) -> ProcessGroup | None:
    """The group a call uses (None: this rank is not in it, and the call does nothing)."""
    world = _world()
    if g is None or g is GroupMember.WORLD:
        pg = world
    elif g is GroupMember.NON_GROUP_MEMBER:
        return None
    elif isinstance(g, ProcessGroup):
        pg = g
    else:
        raise TypeError(f"group must be a ProcessGroup made by new_group(), got {type(g).__name__}")
    if pg.comm is None:
        raise ValueError(f"{pg!r} was destroyed")
    if pg.broken is not None:
        raise DistBackendError(f"the process group is unusable after an earlier failure: {pg.broken}")
    return pg


def destroy_process_group(group: ProcessGroup | None = None) -> None:
    global _groups
    if group is None or group is GroupMember.WORLD:
        for pg in _groups:
            if pg.comm is not None:
                pg.comm.Free()
                pg.comm = None
        _groups = []
        GroupMember.WORLD = None
        return
    if group.comm is not None:
        group.comm.Free()
        group.comm = None
    _groups = [g for g in _groups if g is not group]


def get_backend(group: ProcessGroup | None = None) -> str:
    pg = _group(group)
    if pg is None:
        raise ValueError("Invalid process group specified")
    return pg.backend


def get_rank(group: ProcessGroup | None = None) -> int:
    """This process's rank in ``group`` (the default group when None); -1 outside it."""
    if group is GroupMember.NON_GROUP_MEMBER:
        return -1
    pg = _group(group)
    return -1 if pg is None else pg.rank()


def get_world_size(group: ProcessGroup | None = None) -> int:
    if group is GroupMember.NON_GROUP_MEMBER:
        return -1
    pg = _group(group)
    return -1 if pg is None else pg.size()


def get_local_rank() -> int:
    """This process's rank among the ranks on its machine (``LOCAL_RANK``)."""
    if GroupMember.WORLD is not None:
        return _local_rank
    value = _launcher_env("LOCAL_RANK", "MPI_LOCALRANKID", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID")
    return 0 if value is None else value


def get_node_local_rank(fallback_rank: int | None = None) -> int:
    value = _launcher_env("LOCAL_RANK", "MPI_LOCALRANKID", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID")
    if value is not None:
        return value
    if GroupMember.WORLD is not None:
        return _local_rank
    if fallback_rank is not None:
        return int(fallback_rank)
    raise RuntimeError("LOCAL_RANK is not in the environment: start the ranks with `python -m "
                       "tensorplay.distributed.run` or pass fallback_rank")


def new_group(ranks: Sequence[int] | None = None, timeout: Any = None, backend: str | None = None,
              pg_options: Any = None, use_local_synchronization: bool = False,
              group_desc: str | None = None) -> Any:
    """A group of the given global ranks (every rank of the default group must call this, as in
    PyTorch). Ranks outside it get ``GroupMember.NON_GROUP_MEMBER``."""
    world = _world()
    members = sorted(set(int(r) for r in (range(world.size()) if ranks is None else ranks)))
    for r in members:
        if not 0 <= r < world.size():
            raise ValueError(f"new_group: rank {r} is out of range for a world of size {world.size()}")
    timeout_s = world.timeout_s if timeout is None else _seconds(timeout)
    mpi_group = world.comm.Get_group().Incl(members)
    comm = world.comm.Create(mpi_group)
    mpi_group.Free()
    if comm == mpi().COMM_NULL:
        return GroupMember.NON_GROUP_MEMBER
    pg = ProcessGroup(comm, members, timeout_s, group_desc or f"group{len(_groups)}",
                      _backend_name(backend) if backend else world.backend)
    _groups.append(pg)
    return pg


# --- tensors as MPI buffers --------------------------------------------------------------------------------------


def _tensor(t: Any, what: str, name: str = "tensor") -> Tensor:
    if not isinstance(t, Tensor):
        raise TypeError(f"{what}: {name} must be a tensorplay.Tensor, got {type(t).__name__}")
    return t


def _materialize(t: Tensor, what: str) -> None:
    """A tensor a compiled function is capturing gets its value: a graph break here."""
    if not _views.has_memory(t):
        t._concrete(what)


def _values(t: Tensor, what: str) -> np.ndarray:
    """``t``'s current values as a host array (its own memory when it lives on the host)."""
    _materialize(t, what)
    data = _views.host_array(t)
    if data is None:
        data = t._concrete(what)  # a device tensor: a host copy
    return data


def _own_buffer(t: Tensor, what: str) -> tuple[np.ndarray, bool]:
    """The host array a collective may write ``t``'s result into, and whether it is ``t``'s
    own memory (False: a contiguous copy, written back by :func:`_wrote`)."""
    data = _values(t, what)
    if (data.flags.c_contiguous and data.flags.writeable and _views.host_array(t) is data
            and data.dtype.kind != "V"):
        return data, True
    return np.ascontiguousarray(data).copy(), False


def _wrote(t: Tensor, array: np.ndarray, own: bool) -> None:
    """A collective left ``t``'s new values in ``array`` (``own``: ``t``'s memory itself)."""
    if own:
        note_host_write(array)
        _views.note_write(t)
    else:
        store(t, array)


def store(t: Tensor, values: np.ndarray) -> None:
    """``t``'s memory takes ``values`` in place: its views see them and its version moves, as
    for ``copy_``. A writable host array is written directly; a device tensor (or a bfloat16
    one) through ``copy_``."""
    host = _views.host_array(t)
    if host is not None and host.flags.writeable and host.dtype.kind != "V":
        np.copyto(host, values.reshape(host.shape), casting="unsafe")
        _wrote(t, host, True)
        return
    with no_grad():
        t.copy_(Tensor._wrap(np.asarray(values).astype(t.dtype.np_dtype, copy=False).reshape(tuple(t.shape))))


def _reduced(op: ReduceOp, red: np.ndarray, buf: np.ndarray, staged: bool, t: Tensor, own: bool,
             n: int) -> Callable[[], None]:
    """The end of a reduction into ``red``: divided by the ranks ``n`` for AVG, rounded back into
    ``buf`` when it was reduced in float32, and written into ``t``."""

    def finish() -> None:
        if op is ReduceOp.AVG:
            _divide(red, n)
        if staged:
            np.copyto(buf, red, casting="unsafe")
        _wrote(t, buf, own)

    return finish


_KINDS = ("all_reduce", "reduce", "broadcast", "all_gather", "all_gather_into_tensor", "reduce_scatter_tensor",
          "gather", "scatter", "all_to_all_single", "all_to_all")
_DTYPES = ("bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64",
           "complex64", "complex128")


def _code(items: Sequence[str], name: str) -> int:
    return items.index(name) if name in items else len(items) + zlib.crc32(name.encode()) % 1000


def _check_call(pg: ProcessGroup, what: str, arrays: Sequence[np.ndarray], extra: int = -1) -> None:
    """Every rank of ``pg`` is in the same collective with the same sizes and dtypes: a
    mismatch is a ValueError on every rank (not a hang or a silent truncation). One small
    all-gather of each rank's call (``TENSORPLAY_DISTRIBUTED_DEBUG=OFF`` leaves it out)."""
    if not _check_calls or pg.size() == 1:
        return
    sig = np.full(8, -1, np.int64)
    sig[0], sig[1] = _code(_KINDS, what), extra
    for i, a in enumerate(arrays[:3]):
        sig[2 + 2 * i], sig[3 + 2 * i] = a.size, _code(_DTYPES, a.dtype.name)
    out = np.empty((pg.size(), 8), np.int64)
    Work(what, [pg.comm.Iallgather(sig, out)], None, pg).wait()
    if (out == out[0]).all():
        return
    me = pg.rank()
    other = next(r for r in range(pg.size()) if not (out[r] == out[me]).all())

    def describe(row: np.ndarray) -> str:
        kind = _KINDS[row[0]] if row[0] < len(_KINDS) else "another collective"
        parts = [f"{row[2 + 2 * i]} x {_DTYPES[row[3 + 2 * i]] if row[3 + 2 * i] < len(_DTYPES) else '?'}"
                 for i in range(3) if row[2 + 2 * i] >= 0]
        return f"{kind}({', '.join(parts)}{'' if row[1] < 0 else f'; root/op {row[1]}'})"

    raise ValueError(f"{what} on rank {pg.ranks[me]}: the ranks' calls differ: this rank called {describe(out[me])}, "
                     f"rank {pg.ranks[other]} called {describe(out[other])}; every rank must make the same "
                     f"collective calls in the same order, with tensors of the same sizes and dtypes")


def _start(name: str, pg: ProcessGroup, requests: list, finish: Callable[[], Any] | None, async_op: bool) -> Any:
    work = Work(name, requests, finish, pg)
    if async_op:
        return work
    work.wait()
    return None


def _divide(array: np.ndarray, n: int) -> None:
    if array.dtype.kind == "f" or array.dtype.kind == "c":
        np.divide(array, n, out=array)


def _reduce_buffers(data: np.ndarray) -> tuple[np.ndarray, bool]:
    """The buffer to reduce ``data`` in (itself, or a float32 copy for 16-bit floats)."""
    rd = reduce_dtype(data.dtype)
    if rd == data.dtype:
        return data, False
    return data.astype(rd), True


# --- collectives ---------------------------------------------------------------------------------------------------


def all_reduce(tensor: Tensor, op: ReduceOp = ReduceOp.SUM, group: Any = None, async_op: bool = False) -> Any:
    """Reduce ``tensor`` across the ranks with ``op``; every rank gets the result in ``tensor``."""
    what = "all_reduce"
    t = _tensor(tensor, what)
    op = _reduce_op(op, what)
    pg = _group(group)
    if pg is None:
        return None
    buf, own = _own_buffer(t, what)
    red, staged = _reduce_buffers(buf)
    mop = _mpi_op(op, red.dtype)
    _check_call(pg, what, [buf], extra=list(ReduceOp).index(op))
    MPI = mpi()
    req = pg.comm.Iallreduce(MPI.IN_PLACE, mpi_buffer(red), mop) if red.size else MPI.REQUEST_NULL
    return _start(what, pg, [req], _reduced(op, red, buf, staged, t, own, pg.size()), async_op)


def reduce(tensor: Tensor, dst: int | None = None, op: ReduceOp = ReduceOp.SUM, group: Any = None,
           async_op: bool = False, group_dst: int | None = None) -> Any:
    """Reduce ``tensor`` across the ranks into rank ``dst``'s ``tensor`` (others keep theirs)."""
    what = "reduce"
    t = _tensor(tensor, what)
    op = _reduce_op(op, what)
    pg = _group(group)
    if pg is None:
        return None
    root = _root(pg, dst, group_dst, what, "dst")
    buf, own = _own_buffer(t, what)
    red, staged = _reduce_buffers(buf)
    mop = _mpi_op(op, red.dtype)
    _check_call(pg, what, [buf], extra=root * 16 + list(ReduceOp).index(op))
    MPI = mpi()
    mine = pg.rank() == root
    if not red.size:
        req = MPI.REQUEST_NULL
    elif mine:
        req = pg.comm.Ireduce(MPI.IN_PLACE, mpi_buffer(red), mop, root=root)
    else:
        scratch = red.copy()
        req = pg.comm.Ireduce(mpi_buffer(scratch), None, mop, root=root)
    finish = _reduced(op, red, buf, staged, t, own, pg.size()) if mine else None  # others keep theirs
    return _start(what, pg, [req], finish, async_op)


def broadcast(tensor: Tensor, src: int | None = None, group: Any = None, async_op: bool = False,
              group_src: int | None = None) -> Any:
    """Rank ``src``'s ``tensor`` into every rank's ``tensor``."""
    what = "broadcast"
    t = _tensor(tensor, what)
    pg = _group(group)
    if pg is None:
        return None
    root = _root(pg, src, group_src, what, "src")
    buf, own = _own_buffer(t, what)
    _check_call(pg, what, [buf], extra=root)
    req = pg.comm.Ibcast([byte_view(buf), mpi().BYTE], root=root) if buf.size else mpi().REQUEST_NULL
    mine = pg.rank() == root
    return _start(what, pg, [req], None if mine else (lambda: _wrote(t, buf, own)), async_op)


def all_gather(tensor_list: list, tensor: Tensor, group: Any = None, async_op: bool = False) -> Any:
    """Every rank's ``tensor`` into ``tensor_list`` (one tensor per rank, in rank order)."""
    what = "all_gather"
    t = _tensor(tensor, what)
    pg = _group(group)
    if pg is None:
        return None
    outs = _tensor_list(tensor_list, pg.size(), t, what, "tensor_list")
    data = np.ascontiguousarray(_values(t, what))
    _check_call(pg, what, [data])
    gathered = np.empty((pg.size(),) + data.shape, data.dtype)
    req = (pg.comm.Iallgather([byte_view(data), mpi().BYTE], [byte_view(gathered), mpi().BYTE])
           if data.size else mpi().REQUEST_NULL)

    def finish() -> None:
        for out, part in zip(outs, gathered):
            _copy_into(out, part, what)

    return _start(what, pg, [req], finish, async_op)


def all_gather_into_tensor(output_tensor: Tensor, input_tensor: Tensor, group: Any = None,
                           async_op: bool = False) -> Any:
    """Every rank's ``input_tensor`` concatenated (or stacked) in rank order into
    ``output_tensor``, whose size is the world size times the input's."""
    what = "all_gather_into_tensor"
    out = _tensor(output_tensor, what, "output_tensor")
    inp = _tensor(input_tensor, what, "input_tensor")
    pg = _group(group)
    if pg is None:
        return None
    _same_dtype(out, inp, what)
    data = np.ascontiguousarray(_values(inp, what))
    if out.numel() != data.size * pg.size():
        raise ValueError(f"{what}: output_tensor has {out.numel()} elements, but {pg.size()} ranks x the input's "
                         f"{data.size} elements is {data.size * pg.size()}")
    _check_call(pg, what, [data])
    buf, own = _own_buffer(out, what)
    req = (pg.comm.Iallgather([byte_view(data), mpi().BYTE], [byte_view(buf), mpi().BYTE])
           if data.size else mpi().REQUEST_NULL)
    return _start(what, pg, [req], lambda: _wrote(out, buf, own), async_op)


def reduce_scatter_tensor(output: Tensor, input: Tensor, op: ReduceOp = ReduceOp.SUM,  # noqa: A002
                          group: Any = None, async_op: bool = False) -> Any:
    """Reduce ``input`` across the ranks and give rank ``r`` the ``r``-th block of the result
    (``input`` holds the world size times ``output``'s elements)."""
    what = "reduce_scatter_tensor"
    out = _tensor(output, what, "output")
    inp = _tensor(input, what, "input")
    op = _reduce_op(op, what)
    pg = _group(group)
    if pg is None:
        return None
    _same_dtype(out, inp, what)
    data = np.ascontiguousarray(_values(inp, what))
    if data.size != out.numel() * pg.size():
        raise ValueError(f"{what}: input has {data.size} elements; it needs {pg.size()} ranks x the output's "
                         f"{out.numel()} elements = {out.numel() * pg.size()}")
    buf, own = _own_buffer(out, what)
    red_in, _ = _reduce_buffers(data)
    red_out, staged = _reduce_buffers(buf)
    mop = _mpi_op(op, red_in.dtype)
    _check_call(pg, what, [data], extra=list(ReduceOp).index(op))
    req = (pg.comm.Ireduce_scatter_block(mpi_buffer(red_in), mpi_buffer(red_out), mop)
           if buf.size else mpi().REQUEST_NULL)
    return _start(what, pg, [req], _reduced(op, red_out, buf, staged, out, own, pg.size()), async_op)


def reduce_scatter(output: Tensor, input_list: list, op: ReduceOp = ReduceOp.SUM, group: Any = None,
                   async_op: bool = False) -> Any:
    """``reduce_scatter_tensor`` with the input given as one tensor per rank."""
    what = "reduce_scatter"
    out = _tensor(output, what, "output")
    pg = _group(group)
    if pg is None:
        return None
    parts = _tensor_list(input_list, pg.size(), out, what, "input_list")
    stacked = np.stack([np.ascontiguousarray(_values(p, what)) for p in parts])
    return reduce_scatter_tensor(out, Tensor._wrap(stacked), op=op, group=group, async_op=async_op)


def gather(tensor: Tensor, gather_list: list | None = None, dst: int | None = None, group: Any = None,
           async_op: bool = False, group_dst: int | None = None) -> Any:
    """Every rank's ``tensor`` into rank ``dst``'s ``gather_list`` (None on the other ranks)."""
    what = "gather"
    t = _tensor(tensor, what)
    pg = _group(group)
    if pg is None:
        return None
    root, outs = _rooted_list(pg, dst, group_dst, gather_list, t, what, "dst", "gather_list")
    mine = outs is not None
    data = np.ascontiguousarray(_values(t, what))
    _check_call(pg, what, [data], extra=root)
    gathered = np.empty((pg.size(),) + data.shape, data.dtype) if mine else None
    recv = [byte_view(gathered), mpi().BYTE] if mine else None
    req = pg.comm.Igather([byte_view(data), mpi().BYTE], recv, root=root) if data.size else mpi().REQUEST_NULL

    def finish() -> None:
        if mine:
            for out, part in zip(outs, gathered):
                _copy_into(out, part, what)

    return _start(what, pg, [req], finish, async_op)


def scatter(tensor: Tensor, scatter_list: list | None = None, src: int | None = None, group: Any = None,
            async_op: bool = False, group_src: int | None = None) -> Any:
    """Rank ``src``'s ``scatter_list[r]`` into rank ``r``'s ``tensor``."""
    what = "scatter"
    t = _tensor(tensor, what)
    pg = _group(group)
    if pg is None:
        return None
    root, parts = _rooted_list(pg, src, group_src, scatter_list, t, what, "src", "scatter_list")
    mine = parts is not None
    if mine:
        send = np.stack([np.ascontiguousarray(_values(p, what)) for p in parts])
    buf, own = _own_buffer(t, what)
    _check_call(pg, what, [buf], extra=root)
    sendspec = [byte_view(send), mpi().BYTE] if mine else None
    req = pg.comm.Iscatter(sendspec, [byte_view(buf), mpi().BYTE], root=root) if buf.size else mpi().REQUEST_NULL
    return _start(what, pg, [req], lambda: _wrote(t, buf, own), async_op)


def all_to_all_single(output: Tensor, input: Tensor, output_split_sizes: Sequence[int] | None = None,  # noqa: A002
                      input_split_sizes: Sequence[int] | None = None, group: Any = None, async_op: bool = False) -> Any:
    """Rank ``r`` sends the ``j``-th block of ``input``'s first dimension to rank ``j`` and
    receives rank ``j``'s ``r``-th block as the ``j``-th block of ``output``; the split sizes
    (rows per rank) default to equal blocks."""
    what = "all_to_all_single"
    out = _tensor(output, what, "output")
    inp = _tensor(input, what, "input")
    pg = _group(group)
    if pg is None:
        return None
    _same_dtype(out, inp, what)
    n = pg.size()
    data = np.ascontiguousarray(_values(inp, what))
    buf, own = _own_buffer(out, what)
    row_in = data[0].nbytes if data.ndim and data.shape[0] else 0
    row_out = buf[0].nbytes if buf.ndim and buf.shape[0] else 0
    send = _splits(input_split_sizes, data, n, what, "input")
    recv = _splits(output_split_sizes, buf, n, what, "output")
    _check_call(pg, what, [data[:0] if data.ndim else data], extra=int(data[0].size) if data.ndim and data.shape[0] else -1)
    counts_in = [k * row_in for k in send]
    counts_out = [k * row_out for k in recv]
    req = pg.comm.Ialltoallv([byte_view(data), (counts_in, _offsets(counts_in)), mpi().BYTE],
                             [byte_view(buf), (counts_out, _offsets(counts_out)), mpi().BYTE])
    return _start(what, pg, [req], lambda: _wrote(out, buf, own), async_op)


def all_to_all(output_tensor_list: list, input_tensor_list: list, group: Any = None, async_op: bool = False) -> Any:
    """Rank ``r`` sends ``input_tensor_list[j]`` to rank ``j`` and receives rank ``j``'s
    ``input_tensor_list[r]`` into ``output_tensor_list[j]`` (the tensors may differ in size)."""
    what = "all_to_all"
    pg = _group(group)
    if pg is None:
        return None
    n = pg.size()
    for name, lst in (("output_tensor_list", output_tensor_list), ("input_tensor_list", input_tensor_list)):
        if not isinstance(lst, (list, tuple)) or len(lst) != n:
            raise ValueError(f"{what}: {name} must be a list of {n} tensors (one per rank)")
    ins = [np.ascontiguousarray(_values(_tensor(t, what, f"input_tensor_list[{j}]"), what)) for j, t in
           enumerate(input_tensor_list)]
    outs = [_tensor(t, what, f"output_tensor_list[{j}]") for j, t in enumerate(output_tensor_list)]
    for t in outs:
        _same_dtype(t, input_tensor_list[0], what)
    send = np.concatenate([byte_view(a) for a in ins]) if ins else np.empty(0, np.uint8)
    counts_in = [a.nbytes for a in ins]
    counts_out = [t.numel() * np.dtype(t.dtype.np_dtype).itemsize for t in outs]
    recv = np.empty(sum(counts_out), np.uint8)
    _check_call(pg, what, [])
    req = pg.comm.Ialltoallv([send, (counts_in, _offsets(counts_in)), mpi().BYTE],
                             [recv, (counts_out, _offsets(counts_out)), mpi().BYTE])

    def finish() -> None:
        for t, start, size in zip(outs, _offsets(counts_out), counts_out):
            part = recv[start:start + size].view(np.dtype(t.dtype.np_dtype)).reshape(tuple(t.shape))
            _copy_into(t, part, what)

    return _start(what, pg, [req], finish, async_op)


def _splits(sizes: Sequence[int] | None, array: np.ndarray, n: int, what: str, name: str) -> list[int]:
    rows = array.shape[0] if array.ndim else 1
    if sizes is None:
        if rows % n:
            raise ValueError(f"{what}: {name} has {rows} rows, which do not split into {n} equal blocks; pass "
                             f"{name}_split_sizes")
        return [rows // n] * n
    sizes = [int(k) for k in sizes]
    if len(sizes) != n or sum(sizes) != rows or min(sizes) < 0:
        raise ValueError(f"{what}: {name}_split_sizes {sizes} must be {n} non-negative sizes summing to {name}'s "
                         f"{rows} rows")
    return sizes


def _offsets(counts: Sequence[int]) -> list[int]:
    return [int(v) for v in np.concatenate([[0], np.cumsum(counts)[:-1]])] if counts else []


def barrier(group: Any = None, async_op: bool = False, device_ids: Any = None) -> Any:
    """Wait until every rank of ``group`` reached this call."""
    pg = _group(group)
    if pg is None:
        return None
    return _start("barrier", pg, [pg.comm.Ibarrier()], None, async_op)


def isend(tensor: Tensor, dst: int | None = None, group: Any = None, tag: int = 0,
          group_dst: int | None = None) -> Any:
    """Send ``tensor`` to rank ``dst`` without waiting; returns a :class:`Work`."""
    what = "isend"
    t = _tensor(tensor, what)
    pg = _group(group)
    if pg is None:
        return None
    peer = _root(pg, dst, group_dst, what, "dst")
    if peer == pg.rank():
        raise ValueError(f"{what}: dst is this rank ({pg.ranks[peer]}); a rank cannot send to itself")
    data = np.ascontiguousarray(_values(t, what))  # the tensor's memory (not to be changed before wait())
    req = pg.comm.Isend([byte_view(data), mpi().BYTE], dest=peer, tag=tag)
    return Work(what, [req], None, pg)


def irecv(tensor: Tensor, src: int | None = None, group: Any = None, tag: int = 0,
          group_src: int | None = None) -> Any:
    """Receive into ``tensor`` from rank ``src`` (any rank when None) without waiting;
    ``wait()`` then ``result()`` give the sender's global rank."""
    what = "irecv"
    t = _tensor(tensor, what)
    pg = _group(group)
    if pg is None:
        return None
    MPI = mpi()
    peer = MPI.ANY_SOURCE if src is None and group_src is None else _root(pg, src, group_src, what, "src")
    buf, own = _own_buffer(t, what)
    work = Work(what, [pg.comm.Irecv([byte_view(buf), MPI.BYTE], source=peer, tag=tag)], None, pg)

    def finish() -> int:
        status = work.statuses[0]
        count = status.Get_count(MPI.BYTE)
        if count != buf.nbytes:
            raise ValueError(f"recv: rank {pg.ranks[status.Get_source()]} sent {count} bytes, but the receiving "
                             f"tensor has {buf.nbytes} ({tuple(t.shape)} x {t.dtype})")
        _wrote(t, buf, own)
        return pg.ranks[status.Get_source()]

    work._finish = finish
    return work


def send(tensor: Tensor, dst: int | None = None, group: Any = None, tag: int = 0, group_dst: int | None = None) -> None:
    isend(tensor, dst, group, tag, group_dst).wait()


def recv(tensor: Tensor, src: int | None = None, group: Any = None, tag: int = 0,
         group_src: int | None = None) -> int:
    """Receive into ``tensor``; returns the sender's rank."""
    work = irecv(tensor, src, group, tag, group_src)
    return -1 if work is None else work.result()


def broadcast_object_list(object_list: list, src: int | None = None, group: Any = None, device: Any = None,
                          group_src: int | None = None) -> None:
    """Rank ``src``'s picklable objects into every rank's ``object_list`` (same length)."""
    pg = _group(group)
    if pg is None:
        return
    root = _root(pg, src if src is not None or group_src is not None else 0, group_src,
                 "broadcast_object_list", "src")
    payload = pickle.dumps(list(object_list)) if pg.rank() == root else None
    size = np.array([len(payload) if payload is not None else 0], np.int64)
    Work("broadcast_object_list", [pg.comm.Ibcast(size, root=root)], None, pg).wait()
    buf = np.frombuffer(payload, np.uint8).copy() if payload is not None else np.empty(int(size[0]), np.uint8)
    Work("broadcast_object_list", [pg.comm.Ibcast(buf, root=root)], None, pg).wait()
    if pg.rank() != root:
        object_list[:] = pickle.loads(buf.tobytes())


def all_gather_object(object_list: list, obj: Any, group: Any = None) -> None:
    """Every rank's picklable ``obj`` into ``object_list`` (world-size long), in rank order."""
    pg = _group(group)
    if pg is None:
        return
    if len(object_list) != pg.size():
        raise ValueError(f"all_gather_object: object_list has {len(object_list)} entries; it needs one per rank "
                         f"({pg.size()})")
    mine = np.frombuffer(pickle.dumps(obj), np.uint8)
    sizes = np.empty(pg.size(), np.int64)
    Work("all_gather_object", [pg.comm.Iallgather(np.array([mine.size], np.int64), sizes)], None, pg).wait()
    out = np.empty(int(sizes.sum()), np.uint8)
    offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    Work("all_gather_object", [pg.comm.Iallgatherv(mine, [out, (sizes, offsets), mpi().BYTE])], None, pg).wait()
    for r in range(pg.size()):
        object_list[r] = pickle.loads(out[offsets[r]:offsets[r] + sizes[r]].tobytes())


# --- argument checks ------------------------------------------------------------------------------------------------


def _reduce_op(op: Any, what: str) -> ReduceOp:
    if isinstance(op, ReduceOp):
        return op
    raise TypeError(f"{what}: op must be a tensorplay.distributed.ReduceOp (SUM, AVG, PRODUCT, MIN, MAX, BAND, BOR, "
                    f"BXOR), got {op!r}")


def _root(pg: ProcessGroup, rank: int | None, group_rank: int | None, what: str, name: str) -> int:
    """The group rank of a ``src``/``dst`` given as a global rank or as ``group_src``/``group_dst``."""
    if rank is not None and group_rank is not None:
        raise ValueError(f"{what}: pass {name} or group_{name}, not both")
    if group_rank is not None:
        if not 0 <= int(group_rank) < pg.size():
            raise ValueError(f"{what}: group_{name}={group_rank} is out of range for a group of {pg.size()}")
        return int(group_rank)
    if rank is None:
        if name == "dst" and what in ("isend",):
            raise ValueError(f"{what}: dst is required")
        rank = 0
    return pg.group_rank(int(rank), f"{what}({name}={rank})")


def _rooted_list(pg: ProcessGroup, rank: int | None, group_rank: int | None, tensors: Any, like: Tensor, what: str,
                 root_name: str, list_name: str) -> tuple[int, list | None]:
    """The root's group rank of ``gather``/``scatter``, and its list of tensors (None on the
    other ranks, which must pass none)."""
    root = _root(pg, rank, group_rank, what, root_name)
    if pg.rank() == root:
        return root, _tensor_list(tensors, pg.size(), like, what, list_name)
    if tensors:
        raise ValueError(f"{what}: {list_name} must be None or empty on ranks other than {root_name} "
                         f"({pg.ranks[root]})")
    return root, None


def _tensor_list(tensors: Any, n: int, like: Tensor, what: str, name: str) -> list:
    if not isinstance(tensors, (list, tuple)) or len(tensors) != n:
        got = len(tensors) if isinstance(tensors, (list, tuple)) else type(tensors).__name__
        raise ValueError(f"{what}: {name} must be a list of {n} tensors (one per rank), got {got}")
    for i, x in enumerate(tensors):
        _tensor(x, what, f"{name}[{i}]")
        if x.numel() != like.numel() or x.dtype is not like.dtype:
            raise ValueError(f"{what}: {name}[{i}] is {tuple(x.shape)} {x.dtype}, but the tensor is "
                             f"{tuple(like.shape)} {like.dtype}; each entry must match it")
    return list(tensors)


def _same_dtype(a: Tensor, b: Tensor, what: str) -> None:
    if a.dtype is not b.dtype:
        raise TypeError(f"{what}: the output is {a.dtype} and the input {b.dtype}; they must match")


def _copy_into(out: Tensor, part: np.ndarray, what: str) -> None:
    _materialize(out, what)
    store(out, part)
