"""Updating a compiled step's state in place (the donate-buffers pass, passes/donation.py):
the program writes the new value of a parameter or an optimizer state into the buffer the old
one was in, ordered after every other read of the old value, and only where no other holder
can see the change."""

from __future__ import annotations

import numpy as np
import pytest

import tensorplay as tp
from tensorplay import runtime
from tensorplay.compiler.backends.iree import TARGETS, get_iree_backend, lowering_pipeline, tp_mlir
from tensorplay.passes import donation, run_pipeline
from tensorplay.dialects.tp.graph import Graph
from tensorplay.dialects.tp.types import TensorType
from tensorplay.runtime.storage import Donated, sole_reference

F = tp.nn.functional
W = (96, 64)  # 24 KiB of float32: above IN_PLACE_MIN_BYTES, so a step updates it in place


def _update_then_read(read_first: bool = False) -> Graph:
    """new_w = w - 0.5 * g, and an independent read of the old w (g @ w^T) placed after the
    update in the program (or before it): the in-place write must wait for that read."""
    g = Graph("update_then_read")
    w = g.add_input(TensorType(W, tp.float32))
    grad = g.add_input(TensorType(W, tp.float32))
    half = g.add_input(TensorType((), tp.float32))

    def read():
        return g.add1("tp.matmul", [grad, g.add1("tp.permute", [w], {"dims": [1, 0]})])

    early = read() if read_first else None
    new = g.add1("tp.sub", [w, g.add1("tp.mul", [grad, half])])
    g.set_outputs([new, early if read_first else read()])
    g.donated = {0: 0}
    return g


def _plan(graph: Graph, backend: str = "iree-cpu") -> donation.Plan:
    """What the donate-buffers pass did to ``graph`` lowered for ``backend``."""
    module = tp_mlir(graph)
    run_pipeline(module, lowering_pipeline(TARGETS[backend]), source_name=graph.name)
    run_pipeline(module, "donate-buffers", source_name=graph.name)
    return donation.take_report(module, graph.name)


@pytest.mark.iree
@pytest.mark.parametrize("backend", ["iree-cpu", "iree-vulkan"])
@pytest.mark.parametrize("read_first", [False, True])
def test_the_write_waits_for_every_read_of_the_old_value(backend, read_first):
    caps = tp.compiler.get_backend_capabilities(backend)
    if not caps.available:
        pytest.skip(caps.reason)
    graph = _update_then_read(read_first)
    plan = _plan(graph, backend)
    assert plan.tied == {0: 0} and plan.joined == 1, plan
    run = get_iree_backend(backend)(graph)
    run.kept_results = frozenset({0})  # (as a compiled step's: the next call passes it back)
    rng = np.random.default_rng(0)
    w = rng.standard_normal(W).astype(np.float32)
    grad = rng.standard_normal(W).astype(np.float32)
    half = np.float32(0.5)
    state = tp.tensor(w)
    if backend == "iree-vulkan":
        state = state.to("vulkan")
    data = state._data
    for _ in range(3):
        arg = Donated(data)
        new, read = run(arg, tp.tensor(grad).to(state.device)._data, np.asarray(half))
        np.testing.assert_allclose(np.asarray(read), grad @ w.T, rtol=1e-4, atol=1e-4)
        w = w - half * grad
        np.testing.assert_allclose(np.asarray(new), w, rtol=1e-5, atol=1e-5)
        data = new


