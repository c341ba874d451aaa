"""What a trace read from Python state, and the guards that keep it true.

A graph bakes in every Python value the traced code used: a float from a config object, a
list's length, which helper a global names. :class:`ReadRecorder` watches the user's frames
while a trace runs (``sys.settrace`` with opcode events; frames of tensorplay, the standard
library and installed packages are not followed) and records each *read from state that
outlives the call*:

* ``LOAD_GLOBAL`` (a module global, or a builtin the globals do not shadow),
* ``LOAD_DEREF`` of a free variable (the closure cell of the function that runs),
* ``LOAD_ATTR`` / ``LOAD_METHOD`` and ``BINARY_SUBSCR`` whose receiver the recorder can
  follow: it mirrors the top of the value stack for runs of loads (``self.cfg.z``,
  ``CFG["k"]``, ``self.layers[-1]``), resolving attributes statically (instance dict,
  class attributes along the MRO, Module parameters/buffers/submodules) without running
  getters,
* what a call reads from a function object itself (:class:`FunctionRead`): the code and
  defaults of the compiled function, of each function of the user's code that a read above
  finds (or that a value read holds), of a function passed as an argument, and the func,
  args and keywords of a ``functools.partial``; and, for a method that library code calls on
  an object (a module's ``forward``), which function the object's class gives for its name.

Each read becomes a guard ``signature(fetch()) == signature at capture``: constants compare
by type and value (``2 != 2.0``, NaN equals NaN), containers (dict, list, tuple, set) and
plain objects (instances of Python classes, dataclasses, ``SimpleNamespace``) by their content,
read to a bounded depth, so reads that builtins make (``sum(weights)``, ``len(opts)``,
``opts.get``) are covered too; anything else (functions, classes, Python modules, tensors,
nn.Modules) by identity. Stores into state that outlives the call (``state.n += 1``,
``CACHE[k] = v``, ``history.append(v)``, ``global X``) are side effects the compiled graph
cannot replay: the recorder reports them so that the capture breaks there (or fails under
``fullgraph``) and the function runs its Python on every call.

What cannot be guarded is said, never baked in silently: reads through a property or
descriptor of library code, receivers the recorder cannot follow on a class or Python
module, content past the depth bound (identity and size are still guarded), and large
numpy arrays (identity, shape and dtype guarded, not values). Each is logged on the
``guards`` channel and listed by ``explain()``.

The parts live in modules of their own: :mod:`.code_hiding` (markers' trampolines and
stand-ins), :mod:`.value_signatures` (what a guard compares), :mod:`.static_lookup` (reads
resolved without running getters), :mod:`.read_guards` (the reads and the generated check)
and :mod:`.read_tracer` (the ``sys.settrace`` recorder). This module gathers their names.
"""

from __future__ import annotations

from .code_hiding import StandIn, code_of, hide_code, is_hidden_code, stood_for, unhide_code
from .read_guards import (AttrRead, CellRead, ContentRead, FunctionRead, GlobalRead, ItemRead, Read, ReadGuard,
                          function_like)
from .read_tracer import ReadRecorder, SideEffect
from .static_lookup import Opaque, static_attr, static_item
from .value_signatures import ARRAY_VALUE_BYTES, MISSING, SIGNATURE_BUDGET, Ident, signature

__all__ = ["ReadRecorder", "ReadGuard", "signature", "static_attr", "static_item", "Opaque", "MISSING", "Ident",
           "SIGNATURE_BUDGET", "ARRAY_VALUE_BYTES", "StandIn", "stood_for", "hide_code", "unhide_code",
           "is_hidden_code", "code_of", "Read", "GlobalRead", "CellRead", "AttrRead", "ItemRead", "ContentRead",
           "FunctionRead", "function_like", "SideEffect"]
