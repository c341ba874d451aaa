"""The artifact cache as a second user would attack it: its entries are native code, so a folder
or entry that another user owns or can write is refused with one named warning and compiles go
on without it; symbolic links are never followed; ``TENSORPLAY_CACHE_SHARED=1`` opts in to a
shared cache. (The compiles here are stand-ins for IREE's; tests/test_bad_input.py runs the
same refusals through real compiled calls.)"""

from __future__ import annotations

import logging
import os
import re
import stat
from pathlib import Path

import pytest

import tensorplay as tp
from tensorplay.compiler.backends import cache

pytestmark = pytest.mark.skipif(os.name != "posix", reason="ownership and modes are POSIX's")

OTHER_UID = 65534  # nobody
REFUSED = (r"^tensorplay compile cache: not using {folder}: {why}\. Compiled programs are native code that compiled "
           r"calls run, so the cache is used only where no other user can write; compiling goes on without the "
           r"cache \(this warning is given once per folder\)\. To fix: {fix}; to share a cache on purpose, set "
           r"TENSORPLAY_CACHE_SHARED=1, which trusts everyone who can write there$")
ENTRY = (r"^tensorplay compile cache: entry \w+\.vmfb\.tpc in {folder} refused \({why}; an entry is read only when "
         r"it is a regular file that you own and only you can write\): deleted, compiling again$")


def _as_root() -> None:
    if os.geteuid() != 0:
        pytest.skip("giving a file to another user needs root (chown)")


@pytest.fixture
def warnings_of(monkeypatch, caplog):
    """The warnings the cache gives from here on (a fresh once-per-folder memory)."""
    monkeypatch.setattr(cache, "_warned", set())
    monkeypatch.delenv("TENSORPLAY_CACHE_SHARED", raising=False)
    monkeypatch.delenv("TENSORPLAY_CACHE", raising=False)
    cache.reset_cache_stats()
    caplog.set_level(logging.INFO, logger="tensorplay")

    def said() -> list[str]:
        return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]

    return said


def _use(monkeypatch, folder: Path) -> None:
    monkeypatch.setenv("TENSORPLAY_CACHE_DIR", str(folder))


def _compile(key: str, payload: bytes = b"the artifact") -> bytes:
    return cache.get_or_compile(key, lambda: payload, what="graph 'g' for iree-cpu", backend="iree-cpu")


def _key(n: int = 0) -> str:
    return cache.cache_key(mlir=f"module {{}} // {n}", backend="iree-cpu", flags=[], target="x")


def _mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def test_folders_it_creates_are_private_and_entries_only_yours(tmp_path, monkeypatch, warnings_of):
    folder = tmp_path / "a" / "b" / "cache"
    _use(monkeypatch, folder)
    assert _compile(_key()) == b"the artifact"
    assert [_mode(p) for p in (tmp_path / "a", tmp_path / "a" / "b", folder)] == [0o700] * 3
    (entry,) = folder.glob("*" + cache.SUFFIX)
    assert _mode(entry) == 0o600 and _mode(folder / f"{_key()}.lock") == 0o600
    assert _compile(_key(), b"never compiled") == b"the artifact"  # a hit
    assert cache.cache_stats()["hits"] == 1 and warnings_of() == []


def test_an_existing_folder_of_yours_is_made_private(tmp_path, monkeypatch, warnings_of):
    folder = tmp_path / "cache"
    folder.mkdir(mode=0o755)
    folder.chmod(0o755)
    _use(monkeypatch, folder)
    _compile(_key())
    assert _mode(folder) == 0o700 and warnings_of() == []


