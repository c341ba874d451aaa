"""Seeded programs whose Python state changes between compiled calls.

:func:`generate` writes scenario ``index`` of a ``seed`` as Python source: some state (module
globals, a global or closure object, a dict, a list, a dataclass or ``SimpleNamespace``
config, a class attribute, an ``nn.Module`` holding any of those, a global tensor), a function
that reads it (directly, in a helper it calls, or in a module's ``forward``) and folds what it
read into a tensor result (as a factor, a dtype to cast to, a shape to reshape to, a count of
loop steps), then a list of steps: calls, each after zero to two mutations (a new value, a
value of another type, a rebound object, an appended item, a rebound or in-place updated
tensor, a differently shaped or typed argument).

:func:`run_one` executes the source, compiles the function (``tp.compile``, a module
compiled as a module) and at every step compares the compiled result with the eager one:
values (exactly: no numerics are involved beyond a few multiplies), dtype and shape, or the
same exception type when eager raises. A mismatch is reported with the scenario's source and
steps as one script to paste. ``python -m tests.fuzz.state --count N --seed S`` runs long
campaigns (``--backend iree-cpu`` to compile for real; the default ``eager`` backend runs
captured graphs through the reference implementations, which is what this fuzzer needs:
the property under test is the capture's guards, not the lowering).
"""

from __future__ import annotations

import argparse
import random
import sys
import textwrap
import time
import traceback
import types
from dataclasses import dataclass, field
from typing import Any

import numpy as np

import tensorplay as tp

__all__ = ["Scenario", "generate", "run_one", "run", "main"]

HEADER = """\
import dataclasses, functools, types
import numpy as np
import tensorplay as tp
"""


@dataclass
class Scenario:
    seed: int
    index: int
    setup: str                      # state and the function ``f`` (and ``target``: what is compiled)
    steps: list[list[str]] = field(default_factory=list)  # mutations before each call

    def script(self, backend: str = "eager") -> str:
        """A self-contained reproducer: eager and compiled side by side at each step."""
        lines = [HEADER, self.setup, f"compiled = tp.compile(target, backend={backend!r})",
                 "def check(step):",
                 "    try:\n        want = target(x)\n    except Exception as e:\n        want = e",
                 "    try:\n        got = compiled(x)\n    except Exception as e:\n        got = e",
                 "    print(step, 'eager:', want, 'compiled:', got)", ""]
        for i, muts in enumerate(self.steps):
            lines += [_guarded(m) for m in muts]
            lines.append(f"check({i})")
        return "\n".join(lines) + "\n"


# -- the state sites: (setup lines, read expression, how the read is used, mutations) --------

