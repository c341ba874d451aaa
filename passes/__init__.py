"""Transforms over the tp dialect and its lowering to linalg/tensor (``tensorplay.passes``).

Passes are registered once, by name, in :mod:`.registry`, for both the Python API
(:func:`run_pipeline`) and ``tpc-opt``.
"""

from .pipeline import PipelineError, expand, run_pipeline, split_pipeline
from .registry import PIPELINES, Pass, PassFailure, all_passes, lookup_pass, register_pass, register_pipeline

__all__ = ["Pass", "PassFailure", "PipelineError", "PIPELINES", "all_passes", "lookup_pass",
           "register_pass", "register_pipeline", "run_pipeline", "expand", "split_pipeline"]
