"""Bad input ends in a named error that says what was wrong and what to do, never in IREE's
raw status text: compiled calls with arguments the function rejects, exported modules called
with the wrong arguments, damaged or foreign ``.vmfb`` and ``.irpa`` files, damaged
``.safetensors`` files and ``tp.save`` checkpoints (and PyTorch pickles given to any of their
loaders: refused, never unpickled), signatures edited inside a vmfb (refused before anything
is evaluated), and compile caches that cannot be
written or hold entries of another IREE version (compiles go on, with one warning).

Every case is one record of ``CASES``: a name, a callable that builds the bad input and
triggers it, the exception class expected (None: the call must succeed and give exactly one
warning) and a regex on the message (or on that warning).
"""

from __future__ import annotations

import errno
import hashlib
import io
import json
import logging
import os
import pickle
import re
import shutil
import stat
import struct
import warnings
import zipfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

import tensorplay as tp
from tensorplay import nn, runtime
from tensorplay.compiler.backends import cache
from tensorplay.compiler.backends.iree import compile_mlir, get_iree_backend
from tensorplay.export import Dim
from tensorplay.runtime.program import load_vm_module
from tensorplay.runtime.signature import MODULE_KEY, SIGNATURE_KEY, EntrySignature

pytest.importorskip("iree.compiler")
iree_rt = pytest.importorskip("iree.runtime")


@dataclass(frozen=True)
class Case:
    name: str
    trigger: Callable[[Any], Any]
    error: type[BaseException] | None  # None: trigger succeeds and exactly one warning is given
    match: str                         # regex on the error's message (or on that one warning)

    def __repr__(self) -> str:
        return self.name


# -- what the cases work on ---------------------------------------------------------------------

X = np.arange(8, dtype=np.float32).reshape(2, 4) / 8


def add_scaled(x, y):
    return x * 2 + y


def masked(x, y):
    return x & y


def matmul(x, y):
    return x @ y


def as_eager(compiled: Any, *args: Any, **kwargs: Any) -> Any:
    """Call ``compiled`` (already compiled for other arguments) where its Python function
    fails: the error must be the one the eager call gives, same class and same message."""
    with pytest.raises(Exception) as eager:
        compiled.original(*args, **kwargs)
    try:
        compiled(*args, **kwargs)
    except Exception as exc:  # compared with eager's below
        assert (type(exc), str(exc)) == (type(eager.value), str(eager.value))
        raise
    raise AssertionError(f"the compiled call succeeded where eager raised {eager.value!r}")


@pytest.fixture(scope="module")
def art(tmp_path_factory):
    """Files and programs shared by the cases (each built once): a static, a dynamic and an
    external-weights export of one Linear layer, a vmfb compiled from plain MLIR, and a
    compiled function with its good arguments already run."""
    root = tmp_path_factory.mktemp("bad-input")
    tp.manual_seed(0)
    linear = nn.Linear(4, 3).eval()
    example = (tp.ones(2, 4),)
    static = tp.export(linear, example).save(root / "linear.vmfb")
    dynamic = tp.export(linear, example, dynamic_shapes={"input": {0: Dim("batch", min=1, max=64)}})
    dynamic_path = dynamic.save(root / "linear_dyn.vmfb")
    external = tp.export(linear, example, external_weights=True).save(root / "linear_ext.vmfb")
    # LLVM's generic CPU: a file that loads on any machine, as an exported one does
    plain = compile_mlir(PLAIN_MLIR, get_iree_backend("iree-cpu").flags({"target_cpu": "generic"}),
                         backend="iree-cpu", name="plain")
    (root / "plain.vmfb").write_bytes(plain)

    compiled = tp.compile(add_scaled, fullgraph=True)
    compiled(tp.ones(3, 2), tp.ones(3, 2))
    compiled_bits = tp.compile(masked, fullgraph=True)
    compiled_bits(tp.ones(3, dtype=tp.int32), tp.ones(3, dtype=tp.int32))
    compiled_mm = tp.compile(matmul, fullgraph=True)
    compiled_mm(tp.ones(3, 2), tp.ones(2, 3))
    bounded = tp.compile(add_scaled, fullgraph=True, isolate_recompiles=True,
                         dynamic_shapes={"x": {0: Dim("n", min=2, max=8)}, "y": {0: Dim("n", min=2, max=8)}})
    bounded(tp.ones(3, 2), tp.ones(3, 2))
    return SimpleNamespace(root=root, linear=linear, static=static, dynamic=dynamic_path, external=external,
                           irpa=external.with_suffix(".irpa"), plain=root / "plain.vmfb", compiled=compiled,
                           compiled_bits=compiled_bits, compiled_mm=compiled_mm, bounded=bounded,
                           static_module=runtime.load(static), dynamic_module=runtime.load(dynamic_path))


@dataclass
class Env:
    art: SimpleNamespace
    tmp: Path
    monkeypatch: pytest.MonkeyPatch

    def write(self, name: str, data: bytes) -> Path:
        path = self.tmp / name
        path.write_bytes(data)
        return path

    def beside(self, vmfb: Path, irpa: bytes | None = None, arrays: dict | None = None) -> Path:
        """A copy of the external-weights vmfb in a folder of its own, with the given archive."""
        folder = self.tmp / f"pair{len(list(self.tmp.iterdir()))}"
        folder.mkdir()
        shutil.copy(vmfb, folder / "m.vmfb")
        if irpa is not None:
            (folder / "m.irpa").write_bytes(irpa)
        if arrays is not None:
            runtime.save_parameters(folder / "m.irpa", arrays)
        return folder / "m.vmfb"


@pytest.fixture
def env(art, tmp_path, monkeypatch):
    return Env(art, tmp_path, monkeypatch)


PLAIN_MLIR = """
func.func @main(%a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> {
  %0 = arith.addf %a, %b : tensor<4xf32>
  return %0 : tensor<4xf32>
}
"""


# -- byte surgery on files ----------------------------------------------------------------------

def flip(data: bytes, at: float, n: int = 64) -> bytes:
    """``data`` with ``n`` bytes inverted from fraction ``at`` of its length on."""
    start = int(len(data) * at)
    out = bytearray(data)
    for i in range(start, min(start + n, len(out))):
        out[i] ^= 0xFF
    return bytes(out)


def reseal(data: bytes) -> bytes:
    """Recompute the CRC-32s that IREE's zip framing of a vmfb keeps for each part (local
    header and central directory), as someone editing the file with care would."""
    out = bytearray(data)
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        infos = archive.infolist()
        directory = archive.start_dir
    for info in infos:
        off = info.header_offset
        assert out[off:off + 4] == b"PK\x03\x04"
        name_len, extra_len = struct.unpack_from("<HH", out, off + 26)
        start = off + 30 + name_len + extra_len
        struct.pack_into("<I", out, off + 14, zlib.crc32(out[start:start + info.compress_size]))
        info.CRC = zlib.crc32(out[start:start + info.compress_size])
    pos = directory
    for info in infos:
        assert out[pos:pos + 4] == b"PK\x01\x02"
        struct.pack_into("<I", out, pos + 16, info.CRC)
        name_len, extra_len, comment_len = struct.unpack_from("<HHH", out, pos + 28)
        pos += 46 + name_len + extra_len + comment_len
    return bytes(out)


def edit_record(path: Path, key: str, edit: Callable[[dict], Any], *, sealed: bool = True) -> bytes:
    """The vmfb at ``path`` with the JSON record ``key`` of ``forward`` rewritten by ``edit``
    (in place, padded to the same length), CRCs recomputed unless ``sealed`` is False."""
    data = path.read_bytes()
    module = load_vm_module(data)  # kept alive while its function is read
    old = module.lookup_function("forward").reflection[key]
    del module
    record = json.loads(old)
    new = edit(record)
    text = new if isinstance(new, str) else json.dumps(record if new is None else new, separators=(",", ":"))
    assert len(text) <= len(old), f"the edit needs {len(text)} bytes, the record has {len(old)}"
    assert data.count(old.encode()) == 1
    edited = data.replace(old.encode(), text.ljust(len(old)).encode())
    return reseal(edited) if sealed else edited


