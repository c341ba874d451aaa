"""tensorplay.compiler: capture Python tensor programs and compile them with MLIR and IREE.

The public names are those of the API reference (docs/compiler.md): ``compile`` and its
markers, the backend registry, modes, and the two exception classes.
"""

from __future__ import annotations

from ._logging import configure_from_env as _configure_logs
from .errors import GraphCaptureError, InvalidBackend
from .markers import (NestedCompileRegionOptions, allow_in_graph, assume_constant_result, disable,
                      disable_capture, disallow_in_graph, export, mark_static, nested_compile_region,
                      nonstrict_trace, overload_method, substitute_in_graph, unused)

__all__ = ["GraphCaptureError", "InvalidBackend"]
__all__ += [
    "allow_in_graph", "assume_constant_result", "disable", "disable_capture", "disallow_in_graph",
    "export", "mark_static", "nested_compile_region", "nonstrict_trace", "overload_method",
    "substitute_in_graph", "unused", "NestedCompileRegionOptions",
]
from .backends import (get_backend_capabilities, get_default_backend, list_backends, list_mode_options,
                       lookup_backend, register_backend, register_debug_backend, register_experimental_backend,
                       set_default_backend, unregister_backend)

__all__ += [
    "register_backend", "register_debug_backend", "register_experimental_backend", "unregister_backend",
    "lookup_backend", "list_backends", "get_backend_capabilities", "set_default_backend",
    "get_default_backend", "list_mode_options",
]

from .api import CompiledFunction, compile, is_compiling, is_exporting, reset
from .backends.bundles import load_cache_bundle, save_cache_bundle
from .explanation import explain

__all__ += ["compile", "reset", "is_compiling", "is_exporting", "explain", "CompiledFunction",
            "save_cache_bundle", "load_cache_bundle"]

try:
    _configure_logs()
except ValueError as _e:  # a bad TENSORPLAY_LOGS must not break ``import tensorplay``
    import warnings as _warnings

    _warnings.warn(str(_e), stacklevel=2)
