"""Frontend functions, grouped by op family."""

__all__: list[str] = []
