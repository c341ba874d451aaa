"""Command-line tools and maintenance scripts (``tensorplay.tools``)."""

__all__: list[str] = []
