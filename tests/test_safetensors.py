"""``tensorplay.safetensors``: state dicts in the safetensors format, exchanged with PyTorch's
``safetensors.torch`` both ways (same outputs after loading), every tensorplay dtype
(bfloat16 and float16 included) kept exactly, and clear errors."""

from __future__ import annotations

import sys

import ml_dtypes
import numpy as np
import pytest

import tensorplay as tp
from tensorplay import nn
from tensorplay import safetensors as tps

torch = pytest.importorskip("torch")
safetensors_torch = pytest.importorskip("safetensors.torch")


def _models():
    torch.manual_seed(0)
    theirs = torch.nn.Transformer(8, 2, 1, 1, 16, dropout=0.0, batch_first=True).eval()
    ours = nn.Transformer(8, 2, 1, 1, 16, dropout=0.0, batch_first=True).eval()
    return theirs, ours


def _outputs(model, lib):
    rng = np.random.default_rng(0)
    src = rng.standard_normal((2, 5, 8)).astype(np.float32)
    tgt = rng.standard_normal((2, 3, 8)).astype(np.float32)
    convert = torch.from_numpy if lib is torch else tp.tensor
    with lib.no_grad():
        return model(convert(src), convert(tgt)).numpy()


def test_a_file_pytorch_wrote_loads_into_the_tensorplay_model(tmp_path):
    theirs, ours = _models()
    path = tmp_path / "model.safetensors"
    safetensors_torch.save_file(theirs.state_dict(), path)
    state = tps.load_file(path)
    assert sorted(state) == sorted(theirs.state_dict())
    assert all(isinstance(v, tp.Tensor) and v.dtype is tp.float32 for v in state.values())
    ours.load_state_dict(state)
    np.testing.assert_allclose(_outputs(ours, tp), _outputs(theirs, torch), rtol=1e-5, atol=1e-5)


def test_a_file_tensorplay_wrote_loads_into_the_pytorch_model(tmp_path):
    theirs, ours = _models()
    path = tmp_path / "model.safetensors"
    tps.save_file(ours.state_dict(), str(path), metadata={"format": "pt"})
    theirs.load_state_dict(safetensors_torch.load_file(path))
    np.testing.assert_allclose(_outputs(theirs, torch), _outputs(ours, tp), rtol=1e-5, atol=1e-5)
    from safetensors import safe_open

    with safe_open(str(path), framework="pt") as f:
        assert f.metadata() == {"format": "pt"}


def _every_dtype():
    rng = np.random.default_rng(1)
    values = rng.standard_normal((3, 4)) * 100
    out = {f"f.{d}": tp.tensor(values.astype(np.float32)).to(getattr(tp, d))
           for d in ("float64", "float32", "float16", "bfloat16")}
    out.update({f"i.{d}": tp.tensor(values.astype(d)) for d in ("int64", "int32", "int16", "int8", "uint8")})
    out["bool"] = tp.tensor(values > 0)
    out["scalar"] = tp.tensor(3.5)
    out["empty"] = tp.zeros(0, 3)
    out["view"] = tp.arange(12.0).reshape(3, 4).t()  # not contiguous
    return out


def test_every_dtype_round_trips_exactly_through_files_and_bytes(tmp_path):
    state = _every_dtype()
    tps.save_file(state, tmp_path / "a.safetensors")
    for loaded in (tps.load_file(tmp_path / "a.safetensors"), tps.load(tps.save(state))):
        assert sorted(loaded) == sorted(state)
        for name, t in state.items():
            assert loaded[name].dtype is t.dtype and tuple(loaded[name].shape) == tuple(t.shape), name
            np.testing.assert_array_equal(loaded[name].numpy(), t.numpy(), err_msg=name)
    assert tps.load_file(tmp_path / "a.safetensors")["f.bfloat16"].numpy().dtype == ml_dtypes.bfloat16
    loaded = tps.load_file(tmp_path / "a.safetensors")
    loaded["view"].add_(1)  # a copy of the file's data, writable
    np.testing.assert_array_equal(loaded["view"].numpy(), state["view"].numpy() + 1)


def test_half_types_match_pytorch_both_ways(tmp_path):
    rng = np.random.default_rng(2)
    values = torch.from_numpy(rng.standard_normal((4, 5)).astype(np.float32))
    theirs = {"bf16": values.to(torch.bfloat16), "f16": values.to(torch.float16)}
    safetensors_torch.save_file(theirs, tmp_path / "t.safetensors")
    ours = tps.load_file(tmp_path / "t.safetensors")
    assert ours["bf16"].dtype is tp.bfloat16 and ours["f16"].dtype is tp.float16
    for k in theirs:
        np.testing.assert_array_equal(ours[k].float().numpy(), theirs[k].float().numpy())
    tps.save_file(ours, tmp_path / "o.safetensors")
    back = safetensors_torch.load_file(tmp_path / "o.safetensors")
    for k in theirs:
        assert back[k].dtype == theirs[k].dtype and torch.equal(back[k], theirs[k])


