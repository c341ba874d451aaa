"""Views share their base's memory (PyTorch's aliasing rules), eagerly, under autograd and
compiled: a table of aliasing programs, each run with PyTorch and with tensorplay from the
same program text, compared on the result and on every input's final contents.

A program is a function ``(torch, brk, x, y) -> tensor`` where ``torch`` is the module
under test and ``brk(t)`` marks where the graph-break variant breaks its graph.
"""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import tensorplay as tp

torch = pytest.importorskip("torch")


def _x():
    return np.arange(12, dtype=np.float64).reshape(3, 4) - 4.5


def _y():
    return np.random.default_rng(1).standard_normal((3, 4))


# --- writes through views -------------------------------------------------------------------

def p_column_zero(torch, brk, x, y):
    x[:, 0].zero_()
    return x * 1


def p_view_mul(torch, brk, x, y):
    x.view(12).mul_(2)
    return x + y


def p_t_add(torch, brk, x, y):
    x.t().add_(1)
    brk(x)
    return x.sum(0)


def p_permute_row_fill(torch, brk, x, y):
    x.permute(1, 0)[0].fill_(5)
    return x - y


def p_narrow_mul(torch, brk, x, y):
    x.narrow(1, 1, 2).mul_(3)
    return x


def p_chunk_loop(torch, brk, x, y):
    for i, c in enumerate(x.chunk(2, 1)):
        c.add_(i + 1)
    return x * y


def p_unbind_copy(torch, brk, x, y):
    a, b, c = x.unbind(0)
    a.copy_(b)
    brk(x)
    c.mul_(-1)
    return x


def p_split_mul(torch, brk, x, y):
    x.split(3, 1)[1].mul_(2)
    return x


def p_detach_copy(torch, brk, x, y):
    x.detach().copy_(y)
    return x + 1


def p_data_add(torch, brk, x, y):
    x.data.add_(y)
    return x * 2


def p_base_write_seen_by_view(torch, brk, x, y):
    v = x[1]
    x.mul_(2)
    brk(x)
    return v + 0


def p_view_of_view(torch, brk, x, y):
    v = x[:, 1:3]
    w = v[0]
    w.add_(10)
    return x + v.sum()


def p_unsqueeze_squeeze(torch, brk, x, y):
    x.unsqueeze(0).squeeze(0)[1].zero_()
    return x


def p_flatten_slice(torch, brk, x, y):
    x.flatten()[3:7].mul_(-1)
    return x


def p_reshape_copy_of_transposed(torch, brk, x, y):
    r = x.t().reshape(12)  # not viewable: a copy, so the write does not reach x
    r.mul_(0)
    return x + r.sum()


def p_strided_slice(torch, brk, x, y):
    x[::2].add_(y[::2])
    return x


def p_setitem_on_view(torch, brk, x, y):
    x[0][1] = 7
    v = x[1:]
    v[:, :2] = y[:2, :2]
    return x


def p_clone_does_not_alias(torch, brk, x, y):
    out = x.clone()
    out[0].zero_()
    return out + x


def p_mT_mul(torch, brk, x, y):
    x.mT.mul_(2)
    return x


def p_view_rows_sub(torch, brk, x, y):
    x.view(2, 6)[1].sub_(1)
    return x


def p_expand_read(torch, brk, x, y):
    e = x[0].expand(3, 4)
    x[0, 0] = 100
    return e + y


def p_inplace_ops_on_views(torch, brk, x, y):
    x[0].clamp_(-1, 1)
    x[1].neg_()
    x[2].masked_fill_(x[2] > 3, 0.5)
    return x


def p_contiguous_of_transposed(torch, brk, x, y):
    c = x.t().contiguous()
    c.zero_()
    return x


def p_write_then_read_other_views(torch, brk, x, y):
    a = x[:, 0]
    b = x[0]
    a.fill_(3)
    brk(x)
    return b * 1 + a.sum()


