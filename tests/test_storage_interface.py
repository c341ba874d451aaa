"""Storage has one interface: outside the tensor core, every module reads and replaces a
tensor's memory through ``tensorplay._views``' storage functions, so the aliasing rules (a
functional alias brought up to date before it is read, writes seen by every alias) live in
one place."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

import tensorplay as tp
from tensorplay import _views

PACKAGE = Path(tp.__file__).parent
CORE = {"_tensor.py", "_views.py", "_dispatch.py", "_thread_views.py"}
# the fields that hold a tensor's memory and tie it to its aliases' storage
PRIVATE = re.compile(r"\._(data|root|steps|st|base_t|nb|vc|seen|gfseen|made_by|multi_view|nograd_view)\b"
                     r"|\bopen_view\(|\bclose_view\(")


def test_only_the_tensor_core_touches_storage_fields():
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE)
        if len(rel.parts) == 1 and rel.name in CORE:
            continue
        for n, line in enumerate(path.read_text().splitlines(), 1):
            code = line.split("#", 1)[0]
            if PRIVATE.search(code):
                found.append(f"{rel}:{n}: {line.strip()}")
    assert not found, "use the storage interface in tensorplay/_views.py instead:\n" + "\n".join(found)


def test_the_check_finds_a_field_read():
    assert PRIVATE.search("x = t._data.shape") and PRIVATE.search("r = t._root")
    assert not PRIVATE.search("x = t.data") and not PRIVATE.search("self._data_sizes = {}")


def test_host_tensor_and_its_view():
    x = tp.tensor([[0.0, 1, 2], [3, 4, 5]])
    v = x[:, 1]
    assert _views.has_memory(x) and not _views.is_device(x)
    assert np.shares_memory(_views.host_array(v), _views.host_array(x))
    assert _views.device_array(x) is None
    assert _views.root(v) is x and _views.root(x) is x and _views.base(v) is x and _views.base(x) is None
    assert _views.is_alias(v) and not _views.is_alias(x)
    assert [name for name, _ in _views.view_steps(v)] == ["tp.slice", "tp.reshape"]
    before = _views.version(x)
    v.mul_(10)
    assert _views.version(x) == _views.version(v) == before + 1
    assert _views.held(x).tolist() == [[0, 10, 2], [3, 40, 5]]


def test_replace_array_is_seen_by_views():
    x = tp.zeros(2, 3)
    row = x[1]
    _views.replace_array(x, np.ones((2, 3), np.float32))
    assert row.tolist() == [1, 1, 1]


def test_take_memory_leaves_the_old_storage_to_its_views():
    x = tp.zeros(3)
    v = x[1:]
    _views.take_memory(x, tp.ones(3, dtype=tp.float64))
    assert x.dtype == tp.float64 and x.tolist() == [1, 1, 1]
    v.fill_(5)
    assert x.tolist() == [1, 1, 1] and v.tolist() == [5, 5]


@pytest.mark.vulkan
def test_a_device_alias_is_brought_up_to_date_when_read():
    caps = tp.compiler.get_backend_capabilities("iree-vulkan")
    if not caps.available:
        pytest.skip(f"iree-vulkan is unavailable here: {caps.reason}")
    x = tp.tensor([[0.0, 1, 2], [3, 4, 5]]).to("vulkan")
    v = x[1]
    x.add_(1)
    stale = _views.held(v)  # what v holds until something reads it
    assert _views.is_device(v) and stale.to_host().tolist() == [3, 4, 5]
    assert _views.device_array(v).to_host().tolist() == [4, 5, 6]
    assert _views.host_array(v) is None