def test_bad_input_gives_clear_errors(tmp_path, monkeypatch):
    with pytest.raises(TypeError, match="tensorplay.safetensors.save_file: expected a dict"):
        tps.save_file([tp.ones(2)], tmp_path / "x.safetensors")
    with pytest.raises(TypeError, match="keys must be str"):
        tps.save({1: tp.ones(2)})
    with pytest.raises(TypeError, match="'step' is a int; the values must be tensors"):
        tps.save({"step": 3})
    with pytest.raises(TypeError, match="metadata must be a dict of str to str"):
        tps.save({"a": tp.ones(2)}, metadata={"epoch": 3})
    with pytest.raises(ValueError, match=r"tensorplay\.safetensors\.load: the 22 bytes are not a valid safetensors "
                                         r"file: its header length field says \d+ bytes, but only 14 bytes follow it"):
        tps.load(b"not a safetensors file")
    (tmp_path / "bad.safetensors").write_bytes(b"\x08" + b"\x00" * 7 + b"{broken}")
    with pytest.raises(ValueError, match="is not a valid safetensors file"):
        tps.load_file(tmp_path / "bad.safetensors")
    with pytest.raises(FileNotFoundError, match="no such file"):
        tps.load_file(tmp_path / "missing.safetensors")
    safetensors_torch.save_file({"w": torch.zeros(2, dtype=torch.complex64)}, tmp_path / "c.safetensors")
    with pytest.raises(TypeError, match="tensor 'w' has dtype"):
        tps.load_file(tmp_path / "c.safetensors")
    with pytest.raises(TypeError, match="tensor 'w' has dtype C64"):
        tps.load((tmp_path / "c.safetensors").read_bytes())
    tps.save_file({"a": tp.ones(2)}, tmp_path / "w.safetensors")
    with pytest.raises(ValueError, match="is a safetensors file, not a tensorplay checkpoint"):
        tp.load(tmp_path / "w.safetensors")
    monkeypatch.setitem(sys.modules, "safetensors", None)  # as if it were not installed
    monkeypatch.setitem(sys.modules, "safetensors.numpy", None)
    with pytest.raises(ImportError, match=r"load_file needs the safetensors package.*tensorplay\[weights\]"):
        tps.load_file(tmp_path / "w.safetensors")


def test_the_header_checks_accept_every_layout_pytorch_writes(tmp_path):
    """Loading checks each header before the data is read; files safetensors.torch wrote with
    odd sizes (bool and int8 tensors of 3 and 5 bytes, then wider ones), empty and 0-d
    tensors and metadata pass them unchanged."""
    theirs = {"flags": torch.tensor([True, False, True]), "codes": torch.arange(5, dtype=torch.int8),
              "w": torch.arange(6, dtype=torch.float64).reshape(2, 3), "none": torch.zeros(0, 4),
              "step": torch.tensor(7, dtype=torch.int64), "h": torch.ones(3, dtype=torch.float16)}
    safetensors_torch.save_file(theirs, tmp_path / "t.safetensors", metadata={"epoch": "3"})
    for ours in (tps.load_file(tmp_path / "t.safetensors"), tps.load((tmp_path / "t.safetensors").read_bytes())):
        assert sorted(ours) == sorted(theirs)
        for k, v in theirs.items():
            assert tuple(ours[k].shape) == tuple(v.shape), k
            np.testing.assert_array_equal(ours[k].numpy(), v.numpy(), err_msg=k)


@pytest.mark.parametrize("zip_format", [True, False], ids=["zip", "legacy pickle"])
def test_a_pytorch_pt_file_is_refused_by_name_without_unpickling(tmp_path, zip_format):
    torch.save({"w": torch.ones(2)}, tmp_path / "model.pt", _use_new_zipfile_serialization=zip_format)
    kind = r"a PyTorch checkpoint \(torch\.save\)" if zip_format else r"a Python pickle \(such as PyTorch's legacy"
    with pytest.raises(ValueError, match=rf"load_file: '.*model\.pt' \(\d+ bytes\) is not a valid safetensors file: "
                                         rf"it is {kind}.*torch\.load\(path, weights_only=True\)"):
        tps.load_file(tmp_path / "model.pt")
    with pytest.raises(ValueError, match=rf"tp\.load: '.*model\.pt' is {kind}.*, not a tensorplay checkpoint"):
        tp.load(tmp_path / "model.pt")