@pytest.mark.iree
def test_updates_that_read_the_old_value_otherwise_are_not_done_in_place():
    g = Graph("transposed_update")
    w = g.add_input(TensorType((96, 96), tp.float32))
    keep = g.add_input(TensorType((96, 96), tp.float32))
    # the new value reads w transposed: one kernel writing w would read elements it overwrote
    g.set_outputs([g.add1("tp.add", [w, g.add1("tp.permute", [w], {"dims": [1, 0]})]), keep,
                   g.add1("tp.exp", [keep])])
    g.donated = {0: 0, 1: 1}
    plan = _plan(g)
    assert 0 in plan.untied and "element for element" in plan.untied[0]
    assert 1 in plan.untied and plan.untied[1] == "the new value is an input"
    run = get_iree_backend("iree-cpu")(g)
    a = (np.arange(96 * 96, dtype=np.float32) / 1000).reshape(96, 96)
    out = run(Donated(a.copy()), a)
    np.testing.assert_array_equal(out[0], a + a.T)
    np.testing.assert_allclose(out[2], np.exp(a), rtol=1e-6)


def test_only_a_sole_holder_gives_a_buffer_up():
    a = np.zeros(W, np.float32)
    assert sole_reference(a, 1)
    view = a[1:]
    assert not sole_reference(a, 1)
    del view
    other = a
    assert not sole_reference(a, 1)
    del other
    runtime.storage.mark_shared(a)
    assert not sole_reference(a, 1)


