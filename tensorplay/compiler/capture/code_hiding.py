"""Code and objects that stand for the user's own while a capture runs.

Markers put trampolines into marked functions and stand-ins into module attributes (see
tensorplay.compiler.markers._redirect); this module remembers both, so that the read tracer
neither follows a trampoline's frames nor reports them as the user's position, and so that a
read that finds a stand-in is guarded as a read of the object it stands for.
"""

from __future__ import annotations

import types
from typing import Any

__all__ = ["StandIn", "stood_for", "hide_code", "unhide_code", "is_hidden_code", "code_of"]

#: id(original) -> original, for every object a :class:`StandIn` was made for
_stood_in: dict[int, Any] = {}


class StandIn:
    """Base of objects that stand in for another one while a capture runs (a marker patches a
    module attribute with one, see tensorplay.compiler.markers._redirect). A read that finds
    a stand-in is recorded and guarded as a read of the object it stands for, so a guard
    taken during the capture still holds once the attribute is restored."""

    __slots__ = ("stands_for", "__weakref__")

    def __init__(self, stands_for: Any):
        self.stands_for = stands_for
        _stood_in[id(stands_for)] = stands_for


def stood_for(v: Any) -> Any:
    """The object a stand-in stands for; anything else unchanged."""
    return v.stands_for if isinstance(v, StandIn) else v


#: id(code) -> code of frames that are not the user's although their file is: the
#: trampolines markers put into marked functions (they keep the function's file and line so
#: that inspect and tracebacks still find its source)
_hidden_codes: dict[int, tuple[types.CodeType, types.CodeType]] = {}


def hide_code(code: types.CodeType, original: types.CodeType) -> None:
    """Frames of ``code`` (a trampoline standing for ``original``, the function's own code) are
    neither followed by the recorder nor reported as the user's position (``user_loc``)."""
    _hidden_codes[id(code)] = (code, original)


def unhide_code(code: types.CodeType) -> None:
    hit = _hidden_codes.get(id(code))
    if hit is not None and hit[0] is code:
        del _hidden_codes[id(code)]


def is_hidden_code(code: types.CodeType) -> bool:
    if not _hidden_codes:
        return False
    hit = _hidden_codes.get(id(code))
    return hit is not None and hit[0] is code


def code_of(func: types.FunctionType) -> types.CodeType:
    """The code a function runs: for a marked function, its own code behind the trampoline
    (the names and free variables it reads are there)."""
    code = func.__code__
    hit = _hidden_codes.get(id(code)) if _hidden_codes else None
    return hit[1] if hit is not None and hit[0] is code else code
