"""The pass and pipeline registry shared by the Python API and ``tpc-opt``.

A tp pass is a class with its ``name`` and one-line doc, options as dataclass fields (so
``tp-canonicalize{max-iterations=4}`` and the Python API parse the same thing), and a
``run(module)`` method over an MLIR module. Named pipelines expand to pass lists.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, ClassVar

from ..dialects.ir import ir

__all__ = ["Pass", "register_pass", "register_pipeline", "lookup_pass", "all_passes", "PIPELINES",
           "PassFailure", "pipeline_with_options"]


class PassFailure(RuntimeError):
    """A pass found IR it cannot handle; the message names the pass and the op."""


@dataclasses.dataclass
class Pass:
    """Base of tp passes. Subclasses are dataclasses whose fields are the pass options."""

    name: ClassVar[str]

    @classmethod
    def summary(cls) -> str:
        doc = (cls.__doc__ or "").strip()
        return doc.splitlines()[0] if doc else ""

    @classmethod
    def options(cls) -> list[dataclasses.Field]:
        return list(dataclasses.fields(cls))

    @classmethod
    def from_options(cls, text: str) -> Pass:
        """Build from ``key=value key2=value2`` (option names with '-' or '_')."""
        fields = {f.name.replace("_", "-"): f for f in cls.options()}
        kwargs: dict[str, Any] = {}
        for item in text.split():
            key, sep, value = item.partition("=")
            f = fields.get(key.replace("_", "-"))
            if f is None or not sep:
                valid = ", ".join(fields) or "none"
                raise ValueError(f"pass '{cls.name}': unknown option '{item}'; options: {valid}")
            kwargs[f.name] = _convert_option(cls.name, f, value)
        return cls(**kwargs)

    def run(self, module: ir.Operation) -> None:
        raise NotImplementedError(f"pass {self.name} has no run method")


def _convert_option(pass_name: str, f: dataclasses.Field, value: str) -> Any:
    kind = f.type if isinstance(f.type, type) else {"int": int, "bool": bool, "str": str,
                                                     "float": float}.get(str(f.type), str)
    try:
        if kind is bool:
            if value not in ("true", "false", "1", "0"):
                raise ValueError
            return value in ("true", "1")
        return kind(value)
    except ValueError:
        raise ValueError(f"pass '{pass_name}': option '{f.name}' expects {kind.__name__}, "
                         f"got '{value}'") from None


_PASSES: dict[str, type[Pass]] = {}
PIPELINES: dict[str, tuple[str, str]] = {}  # name -> (pipeline text, description)


def register_pass(cls: type[Pass]) -> type[Pass]:
    """Class decorator registering a pass under its ``name``."""
    cls = dataclasses.dataclass(cls)
    if cls.name in _PASSES or cls.name in PIPELINES:
        raise ValueError(f"pass {cls.name} is registered twice")
    if not cls.summary():
        raise TypeError(f"pass {cls.name} needs a docstring")
    _PASSES[cls.name] = cls
    return cls


def register_pipeline(name: str, pipeline: str, description: str) -> None:
    if name in _PASSES or name in PIPELINES:
        raise ValueError(f"pipeline {name} is registered twice")
    PIPELINES[name] = (pipeline, description)


def pipeline_with_options(name: str, options: Mapping[str, Mapping[str, Any]]) -> str:
    """Registered pipeline ``name`` with pass options set: ``{"convert-tp-to-linalg":
    {"float64": False}}`` gives ``tp-optimize,convert-tp-to-linalg{float64=false},canonicalize,cse``
    for ``tp-to-linalg``. Without options, ``name`` itself. Each option is checked against its
    pass; a pass the pipeline does not run is a ValueError."""
    from .pipeline import split_pipeline

    options = {p: o for p, o in options.items() if o}
    if not options:
        return name
    all_passes()  # registers the passes and named pipelines
    items = split_pipeline(PIPELINES[name][0])
    for pass_name, values in options.items():
        cls = _PASSES.get(pass_name)
        if cls is None or pass_name not in items:
            raise ValueError(f"pipeline '{name}' runs no tp pass '{pass_name}'; it runs {', '.join(items)}")
        text = " ".join(f"{k}={str(v).lower() if isinstance(v, bool) else v}" for k, v in values.items())
        cls.from_options(text)  # an unknown option or a bad value fails here
        items[items.index(pass_name)] = f"{pass_name}{{{text}}}"
    return ",".join(items)


def lookup_pass(name: str) -> type[Pass] | None:
    _ensure_loaded()
    return _PASSES.get(name)


def all_passes() -> dict[str, type[Pass]]:
    _ensure_loaded()
    return dict(sorted(_PASSES.items()))


def _ensure_loaded() -> None:
    from . import donation, lowering, transforms  # noqa: F401


