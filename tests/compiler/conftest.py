"""Shared fixtures of the compiler tests: a backend callable (the documented calling
convention) that interprets graphs and records every compile."""

from __future__ import annotations

import pytest

import tensorplay as tp
from tensorplay.dialects.tp.graph import interpret


def backend_param(name):
    """``name`` as a pytest parameter, skipped with the backend's own reason where it cannot
    run here (no GPU, no Vulkan device)."""
    caps = tp.compiler.get_backend_capabilities(name)
    if caps.available:
        return name
    return pytest.param(name, marks=pytest.mark.skip(reason=f"{name} unavailable here: {caps.reason}"))


class CountingBackend:
    """Interprets each graph with the reference implementations and records the graphs and
    options it was asked to compile; example inputs must match the graph's input shapes
    (any size for a symbolic one)."""

    def __init__(self, capabilities=None):
        self.graphs = []
        self.options = []
        if capabilities is not None:
            self.capabilities = capabilities

    def __call__(self, graph, example_inputs, options=None):
        assert len(example_inputs) == len(graph.inputs)
        for t, v in zip(example_inputs, graph.inputs):  # symbolic sizes take any value
            assert len(t.shape) == len(v.type.shape)
            assert all(not isinstance(d, int) or d == s for s, d in zip(t.shape, v.type.shape))
        self.graphs.append(graph)
        self.options.append(options)
        return lambda *arrays: interpret(graph, arrays)

    @property
    def count(self):
        return len(self.graphs)

    @property
    def ops(self):
        return [[n.op for n in g.nodes] for g in self.graphs]


@pytest.fixture
def backend():
    tp.compiler.reset()
    yield CountingBackend()
    tp.compiler.reset()


def probe():
    """A list and its bound ``append``: tests call ``append`` inside traced code to observe
    when and how that code runs. The call goes straight to C, so it is not a Python side
    effect the capture sees (a ``lst.append(...)`` written out in the function is, and makes
    the function run its Python on every call, as eager does)."""
    items: list = []
    return items, items.append