def _site(rng: random.Random, k: int) -> tuple[list[str], str, str, list[str], str]:
    """One piece of state ``k``: setup lines, the expression that reads it, the use
    (``factor``/``dtype``/``shape``/``steps``), mutations, and where the read happens
    (``f``, ``helper`` or ``self``)."""
    v = rng.choice([2.0, 3, 0.5, -1.0, 4])
    w = rng.choice([5.0, 2, -0.0, 7, 1.5, True])
    kind = rng.choice(["global", "global_helper", "closure", "dict", "list", "namespace", "dataclass",
                       "class_attr", "global_tensor", "module_dict", "module_obj", "module_list",
                       "module_class_attr", "dtype", "shape", "loop", "nested",
                       # the state of function objects: defaults, partials, methods, code
                       "defaults", "kwdefaults", "own_kwdefault", "tensor_default", "partial", "module_partial",
                       "method", "code"])
    name = f"S{k}"
    if kind in ("defaults", "kwdefaults", "own_kwdefault", "tensor_default", "partial", "module_partial",
                "method", "code"):
        return _function_site(rng, kind, k, v, w)
    if kind in ("global", "global_helper"):
        where = "helper" if kind == "global_helper" else "f"
        return [f"{name} = {v!r}"], name, "factor", [f"{name} = {w!r}", f"{name} = {v!r}"], where
    if kind == "closure":
        return [f"{name} = [{v!r}]"], f"{name}[0]", "factor", [f"{name}[0] = {w!r}"], "f"
    if kind == "dict":
        return ([f"{name} = {{'a': {v!r}, 'b': 1}}"], f"{name}['a'] * {name}.get('b', 0) + len({name}) - 2",
                "factor", [f"{name}['a'] = {w!r}", f"{name}['c'] = 0", f"{name}.pop('b', None)",
                           f"{name} = {{'a': {w!r}, 'b': 2}}"], rng.choice(["f", "helper"]))
    if kind == "list":
        return ([f"{name} = [1.0, {v!r}]"], f"{name}[-1] + sum({name}) * 0 + len({name})", "factor",
                [f"{name}.append({w!r})", f"{name}[-1] = {w!r}", f"{name}.pop()" + " if len(" + name + ") > 1 else None",
                 f"{name} = [{w!r}]"], rng.choice(["f", "helper"]))
    if kind == "namespace":
        return ([f"{name} = types.SimpleNamespace(z={v!r}, inner=types.SimpleNamespace(q=1))"],
                f"{name}.z * {name}.inner.q", "factor",
                [f"{name}.z = {w!r}", f"{name}.inner.q = 3", f"{name}.inner = types.SimpleNamespace(q=-2)",
                 f"{name} = types.SimpleNamespace(z={w!r}, inner=types.SimpleNamespace(q=1))"],
                rng.choice(["f", "helper"]))
    if kind == "dataclass":
        return ([f"@dataclasses.dataclass\nclass C{k}:\n    scale: float = {v!r}\n    extra: list = "
                 f"dataclasses.field(default_factory=lambda: [1])", f"{name} = C{k}()"],
                f"{name}.scale + {name}.extra[0]", "factor",
                [f"{name}.scale = {w!r}", f"{name}.extra.append(5)", f"{name}.extra[0] = 4",
                 f"{name} = C{k}(scale={w!r})"], rng.choice(["f", "helper"]))
    if kind == "class_attr":
        return ([f"class K{k}:\n    factor = {v!r}"], f"K{k}.factor", "factor",
                [f"K{k}.factor = {w!r}"], rng.choice(["f", "helper"]))
    if kind == "global_tensor":
        return ([f"{name} = tp.full((4,), {float(v)!r})"], name, "tensor",
                [f"{name} = tp.full((4,), {float(w)!r})", f"{name}.add_(1.0)", f"{name}.mul_(-1.0)"],
                rng.choice(["f", "helper"]))
    if kind == "module_dict":
        return [f"self.opts{k} = {{'k': 2.0}}"], f"self.opts{k}['k']", "factor", [f"target.opts{k}['k'] = {w!r}",
                                                    f"target.opts{k} = {{'k': {v!r}}}"], "self"
    if kind == "module_obj":
        return [f"self.cfg{k} = types.SimpleNamespace(z=2.0)"], f"self.cfg{k}.z", "factor", [f"target.cfg{k}.z = {w!r}",
                                                f"target.cfg{k} = types.SimpleNamespace(z={w!r})"], "self"
    if kind == "module_list":
        return [f"self.items{k} = [1.0, 3.0]"], f"self.items{k}[-1]", "factor", [f"target.items{k}.append({w!r})",
                                                    f"target.items{k}[-1] = {w!r}"], "self"
    if kind == "module_class_attr":
        return [f"CLASS: gain{k} = 2.0"], f"self.gain{k}", "factor", [f"type(target).gain{k} = {w!r}", f"target.gain{k} = {w!r}",
                                               f"target.__dict__.pop('gain{k}', None)"], "self"
    if kind == "dtype":
        return ([f"{name} = types.SimpleNamespace(dtype=tp.float32)"], f"{name}.dtype", "dtype",
                [f"{name}.dtype = tp.float64", f"{name}.dtype = tp.int32", f"{name}.dtype = tp.float32"],
                rng.choice(["f", "helper"]))
    if kind == "shape":
        return ([f"{name} = {{'shape': (2, -1)}}"], f"{name}['shape']", "shape",
                [f"{name}['shape'] = (-1,)", f"{name}['shape'] = (2, 2, -1)", f"{name}['shape'] = (2, -1)"],
                rng.choice(["f", "helper"]))
    if kind == "loop":
        return ([f"{name} = types.SimpleNamespace(n=2)"], f"{name}.n", "steps",
                [f"{name}.n = 3", f"{name}.n = 0", f"{name}.n = 1"], rng.choice(["f", "helper"]))
    # nested: a dict of lists of objects, read two levels down
    return ([f"{name} = {{'layers': [types.SimpleNamespace(w={v!r})]}}"], f"{name}['layers'][-1].w", "factor",
            [f"{name}['layers'][-1].w = {w!r}", f"{name}['layers'].append(types.SimpleNamespace(w=9))",
             f"{name}['layers'] = []"], rng.choice(["f", "helper"]))


