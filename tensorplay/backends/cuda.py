"""``tp.backends.cuda``: PyTorch's CUDA matmul precision flags, kept for scripts that set
them; they have no effect (IREE's float32 matmuls compute in float32)."""

from __future__ import annotations

__all__ = ["matmul"]


class _MatmulFlags:
    """``tp.backends.cuda.matmul``: ``allow_tf32``, ``allow_fp16_reduced_precision_reduction``
    and ``allow_bf16_reduced_precision_reduction``, settable booleans with PyTorch's
    defaults and no effect."""

    __slots__ = ("allow_tf32", "allow_fp16_reduced_precision_reduction", "allow_bf16_reduced_precision_reduction")

    def __init__(self) -> None:
        self.allow_tf32 = False
        self.allow_fp16_reduced_precision_reduction = True
        self.allow_bf16_reduced_precision_reduction = True

    def __repr__(self) -> str:
        flags = ", ".join(f"{name}={getattr(self, name)}" for name in self.__slots__)
        return f"matmul({flags})"


matmul = _MatmulFlags()

