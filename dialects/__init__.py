"""MLIR dialects of tensorplay. ``tp`` is the tensor dialect every captured program is written in."""

if __name__ != "tensorplay.dialects":  # imported from the repository root as a bare ``dialects``
    raise ImportError(
        f"the folder dialects/ is the package tensorplay.dialects; import it as 'tensorplay.dialects', not as "
        f"'{__name__}' (a second copy would hold a second op registry and TensorType). From a source "
        "checkout, install the project first: python -m pip install -e .")


__all__: list[str] = []
