"""Device-resident tensors (docs/devices.md): tensors on a GPU device, what moves between the
host and a device and when (proved with ``runtime.stats()``), module weights kept on the
device, eager ops on device tensors, and CPU programs reading host arrays in place.

The device tests run on every GPU device IREE can open here (lavapipe's Vulkan device in CI,
CUDA where there is a GPU) and skip with the runtime's reason elsewhere.
``TENSORPLAY_DEVICE_SWEEP=full`` runs the eager sweep over the whole op table.
"""

from __future__ import annotations

import copy
import os
import pickle

import numpy as np
import pytest

import tensorplay as tp
from tensorplay import runtime
from tensorplay.compiler.backends import device_ops
from tensorplay.examples.models import GPTConfig, build_cnn, build_gpt
from tensorplay.runtime import program, storage

#: the GPU device of each IREE backend that keeps tensors on a device
DEVICES = {"iree-vulkan": "vulkan", "iree-cuda": "cuda"}


@pytest.fixture(params=list(DEVICES))
def backend_name(request):
    caps = tp.compiler.get_backend_capabilities(request.param)
    if not caps.available:
        pytest.skip(f"{request.param} is unavailable here: {caps.reason}")
    return request.param


@pytest.fixture
def dev(backend_name):
    return DEVICES[backend_name]


def _moved(before: runtime.TransferStats) -> runtime.TransferStats:
    return runtime.stats() - before


def _logits(out):
    return out[0] if isinstance(out, tuple) else out


def _gpt():
    tp.manual_seed(0)
    model = build_gpt(tp, GPTConfig()).eval()
    idx = tp.randint(0, GPTConfig.vocab_size, (2, GPTConfig.block_size))
    return model, idx


def _mlp():
    tp.manual_seed(1)
    return tp.nn.Sequential(tp.nn.Linear(12, 32), tp.nn.GELU(), tp.nn.Linear(32, 5)).eval(), tp.randn(3, 12)


def _cnn():
    tp.manual_seed(2)
    return build_cnn(tp).eval(), tp.randn(2, 1, 12, 12)


# -- host only ---------------------------------------------------------------------------------

def test_device_names_follow_pytorch():
    assert tp.device("hip") == tp.device("rocm") and str(tp.device("rocm:0")) == "hip:0"
    assert tp.device("cuda", 0) == tp.device("cuda:0") != tp.device("cuda")
    with pytest.raises(ValueError, match="unknown device type 'tpu'"):
        tp.device("tpu")
    t = tp.randn(3)
    assert t.device == tp.device("cpu") and not t.is_cuda
    assert t.to("cpu") is t and t.cpu() is t and t.to("cpu", copy=True) is not t
    with pytest.raises(ValueError, match="only device index 0"):
        t.to("vulkan:1")


def test_memory_handed_out_is_marked_shared():
    t = tp.randn(4)
    assert not storage.is_shared(t._data)
    t.detach().numpy()
    assert storage.is_shared(t._data)
    u = tp.randn(4)
    np.asarray(u, copy=True)  # a copy shares nothing
    assert not storage.is_shared(u._data)
    np.asarray(u)
    assert storage.is_shared(u._data)
    a = np.ones(3, np.float32)
    assert storage.is_shared(tp.from_numpy(a)._data) and storage.is_shared(tp.as_tensor(a)._data)
    assert not storage.is_shared(tp.tensor(a)._data)
    assert storage.is_shared(a[1:])  # a view of a shared array


def test_transfer_stats_add_up():
    runtime.reset_stats()
    storage.count("upload", 100, "f")
    storage.count("download", 8, "f")
    before = runtime.stats()
    storage.count("import", 64, "g")
    storage.count("upload", 4)
    moved = runtime.stats() - before
    assert (moved.uploads, moved.upload_bytes, moved.imports) == (1, 4, 1)
    assert set(moved.by_program) == {"g", storage.OUTSIDE}
    total = runtime.stats()
    assert (total.uploads, total.upload_bytes, total.downloads, total.download_bytes) == (2, 104, 1, 8)
    assert "total" in str(total) and "f" in str(total)
    runtime.reset_stats()
    assert runtime.stats().uploads == 0


