"""tp.Tensor: creation, metadata, conversion, printing, Python protocols, NumPy interop."""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest

import tensorplay as tp


def test_tensor_infers_dtype_like_pytorch():
    assert tp.tensor([1, 2]).dtype is tp.int64
    assert tp.tensor([1.0, 2]).dtype is tp.float32
    assert tp.tensor([True, False]).dtype is tp.bool
    assert tp.tensor(np.zeros(2, np.float64)).dtype is tp.float64
    assert tp.tensor(3).shape == ()
    assert tp.tensor([[1, 2], [3, 4]], dtype=tp.float16).dtype is tp.float16


def test_python_numbers_given_a_dtype_are_rounded_once_to_it():
    # (they were rounded to float32 first: tensor(0.1, dtype=float64) held 0.10000000149011612)
    torch = pytest.importorskip("torch")
    for value in (0.1, 0.3, 1e-8, [0.1, 2.0 / 3.0], 1.1):
        for ours, theirs in ((tp.float64, torch.float64), (tp.float16, torch.float16), (tp.float32, torch.float32)):
            want = torch.tensor(value, dtype=theirs).numpy()
            for make in (tp.tensor, tp.as_tensor):
                got = make(value, dtype=ours).numpy()
                assert got.dtype == want.dtype and got.tobytes() == want.tobytes(), (value, ours, make)
    assert tp.tensor(0.1, dtype=tp.float64).item() == 0.1
    assert tp.tensor(2**53 + 1, dtype=tp.int64).item() == 2**53 + 1
    assert tp.tensor([1.7, -2.5], dtype=tp.int32).tolist() == [1, -2]
    assert tp.tensor(0.1).dtype is tp.float32 and tp.tensor(0.1).item() == np.float32(0.1)


def test_tensor_copies_but_from_numpy_shares_memory():
    a = np.arange(4.0)
    t = tp.tensor(a)
    s = tp.from_numpy(a)
    a[0] = 10
    assert t[0].item() == 0.0
    assert s.detach().numpy()[0] == 10.0
    assert tp.as_tensor(a).detach().numpy() is a


def test_ragged_and_bad_data_give_clear_errors():
    with pytest.raises((ValueError, TypeError), match="tensor"):
        tp.tensor([[1, 2], [3]])
    with pytest.raises(TypeError, match="str"):
        tp.tensor(["a"])
    with pytest.raises(TypeError, match="expected np.ndarray"):
        tp.from_numpy([1, 2])


def test_metadata():
    t = tp.zeros(2, 3, 4)
    assert t.shape == (2, 3, 4) and isinstance(t.shape, tp.Size)
    assert t.size() == tp.Size([2, 3, 4]) and t.size(1) == 3 and t.size(-1) == 4
    assert t.dim() == t.ndim == 3
    assert t.numel() == 24 and t.shape.numel() == 24
    assert t.device == tp.device("cpu") and str(t.device) == "cpu"
    assert t.stride() == (12, 4, 1)
    assert t.is_floating_point() and not t.requires_grad
    assert repr(t.shape) == "tensorplay.Size([2, 3, 4])"
    with pytest.raises(IndexError, match="Dimension out of range"):
        t.size(3)


def test_conversions():
    t = tp.tensor([1.7, -2.7])
    assert t.int().tolist() == [1, -2]
    assert t.long().dtype is tp.int64
    assert t.half().dtype is tp.float16
    assert t.bfloat16().float().tolist() == pytest.approx([1.703125, -2.703125])
    assert t.double().dtype is tp.float64
    assert t.bool().tolist() == [True, True]
    assert t.to(tp.int32).dtype is tp.int32
    assert t.to("float64").dtype is tp.float64
    assert t.to("cpu") is t
    assert t.to(tp.zeros(1, dtype=tp.int8)).dtype is tp.int8
    assert tp.tensor(2.5).item() == 2.5
    assert isinstance(tp.tensor(3).item(), int)
    assert tp.tensor([[1, 2]]).tolist() == [[1, 2]]
    with pytest.raises(ValueError, match="cannot be converted to Scalar"):
        tp.ones(2).item()
    with pytest.raises(ValueError, match="only device index 0"):
        t.to("cuda:1")
    with pytest.raises(ValueError, match="no IREE runtime driver"):
        t.to("meta")


def test_clone_is_independent_and_contiguous_is_free():
    t = tp.tensor([1.0, 2.0])
    c = t.clone()
    c.add_(1)
    assert t.tolist() == [1.0, 2.0] and c.tolist() == [2.0, 3.0]
    assert t.contiguous() is t


