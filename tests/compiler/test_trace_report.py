"""The trace folder (TENSORPLAY_TRACE_DIR / options['trace_dir']), the HTML report built from it,
and graph pictures from explain() and tpc-opt."""

from __future__ import annotations

import html.parser
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import tensorplay as tp
from tensorplay.compiler import tracedir
from tensorplay.compiler.backends.iree import count_dispatches
from tensorplay.compiler.graphviz import dot_available
from tensorplay.examples.models import GPTConfig, build_gpt
from tensorplay.tools.report import build_report

pytestmark = pytest.mark.iree

needs_dot = pytest.mark.skipif(not dot_available(), reason="Graphviz's dot is not installed (apt-get install graphviz)")
STAGES = ("01-tp-graph.txt", "02-tp.mlir", "03-passes", "04-linalg.mlir", "05-iree-flags.txt", "06-dispatches.txt",
          "compile.json", "graph.dot")
#: the tp passes of the iree-cpu lowering pipeline, in order
PASSES = ("tp-verify", "tp-canonicalize", "tp-cse", "tp-dce", "convert-tp-to-linalg", "canonicalize", "cse")
THIS = Path(__file__).name


def _gpt():
    tp.manual_seed(0)
    return build_gpt(tp, GPTConfig(vocab_size=32, block_size=16, n_layer=1, n_head=2, n_embd=16))


@pytest.fixture(scope="module")
def traced(tmp_path_factory):
    """One program traced through every path: a nanoGPT step with a graph break called at two
    batch sizes (a recompile), the compiled model trained one step (forward and backward graphs),
    and the same model compiled again after reset (artifact cache hits)."""
    root = tmp_path_factory.mktemp("trace")
    tp.compiler.reset()
    model = _gpt()

    def step(idx):
        logits, _ = model(idx)
        if logits.abs().sum().item() > 0:  # a graph break
            logits = logits * 2.0
        return logits.softmax(-1)

    f = tp.compile(step, options={"trace_dir": str(root)})
    outs = {}
    for batch in (2, 2, 3):
        idx = tp.randint(0, 32, (batch, 8))
        outs[batch] = (f(idx).detach().numpy(), step(idx).detach().numpy())
    old = os.environ.get(tracedir.ENV)
    os.environ[tracedir.ENV] = str(root)
    try:
        g = tp.compile(model)
        logits, _ = g(tp.randint(0, 32, (2, 8)))
        logits.sum().backward()
        tp.compiler.reset()
        g2 = tp.compile(model)
        g2(tp.randint(0, 32, (2, 8)))
    finally:
        if old is None:
            del os.environ[tracedir.ENV]
        else:
            os.environ[tracedir.ENV] = old
    tp.compiler.reset()
    return root, outs


def _events(folder):
    return [json.loads(line) for line in (folder / "events.jsonl").read_text().splitlines()]


def test_traced_results_equal_eager(traced):
    _, outs = traced
    for compiled, eager in outs.values():
        np.testing.assert_allclose(compiled, eager, rtol=1e-5, atol=1e-6)


def test_function_folders_and_events(traced):
    root, _ = traced
    names = sorted(p.name for p in root.iterdir() if (p / "function.json").exists())
    assert names == ["GPT", "step"]
    info = json.loads((root / "step" / "function.json").read_text())
    assert info["backend"] == "iree-cpu" and info["source"].endswith(f"{THIS}:{_step_line()}")
    assert json.loads((root / "GPT" / "function.json").read_text())["qualname"].endswith("GPT.forward")
    events = _events(root / "step")
    kinds = [e["event"] for e in events]
    assert kinds[0] == "capture" and events[0]["reason"] == "first call"
    recompile = [e for e in events if e["event"] == "recompile"]
    assert len(recompile) == 1 and "(2, 8) -> (3, 8)" in recompile[0]["reason"]
    breaks = [e for e in events if e["event"] == "break"]
    assert breaks and all("item()" in e["reason"] and e["loc"].endswith(f"{THIS}:{_step_line() + 2}") for e in breaks)
    assert kinds.count("compile") >= 4