# -- CPU programs --------------------------------------------------------------------------------

def _aligned(shape, dtype=np.float32):
    n = int(np.prod(shape)) * np.dtype(dtype).itemsize
    raw = np.zeros(n + storage.ALIGNMENT, np.uint8)
    start = (-raw.ctypes.data) % storage.ALIGNMENT
    return raw[start:start + n].view(dtype).reshape(shape)


def _call_on_an_aligned_copy(model, x):
    """Compile ``model``, call it once, then on an aligned copy of ``x``: (copy, result, moved)."""
    compiled = tp.compiler.compile(model, backend="iree-cpu")
    compiled(x)
    a = _aligned(tuple(x.shape))
    a[...] = np.asarray(x)
    before = runtime.stats()
    y = compiled(tp.from_numpy(a))
    return compiled, a, y, _moved(before)


@pytest.mark.iree
def test_cpu_programs_copy_small_arrays_and_results():
    # below program._COPY_BELOW a copy costs less than reading in place or mapping: small
    # inputs are copied even when aligned, small results are arrays of their own
    model, x = _mlp()
    _, a, y, moved = _call_on_an_aligned_copy(model, x)
    # (weights are resident: read in place when aligned, else a device copy made once)
    assert moved.uploads == 1 and moved.upload_bytes == a.nbytes, moved
    assert y._data.base is None and y._data.flags.writeable
    np.testing.assert_allclose(np.asarray(y), np.asarray(model(x)), rtol=1e-5, atol=1e-5)


@pytest.mark.iree
def test_cpu_programs_read_inputs_in_place_and_return_views():
    tp.manual_seed(1)
    model = tp.nn.Sequential(tp.nn.Linear(64, 96), tp.nn.GELU(), tp.nn.Linear(96, 64)).eval()
    x = tp.randn(80, 64)  # input and result above program._COPY_BELOW
    assert x.numel() * 4 > program._COPY_BELOW
    compiled, a, y, moved = _call_on_an_aligned_copy(model, x)
    weight_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    assert moved.upload_bytes < weight_bytes and moved.downloads == 0 and moved.imports >= 1
    # the aligned input was read where it is; the result is a view of IREE's buffer
    assert moved.upload_bytes <= weight_bytes - a.nbytes or moved.imports >= 1
    assert y._data.base is not None and y.device == tp.device("cpu")
    np.testing.assert_allclose(np.asarray(y), np.asarray(model(x)), rtol=1e-5, atol=1e-5)
    # chaining: the view is aligned IREE memory, read in place by the next program
    head = tp.compiler.compile(lambda t: tp.softmax(t, dim=-1), backend="iree-cpu")
    head(y)
    before = runtime.stats()
    z = head(compiled(tp.from_numpy(a)))
    moved = _moved(before)
    assert moved.downloads == 0 and moved.upload_bytes == 0, moved
    np.testing.assert_allclose(np.asarray(z), np.asarray(tp.softmax(model(x), dim=-1)), rtol=1e-5, atol=1e-6)


@pytest.mark.iree
def test_cpu_result_never_aliases_an_input():
    a = _aligned((4, 4))
    a[...] = np.arange(16).reshape(4, 4)
    for fn in (lambda t: t.clone(), lambda t: t.reshape(16) * 1, lambda t: (t, t.clone())):
        out = tp.compiler.compile(fn, backend="iree-cpu")(tp.from_numpy(a))
        for o in (out if isinstance(out, tuple) else (out,)):
            if o._data is not a:
                assert not np.shares_memory(np.asarray(o), a)