def test_inplace_methods_keep_the_object():
    t = tp.zeros(3)
    same = t
    t += 2
    t.mul_(3).sub_(1)
    assert t is same and t.tolist() == [5.0, 5.0, 5.0]
    t.fill_(7)
    assert t.tolist() == [7.0, 7.0, 7.0]
    t.zero_()
    assert t.tolist() == [0.0, 0.0, 0.0]
    t.copy_(tp.tensor([1, 2, 3]))
    assert t.dtype is tp.float32 and t.tolist() == [1.0, 2.0, 3.0]
    with pytest.raises(RuntimeError, match="in-place"):
        t.copy_(tp.ones(4))


def test_bool_protocol():
    assert bool(tp.tensor([1]))
    assert not bool(tp.tensor(0.0))
    with pytest.raises(RuntimeError, match="ambiguous"):
        bool(tp.ones(2))
    assert int(tp.tensor(3.7)) == 3 and float(tp.tensor(2)) == 2.0
    assert [1, 2, 3][tp.tensor(1)] == 2
    with pytest.raises(TypeError, match="index"):
        [1, 2][tp.tensor(1.0)]


def test_len_and_iteration():
    t = tp.tensor([[1, 2], [3, 4], [5, 6]])
    assert len(t) == 3
    rows = list(t)
    assert [r.tolist() for r in rows] == [[1, 2], [3, 4], [5, 6]]
    with pytest.raises(TypeError, match="0-d"):
        len(tp.tensor(1))


def test_pickle_and_deepcopy_round_trip():
    t = tp.tensor([[1.5, 2.5]], dtype=tp.bfloat16)
    for u in (pickle.loads(pickle.dumps(t)), copy.deepcopy(t)):
        assert u.dtype is tp.bfloat16 and u.tolist() == t.tolist()
        assert u.detach().numpy() is not t.detach().numpy()


@pytest.mark.parametrize("make", [
    lambda lib: lib.tensor([1.0, 2.0, 3.0]),
    lambda lib: lib.tensor([[0.1, -2.25], [3.0, 4.5]]),
    lambda lib: lib.tensor([1e-5, 1.0, 1e6]),
    lambda lib: lib.tensor([1.0, 200000.0]),
    lambda lib: lib.tensor([1e10, 1.0]),
    lambda lib: lib.tensor(3.5),
    lambda lib: lib.tensor(3),
    lambda lib: lib.tensor([True, False]),
    lambda lib: lib.tensor([[1, -20], [300, 4]]),
    lambda lib: lib.tensor([[1, 2]], dtype=lib.int32),
    lambda lib: lib.tensor([1.5, 2.5], dtype=lib.float16),
    lambda lib: lib.tensor([1.5, 2.5], dtype=lib.float64),
    lambda lib: lib.tensor([float("nan"), float("inf"), -1.5]),
    lambda lib: lib.zeros(0, 3),
    lambda lib: lib.zeros(0),
    lambda lib: lib.arange(30.0).reshape(3, 10) / 7,
    lambda lib: lib.arange(2000.0),
    lambda lib: lib.arange(2400).reshape(20, 120),
    lambda lib: lib.ones(2, 3, 4),
    lambda lib: lib.linspace(0, 1, 40),
], ids=lambda f: "")
def test_repr_matches_pytorch(make):
    torch = pytest.importorskip("torch")
    ours = repr(make(tp)).replace("tensorplay.", "torch.")
    assert ours == repr(make(torch))


def test_repr_of_plain_values():
    assert repr(tp.tensor([1.0, 2.5])) == "tensor([1.0000, 2.5000])"
    assert repr(tp.tensor([1.0, 2.0])) == "tensor([1., 2.])"
    assert repr(tp.tensor([1, 2], dtype=tp.int8)) == "tensor([1, 2], dtype=tensorplay.int8)"


def test_numpy_protocols():
    t = tp.tensor([0.5, 1.0])
    assert isinstance(np.asarray(t), np.ndarray)
    assert np.asarray(t).dtype == np.float32
    out = np.tanh(t)
    assert isinstance(out, tp.Tensor) and out.tolist() == pytest.approx(np.tanh([0.5, 1.0]).tolist())
    assert isinstance(np.add(t, 1), tp.Tensor)
    assert isinstance(np.maximum(np.ones(2, np.float32), t), tp.Tensor)
    # ufuncs without a tp op and out= run in numpy
    assert isinstance(np.arcsinh(t), tp.Tensor)
    buf = np.empty(2, np.float32)
    assert np.multiply(t, 2, out=buf) is buf and buf.tolist() == [1.0, 2.0]
    # arrays on the left defer to the tensor
    assert isinstance(np.ones(2, np.float32) + t, tp.Tensor)


def test_numpy_array_functions():
    t = tp.tensor([[1.0, 2.0], [3.0, 4.0]])
    s = np.sum(t, axis=0)
    assert isinstance(s, tp.Tensor) and s.tolist() == [4.0, 6.0]
    assert isinstance(np.concatenate([t, t]), tp.Tensor)
    assert np.concatenate([t, t]).shape == (4, 2)
    assert np.transpose(t).tolist() == [[1.0, 3.0], [2.0, 4.0]]
    assert isinstance(np.where(t > 2, t, 0.0), tp.Tensor)
    # functions without a mapping fall back to numpy on the data
    assert np.linalg.norm(t) == pytest.approx(np.linalg.norm(t.detach().numpy()))


