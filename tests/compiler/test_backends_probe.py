"""Availability probes report, they never raise: a missing Vulkan loader, CUDA driver or HIP
runtime makes the backend unavailable with IREE's reason and what to install, and listing,
capabilities and test collection all keep working."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import tensorplay as tp
from tensorplay.compiler import backends
from tensorplay.compiler.backends import probe
from tensorplay.runtime import hal, program

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from tests.no_vulkan_loader import LOADER_ERROR  # noqa: E402


def _forget_probes():
    probe._probed.clear()
    for entry in backends._registry.values():
        entry._caps = None


@pytest.fixture
def fake_rt(monkeypatch):
    """``iree.runtime.get_driver`` raising for the drivers named in the returned dict."""
    import iree.runtime as rt

    failures: dict[str, BaseException] = {}
    real = rt.get_driver

    def get_driver(uri):
        exc = failures.get(str(uri).split(":", 1)[0])
        if exc is not None:
            raise exc
        return real(uri)

    monkeypatch.setattr(rt, "get_driver", get_driver)
    _forget_probes()
    yield failures
    _forget_probes()


@pytest.mark.parametrize("driver,exc,backend,words", [
    ("vulkan", ValueError(LOADER_ERROR), "iree-vulkan", "Vulkan loader library not found"),
    ("cuda", RuntimeError("Error creating driver: c/runtime/src/iree/hal/drivers/cuda/cuda_dynamic_symbols.c:66: "
                          "UNAVAILABLE; CUDA driver library 'libcuda.so'/'nvcuda.dll' not available; please ensure "
                          "installed and in dynamic library search path"), "iree-cuda", "CUDA driver library"),
    ("hip", RuntimeError("Error creating driver: c/runtime/src/iree/hal/drivers/hip/dynamic_symbols.c:155: "
                         "UNAVAILABLE; HIP runtime library 'amdhip64.dll'/'libamdhip64.so' not available"),
     "iree-rocm", "HIP runtime library"),
    ("vulkan", OSError("libvulkan.so.1: cannot open shared object file"), "iree-vulkan", "libvulkan.so.1"),
])
def test_a_missing_driver_library_makes_the_backend_unavailable_with_its_reason(fake_rt, driver, exc, backend,
                                                                               words):
    fake_rt[driver] = exc
    names = tp.compiler.list_backends(None)
    assert backend not in names and "iree-cpu" in names
    assert backend in tp.compiler.list_backends(None, include_unavailable=True)
    caps = tp.compiler.get_backend_capabilities(backend)
    assert caps.available is False
    assert words in caps.reason and f"IREE runtime driver {driver!r} cannot load" in caps.reason
    assert ".c:" not in caps.reason          # IREE's source location is not the user's concern
    assert caps.install_hint                  # and it says what to install
    with pytest.raises(backends.BackendUnavailable, match=words):
        tp.compiler.compile(lambda x: x + 1, backend=backend, fullgraph=True)(tp.ones(2))


def test_the_vulkan_hint_names_the_debian_packages(fake_rt):
    fake_rt["vulkan"] = ValueError(LOADER_ERROR)
    hint = tp.compiler.get_backend_capabilities("iree-vulkan").install_hint
    assert "mesa-vulkan-drivers" in hint and "libvulkan1" in hint


def test_an_unexpected_probe_failure_is_a_reason_too(fake_rt):
    fake_rt["vulkan"] = KeyError("driver registry is corrupt")
    caps = tp.compiler.get_backend_capabilities("iree-vulkan")
    assert caps.available is False and "KeyError" in caps.reason and "failed to probe" in caps.reason


def test_driver_devices_and_get_device_raise_one_named_error(fake_rt):
    fake_rt["vulkan"] = ValueError(LOADER_ERROR)
    with pytest.raises(program.DriverUnavailable, match="Vulkan loader library not found") as info:
        program.driver_devices("vulkan")
    assert isinstance(info.value, RuntimeError) and info.value.driver == "vulkan"
    hal._devices.pop("vulkan", None)
    with pytest.raises(program.DriverUnavailable, match="has no usable device"):
        program.get_device("vulkan")


def test_the_suite_collects_without_a_vulkan_loader():
    """Collection of the whole suite under the exact loader failure: no errors, and the
    Vulkan cases are there to be skipped, not missing."""
    proc = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "tests.no_vulkan_loader",
                           "-p", "no:cacheprovider", "tests/compiler", "tests/export", "tests/test_lowering_vulkan.py"],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    assert "error" not in out.splitlines()[-1].lower(), out[-2000:]
    assert "iree-vulkan" in out


@pytest.mark.iree  # the backend tests it runs, in a subprocess, compile
def test_the_backend_tests_skip_vulkan_with_the_reason_without_a_loader():
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "tests.no_vulkan_loader",
                           "-p", "no:cacheprovider", "tests/compiler/test_backends_registry.py",
                           "tests/compiler/test_backends_iree.py", "-k", "vulkan or list or available or caps"],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    assert "Vulkan loader library not found" in out, out[-3000:]


def test_importing_the_no_loader_plugin_leaves_vulkan_alone():
    # this module imports LOADER_ERROR from it: the patch must wait for -p (pytest_configure)
    import iree.runtime as rt
    from iree.runtime import system_setup

    import tests.no_vulkan_loader as plugin

    assert rt.get_driver.__module__ != plugin.__name__
    assert system_setup.get_driver.__module__ != plugin.__name__
