"""Print tensorplay's public surface as sorted text lines, so two versions of the package can
be compared with ``diff``: every name of ``tp``, ``tp.Tensor`` and ``tp.nn.functional`` with
the ``__module__``/``__qualname__`` of the object it names, the ops modules' ``__all__``, and
the numpy protocol tables.

    python -m tensorplay.tools.surface > before.txt
"""

from __future__ import annotations

import importlib
import sys

OPS_MODULES = ("conv", "counting", "creation", "elementwise", "indexing", "linalg", "random",
               "reduction", "shape", "sorting")


def _describe(obj: object) -> str:
    module = getattr(obj, "__module__", None)
    qualname = getattr(obj, "__qualname__", None)
    if isinstance(obj, type(sys)):
        return f"module {obj.__name__}"
    if module is None and qualname is None:
        return f"<{type(obj).__name__}>"
    return f"{module}:{qualname}"


def lines() -> list[str]:
    import tensorplay as tp
    from tensorplay import _numpy_interop as npi
    from tensorplay.nn import functional as F

    out: list[str] = []
    for prefix, namespace in (("tp", tp), ("Tensor", tp.Tensor), ("F", F)):
        for name in sorted(dir(namespace)):
            out.append(f"{prefix}.{name} = {_describe(getattr(namespace, name))}")
    for module in OPS_MODULES:
        mod = importlib.import_module(f"tensorplay.ops.{module}")
        for name in sorted(getattr(mod, "__all__", ())):
            out.append(f"ops.{module}.__all__ {name}")
    for name in sorted(F.__all__):
        out.append(f"F.__all__ {name}")
    for numpy_name, target in sorted(npi.UFUNCS.items()):
        out.append(f"ufunc {numpy_name} -> {target}")
    for numpy_name in sorted(npi.FUNCTIONS):
        out.append(f"array_function {numpy_name}")
    return out


def main() -> None:
    print("\n".join(lines()))


if __name__ == "__main__":
    main()