def _mlp_step(dev: str | None = None):
    tp.manual_seed(5)
    net = tp.nn.Sequential(tp.nn.Linear(64, 96), tp.nn.LayerNorm(96), tp.nn.GELU(), tp.nn.Linear(96, 64),
                           tp.nn.GELU(), tp.nn.Linear(64, 4))
    if dev is not None:
        net = net.to(dev)
    opt = tp.optim.AdamW(net.parameters(), lr=1e-2)

    def step(x, y):
        loss = F.cross_entropy(net(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    return net, opt, step


def _batches(n, dev=None):
    rng = np.random.default_rng(7)
    out = []
    for _ in range(n):
        x, y = tp.tensor(rng.standard_normal((40, 64)).astype(np.float32)), tp.tensor(rng.integers(0, 4, 40))
        out.append((x, y) if dev is None else (x.to(dev), y.to(dev)))
    return out


@pytest.mark.iree
def test_a_compiled_step_updates_its_large_state_in_the_same_buffers(monkeypatch):
    net, opt, step = _mlp_step()
    eager_net, _, eager_step = _mlp_step()
    compiled = tp.compiler.compile(step, backend="iree-cpu")
    batches = _batches(6)
    where = []
    for x, y in batches:
        np.testing.assert_allclose(compiled(x, y).item(), eager_step(x, y).item(), rtol=1e-5)
        big = [p for p in net.parameters() if p.numel() * 4 > runtime.storage.IN_PLACE_MIN_BYTES]
        big += [t for p in big for t in opt.state[p].values() if t.numel() > 1]
        where.append([t._data.ctypes.data for t in big])
    assert len(where[0]) == 6  # two weights, each with its two moments
    # the first call writes into copies of the state (its arrays were tensorplay's own); every
    # later one writes into the buffers the call before returned
    assert where[1] == where[2] == where[5], where
    (entry,) = compiled._group.order
    assert len(entry.donated) == 6
    # the same values as a program writing new buffers, bit for bit
    monkeypatch.setattr(tp.compiler.specialize, "_donations", lambda graph, trace: {})
    fresh_net, _, fresh_step = _mlp_step()
    fresh = tp.compiler.compile(fresh_step, backend="iree-cpu")
    for x, y in batches:
        fresh(x, y)
    assert not fresh._group.order[0].donated
    for p, q, r in zip(net.parameters(), fresh_net.parameters(), eager_net.parameters()):
        np.testing.assert_array_equal(p.detach().numpy(), q.detach().numpy())
        # (AdamW at lr 1e-2 moves an element whose gradient is rounding noise by up to lr)
        np.testing.assert_allclose(p.detach().numpy(), r.detach().numpy(), rtol=1e-4, atol=1e-5)


@pytest.mark.iree
@pytest.mark.parametrize("dev", [None, "vulkan"])
def test_state_someone_else_holds_is_never_changed_behind_their_back(dev):
    if dev is not None:
        caps = tp.compiler.get_backend_capabilities("iree-vulkan")
        if not caps.available:
            pytest.skip(caps.reason)
    net, opt, step = _mlp_step(dev)
    eager_net, _, eager_step = _mlp_step()  # (eager on the host: the same values, sooner)
    compiled = tp.compiler.compile(step)
    batches = list(zip(_batches(5, dev), _batches(5)))
    for (x, y), (hx, hy) in batches[:2]:
        compiled(x, y), eager_step(hx, hy)
    # a detached tensor sharing the weight's storage, an array handed out by .numpy() (shared
    # on the host, a copy from a device) and a copy: the compiled updates are written into the
    # weight's memory as PyTorch's in-place updates are, never into an array given up for it
    weight = net[3].weight
    held = weight.detach()
    snapshot = held.cpu().numpy().copy()
    moment = opt.state[weight]["exp_avg"]
    handed = moment.cpu().numpy() if dev is not None else moment.numpy()
    handed_copy = np.array(handed)
    copied = moment.clone()
    for (x, y), (hx, hy) in batches[2:]:
        np.testing.assert_allclose(compiled(x, y).item(), eager_step(hx, hy).item(), rtol=1e-5)
    np.testing.assert_array_equal(held.cpu().numpy(), weight.detach().cpu().numpy())
    assert not np.array_equal(weight.detach().cpu().numpy(), snapshot)
    if dev is None:
        np.testing.assert_array_equal(handed, moment.numpy())
    else:
        np.testing.assert_array_equal(handed, handed_copy)
    assert not np.array_equal(handed_copy, moment.cpu().numpy())
    np.testing.assert_array_equal(copied.cpu().numpy(), handed_copy)
    for p, q in zip(net.parameters(), eager_net.parameters()):  # (AdamW: see above)
        np.testing.assert_allclose(p.detach().cpu().numpy(), q.detach().cpu().numpy(), rtol=1e-4, atol=1e-5)


@pytest.mark.iree
@pytest.mark.parametrize("backend", ["iree-cpu", "iree-vulkan"])
def test_a_step_with_run_time_sizes_updates_in_place_after_reads_of_those_sizes(backend, caplog):
    # the reads the updates wait for have sizes known only at run time (the batch): the
    # update depends on the sum of at most one of their elements
    caps = tp.compiler.get_backend_capabilities(backend)
    if not caps.available:
        pytest.skip(caps.reason)
    dev = None if backend == "iree-cpu" else "vulkan"
    net, _, step = _mlp_step(dev)
    eager_net, _, eager_step = _mlp_step()  # (eager on the host: the same values, sooner)
    compiled = tp.compiler.compile(step, backend=backend, dynamic=True)
    rng = np.random.default_rng(9)
    with caplog.at_level("INFO", logger="tensorplay.compiler.perf"):
        for n in (40, 24, 40, 17):
            x = tp.tensor(rng.standard_normal((n, 64)).astype(np.float32))
            y = tp.tensor(rng.integers(0, 4, n))
            want = eager_step(x, y).item()
            if dev is not None:
                x, y = x.to(dev), y.to(dev)
            np.testing.assert_allclose(compiled(x, y).item(), want, rtol=1e-5)
    assert compiled.compile_count == 1
    assert any("updates 6 of 6 inputs in place (after" in r.getMessage() for r in caplog.records), \
        [r.getMessage() for r in caplog.records]
    for p, q in zip(net.parameters(), eager_net.parameters()):  # (AdamW: see above)
        np.testing.assert_allclose(p.detach().cpu().numpy(), q.detach().cpu().numpy(), rtol=1e-4, atol=1e-5)


@pytest.mark.iree
def test_an_optimizer_step_alone_updates_in_place_with_nothing_to_wait_for(caplog):
    net, opt, _ = _mlp_step()
    eager_net, eager_opt, _ = _mlp_step()
    compiled = tp.compiler.compile(opt.step, backend="iree-cpu")
    rng = np.random.default_rng(3)
    with caplog.at_level("INFO", logger="tensorplay.compiler.perf"):
        for _ in range(3):
            for model in (net, eager_net):
                for p in model.parameters():
                    p.grad = tp.tensor(rng.standard_normal(tuple(p.shape)).astype(np.float32))
            # (the same gradients for both)
            for p, q in zip(net.parameters(), eager_net.parameters()):
                q.grad = tp.tensor(p.grad.numpy().copy())
            compiled()
            eager_opt.step()
    assert any("updates 6 of 6 inputs in place" in r.getMessage() and "after" not in r.getMessage()
               for r in caplog.records), [r.getMessage() for r in caplog.records]
    for p, q in zip(net.parameters(), eager_net.parameters()):
        np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.iree
def test_state_a_slice_update_writes_stays_a_private_copy(caplog):
    # IREE 3.13 may run a slice update in its destination argument's buffer (iree-org/iree#16168),
    # wherever the program's other reads of it are: such state is never given up
    w, v = tp.zeros(64, 128), tp.zeros(64, 128)  # 32 KiB each

    def step(u):
        w[1:3] = w[1:3] + u
        v.add_(u.sum())
        return w.sum() + v.sum()

    compiled = tp.compiler.compile(step, backend="iree-cpu")
    u = tp.ones(2, 128)
    with caplog.at_level("INFO", logger="tensorplay.compiler.perf"):
        got = [compiled(u).item() for _ in range(3)]
    assert got == [256 + 256 * 8192, 2 * (256 + 256 * 8192), 3 * (256 + 256 * 8192)]
    assert w.sum().item() == 768 and v.sum().item() == 3 * 256 * 8192
    assert any("updates 1 of 1 inputs in place" in r.getMessage() for r in caplog.records)
    (entry,) = compiled._group.order
    assert len(entry.donated) == 1


@pytest.mark.iree
def test_a_read_whose_result_cannot_be_waited_for_keeps_the_update_out_of_place():
    # the ordering reads an element of each other read's result; a read giving only a complex
    # tensor offers none, so the update is not tied (never tied without its ordering)
    from tensorplay.dialects import ir as I

    text = """
    #id = affine_map<(d0) -> (d0)>
    module {
      func.func @f(%w: tensor<8192xf32>, %g: tensor<8192xf32>) -> (tensor<8192xf32>, tensor<8192xcomplex<f32>>)
          attributes {tp.donated = array<i64: 0, 0>} {
        %e = tensor.empty() : tensor<8192xf32>
        %gs = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
            ins(%g : tensor<8192xf32>) outs(%e : tensor<8192xf32>) {
        ^bb0(%a: f32, %o: f32):
          %x = math.exp %a : f32
          linalg.yield %x : f32
        } -> tensor<8192xf32>
        %new = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel"]}
            ins(%w, %gs : tensor<8192xf32>, tensor<8192xf32>) outs(%e : tensor<8192xf32>) {
        ^bb0(%a: f32, %b: f32, %o: f32):
          %s = arith.subf %a, %b : f32
          linalg.yield %s : f32
        } -> tensor<8192xf32>
        %ec = tensor.empty() : tensor<8192xcomplex<f32>>
        %c = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
            ins(%w : tensor<8192xf32>) outs(%ec : tensor<8192xcomplex<f32>>) {
        ^bb0(%a: f32, %o: complex<f32>):
          %z = complex.create %a, %a : complex<f32>
          linalg.yield %z : complex<f32>
        } -> tensor<8192xcomplex<f32>>
        return %new, %c : tensor<8192xf32>, tensor<8192xcomplex<f32>>
      }
    }"""
    with I.context() as ctx:
        module = I.ir.Module.parse(text, ctx)
        plan, wrapper = donation.apply(module, "f")
    assert plan.tied == {} and wrapper == ""
    assert "no int or float tensor result (linalg.generic)" in plan.untied[0]
