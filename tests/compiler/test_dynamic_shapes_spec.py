"""compile(dynamic_shapes=...): named dimensions (str or Dim with bounds) are symbolic from
the first call, equal names share one size, bounds and specializations are clear errors;
and the guards/recompiles log channels explain what was decided."""

from __future__ import annotations

import logging

import numpy as np
import pytest

import tensorplay as tp
from tensorplay.compiler._logging import configure_from_env
from tensorplay.compiler.symbolic import Dim


def _t(*shape):
    return tp.tensor(np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape))


def _pair(x, y):
    return x * 2 + y.sum(dim=1, keepdim=True)


def test_named_dims_are_symbolic_from_the_first_call(backend):
    f = tp.compile(_pair, backend=backend, dynamic_shapes={"x": {0: "batch"}, "y": ("batch", None)})
    for n in (3, 1, 8):
        x, y = _t(n, 2), _t(n, 5)
        np.testing.assert_allclose(f(x, y).detach().numpy(), _pair(x, y).detach().numpy())
    assert backend.count == 1
    (entry,) = f._group.order
    assert entry.shape_guard.describe() == ["y.size(0) == x.size(0)"]
    f(_t(3, 2), _t(3, 6))  # y dim 1 is not named: it stays static
    assert backend.count == 2


def test_dim_objects_bound_the_sizes(backend):
    batch = Dim("batch", min=2, max=8)
    f = tp.compile(_pair, backend=backend, dynamic_shapes=({0: batch}, (batch, None)))
    f(_t(4, 2), _t(4, 5))
    f(_t(8, 2), _t(8, 5))
    assert backend.count == 1
    with pytest.raises(ValueError, match=r"x dim 0 \('batch'\) has size 9, outside Dim\('batch', min=2, "
                                         r"max=8\)'s range \[2, 8\]"):
        f(_t(9, 2), _t(9, 5))
    with pytest.raises(ValueError, match="dimension 'batch' has size 4 at x dim 0 but 5 at y dim 0"):
        f(_t(4, 2), _t(5, 5))


def test_one_name_with_two_ranges_is_rejected(backend):
    f = tp.compile(_pair, backend=backend,
                   dynamic_shapes={"x": {0: Dim("n", max=4)}, "y": {0: Dim("n", max=5)}})
    with pytest.raises(ValueError, match="'n' is given as Dim\\('n', max=4\\) at x dim 0 and as Dim\\('n', "
                                         "max=5\\) at y dim 0; one name has one range"):
        f(_t(3, 2), _t(3, 5))


def test_a_named_dim_the_program_pins_is_an_error(backend):
    def f(x):
        return x.reshape(4, -1) if x.shape[0] == 4 else x

    g = tp.compile(f, backend=backend, dynamic_shapes={"x": {0: "n"}})
    with pytest.raises(ValueError, match=r"x.size\(0\) is named 'n' \(dynamic\), but the program requires it "
                                         r"to be the constant 4: == on a size at .*test_dynamic_shapes_spec.py"):
        g(_t(4, 3))


def test_two_names_the_program_makes_equal_are_an_error(backend):
    g = tp.compile(lambda x, y: x + y, backend=backend, dynamic_shapes={"x": {0: "a"}, "y": {0: "b"}})
    with pytest.raises(ValueError, match=r"y.size\(0\) is named 'b' \(dynamic\), but the program requires it "
                                         r"to be equal to x.size\(0\) \(dimension 'a'\)"):
        g(_t(3), _t(3))


def test_an_int_in_the_spec_is_a_static_size(backend):
    g = tp.compile(lambda x: x * 2, backend=backend, dynamic_shapes={"x": (Dim("n"), 3)})
    g(_t(2, 3))
    g(_t(5, 3))
    assert backend.count == 1
    with pytest.raises(ValueError, match="x dim 1 is specified as 3 but has size 4"):
        g(_t(2, 4))


def test_module_arguments_are_named_after_forward(backend):
    lin = tp.nn.Linear(3, 2)
    fast = tp.compile(lin, backend=backend, dynamic_shapes={"input": {0: "rows"}})
    for n in (1, 4, 9):
        x = _t(n, 3)
        np.testing.assert_allclose(fast(x).detach().numpy(), lin(x).detach().numpy(), rtol=1e-6)
    assert backend.count == 1


@pytest.fixture
def logs():
    configure_from_env("guards,recompiles")
    yield
    configure_from_env("")


def test_guards_and_recompiles_logs_explain_sizes(backend, logs, caplog):
    def f(x):
        if x.shape[0] > 8:
            return x.reshape(int(x.shape[1]), -1)
        return x

    g = tp.compile(f, backend=backend)
    with caplog.at_level(logging.INFO, logger="tensorplay.compiler"):
        g(_t(10, 2))
        g(_t(12, 3))
    text = "\n".join(r.getMessage() for r in caplog.records)
    assert "recompiling f (capture 2 of at most 8): x: shape (10, 2) -> (12, 3); automatic dynamic: " \
           "x dim 0, x dim 1 now dynamic" in text
    assert "f_1: guard x.size(0) in [9, inf] (> on a size) at " in text
    assert "f_1: x.size(1) specialized to 3: int() of the size at " in text
