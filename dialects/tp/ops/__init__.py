"""The tp op families. Importing this package registers every op."""

from . import creation, elementwise  # noqa: F401

__all__: list[str] = []
