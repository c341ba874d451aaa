"""What moving tensor data costs: every copy between the host and a device, counted in total
and per program (:func:`stats`, :func:`reset_stats`), and the host arrays a CPU program read in
place (``imports``). ``TENSORPLAY_LOGS=perf`` shows them per call."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

__all__ = ["TransferStats", "count", "stats", "reset_stats", "OUTSIDE"]

_lock = threading.Lock()


@dataclass
class TransferStats:
    """Copies between the host and devices: ``uploads`` buffers of ``upload_bytes`` bytes went
    host->device, ``downloads`` of ``download_bytes`` device->host; ``imports`` host arrays a
    CPU program read in place (no copy). ``by_program`` holds the same figures per program."""

    uploads: int = 0
    upload_bytes: int = 0
    downloads: int = 0
    download_bytes: int = 0
    imports: int = 0
    by_program: dict[str, TransferStats] = field(default_factory=dict)

    def _add(self, kind: str, nbytes: int) -> None:
        if kind == "upload":
            self.uploads += 1
            self.upload_bytes += nbytes
        elif kind == "download":
            self.downloads += 1
            self.download_bytes += nbytes
        else:
            self.imports += 1

    def copy(self) -> TransferStats:
        return TransferStats(self.uploads, self.upload_bytes, self.downloads, self.download_bytes, self.imports,
                             {k: v.copy() for k, v in self.by_program.items()})

    def __sub__(self, other: TransferStats) -> TransferStats:
        out = TransferStats(self.uploads - other.uploads, self.upload_bytes - other.upload_bytes,
                            self.downloads - other.downloads, self.download_bytes - other.download_bytes,
                            self.imports - other.imports)
        for name, s in self.by_program.items():
            d = s - other.by_program.get(name, TransferStats())
            if d.uploads or d.downloads or d.imports:
                out.by_program[name] = d
        return out

    def summary(self) -> str:
        return (f"{self.uploads} uploads ({_bytes(self.upload_bytes)}), {self.downloads} downloads "
                f"({_bytes(self.download_bytes)}), {self.imports} host arrays read in place")

    def __str__(self) -> str:
        lines = [f"{'program':<32} {'uploads':>8} {'up bytes':>10} {'downloads':>9} {'down bytes':>10} "
                 f"{'in place':>8}"]
        for name, s in sorted(self.by_program.items()):
            lines.append(f"{name:<32} {s.uploads:>8} {_bytes(s.upload_bytes):>10} {s.downloads:>9} "
                         f"{_bytes(s.download_bytes):>10} {s.imports:>8}")
        lines.append(f"{'total':<32} {self.uploads:>8} {_bytes(self.upload_bytes):>10} {self.downloads:>9} "
                     f"{_bytes(self.download_bytes):>10} {self.imports:>8}")
        return "\n".join(lines)


def _bytes(n: int) -> str:
    for unit in ("B", "KiB", "MiB"):
        if abs(n) < 1024 or unit == "MiB":
            return f"{n} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


_totals = TransferStats()
#: "tensors" stands for transfers outside any program: moving tensors, reading them
OUTSIDE = "tensors"


def count(kind: str, nbytes: int, program: str | None = None) -> None:
    """Record one ``upload``, ``download`` or ``import`` of ``nbytes`` bytes."""
    with _lock:
        _totals._add(kind, nbytes)
        name = program or OUTSIDE
        per = _totals.by_program.get(name)
        if per is None:
            per = _totals.by_program[name] = TransferStats()
        per._add(kind, nbytes)


def stats() -> TransferStats:
    """A snapshot of the transfer counters since the start or the last :func:`reset_stats`."""
    with _lock:
        return _totals.copy()


def reset_stats() -> None:
    """Set the transfer counters to zero."""
    global _totals
    with _lock:
        _totals = TransferStats()
