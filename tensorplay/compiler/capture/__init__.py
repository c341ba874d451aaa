"""Capture: turning a Python tensor program into tp graphs, and the API markers build on.

Semantics of the Capture API (what :mod:`tensorplay.compiler.markers` relies on):

``current_capture() -> Capture | None``
    The innermost active capture session of this thread, or None when code runs eagerly
    (including inside :meth:`Capture.run_eagerly` and :func:`without_capture`). ``is_compiling()``
    is ``current_capture() is not None``.

``Capture.fullgraph: bool``
    True when a graph break would raise instead of splitting the program: the function was
    compiled with ``fullgraph=True`` or ``strict_native=True``, the session exports
    (``exporting()``), or the code runs inside :meth:`call_atomic` or a nested compile region.

``Capture.exporting: bool``
    True for sessions started under :func:`exporting` (export captures use it).

``Capture.graph_break(reason)``
    Records a break (reason, the user's ``file:line`` and that line's text; logged on the
    ``breaks`` channel and reported by ``explain``). Under ``fullgraph`` it raises
    ``GraphCaptureError`` whose message is ``graph break[ inside <scope>] in <name> at
    <file>:<line>: <reason>``, then the source line, then a hint; the exception carries
    ``reason``, ``loc`` (a ``SourceLoc``) and ``source``. Otherwise the pending graph is
    compiled (cached by structural hash) and run, every live capture tensor becomes a
    concrete tensor in place (same object), tensors borrowed from the caller get their
    values back (updated ones with the new value), and capture continues lazily: later
    ops start a new segment whose inputs are the concrete tensors they read. A function
    that broke once runs its Python on every call for that guard key.

``Capture.run_eagerly(fn, args, kwargs, reason) -> Any``
    ``graph_break(reason)`` (so it raises under fullgraph), then ``fn(*args, **kwargs)`` with
    no capture active: its tensor arguments are concrete, ops run eagerly, and
    ``current_capture()`` is None inside. Its results are returned as they are; tensors
    among them become inputs of the next segment when used.

``Capture.call_atomic(fn, args, kwargs, name) -> Any``
    Calls ``fn`` with capture active, recording its ops into the current graph; any break
    inside raises ``GraphCaptureError`` with ``inside <name>`` in the message. Nests.

``Capture.call_region(fn, args, kwargs, *, key, compiler=None) -> Any``
    A nested compile region. Sites are matched by ``key`` together with the structure of
    the arguments (tensor types and requires_grad, module type/mode/parameter types, other
    leaves by value). The first site traces ``fn`` into a callee ``Graph`` (atomic: a break
    inside raises); every site, the first included, then adds one ``func.call`` node
    (``Graph.add_call``) and returns fresh capture tensors, so later sites do not run
    ``fn``. The callee takes the tensor arguments, then the other tensors the body read:
    parameters and buffers of module arguments (looked up by name on the site's module),
    closure tensors (the same object at every site) and random draws (redrawn per site).
    In-place updates of callee inputs are callee outputs applied at the site. Regions are
    cached per compiled callable across calls until ``reset()``. With ``compiler`` (a
    backend name or callable), the callee is compiled by that backend on its own and the
    caller's graph is run in pieces around it, still without Python between them.

``Capture.add_guard(description, check)``
    ``check()`` must stay true for the captured graph to be reused; a call where it is false
    recaptures (logged on the ``guards`` channel with ``description``). Kept only for
    whole-graph entries; a segmented function reruns its Python anyway.

``Capture.loc() -> SourceLoc | None``
    The caller's position: the first frame outside the tensorplay package and the standard
    library.

Extras used by markers: :func:`without_capture` (a context manager running its block eagerly
with no session; call ``graph_break`` first when capture tensors are live) and
:func:`region_compiler`. Export uses :func:`capture_once` (one whole-graph trace, returning
its :class:`TraceResult`; ``dynamic_dims`` makes argument dims symbolic, whose relations the
result's ``shape_guard`` and ``shape_env`` describe).
"""

from __future__ import annotations

from .session import (
    BreakInfo,
    Capture,
    CaptureConfig,
    SegmentInfo,
    TraceResult,
    capture_once,
    current_capture,
    exporting,
    is_compiling,
    is_exporting,
    region_compiler,
    without_capture,
)

__all__ = ["Capture", "CaptureConfig", "BreakInfo", "SegmentInfo", "current_capture", "is_compiling",
           "is_exporting", "exporting", "without_capture", "region_compiler", "capture_once", "TraceResult"]
