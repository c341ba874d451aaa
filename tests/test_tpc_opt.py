"""tpc-opt as a command: exit codes, diagnostics without tracebacks, options."""

from __future__ import annotations

import subprocess
import sys

import pytest

GOOD = """func.func @f(%a: tensor<2xf32>) -> tensor<2xf32> {
  %0 = "tp.exp"(%a) : (tensor<2xf32>) -> tensor<2xf32> loc("model.py":3:9)
  %1 = "tp.exp"(%a) : (tensor<2xf32>) -> tensor<2xf32>
  %2 = "tp.add"(%0, %1) : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  return %2 : tensor<2xf32>
}
"""


def tpc_opt_process(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    """tpc-opt in a fresh interpreter, as users run it."""
    return subprocess.run([sys.executable, "-m", "tensorplay.tools.tpc_opt", *args], input=stdin,
                          capture_output=True, text=True)


def tpc_opt(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    """tpc-opt's main() in this process (same behaviour, no interpreter start-up)."""
    import contextlib
    import io

    from tensorplay.tools.tpc_opt import main

    out, err = io.StringIO(), io.StringIO()
    old_stdin = sys.stdin
    sys.stdin = io.StringIO(stdin or "")
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                rc = main(list(args))
            except SystemExit as exc:  # argparse exits for --version
                rc = exc.code or 0
    finally:
        sys.stdin = old_stdin
    return subprocess.CompletedProcess(args, rc, out.getvalue(), err.getvalue())


def test_reads_stdin_and_runs_a_pipeline():
    proc = tpc_opt("-p", "tp-cse", stdin=GOOD)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count('"tp.exp"') == 1


def test_flags_per_pass_and_builtin_module_form_agree(tmp_path):
    src = tmp_path / "in.mlir"
    src.write_text(GOOD)
    a = tpc_opt(str(src), "--tp-cse", "--tp-dce")
    b = tpc_opt(str(src), "-p", "builtin.module(tp-cse,tp-dce)")
    assert a.returncode == b.returncode == 0
    assert a.stdout == b.stdout


def test_output_file_and_debuginfo(tmp_path):
    src, out = tmp_path / "in.mlir", tmp_path / "out.mlir"
    src.write_text(GOOD)
    proc = tpc_opt(str(src), "-o", str(out), "--mlir-print-debuginfo")
    assert proc.returncode == 0 and proc.stdout == ""
    assert 'loc("model.py":3:9)' in out.read_text()


def test_invalid_input_prints_diagnostic_and_exits_1_without_traceback(tmp_path):
    src = tmp_path / "bad.mlir"
    src.write_text(GOOD.replace('"tp.add"(%0, %1) : (tensor<2xf32>, tensor<2xf32>)',
                                '"tp.add"(%0, %1, %1) : (tensor<2xf32>, tensor<2xf32>, tensor<2xf32>)'))
    proc = tpc_opt_process(str(src))
    assert proc.returncode == 1
    assert f"{src}:4:8: error: tp.add: expected 2 operand(s)" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_syntax_error_and_missing_file():
    proc = tpc_opt(stdin="func.func @f( {")
    assert proc.returncode == 1 and "<stdin>:1:14: error:" in proc.stderr and "Traceback" not in proc.stderr
    proc = tpc_opt("/nonexistent/x.mlir")
    assert proc.returncode == 1 and "cannot read" in proc.stderr


def test_unknown_pass_option_is_an_error():
    proc = tpc_opt("-p", "tp-canonicalize{bogus=1}", stdin=GOOD)
    assert proc.returncode == 1 and "unknown option 'bogus=1'" in proc.stderr


def test_print_ir_after_all_and_after_one_pass():
    proc = tpc_opt("-p", "tp-cse,tp-dce", "--mlir-print-ir-after-all", stdin=GOOD)
    assert "IR Dump After tp-cse" in proc.stderr and "IR Dump After tp-dce" in proc.stderr
    assert "IR Dump" not in proc.stdout and '"tp.add"' in proc.stdout
    proc = tpc_opt("-p", "tp-cse,tp-dce", "--print-ir-after=tp-dce", stdin=GOOD)
    assert "IR Dump After tp-dce" in proc.stderr and "IR Dump After tp-cse" not in proc.stderr


def test_list_passes_and_version():
    proc = tpc_opt("--list-passes")
    assert proc.returncode == 0
    for name in ("tp-verify", "tp-canonicalize", "tp-cse", "tp-dce", "tp-optimize", "max-iterations", "donate-buffers"):
        assert name in proc.stdout
    # options print in the syntax -p takes back
    assert "fuse-outer-reductions=true" in proc.stdout
    proc = tpc_opt("--version")
    assert "tensorplay" in proc.stdout and "iree-base-compiler" in proc.stdout


def test_upstream_passes_mix_with_tp_passes():
    proc = tpc_opt("-p", "tp-cse,canonicalize,cse", stdin=GOOD)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("pipeline", ["no-such-pass", "tp-cse,(", "tp-cse}"])
def test_bad_pipelines_are_errors(pipeline):
    proc = tpc_opt("-p", pipeline, stdin=GOOD)
    assert proc.returncode == 1 and "error" in proc.stderr and "Traceback" not in proc.stderr


def test_failing_pipeline_from_python_names_pass_and_writes_reproducer():
    from tensorplay.dialects.tp import mlir as M
    from tensorplay.passes import PipelineError, run_pipeline

    module = M.parse(GOOD)
    with pytest.raises(PipelineError) as info:
        run_pipeline(module, "tp-cse,no-such-pass")
    err = info.value
    assert err.pass_name == "no-such-pass"
    assert "reproduce with: tpc-opt" in str(err)
    path = str(err).split("the input IR of that pass is in ")[1].split()[0]
    replay = tpc_opt_process(path, "-p", "no-such-pass")
    assert replay.returncode == 1


def test_a_pass_that_builds_invalid_ir_fails_with_its_name_not_a_crash():
    from tensorplay.dialects.ir import func, ir
    from tensorplay.dialects.tp import mlir as M
    from tensorplay.passes import Pass, PipelineError, register_pass, run_pipeline
    from tensorplay.passes import registry

    @register_pass
    class BreakReturns(Pass):
        """Test pass: makes every function return nothing, which MLIR rejects."""

        name = "test-break-returns"

        def run(self, module):
            for fn in module.regions[0].blocks[0].operations:
                block = fn.regions[0].blocks[0]
                with ir.InsertionPoint.at_block_terminator(block), ir.Location.unknown():
                    func.ReturnOp([])
                list(block.operations)[-1].erase()

    try:
        module = M.parse(GOOD)
        with pytest.raises(PipelineError, match="pass 'test-break-returns' failed: produced invalid IR") as info:
            run_pipeline(module, "tp-cse,test-break-returns")
        assert info.value.pass_name == "test-break-returns"
    finally:
        registry._PASSES.pop("test-break-returns")