def p_diagonal_mul(torch, brk, x, y):
    x.diagonal().mul_(10)
    x.diagonal(1).add_(y[0, :3])
    return x


def p_unfold_windows_write(torch, brk, x, y):
    w = x.unfold(1, 2, 2)  # windows that do not overlap
    w[:, :, 0].zero_()
    return w.sum(-1) + 1


def p_as_strided_fill(torch, brk, x, y):
    a = x.as_strided((2, 3), (4, 1), 1)
    a.fill_(-2)
    brk(x)
    return a * y[:2, :3]


PROGRAMS = {name[2:]: fn for name, fn in globals().items() if name.startswith("p_")}


def _run(module, fn, brk, compiled=None):
    make = (lambda a: torch.tensor(a)) if module is torch else (lambda a: tp.tensor(a))
    x, y = make(_x()), make(_y())
    if compiled is None:
        out = fn(module, brk, x, y)
    else:
        out = compiled(x, y)
    return [np.array(t.detach().numpy() if module is torch else t.numpy()) for t in (out, x, y)]


def _no_break(t):
    pass


def _break(t):
    float(t.sum())


def _assert_same(ours, theirs, what):
    for name, a, b in zip(("result", "x after", "y after"), ours, theirs):
        np.testing.assert_array_equal(a, b, err_msg=f"{what}: {name}")


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_eager_matches_pytorch(name):
    fn = PROGRAMS[name]
    _assert_same(_run(tp, fn, _no_break), _run(torch, fn, _no_break), name)


#: the programs that mark a graph break (the others would run as in the static variant)
BREAKING = sorted(name for name, fn in PROGRAMS.items() if "brk(x)" in inspect.getsource(fn))


@pytest.mark.iree
@pytest.mark.parametrize("name, variant", [(n, v) for n in sorted(PROGRAMS) for v in ("static", "dynamic")] +
                         [(n, "break") for n in BREAKING])
def test_compiled_matches_pytorch(name, variant):
    fn = PROGRAMS[name]
    brk = _break if variant == "break" else _no_break
    compiled = tp.compile(lambda x, y: fn(tp, brk, x, y), dynamic=variant == "dynamic")
    theirs = _run(torch, fn, _no_break)
    _assert_same(_run(tp, fn, brk, compiled), theirs, f"{name} ({variant}, first call)")
    _assert_same(_run(tp, fn, brk, compiled), theirs, f"{name} ({variant}, second call)")


@pytest.mark.iree
def test_compiled_write_through_a_view_argument_reaches_that_calls_base():
    def f(v):
        v.mul_(2)
        return v.sum()

    compiled = tp.compile(f)
    x, y = tp.ones(3, 4), tp.ones(3, 4) * 5
    assert compiled(x[:, 0]).item() == 6 and compiled(y[:, 1]).item() == 30
    assert x.sum().item() == 15 and y[:, 1].tolist() == [10, 10, 10] and y.sum().item() == 75
    assert compiled.compile_count == 1


@pytest.mark.iree
@pytest.mark.parametrize("fullgraph", [False, True])
def test_compiled_read_of_a_base_after_a_write_through_its_view_argument(fullgraph):
    def f(x, v):
        v.add_(1)
        return x.sum()

    compiled = tp.compile(f, fullgraph=fullgraph)
    x = tp.zeros(3, 4)
    if fullgraph:  # the graph would read x as it was: it breaks, which fullgraph refuses
        with pytest.raises(tp.compiler.GraphCaptureError, match="write through a view"):
            compiled(x, x[0])
        return
    assert compiled(x, x[0]).item() == 4 and x.sum().item() == 4
    assert compiled(x, x[1]).item() == 8 and x[1].tolist() == [1, 1, 1, 1]