def test_dlpack_round_trip():
    t = tp.arange(6.0)
    a = np.from_dlpack(t)
    assert a.tolist() == t.tolist()
    assert t.__dlpack_device__() == (1, 0)
    torch = pytest.importorskip("torch")
    assert torch.from_dlpack(t).tolist() == t.tolist()


def test_creation_functions():
    assert tp.zeros(2, 3).tolist() == [[0.0] * 3] * 2
    assert tp.ones((2,), dtype=tp.int32).tolist() == [1, 1]
    assert tp.full((2,), 7).dtype is tp.int64
    assert tp.full((2,), 7.5).tolist() == [7.5, 7.5]
    assert tp.full((1,), True).dtype is tp.bool
    assert tp.empty(3).shape == (3,)
    x = tp.ones(2, 3, dtype=tp.float16)
    assert tp.zeros_like(x).dtype is tp.float16 and tp.ones_like(x).shape == (2, 3)
    assert tp.full_like(x, 2).tolist() == [[2.0] * 3] * 2
    assert tp.arange(5).tolist() == [0, 1, 2, 3, 4] and tp.arange(5).dtype is tp.int64
    assert tp.arange(1, 2, 0.25).tolist() == [1.0, 1.25, 1.5, 1.75]
    assert tp.arange(5, 0, -2).tolist() == [5, 3, 1]
    assert tp.linspace(0, 1, 5).tolist() == [0.0, 0.25, 0.5, 0.75, 1.0]
    assert tp.eye(2, 3).tolist() == [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]
    with pytest.raises(ValueError, match="negative dimension"):
        tp.zeros(2, -1)
    with pytest.raises(ValueError, match="inconsistent with step"):
        tp.arange(0, 5, -1)


@pytest.mark.parametrize("args", [(0, 10), (0.5, 3.2, 0.3), (-3, 7, 2), (10, 0, -3), (0, 1, 0.1)])
def test_arange_matches_pytorch(args):
    torch = pytest.importorskip("torch")
    ours, theirs = tp.arange(*args), torch.arange(*args)
    assert ours.dtype.name == str(theirs.dtype).replace("torch.", "")
    np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(), rtol=1e-6)


@pytest.mark.parametrize("args", [(0, 1, 5), (-2.5, 7, 11), (3, -3, 4), (0, 1, 1), (0, 1, 0)])
def test_linspace_matches_pytorch(args):
    torch = pytest.importorskip("torch")
    np.testing.assert_allclose(tp.linspace(*args).detach().numpy(), torch.linspace(*args).detach().numpy(), rtol=1e-6,
                               atol=1e-7)


def test_random_is_seeded_and_in_range():
    tp.manual_seed(123)
    a = tp.rand(3, 4)
    tp.manual_seed(123)
    b = tp.rand(3, 4)
    assert a.tolist() == b.tolist()
    assert 0.0 <= a.min().item() and a.max().item() < 1.0
    n = tp.randn(10000)
    assert abs(n.mean().item()) < 0.05 and abs(n.std().item() - 1) < 0.05
    r = tp.randint(3, 7, (100,))
    assert r.dtype is tp.int64 and r.min().item() >= 3 and r.max().item() <= 6
    assert sorted(tp.randperm(5).tolist()) == [0, 1, 2, 3, 4]
    g = tp.Generator().manual_seed(5)
    assert tp.rand(2, generator=g).tolist() == tp.rand(2, generator=tp.Generator().manual_seed(5)).tolist()
    assert tp.multinomial(tp.tensor([0.0, 1.0, 0.0]), 2, replacement=True).tolist() == [1, 1]


def test_tril_triu_mask_pattern():
    m = tp.tril(tp.ones(3, 3))
    assert m.tolist() == [[1, 0, 0], [1, 1, 0], [1, 1, 1]]
    assert tp.triu(tp.ones(2, 3), 1).tolist() == [[0, 1, 1], [0, 0, 1]]


def test_grad_modes_nest_and_decorate():
    assert tp.is_grad_enabled()
    with tp.no_grad():
        assert not tp.is_grad_enabled()
        with tp.enable_grad():
            assert tp.is_grad_enabled()
        assert not tp.is_grad_enabled()
    with tp.inference_mode():
        assert tp.is_inference_mode_enabled() and not tp.is_grad_enabled()
    assert tp.is_grad_enabled() and not tp.is_inference_mode_enabled()

    @tp.no_grad()
    def f():
        return tp.is_grad_enabled()

    assert f() is False and tp.is_grad_enabled()
    with tp.set_grad_enabled(False):
        assert not tp.is_grad_enabled()
    assert tp.is_grad_enabled()