def _step_line():
    """The line of ``def step`` in the fixture."""
    lines = Path(__file__).read_text().splitlines()
    return next(i for i, line in enumerate(lines, 1) if line.strip() == "def step(idx):")


def test_entry_stages(traced):
    root, _ = traced
    entries = sorted(p.name for p in (root / "step").iterdir() if p.is_dir())
    assert entries == ["step", "step_1"]
    first = json.loads((root / "step" / "step" / "entry.json").read_text())
    again = json.loads((root / "step" / "step_1" / "entry.json").read_text())
    assert first["reason"] == "first call" and first["kind"] == "segmented" and not first["recompile"]
    assert again["recompile"] and "(2, 8) -> (3, 8)" in again["reason"]
    assert first["hits"] == 1  # the second call at batch 2 (written when reset() forgot the entry)
    entry = root / "step" / "step"
    capture = (entry / "capture.txt").read_text()
    assert "tp.matmul" in capture and f"{THIS}:" in capture and "# graph break at" in capture
    assert "models.py:" in capture  # ops carry the user's file:line (the model's code)
    breaks = (entry / "breaks.txt").read_text()
    assert f"{THIS}:{_step_line() + 2}" in breaks and "logits.abs().sum().item()" in breaks
    guards = (entry / "guards.txt").read_text()
    assert "idx: Tensor int64[2, 8]" in guards and "global 'model'" not in guards  # a closure, not a global
    assert "closure" in guards or "model" in guards
    dot = (entry / "graph.dot").read_text()
    assert "graph break: Tensor.item()" in dot and dot.count("subgraph cluster_") >= 2


def test_graph_stages(traced):
    root, _ = traced
    graphs = [p for p in (root / "step" / "step").iterdir() if p.is_dir()]
    assert graphs
    for g in graphs:
        for stage in STAGES:
            assert (g / stage).exists(), f"{g.name}: {stage} missing"
        passes = sorted(p.name for p in (g / "03-passes").iterdir())
        assert [re.sub(r"^\d+-|\.mlir$", "", p) for p in passes] == list(PASSES)
        assert "loc(" in (g / "02-tp.mlir").read_text()  # with locations
        assert "linalg." in (g / "04-linalg.mlir").read_text() or "tensor." in (g / "04-linalg.mlir").read_text()
        flags = (g / "05-iree-flags.txt").read_text().splitlines()
        assert "--iree-hal-target-device=local" in flags or any(f.startswith("--iree-hal-target") for f in flags)
        rec = json.loads((g / "compile.json").read_text())
        assert rec["backend"] == "iree-cpu" and rec["compile_s"] > 0 and rec["ops"] > 0
        assert rec["artifact_cache"] and "driver" in rec
        names = (g / "06-dispatches.txt").read_text().splitlines()[1:]
        assert len(names) == rec["dispatches"] > 0
        assert all(n.startswith(f"{g.name}_dispatch_") for n in names)


def test_dispatch_list_matches_iree(traced):
    """The kernels listed are IREE's: each is a dispatch of the flow-level IR, in dispatch order
    (identical dispatches share one kernel, so there may be fewer kernels than dispatches)."""
    from iree.compiler import compile_str

    from tensorplay.compiler.backends.iree import compile_to_vmfb, get_iree_backend, lower_to_linalg, tp_mlir
    from tensorplay.compiler.backends.modes import validate_options

    model = _gpt()
    graph = tp.compiler.explain(model, tp.randint(0, 32, (2, 8))).graphs[0]
    names = tracedir.dispatch_names(compile_to_vmfb(graph), graph.name)
    b = get_iree_backend("iree-cpu")
    text = lower_to_linalg(tp_mlir(b.prepare(graph).graph), graph.name, "iree-cpu")
    flow = compile_str(text, extra_args=[*b.flags(validate_options({})), "--compile-to=flow"]).decode()
    sites = re.findall(r"flow\.dispatch @\w+::@(\w+)", flow)
    assert len(sites) == count_dispatches(graph)
    assert set(names) <= set(sites) and len(names) == len(set(names))
    numbers = [int(re.search(r"_dispatch_(\d+)", n).group(1)) for n in names]
    assert numbers == sorted(numbers) and len(names) > 5