@pytest.mark.iree
@pytest.mark.parametrize("dynamic", [False, True])
def test_compiled_result_that_is_a_view_of_an_input_is_one(dynamic):
    def f(x, y):
        x.add_(y)
        return x[1], x.t(), x * 2

    compiled = tp.compile(f, dynamic=dynamic)
    for call in range(2):
        x, y = tp.zeros(3, 4), tp.ones(3, 4)
        row, t, fresh = compiled(x, y)
        assert t._base is x and fresh._base is None
        t[0].fill_(9)
        assert x[:, 0].tolist() == [9, 9, 9]
        # (under dynamic=True, x[1] slices and reshapes at run-time sizes: a new tensor)
        assert (row._base is x) == (not dynamic) and row.tolist() == ([9, 1, 1, 1] if not dynamic else [1] * 4)
        row.fill_(7)
        assert x[1].tolist() == ([7] * 4 if not dynamic else [9, 1, 1, 1]), call


@pytest.fixture
def vulkan():
    caps = tp.compiler.get_backend_capabilities("iree-vulkan")
    if not caps.available:
        pytest.skip(f"iree-vulkan is unavailable here: {caps.reason}")


def _run_on_device(fn, compiled=None):
    x = tp.tensor(_x().astype(np.float32)).to("vulkan")
    y = tp.tensor(_y().astype(np.float32)).to("vulkan")
    out = fn(tp, _no_break, x, y) if compiled is None else compiled(x, y)
    assert out.device.type == "vulkan" and x.device.type == "vulkan"
    return [t.cpu().numpy() for t in (out, x, y)]


def _run_float32(fn):
    x, y = torch.tensor(_x().astype(np.float32)), torch.tensor(_y().astype(np.float32))
    return [t.detach().numpy() for t in (fn(torch, _no_break, x, y), x, y)]


@pytest.mark.iree
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_device_tensors_match_pytorch(name, vulkan):
    """Eager ops on Vulkan tensors, then the program compiled for iree-vulkan (static), in
    float32 (the Vulkan target has no float64)."""
    fn = PROGRAMS[name]
    theirs = _run_float32(fn)
    runs = [("vulkan eager", _run_on_device(fn))]
    if sorted(PROGRAMS).index(name) % 3 == 0:  # (a third compiled, for the suite's time: each compile is seconds)
        compiled = tp.compile(lambda x, y: fn(tp, _no_break, x, y), backend="iree-vulkan")
        runs.append(("iree-vulkan", _run_on_device(fn, compiled)))
    for what, ours in runs:
        for label, a, b in zip(("result", "x after", "y after"), ours, theirs):
            # (sums of up to 12 float32 terms in the device's order: a few units of 1.2e-7)
            np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6, err_msg=f"{name} ({what}): {label}")


@pytest.mark.iree
@pytest.mark.parametrize("backend", ["iree-cpu", "iree-vulkan"])
def test_a_host_weight_written_through_a_view_is_uploaded_again(backend):
    """The device copy of a host weight is kept between calls while its storage's version
    holds: a write through a view or .data is a new version."""
    caps = tp.compiler.get_backend_capabilities(backend)
    if not caps.available:
        pytest.skip(caps.reason)
    lin = tp.nn.Linear(64, 64)  # 16 KiB of weight: kept on the device between calls
    compiled = tp.compile(lin, backend=backend)
    x = tp.ones(2, 64)
    with tp.no_grad():
        np.testing.assert_allclose(compiled(x).numpy(), lin(x).numpy(), rtol=1e-5, atol=1e-5)
        lin.weight[3].zero_()
        np.testing.assert_allclose(compiled(x).numpy(), lin(x).numpy(), rtol=1e-5, atol=1e-5)
        assert compiled(x)[:, 3].tolist() == lin.bias[3].expand(2).tolist()
        lin.weight.data.t()[0].fill_(1)
        np.testing.assert_allclose(compiled(x).numpy(), lin(x).numpy(), rtol=1e-5, atol=1e-5)


# --- sizes, strides and storage ---------------------------------------------------------------

