"""Transforms over the tp dialect and its lowering to linalg/tensor (``tensorplay.passes``).

Passes are registered once, by name, in :mod:`.registry`, for both the Python API
(:func:`run_pipeline`) and ``tpc-opt``.
"""

if __name__ != "tensorplay.passes":  # imported from the repository root as a bare ``passes``
    raise ImportError(
        f"the folder passes/ is the package tensorplay.passes; import it as 'tensorplay.passes', not as "
        f"'{__name__}' (a second copy would hold a second pass registry and op lowerings). From a source "
        "checkout, install the project first: python -m pip install -e .")


from .pipeline import PipelineError, expand, run_pipeline, split_pipeline
from .registry import PIPELINES, Pass, PassFailure, all_passes, lookup_pass, register_pass, register_pipeline

__all__ = ["Pass", "PassFailure", "PipelineError", "PIPELINES", "all_passes", "lookup_pass",
           "register_pass", "register_pipeline", "run_pipeline", "expand", "split_pipeline"]