def _function_site(rng: random.Random, kind: str, k: int, v: Any, w: Any
                   ) -> tuple[list[str], str, str, list[str], str]:
    """A site whose state is held by a function object: a helper's defaults or keyword
    defaults, a keyword default of the compiled function (or of the module's ``forward``)
    itself, a tensor default, a ``functools.partial`` (a global, or held by the module), a
    method of an object, a helper's code."""
    name = f"S{k}"
    where = rng.choice(["f", "helper"])
    if kind == "defaults":
        return ([f"def {name}(s={v!r}, t=1):\n    return s * t"], f"{name}()", "factor",
                [f"{name}.__defaults__ = ({w!r}, 1)", f"{name}.__defaults__ = ({v!r}, 2)",
                 f"{name}.__defaults__ = ({v!r}, 1)"], where)
    if kind == "kwdefaults":
        return ([f"def {name}(*, s={v!r}):\n    return s"], f"{name}()", "factor",
                [f"{name}.__kwdefaults__['s'] = {w!r}", f"{name}.__kwdefaults__ = {{'s': {v!r}}}"], where)
    if kind == "own_kwdefault":  # a keyword-only parameter of f (or forward) with a default
        own = f"getattr(type(target), 'forward', target).__kwdefaults__['p{k}']"
        return ([f"PARAM: p{k}={v!r}"], f"p{k}", "factor", [f"{own} = {w!r}", f"{own} = {v!r}"], "f")
    if kind == "tensor_default":
        return ([f"def {name}(t=tp.full((4,), {float(v)!r})):\n    return t"], f"{name}()", "tensor",
                [f"{name}.__defaults__[0].add_(1.0)", f"{name}.__defaults__ = (tp.full((4,), {float(w)!r}),)",
                 f"{name}.__defaults__[0].mul_(-1.0)"], where)
    if kind == "partial":
        return ([f"def {name}_fn(a, b=1):\n    return a * b", f"{name} = functools.partial({name}_fn, {v!r})"],
                f"{name}()", "factor",
                [f"{name}.keywords['b'] = {w!r}", f"{name}.keywords.clear()",
                 f"{name}.__setstate__(({name}_fn, ({w!r},), {{}}, None))",
                 f"{name} = functools.partial({name}_fn, {w!r}, b=2)"], where)
    if kind == "module_partial":  # (pow: a C function the module's partial calls, pow(v, exp=1) == v)
        return ([f"self.part{k} = functools.partial(pow, {v!r}, exp=1)"], f"self.part{k}()", "factor",
                [f"target.part{k}.keywords['exp'] = 2", f"target.part{k}.__setstate__((pow, ({w!r},), {{'exp': 1}}, None))",
                 f"target.part{k} = functools.partial(pow, {w!r}, exp=1)"], "self")
    if kind == "method":
        return ([f"class O{k}:\n    def __init__(self):\n        self.s = {v!r}\n    def get(self):\n"
                 f"        return self.s", f"{name} = O{k}()"], f"{name}.get()", "factor",
                [f"{name}.s = {w!r}", f"O{k}.get = lambda self: -self.s", f"{name}.get = lambda: {w!r}",
                 f"{name}.__dict__.pop('get', None)"], where)
    # code: a helper whose __code__ is replaced
    return ([f"def {name}():\n    return {v!r}", f"def {name}_alt():\n    return {w!r}"], f"{name}()", "factor",
            [f"{name}.__code__ = {name}_alt.__code__", f"{name}.__code__ = (lambda: {v!r}).__code__"], where)


def _use(expr: str, use: str) -> list[str]:
    if use == "factor":
        return [f"y = y * ({expr})"]
    if use == "tensor":
        return [f"y = y + {expr}[:y.shape[-1]].sum()"]
    if use == "dtype":
        return [f"y = y.to({expr})"]
    if use == "shape":
        return [f"y = y.reshape({expr}).flatten()"]
    return [f"for _ in range({expr}):", "    y = y + 1"]


