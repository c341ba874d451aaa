"""Every public name of tensorplay.compiler has exactly the signature of the API reference
(the seed listing): parameter names, kinds, defaults and annotations."""

from __future__ import annotations

import inspect
import re

import pytest

import tensorplay.compiler as tpc

# The API reference's signatures, as it prints them (``[...]`` is how it renders ``...``).
SEED = {
    "allow_in_graph": "(fn: Any) -> Any",
    "assume_constant_result": "(fn: Callable[[...], Any]) -> Callable[[...], Any]",
    "compile": "(model: Callable[[...], Any] | None = None, *, fullgraph: bool = False, "
               "dynamic: bool | None = None, backend: str | Callable[[...], Any] | None = None, "
               "mode: str | None = None, options: dict[str, Any] | None = None, "
               "name: str | None = None, disable: bool = False, recompile_limit: int | None = None, "
               "isolate_recompiles: bool = False, strict_native: bool = False, "
               "dynamic_shapes: Any = None) -> Callable[[...], Any]",
    "disable_capture": "() -> Iterator[None]",
    "disable": "(fn: Callable[[_P], _R] | None = None, recursive: bool = True, *, "
               "reason: str | None = None) -> Any",
    "disallow_in_graph": "(fn: Callable[[...], Any]) -> Callable[[...], Any]",
    "export": "(fn: Callable[[...], Any] | None = None) -> Any",
    "get_backend_capabilities": "(backend: str | Callable[[...], Any]) -> Any",
    "get_default_backend": "() -> str | Callable[[...], Any]",
    "is_compiling": "() -> bool",
    "is_exporting": "() -> bool",
    "list_backends": "(exclude_tags: tuple[str, ...] | list[str] | None = ('debug', 'experimental'), "
                     "*, include_unavailable: bool = False) -> list[str]",
    "list_mode_options": "(mode: str | None = None) -> dict[str, Any]",
    "lookup_backend": "(backend: str | Callable[[...], Any]) -> Callable[[...], Any]",
    "mark_static": "(tensor: Any, dim: int | None = None) -> Any",
    "nested_compile_region": "(fn: Callable[[_P], _R] | None = None, *, options: Any = None, "
                             "max_reuse_entries: int = 8, "
                             "reuse_hash_fn: Callable[[...], Any] | None = None) -> Any",
    "nonstrict_trace": "(traceable_fn: Callable[[_P], _R]) -> Callable[[_P], _R]",
    "overload_method": "(fn: Callable[[...], Any]) -> Callable[[...], Any]",
    "register_backend": "(*args: Any, **kwargs: Any) -> Any",
    "register_debug_backend": "(*args: Any, **kwargs: Any) -> Any",
    "register_experimental_backend": "(*args: Any, **kwargs: Any) -> Any",
    "reset": "() -> None",
    "set_default_backend": "(backend: str | Callable[[...], Any] | None) -> None",
    "substitute_in_graph": "(original_fn: Callable[[_P], _R], *, can_constant_fold_through: bool = False, "
                           "skip_signature_check: bool = False) "
                           "-> Callable[[Callable[[_P], _R]], Callable[[_P], _R]]",
    "unregister_backend": "(name: str) -> None",
    "unused": "(fn: Callable[[...], Any]) -> Callable[[...], Any]",
}
SEED_CLASSES = {
    "NestedCompileRegionOptions": "(fw_compiler: Callable[[...], Any] | None = None, "
                                  "bw_compiler: Callable[[...], Any] | None = None)",
    "InvalidBackend": "(name: str, suggestions: Sequence[str] | None = None)",
}
SEED_EXCEPTIONS = {"GraphCaptureError": RuntimeError, "InvalidBackend": (ValueError, RuntimeError)}
#: Names exported beyond the reference, each documented in docs/compiler.md.
EXTRAS = {"explain", "CompiledFunction", "save_cache_bundle", "load_cache_bundle"}