def test_storage_tensorplay_allocates_is_aligned():
    # numpy's large arrays start 16 bytes into a page: storage tensorplay makes itself starts
    # at storage.ALIGNMENT, so CPU programs read it where it is
    a = np.random.default_rng(0).standard_normal((64, 192)).astype(np.float32)
    assert a.nbytes // 2 > storage.IN_PLACE_MIN_BYTES
    made = [tp.tensor(a), tp.Tensor(a), copy.deepcopy(tp.tensor(a)), pickle.loads(pickle.dumps(tp.tensor(a))),
            tp.tensor(a, dtype=tp.float64), tp.tensor(a[:, ::2])]
    for t in made:
        data = t._data
        assert data.ctypes.data % storage.ALIGNMENT == 0 and data.flags.c_contiguous and data.flags.writeable
        assert not np.shares_memory(data, a)
    for t, want in zip(made, [a, a, a, a, a.astype(np.float64), a[:, ::2]]):
        np.testing.assert_array_equal(t.numpy(), want)
        assert t.numpy().dtype == want.dtype
    small = tp.tensor(a[:2])  # at most IN_PLACE_MIN_BYTES: copied to programs anyway
    np.testing.assert_array_equal(small.numpy(), a[:2])


@pytest.mark.iree
def test_cpu_programs_read_tensors_tensorplay_made_in_place():
    x = tp.tensor(np.random.default_rng(1).standard_normal((64, 96)).astype(np.float32))
    compiled = tp.compiler.compile(lambda t: t * 2 + 1, backend="iree-cpu")
    compiled(x)
    before = runtime.stats()
    y = compiled(x)
    moved = _moved(before)
    assert (moved.uploads, moved.imports) == (0, 1), moved
    np.testing.assert_allclose(y.numpy(), x.numpy() * 2 + 1, rtol=1e-6)


def _as_numpy_places_it(a):
    """A copy of ``a`` 16 bytes past a 64-byte boundary, where numpy's large allocations start
    (a smaller one lands wherever malloc puts it, 64-byte aligned one time in four)."""
    raw = np.empty(a.nbytes + 128, np.uint8)
    start = -raw.ctypes.data % 64 + 16
    out = raw[start:start + a.nbytes].view(a.dtype).reshape(a.shape)
    out[...] = a
    return out


@pytest.mark.iree
def test_cpu_programs_read_numpys_own_arrays_in_place():
    # numpy's large allocations start 16 bytes past 64-byte alignment: CPU programs are
    # compiled to assume 16 (their functions say so in their reflection), so tp.from_numpy of
    # a user's array is read where it is on every call; a 4-byte offset is still copied
    rng = np.random.default_rng(2)
    a = _as_numpy_places_it(rng.standard_normal((256, 96)).astype(np.float32))
    b = _as_numpy_places_it(rng.standard_normal((96, 80)).astype(np.float32))
    compiled = tp.compiler.compile(lambda x, w: (x @ w).sin() + x.sum(1, keepdim=True), backend="iree-cpu")
    x, w = tp.from_numpy(a), tp.from_numpy(b)
    compiled(x, w)
    before = runtime.stats()
    y = compiled(x, w)
    moved = _moved(before)
    assert (moved.uploads, moved.imports) == (0, 2), moved
    np.testing.assert_allclose(y.numpy(), np.sin(a @ b) + a.sum(1, keepdims=True), rtol=2e-5, atol=2e-5)
    shifted = np.empty(a.size + 1, np.float32)[1:].reshape(a.shape)  # 4 bytes off: copied, still right
    shifted[...] = a
    before = runtime.stats()
    y = compiled(tp.from_numpy(shifted), w)
    moved = _moved(before)
    assert (moved.uploads, moved.imports) == (1, 1), moved
    np.testing.assert_allclose(y.numpy(), np.sin(a @ b) + a.sum(1, keepdims=True), rtol=2e-5, atol=2e-5)


def _training_step(model, opt):
    """A training step of ``model`` (cross-entropy loss) with ``opt``: forward, backward, update."""
    def step(x, y):
        loss = tp.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    return step


