"""A pytest plugin (``-p tests.no_vulkan_loader``) that makes IREE's runtime behave as on a
machine without a Vulkan loader: creating the ``vulkan`` driver raises the ValueError IREE
3.13 raises there, word for word. Machines that do have Mesa use it to check that probing,
listing and collection survive the missing loader.
"""

from __future__ import annotations

#: what iree.runtime.get_driver("vulkan") raises when libvulkan.so.1 cannot be loaded
LOADER_ERROR = (
    "Error creating driver: c/runtime/src/iree/hal/drivers/vulkan/util/libvulkan.c:641: NOT_FOUND; "
    "Vulkan loader library not found; ensure it is installed and on a valid search path (or specified "
    "with IREE_HAL_VULKAN_LIBVULKAN_PATH): \n"
    "  Tried: libvulkan.so.1\n"
    "    c/runtime/src/iree/base/internal/dynamic_library_posix.c:165: NOT_FOUND; failed to load dynamic "
    "library (possibly not found on any search path): libvulkan.so.1: cannot open shared object file: "
    "No such file or directory\n")


def install() -> None:
    """Patch ``iree.runtime.get_driver`` (and the cached lookup behind it) in this process."""
    import iree.runtime as rt
    from iree.runtime import system_setup

    real = system_setup.get_driver

    def get_driver(device_uri: str):
        if str(device_uri).split(":", 1)[0] == "vulkan":
            raise ValueError(LOADER_ERROR)
        return real(device_uri)

    system_setup.get_driver = get_driver
    rt.get_driver = get_driver


def pytest_configure(config) -> None:
    # only as a plugin (-p): importing the module for LOADER_ERROR must leave Vulkan alone, or
    # every Vulkan test of that run would skip
    install()