def with_checks(*checks: str) -> Callable[[dict], None]:
    def edit(record: dict) -> None:
        record["dims"]["checks"] = [[c, "edited"] for c in checks]
    return edit


def load_edited(env: Env, key: str, edit: Callable[[dict], Any], *, source: str = "dynamic",
                sealed: bool = True) -> Any:
    data = edit_record(getattr(env.art, source), key, edit, sealed=sealed)
    return runtime.load(env.write("edited.vmfb", data))


def irpa_data_segment(data: bytes) -> tuple[int, int]:
    """(offset, length) of an IRPA v0 archive's data segment, from its header."""
    assert data[:4] == b"IRPA"
    offset, length = struct.unpack_from("<QQ", data, 72)
    return offset, length


# -- the cache cases ----------------------------------------------------------------------------

def _programs():
    """Two fresh compiled functions (graphs of their own) and their eager references."""
    def scaled(x):
        return x * 3 - 1

    def squashed(x):
        return (x * 0.5).tanh() + x

    return [(tp.compile(scaled, fullgraph=True), scaled), (tp.compile(squashed, fullgraph=True), squashed)]


def compile_with_cache_at(env: Env, folder: Path) -> None:
    """Point the cache at ``folder``, compile two graphs (two cache writes): both run and give
    eager's results, and nothing is stored."""
    env.monkeypatch.setenv("TENSORPLAY_CACHE_DIR", str(folder))
    env.monkeypatch.delenv("TENSORPLAY_CACHE", raising=False)
    before = cache.cache_stats()
    x = tp.tensor(np.linspace(-2, 2, 12, dtype=np.float32).reshape(3, 4))
    for compiled, eager in _programs():
        for _ in range(2):
            np.testing.assert_allclose(compiled(x).detach().numpy(), eager(x).detach().numpy(), rtol=1e-6, atol=1e-6)
    after = cache.cache_stats()
    assert after["compiles"] - before["compiles"] == 2
    assert after["writes"] == before["writes"]
    if folder.is_dir():
        assert not [p.name for p in folder.iterdir() if p.name.endswith((".tpc", ".tmp"))]


def cache_under_a_file(env: Env) -> None:
    blocker = env.tmp / "not-a-folder"
    blocker.write_text("a regular file")
    compile_with_cache_at(env, blocker / "cache")


def cache_is_a_file(env: Env) -> None:
    blocker = env.tmp / "cache-file"
    blocker.write_text("a regular file")
    compile_with_cache_at(env, blocker)


def cache_read_only(env: Env) -> None:
    folder = env.tmp / "read-only"
    folder.mkdir()
    folder.chmod(0o555)
    try:
        if os.access(folder, os.W_OK):
            pytest.skip("this user can write to read-only folders (root)")
        compile_with_cache_at(env, folder)
    finally:
        folder.chmod(0o755)


