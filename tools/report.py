"""Build one static HTML page from a trace folder (``TENSORPLAY_TRACE_DIR``).

    python -m tensorplay.tools.report TRACE_DIR [-o report.html]
    tensorplay-report TRACE_DIR

The page needs no server and no network: open it from a file URL. It lists the compiled
functions, their entries (captures and recompiles, with reasons), graph breaks, a picture of
each graph (drawn by Graphviz's ``dot`` when it is installed; without it the page says so and
shows the dot text), every stage's IR in collapsible blocks a search box filters, and a table of
compile and first-call times. Links point at the stage files themselves, so the page is written
into the trace folder by default.
"""

from __future__ import annotations

import argparse
import html
import json
import os
import re
import sys
import time
from pathlib import Path
from typing import Any

__all__ = ["build_report", "main"]

#: stage blocks larger than this are cut in the page (the link opens the whole file)
MAX_BLOCK_CHARS = 400_000

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:0;color:#212529}
header{background:#1b3a5c;color:#fff;padding:12px 20px;position:sticky;top:0;z-index:2}
header h1{font-size:18px;margin:0 0 6px 0}
header input{width:420px;padding:4px 8px;font-size:14px}
main{padding:8px 20px 40px 20px}
h2{border-bottom:2px solid #1b3a5c;padding-bottom:4px;margin-top:32px}
h3{margin:22px 0 6px 0}
table{border-collapse:collapse;margin:8px 0;font-size:13px}
td,th{border:1px solid #ced4da;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#e9ecef}
td.num{text-align:right;font-variant-numeric:tabular-nums}
details{margin:4px 0;border:1px solid #dee2e6;border-radius:4px;padding:2px 8px}
details>summary{cursor:pointer;font-family:ui-monospace,Menlo,Consolas,monospace;font-size:13px}
pre{font-size:12px;overflow:auto;max-height:600px;background:#f8f9fa;padding:6px;margin:4px 0}
.graph{overflow:auto;max-height:900px;border:1px solid #dee2e6;background:#fff;margin:6px 0}
.warn{background:#fff3cd;border:1px solid #ffe69c;padding:8px 12px;border-radius:4px}
.break{background:#f8d7da;border:1px solid #f1aeb5;padding:6px 10px;border-radius:4px;margin:4px 0}
.recompile{color:#b02a37;font-weight:600}
.muted{color:#6c757d}
.hidden{display:none}
mark{background:#ffe066}
"""

_JS = """
function tpSearch(q){
  q=q.trim().toLowerCase();
  var blocks=document.querySelectorAll('details.stage');
  var n=0;
  blocks.forEach(function(d){
    if(!q){d.classList.remove('hidden');d.open=false;return;}
    var hit=d.textContent.toLowerCase().indexOf(q)>=0;
    d.classList.toggle('hidden',!hit);
    d.open=hit; if(hit)n++;
  });
  document.getElementById('hits').textContent=q?(n+' blocks match'):'';
}
window.addEventListener('load',function(){
  document.querySelectorAll('div.graph').forEach(function(div){
    var svg=div.querySelector('svg');
    if(!svg){div.setAttribute('data-rendered','none');return;}
    var b=svg.getBBox();
    div.setAttribute('data-rendered',Math.round(b.width)+'x'+Math.round(b.height));
  });
  document.body.setAttribute('data-ready','1');
});
"""


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        return f"(could not read {path}: {exc})"


def _json(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def _events(path: Path) -> list[dict[str, Any]]:
    out = []
    try:
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                out.append(json.loads(line))
            except ValueError:
                continue
    except OSError:
        pass
    return out


def _e(text: Any) -> str:
    return html.escape(str(text), quote=True)


def _num(v: Any, unit: str = "s") -> str:
    if v is None or v == "":
        return ""
    if isinstance(v, float):
        return f"{v * 1e3:.1f} ms" if unit == "s" and v < 1 else (f"{v:.2f} s" if unit == "s" else f"{v:g}")
    return _e(v)


class _Renderer:
    """Dot text to inline SVG through Graphviz (None when it is not installed)."""

    def __init__(self) -> None:
        from tensorplay.compiler.graphviz import dot_available

        self.available = dot_available()
        self.failures: list[str] = []

    def svg(self, dot: str) -> str | None:
        if not self.available:
            return None
        from tensorplay.compiler.graphviz import render_svg

        try:
            svg = render_svg(dot)
        except Exception as exc:  # noqa: BLE001 - one bad graph keeps the rest of the page
            self.failures.append(str(exc))
            return None
        start = svg.find("<svg")
        return svg[start:] if start >= 0 else svg


class _Page:
    def __init__(self, root: Path, out: Path, renderer: _Renderer):
        self.root = root
        self.out_dir = out.parent
        self.renderer = renderer
        self.parts: list[str] = []
        self.stage_links: list[str] = []
        self.timings: list[list[str]] = []

    def link(self, path: Path, text: str | None = None) -> str:
        rel = os.path.relpath(path, self.out_dir)
        href = "/".join(_e(p) for p in Path(rel).parts)
        self.stage_links.append(rel)
        return f'<a class="stage-link" href="{href}">{_e(text or path.name)}</a>'

    def block(self, path: Path, title: str | None = None, open_: bool = False) -> str:
        text = _read(path)
        cut = ""
        if len(text) > MAX_BLOCK_CHARS:
            text, cut = text[:MAX_BLOCK_CHARS], f"\n... ({len(text) - MAX_BLOCK_CHARS} more characters: open the file)"
        lines = text.count("\n") + 1
        return (f'<details class="stage"{" open" if open_ else ""}><summary>{_e(title or path.name)} '
                f'<span class="muted">({lines} lines)</span> {self.link(path, "open")}</summary>'
                f"<pre>{_e(text + cut)}</pre></details>")

    def picture(self, dot_path: Path, label: str) -> str:
        if not dot_path.exists():
            return ""
        dot = _read(dot_path)
        svg = self.renderer.svg(dot)
        if svg is None:
            return (f'<div class="graph" data-rendered="none"><p class="muted">{_e(label)}: no picture '
                    f"(see the note at the top); dot text:</p><pre>{_e(dot)}</pre></div>")
        return f'<div class="graph" title="{_e(label)}">{svg}</div>'


def _function(page: _Page, folder: Path) -> tuple[str, dict[str, Any]]:
    info = _json(folder / "function.json")
    events = _events(folder / "events.jsonl")
    name = info.get("name", folder.name)
    anchor = f"fn-{_e(folder.name)}"
    out = [f'<h2 id="{anchor}">{_e(name)} <span class="muted">({_e(folder.name)})</span></h2>',
           "<table>"]
    for key in ("qualname", "source", "backend", "mode", "fullgraph", "dynamic", "recompile_limit", "options"):
        if key in info:
            out.append(f"<tr><th>{_e(key)}</th><td>{_e(info[key])}</td></tr>")
    out.append("</table><p>" + " ".join(page.link(folder / f) for f in ("function.json", "events.jsonl")
                                        if (folder / f).exists()) + "</p>")
    entries = sorted((p for p in folder.iterdir() if p.is_dir() and (p / "entry.json").exists()),
                     key=lambda p: _json(p / "entry.json").get("capture_number", 0))
    if events:
        out.append("<details class=\"stage\"><summary>events (" + str(len(events)) + ")</summary><table>"
                   "<tr><th>t</th><th>event</th><th>details</th></tr>")
        for ev in events:
            details = ", ".join(f"{k}={v}" for k, v in ev.items() if k not in ("t", "event"))
            cls = ' class="recompile"' if ev.get("event") in ("recompile", "recompile_limit", "error") else ""
            out.append(f'<tr><td class="num">{ev.get("t", 0):.3f}</td><td{cls}>{_e(ev.get("event"))}</td>'
                       f"<td>{_e(details)}</td></tr>")
        out.append("</table></details>")
    summary = {"name": name, "anchor": anchor, "source": info.get("source", ""), "backend": info.get("backend", ""),
               "entries": len(entries), "recompiles": sum(1 for e in events if e.get("event") == "recompile"),
               "breaks": sum(1 for e in events if e.get("event") == "break"),
               "compiles": sum(1 for e in events if e.get("event") == "compile"),
               "compile_s": sum(e.get("seconds", 0) for e in events if e.get("event") == "compile")}
    for entry in entries:
        out.append(_entry(page, entry, name))
    return "\n".join(out), summary


def _entry(page: _Page, folder: Path, fn_name: str) -> str:
    rec = _json(folder / "entry.json")
    name = rec.get("name", folder.name)
    reason = rec.get("reason", "")
    tag = '<span class="recompile">recompile</span>: ' if rec.get("recompile") else ""
    out = [f'<h3 id="entry-{_e(fn_name)}-{_e(folder.name)}">entry {_e(name)} '
           f'<span class="muted">({_e(rec.get("kind", "?"))})</span></h3>',
           f"<p>{tag}captured because: <b>{_e(reason)}</b>"
           + (f"; automatic dynamic: {_e(rec['automatic_dynamic'])}" if rec.get("automatic_dynamic") else "")
           + "</p>"]
    if rec.get("error"):
        out.append(f'<div class="break">failed: {_e(rec["error"])}</div>')
    graphs = sorted((p for p in folder.iterdir() if p.is_dir() and (p / "compile.json").exists()),
                    key=lambda p: p.stat().st_mtime)
    compile_s, first_call = _num(rec.get("compile_s")), _num(rec.get("first_call_s"))
    if rec.get("kind") == "segmented" and rec.get("compile_s") is None:
        # segments compile and run while the first call is captured: its capture time holds both
        seconds = [_json(g / "compile.json").get("compile_s") for g in graphs]
        compile_s = f"{_num(sum(s for s in seconds if s))} (its graphs, during capture)" if any(seconds) else ""
        first_call = "during capture"
    out.append("<table><tr><th>capture</th><th>compile</th><th>first call</th><th>calls served from the cache</th>"
               "<th>ops</th><th>guards</th></tr>"
               f'<tr><td class="num">{_num(rec.get("capture_s"))}</td><td class="num">{_e(compile_s)}</td>'
               f'<td class="num">{_e(first_call)}</td><td class="num">{_e(rec.get("hits", ""))}</td>'
               f'<td class="num">{_e(rec.get("ops", ""))}</td><td class="num">{_e(rec.get("guards", ""))}</td></tr></table>')
    for b in rec.get("breaks", []):
        out.append(f'<div class="break">graph break at <b>{_e(b.get("loc"))}</b>: {_e(b.get("reason"))}'
                   + (f"<br><code>{_e(b['source'])}</code>" if b.get("source") else "") + "</div>")
    if rec.get("inputs"):
        counts: dict[str, int] = {}
        for i in rec["inputs"]:
            counts[i["kind"]] = counts.get(i["kind"], 0) + 1
        out.append("<p class=\"muted\">inputs: " + ", ".join(f"{v} {k}" for k, v in counts.items()) + "</p>")
    out.append(page.picture(folder / "graph.dot", f"{fn_name} entry {name}"))
    for stage in ("capture.txt", "breaks.txt", "guards.txt", "graph.dot", "entry.json"):
        if (folder / stage).exists():
            out.append(page.block(folder / stage, open_=False))
    for g in graphs:
        out.append(_graph(page, g, fn_name, name, rec))
    return "\n".join(out)


def _graph(page: _Page, folder: Path, fn_name: str, entry_name: str, entry: dict[str, Any]) -> str:
    rec = _json(folder / "compile.json")
    cache = rec.get("artifact_cache", [])
    hits = sum(1 for c in cache if c.get("hit"))
    iree_s = sum(c.get("seconds", 0) for c in rec.get("iree_compiles", []))
    first = entry.get("first_call_s") if rec.get("graph") == entry_name else None
    page.timings.append([fn_name, entry_name, rec.get("graph", folder.name), rec.get("backend", ""),
                         str(rec.get("ops", "")), str(rec.get("dispatches", "")), _num(rec.get("lower_s")),
                         _num(iree_s) if rec.get("iree_compiles") else "", f"{hits}/{len(cache)}" if cache else "",
                         _num(rec.get("load_s")), _num(rec.get("compile_s")), _num(first)])
    out = [f'<details class="graph-section" open><summary><b>graph @{_e(rec.get("graph", folder.name))}</b> '
           f'<span class="muted">{_e(rec.get("backend", ""))}, {_e(rec.get("ops", "?"))} ops'
           + (f', {rec["dispatches"]} dispatches' if "dispatches" in rec else "")
           + (f", compiled in {_num(rec.get('compile_s'))}" if rec.get("compile_s") is not None else "")
           + (f", artifact cache hits {hits}/{len(cache)}" if cache else "") + "</span></summary>"]
    if rec.get("error"):
        out.append(f'<div class="break">failed: {_e(rec["error"])}</div>')
    for r in rec.get("retries", []):
        out.append(f'<div class="warn">IREE refused flags {_e(" ".join(r.get("flags", [])))}: {_e(r.get("error"))}; '
                   f"a plainer pipeline compiled it</div>")
    if entry.get("kind") != "graph" or rec.get("graph") != entry_name:
        out.append(page.picture(folder / "graph.dot", f"graph @{rec.get('graph')}"))
    files = sorted(p for p in folder.rglob("*") if p.is_file() and p.name != "compile.json")
    for f in files:
        out.append(page.block(f, str(f.relative_to(folder))))
    out.append(page.block(folder / "compile.json"))
    out.append("</details>")
    return "\n".join(out)


def build_report(trace_dir: str | os.PathLike, out: str | os.PathLike | None = None) -> Path:
    """Write the HTML page of ``trace_dir`` (default ``trace_dir/report.html``); returns its path.
    ValueError when ``trace_dir`` holds no traced function."""
    root = Path(trace_dir)
    if not root.is_dir():
        raise ValueError(f"report: {root} is not a folder; pass the folder TENSORPLAY_TRACE_DIR named")
    functions = sorted(p for p in root.iterdir() if p.is_dir() and (p / "function.json").exists())
    if not functions:
        raise ValueError(f"report: {root} holds no traced function (no */function.json); run the program with "
                         f"TENSORPLAY_TRACE_DIR={root} first")
    out_path = Path(out) if out is not None else root / "report.html"
    renderer = _Renderer()
    page = _Page(root, out_path, renderer)
    sections, summaries = [], []
    for folder in functions:
        section, summary = _function(page, folder)
        sections.append(section)
        summaries.append(summary)
    head = [f"<h2>Compiled functions</h2><p class=\"muted\">trace folder {_e(root.resolve())}, report built "
            f"{_e(time.strftime('%Y-%m-%d %H:%M:%S'))}</p>"]
    if not renderer.available:
        head.append('<div class="warn" id="no-renderer">Graphviz\'s <code>dot</code> program is not installed, so '
                    "the graphs below are shown as dot text instead of pictures. Install it (Debian/Ubuntu: "
                    "<code>apt-get install graphviz</code>; macOS: <code>brew install graphviz</code>) and build the "
                    "report again. Everything else is complete.</div>")
    if renderer.failures:
        head.append('<div class="warn">Some graphs could not be drawn: '
                    + _e("; ".join(sorted(set(renderer.failures)))[:1000]) + "</div>")
    head.append("<table><tr><th>function</th><th>source</th><th>backend</th><th>entries</th><th>recompiles</th>"
                "<th>graph breaks</th><th>compiles</th><th>compile time</th></tr>")
    for s in summaries:
        head.append(f'<tr><td><a href="#{s["anchor"]}">{_e(s["name"])}</a></td><td>{_e(s["source"])}</td>'
                    f'<td>{_e(s["backend"])}</td><td class="num">{s["entries"]}</td>'
                    f'<td class="num">{s["recompiles"]}</td><td class="num">{s["breaks"]}</td>'
                    f'<td class="num">{s["compiles"]}</td><td class="num">{_num(float(s["compile_s"]))}</td></tr>')
    head.append("</table>")
    timing = ["<h2 id=\"timings\">Timings</h2><table><tr><th>function</th><th>entry</th><th>graph</th>"
              "<th>backend</th><th>ops</th><th>dispatches</th><th>tp lowering</th><th>IREE compile</th>"
              "<th>artifact cache hits</th><th>load</th><th>compile (all)</th><th>first call</th></tr>"]
    for row in page.timings:
        timing.append("<tr>" + "".join(f'<td class="num">{_e(c)}</td>' if i >= 4 else f"<td>{_e(c)}</td>"
                                       for i, c in enumerate(row)) + "</tr>")
    timing.append("</table>")
    doc = ["<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">",
           f"<title>tensorplay compile report: {_e(root.name)}</title><style>{_CSS}</style></head><body>",
           "<header><h1>tensorplay compile report</h1>"
           "<input id=\"search\" type=\"search\" placeholder=\"search every stage (op, pass, flag, file:line)\" "
           "oninput=\"tpSearch(this.value)\"> <span id=\"hits\"></span> "
           "<a style=\"color:#cfe2ff\" href=\"#timings\">timings</a></header><main>",
           *head, *sections, *timing, f"</main><script>{_JS}</script></body></html>"]
    out_path.parent.mkdir(parents=True, exist_ok=True)
    tmp = out_path.with_name(f".{out_path.name}.{os.getpid()}.tmp")
    tmp.write_text("\n".join(doc), encoding="utf-8")
    os.replace(tmp, out_path)
    return out_path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tensorplay-report",
                                     description="Build an HTML report from a TENSORPLAY_TRACE_DIR folder.")
    parser.add_argument("trace_dir", help="the folder TENSORPLAY_TRACE_DIR (or options['trace_dir']) named")
    parser.add_argument("-o", "--output", help="the HTML file to write (default: TRACE_DIR/report.html)")
    args = parser.parse_args(argv)
    try:
        path = build_report(args.trace_dir, args.output)
    except ValueError as exc:
        print(f"tensorplay-report: {exc}", file=sys.stderr)
        return 2
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