LAYOUTS = {
    "column": lambda t: t[:, 2],
    "row": lambda t: t[1],
    "transpose": lambda t: t.transpose(0, 1),
    "permute_slice": lambda t: t.permute(2, 0, 1)[1:, :, ::2],
    "narrow": lambda t: t.narrow(2, 1, 2),
    "expand": lambda t: t[:, :1].expand(2, 5, 4),
    "unsqueeze_of_transposed": lambda t: t.transpose(0, 2).unsqueeze(1),
    "flatten": lambda t: t.flatten(),
    "view_of_slice": lambda t: t[1].view(12),
    "squeeze": lambda t: t[:1].squeeze(0),
    "diagonal": lambda t: t.diagonal(1, 1, 2),
    "unfold": lambda t: t.unfold(2, 2, 1),
    "as_strided": lambda t: t[1].as_strided((2, 2), (1, 3)),
}


@pytest.mark.parametrize("name", sorted(LAYOUTS))
def test_views_have_pytorchs_layout(name):
    make = LAYOUTS[name]
    base = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    ours, theirs = make(tp.tensor(base)), make(torch.tensor(base))
    assert tuple(ours.shape) == tuple(theirs.shape)
    assert ours.stride() == theirs.stride()
    assert ours.storage_offset() == theirs.storage_offset()
    assert ours.is_contiguous() == theirs.is_contiguous()
    assert (ours._base is not None) == (theirs._base is not None)


def test_storage_identity():
    x = tp.zeros(3, 4)
    v = x[1:, 2]
    assert v.untyped_storage() == x.untyped_storage()
    assert v.data_ptr() == x.data_ptr() + (4 + 2) * 4
    assert x.clone().untyped_storage() != x.untyped_storage()
    assert x.detach().data_ptr() == x.data_ptr() and x.data.data_ptr() == x.data_ptr()
    c = x.t().contiguous()
    assert c.is_contiguous() and c.data_ptr() != x.data_ptr()
    assert x.contiguous() is x


def test_write_into_expanded_view_raises_pytorchs_error():
    e = tp.ones(3).expand(2, 3)
    with pytest.raises(RuntimeError, match="more than one element of the written-to tensor"):
        e.add_(1)


def test_view_raises_when_not_viewable():
    x = tp.zeros(3, 4).t()
    with pytest.raises(RuntimeError, match="view size is not compatible"):
        x.view(12)
    assert x.reshape(12).shape == (12,)


def test_numpy_shares_memory_both_ways():
    x = tp.zeros(2, 3)
    a = x.numpy()
    x[0].add_(1)
    assert a[0].tolist() == [1, 1, 1]
    a[1] = 5
    assert x[1].tolist() == [5, 5, 5]


def test_version_counter_is_shared_by_views_and_detach():
    x = tp.zeros(3, 4)
    v, d = x[0], x.detach()
    v.add_(1)
    assert x._version == v._version == d._version == 1
    x.data.add_(1)  # .data has a counter of its own
    assert x._version == 1


# --- autograd ---------------------------------------------------------------------------------

def _grad_program(module, body):
    w = module.tensor(_y(), requires_grad=True)
    out = body(module, w)
    out.sum().backward()
    return w.grad.numpy() if module is tp else w.grad.detach().numpy()


def g_mul_column(torch, w):
    y = w * 2
    y[:, 1].mul_(3)
    return y


def g_base_write_regrads_view(torch, w):
    y = w * 1
    v = y[0]
    y.mul_(w)
    return v * 3


def g_setitem_from_graph(torch, w):
    y = torch.zeros(3, 4, dtype=torch.float64)
    y[1] = w[0] * w[2]
    y.t()[0].add_(w[:, 3])
    return y * y


def g_chain_of_views(torch, w):
    y = w * w
    y.view(12)[2:8].mul_(2)
    return y.t()[1:].sin()


