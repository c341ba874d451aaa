"""``tensorplay.distributed``: process groups, collectives and point-to-point messages with
``torch.distributed``'s names, over MPI (docs/distributed.md).

Start the ranks with ``python -m tensorplay.distributed.run --nproc-per-node N script.py``
(or ``mpiexec``, or Slurm's ``srun``), call :func:`init_process_group`, and wrap the model in
``tensorplay.nn.parallel.DistributedDataParallel``. ``is_available()`` is False where
``mpi4py`` is not installed (``pip install "tensorplay[distributed]"``).
"""

from ._api import (
    Backend,
    DistBackendError,
    DistError,
    GroupMember,
    ProcessGroup,
    ReduceOp,
    Work,
    all_gather,
    all_gather_into_tensor,
    all_gather_object,
    all_reduce,
    all_to_all,
    all_to_all_single,
    barrier,
    broadcast,
    broadcast_object_list,
    default_pg_timeout,
    destroy_process_group,
    gather,
    get_backend,
    get_default_backend_for_device,
    get_local_rank,
    get_node_local_rank,
    get_rank,
    get_world_size,
    group,
    init_process_group,
    irecv,
    is_available,
    is_initialized,
    is_mpi_available,
    is_nccl_available,
    is_torchelastic_launched,
    isend,
    new_group,
    recv,
    reduce,
    reduce_scatter,
    reduce_scatter_tensor,
    scatter,
    send,
)

__all__ = [
    "Backend", "DistBackendError", "DistError", "GroupMember", "ProcessGroup", "ReduceOp", "Work",
    "all_gather", "all_gather_into_tensor", "all_gather_object", "all_reduce", "all_to_all", "all_to_all_single",
    "barrier", "broadcast", "broadcast_object_list", "default_pg_timeout", "destroy_process_group", "gather", "get_backend", "get_default_backend_for_device",
    "get_local_rank", "get_node_local_rank", "get_rank", "get_world_size", "group", "init_process_group",
    "irecv", "is_available", "is_initialized", "is_mpi_available", "is_nccl_available",
    "is_torchelastic_launched", "isend", "new_group", "recv", "reduce", "reduce_scatter",
    "reduce_scatter_tensor", "scatter", "send",
]