@pytest.mark.iree
def test_a_compiled_step_first_called_with_numpys_arrays_updates_in_place_and_equals_eager():
    # a training step (its state updates tied to their inputs by a wrapper function) compiled
    # for 16-byte aligned arguments: the wrapper keeps the alignment its code assumes
    def setup():
        tp.manual_seed(5)
        model = tp.nn.Sequential(tp.nn.Linear(256, 64), tp.nn.Tanh(), tp.nn.Linear(64, 4))
        return _training_step(model, tp.optim.SGD(model.parameters(), lr=0.1, momentum=0.9))

    rng = np.random.default_rng(4)
    xs = _as_numpy_places_it(rng.standard_normal((64, 256)).astype(np.float32))
    assert xs.nbytes > runtime.storage.IN_PLACE_MIN_BYTES
    ys = rng.integers(0, 4, 64)
    compiled, eager = tp.compiler.compile(setup(), backend="iree-cpu"), setup()
    for _ in range(3):
        np.testing.assert_allclose(compiled(tp.from_numpy(xs), tp.from_numpy(ys)).item(),
                                   eager(tp.from_numpy(xs), tp.from_numpy(ys)).item(), rtol=1e-5)
    x = tp.from_numpy(xs)
    before = runtime.stats()
    compiled(x, tp.from_numpy(ys))
    moved = _moved(before)
    assert moved.upload_bytes <= ys.nbytes + 64, moved  # x read in place, never copied


@pytest.mark.iree
def test_a_compiled_step_passes_its_updated_state_back_without_copies():
    # the parameters and optimizer state a compiled training step writes are read by the next
    # step from the buffers the program returned: nothing of theirs is copied or imported
    def setup():
        tp.manual_seed(3)
        model = tp.nn.Sequential(tp.nn.Linear(64, 96), tp.nn.GELU(), tp.nn.Linear(96, 4))
        return model, _training_step(model, tp.optim.AdamW(model.parameters(), lr=1e-2))

    model, step = setup()
    eager_model, eager_step = setup()
    compiled = tp.compiler.compile(step, backend="iree-cpu")
    x, y = tp.randn(40, 64), tp.randint(0, 4, (40,))
    for _ in range(3):
        np.testing.assert_allclose(compiled(x, y).item(), eager_step(x, y).item(), rtol=1e-4)
    expected = eager_step(x, y).item()  # (its optimizer runs a program of its own: not counted)
    before = runtime.stats()
    np.testing.assert_allclose(compiled(x, y).item(), expected, rtol=1e-4)
    moved = _moved(before)
    # x (10 KiB) and y, copied as small arrays; lr and the like may be small copies too
    assert moved.imports == 0 and moved.upload_bytes <= x.numel() * 4 + y.numel() * 8 + 64, moved
    # a write through memory handed out is seen by the next step (never a stale buffer)
    for m in (model, eager_model):
        m[0].weight.detach().numpy()[:8] = 0.5
        m[2].bias.detach().numpy()[:] = -1.0
    for _ in range(2):
        np.testing.assert_allclose(compiled(x, y).item(), eager_step(x, y).item(), rtol=1e-4)
    for p, q in zip(model.parameters(), eager_model.parameters()):
        np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-4, atol=1e-6)


