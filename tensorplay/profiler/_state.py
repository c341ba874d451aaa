"""The profiler's on/off switch, :data:`tensorplay.runtime.profile_state.state` (kept in the
runtime package, which deploys alone and so cannot import this one)."""

from __future__ import annotations

from ..runtime.profile_state import state

__all__ = ["state"]