def cache_disk_full(env: Env) -> None:
    folder = env.tmp / "full"

    def full(f, data):
        f.write(data[: len(data) // 2])
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    env.monkeypatch.setattr(cache, "_write_all", full)
    compile_with_cache_at(env, folder)
    assert folder.is_dir() and not list(folder.glob("*.tmp"))


def _entry_of_one_compile(env: Env) -> tuple[Path, Callable, Any]:
    folder = env.tmp / "cache"
    env.monkeypatch.setenv("TENSORPLAY_CACHE_DIR", str(folder))
    env.monkeypatch.delenv("TENSORPLAY_CACHE", raising=False)
    (compiled, eager), _ = _programs()
    x = tp.arange(6.0)
    np.testing.assert_allclose(compiled(x).detach().numpy(), eager(x).detach().numpy())
    (entry,) = folder.glob("*.tpc")
    return entry, eager, x


def cache_entry_of_another_iree(env: Env) -> None:
    entry, eager, x = _entry_of_one_compile(env)
    key = entry.name[: -len(cache.SUFFIX)]
    with env.monkeypatch.context() as m:  # the entry IREE 3.12 would have written under this key
        m.setattr(cache, "iree_compiler_version", lambda: "VERSION='3.12.0';REVISIONS={'IREE': 'abc'}")
        cache.store_entry(key, b"a vmfb compiled by another IREE version")
    before = cache.cache_stats()
    (compiled, _), _ = _programs()
    np.testing.assert_allclose(compiled(x).detach().numpy(), eager(x).detach().numpy())
    after = cache.cache_stats()
    assert (after["stale"] - before["stale"], after["compiles"] - before["compiles"]) == (1, 1)
    assert cache.load_entry(key) is not None  # replaced by this version's artifact


def cache_entry_of_another_key(env: Env) -> None:
    entry, eager, x = _entry_of_one_compile(env)
    other = cache.cache_key(mlir="module {}", backend="iree-cpu", flags=[], target="elsewhere")
    entry.rename(entry.with_name(other + cache.SUFFIX))  # a copied file does not pass for another key
    assert cache.load_entry(other) is None
    assert not list(entry.parent.glob("*.tpc"))
    before = cache.cache_stats()
    (compiled, _), _ = _programs()
    np.testing.assert_allclose(compiled(x).detach().numpy(), eager(x).detach().numpy())
    assert cache.cache_stats()["compiles"] - before["compiles"] == 1


def cache_others_can_write(env: Env) -> None:
    folder = env.tmp / "open-cache"
    folder.mkdir()
    folder.chmod(0o777)
    compile_with_cache_at(env, folder)


def cache_of_another_user(env: Env) -> None:
    if os.geteuid() != 0:
        pytest.skip("giving a folder to another user needs root (chown)")
    folder = env.tmp / "their-cache"
    folder.mkdir(mode=0o700)
    os.chown(folder, 65534, 65534)
    compile_with_cache_at(env, folder)


def _recompiled_after(env: Env, entry: Path, eager: Callable, x: Any) -> None:
    """A fresh compile of the same graph finds ``entry`` refused, compiles and stores its own."""
    before = cache.cache_stats()
    (compiled, _), _ = _programs()
    np.testing.assert_allclose(compiled(x).detach().numpy(), eager(x).detach().numpy())
    after = cache.cache_stats()
    assert (after["untrusted"] - before["untrusted"], after["compiles"] - before["compiles"]) == (1, 1)
    assert entry.is_file() and not entry.is_symlink() and stat.S_IMODE(entry.stat().st_mode) == 0o600


def cache_entry_others_can_write(env: Env) -> None:
    entry, eager, x = _entry_of_one_compile(env)
    entry.chmod(0o666)
    _recompiled_after(env, entry, eager, x)


def cache_entry_linked_outside(env: Env) -> None:
    entry, eager, x = _entry_of_one_compile(env)
    outside = env.tmp / "planted.vmfb.tpc"
    entry.rename(outside)  # a valid entry for the key, reached through a link
    entry.symlink_to(outside)
    _recompiled_after(env, entry, eager, x)
    assert outside.is_file()


# -- the table ----------------------------------------------------------------------------------

SIG = r"forward\(input: float32\[2, 4\]\) -> float32\[2, 3\]"
DYN = r"forward\(input: float32\[batch, 4\]\) -> float32\[batch, 3\]"
DAMAGED = r"not a loadable IREE VM flatbuffer \(\d+ bytes, {}\): {}.*copy or save it again"
REFUSED = r"edited: the tensorplay\.signature of function 'forward' is refused: size check .*{}"
IRPA = r"m: .*m\.irpa \(\d+ bytes\) is not a readable IREE parameter archive \(\.irpa\): {}.*write it again"
ST = r"^tensorplay\.safetensors\.load_file: '.*w\.safetensors' \(\d+ bytes\) is not a valid safetensors file: {}"
CKPT = r"^tp\.load: '.*c\.tp' {}"
UNPICKLE = r"tensorplay never unpickles files \(that could run code from them\): load it with torch\.load"


def _plain(env: Env) -> Any:
    return runtime.load(env.art.plain)


CASES = [
    # compiled calls: what the Python function rejects fails as it does eagerly, after a compile too
    Case("compiled: missing argument", lambda e: as_eager(e.art.compiled, tp.ones(3, 2)), TypeError,
         r"^add_scaled\(\) missing 1 required positional argument: 'y'$"),
    Case("compiled: extra argument", lambda e: as_eager(e.art.compiled, tp.ones(3, 2), tp.ones(3, 2), tp.ones(3, 2)),
         TypeError, r"^add_scaled\(\) takes 2 positional arguments but 3 were given$"),
    Case("compiled: unknown keyword", lambda e: as_eager(e.art.compiled, tp.ones(3, 2), z=tp.ones(3, 2)), TypeError,
         r"^add_scaled\(\) got an unexpected keyword argument 'z'$"),
    Case("compiled: non-tensor argument", lambda e: as_eager(e.art.compiled, tp.ones(3, 2), "text"), TypeError,
         r"^tp\.add\(\): unsupported operand type str \(argument 1\); expected a Tensor or a number$"),
    Case("compiled: None argument", lambda e: as_eager(e.art.compiled, tp.ones(3, 2), None), TypeError,
         r"unsupported operand type NoneType"),
    Case("compiled: wrong dtype", lambda e: as_eager(e.art.compiled_bits, tp.ones(3, dtype=tp.int32), tp.ones(3)),
         TypeError, r"^tp\.bitwise_and: not implemented for dtype float32$"),
    Case("compiled: shapes that do not broadcast", lambda e: as_eager(e.art.compiled, tp.ones(3, 2), tp.ones(4, 5, 6)),
         ValueError, r"cannot broadcast shapes \[3, 2\] and \[4, 5, 6\]"),
    Case("compiled: shapes that cannot be multiplied", lambda e: e.art.compiled_mm(tp.ones(3, 2), tp.ones(3, 2)),
         ValueError, r"(?s)^tp\.matmul: mat1 and mat2 shapes cannot be multiplied \(3x2 and s0xs1\)\n\(symbolic "
                     r"sizes in this message: s0 is y\.size\(0\), 3 in this call; s1 is y\.size\(1\), 2 in this "
                     r"call\)"),
    Case("compiled: dynamic_shapes bound exceeded", lambda e: e.art.bounded(tp.ones(9, 2), tp.ones(9, 2)),
         ValueError, r"dynamic_shapes: x dim 0 \('n'\) has size 9, outside Dim\('n', min=2, max=8\)'s range \[2, 8\]"),
    Case("compiled: dynamic dims that must agree", lambda e: e.art.bounded(tp.ones(4, 2), tp.ones(5, 2)),
         ValueError, r"dimension 'n' has size 4 at x dim 0 but 5 at y dim 0; dims with one name must agree"),
    # exported module calls: checked against the stored signature before anything runs
    Case("exported: no argument", lambda e: e.art.static_module.forward(), TypeError,
         SIG + r" takes 1 tensor argument\(s\) but 0 were given"),
    Case("exported: two arguments", lambda e: e.art.static_module.forward(X, X), TypeError,
         SIG + r" takes 1 tensor argument\(s\) but 2 were given"),
    Case("exported: unknown keyword", lambda e: e.art.static_module.forward(x=X), TypeError,
         SIG + r" got an unexpected keyword argument 'x'"),
    Case("exported: wrong dtype", lambda e: e.art.static_module.forward(X.astype(np.int32)), TypeError,
         SIG + r": argument 'input' has dtype int32, expected float32 \(convert it with \.astype\('float32'\)\)"),
    Case("exported: float64 array", lambda e: e.art.static_module.forward(X.astype(np.float64)), TypeError,
         SIG + r": argument 'input' has dtype float64, expected float32"),
    Case("exported: wrong rank", lambda e: e.art.static_module.forward(X[None]), ValueError,
         SIG + r": argument 'input' has shape \[1, 2, 4\], expected \[2, 4\] \(this entry point was exported "
               r"with static shapes; export again .* or with dynamic_shapes"),
    Case("exported: wrong shape", lambda e: e.art.static_module.forward(np.ones((3, 4), np.float32)), ValueError,
         SIG + r": argument 'input' has shape \[3, 4\], expected \[2, 4\]"),
    Case("exported: dynamic size above its bound", lambda e: e.art.dynamic_module.forward(np.ones((65, 4), np.float32)),
         ValueError, DYN + r": the argument sizes break input\.size\(0\) <= 64 \(got input=\[65, 4\]\)"),
    Case("exported: dynamic entry, static dim wrong",
         lambda e: e.art.dynamic_module.forward(np.ones((5, 3), np.float32)), ValueError,
         r"argument 'input' has size 3 at dim 1, expected 4 \(only the named dims of \[batch, 4\] may vary\)"),
    Case("exported: text argument", lambda e: e.art.static_module.forward("weights.npy"), TypeError,
         SIG + r": argument 'input' must be an array or tensor of float32\[2, 4\], got str"),
    Case("exported: None argument", lambda e: e.art.static_module.forward(None), TypeError,
         SIG + r": argument 'input' is None; pass an array or tensor of float32\[2, 4\]"),
    Case("exported: arbitrary object", lambda e: e.art.static_module.forward(object()), TypeError,
         SIG + r": argument 'input' must be an array or tensor of float32\[2, 4\], got object"),
    Case("exported: dict argument", lambda e: e.art.static_module.forward({"input": X}), TypeError,
         SIG + r": argument 'input' must be an array or tensor of float32\[2, 4\], got dict"),
    Case("exported: ragged list", lambda e: e.art.static_module.forward([[1.0, 2.0], [3.0]]), TypeError,
         SIG + r": argument 'input' must be an array or tensor of float32\[2, 4\], got list"),
    Case("exported: object array", lambda e: e.art.static_module.forward(np.array([[object()] * 4] * 2)), TypeError,
         SIG + r": argument 'input' has dtype object, expected float32"),
    # damaged and foreign vmfbs
    Case("vmfb: not the pinned digest", lambda e: runtime.load(e.art.static, sha256="0" * 64), ValueError,
         r"^runtime\.load: .*\.vmfb has sha256 [0-9a-f]{64}, not the pinned 0{64}: it is not the file you pinned "
         r"\(damaged, replaced, or another build\), and nothing of it was loaded"),
    Case("vmfb: a pin that is no digest", lambda e: runtime.load(e.art.static, sha256="md5:abc"), ValueError,
         r"^runtime\.load: .*\.vmfb: sha256='md5:abc' is not a sha256 digest"),
    Case("vmfb: truncated to half", lambda e: runtime.load(e.write("half.vmfb", e.art.static.read_bytes()[:4000])),
         ValueError, DAMAGED.format("half", r"the file is truncated or damaged")),
    Case("vmfb: last bytes cut off", lambda e: runtime.load(e.write("cut.vmfb", e.art.static.read_bytes()[:-10])),
         ValueError, DAMAGED.format("cut", r"the file is truncated or damaged \(its zip directory is missing")),
    Case("vmfb: bytes flipped in the middle",
         lambda e: runtime.load(e.write("flip.vmfb", flip(e.art.static.read_bytes(), 0.5))),
         ValueError, DAMAGED.format("flip", r"the file is damaged \(the checksum of its part '[^']+' does not match")),
    Case("vmfb: executable bytes flipped",
         lambda e: runtime.load(e.write("exe.vmfb", flip(e.art.static.read_bytes(), 0.75))),
         ValueError, DAMAGED.format("exe", r"the file is damaged \(the checksum of its part '\w+\.so' does not match")),
    Case("vmfb: loaded from damaged bytes", lambda e: runtime.load(flip(e.art.static.read_bytes(), 0.25)),
         ValueError, r"not a loadable IREE VM flatbuffer \(\d+ bytes\): the file is damaged"),
    Case("vmfb: empty file", lambda e: runtime.load(e.write("empty.vmfb", b"")), ValueError,
         DAMAGED.format("empty", r"IREE says: FlatBuffer data is not present")),
    Case("vmfb: a text file", lambda e: runtime.load(e.write("notes.vmfb", b"not a module\n" * 20)), ValueError,
         DAMAGED.format("notes", r"IREE says: FlatBuffer length prefix out of bounds")),
    Case("vmfb: a numpy archive", lambda e: runtime.load(e.write("arrays.vmfb", _npz())), ValueError,
         DAMAGED.format("arrays", r"it is a zip archive holding x\.npy, not an IREE module")),
    Case("vmfb: plain, no signatures: too few arrays", lambda e: _plain(e)(np.ones(4, np.float32)), ValueError,
         r"plain.*: calling main with float32\[4\] failed: input list and function mismatch; expected 2 "
         r"arguments but passed 1\n  the function is: sync func @main"),
    Case("vmfb: plain, no signatures: wrong shape", lambda e: _plain(e)(np.ones(4, np.float32), np.ones(5, np.float32)),
         ValueError, r"calling main with float32\[4\], float32\[5\] failed: input1 shape dimension 0 mismatch; "
                     r"expected 4 but have 5"),
    Case("vmfb: plain, no signatures: wrong dtype", lambda e: _plain(e)(np.ones(4, np.float32), np.ones(4, np.int32)),
         ValueError, r"calling main with float32\[4\], int32\[4\] failed: input1 element type mismatch"),
    Case("vmfb: plain, no signatures: text array", lambda e: _plain(e)(np.ones(4, np.float32), np.array(["a"] * 4)),
         TypeError, r"argument 1 has dtype <U1, which IREE cannot take"),
    Case("vmfb: plain, no signatures: no forward", lambda e: _plain(e).forward(np.ones(4, np.float32)),
         AttributeError, r"plain has no entry point 'forward'; it has no tensorplay signatures .* call its functions "
                         r"with module\.call\(name, \*arrays\) \(functions: main\)"),
    Case("vmfb: plain, no signatures: keywords", lambda e: _plain(e)(a=np.ones(4, np.float32)), TypeError,
         r"has no tensorplay signatures; pass arrays positionally"),
    # damaged parameter archives
    Case("irpa: truncated in its data", lambda e: runtime.load(e.beside(e.art.external, _truncated_irpa(e))),
         ValueError, IRPA.format(r"IREE says: file segment out of range .*verifying storage segment")),
    Case("irpa: truncated header", lambda e: runtime.load(e.beside(e.art.external, e.art.irpa.read_bytes()[:40])),
         ValueError, IRPA.format(r"IREE says: file buffer underrun parsing header")),
    Case("irpa: empty", lambda e: runtime.load(e.beside(e.art.external, b"")), ValueError,
         IRPA.format(r"the file is empty")),
    Case("irpa: wrong magic", lambda e: runtime.load(e.beside(e.art.external, b"XXXX" + e.art.irpa.read_bytes()[4:])),
         ValueError, IRPA.format(r"IREE says: IRPA file magic missing or invalid")),
    Case("irpa: read directly, damaged", lambda e: runtime.load_parameters(e.write("w.irpa", b"IRPA" + bytes(30))),
         ValueError, r"w\.irpa \(34 bytes\) is not a readable IREE parameter archive"),
    Case("irpa: a parameter missing", lambda e: runtime.load(e.beside(e.art.external, arrays=_weights(e, drop="bias"))),
         ValueError, r"m: the parameter archive .*m\.irpa has no entry 'bias' \(expected float32\[3\]\); it has 1 "
                     r"entries\. Write the archive for this program with ExportedProgram\.save_parameters"),
    Case("irpa: a parameter of the wrong size",
         lambda e: runtime.load(e.beside(e.art.external, arrays=_weights(e, bias=np.zeros(5, np.float32)))),
         ValueError, r"parameter 'bias' in .*m\.irpa has 20 bytes, but the program expects float32\[3\] \(12 bytes\)"),
    Case("irpa: a parameter of the wrong dtype, same size",
         lambda e: runtime.load(e.beside(e.art.external, arrays=_weights(e, bias=np.zeros(3, np.int32)))),
         ValueError, r"parameter 'bias' in .*m\.irpa is int32\[3\], but the program expects float32\[3\]"),
    Case("irpa: a parameter of the wrong shape, same size",
         lambda e: runtime.load(e.beside(e.art.external, arrays=_weights(e, weight=np.zeros((4, 3), np.float32)))),
         ValueError, r"parameter 'weight' in .*m\.irpa is float32\[4, 3\], but the program expects float32\[3, 4\]"),
    Case("irpa: none next to the vmfb", lambda e: runtime.load(e.beside(e.art.external)), FileNotFoundError,
         r"m keeps its weights in a parameter archive \(saved as 'Linear\.irpa'\), and none was found next to "
         r".*; pass parameters='path/to/archive\.irpa'"),
    # edited signatures: refused at load, before anything is evaluated
    Case("signature: tower of powers", lambda e: load_edited(e, SIGNATURE_KEY, with_checks("9**9**9**9 > 0")),
         ValueError, REFUSED.format(r"holds Pow, .*exponent is not a constant from 0 to 16.*refuses it without "
                                    r"evaluating it.*export the program again")),
    Case("signature: power past the bit bound",
         lambda e: load_edited(e, SIGNATURE_KEY, with_checks("((v0**16)**16)**16 > 0")),
         ValueError, REFUSED.format(r"holds Pow, .*arithmetic that can reach \d+ bits \(more than 4096\)")),
    Case("signature: huge shift", lambda e: load_edited(e, SIGNATURE_KEY, with_checks("1 << 10**10 > v0")),
         ValueError, REFUSED.format(r"holds LShift, which size checks never use: a shift")),
    Case("signature: attribute access", lambda e: load_edited(e, SIGNATURE_KEY, with_checks("().__class__ == v0")),
         ValueError, REFUSED.format(r"holds Attribute, which size checks never use: an attribute access")),
    Case("signature: a module name", lambda e: load_edited(e, SIGNATURE_KEY, with_checks("os.system('id') == 0")),
         ValueError, REFUSED.format(r"holds Call, which size checks never use in this form")),
    Case("signature: a builtin call", lambda e: load_edited(e, SIGNATURE_KEY, with_checks("__import__('os') == 0")),
         ValueError, REFUSED.format(r"holds Call, .*a call of __import__ \(only min, max and abs may be called\)")),
    Case("signature: a name other than the dims", lambda e: load_edited(e, SIGNATURE_KEY, with_checks("sizes == 0")),
         ValueError, REFUSED.format(r"holds Name, .*the name 'sizes', which is no size of this signature")),
    Case("signature: an unbound size name", lambda e: load_edited(e, SIGNATURE_KEY, with_checks("v7 >= 1")),
         ValueError, REFUSED.format(r"the name 'v7', which is no size of this signature \(its sizes are v0 and "
                                    r"aN\[d\]\)")),
    Case("signature: another argument's shape", lambda e: load_edited(e, SIGNATURE_KEY, with_checks("a3[0] >= 1")),
         ValueError, REFUSED.format(r"holds Subscript, .*the arguments are a0\.\.a0")),
    Case("signature: a lambda", lambda e: load_edited(e, SIGNATURE_KEY, with_checks("(lambda: 1)() == 1")),
         ValueError, REFUSED.format(r"holds Call, .*a call of an expression")),
    Case("signature: a bare lambda", lambda e: load_edited(e, SIGNATURE_KEY, with_checks("lambda: v0")),
         ValueError, REFUSED.format(r"holds Lambda, which size checks never use: a lambda")),
    Case("signature: a comprehension", lambda e: load_edited(e, SIGNATURE_KEY, with_checks("[i for i in a0] == []")),
         ValueError, REFUSED.format(r"holds ListComp, which size checks never use: a comprehension")),
    Case("signature: a generator", lambda e: load_edited(e, SIGNATURE_KEY, with_checks("min(v0, (i for i in a0)) > 0")),
         ValueError, REFUSED.format(r"holds GeneratorExp, which size checks never use: a comprehension")),
    Case("signature: not an expression", lambda e: load_edited(e, SIGNATURE_KEY, with_checks("import os")),
         ValueError, r"refused: malformed size check 'import os' in an exported signature"),
    Case("signature: bound to a missing argument",
         lambda e: load_edited(e, SIGNATURE_KEY, lambda r: r["dims"].__setitem__("bind", [["v0", 4, 0]])),
         ValueError, r"refused: v0 is bound to argument 4, but the entry point takes 1"),
    Case("signature: an object dtype",
         lambda e: load_edited(e, SIGNATURE_KEY, lambda r: r["inputs"][0].__setitem__("dtype", "object"),
                               source="static"),
         ValueError, r"refused: input: dtype 'object' is not a tensor dtype \(bool, uint8"),
    Case("signature: a static shape changed",
         lambda e: load_edited(e, SIGNATURE_KEY, lambda r: r["inputs"][0].__setitem__("shape", [3, 4]),
                               source="static"),
         ValueError, r"refused: it does not match the compiled function \(argument 'input' is float32\[3, 4\] in the "
                     r"signature but tensor<2x4xf32> in the compiled function\); the file was edited"),
    Case("signature: an argument removed",
         lambda e: load_edited(e, SIGNATURE_KEY, lambda r: r.__setitem__("inputs", []), source="static"),
         ValueError, r"refused: it does not match the compiled function \(it lists 0 argument\(s\), the compiled "
                     r"function takes 1\)"),
    Case("signature: a result that does not exist",
         lambda e: load_edited(e, SIGNATURE_KEY, lambda r: r.__setitem__("tree", {"t": "out", "i": 5}),
                               source="static"),
         ValueError, r"refused: the result structure names result 5 of 1"),
    Case("signature: not JSON", lambda e: load_edited(e, SIGNATURE_KEY, lambda r: '{"v":2,"name":', source="static"),
         ValueError, r"the tensorplay\.signature of function 'forward' is refused: the signature record is not "
                     r"valid JSON"),
    Case("signature: edited without fixing the checksums",
         lambda e: load_edited(e, SIGNATURE_KEY, with_checks("v0 >= 2"), sealed=False), ValueError,
         DAMAGED.format("edited", r"the file is damaged \(the checksum of its part 'module\.fb' does not match")),
    Case("module record: archive outside the folder",
         lambda e: runtime.load(e.beside(_edited_archive_name(e))), ValueError,
         r"the tensorplay\.module record of function 'forward' is refused: the parameter archive must be a file "
         r"name \(no folders\), got '\.\./w\.irpa'"),
    Case("irpa: a safetensors file read directly",
         lambda e: runtime.load_parameters(e.write("w.safetensors", _st_bytes())), ValueError,
         r"w\.safetensors is a safetensors file, not an IREE parameter archive \(\.irpa\); read it with "
         r"tensorplay\.safetensors\.load_file$"),
    Case("irpa: a PyTorch checkpoint read directly", lambda e: runtime.load_parameters(e.write("w.irpa", _torch_zip())),
         ValueError, r"w\.irpa is a PyTorch checkpoint \(torch\.save\), not an IREE parameter archive \(\.irpa\); "
                     + UNPICKLE),
    Case("irpa: a PyTorch checkpoint as parameters=",
         lambda e: runtime.load(e.art.external, parameters=e.write("w.pt", _torch_zip())), ValueError,
         r"w\.pt \(\d+ bytes\) is not an IREE parameter archive \(\.irpa\): it is a PyTorch checkpoint "
         r"\(torch\.save\)\. Write the parameters with ExportedProgram\.save_parameters"),
    Case("irpa: a folder", lambda e: runtime.load_parameters(e.tmp), IsADirectoryError,
         r"is a folder; pass the parameter archive \(\.irpa\) file in it$"),
    Case("irpa: entry metadata not JSON", lambda e: runtime.load_parameters(_irpa_entry(e, "TENSORv0:{oops")),
         ValueError, r"w\.irpa: parameter 'w' cannot be read: its TENSORv0 metadata is not valid JSON \('\{oops'\)\. "
                     r"The archive is damaged or was written by another tool; write it again"),
    Case("irpa: entry metadata of an object dtype",
         lambda e: runtime.load_parameters(_irpa_entry(e, 'TENSORv0:{"dtype": "object", "shape": [3]}')),
         ValueError, r"parameter 'w' cannot be read: its metadata names dtype 'object', which is no tensor dtype"),
    Case("irpa: entry metadata larger than the entry",
         lambda e: runtime.load_parameters(_irpa_entry(e, 'TENSORv0:{"dtype": "float32", "shape": [4]}')),
         ValueError, r"parameter 'w' cannot be read: its metadata says float32\[4\] \(16 bytes\), but it holds 12 "
                     r"bytes"),
    # damaged safetensors files (tensorplay.safetensors.load_file / load)
    Case("safetensors: empty", lambda e: _st_load(e, b""), ValueError,
         ST.format(r"the file is empty \(0 bytes\)\. It was not written completely")),
    Case("safetensors: truncated in the data", lambda e: _st_load(e, _st_bytes()[:-8]), ValueError,
         ST.format(r"the data_offsets \[12, 60\] of tensor 'w' run past the end of its data section \(52 bytes\)\. "
                   r"The file is truncated or damaged: download or save it again$")),
    Case("safetensors: truncated header", lambda e: _st_load(e, _st_bytes()[:20]), ValueError,
         ST.format(r"its header length field says \d+ bytes, but only 12 bytes follow it\. The file is truncated, "
                   r"or not a safetensors file")),
    Case("safetensors: shorter than the length field", lambda e: _st_load(e, _st_bytes()[:5]), ValueError,
         ST.format(r"it has 5 bytes, fewer than the 8 of the header length field")),
    Case("safetensors: header length past the end",
         lambda e: _st_load(e, struct.pack("<Q", 2 ** 40) + _st_bytes()[8:]), ValueError,
         ST.format(r"its header length field says 1099511627776 bytes, but only \d+ bytes follow it")),
    Case("safetensors: header not JSON", lambda e: _st_load(e, struct.pack("<Q", 8) + b"{broken}"), ValueError,
         ST.format(r"its 8-byte header is not valid JSON \(Expecting property name enclosed in double quotes at "
                   r"character 1\)")),
    Case("safetensors: header not an object", lambda e: _st_load(e, _st_file([1, 2])), ValueError,
         ST.format(r"its header is a JSON array, not an object naming each tensor")),
    Case("safetensors: data offsets past the file",
         lambda e: _st_load(e, _st_file({"w": _st_entry("F32", [3, 4], 0, 48)}, 40)), ValueError,
         ST.format(r"the data_offsets \[0, 48\] of tensor 'w' run past the end of its data section \(40 bytes\)")),
    Case("safetensors: overlapping tensors",
         lambda e: _st_load(e, _st_file({"a": _st_entry("F32", [2], 0, 8), "b": _st_entry("F32", [2], 4, 12)}, 12)),
         ValueError, ST.format(r"tensors 'a' and 'b' overlap \(both hold bytes 4 to 8 of the data\)\. The file was "
                               r"not written by a safetensors writer")),
    Case("safetensors: bytes that belong to no tensor",
         lambda e: _st_load(e, _st_file({"a": _st_entry("F32", [1], 4, 8)}, 8)), ValueError,
         ST.format(r"bytes 0 to 4 of the data belong to no tensor")),
    Case("safetensors: bytes after the last tensor", lambda e: _st_load(e, _st_bytes() + b"junk"), ValueError,
         ST.format(r"4 bytes follow the last tensor's data \(the format allows none\)\. The file was damaged or "
                   r"appended to")),
    Case("safetensors: offsets that do not match dtype and shape",
         lambda e: _st_load(e, _st_file({"w": _st_entry("F32", [3], 0, 16)}, 16)), ValueError,
         ST.format(r"tensor 'w' is F32\[3\] \(12 bytes\), but its data_offsets \[0, 16\] hold 16 bytes")),
    Case("safetensors: negative size", lambda e: _st_load(e, _st_file({"w": _st_entry("F32", [-1], 0, 4)}, 4)),
         ValueError, ST.format(r"tensor 'w' has shape \[-1\]; a shape is a list of non-negative ints")),
    Case("safetensors: no data offsets", lambda e: _st_load(e, _st_file({"w": {"dtype": "F32", "shape": [1]}}, 4)),
         ValueError, ST.format(r"tensor 'w' has data_offsets None; they are \[begin, end\] byte offsets")),
    Case("safetensors: unknown dtype", lambda e: _st_load(e, _st_file({"w": _st_entry("Q7", [2], 0, 8)}, 8)),
         ValueError, ST.format(r"tensor 'w' has dtype 'Q7', which is no safetensors dtype \(one of BOOL, U8")),
    Case("safetensors: a dtype tensorplay lacks",
         lambda e: _st_load(e, _st_file({"w": _st_entry("F8_E4M3", [2], 0, 2)}, 2)), TypeError,
         r"^tensorplay\.safetensors\.load_file: tensor 'w' has dtype F8_E4M3, which tensorplay has no dtype for; "
         r"supported: F64, F32"),
    Case("safetensors: metadata that is not strings",
         lambda e: _st_load(e, _st_file({"__metadata__": {"epoch": 3}, "w": _st_entry("F32", [1], 0, 4)}, 4)),
         ValueError, ST.format(r"its __metadata__ is \{'epoch': 3\}, not an object of strings")),
    Case("safetensors: a PyTorch checkpoint", lambda e: _st_load(e, _torch_zip()), ValueError,
         ST.format(r"it is a PyTorch checkpoint \(torch\.save\); " + UNPICKLE)),
    Case("safetensors: a legacy PyTorch pickle", lambda e: _st_load(e, _pickle_payload(e)), ValueError,
         ST.format(r"it is a Python pickle \(such as PyTorch's legacy torch\.save format\); " + UNPICKLE)),
    Case("safetensors: the bytes of a tensorplay checkpoint", lambda e: _st().load(_checkpoint_bytes()), ValueError,
         r"^tensorplay\.safetensors\.load: the \d+ bytes are not a valid safetensors file: it is a tensorplay "
         r"checkpoint \(tp\.save\); read it with tp\.load\.$"),
    Case("safetensors: a folder", lambda e: _st().load_file(e.tmp), IsADirectoryError,
         r"load_file: '.*' is a folder; pass one of its \.safetensors files"),
    Case("safetensors: no such file", lambda e: _st().load_file(e.tmp / "nothing.safetensors"), FileNotFoundError,
         r"^tensorplay\.safetensors\.load_file: no such file: '.*nothing\.safetensors'$"),
    # damaged tensorplay checkpoints (tp.load)
    Case("checkpoint: empty", lambda e: tp.load(e.write("c.tp", b"")), ValueError,
         CKPT.format(r"is empty \(0 bytes\): it was not written completely; save it again with tp\.save$")),
    Case("checkpoint: truncated", lambda e: tp.load(e.write("c.tp", _checkpoint_bytes()[:-30])), ValueError,
         CKPT.format(r"is a zip archive that is truncated or damaged \(its directory at the end is missing or "
                     r"unreadable\); save it again")),
    Case("checkpoint: not a zip", lambda e: tp.load(e.write("c.tp", b"weights, honestly")), ValueError,
         CKPT.format(r"is not a tensorplay checkpoint \(not a zip archive\); tp\.load reads only files tp\.save "
                     r"wrote$")),
    Case("checkpoint: a zip without tensorplay.json",
         lambda e: tp.load(e.write("c.tp", _zip({"weights.bin": b"\0" * 8}))), ValueError,
         CKPT.format(r"is a zip archive without tensorplay\.json: not a tensorplay checkpoint")),
    Case("checkpoint: index not JSON",
         lambda e: tp.load(e.write("c.tp", _checkpoint_bytes(**{"tensorplay.json": b'{"format": '}))), ValueError,
         CKPT.format(r"has a tensorplay\.json that is not valid JSON \(Expecting value at character 11\): the file "
                     r"was edited or damaged")),
    Case("checkpoint: index not an object",
         lambda e: tp.load(e.write("c.tp", _checkpoint_bytes(**{"tensorplay.json": b"[1, 2]"}))), ValueError,
         CKPT.format(r"has a tensorplay\.json that is not a checkpoint index \(an object with format, version and "
                     r"root\)")),
    Case("checkpoint: another version", lambda e: tp.load(e.write("c.tp", _checkpoint_bytes(version=2))), ValueError,
         CKPT.format(r"has format 'tensorplay-checkpoint' version 2; this tensorplay reads 'tensorplay-checkpoint' "
                     r"version 1; save it with this tensorplay$")),
    Case("checkpoint: a tensor id without data",
         lambda e: tp.load(e.write("c.tp", _checkpoint_bytes(**{"tensors/1.npy": None}))), ValueError,
         CKPT.format(r"is damaged: the tensor at root\['opt'\]\[0\]\['m'\] is tensor 1, but the archive has no "
                     r"tensors/1\.npy: the file was written incompletely or edited; save it again with tp\.save$")),
    Case("checkpoint: a tensor id that is not an int",
         lambda e: tp.load(e.write("c.tp", _checkpoint_bytes(edit=lambda w: w.__setitem__("id", "0")))), ValueError,
         CKPT.format(r"is damaged: the tensor at root\['w'\] has id '0'; ids are non-negative ints")),
    Case("checkpoint: an unknown dtype",
         lambda e: tp.load(e.write("c.tp", _checkpoint_bytes(edit=lambda w: w.__setitem__("dtype", "complex64")))),
         ValueError, CKPT.format(r"is damaged: the tensor at root\['w'\] has dtype 'complex64', which is no "
                                 r"tensorplay dtype \(bool, uint8")),
    Case("checkpoint: a shape that disagrees with the data",
         lambda e: tp.load(e.write("c.tp", _checkpoint_bytes(edit=lambda w: w.__setitem__("shape", [4, 3])))),
         ValueError, CKPT.format(r"is damaged: tensor 0 holds float32\[3, 4\], the index says float32\[4, 3\]: the "
                                 r"file was changed")),
    Case("checkpoint: truncated tensor data",
         lambda e: tp.load(e.write("c.tp", _checkpoint_bytes(**{"tensors/0.npy": _npy(np.ones((3, 4),
                                                                                          np.float32))[:-8]}))),
         ValueError, CKPT.format(r"is damaged: tensors/0\.npy \(the tensor at root\['w'\]\) has 40 bytes of data, its "
                                 r"float32\[3, 4\] needs 48: the file is truncated or was changed")),
    Case("checkpoint: tensor data that is not .npy",
         lambda e: tp.load(e.write("c.tp", _checkpoint_bytes(**{"tensors/0.npy": b"\0" * 48}))), ValueError,
         CKPT.format(r"is damaged: tensors/0\.npy \(the tensor at root\['w'\]\) is not a \.npy array \(it does not "
                     r"start with the \.npy magic bytes\)")),
    Case("checkpoint: a pickled object array", lambda e: tp.load(e.write("c.tp", _checkpoint_with_pickle(e))),
         ValueError, CKPT.format(r"is damaged: tensors/0\.npy \(the tensor at root\['w'\]\) holds pickled Python "
                                 r"objects \(dtype object\), which tp\.load never unpickles \(that could run code "
                                 r"from the file\)")),
    Case("checkpoint: a malformed entry",
         lambda e: tp.load(e.write("c.tp", _checkpoint_bytes(root={"$": "dict", "items": [["k", 1, 2]]}))),
         ValueError, CKPT.format(r"is damaged: the dict at root has an item \['k', 1, 2\]; items are \[key, value\] "
                                 r"pairs with str or int keys")),
    Case("checkpoint: a damaged zip member",
         lambda e: tp.load(e.write("c.tp", _checkpoint_bytes().replace(b"tensorplay-checkpoint",
                                                                       b"tensorplay-checkpoinT"))),
         ValueError, CKPT.format(r"is a damaged zip archive \(Bad CRC-32 for file 'tensorplay\.json'\); save it "
                                 r"again")),
    Case("checkpoint: a PyTorch checkpoint", lambda e: tp.load(e.write("c.tp", _torch_zip())), ValueError,
         CKPT.format(r"is a PyTorch checkpoint \(torch\.save\), not a tensorplay checkpoint; " + UNPICKLE)),
    Case("checkpoint: a legacy PyTorch pickle", lambda e: tp.load(e.write("c.tp", _pickle_payload(e))), ValueError,
         CKPT.format(r"is a Python pickle \(such as PyTorch's legacy torch\.save format\), not a tensorplay "
                     r"checkpoint; " + UNPICKLE)),
    Case("checkpoint: a safetensors file", lambda e: tp.load(e.write("c.tp", _st_bytes())), ValueError,
         CKPT.format(r"is a safetensors file, not a tensorplay checkpoint; read it with "
                     r"tensorplay\.safetensors\.load_file$")),
    Case("checkpoint: no such file", lambda e: tp.load(e.tmp / "c.tp"), FileNotFoundError,
         r"^tp\.load: no such file: '.*c\.tp'$"),
    # compile caches that cannot be used: compiles go on, with one warning per folder
    Case("cache: folder under a regular file", cache_under_a_file, None,
         r"^tensorplay compile cache: cannot write to .*not-a-folder/cache \(Not a directory\); compiled programs "
         r"are not cached .*Point TENSORPLAY_CACHE_DIR at a writable folder, or set TENSORPLAY_CACHE=0$"),
    Case("cache: folder is a regular file", cache_is_a_file, None,
         r"^tensorplay compile cache: cannot write to .*cache-file \(File exists\)"),
    Case("cache: read-only folder", cache_read_only, None,
         r"^tensorplay compile cache: cannot write to .*read-only \(Permission denied\)"),
    Case("cache: disk full", cache_disk_full, None,
         r"^tensorplay compile cache: no space left to write in .*full \(No space left on device\); compiled "
         r"programs are not cached until there is .*Free space, point TENSORPLAY_CACHE_DIR at another folder"),
    Case("cache: entry of another IREE version", cache_entry_of_another_iree, None,
         r"^cache entry \w+\.vmfb\.tpc was not used \(written for another IREE compiler: \"VERSION='3\.12\.0'.*\): "
         r"deleted, compiling again$"),
    Case("cache: folder others can write", cache_others_can_write, None,
         r"^tensorplay compile cache: not using .*open-cache: its group or other users can write to it \(mode 777\)\. "
         r"Compiled programs are native code .*To fix: run chmod 700 .*open-cache; to share a cache on purpose, set "
         r"TENSORPLAY_CACHE_SHARED=1, which trusts everyone who can write there$"),
    Case("cache: folder of another user", cache_of_another_user, None,
         r"^tensorplay compile cache: not using .*their-cache: it is owned by .*uid 65534.*, not by you\. .*To fix: "
         r"point TENSORPLAY_CACHE_DIR at a folder of your own"),
    Case("cache: entry others can write", cache_entry_others_can_write, None,
         r"^tensorplay compile cache: entry \w+\.vmfb\.tpc in .*cache refused \(its group or other users can write "
         r"to it \(mode 666\); an entry is read only when it is a regular file that you own and only you can "
         r"write\): deleted, compiling again$"),
    Case("cache: entry linked to a file outside", cache_entry_linked_outside, None,
         r"^tensorplay compile cache: entry \w+\.vmfb\.tpc in .*cache refused \(a symbolic link to "
         r".*planted\.vmfb\.tpc; an entry is read only when"),
    Case("cache: entry renamed to another key", cache_entry_of_another_key, None,
         r"^cache entry \w+\.vmfb\.tpc was not used \(written for another key: '\w+', this process has '\w+'\)"),
]


def _npz() -> bytes:
    buffer = io.BytesIO()
    np.savez(buffer, x=np.arange(3))
    return buffer.getvalue()


def _weights(env: Env, drop: str | None = None, **replace: np.ndarray) -> dict[str, np.ndarray]:
    weights = runtime.load_parameters(env.art.irpa)
    weights.pop(drop, None)
    weights.update(replace)
    return weights


def _truncated_irpa(env: Env) -> bytes:
    data = env.art.irpa.read_bytes()
    offset, length = irpa_data_segment(data)
    return data[: offset + length // 2]


def _edited_archive_name(env: Env) -> Path:
    def edit(record: dict) -> None:
        record["parameters"]["archive"] = "../w.irpa"

    data = edit_record(env.art.external, MODULE_KEY, edit)
    return env.write("ext-edited.vmfb", data)


# -- weight files: safetensors, checkpoints, PyTorch's pickles ------------------------------------

class _Marker:
    """Unpickling this object creates the file ``path``: a pickle that runs code when loaded."""

    def __init__(self, path: Path):
        self.path = str(path)

    def __reduce__(self):
        return (open, (self.path, "w"))


def _pickle_payload(env: Env) -> bytes:
    """A pickle that creates ``env.tmp / "ran"`` when unpickled (as a legacy torch.save file is a
    pickle, protocol 2)."""
    return pickle.dumps({"w": _Marker(env.tmp / "ran")}, protocol=2)


def _zip(members: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as z:
        for name, data in members.items():
            z.writestr(name, data)
    return buffer.getvalue()


def _torch_zip(payload: bytes = b"\x80\x02}q\x00.") -> bytes:
    """A file laid out as torch.save writes it: a zip whose ``<name>/data.pkl`` is a pickle."""
    return _zip({"archive/data.pkl": payload, "archive/byteorder": b"little", "archive/version": b"3\n"})


def _st() -> Any:
    pytest.importorskip("safetensors")
    from tensorplay import safetensors

    return safetensors


def _st_bytes() -> bytes:
    """A valid safetensors file: b float32[3] at bytes 0-12 and w float32[3, 4] at 12-60."""
    return _st().save({"w": tp.ones(3, 4), "b": tp.zeros(3)})


def _st_entry(dtype: str, shape: list[int], begin: int, end: int) -> dict:
    return {"dtype": dtype, "shape": shape, "data_offsets": [begin, end]}


def _st_file(header: Any, data_size: int = 0) -> bytes:
    text = json.dumps(header).encode()
    return struct.pack("<Q", len(text)) + text + bytes(data_size)


def _st_load(env: Env, data: bytes) -> Any:
    return _st().load_file(env.write("w.safetensors", data))


def _npy(array: np.ndarray, allow_pickle: bool = False) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=allow_pickle)
    return buffer.getvalue()


def _checkpoint_bytes(version: int = 1, root: Any = None, edit: Callable[[dict], Any] | None = None,
                      **members: bytes | None) -> bytes:
    """A checkpoint of {"w": float32[3, 4], "opt": {0: {"step": 3, "m": float32[2]}}}, with its
    index's ``version`` or ``root`` replaced, ``edit`` applied to w's index entry, and the given
    members replaced (None: left out)."""
    buffer = io.BytesIO()
    tp.save({"w": tp.ones(3, 4), "opt": {0: {"step": 3, "m": tp.zeros(2)}}}, buffer)
    with zipfile.ZipFile(io.BytesIO(buffer.getvalue())) as z:
        contents = {name: z.read(name) for name in z.namelist()}
    index = json.loads(contents["tensorplay.json"])
    index["version"] = version
    if edit is not None:
        edit(index["root"]["items"][0][1])
    if root is not None:
        index["root"] = root
    contents["tensorplay.json"] = json.dumps(index).encode()
    contents.update(members)
    return _zip({name: data for name, data in contents.items() if data is not None})


def _checkpoint_with_pickle(env: Env) -> bytes:
    """A checkpoint whose first tensor's .npy holds a pickled object array that creates
    ``env.tmp / "ran"`` when unpickled."""
    return _checkpoint_bytes(**{"tensors/0.npy": _npy(np.array([_Marker(env.tmp / "ran")], dtype=object), True)})


def _irpa_entry(env: Env, metadata: str) -> Path:
    """An archive with one 12-byte entry 'w' carrying ``metadata``."""
    index = iree_rt.ParameterIndex()
    index.add_buffer("w", np.zeros(12, np.uint8), metadata=metadata)
    index.create_archive_file(str(env.tmp / "w.irpa"))
    return env.tmp / "w.irpa"


# -- the test -----------------------------------------------------------------------------------

#: what IREE's own status text looks like: a C source location, a status code, its call stack
RAW_IREE = re.compile(r"c/runtime/src/|\w+\.c:\d+:|\b(INVALID_ARGUMENT|OUT_OF_RANGE|FAILED_PRECONDITION|"
                      r"NOT_FOUND|INTERNAL);|Error (creating|invoking)|bytecode module@")


@pytest.mark.iree
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_bad_input_ends_in_a_clear_error(case, env, caplog):
    caplog.set_level(logging.INFO, logger="tensorplay")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if case.error is None:
            case.trigger(env)
            said = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
            said += [str(w.message) for w in caught]
            assert len(said) == 1, said
            assert re.search(case.match, said[0]), said[0]
            return
        with pytest.raises(Exception) as info:
            case.trigger(env)
    error = info.value
    message = "\n".join([str(error), *getattr(error, "__notes__", ())])  # what a traceback shows
    assert isinstance(error, case.error), f"{type(error).__name__}: {message}"
    assert re.search(case.match, message), message
    assert type(error) is not RuntimeError and not type(error).__module__.startswith("iree")
    assert not RAW_IREE.search(message), message
    raw = ("iree", "safetensors", "zipfile", "json")  # library errors that must not be what the user sees
    assert error.__cause__ is None or not type(error.__cause__).__module__.startswith(raw)


def test_the_table_covers_every_kind_of_bad_input():
    groups = {c.name.split(":")[0] for c in CASES}
    assert groups == {"compiled", "exported", "vmfb", "irpa", "signature", "module record", "cache", "safetensors",
                      "checkpoint"}
    assert len({c.name for c in CASES}) == len(CASES)


#: files that run code when unpickled, and how to unpickle each (to show that it would)
PICKLED = {
    "a pickle (legacy torch.save)": (_pickle_payload, pickle.loads),
    "a torch.save zip": (lambda e: _torch_zip(_pickle_payload(e)),
                         lambda data: pickle.loads(zipfile.ZipFile(io.BytesIO(data)).read("archive/data.pkl"))),
    "a checkpoint with a pickled .npy": (_checkpoint_with_pickle, lambda data: np.load(
        io.BytesIO(zipfile.ZipFile(io.BytesIO(data)).read("tensors/0.npy")), allow_pickle=True)),
}
WEIGHT_LOADERS = {
    "tp.load": tp.load,
    "safetensors.load_file": lambda path: _st().load_file(path),
    "safetensors.load": lambda path: _st().load(path.read_bytes()),
    "runtime.load_parameters": runtime.load_parameters,
}


@pytest.mark.parametrize("loader", WEIGHT_LOADERS)
@pytest.mark.parametrize("payload", PICKLED)
def test_loading_weight_files_never_runs_code_from_them(payload, loader, tmp_path, monkeypatch):
    """Each file holds a pickle whose loading creates a marker file; every loader refuses it
    with a ValueError saying what the file is, and the marker never appears."""
    env = Env(SimpleNamespace(), tmp_path, monkeypatch)
    build, unpickle = PICKLED[payload]
    data = build(env)
    marker = tmp_path / "ran"
    unpickle(data)  # the payload is live: unpickling it does run its code
    assert marker.exists()
    marker.unlink()
    with pytest.raises(ValueError, match=r"is a Python pickle|is a PyTorch checkpoint|never unpickles|is a "
                                         r"tensorplay checkpoint") as info:
        WEIGHT_LOADERS[loader](env.write("weights.bin", data))
    assert "weights.bin" in str(info.value) or loader == "safetensors.load"
    assert not marker.exists()


@pytest.mark.iree
def test_a_vmfb_with_the_pinned_digest_loads(env):
    digest = hashlib.sha256(env.art.static.read_bytes()).hexdigest()
    pinned = runtime.load(env.art.static, sha256=digest)
    unpinned = runtime.load(env.art.static)
    x = np.linspace(-1, 1, 8, dtype=np.float32).reshape(2, 4)
    np.testing.assert_array_equal(pinned.forward(x), unpinned.forward(x))
    assert runtime.load(env.art.static.read_bytes(), sha256=f"SHA256:{digest.upper()}") is not None


@pytest.mark.iree
def test_size_checks_that_fit_the_rules_still_run(env):
    """The validation refuses what export never writes, not what it does: a checks list
    with arithmetic, powers, min/max and comparisons over the sizes loads and is enforced."""
    module = load_edited(env, SIGNATURE_KEY, with_checks("v0 ** 2 % 4 != 3 and max(a0[0], 2) - 1 <= 63"))
    np.testing.assert_allclose(module.forward(np.ones((6, 4), np.float32)),
                               env.art.dynamic_module.forward(np.ones((6, 4), np.float32)))
    with pytest.raises(ValueError, match=r"the argument sizes break edited \(got input=\[65, 4\]\)"):
        module.forward(np.ones((65, 4), np.float32))


@pytest.mark.parametrize("check, refusal", [
    ("+".join(["v0"] * 700), (r"is refused without evaluating it: it is 2099 characters long \(size checks have "
                              r"at most 2000\)")),
    ("-" * 120 + "v0 < 0", (r"holds USub, which size checks never use in this form: expressions nested more "
                            r"than 100 deep")),
    ("(" * 250 + "v0" + ")" * 250, r"malformed size check .*too many nested parentheses"),
])
def test_oversized_size_checks_are_refused_before_evaluation(check, refusal):
    """Checks too long or too deep for any export to write (they do not fit in the vmfb's
    record above, so they are given as the record's JSON)."""
    signature = {"v": 2, "name": "forward", "inputs": [{"name": "x", "shape": ["n"], "dtype": "float32"}],
                 "outputs": [], "dims": {"bind": [["v0", 0, 0]], "checks": [[check, "too big"]]}}
    with pytest.raises(ValueError, match=refusal):
        EntrySignature.from_json(json.dumps(signature))