def generate(seed: int, index: int) -> Scenario:
    rng = random.Random(seed * 1_000_003 + index)
    sites = [_site(rng, k) for k in range(rng.randint(1, 3))]
    as_module = any(where == "self" for *_, where in sites) or rng.random() < 0.25
    setup: list[str] = []
    f_body: list[str] = []
    helper_body: list[str] = []
    init: list[str] = []
    class_body: list[str] = []
    params: list[str] = []  # keyword-only parameters of f (or forward) with their defaults
    for lines, expr, use, _, where in sites:
        params += [line[len("PARAM: "):] for line in lines if line.startswith("PARAM: ")]
        lines = [line for line in lines if not line.startswith("PARAM: ")]
        if where == "self":
            class_body += [line[len("CLASS: "):] for line in lines if line.startswith("CLASS: ")]
            init += [line for line in lines if not line.startswith("CLASS: ")]
        else:
            setup += lines
        (helper_body if where == "helper" else f_body).extend(_use(expr, use))
    uses_self = any("self." in line for line in f_body)
    signature = ", *, " + ", ".join(params) if params else ""
    src: list[str] = list(setup)
    if helper_body:
        src.append("def helper(y):\n" + textwrap.indent("\n".join(helper_body + ["return y"]), "    "))
    body = (["y = helper(y)"] if helper_body else []) + f_body
    if as_module or uses_self:
        src.append("class M(tp.nn.Module):" + "".join(f"\n    {line}" for line in class_body))
        src.append("    def __init__(self):\n        super().__init__()\n"
                   + "".join(f"        {line}\n" for line in init) + "        self.lin = tp.nn.Identity()")
        src.append(f"    def forward(self, x{signature}):\n        y = self.lin(x)\n"
                   + textwrap.indent("\n".join(body + ["return y * 1"]), "        "))
        src.append("target = M()")
    else:
        src.append(f"def f(x{signature}):\n    y = x * 1\n" + textwrap.indent("\n".join(body + ["return y"]), "    "))
        src.append("target = f")
    src.append("x = tp.arange(8, dtype=tp.float32).reshape(2, 4) - 3")
    scenario = Scenario(seed, index, "\n".join(src))
    mutations = [m for *_, muts, _ in sites for m in muts]
    mutations += ["x = tp.arange(8, dtype=tp.float32).reshape(2, 4) * 2",     # new values, same type
                  "x = tp.arange(12, dtype=tp.float32).reshape(3, 4)",         # new shape
                  "x = tp.arange(8, dtype=tp.int32).reshape(2, 4)"]            # new dtype
    scenario.steps.append([])
    for _ in range(rng.randint(3, 6)):
        scenario.steps.append(rng.sample(mutations, k=min(len(mutations), rng.choice([0, 1, 1, 2]))))
    return scenario


# -- running ----------------------------------------------------------------------------------

def _outcome(fn, x):
    try:
        y = fn(x)
    except Exception as exc:  # noqa: BLE001 - compared by type
        return ("raises", type(exc).__name__)
    return ("value", str(y.dtype), tuple(y.shape), np.asarray(y.detach().numpy()).tolist())


def run_one(scenario: Scenario, backend: str = "eager") -> str | None:
    """None when every step matched, else a report with the reproducer."""
    module = types.ModuleType(f"fuzz_state_{scenario.seed}_{scenario.index}")
    sys.modules[module.__name__] = module  # dataclasses look their module up
    ns = module.__dict__
    filename = f"<fuzz-state {scenario.seed}:{scenario.index}>"
    try:
        exec(compile(HEADER + scenario.setup, filename, "exec"), ns)  # noqa: S102 - generated here
        compiled = tp.compile(ns["target"], backend=backend)
        for i, muts in enumerate(scenario.steps):
            for m in muts:
                exec(compile(_guarded(m), filename, "exec"), ns)  # noqa: S102
            want = _outcome(ns["target"], ns["x"])
            got = _outcome(compiled, ns["x"])
            if got != want:
                return (f"state fuzz mismatch (seed {scenario.seed}, index {scenario.index}) at step {i} "
                        f"after {muts or 'no change'}:\n  eager:    {want}\n  compiled: {got}\n"
                        f"reproducer:\n{textwrap.indent(scenario.script(backend), '    ')}")
    except Exception:  # noqa: BLE001 - a crash of the harness or the compiler is a failure too
        return (f"state fuzz error (seed {scenario.seed}, index {scenario.index}):\n{traceback.format_exc()}"
                f"reproducer:\n{textwrap.indent(scenario.script(backend), '    ')}")
    finally:
        tp.compiler.reset()
        sys.modules.pop(module.__name__, None)
    return None


def _guarded(mutation: str) -> str:
    """A mutation that may not apply to the state it meets (``[-1]`` of an emptied list) is
    skipped, in the run and in the reproducer alike."""
    return f"try:\n    {mutation}\nexcept (IndexError, KeyError, AttributeError):\n    pass"


def run(seed: int, count: int, start: int = 0, backend: str = "eager") -> list[str]:
    return [r for i in range(start, start + count) if (r := run_one(generate(seed, i), backend)) is not None]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--count", type=int, default=1000)
    p.add_argument("--start", type=int, default=0)
    p.add_argument("--index", type=int, help="run (and print) this one scenario")
    p.add_argument("--backend", default="eager")
    args = p.parse_args(argv)
    if args.index is not None:
        s = generate(args.seed, args.index)
        print(s.script(args.backend))
        report = run_one(s, args.backend)
        print(report or "matched")
        return 1 if report else 0
    t0 = time.perf_counter()
    failures = 0
    for i in range(args.start, args.start + args.count):
        report = run_one(generate(args.seed, i), args.backend)
        if report:
            failures += 1
            print(report, flush=True)
    print(f"state fuzz: {args.count} scenarios, {failures} mismatches, seed {args.seed}, backend "
          f"{args.backend}, {time.perf_counter() - t0:.1f} s")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
