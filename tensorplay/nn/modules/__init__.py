"""Built-in modules."""

__all__: list[str] = []
