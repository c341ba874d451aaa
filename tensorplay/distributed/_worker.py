"""One rank of a job started by ``python -m tensorplay.distributed.run`` (or ``mpiexec``/``srun``
directly): ``python -m tensorplay.distributed._worker [-m] TARGET [ARGS]``.

Sets ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK`` and ``LOCAL_WORLD_SIZE`` from the MPI launcher's
environment (MPICH's, Open MPI's or Slurm's), prefixes each printed line with ``[rankN]:``, runs
the target as ``__main__``, and on an uncaught exception prints it and ends the process at once
with status 1, which makes the MPI launcher stop the other ranks (none is left waiting in a
collective).
"""

from __future__ import annotations

import io
import os
import runpy
import sys
import traceback

_KEYS = {
    "RANK": ("PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "SLURM_PROCID"),
    "WORLD_SIZE": ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "SLURM_NTASKS"),
    "LOCAL_RANK": ("MPI_LOCALRANKID", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID"),
    "LOCAL_WORLD_SIZE": ("MPI_LOCALNRANKS", "OMPI_COMM_WORLD_LOCAL_SIZE", "SLURM_NTASKS_PER_NODE"),
}


def launcher_environment(env: dict) -> dict:
    """``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``LOCAL_WORLD_SIZE`` as the MPI launcher told them."""
    out = {}
    for key, sources in _KEYS.items():
        for src in sources:
            if env.get(src, "") != "":
                out[key] = env[src].split("(")[0]
                break
    return out


class _Prefixed(io.TextIOBase):
    """A text stream that writes each line with a prefix, a whole line per write."""

    def __init__(self, stream, prefix: str):
        self._stream = stream
        self._prefix = prefix
        self._pending = ""

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        text = self._pending + text
        lines = text.split("\n")
        self._pending = lines.pop()
        if lines:
            self._stream.write("".join(f"{self._prefix}{line}\n" for line in lines))
            self._stream.flush()
        return len(text)

    def flush(self) -> None:
        if self._pending:
            self._stream.write(self._prefix + self._pending)
            self._pending = ""
        self._stream.flush()

    def isatty(self) -> bool:
        return False

    def fileno(self) -> int:
        return self._stream.fileno()

    @property
    def encoding(self) -> str:
        return self._stream.encoding


def main(argv: list[str]) -> None:
    module = bool(argv) and argv[0] == "-m"
    if module:
        argv = argv[1:]
    if not argv:
        raise SystemExit("usage: python -m tensorplay.distributed._worker [-m] TARGET [ARGS]")
    for key, value in launcher_environment(os.environ).items():
        os.environ.setdefault(key, value)
    rank = os.environ.get("RANK", "0")
    if os.environ.get("TENSORPLAY_DISTRIBUTED_PREFIX", "1") != "0":
        sys.stdout = _Prefixed(sys.stdout, f"[rank{rank}]: ")
        sys.stderr = _Prefixed(sys.stderr, f"[rank{rank}]: ")
    target = argv[0]
    sys.argv = list(argv)
    try:
        if module:
            runpy.run_module(target, run_name="__main__", alter_sys=True)
        else:
            sys.path.insert(0, os.path.dirname(os.path.abspath(target)))
            runpy.run_path(target, run_name="__main__")
    except SystemExit as exc:
        code = exc.code
        if code in (None, 0):
            _finish(0)
        if not isinstance(code, int):
            print(code, file=sys.stderr)
            code = 1
        _finish(code)
    except BaseException:  # noqa: BLE001  (the rank's failure ends the job)
        traceback.print_exc()
        print(f"rank {rank} failed; stopping the job", file=sys.stderr)
        _finish(1)
    _finish(0)


def _finish(code: int) -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    if code == 0:
        _shut_down_mpi()
        sys.exit(0)
    # a failed rank leaves at once: MPI_Finalize could wait for ranks blocked in a collective,
    # while a non-zero exit makes the launcher stop them
    os._exit(code)


def _shut_down_mpi() -> None:
    mod = sys.modules.get("tensorplay.distributed._api")
    if mod is not None and mod.is_initialized():
        mod.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1:])
