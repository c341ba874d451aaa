"""tpc-opt: an ``mlir-opt`` for the tp dialect.

Reads MLIR (a file or stdin), verifies tp ops through the op registry, runs a pass pipeline
that may mix tp passes with upstream and IREE passes, and prints the result.

    tpc-opt model.mlir -p 'tp-canonicalize,tp-cse'
    tpc-opt model.mlir --tp-canonicalize --tp-cse -o out.mlir
    tpc-opt bad.mlir --split-input-file --verify-diagnostics
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["main"]

_SPLIT = re.compile(r"^// -----\s*$", re.MULTILINE)
_EXPECTED = re.compile(r"//\s*expected-(error|warning|remark|note)\s*(@[+-]?\d+|@above|@below)?\s*\{\{(.*?)\}\}")


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        ours = version("tensorplay")
    except PackageNotFoundError:
        ours = "unknown"
    try:
        iree = version("iree-base-compiler")
    except PackageNotFoundError:
        iree = "unknown"
    return f"tpc-opt (tensorplay {ours}, iree-base-compiler {iree})"


def _parser() -> argparse.ArgumentParser:
    from tensorplay.passes import PIPELINES, all_passes

    p = argparse.ArgumentParser(prog="tpc-opt", description=__doc__.splitlines()[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("input", nargs="?", default="-", help="input file ('-' or absent: stdin)")
    p.add_argument("-o", dest="output", default="-", help="output file (default: stdout)")
    p.add_argument("-p", "--pass-pipeline", dest="pipeline", default=None,
                   help="pipeline, e.g. 'tp-canonicalize,convert-tp-to-linalg' or 'builtin.module(...)'")
    p.add_argument("--list-passes", action="store_true", help="list passes and pipelines, then exit")
    p.add_argument("--split-input-file", action="store_true",
                   help="process each '// -----' separated chunk on its own")
    p.add_argument("--verify-diagnostics", action="store_true",
                   help="check diagnostics against 'expected-error {{...}}' comments")
    p.add_argument("--mlir-print-ir-after-all", action="store_true", help="print the IR after every pass")
    p.add_argument("--print-ir-after", action="append", default=[], metavar="PASS",
                   help="print the IR after the named pass (repeatable)")
    p.add_argument("--mlir-print-debuginfo", action="store_true", help="print locations")
    p.add_argument("--version", action="version", version=_version())
    group = p.add_argument_group("passes (run in the order given, after --pass-pipeline)")
    for name, cls in all_passes().items():
        group.add_argument(f"--{name}", dest="flag_passes", action="append_const", const=name,
                           help=cls.summary())
    for name, (_, desc) in PIPELINES.items():
        group.add_argument(f"--{name}", dest="flag_passes", action="append_const", const=name,
                           help=f"pipeline: {desc}")
    return p


def _list_passes() -> str:
    from tensorplay.passes import PIPELINES, all_passes

    lines = ["Passes:"]
    for name, cls in all_passes().items():
        lines.append(f"  {name:28s} {cls.summary()}")
        for f in cls.options():
            default = "" if f.default is None else str(f.default).lower() if isinstance(f.default, bool) else f.default
            option = f"{f.name.replace('_', '-')}={default}"
            lines.append(f"    {option:30s} ({getattr(f.type, '__name__', f.type)})")
    lines.append("Pipelines:")
    for name, (text, desc) in PIPELINES.items():
        lines.append(f"  {name:28s} {desc}: {text}")
    lines.append("Upstream MLIR and IREE passes (canonicalize, cse, linalg-..., iree-...) are accepted "
                 "in -p pipelines too.")
    return "\n".join(lines) + "\n"


@dataclass
class _Chunk:
    text: str
    first_line: int  # 1-based line of the chunk's first line in the input


def _chunks(text: str, split: bool) -> list[_Chunk]:
    if not split:
        return [_Chunk(text, 1)]
    out, line, pos = [], 1, 0
    for m in _SPLIT.finditer(text):
        out.append(_Chunk(text[pos:m.start()], line))
        line += text.count("\n", pos, m.end())
        pos = m.end()
    out.append(_Chunk(text[pos:], line))
    return out


def _process(chunk: _Chunk, filename: str, args: argparse.Namespace, out: list[str]) -> list[str]:
    """Run one chunk; returns its diagnostics as 'file:line:col: error: msg' strings."""
    from tensorplay.dialects.tp import mlir
    from tensorplay.passes import PipelineError, run_pipeline

    # Blank lines in front keep line numbers equal to the input file's.
    padded = "\n" * (chunk.first_line - 1) + chunk.text
    try:
        module = mlir.parse(padded, filename)
    except mlir.DiagnosticError as exc:
        return [str(d) for d in exc.diagnostics]
    pipeline = ",".join(p for p in ([args.pipeline] if args.pipeline else []) + (args.flag_passes or []))

    def after(step: str, mod) -> None:
        if args.mlir_print_ir_after_all or step in args.print_ir_after:
            # as mlir-opt: dumps go to stderr, the result to the output
            sys.stderr.write(f"// -----// IR Dump After {step} //----- //\n"
                             + mlir.print_module(mod, debuginfo=args.mlir_print_debuginfo))

    if pipeline:
        try:
            run_pipeline(module, pipeline, after_each=after, source_name="tpc-opt")
        except PipelineError as exc:
            return [_pipeline_diagnostic(str(exc), filename)]
        except ValueError as exc:
            return [f"{filename}: error: {exc}"]
    out.append(mlir.print_module(module, debuginfo=args.mlir_print_debuginfo))
    return []


def _pipeline_diagnostic(message: str, filename: str) -> str:
    first = message.splitlines()[0]
    m = re.search(r"(\S+:\d+:\d+): error: (.*)", message)
    if m:
        return f"{m.group(1)}: error: {m.group(2)}"
    return f"{filename}: error: {first}"


def _expected(chunk: _Chunk) -> list[tuple[int, str, str]]:
    """(line, severity, message) for every expected-* comment in the chunk."""
    out = []
    for i, line in enumerate(chunk.text.splitlines()):
        lineno = chunk.first_line + i
        for m in _EXPECTED.finditer(line):
            where = m.group(2)
            target = lineno
            if where in ("@above",):
                target -= 1
            elif where in ("@below",):
                target += 1
            elif where:
                target += int(where[1:])
            out.append((target, m.group(1), m.group(3)))
    return out


def _check(chunk: _Chunk, diags: list[str], filename: str) -> list[str]:
    """Mismatches between produced and expected diagnostics, as error lines."""
    problems = []
    remaining = list(diags)
    for line, severity, message in _expected(chunk):
        hit = next((d for d in remaining if re.search(rf":{line}:\d+: {severity}: ", d) and message in d), None)
        if hit is None:
            problems.append(f"{filename}:{line}: error: expected {severity} \"{message}\" was not produced")
        else:
            remaining.remove(hit)
    problems += [f"{d} (unexpected)" for d in remaining]
    return problems


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.list_passes:
        sys.stdout.write(_list_passes())
        return 0
    filename = "<stdin>" if args.input == "-" else args.input
    try:
        text = sys.stdin.read() if args.input == "-" else open(args.input, encoding="utf-8").read()
    except OSError as exc:
        print(f"tpc-opt: error: cannot read {filename}: {exc.strerror}", file=sys.stderr)
        return 1
    outputs: list[str] = []
    failed = False
    for chunk in _chunks(text, args.split_input_file):
        diags = _process(chunk, filename, args, outputs)
        if args.verify_diagnostics:
            problems = _check(chunk, diags, filename)
            for p in problems:
                print(p, file=sys.stderr)
            failed |= bool(problems)
        elif diags:
            for d in diags:
                print(d, file=sys.stderr)
            failed = True
    result = "// -----\n".join(outputs)
    if args.output == "-":
        sys.stdout.write(result)
    else:
        from tensorplay.tools.regen import write_atomic
        from pathlib import Path

        write_atomic(Path(args.output), result)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
