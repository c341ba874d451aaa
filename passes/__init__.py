"""Transforms over the tp dialect and its lowering to linalg/tensor (``tensorplay.passes``).

Passes are registered here once, by name, for both the Python API and ``tpc-opt``.
"""

__all__: list[str] = []