def _normalize(annotation: str) -> str:
    """One spelling per annotation: the reference renders ``Callable[..., X]`` and
    ``Callable[_P, X]`` (a ParamSpec) as ``Callable[[...], X]`` and ``Callable[[_P], X]``;
    module prefixes and spaces carry no meaning."""
    text = annotation.replace("typing.", "").replace("collections.abc.", "")
    text = re.sub(r"\s+", "", text)
    return re.sub(r"Callable\[\[(\.\.\.|_P)\],", r"Callable[\1,", text)


def _expected(name: str, text: str) -> inspect.Signature:
    namespace: dict = {}
    exec(f"from __future__ import annotations\ndef {name}{text}: ...", namespace)
    return inspect.signature(namespace[name])


def _describe(sig: inspect.Signature, with_return: bool = True) -> list[tuple]:
    def ann(a):
        if a is inspect.Parameter.empty or a is inspect.Signature.empty:
            return None
        return _normalize(a if isinstance(a, str) else inspect.formatannotation(a))

    rows = [(p.name, p.kind.name, p.default, ann(p.annotation)) for p in sig.parameters.values()]
    if with_return:
        rows.append(("return", ann(sig.return_annotation)))
    return rows


@pytest.mark.parametrize("name", sorted(SEED))
def test_function_signature_matches_reference(name):
    assert hasattr(tpc, name), f"tensorplay.compiler.{name} is missing"
    actual = inspect.signature(getattr(tpc, name))
    assert _describe(actual) == _describe(_expected(name, SEED[name])), (
        f"tensorplay.compiler.{name}{actual} differs from the reference {name}{SEED[name]}")


@pytest.mark.parametrize("name", sorted(SEED_CLASSES))
def test_class_signature_matches_reference(name):
    assert hasattr(tpc, name), f"tensorplay.compiler.{name} is missing"
    cls = getattr(tpc, name)
    assert isinstance(cls, type)
    actual = inspect.signature(cls)
    expected = _expected(name, SEED_CLASSES[name])
    assert _describe(actual, False) == _describe(expected, False), (
        f"tensorplay.compiler.{name}{actual} differs from the reference {name}{SEED_CLASSES[name]}")


@pytest.mark.parametrize("name", sorted(SEED_EXCEPTIONS))
def test_exception_bases_match_reference(name):
    cls = getattr(tpc, name)
    bases = SEED_EXCEPTIONS[name]
    for base in bases if isinstance(bases, tuple) else (bases,):
        assert issubclass(cls, base), f"{name} must derive from {base.__name__}"


def test_all_lists_the_reference_names_plus_documented_extras():
    public = set(tpc.__all__)
    reference = set(SEED) | set(SEED_CLASSES) | set(SEED_EXCEPTIONS)
    assert not reference - public, f"missing from __all__: {sorted(reference - public)}"
    assert public - reference <= EXTRAS, f"undocumented extras in __all__: {sorted(public - reference - EXTRAS)}"
    assert len(tpc.__all__) == len(public), "__all__ lists a name twice"
    for name in tpc.__all__:
        assert getattr(tpc, name) is not None


def test_reference_counts():
    assert len(SEED) == 26
    assert len(SEED_CLASSES) + len(SEED_EXCEPTIONS) - 1 == 3  # InvalidBackend is both


def test_normalization_is_not_lenient_about_names_or_defaults():
    good = _expected("f", "(fn: Callable[[...], Any] | None = None) -> Any")
    assert _describe(good) != _describe(_expected("f", "(fn: Callable[[...], Any] | None = 1) -> Any"))
    assert _describe(good) != _describe(_expected("f", "(g: Callable[[...], Any] | None = None) -> Any"))
    assert _describe(good) != _describe(_expected("f", "(*, fn: Callable[[...], Any] | None = None) -> Any"))
    assert _describe(good) != _describe(_expected("f", "(fn: Callable[..., int] | None = None) -> Any"))
    assert _describe(good) == _describe(_expected("f", "(fn: Callable[..., Any] | None = None) -> Any"))
    assert _normalize("Callable[[Callable[[_P], _R]], Callable[[_P], _R]]") == \
        _normalize("Callable[[Callable[_P, _R]], Callable[_P, _R]]")
    assert _normalize("Callable[[int], _R]") != _normalize("Callable[int, _R]")
