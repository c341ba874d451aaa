"""The tp op families. Importing this package registers every op."""

from . import control, conv, creation, elementwise, indexing, linalg, reduction, shape, sorting  # noqa: F401

__all__: list[str] = []
