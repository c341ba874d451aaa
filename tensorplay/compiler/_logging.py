"""Loggers of the compiler and the ``TENSORPLAY_LOGS`` switch.

``TENSORPLAY_LOGS=graphs,guards,recompiles,breaks,perf`` (or ``all``) sends those channels to
stderr at INFO level; each channel is the logger ``tensorplay.compiler.<channel>``, so the
standard ``logging`` configuration works as well.
"""

from __future__ import annotations

import logging
import os

__all__ = ["CHANNELS", "get_logger", "configure_from_env"]

CHANNELS = ("graphs", "guards", "recompiles", "breaks", "perf")
ROOT = "tensorplay.compiler"
_handler: logging.Handler | None = None


def get_logger(channel: str | None = None) -> logging.Logger:
    """The compiler's logger, or that of one channel of :data:`CHANNELS`."""
    if channel is None:
        return logging.getLogger(ROOT)
    if channel not in CHANNELS:
        raise ValueError(f"unknown log channel {channel!r}; channels: {', '.join(CHANNELS)}")
    return logging.getLogger(f"{ROOT}.{channel}")


def configure_from_env(value: str | None = None) -> list[str]:
    """Turn on the channels named in ``TENSORPLAY_LOGS`` (or ``value``); returns them."""
    global _handler
    value = os.environ.get("TENSORPLAY_LOGS", "") if value is None else value
    names = [n.strip() for n in value.split(",") if n.strip()]
    if "all" in names:
        names = list(CHANNELS)
    unknown = [n for n in names if n not in CHANNELS]
    if unknown:
        raise ValueError(f"TENSORPLAY_LOGS: unknown channel(s) {', '.join(unknown)}; "
                         f"valid: {', '.join(CHANNELS)}, all")
    if names and _handler is None:
        _handler = logging.StreamHandler()
        _handler.setFormatter(logging.Formatter("[tensorplay.compiler.%(channel)s] %(message)s"))
        _handler.addFilter(_add_channel)
    for channel in CHANNELS:
        logger = get_logger(channel)
        if channel in names:
            logger.setLevel(logging.INFO)
            if _handler not in logger.handlers:
                logger.addHandler(_handler)
        elif _handler is not None and _handler in logger.handlers:
            logger.removeHandler(_handler)
    return names


def _add_channel(record: logging.LogRecord) -> bool:
    record.channel = record.name.rsplit(".", 1)[-1]
    return True
