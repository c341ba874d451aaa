"""Names example code uses: in-place and shift methods, median, repeat_interleave, random
fills, erfinv, diag/diag_embed/meshgrid, addcmul/addcdiv, tp.testing.assert_close, the
legacy typed constructors and the tp.cuda queries, checked against PyTorch (the op table,
tests/opinfo, covers the values and gradients of the functional forms)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import tensorplay as tp

torch = pytest.importorskip("torch")

_RNG = np.random.default_rng(0)


def _pair(array):
    return tp.tensor(array), torch.tensor(array)


def _same(ours, theirs, rtol=0.0, atol=0.0):
    assert str(ours.dtype).rpartition(".")[2] == str(theirs.dtype).rpartition(".")[2], (ours.dtype, theirs.dtype)
    assert tuple(ours.shape) == tuple(theirs.shape)
    if not ours.dtype.is_floating_point:  # integers compared exactly (int64 does not fit a float64)
        np.testing.assert_array_equal(ours.numpy(), theirs.numpy())
        return
    np.testing.assert_allclose(ours.double().numpy(), theirs.detach().double().numpy(), rtol=rtol, atol=atol,
                               equal_nan=True)


# --- in-place methods ------------------------------------------------------------------------

_X = _RNG.standard_normal((3, 4))


@pytest.mark.parametrize("call", [
    lambda x, lib: x.sigmoid_(),
    lambda x, lib: x.tanh_(),
    lambda x, lib: x.tril_(1),
    lambda x, lib: x.triu_(-1),
    lambda x, lib: x.lerp_(lib.ones(2, 4, dtype=lib.float64), 0.25),
    lambda x, lib: x.clamp_min_(0.1),
    lambda x, lib: x.clamp_max_(lib.zeros(4, dtype=lib.float64)),
    lambda x, lib: x.addcmul_(x.clone(), lib.ones(4, dtype=lib.float64), value=-0.5),
    lambda x, lib: x.addcdiv_(lib.ones(2, 4, dtype=lib.float64), x.abs() + 1, value=2),
    lambda x, lib: x.clamp_(-0.9, 0.9).erfinv_(),
], ids=["sigmoid_", "tanh_", "tril_", "triu_", "lerp_", "clamp_min_", "clamp_max_", "addcmul_", "addcdiv_",
        "erfinv_"])
def test_in_place_methods_write_pytorchs_values_into_the_tensor(call):
    ours, theirs = _pair(_X)
    view, tview = ours[1:], theirs[1:]
    out, tout = call(view, tp), call(tview, torch)
    # float64 elementwise functions: numpy's and PyTorch's libm differ by an ulp or two
    _same(out, tout, rtol=1e-13, atol=1e-15)
    _same(ours, theirs, rtol=1e-13, atol=1e-15)  # written through the view into its base
    assert out is view and tout is tview


def test_in_place_methods_on_a_non_leaf_give_pytorchs_gradients():
    grads = []
    for lib in (tp, torch):
        x = lib.tensor(_X, requires_grad=True)
        y, z = (x * 1.5).sigmoid_(), x * 2
        y = (y + 0).addcmul_(z, z, value=0.5)  # (+ 0: each in-place op on a result no earlier backward saved)
        y = (y + 0).clamp_min_(0.6)
        y = (y + 0).addcdiv_(z, z * z + 1)
        y = (y + 0).tanh_()
        (y * lib.tensor(_X)).sum().backward()
        grads.append(x.grad.numpy())
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-12, atol=1e-14)


def test_clamp_min_and_max_functions_promote_as_pytorch():
    for value in (1.5, 1):
        _same(tp.clamp_min(tp.tensor([1, 2]), value), torch.clamp_min(torch.tensor([1, 2]), value))
        _same(tp.clamp_max(tp.tensor([1, 2]), value), torch.clamp_max(torch.tensor([1, 2]), value))


# --- addcmul / addcdiv ------------------------------------------------------------------------

def test_addcmul_and_addcdiv_dtypes_and_values_are_pytorchs():
    ints = [1, 2, -3]
    cases = [
        lambda lib: lib.addcmul(lib.tensor(ints), lib.tensor(ints), lib.tensor(ints), value=1.7),
        lambda lib: lib.addcmul(lib.tensor(ints), lib.tensor(ints), lib.tensor(ints), value=-1.7),
        lambda lib: lib.addcmul(lib.tensor(ints), lib.tensor([0.5, 1.0, 2.0]), lib.tensor(ints)),
        lambda lib: lib.addcmul(lib.tensor([1, 2], dtype=lib.int8), lib.tensor([100], dtype=lib.int8),
                                lib.tensor([3], dtype=lib.int8)),
        # the product exceeds float16's range; the sum does not
        lambda lib: lib.addcmul(lib.tensor([1.0, 2.0], dtype=lib.float16), lib.tensor([1000.0], dtype=lib.float16),
                                lib.tensor([1000.0], dtype=lib.float16), value=0.001),
        lambda lib: lib.addcdiv(lib.tensor(ints), lib.tensor([1.0, 2.0, 3.0]), lib.tensor([3.0, 3.0, 4.0]), value=2),
        lambda lib: lib.tensor([1.0, 2.0]).addcdiv(lib.tensor([1.0, 2.0], dtype=lib.float64), lib.tensor(3.0)),
    ]
    for case in cases:
        _same(case(tp), case(torch), rtol=1e-6)


def test_addcdiv_of_two_integer_tensors_is_an_error():
    with pytest.raises(TypeError, match=r"addcdiv\(\): integer division is not supported"):
        tp.addcdiv(tp.zeros(2), tp.tensor([1, 2]), tp.tensor([1, 2]))
    with pytest.raises(TypeError, match=r"addcmul\(\): argument 'value' must be a number"):
        tp.addcmul(tp.zeros(2), tp.ones(2), tp.ones(2), value=tp.tensor(2.0))


# --- shifts -----------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ["int8", "uint8", "int16", "int32", "int64"])
def test_shifts_match_pytorch_including_amounts_past_the_bit_width(dtype):
    bits = np.dtype(dtype).itemsize * 8
    info = np.iinfo(dtype)
    values = np.array([0, 1, 5, info.max, info.min, info.max // 3], dtype)
    if info.min < 0:
        values = np.concatenate([values, np.array([-1, -8, -7], dtype)])
    amounts = [0, 1, 3, bits - 1, bits, bits + 1, 100] + ([-1, -bits] if info.min < 0 else [])
    x, tx = _pair(values)
    for s in amounts:
        _same(x << s, tx << s)
        _same(x >> s, tx >> s)
    shifts = np.resize(np.array([a for a in amounts if a < 128], dtype), values.shape)
    s, ts = _pair(shifts)
    _same(tp.bitwise_left_shift(x, s), torch.bitwise_left_shift(tx, ts))
    _same(tp.bitwise_right_shift(x, s), torch.bitwise_right_shift(tx, ts))


def test_shift_operators_promote_and_work_in_place_like_pytorch():
    pairs = [
        lambda lib: lib.tensor([1, 2], dtype=lib.int8) << 3,
        lambda lib: 3 << lib.tensor([1, 2], dtype=lib.int8),
        lambda lib: 256 >> lib.tensor([1, 9]),
        lambda lib: lib.tensor([1, 2], dtype=lib.int32) << lib.tensor([1, 2]),
        lambda lib: lib.tensor([True, False]) << 1,
    ]
    for case in pairs:
        _same(case(tp), case(torch))
    x, tx = _pair(np.array([3, -9, 40], np.int16))
    alias, talias = x, tx
    x <<= 2
    tx <<= 2
    x >>= tp.tensor([1, 0, 3], dtype=tp.int16)
    tx >>= torch.tensor([1, 0, 3], dtype=torch.int16)
    assert x is alias and tx is talias
    _same(x, tx)


def test_shifting_floats_is_an_error():
    with pytest.raises(TypeError, match=r"bitwise_left_shift\(\): shifts need integer tensors, got float32"):
        tp.ones(2) << 1
    with pytest.raises(TypeError, match=r"bitwise_right_shift\(\): shifts need integer tensors"):
        tp.tensor([4]) >> 1.5


# --- median / nanmedian -----------------------------------------------------------------------

def test_median_results_are_pytorchs_named_pairs():
    x, tx = _pair(_RNG.permutation(12).reshape(3, 4).astype(np.float32))
    got, want = tp.median(x, dim=1), torch.median(tx, dim=1)
    assert type(got).__name__ == "median" and got._fields == ("values", "indices")
    _same(got.values, want.values)
    _same(got.indices, want.indices)
    values, indices = x.median(0, keepdim=True)
    _same(values, tx.median(0, keepdim=True).values)
    _same(indices, tx.median(0, keepdim=True).indices)
    _same(x.median(), tx.median())  # the lower of the two middle values
    assert type(tp.nanmedian(x, 0)).__name__ == "nanmedian"
    _same(tp.median(tp.tensor(2.5), 0).values, torch.median(torch.tensor(2.5), 0).values)
    _same(tp.median(tp.tensor(2.5), 0).indices, torch.median(torch.tensor(2.5), 0).indices)
    _same(tp.median(tp.tensor([7, 1, 4, 2])), torch.median(torch.tensor([7, 1, 4, 2])))


def test_median_propagates_nan_and_nanmedian_skips_it():
    data = np.array([[1.0, np.nan, 3.0, 0.5], [2.0, -1.0, 5.0, 4.0], [np.nan, np.nan, 6.0, 1.0]], np.float32)
    x, tx = _pair(data)
    for ours, theirs in ((tp.median, torch.median), (tp.nanmedian, torch.nanmedian)):
        _same(ours(x), theirs(tx))
        got, want = ours(x, -1), theirs(tx, -1)
        _same(got.values, want.values)
        _same(got.indices, want.indices)
    _same(tp.median(tp.zeros(0)), torch.median(torch.zeros(0)))  # NaN


def test_median_gradient_goes_to_the_chosen_element():
    grads, data = [], _RNG.permutation(15).reshape(3, 5).astype(np.float64)
    for lib in (tp, torch):
        x = lib.tensor(data, requires_grad=True)
        (lib.median(x, 1).values.sum() + lib.median(x) * 2).backward()
        grads.append(x.grad.numpy())
    np.testing.assert_array_equal(grads[0], grads[1])


def test_median_of_an_empty_dim_is_an_error():
    with pytest.raises(ValueError, match=r"median\(\): expected reduction dim 0 to have non-zero size"):
        tp.median(tp.zeros(0, 3), 0)
    with pytest.raises(TypeError, match=r"median\(\): argument 'input' must be Tensor"):
        tp.median([1, 2])


# --- repeat_interleave ------------------------------------------------------------------------

def test_repeat_interleave_forms_match_pytorch():
    x, tx = _pair(np.arange(6.0).reshape(2, 3))
    cases = [
        (lambda lib, a: lib.repeat_interleave(a, 2), None),
        (lambda lib, a: a.repeat_interleave(3, dim=1), None),
        (lambda lib, a: a.repeat_interleave(lib.tensor([2, 0, 1]), dim=-1), None),
        (lambda lib, a: a.repeat_interleave(lib.tensor([2]), dim=0), None),
        (lambda lib, a: a.repeat_interleave(lib.tensor([1, 3]), dim=0, output_size=4), None),
        (lambda lib, a: lib.repeat_interleave(lib.tensor([2, 0, 3])), None),
        (lambda lib, a: lib.tensor(5).repeat_interleave(2), None),
    ]
    for case, _ in cases:
        _same(case(tp, x), case(torch, tx))


def test_repeat_interleave_gradient_sums_the_copies():
    grads = []
    for lib in (tp, torch):
        x = lib.tensor(np.arange(6.0).reshape(2, 3), requires_grad=True)
        y = x.repeat_interleave(lib.tensor([1, 2, 3]), dim=1)
        (y * lib.arange(12.0, dtype=lib.float64).reshape(2, 6)).sum().backward()
        grads.append(x.grad.numpy())
    np.testing.assert_array_equal(grads[0], grads[1])


def test_repeat_interleave_bad_repeats_are_errors():
    x = tp.zeros(3)
    with pytest.raises(ValueError, match="repeats can not be negative"):
        x.repeat_interleave(tp.tensor([1, -1, 2]))
    with pytest.raises(ValueError, match="repeats can not be negative"):
        x.repeat_interleave(-2)
    with pytest.raises(ValueError, match=r"repeats must have the same size as input along dim, but got "
                                         r"repeats.size\(0\) = 2 and input.size\(0\) = 3"):
        x.repeat_interleave(tp.tensor([1, 2]))
    with pytest.raises(TypeError, match="repeats must be an int64 or int32 tensor, got float32"):
        x.repeat_interleave(tp.tensor([1.0, 2.0, 3.0]))
    with pytest.raises(TypeError, match="repeats must be an int or a Tensor, not float"):
        x.repeat_interleave(2.0)


# --- random_ / bernoulli_ ---------------------------------------------------------------------

def test_random_fills_pytorchs_ranges_from_tensorplays_generator():
    gen = tp.Generator().manual_seed(3)
    a = tp.zeros(2000).random_(-4, 3, generator=gen)
    assert a.dtype is tp.float32 and set(np.unique(a.numpy())) == set(range(-4, 3))
    b = tp.zeros(2000, dtype=tp.int8).random_(5)
    assert set(np.unique(b.numpy())) == set(range(5))
    c = tp.zeros(2000, dtype=tp.uint8).random_()
    assert c.numpy().min() < 20 and c.numpy().max() > 235
    d = tp.zeros(500).random_()
    assert d.numpy().max() <= 2 ** 24 and (d.numpy() == np.round(d.numpy())).all() and d.numpy().max() > 2 ** 22
    e = tp.zeros(500, dtype=tp.bool).random_()
    assert set(np.unique(e.numpy())) == {False, True}
    assert tp.zeros(5, dtype=tp.int64).random_(to=3).numpy().max() < 3
    again = tp.zeros(2000).random_(-4, 3, generator=tp.Generator().manual_seed(3))
    np.testing.assert_array_equal(a.numpy(), again.numpy())


def test_random_bad_bounds_are_errors():
    with pytest.raises(ValueError, match=r"random_ expects 'from' to be less than 'to', but got from=5 >= to=2"):
        tp.zeros(3).random_(5, 2)
    with pytest.raises(ValueError, match=r"random_: \[0, 1000\) is out of bounds for int8"):
        tp.zeros(3, dtype=tp.int8).random_(1000)


def test_bernoulli_fills_with_the_probabilities():
    _same(tp.zeros(4).bernoulli_(tp.tensor([0.0, 1.0, 0.0, 1.0])), torch.zeros(4).bernoulli_(torch.tensor([0.0, 1.0, 0.0, 1.0])))
    _same(tp.ones(3, dtype=tp.int64).bernoulli_(0.0), torch.ones(3, dtype=torch.int64).bernoulli_(0.0))
    draws = tp.zeros(4000).bernoulli_(0.25, generator=tp.Generator().manual_seed(1)).numpy()
    assert set(np.unique(draws)) == {0.0, 1.0} and 0.2 < draws.mean() < 0.3  # 7 standard deviations
    with pytest.raises(ValueError, match=r"bernoulli_ expects p to be in \[0, 1\], but got p=1.5"):
        tp.zeros(3).bernoulli_(1.5)


# --- erfinv -----------------------------------------------------------------------------------

def test_erfinv_edges_and_dtypes_are_pytorchs():
    edges = [-1.0, 1.0, 0.0, -0.0, 1.5, -2.0, np.nan, 1e-30, 0.9999999, -0.5]
    for dtype in ("float32", "float64"):
        x, tx = _pair(np.array(edges, dtype))
        # float32: the Newton steps end within a few ulps of PyTorch's rational fit; float64:
        # at 0.9999999 an ulp of erf's result moves x by 1e-16 / erf'(3.77) ~ 1e-10, and the
        # two differ by 1.2e-11
        _same(tp.erfinv(x), torch.erfinv(tx), rtol=2e-6 if dtype == "float32" else 1e-11)
    _same(tp.erfinv(tp.tensor([1, 0])), torch.erfinv(torch.tensor([1, 0])))
    _same(tp.tensor([0.5], dtype=tp.bfloat16).erfinv(), torch.tensor([0.5], dtype=torch.bfloat16).erfinv())


# --- diag, diag_embed, meshgrid ---------------------------------------------------------------

def test_diag_diag_embed_and_meshgrid_match_pytorch():
    v, tv = _pair(_RNG.standard_normal(3))
    m, tm = _pair(_RNG.standard_normal((3, 4)))
    b, tb = _pair(_RNG.standard_normal((2, 3, 2)))
    for k in (0, 2, -1):
        _same(tp.diag(v, k), torch.diag(tv, k))
        _same(m.diag(k), tm.diag(k))
    _same(tp.diag(m, 5), torch.diag(tm, 5))
    _same(tp.diag_embed(b, 1, 0, 2), torch.diag_embed(tb, 1, 0, 2))
    _same(b.diag_embed(-2, dim1=-1, dim2=1), tb.diag_embed(-2, dim1=-1, dim2=1))
    a, ta = _pair(np.arange(3))
    c, tc = _pair(np.arange(4) * 10)
    for indexing in ("ij", "xy"):
        for got, want in zip(tp.meshgrid(a, c, tp.tensor(7), indexing=indexing),
                             torch.meshgrid(ta, tc, torch.tensor(7), indexing=indexing)):
            _same(got, want)
    for got, want in zip(tp.meshgrid([a, c], indexing="xy"), torch.meshgrid([ta, tc], indexing="xy")):
        _same(got, want)


def test_meshgrid_without_indexing_warns_and_uses_ij():
    a, c = tp.arange(2), tp.arange(3)
    with pytest.warns(UserWarning, match=r"tp\.meshgrid: pass indexing='ij' or indexing='xy'"):
        grids = tp.meshgrid(a, c)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = torch.meshgrid(torch.arange(2), torch.arange(3))
    for got, w in zip(grids, want):
        _same(got, w)


def test_diag_and_meshgrid_bad_input_are_errors():
    with pytest.raises(ValueError, match=r"diag\(\): supports 1-D or 2-D tensors, got a 3-D tensor"):
        tp.diag(tp.zeros(2, 2, 2))
    with pytest.raises(ValueError, match=r"diag_embed\(\): diagonal dimensions cannot be identical 0, 0"):
        tp.diag_embed(tp.zeros(3), dim1=0, dim2=0)
    with pytest.raises(ValueError, match=r"meshgrid\(\): expected 0-d or 1-D tensors, got one of shape \[2, 2\]"):
        tp.meshgrid(tp.zeros(2, 2), indexing="ij")
    with pytest.raises(ValueError, match=r"meshgrid\(\): indexing must be 'ij' or 'xy', got 'foo'"):
        tp.meshgrid(tp.zeros(2), indexing="foo")
    with pytest.raises(ValueError, match=r"meshgrid\(\): expected a non-empty list of tensors"):
        tp.meshgrid(indexing="ij")


# --- tp.testing.assert_close ------------------------------------------------------------------

def test_assert_close_uses_pytorchs_default_tolerances_per_dtype():
    for dtype, rtol in (("float32", 1.3e-6), ("float64", 1e-7), ("float16", 1e-3), ("bfloat16", 1.6e-2)):
        base = np.array([100.0, 200.0], np.float32)
        inside, outside = base * (1 + rtol * 0.5), base * (1 + rtol * 4)
        for arrays, close in (((base, inside), True), ((base, outside), False)):
            ours = [tp.tensor(a).to(getattr(tp, dtype)) for a in reversed(arrays)]
            theirs = [torch.tensor(a).to(getattr(torch, dtype)) for a in reversed(arrays)]
            for lib, pair in ((tp, ours), (torch, theirs)):
                if close:
                    lib.testing.assert_close(*pair)
                else:
                    with pytest.raises(AssertionError):
                        lib.testing.assert_close(*pair)
    tp.testing.assert_close(tp.tensor([3]), tp.tensor([3]))
    with pytest.raises(AssertionError):
        tp.testing.assert_close(tp.tensor([3]), tp.tensor([4]))


def test_assert_close_options_and_messages():
    a, b = tp.tensor([1.0, 2.0, 3.0]), tp.tensor([1.0, 2.5, 3.0])
    with pytest.raises(AssertionError) as info:
        tp.testing.assert_close(a, b)
    assert str(info.value) == ("Tensor-likes are not close!\n\nMismatched elements: 1 / 3 (33.3%)\n"
                               "Greatest absolute difference: 0.5 at index (1,) (up to 1e-05 allowed)\n"
                               "Greatest relative difference: 0.2 at index (1,) (up to 1.3e-06 allowed)")
    tp.testing.assert_close(a, b, rtol=0.0, atol=0.5)
    nan = tp.tensor([float("nan"), float("inf")])
    with pytest.raises(AssertionError):
        tp.testing.assert_close(nan, nan)
    tp.testing.assert_close(nan, nan, equal_nan=True)
    with pytest.raises(AssertionError, match=r"The values for attribute 'dtype' do not match"):
        tp.testing.assert_close(a, a.double())
    tp.testing.assert_close(a, a.double(), check_dtype=False)
    with pytest.raises(AssertionError, match=r"The values for attribute 'shape' do not match"):
        tp.testing.assert_close(a, a[:2])
    with pytest.raises(ValueError, match=r"both 'rtol' and 'atol' must be given, or neither"):
        tp.testing.assert_close(a, b, rtol=0.1)
    with pytest.raises(AssertionError, match=r"custom"):
        tp.testing.assert_close(a, b, msg="custom")
    tp.testing.assert_close({"w": [a, 1.0]}, {"w": [a.clone(), 1.0]})
    with pytest.raises(AssertionError, match=r"The failure occurred for item \['w'\]\[0\]"):
        tp.testing.assert_close({"w": [a]}, {"w": [b]})
    with pytest.raises(AssertionError, match="Scalars are not close"):
        tp.testing.assert_close(1.0, 1.1)
    with pytest.raises(TypeError, match=r"assert_close\(\): cannot compare Tensor with float"):
        tp.testing.assert_close(a, 1.0)


# --- legacy typed constructors ----------------------------------------------------------------

@pytest.mark.parametrize("name", ["FloatTensor", "DoubleTensor", "HalfTensor", "BFloat16Tensor", "LongTensor",
                                  "IntTensor", "BoolTensor", "ByteTensor"])
def test_legacy_constructors_make_their_dtype(name):
    ours, theirs = getattr(tp, name), getattr(torch, name)
    _same(ours([1, 0, 2]), theirs([1, 0, 2]))
    shape = ours(2, 3)
    assert tuple(shape.shape) == (2, 3) and shape.dtype is ours.dtype and not shape.numpy().astype(bool).any()
    assert tuple(ours().shape) == (0,) and tuple(ours(tp.Size([4])).shape) == (4,)
    made = tp.tensor([1, 2]).type(ours)
    assert isinstance(made, ours) and made.dtype is ours.dtype
    assert isinstance(tp.zeros(2).type(f"torch.{name}"), ours)
    assert tp.zeros(2, dtype=ours.dtype).type() == f"tensorplay.{name}"
    others = [n for n in ("FloatTensor", "LongTensor") if n != name]
    assert not isinstance(tp.zeros(2, dtype=ours.dtype), getattr(tp, others[0]))
    assert not isinstance(np.zeros(2), ours)


def test_legacy_constructors_truncate_and_reject_like_pytorch():
    _same(tp.LongTensor([1.5, -2.7]), torch.LongTensor([1.5, -2.7]))
    assert isinstance(tp.tensor([1, 2]), tp.LongTensor) and isinstance(tp.ones(1), tp.FloatTensor)
    with pytest.raises(TypeError, match=r"LongTensor\(\): data must be a sequence, got float"):
        tp.LongTensor(2.5)
    with pytest.raises(TypeError, match=r"FloatTensor\(\): expected a float32 tensor, got int64"):
        tp.FloatTensor(tp.tensor([1, 2]))
    with pytest.raises(ValueError, match=r"type\(\): unknown tensor type 'numpy.LongTensor'"):
        tp.zeros(1).type("numpy.LongTensor")


# --- host-only methods and tp.cuda --------------------------------------------------------------

def test_pin_memory_and_get_device_on_the_host():
    x = tp.ones(3)
    assert x.pin_memory() is x and x.get_device() == -1 == torch.ones(3).get_device()


def test_cuda_queries_answer_without_a_device():
    if tp.cuda.is_available():
        pytest.skip("a CUDA device is present: the device checks cover it")
    assert tp.cuda.is_bf16_supported() is False
    for fn in (tp.cuda.memory_allocated, tp.cuda.max_memory_allocated, tp.cuda.memory_reserved,
               tp.cuda.max_memory_reserved):
        assert fn() == 0 and fn(0) == 0
    assert tp.cuda.reset_peak_memory_stats() is None and tp.cuda.empty_cache() is None
    with pytest.raises(RuntimeError, match=r"tp\.cuda\.set_device\(\): no CUDA device"):
        tp.cuda.set_device(0)
    with pytest.raises(RuntimeError, match=r"tp\.cuda\.get_device_capability\(\): no CUDA device"):
        tp.cuda.get_device_capability()
    with pytest.raises(RuntimeError, match=r"tp\.cuda\.get_device_properties\(\): no CUDA device"):
        tp.cuda.get_device_properties(0)


def test_cuda_set_device_rejects_other_devices():
    with pytest.raises(ValueError, match=r"tp\.cuda\.set_device\(\): only cuda device 0 is supported"):
        tp.cuda.set_device(1)
    with pytest.raises(ValueError, match=r"tp\.cuda\.set_device\(\): expected a cuda device, got cpu"):
        tp.cuda.set_device("cpu")
    with pytest.raises(ValueError, match=r"memory_allocated\(\): only cuda device 0 is supported"):
        tp.cuda.memory_allocated("cuda:2")
    tp.cuda.set_device(-1)  # as PyTorch: a negative index changes nothing


@pytest.mark.cuda
def test_cuda_queries_on_a_device():
    if not tp.cuda.is_available():
        pytest.skip("no CUDA device")
    major, minor = tp.cuda.get_device_capability()
    assert major >= 3 and minor >= 0
    assert tp.cuda.is_bf16_supported() is True
    assert tp.cuda.is_bf16_supported(including_emulation=False) is (major >= 8)
    tp.cuda.set_device(0)
    tp.cuda.set_device("cuda:0")
    props = tp.cuda.get_device_properties(0)
    assert (props.major, props.minor) == (major, minor) and props.total_memory > 2 ** 30
    assert props.multi_processor_count > 0 and props.name
    assert "total_memory=" in repr(props)
    x = tp.ones(3, device="cuda")
    assert x.get_device() == 0
    with pytest.raises(RuntimeError, match=r"pin_memory\(\): cannot pin a cuda(:0)? tensor"):
        x.pin_memory()
    assert not isinstance(x, tp.FloatTensor)
    np.testing.assert_array_equal((tp.tensor([1, 2], device="cuda") << 3).cpu().numpy(), [8, 16])


# --- compiled ---------------------------------------------------------------------------------

def _composed(x, a, s):
    m = tp.median(x, 1)
    gx, gy = tp.meshgrid(x[0], x[1], indexing="xy")
    return (tp.erfinv(x.clamp(-0.9, 0.9)), a << s, a >> s, m.values, m.indices, tp.nanmedian(x),
            tp.diag_embed(x, 1), tp.diag(x[0]), x.repeat_interleave(2, dim=0), gx + gy,
            tp.addcdiv(tp.addcmul(x, x, x, value=0.5), x, x + 2),
            x.repeat_interleave(tp.tensor([2, 0, 1, 1]), dim=1, output_size=4))


@pytest.mark.iree
def test_the_compositions_compile_whole_and_give_eagers_results():
    pytest.importorskip("iree.compiler")
    x = tp.tensor(_RNG.uniform(-1, 1, (3, 4)).astype(np.float32))
    a = tp.tensor(np.resize(np.array([1, -5, 7, -128], np.int8), (3, 4)))
    s = tp.tensor(np.resize(np.array([0, 1, 7, 8], np.int8), (3, 4)))
    tp.compiler.reset()
    try:
        got = tp.compile(_composed, backend="iree-cpu", fullgraph=True)(x, a, s)
    finally:
        tp.compiler.reset()
    for g, w in zip(got, _composed(x, a, s)):
        # IREE's exp and log in erfinv's float32 steps differ from numpy's by a few ulps
        np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=2e-6, atol=1e-6)
