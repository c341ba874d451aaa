"""The switch the places a profiler instruments read: ``state.active`` is True only while a
:class:`tensorplay.profiler.profile` records. It lives in the runtime package, which imports
nothing outside itself (it deploys alone), so the dispatch entry, the autograd engine, the
runtime and the compiler can read it at no import cost.

``state.hooks`` is :mod:`tensorplay.profiler._hooks` (set when a profile starts): the
instrumented places call into it only behind ``if state.active``.
"""

from __future__ import annotations

from typing import Any

__all__ = ["state"]


class _State:
    __slots__ = ("active", "hooks")

    def __init__(self) -> None:
        self.active = False
        self.hooks: Any = None


state = _State()
