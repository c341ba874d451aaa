"""Compile modes and options: each mode is a patch of options, each option maps to IREE
compiler flags or a runtime setting (see :data:`OPTIONS`)."""

from __future__ import annotations

import os

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .targets import TARGETS, IreeTarget, target_of

__all__ = ["OPTIONS", "MODES", "Option", "list_mode_options", "resolve_options", "validate_options",
           "compile_flags"]

OPT_LEVELS = ("O0", "O1", "O2", "O3")
UKERNELS = ("default", "none", "all", "mmt4d", "pack", "unpack")
#: the runtime_driver choices: auto, and the drivers of the targets that pick one per graph
CPU_DRIVERS = ("auto", *dict.fromkeys(d for t in TARGETS.values() if t.driver_by_work for d in t.driver_choices))


@dataclass(frozen=True)
class Option:
    """One compile option: its check, what it maps to, and a one-line doc."""

    name: str
    check: Callable[[Any], bool]
    expects: str
    maps_to: str
    doc: str


def _is_bool(v: Any) -> bool:
    return isinstance(v, bool)


def _one_of(values: tuple[str, ...]) -> Callable[[Any], bool]:
    return lambda v: v in values


def _ukernels(v: Any) -> bool:
    return isinstance(v, str) and all(part in UKERNELS for part in v.split(",")) and bool(v)


def _nonempty_str(v: Any) -> bool:
    return isinstance(v, str) and bool(v) and not v.startswith("-")


def _path(v: Any) -> bool:
    return isinstance(v, (str, os.PathLike)) and bool(os.fspath(v))


def _flag_list(v: Any) -> bool:
    return isinstance(v, (list, tuple)) and all(isinstance(f, str) and f.startswith("--") for f in v)


def _target_option(t: IreeTarget) -> Option:
    """The option naming the device a target's code is for (its record has the name, the flag,
    the default and the documentation)."""
    assert t.target_option is not None and t.target_flag is not None
    return Option(t.target_option, _nonempty_str, t.target_expects, t.target_flag, t.target_doc.format(t.target_default))


OPTIONS: dict[str, Option] = {o.name: o for o in (
    Option("opt_level", _one_of(OPT_LEVELS), "one of O0, O1, O2, O3", "--iree-opt-level",
           "IREE's global optimization level (IREE's default is O2)"),
    Option("data_tiling", _is_bool, "a bool", "--iree-opt-data-tiling",
           f"pack matmul operands into cache-friendly tiles "
           f"({', '.join(t.target for t in TARGETS.values() if t.data_tiling)})"),
    Option("ukernels", _ukernels, f"'default', 'none', 'all' or a comma list of {', '.join(UKERNELS[3:])}",
           " / ".join(t.ukernels_flag for t in TARGETS.values() if t.ukernels_flag),
           "use IREE's hand-written microkernels for matmul-like ops"),
    Option("aggressive_fusion", _is_bool, "a bool", "--iree-dispatch-creation-enable-aggressive-fusion",
           "fuse more producers into each dispatch (fewer, larger kernels)"),
    Option("runtime_driver", _one_of(CPU_DRIVERS), f"one of {', '.join(CPU_DRIVERS)}",
           "runtime: IREE driver for CPU backends",
           "local-sync runs dispatches on the calling thread (lowest call overhead), local-task on a "
           "worker pool (parallel); auto picks by the graph's work"),
    *(_target_option(t) for t in TARGETS.values() if t.target_option is not None),
    Option("autotune", _is_bool, "a bool", "compile: candidate pipelines tried on the call's inputs",
           "compile the graph with each candidate pipeline (optimization level, data tiling, microkernels, "
           "fusion, CPU driver), time each on the first call's inputs and keep the fastest; the choice is "
           "kept in the disk cache, so later processes compile only the winner"),
    Option("partitioner", _one_of(("min_cut", "save_all")), "one of min_cut, save_all",
           "capture: how a training graph is split into forward and backward",
           "min_cut recomputes cheap elementwise and view ops in the backward where that saves fewer "
           "bytes than keeping their results; save_all keeps every forward value the backward reads"),
    Option("trace_dir", _path, "a folder path (str or os.PathLike)",
           "capture and compile: every stage written to this folder",
           "write each capture's graph, breaks, guards, tp MLIR, IR after each pass, linalg MLIR, IREE "
           "flags, dispatches and timings under this folder (as TENSORPLAY_TRACE_DIR does; "
           "python -m tensorplay.tools.report turns it into an HTML page)"),
    Option("extra_flags", _flag_list, "a list of '--iree-...' strings", "passed to iree-compile as given",
           "any further iree-compile flags"),
)}

#: each mode's option patch, applied over the backend's defaults
MODES: dict[str, dict[str, Any]] = {
    "default": {},
    "reduce-overhead": {"runtime_driver": "local-sync"},
    "max-autotune": {"autotune": True},
}


def list_mode_options(mode: str | None = None) -> dict[str, Any]:
    """Return the optimization options each compile mode selects.

    With ``mode`` set, returns that mode's option patch; with ``mode`` unset, the full
    mode-to-options mapping. Unknown modes raise ValueError.
    """
    if mode is None:
        return {name: dict(patch) for name, patch in MODES.items()}
    _check_mode(mode)
    return dict(MODES[mode])


def _check_mode(mode: Any) -> None:
    if mode not in MODES:
        raise ValueError(f"unknown compile mode {mode!r}; modes: {', '.join(MODES)}")


def validate_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``options`` after checking every key and value; ValueError names the bad
    one and lists the valid choices."""
    if not isinstance(options, Mapping):
        raise TypeError(f"options must be a dict, got {type(options).__name__}")
    out = {}
    for key, value in options.items():
        opt = OPTIONS.get(key)
        if opt is None:
            raise ValueError(f"unknown compile option {key!r}; options: {', '.join(OPTIONS)}")
        if not opt.check(value):
            raise ValueError(f"compile option {key!r} expects {opt.expects}, got {value!r}")
        out[key] = list(value) if key == "extra_flags" else value
    return out


def resolve_options(mode: str | None, options: Mapping[str, Any] | None) -> dict[str, Any]:
    """The options a compile uses: the mode's patch, or the validated ``options``; ``{}``
    when neither is given. Giving both is a ValueError, as with torch.compile."""
    if mode is not None and options is not None:
        raise ValueError("compile() takes either mode or options, not both; "
                         f"mode {mode!r} selects {MODES.get(mode, '(unknown mode)')}, "
                         "so add those keys to options instead")
    if mode is not None:
        return list_mode_options(mode)
    if options is not None:
        return validate_options(options)
    return {}


def compile_flags(options: Mapping[str, Any], target: str) -> list[str]:
    """The iree-compile flags ``options`` select for an IREE ``target`` (options that do not
    apply to the target, such as ukernels on Vulkan, add nothing)."""
    t = target_of(target)
    flags = []
    if "opt_level" in options:
        flags.append(f"--iree-opt-level={options['opt_level']}")
    if "data_tiling" in options and t.data_tiling:
        flags.append(f"--iree-opt-data-tiling={'true' if options['data_tiling'] else 'false'}")
    if "ukernels" in options and t.ukernels_flag is not None:
        flags.append(f"{t.ukernels_flag}={options['ukernels']}")
    if "aggressive_fusion" in options:
        flags.append("--iree-dispatch-creation-enable-aggressive-fusion="
                     f"{'true' if options['aggressive_fusion'] else 'false'}")
    flags.extend(options.get("extra_flags", ()))
    return flags