@pytest.mark.parametrize("mode", [0o777, 0o770, 0o1777])
def test_a_folder_others_can_write_is_refused_once(tmp_path, monkeypatch, warnings_of, mode):
    folder = tmp_path / "shared"
    folder.mkdir()
    folder.chmod(mode)
    _use(monkeypatch, folder)
    planted = cache.MAGIC + b"whatever another user wrote"
    (folder / f"{_key()}{cache.SUFFIX}").write_bytes(planted)
    assert _compile(_key()) == b"the artifact" and _compile(_key(1), b"another") == b"another"
    assert cache.cache_stats()["compiles"] == 2 and cache.cache_stats()["hits"] == 0
    (said,) = warnings_of()  # once per folder, not per compile
    assert re_match(REFUSED.format(folder=E(folder), why=rf"its group or other users can write to it \(mode {mode:o}\)",
                                   fix=rf"run chmod 700 {E(folder)}"), said)
    assert (folder / f"{_key()}{cache.SUFFIX}").read_bytes() == planted  # not read, not replaced
    assert sorted(p.name for p in folder.iterdir()) == [f"{_key()}{cache.SUFFIX}"]  # nothing written there
    assert cache.load_entry(_key()) is None


def test_a_folder_another_user_owns_is_refused(tmp_path, monkeypatch, warnings_of):
    _as_root()
    folder = tmp_path / "theirs"
    folder.mkdir(mode=0o700)
    os.chown(folder, OTHER_UID, OTHER_UID)
    _use(monkeypatch, folder)
    assert _compile(_key()) == b"the artifact"
    (said,) = warnings_of()
    assert re_match(REFUSED.format(folder=E(folder), why=rf"it is owned by .*uid {OTHER_UID}.*, not by you",
                                   fix="point TENSORPLAY_CACHE_DIR at a folder of your own"), said)
    assert list(folder.iterdir()) == []


def test_a_folder_whose_parent_others_can_replace_is_refused(tmp_path, monkeypatch, warnings_of):
    parent = tmp_path / "open"
    folder = parent / "cache"
    folder.mkdir(parents=True, mode=0o700)
    parent.chmod(0o777)  # anyone may rename "cache" away and put their own in its place
    _use(monkeypatch, folder)
    assert _compile(_key()) == b"the artifact"
    (said,) = warnings_of()
    assert re_match(REFUSED.format(folder=E(folder), why=rf"the folder above it, {E(parent)}, can be written by its "
                                                      r"group or other users \(mode 777, not sticky\), who can replace it",
                                   fix=rf"run chmod go-w {E(parent)}, or point TENSORPLAY_CACHE_DIR elsewhere"), said)
    parent.chmod(0o1777)  # sticky, as /tmp: only the owner may rename what is inside
    monkeypatch.setattr(cache, "_warned", set())
    assert _compile(_key(1), b"stored") == b"stored" and cache.load_entry(_key(1)) is not None
    assert len(warnings_of()) == 1


def test_a_folder_under_another_users_folder_is_refused(tmp_path, monkeypatch, warnings_of):
    _as_root()
    parent = tmp_path / "theirs"
    folder = parent / "cache"
    folder.mkdir(parents=True, mode=0o700)
    os.chown(parent, OTHER_UID, OTHER_UID)
    _use(monkeypatch, folder)
    assert _compile(_key()) == b"the artifact"
    (said,) = warnings_of()
    assert re_match(REFUSED.format(folder=E(folder), why=rf"the folder above it, {E(parent)}, is owned by .*uid "
                                                      rf"{OTHER_UID}.*, who can replace it", fix=".*"), said)


def _planted(monkeypatch, tmp_path) -> tuple[Path, Path]:
    """A private cache folder holding a well-formed entry for ``_key()`` that does not hold
    what this process would compile."""
    folder = tmp_path / "cache"
    _use(monkeypatch, folder)
    entry = cache.store_entry(_key(), b"code someone else compiled", backend="iree-cpu")
    assert entry is not None and cache.load_entry(_key()) == b"code someone else compiled"
    return folder, entry


def test_an_entry_another_user_owns_is_refused(tmp_path, monkeypatch, warnings_of):
    _as_root()
    folder, entry = _planted(monkeypatch, tmp_path)
    os.chown(entry, OTHER_UID, OTHER_UID)
    assert _compile(_key()) == b"the artifact"
    (said,) = warnings_of()
    assert re_match(ENTRY.format(folder=E(folder), why=rf"owned by .*uid {OTHER_UID}.*"), said)
    assert cache.cache_stats()["untrusted"] == 1
    assert os.stat(entry).st_uid == os.geteuid() and cache.load_entry(_key()) == b"the artifact"  # replaced