@pytest.mark.iree
@pytest.mark.parametrize("backend", ["iree-cpu", "iree-vulkan"])
def test_host_weights_stay_on_the_device_and_changes_are_seen(backend):
    caps = tp.compiler.get_backend_capabilities(backend)
    if not caps.available:
        pytest.skip(caps.reason)
    model, idx = _gpt()
    compiled = tp.compiler.compile(model, backend=backend)
    compiled(idx)
    before = runtime.stats()
    out = compiled(idx)
    moved = _moved(before)
    assert moved.upload_bytes <= idx.numel() * idx.element_size(), moved  # the input at most
    if backend == "iree-cpu":
        assert moved.downloads == 0
    else:  # host input, host result: read back once
        assert moved.downloads == 1 and moved.download_bytes == _logits(out).numel() * 4
    np.testing.assert_allclose(np.asarray(_logits(out)), np.asarray(_logits(model(idx))), rtol=1e-4, atol=1e-5)

    weight = model.lm_head.weight
    with tp.no_grad():
        weight.mul_(1.5)  # an in-place update: a new storage, uploaded once
    before = runtime.stats()
    out = compiled(idx)
    moved = _moved(before)
    if backend != "iree-cpu":
        assert moved.upload_bytes == weight.numel() * 4 + idx.numel() * 8, moved
    np.testing.assert_allclose(np.asarray(_logits(out)), np.asarray(_logits(model(idx))), rtol=1e-4, atol=1e-5)
    before = runtime.stats()
    compiled(idx)
    assert _moved(before).upload_bytes <= idx.numel() * 8

    # a write through memory handed out: never stale (that weight is copied on each call now)
    weight.detach().numpy()[:] = 0.25
    out = compiled(idx)
    np.testing.assert_allclose(np.asarray(_logits(out)), np.asarray(_logits(model(idx))), rtol=1e-4, atol=1e-5)

    # load_state_dict and rebinding a parameter
    state = {k: v * 0.5 if v.dtype.is_floating_point else v for k, v in model.state_dict().items()}
    model.load_state_dict(state)
    out = compiled(idx)
    np.testing.assert_allclose(np.asarray(_logits(out)), np.asarray(_logits(model(idx))), rtol=1e-4, atol=1e-5)
    model.transformer.ln_f.weight = tp.nn.Parameter(tp.randn(GPTConfig.n_embd))
    out = compiled(idx)
    np.testing.assert_allclose(np.asarray(_logits(out)), np.asarray(_logits(model(idx))), rtol=1e-4, atol=1e-5)


# -- GPU devices -------------------------------------------------------------------------------

_DTYPES = (tp.bool, tp.uint8, tp.int8, tp.int16, tp.int32, tp.int64, tp.float16, tp.bfloat16, tp.float32,
           tp.float64)


