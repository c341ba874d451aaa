import os
import tempfile

import numpy as np
import pytest

# Compiled artifacts of a test run go to a cache of that run, not the user's
# (~/.cache/tensorplay): tests see a cold cache, and a run leaves nothing behind. A test
# session shares it, so two tests compiling the same graph compile it once. Set
# TENSORPLAY_CACHE_DIR to keep artifacts across runs.
if "TENSORPLAY_CACHE_DIR" not in os.environ:
    _cache = tempfile.TemporaryDirectory(prefix="tensorplay-test-cache-")
    os.environ["TENSORPLAY_CACHE_DIR"] = _cache.name

# Automatic dynamic decisions are remembered in the cache between processes; tests that count
# captures must not depend on what an earlier test (or run, with a kept cache) decided, so the
# suite turns that off and the tests of the feature turn it on in a cache of their own.
os.environ.setdefault("TENSORPLAY_REMEMBER_DYNAMIC", "0")

import tensorplay as tp  # noqa: E402


@pytest.fixture(autouse=True)
def _seed():
    tp.manual_seed(0)
    yield


@pytest.fixture(autouse=True)
def _disallow_marks_end_with_the_test():
    """``disallow_in_graph`` marks are process-wide (``math.floor`` marked by one test would
    break every later capture whose user code calls it): each test's marks end with it."""
    import sys

    before = None
    watched = sys.modules.get("tensorplay.compiler.markers._intercept")
    if watched is not None:
        before = (dict(watched._builtins), {k: list(v) for k, v in watched._by_code.items()})
    yield
    watched = sys.modules.get("tensorplay.compiler.markers._intercept")
    if watched is not None:
        builtins, by_code = before or ({}, {})
        watched._builtins.clear()
        watched._builtins.update(builtins)
        watched._by_code.clear()
        watched._by_code.update(by_code)


@pytest.fixture
def rng():
    return np.random.default_rng(0)


# --- markers -------------------------------------------------------------------------------
# `iree`: the test runs the IREE compiler or runtime; `vulkan` / `cuda`: it needs that device;
# `slow`: fuzzer samples and long sweeps. Tests parametrized with a backend name get `iree` and
# the device's mark here. A test without `iree` that reaches IREE anyway fails with a message
# saying so, so `-m "not iree"` compiles nothing (subprocesses are not watched: mark tests that
# start a compiling Python by hand).

_DEVICE_MARKS = {"iree-vulkan": "vulkan", "iree-cuda": "cuda"}


def _backend_names(item):
    spec = getattr(item, "callspec", None)
    if spec is None:
        return set()
    names = set()
    for value in spec.params.values():
        for v in value if isinstance(value, (tuple, list)) else (value,):
            if isinstance(v, str) and v.startswith("iree-"):
                names.add(v)
    return names


def pytest_collection_modifyitems(config, items):
    for item in items:
        names = _backend_names(item)
        if names:
            item.add_marker(pytest.mark.iree)
        for name in names:
            if name in _DEVICE_MARKS:
                item.add_marker(getattr(pytest.mark, _DEVICE_MARKS[name]))
        if any(item.get_closest_marker(m) for m in _DEVICE_MARKS.values()):
            item.add_marker(pytest.mark.iree)


class _IreeWatch:
    """Notes which test reaches IREE: compiles (iree.compiler's in-process invocation and its
    tools), module loads and function invocations of iree.runtime."""

    def __init__(self):
        self.item = None
        self.used: list[str] = []

    def install(self):
        import iree.compiler as ic
        import iree.compiler.api as api
        import iree.compiler.tools as tools
        import iree.runtime as rt

        self._wrap(api.Invocation, "execute", "compiles with iree.compiler")
        for module in (ic, tools):
            for name in ("compile_str", "compile_file"):
                if hasattr(module, name):
                    self._wrap(module, name, "compiles with iree.compiler")
        for name in ("copy_buffer", "wrap_buffer", "mmap", "from_flatbuffer", "from_buffer"):
            if hasattr(rt.VmModule, name):
                self._wrap(rt.VmModule, name, "loads an IREE module")
        self._wrap(rt.VmContext, "invoke", "runs an IREE function")

    def _wrap(self, owner, name, what):
        original = getattr(owner, name)
        watch = self

        def watched(*args, **kwargs):
            if watch.item is not None and what not in watch.used:
                watch.used.append(what)
            return original(*args, **kwargs)

        watched.__wrapped__ = original
        setattr(owner, name, watched)


_watch = _IreeWatch()


def pytest_configure(config):
    _watch.install()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    _watch.item, _watch.used = item, []
    yield
    _watch.item = None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.when == "teardown" or not _watch.used or item.get_closest_marker("iree"):
        return
    if report.passed or report.skipped:
        report.outcome = "failed"
        report.longrepr = (f"{item.nodeid} {' and '.join(_watch.used)} but is not marked `iree`: add "
                           "@pytest.mark.iree (or pytestmark = pytest.mark.iree for the file), so that "
                           "`pytest -m \"not iree\"` stays a loop that compiles nothing")
    _watch.used = []