def test_training_and_cache_hits(traced):
    root, _ = traced
    entry = root / "GPT" / "GPT"
    rec = json.loads((entry / "entry.json").read_text())
    assert rec["kind"] == "graph" and rec["compile_s"] > 0 and rec["first_call_s"] > 0
    kinds = {i["kind"] for i in rec["inputs"]}
    assert {"argument", "parameter", "buffer"} <= kinds
    assert (entry / "GPT_backward" / "04-linalg.mlir").exists()  # the backward, compiled on backward()
    dot = (entry / "graph.dot").read_text()
    assert "parameter transformer.wte.weight" in dot
    again = json.loads((root / "GPT" / "GPT.2" / "entry.json").read_text())
    assert again["reason"] == "first call" and not again["recompile"]  # (after reset: a new first call)
    hits = json.loads((root / "GPT" / "GPT.2" / "GPT" / "compile.json").read_text())["artifact_cache"]
    assert hits and all(h["hit"] for h in hits)
    for stage in STAGES:  # a cache hit lowers anyway, so every stage is there
        assert (root / "GPT" / "GPT.2" / "GPT" / stage).exists(), stage
    misses = json.loads((entry / "GPT" / "compile.json").read_text())["artifact_cache"]
    assert len(misses) == 1


class _Links(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.hrefs, self.svgs, self.texts, self.graph_divs = [], 0, [], 0

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "a" and attrs.get("href") and not attrs["href"].startswith("#"):
            self.hrefs.append(attrs["href"])
        if tag == "svg":
            self.svgs += 1
        if tag == "div" and attrs.get("class") == "graph":
            self.graph_divs += 1

    def handle_data(self, data):
        self.texts.append(data)


@needs_dot
def test_report_links_every_stage(traced, tmp_path):
    root, _ = traced
    out = build_report(root, tmp_path / "r" / "report.html")
    page = out.read_text()
    parser = _Links()
    parser.feed(page)
    files = {p.resolve() for p in root.rglob("*") if p.is_file()}
    linked = {(out.parent / h).resolve() for h in parser.hrefs}
    assert files <= linked, sorted(str(p) for p in files - linked)[:5]
    assert all(p.exists() for p in linked)
    dots = list(root.rglob("graph.dot"))
    assert parser.graph_divs >= len(list(root.glob("*/*/graph.dot"))) and parser.svgs == parser.graph_divs
    text = "".join(parser.texts)
    assert "tp.matmul" in text and "graph break" in text and "recompile" in text
    assert "(its graphs, during capture)" in text  # a segmented entry's compile time: its segments'
    for heading in ("Compiled functions", "Timings"):
        assert heading in text
    assert "no-renderer" not in page
    assert len(dots) >= 4


def test_report_without_graphviz(traced, tmp_path, monkeypatch):
    root, _ = traced
    monkeypatch.setenv("PATH", str(tmp_path))  # no dot on PATH
    out = build_report(root, tmp_path / "report.html")
    page = out.read_text()
    assert 'id="no-renderer"' in page and "apt-get install graphviz" in page
    assert "<svg" not in page and "digraph tensorplay" in html_unescape(page)


def html_unescape(text):
    import html

    return html.unescape(text)


def test_report_command_line(traced, tmp_path):
    root, _ = traced
    out = tmp_path / "cli.html"
    proc = subprocess.run([sys.executable, "-m", "tensorplay.tools.report", str(root), "-o", str(out)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert out.exists() and proc.stdout.strip() == str(out)
    bad = subprocess.run([sys.executable, "-m", "tensorplay.tools.report", str(tmp_path / "nothing")],
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "is not a folder" in bad.stderr


def test_report_rejects_folder_without_traces(tmp_path):
    with pytest.raises(ValueError, match="holds no traced function"):
        build_report(tmp_path)


def test_unset_writes_nothing(tmp_path, monkeypatch, backend):
    monkeypatch.delenv(tracedir.ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    f = tp.compile(lambda x: x.relu() + 1, backend=backend)
    f(tp.randn(3))
    assert f._group.traces == {} and tracedir.current() is None
    assert list(tmp_path.iterdir()) == []


def test_unwritable_folder_warns_and_compiles(tmp_path, backend, caplog):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    f = tp.compile(lambda x: x * 3, backend=backend, options={"trace_dir": str(blocker / "sub")})
    with caplog.at_level("WARNING", logger="tensorplay.compiler.perf"):
        out = f(tp.ones(2))
    np.testing.assert_array_equal(out.numpy(), [3.0, 3.0])
    assert any("cannot be written" in r.getMessage() for r in caplog.records)


def test_trace_dir_option_is_checked():
    with pytest.raises(ValueError, match="trace_dir"):
        tp.compile(lambda x: x, options={"trace_dir": 3})


def test_nested_region_is_marked(tmp_path, backend):
    @tp.compiler.nested_compile_region
    def block(x):
        return (x * 2).relu()

    f = tp.compile(lambda x: block(block(x) + 1), backend=backend, options={"trace_dir": str(tmp_path)})
    f(tp.randn(4))
    dot = next(tmp_path.rglob("entry.json")).parent.joinpath("graph.dot").read_text()
    assert "doubleoctagon" in dot and "call @" in dot and 'label="calls"' in dot


@needs_dot
def test_explain_saves_svgs(tmp_path):
    class Net(tp.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = tp.nn.Linear(4, 8)
            self.bn = tp.nn.BatchNorm1d(8)

        def forward(self, x):
            y = self.bn(self.fc(x))
            if y.sum().item() > -1e9:
                y = y.tanh()
            return y

    report = tp.compiler.explain(Net(), tp.randn(3, 4))
    files = report.save_graphs(tmp_path)
    assert [f.name for f in files] == [f"{g.name}.svg" for g in report.graphs] + ["call.svg"]
    call = (tmp_path / "call.svg").read_text()
    assert call.startswith("<?xml") and "<svg" in call
    for text in ("tp.matmul", "tp.tanh", "graph break", "parameter fc.weight", "buffer bn.running_mean"):
        assert text in call, text
    dots = report.save_graphs(tmp_path / "d", format="dot")
    assert all(p.read_text().startswith("digraph") for p in dots)
    with pytest.raises(ValueError, match="svg"):
        report.save_graphs(tmp_path, format="png")


def test_tpc_opt_view_op_graph(tmp_path):
    src = Path(__file__).parents[2] / "docs" / "examples" / "mlp_tail.mlir"
    proc = subprocess.run([sys.executable, "-m", "tensorplay.tools.tpc_opt", str(src), "-p", "view-op-graph",
                           "-o", os.devnull], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.lstrip().startswith("digraph G") and "tp.gelu" in proc.stderr


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
          "--disable-background-networking", "--disable-component-update", "--disable-sync"]


@needs_dot
@pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed (Debian: apt-get install chromium)")
def test_report_renders_in_chromium(traced, tmp_path):
    """The page opened from a file URL in headless Chromium: every graph picture lays out to a
    non-empty box and carries the op names; a screenshot is saved (docs/debugging.md shows one:
    TENSORPLAY_SCREENSHOT=path writes it there)."""
    root, _ = traced
    out = build_report(root, tmp_path / "report.html")
    common = [CHROMIUM, *_FLAGS, f"--user-data-dir={tmp_path / 'profile'}", "--virtual-time-budget=10000"]
    dom = subprocess.run([*common, "--dump-dom", out.as_uri()], capture_output=True, text=True, timeout=180)
    assert dom.returncode == 0, dom.stderr[-2000:]
    page = dom.stdout
    assert 'data-ready="1"' in page
    sizes = re.findall(r'<div class="graph"[^>]*data-rendered="([^"]+)"', page)
    assert sizes and len(sizes) == page.count('<div class="graph"')
    for size in sizes:
        w, h = map(int, size.split("x"))
        assert w > 50 and h > 50, size
    assert "tp.matmul" in page and "tp.softmax" in page
    shot = Path(os.environ.get("TENSORPLAY_SCREENSHOT", tmp_path / "report.png"))
    proc = subprocess.run([*common, "--window-size=1400,1800", f"--screenshot={shot}", out.as_uri()],
                          capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0 and shot.stat().st_size > 10_000
