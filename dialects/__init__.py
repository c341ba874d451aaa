"""MLIR dialects of tensorplay. ``tp`` is the tensor dialect every captured program is written in."""

__all__: list[str] = []
