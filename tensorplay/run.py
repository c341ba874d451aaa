"""Run an unmodified PyTorch script on tensorplay (docs/runner.md).

    python -m tensorplay.run [--compile] [--backend NAME] [--] SCRIPT [ARGS...]
    tensorplay-run [--compile] [--backend NAME] [--] SCRIPT [ARGS...]

The script runs as ``python SCRIPT ARGS...`` would run it (as ``__main__``, with
``sys.argv == [SCRIPT, *ARGS]`` and its folder first on ``sys.path``) while ``torch`` and
every ``torch.X`` module it imports are the tensorplay modules of the same name
(:func:`torch_alias`). A PyTorch module or name tensorplay lacks is an error naming it and
docs/coverage.md.

``--compile`` compiles each top-level module call as ``tp.compile(module)`` would: the first
time a ``nn.Module`` is called outside the call of another module (the model, a loss module),
it gets a compiled version, kept beside it, which serves its later calls; modules called
inside another one's forward are part of that one's graph (:func:`compile_modules`).
``--backend`` names the compiler backend of those compiles and of the script's own
``torch.compile`` calls (it is the default backend while the script runs).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import runpy
import sys
import threading
import traceback
import weakref
from collections.abc import Iterator, Sequence
from typing import Any

from . import _torch_alias
from ._torch_alias import COVERAGE_PAGE, TorchNameError, is_active, torch_alias

__all__ = ["main", "run_path", "torch_alias", "compile_modules", "TorchNameError", "is_active"]

_PROG = "tensorplay-run"
_ALIAS_FILE = os.path.abspath(_torch_alias.__file__)


# --- --compile -------------------------------------------------------------------------------

_calls = threading.local()


@contextlib.contextmanager
def compile_modules(**options: Any) -> Iterator[None]:
    """While active, every ``nn.Module`` called at top level (not from inside another
    module's call, nor inside a capture) runs compiled: on its first such call it gets
    ``tp.compile(module, **options)``, kept beside it (the module itself is unchanged), which
    serves its later top-level calls. Modules already compiled (``tp.compile(m)``,
    ``m.compile()``) run as they are."""
    from .compiler import api, is_compiling
    from .nn import Module

    original = Module.__call__
    compiled: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()

    def __call__(self: Any, *args: Any, **kwargs: Any) -> Any:
        if (getattr(_calls, "depth", 0) or isinstance(self, api.CompiledModule)
                or self.__dict__.get("_compiled_call") is not None or is_compiling()):
            return original(self, *args, **kwargs)
        _calls.depth = 1
        try:
            fn = compiled.get(self)
            if fn is None:
                fn = compiled[self] = api.compile(self, **options)
            return fn(*args, **kwargs)
        finally:
            _calls.depth = 0

    Module.__call__ = __call__  # type: ignore[method-assign]
    try:
        yield
    finally:
        if Module.__call__ is __call__:
            Module.__call__ = original  # type: ignore[method-assign]


# --- running a script ------------------------------------------------------------------------

def _note_torch_names(exc: BaseException) -> None:
    """Add a pointer to the coverage page to an import error about a torch name (``from torch
    import foo``, an import under a torch module that is not a package)."""
    if not isinstance(exc, ImportError) or COVERAGE_PAGE in str(exc):
        return
    name = exc.name or ""
    text = str(exc)
    if name == "torch" or name.startswith(("torch.", "tensorplay")) or "'torch" in text:
        exc.add_note(f"tensorplay stands in for torch here; see {COVERAGE_PAGE} for the PyTorch modules and "
                     "names tensorplay provides")


def run_path(script: str | os.PathLike[str], args: Sequence[str] = (), *, compile: bool = False,
             backend: str | None = None) -> dict[str, Any]:
    """Run ``script`` with ``args`` as :func:`main` does, in this process; returns the
    script's globals. ``sys.argv``, ``sys.path``, ``sys.modules`` and the default backend are
    restored afterwards. Exceptions from the script propagate."""
    path = os.path.abspath(os.fspath(script))
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{_PROG}: can't open file {os.fspath(script)!r}: no such file")
    if isinstance(args, str) or not all(isinstance(a, str) for a in args):
        raise TypeError(f"run_path(): args must be a sequence of strings, got {args!r}")
    saved_argv, saved_path = sys.argv[:], sys.path[:]
    sys.argv = [os.fspath(script), *args]
    folder = os.path.dirname(path)
    if sys.path:
        sys.path[0] = folder
    else:
        sys.path.insert(0, folder)
    with contextlib.ExitStack() as stack:
        if backend is not None or compile:
            from . import compiler

            previous = compiler.get_default_backend()
            if backend is not None:
                compiler.lookup_backend(backend)  # an unknown or unavailable backend fails here
                compiler.set_default_backend(backend)
                stack.callback(compiler.set_default_backend, previous)
            if compile:
                stack.enter_context(compile_modules())
        stack.enter_context(torch_alias())
        try:
            return runpy.run_path(path, run_name="__main__")
        except ImportError as exc:
            _note_torch_names(exc)
            raise
        finally:
            sys.argv, sys.path[:] = saved_argv, saved_path


def _split(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """The runner's options, and SCRIPT ARGS... (everything from the first argument that is
    not an option, or after ``--``)."""
    options: list[str] = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--":
            return options, list(argv[i + 1:])
        if not arg.startswith("-") or arg == "-":
            return options, list(argv[i:])
        options.append(arg)
        if arg == "--backend":
            if i + 1 < len(argv):
                options.append(argv[i + 1])
            i += 1
        i += 1
    return options, []


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=_PROG, usage=f"{_PROG} [--compile] [--backend NAME] [--] SCRIPT [ARGS...]",
        description="Run an unmodified PyTorch script on tensorplay: `torch` and its submodules are tensorplay's. "
                    f"Names tensorplay lacks are listed in {COVERAGE_PAGE}.")
    parser.add_argument("--compile", action="store_true",
                        help="compile each top-level nn.Module call as tp.compile(module) would")
    parser.add_argument("--backend", metavar="NAME",
                        help="the compiler backend for --compile and the script's torch.compile calls "
                             "(default: tensorplay's default backend, iree-cpu)")
    return parser


def _script_frames(tb: Any, path: str) -> Any:
    """The traceback from the script's first frame on (the runner's frames left out), as
    ``python SCRIPT`` shows it."""
    start = tb
    while start is not None and os.path.abspath(start.tb_frame.f_code.co_filename) != path:
        start = start.tb_next
    return start if start is not None else tb


def main(argv: Sequence[str] | None = None) -> int:
    """The command line: parse the options, run the script, return its exit status (1 and
    the traceback when it raises, as ``python SCRIPT``)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    options, rest = _split(argv)
    parser = _parser()
    args = parser.parse_args(options)
    if not rest:
        parser.error("the script to run is missing")
    script, script_args = rest[0], rest[1:]
    if not os.path.isfile(script):
        print(f"{_PROG}: can't open file {script!r}: no such file", file=sys.stderr)
        return 2
    if args.backend is not None:
        from .compiler import InvalidBackend, lookup_backend

        try:
            lookup_backend(args.backend)
        except (InvalidBackend, ValueError, RuntimeError) as exc:
            parser.error(f"--backend {args.backend}: {exc}")
    try:
        run_path(script, script_args, compile=args.compile, backend=args.backend)
    except SystemExit:
        raise
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # noqa: BLE001 - reported as python SCRIPT reports it
        tb = _script_frames(exc.__traceback__, os.path.abspath(script))
        report = traceback.TracebackException(type(exc), exc, tb)
        # the alias's own frame adds nothing to "torch.X is not provided"
        report.stack[:] = [f for f in report.stack if os.path.abspath(f.filename) != _ALIAS_FILE]
        print("".join(report.format()), end="", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
