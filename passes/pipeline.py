"""Pass pipelines: parse a pipeline string that mixes tp passes, named pipelines and
upstream/IREE passes, and run it on a module through MLIR's PassManager.

Accepted forms: ``tp-canonicalize,convert-tp-to-linalg``, ``tp-canonicalize{max-iterations=3}``,
``builtin.module(tp-optimize,func.func(canonicalize),cse)``.
"""

from __future__ import annotations

import os
import shlex
import tempfile
from collections.abc import Callable
from dataclasses import dataclass

from ..dialects.ir import context, ir, passmanager
from .registry import PIPELINES, Pass, PassFailure, all_passes, lookup_pass

__all__ = ["split_pipeline", "expand", "run_pipeline", "PipelineError", "Step"]


class PipelineError(RuntimeError):
    """A pipeline failed. Names the pass, and where the input IR was saved with the
    ``tpc-opt`` command that reproduces the failure."""

    def __init__(self, message: str, pass_name: str | None = None, reproducer: str | None = None):
        self.pass_name = pass_name
        self.reproducer = reproducer
        super().__init__(message)


def split_pipeline(text: str) -> list[str]:
    """Top-level comma-separated elements, keeping nested ``(...)``/``{...}`` intact."""
    items, depth, cur = [], 0, []
    for ch in text:
        if ch in "({":
            depth += 1
        elif ch in ")}":
            depth -= 1
            if depth < 0:
                raise ValueError(f"unbalanced ')' or '}}' in pipeline '{text}'")
        if ch == "," and depth == 0:
            items.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
    if depth != 0:
        raise ValueError(f"unbalanced '(' or '{{' in pipeline '{text}'")
    tail = "".join(cur).strip()
    if tail:
        items.append(tail)
    return [i for i in items if i]


@dataclass
class Step:
    """One element of an expanded pipeline: a tp pass instance or upstream pipeline text."""

    name: str
    tp_pass: Pass | None = None
    upstream: str | None = None


def expand(text: str) -> list[Step]:
    """The pipeline as steps, named pipelines expanded and ``builtin.module(...)`` unwrapped."""
    all_passes()  # registers the passes and named pipelines
    text = text.strip()
    if text.startswith("builtin.module(") and text.endswith(")"):
        text = text[len("builtin.module("):-1]
    steps: list[Step] = []
    for item in split_pipeline(text):
        name, _, rest = item.partition("{")
        name = name.strip()
        if name in PIPELINES:
            if rest:
                raise ValueError(f"pipeline '{name}' takes no options")
            steps.extend(expand(PIPELINES[name][0]))
            continue
        cls = lookup_pass(name)
        if cls is not None:
            options = rest[:-1] if rest.endswith("}") else rest
            steps.append(Step(name, tp_pass=cls.from_options(options)))
        else:
            steps.append(Step(name, upstream=item))
    return steps


def _pass_callable(p: Pass) -> Callable:
    def run(op: ir.Operation, pass_: object) -> None:
        p.run(op)

    return run


def run_pipeline(module: ir.Module, pipeline: str, *,
                 after_each: Callable[[str, ir.Module], None] | None = None,
                 source_name: str = "module") -> ir.Module:
    """Run ``pipeline`` on ``module`` in place and return it.

    ``after_each(step_name, module)`` is called after every step (for IR printing). On failure
    raises PipelineError naming the step, with the step's input IR written to a file and the
    ``tpc-opt`` command that reproduces it.
    """
    steps = expand(pipeline)
    with context():
        for step in steps:
            before = module.operation.get_asm(enable_debug_info=True)
            try:
                if step.tp_pass is not None:
                    step.tp_pass.run(module.operation)
                    # a Python pass can build IR MLIR rejects: report it here, where it happened
                    try:
                        module.operation.verify()
                    except ir.MLIRError as exc:
                        raise PassFailure(f"produced invalid IR: {exc}") from None
                else:
                    pm = passmanager.PassManager.parse(f"builtin.module({step.upstream})")
                    pm.run(module.operation)
            except (PassFailure, ir.MLIRError, ValueError, RuntimeError) as exc:
                raise _failure(step, exc, before, source_name) from None
            except Exception as exc:  # a defect in a Python pass: still name it and keep its input
                raise _failure(step, f"{type(exc).__name__}: {exc}", before, source_name) from exc
            if after_each is not None:
                after_each(step.name, module)
    return module


def _failure(step: Step, exc: Exception | str, ir_text: str, source_name: str) -> PipelineError:
    fd, path = tempfile.mkstemp(prefix=f"tensorplay-{source_name}-", suffix=".mlir")
    with os.fdopen(fd, "w") as f:
        f.write(ir_text)
    element = step.upstream if step.upstream is not None else step.name
    command = f"tpc-opt {shlex.quote(path)} -p {shlex.quote(element)} --mlir-print-debuginfo"
    detail = str(exc).strip()
    message = (f"pass '{step.name}' failed: {detail}\n"
               f"  the input IR of that pass is in {path}\n"
               f"  reproduce with: {command}")
    return PipelineError(message, step.name, command)