def g_narrow_inplace(torch, w):
    y = w.clone()
    for i in range(3):
        y.narrow(0, i, 1).mul_(i + 1)
    return y


def g_diagonal_inplace(torch, w):
    y = w * 1
    y.diagonal().mul_(w[0, :3])
    return y.unfold(1, 2, 2)


def g_detach_write_not_recorded(torch, w):
    y = w * 2
    y.detach().zero_()  # changes y's values, not its gradient formula
    return y * w


GRAD_PROGRAMS = {name[2:]: fn for name, fn in globals().items() if name.startswith("g_")}


@pytest.mark.parametrize("name", sorted(GRAD_PROGRAMS))
def test_autograd_through_views_matches_pytorch(name):
    fn = GRAD_PROGRAMS[name]
    np.testing.assert_allclose(_grad_program(tp, fn), _grad_program(torch, fn), rtol=1e-15, atol=0)


def test_inplace_on_view_of_leaf_raises_pytorchs_error():
    w = tp.zeros(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="a view of a leaf Variable that requires grad"):
        w[0].mul_(2)


@pytest.mark.parametrize("split", ["unbind", "chunk", "split"])
def test_inplace_on_multi_output_view_raises_pytorchs_error(split):
    w = tp.ones(4, 2, requires_grad=True)
    pieces = {"unbind": lambda y: y.unbind(0), "chunk": lambda y: y.chunk(2), "split": lambda y: y.split(2)}[split]
    with pytest.raises(RuntimeError, match="output of a function that returns multiple views"):
        pieces(w * 1)[1].mul_(2)
    with tp.no_grad():  # no gradient to track: allowed
        y = w * 1
        pieces(y)[1].mul_(2)
    assert y.sum().item() == 8 + (2 if split == "unbind" else 4)


def test_view_made_in_no_grad_modified_under_grad_raises():
    w = tp.zeros(3, requires_grad=True)
    y = w * 1
    with tp.no_grad():
        v = y[0:2]
    with pytest.raises(RuntimeError, match="A view was created in no_grad mode"):
        v.mul_(2)


def test_saved_tensor_modified_through_a_view_raises():
    w = tp.ones(3, requires_grad=True)
    a = w * 1
    b = a.sin()  # saves a
    a[0].mul_(2)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        b.sum().backward()


@pytest.mark.parametrize("compiled", [False, pytest.param(True, marks=pytest.mark.iree)])
def test_data_sgd_matches_pytorch(compiled):
    """pytorch/examples' regression trains with ``p.data.add_(-lr * p.grad)`` (eagerly, and as
    one compiled step)."""
    rng = np.random.default_rng(0)
    xs, ts = rng.standard_normal((16, 4)), rng.standard_normal((16, 1))
    w0, b0 = rng.standard_normal((1, 4)) * 0.1, np.zeros(1)

    def train(torch):
        fc = torch.nn.Linear(4, 1).double()
        with torch.no_grad():
            fc.weight.copy_(torch.tensor(w0))
            fc.bias.copy_(torch.tensor(b0))
        x, t = torch.tensor(xs), torch.tensor(ts)

        def step():
            fc.zero_grad()
            loss = torch.nn.functional.smooth_l1_loss(fc(x), t)
            loss.backward()
            for p in fc.parameters():
                p.data.add_(-0.1 * p.grad)

        if compiled and torch is tp:
            step = tp.compile(step)
        for _ in range(20):
            step()
        if compiled and torch is tp:
            assert step.compile_count == 1
        return [p.detach().numpy().copy() for p in fc.parameters()]

    for ours, theirs in zip(train(tp), train(torch)):
        np.testing.assert_allclose(ours, theirs, rtol=1e-13, atol=1e-15)


def test_grad_data_zero():
    w = tp.ones(3, requires_grad=True)
    (w * 2).sum().backward()
    w.grad.data.zero_()
    assert w.grad.tolist() == [0, 0, 0]