def test_empty_tensors_on_the_device_act_as_on_the_host(dev):
    # tensors with no elements: moved, used by eager ops, and made inside a compiled call with
    # run-time sizes (t // 2 == 0), on the device as on the host
    host = tp.ones(0, 3)
    t = host.to(dev)
    assert t.device.type == dev and t.shape == (0, 3) and t.cpu().shape == (0, 3)
    assert (t + 1).device.type == dev and (t + 1).shape == (0, 3)
    assert t.sum(0).device.type == dev and t.sum(0).tolist() == [0.0, 0.0, 0.0]

    def f(x):
        n = x.shape[1]
        return x[:, : n // 2] * 2, x.sum(1)

    tp.compiler.reset()
    compiled = tp.compile(f, backend=next(b for b, d in DEVICES.items() if d == dev), dynamic=True)
    for cols in (4, 1, 6):
        x = tp.tensor(np.arange(2 * cols, dtype=np.float32).reshape(2, cols))
        got, want = compiled(x.to(dev)), f(x)
        for g, w in zip(got, want):
            assert g.device.type == dev and g.shape == w.shape, cols
            np.testing.assert_allclose(g.cpu().detach().numpy(), w.detach().numpy(), rtol=1e-6)
    assert compiled.compile_count == 1
    # the device is still good after those calls
    np.testing.assert_allclose((tp.ones(2, 2).to(dev) * 3).cpu().detach().numpy(), np.full((2, 2), 3.0))
    tp.compiler.reset()


def test_tensors_move_to_the_device_and_back(dev, rng):
    for dtype in _DTYPES:
        host = tp.tensor(rng.standard_normal((3, 5)) * 40, dtype=dtype)
        runtime.reset_stats()
        t = host.to(dev)
        assert t.device.type == dev and t.dtype is dtype and t.shape == host.shape, dtype
        assert runtime.stats().uploads == 1
        back = t.cpu()
        s = runtime.stats()
        assert back.device == tp.device("cpu") and (s.downloads, s.download_bytes) == (1, t._data.nbytes), dtype
        np.testing.assert_array_equal(back.detach().numpy(), host.detach().numpy())
        assert t.tolist() == host.tolist() and runtime.stats().downloads == 2
        assert f"device='{t.device}'" in repr(t)
        np.testing.assert_array_equal(np.asarray(t), host.detach().numpy())
        assert runtime.stats().downloads == 2  # reads after the first use the copy it made
        assert t[1, 2].item() == host[1, 2].item() and t[1, 2].device == t.device
        with pytest.raises(TypeError, match=r"can't convert .* to numpy. Use Tensor.cpu\(\)"):
            t.detach().numpy()


def test_factories_and_like_functions_make_device_tensors(dev):
    assert tp.zeros(2, 3, device=dev).device.type == dev
    assert tp.arange(5, device=dev).cpu().tolist() == [0, 1, 2, 3, 4]
    x = tp.randn(4, device=dev)
    assert x.device.type == dev
    assert tp.ones_like(x).device.type == dev and tp.rand_like(x).device.type == dev
    assert tp.zeros_like(x, device="cpu").device == tp.device("cpu")
    assert tp.tensor([1.0, 2.0], device=dev).cpu().tolist() == [1.0, 2.0]


def test_mixing_devices_is_pytorchs_error(dev):
    x = tp.randn(3, 4).to(dev)
    with pytest.raises(RuntimeError, match=rf"Expected all tensors to be on the same device.*{dev}:0 and cpu"):
        x + tp.randn(3, 4)
    # Python numbers and host 0-d tensors mix, as in PyTorch; so do host index tensors
    np.testing.assert_allclose((x * 2 + tp.tensor(1.0)).cpu().detach().numpy(), x.cpu().detach().numpy() * 2 + 1, rtol=1e-6)
    np.testing.assert_array_equal(x[tp.tensor([2, 0])].cpu().detach().numpy(), x.cpu().detach().numpy()[[2, 0]])


def test_eager_ops_on_device_tensors_run_through_the_runner_device_ops_sets():
    from tensorplay import _dispatch

    # the tensor core declares the hook (it imports nothing of the compiler); device_ops sets it
    assert _dispatch._device_runner_or_load() is device_ops.run_on_device


def test_eager_ops_stay_on_the_device(dev):
    x = tp.randn(8, 16)
    d = x.to(dev)
    runtime.reset_stats()
    y = (d @ d.T).relu().sum(dim=1).softmax(dim=0)
    s = runtime.stats()
    assert y.device.type == dev and s.downloads == 0, s
    np.testing.assert_allclose(y.cpu().detach().numpy(), (x @ x.T).relu().sum(dim=1).softmax(dim=0).detach().numpy(),
                               rtol=2e-5, atol=1e-6)


def test_ops_the_device_cannot_run_fall_back_to_the_host(backend_name, dev):
    if backend_name != "iree-vulkan":
        pytest.skip("only Vulkan lacks float64")
    x = tp.randn(5, dtype=tp.float64)
    y = x.to(dev) * 3
    assert y.device.type == dev and y.dtype is tp.float64
    np.testing.assert_array_equal(y.cpu().detach().numpy(), (x * 3).detach().numpy())
    assert "tp.mul" in device_ops.fallbacks() and "float64" in device_ops.fallbacks()["tp.mul"]


def _sweep_calls():
    from tests.test_lowering_vulkan import PAIRS

    if os.environ.get("TENSORPLAY_DEVICE_SWEEP", "") == "full":
        return PAIRS
    return PAIRS[::max(1, len(PAIRS) // 24)]  # a spread over the families


def test_op_table_runs_eagerly_on_the_device(dev):
    from tests.test_lowering import LOWERED_TOLERANCE

    failures = []
    for call in _sweep_calls():
        if all(a is None for a in call.operands):
            continue  # a factory op (tp.arange, tp.full) has no operand whose device it could follow
        tensors = [None if a is None else tp.Tensor._wrap(a).to(dev) for a in call.operands]
        got = tp._dispatch.apply(call.op.name, *tensors, **call.attrs)
        got = got if isinstance(got, tuple) else (got,)
        want = call.op.evaluate(call.operands, call.attrs, call.result_types)
        where = f"{call.op.name} {[None if t is None else str(t) for t in call.types]} {call.attrs}"
        for g, w, t in zip(got, want, call.result_types):
            if g.device.type != dev:
                failures.append(f"{where}: result on {g.device}")
                continue
            r = g.cpu().detach().numpy()
            if r.shape != w.shape or r.dtype != w.dtype:
                failures.append(f"{where}: got {r.dtype}{list(r.shape)}, expected {w.dtype}{list(w.shape)}")
            elif t.dtype.is_floating_point:
                rtol, atol = LOWERED_TOLERANCE[t.dtype]
                if not np.allclose(r.astype(np.float64), w.astype(np.float64), rtol=rtol, atol=atol,
                                   equal_nan=True):
                    failures.append(f"{where}: values differ")
            elif not np.array_equal(r, w):
                failures.append(f"{where}: values differ")
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("build", [_mlp, _gpt, _cnn], ids=["mlp", "nanogpt", "cnn"])
def test_models_moved_to_the_device_match_host_eager(build, backend_name, dev):
    model, x = build()
    want = np.asarray(_logits(model(x)))
    assert model.to(dev) is model
    assert all(t.device.type == dev for t in [*model.parameters(), *model.buffers()])
    xd = x.to(dev)
    eager = _logits(model(xd))
    assert eager.device.type == dev
    np.testing.assert_allclose(eager.cpu().detach().numpy(), want, rtol=1e-4, atol=1e-5)
    compiled = tp.compiler.compile(model, backend=backend_name)
    out = _logits(compiled(xd))
    assert out.device.type == dev
    np.testing.assert_allclose(out.cpu().detach().numpy(), want, rtol=1e-4, atol=1e-5)
    model.cpu()
    assert all(t.device == tp.device("cpu") for t in model.parameters())
    np.testing.assert_allclose(np.asarray(_logits(model(x))), want, rtol=1e-6, atol=1e-6)


def test_compiled_calls_on_device_tensors_move_nothing(backend_name, dev):
    model, idx = _gpt()
    want = np.asarray(_logits(model(idx)))
    model.to(dev)
    compiled = tp.compiler.compile(model, backend=backend_name)
    compiled(idx)
    # a host input: uploaded for the call; the weights are there; the result stays there
    before = runtime.stats()
    out = _logits(compiled(idx))
    moved = _moved(before)
    assert (moved.uploads, moved.upload_bytes, moved.downloads) == (1, idx.numel() * 8, 0), moved
    assert out.device.type == dev
    before = runtime.stats()
    np.testing.assert_allclose(np.asarray(out), want, rtol=1e-4, atol=1e-5)
    assert _moved(before).download_bytes == out.numel() * 4  # read when the host needs it
    # device in, device out; two chained compiled calls move no bytes through the host
    head = tp.compiler.compile(lambda t: tp.softmax(t, dim=-1), backend=backend_name)
    d = idx.to(dev)
    head(_logits(compiled(d)))
    before = runtime.stats()
    probs = head(_logits(compiled(d)))
    moved = _moved(before)
    assert (moved.uploads, moved.downloads) == (0, 0), moved
    np.testing.assert_allclose(probs.cpu().detach().numpy(), np.asarray(tp.softmax(tp.tensor(want), dim=-1)),
                               rtol=1e-4, atol=1e-6)
    # an in-place update on the device: nothing to upload, the new weight is used
    with tp.no_grad():
        model.lm_head.weight.mul_(0.5)
    before = runtime.stats()
    out = _logits(compiled(d))
    assert _moved(before).uploads == 0
    np.testing.assert_allclose(out.cpu().detach().numpy(), _logits(model(d)).cpu().detach().numpy(), rtol=1e-4, atol=1e-5)


@tp.compiler.disable
def _eager_step(t):
    return t + 1


def test_graph_breaks_keep_tensors_on_the_device(backend_name, dev):
    def f(x):
        y = (x * 2).relu()
        z = _eager_step(y)  # a graph break: runs eagerly, on the device
        return (z @ z.T).sum(dim=0)

    x = tp.randn(6, 8)
    compiled = tp.compiler.compile(f, backend=backend_name)
    d = x.to(dev)
    compiled(d)
    before = runtime.stats()
    out = compiled(d)
    moved = _moved(before)
    # only the Python number of the eager step crosses (a 0-d upload); no result comes back
    assert moved.downloads == 0 and moved.upload_bytes <= 8, moved
    assert out.device.type == dev
    np.testing.assert_allclose(out.cpu().detach().numpy(), f(x).detach().numpy(), rtol=1e-5, atol=1e-5)


def test_compile_without_a_backend_follows_the_tensors_device(backend_name, dev):
    model, x = _mlp()
    want = np.asarray(model(x))
    model.to(dev)
    compiled = tp.compile(model)  # no backend named: the device's backend, as torch.compile does
    out = compiled(x.to(dev))
    assert out.device.type == dev
    np.testing.assert_allclose(out.cpu().detach().numpy(), want, rtol=1e-4, atol=1e-5)
    with pytest.raises(ValueError, match=rf"argument \d+ is on {dev}:0 but the program runs on cpu"):
        tp.compile(model, backend="iree-cpu")(x.to(dev))


def test_moving_the_model_after_compiling_recompiles_for_the_device(backend_name, dev):
    model, x = _mlp()
    want = np.asarray(model(x))
    compiled = tp.compile(model)
    np.testing.assert_allclose(np.asarray(compiled(x)), want, rtol=1e-4, atol=1e-5)
    model.to(dev)  # the guards see the weights' new device: the next call compiles for it
    out = compiled(x.to(dev))
    assert out.device.type == dev
    np.testing.assert_allclose(out.cpu().detach().numpy(), want, rtol=1e-4, atol=1e-5)
    model.cpu()
    out = compiled(x)
    assert out.device == tp.device("cpu")
    np.testing.assert_allclose(np.asarray(out), want, rtol=1e-4, atol=1e-5)


@pytest.mark.iree
@pytest.mark.parametrize("backend", ["iree-cpu", "iree-vulkan"])
def test_programs_never_write_into_their_arguments(backend):
    """IREE 3.13 may run a scatter or an insert_slice in the buffer of a function argument
    (iree-org/iree#16168): such inputs are passed as private copies, so neither a host array
    read in place, nor a cached weight, nor a device tensor passed by reference changes."""
    caps = tp.compiler.get_backend_capabilities(backend)
    if not caps.available:
        pytest.skip(caps.reason)
    # larger than what is copied anyway (program._COPY_BELOW): read in place on the CPU
    base = _aligned((72, 64))
    assert base.nbytes > program._COPY_BELOW
    base[...] = np.arange(base.size).reshape(base.shape) % 97
    original = base.copy()
    rows, cols, vals = tp.tensor([0, 2]), tp.tensor([1, 3]), tp.tensor([10.0, 20.0])

    def accumulate(b, v):
        return tp._dispatch.apply("tp.index_put", b, v, rows.to(b.device), cols.to(b.device), dims=(0, 1),
                                  accumulate=True)

    def overwrite(b, u):
        c = b.clone()
        c[1:3] = u
        return c

    want_acc = original.copy()
    want_acc[0, 1] += 10
    want_acc[2, 3] += 20
    want_over = original.copy()
    want_over[1:3] = 7
    dev = DEVICES.get(backend)
    for place in ([None] if dev is None else [None, dev]):
        b = tp.from_numpy(base) if place is None else tp.from_numpy(base).to(place)
        for fn, other, want in ((accumulate, vals, want_acc), (overwrite, tp.full((2, 64), 7.0), want_over)):
            other = other if place is None else other.to(place)
            compiled = tp.compiler.compile(fn, backend=backend)
            for _ in range(2):
                np.testing.assert_array_equal(np.asarray(compiled(b, other)), want)
                np.testing.assert_array_equal(np.asarray(b), original)
            if place is not None:  # the eager op on the device
                np.testing.assert_array_equal(np.asarray(fn(b, other)), want)
                np.testing.assert_array_equal(b.cpu().detach().numpy(), original)
    np.testing.assert_array_equal(base, original)
