"""Command-line tools and maintenance scripts (``tensorplay.tools``)."""

if __name__ != "tensorplay.tools":  # imported from the repository root as a bare ``tools``
    raise ImportError(
        f"the folder tools/ is the package tensorplay.tools; import it as 'tensorplay.tools', not as "
        f"'{__name__}' (its modules import the installed package). From a source "
        "checkout, install the project first: python -m pip install -e .")


__all__: list[str] = []