def test_an_entry_others_can_write_is_refused(tmp_path, monkeypatch, warnings_of):
    folder, entry = _planted(monkeypatch, tmp_path)
    entry.chmod(0o666)
    assert _compile(_key()) == b"the artifact"
    (said,) = warnings_of()
    assert re_match(ENTRY.format(folder=E(folder), why=r"its group or other users can write to it \(mode 666\)"), said)
    assert _mode(entry) == 0o600 and cache.load_entry(_key()) == b"the artifact"


def test_a_symlinked_entry_is_never_followed(tmp_path, monkeypatch, warnings_of):
    folder, entry = _planted(monkeypatch, tmp_path)
    outside = tmp_path / "elsewhere.bin"
    entry.rename(outside)  # a whole, valid entry for the key, outside the folder
    entry.symlink_to(outside)
    assert _compile(_key()) == b"the artifact"
    (said,) = warnings_of()
    assert re_match(ENTRY.format(folder=E(folder), why=rf"a symbolic link to {E(outside)}"), said)
    assert not entry.is_symlink() and cache.load_entry(_key()) == b"the artifact"
    assert outside.read_bytes().endswith(b"code someone else compiled")  # the target is left alone


def test_a_symlinked_lock_is_not_followed(tmp_path, monkeypatch, warnings_of):
    folder = tmp_path / "cache"
    folder.mkdir(mode=0o700)
    _use(monkeypatch, folder)
    target = tmp_path / "victim"
    (folder / f"{_key()}.lock").symlink_to(target)
    assert _compile(_key()) == b"the artifact"  # compiled without the lock
    assert not target.exists() and warnings_of() == []


def test_the_shared_opt_in_trusts_everyone_who_can_write(tmp_path, monkeypatch, warnings_of):
    folder = tmp_path / "team"
    folder.mkdir()
    folder.chmod(0o2775)  # a group folder
    _use(monkeypatch, folder)
    monkeypatch.setenv("TENSORPLAY_CACHE_SHARED", "1")
    assert _compile(_key()) == b"the artifact"
    (entry,) = folder.glob("*" + cache.SUFFIX)
    assert _mode(entry) == 0o664 and _mode(folder) == 0o2775  # the group's entries; the folder left as it is
    entry.chmod(0o666)
    assert _compile(_key(), b"not compiled") == b"the artifact" and cache.cache_stats()["hits"] == 1
    outside = tmp_path / "elsewhere.bin"
    entry.rename(outside)
    entry.symlink_to(outside)
    assert _compile(_key(), b"again") == b"again"  # links stay refused
    (said,) = warnings_of()
    assert "a symbolic link to" in said


def test_a_bundle_is_not_installed_where_others_can_write(tmp_path, monkeypatch, warnings_of):
    own = tmp_path / "own"
    _use(monkeypatch, own)
    monkeypatch.setattr(cache, "_used", {})
    _compile(_key())
    info = tp.compiler.save_cache_bundle(tmp_path / "b.tpbundle")
    folder = tmp_path / "open"
    folder.mkdir()
    folder.chmod(0o777)
    _use(monkeypatch, folder)
    with pytest.raises(PermissionError, match=rf"the cache folder {E(folder)} is not used because other users could "
                                              r"write to it \(the warning above says why and how to fix it\); nothing "
                                              r"installed"):
        tp.compiler.load_cache_bundle(info["path"])
    assert list(folder.iterdir()) == [] and len(warnings_of()) == 1


def E(path: Path) -> str:
    return re.escape(str(path))


def re_match(pattern: str, text: str) -> bool:
    assert re.search(pattern, text), f"{text!r}\n does not match\n{pattern!r}"
    return True
