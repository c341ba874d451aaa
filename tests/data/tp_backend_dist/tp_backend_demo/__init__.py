"""A third-party tensorplay backend: runs a captured graph with each op's numpy reference,
counting the graphs it compiled (the entry-point test reads the counter)."""

import numpy as np

compiled_graphs = []


def _run_graph(graph, arrays):
    values = {id(v): np.asarray(a) for v, a in zip(graph.inputs, arrays)}
    for node in graph.nodes:
        operands = [None if v is None else values[id(v)] for v in node.inputs]
        if node.callee is not None:
            results = _run_graph(node.callee, operands)
        else:
            results = node.opdef.evaluate(operands, node.attrs, [r.type for r in node.results])
        values.update((id(r), a) for r, a in zip(node.results, results))
    return [values[id(v)] for v in graph.outputs]


def numpy_backend(graph, example_inputs, options=None):
    """backend(graph, example_inputs[, options]) -> run(*arrays) -> list of arrays."""
    compiled_graphs.append(graph.name)

    def run(*arrays):
        return _run_graph(graph, arrays)

    return run


numpy_backend.tags = ("demo",)
numpy_backend.capabilities = {"device_kind": "cpu", "dynamic_shapes": True,
                              "description": "numpy reference semantics (third-party demo)"}
