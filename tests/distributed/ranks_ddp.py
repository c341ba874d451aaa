"""DistributedDataParallel against one process trained on the whole batches (run by
tests/test_distributed.py on 2 and 3 ranks; each rank prints ``ddp ok``).

Each rank takes a contiguous part of every global batch (np.array_split sizes: with 3 ranks and
a batch of 10, 4/3/3). Its loss is its samples' summed loss times world_size / global_batch, so
the average DDP takes over the ranks is the whole batch's mean loss, whatever the split."""

import sys

import numpy as np

import tensorplay as tp
import tensorplay.distributed as dist
from tensorplay.compiler.errors import GraphCaptureError
from tensorplay.nn.parallel import DistributedDataParallel as DDP

dist.init_process_group(timeout=120)
r, n = dist.get_rank(), dist.get_world_size()
F = tp.nn.functional
GLOBAL = 10
STEPS = 4
rng = np.random.default_rng(0)
X = rng.standard_normal((STEPS + 3, GLOBAL, 6)).astype(np.float32)
Y = rng.integers(0, 3, (STEPS + 3, GLOBAL))
bounds = np.cumsum([0] + [len(a) for a in np.array_split(np.arange(GLOBAL), n)])
lo, hi = bounds[r], bounds[r + 1]


class Net(tp.nn.Module):
    def __init__(self, spare=False):
        super().__init__()
        self.a = tp.nn.Linear(6, 32)
        self.b = tp.nn.Linear(32, 32)
        self.head = tp.nn.Linear(32, 3)
        if spare:
            self.spare = tp.nn.Linear(32, 3)  # used by some ranks only (find_unused_parameters)

    def forward(self, x, use_spare=False):
        h = tp.tanh(self.b(tp.relu(self.a(x))))
        out = self.head(h)
        return out + self.spare(h) if use_spare else out


def fresh(spare=False):
    tp.manual_seed(100 + r)  # each rank starts from other weights: DDP copies rank 0's
    return Net(spare)


def local_loss(model, x, y, **kw):
    return F.cross_entropy(model(x[lo:hi], **kw), y[lo:hi], reduction="sum") * (n / GLOBAL)


def close(a, b, what):
    # float32: the ranks' partial sums are added in another order than one process adds the
    # whole batch; AdamW's 1/sqrt(v) scaling turns those last-bit differences into ~1e-7
    # relative changes of the weights over the steps (measured max 4e-7 absolute)
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=2e-6, err_msg=what)


def check(name, make_opt, mode="eager", bucket_cap_mb=None):
    model = fresh()
    ddp = DDP(model, bucket_cap_mb=bucket_cap_mb)
    for p in model.parameters():  # rank 0's weights everywhere now
        mine = p.detach().clone()
        dist.broadcast(mine, src=0)
        close(p.detach().numpy(), mine.numpy(), f"{name}: initial weights")
    ref = Net()
    ref.load_state_dict({k: v.clone() for k, v in model.state_dict().items()})
    opt, ropt = make_opt(ddp.parameters()), make_opt(ref.parameters())
    fwd = tp.compile(ddp) if mode == "compile" else ddp

    def step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(fwd(x[lo:hi]), y[lo:hi], reduction="sum") * (n / GLOBAL)
        loss.backward()
        opt.step()
        return loss

    run = tp.compile(step) if mode == "step" else step
    for i in range(STEPS):
        x, y = tp.tensor(X[i]), tp.tensor(Y[i])
        loss = run(x, y).detach()
        dist.all_reduce(loss, op=dist.ReduceOp.AVG)  # the whole batch's mean loss
        ropt.zero_grad()
        rl = F.cross_entropy(ref(x), y)
        rl.backward()
        ropt.step()
        close(loss.numpy(), rl.detach().numpy(), f"{name}: loss of step {i}")
    for (k, a), b in zip(model.state_dict().items(), ref.state_dict().values()):
        close(a.numpy(), b.numpy(), f"{name}: {k} after {STEPS} steps")
    return ddp


sgd = lambda ps: tp.optim.SGD(ps, lr=0.1, momentum=0.9)  # noqa: E731
adamw = lambda ps: tp.optim.AdamW(ps, lr=0.01, weight_decay=0.1)  # noqa: E731
ddp = check("SGD eager, buckets of 4 KiB", sgd, bucket_cap_mb=4 / 1024)
assert len(ddp._buckets) > 2, [len(b.params) for b in ddp._buckets]
check("AdamW eager", adamw)
check("SGD, tp.compile(ddp_model)", sgd, mode="compile")
check("AdamW, a compiled training step", adamw, mode="step")

# no_sync: two local backward passes, then a synchronized one, equal one step on the gradients
# summed over the three global batches
model = fresh()
ddp = DDP(model)
ref = Net()
ref.load_state_dict({k: v.clone() for k, v in model.state_dict().items()})
with ddp.no_sync():
    for i in range(2):
        local_loss(ddp, tp.tensor(X[i]), tp.tensor(Y[i])).backward()
local_grads = [p.grad.clone() for p in model.parameters() if p.grad is not None]
local_loss(ddp, tp.tensor(X[2]), tp.tensor(Y[2])).backward()
for i in range(3):
    F.cross_entropy(ref(tp.tensor(X[i])), tp.tensor(Y[i])).backward()
for (k, p), q in zip(model.named_parameters(), ref.parameters()):
    if q.grad is None:
        assert p.grad is None, k
        continue
    close(p.grad.numpy(), q.grad.numpy(), f"no_sync: gradient of {k}")
if n > 1:  # the local passes did not communicate: rank r held only its own part then
    summed = [g.clone() for g in local_grads]
    for g in summed:
        dist.all_reduce(g)
    assert any(not np.allclose(a.numpy() * n, b.numpy()) for a, b in zip(local_grads, summed))

# find_unused_parameters: only rank 0 uses `spare`; its gradient is the average all the same
model = fresh(spare=True)
ddp = DDP(model, find_unused_parameters=True)
ref = Net(spare=True)
ref.load_state_dict({k: v.clone() for k, v in model.state_dict().items()})
x, y = tp.tensor(X[0]), tp.tensor(Y[0])
local_loss(ddp, x, y, use_spare=(r == 0)).backward()
lo0, hi0 = bounds[0], bounds[1]
parts = [F.cross_entropy(ref(x[bounds[k]:bounds[k + 1]], use_spare=(k == 0)), y[bounds[k]:bounds[k + 1]],
                         reduction="sum") for k in range(n)]
(sum(parts) / GLOBAL).backward()
for (k, p), q in zip(model.named_parameters(), ref.parameters()):
    close(p.grad.numpy(), q.grad.numpy(), f"find_unused_parameters: gradient of {k}")

# without it, a parameter with no gradient is a clear error (on the rank that lacks it)
model = fresh(spare=True)
ddp = DDP(model)
try:
    local_loss(ddp, x, y).backward()
except RuntimeError as exc:
    assert "find_unused_parameters=True" in str(exc) and "spare.weight" in str(exc), str(exc)
else:
    raise AssertionError("a parameter without gradient went unnoticed")

# a backward that fails half-way (after some gradient hooks ran) leaves no stale state behind:
# the next backward is averaged as usual
model = fresh()
ddp = DDP(model)
ref = Net()
ref.load_state_dict({k: v.clone() for k, v in model.state_dict().items()})
x, y = tp.tensor(X[1]), tp.tensor(Y[1])
h = model.a(x[lo:hi])


def boom(g):
    raise ArithmeticError("a hook fails")


h.register_hook(boom)
try:
    (model.head(tp.tanh(model.b(tp.relu(h)))).sum()).backward()
except ArithmeticError:
    pass
else:
    raise AssertionError("the failing hook did not run")
model.zero_grad()
local_loss(ddp, x, y).backward()
F.cross_entropy(ref(x), y).backward()
for (k, p), q in zip(model.named_parameters(), ref.parameters()):
    close(p.grad.numpy(), q.grad.numpy(), f"after a failed backward: gradient of {k}")

# fullgraph=True: the hooks cannot run inside one program; the error says so
model = fresh()
ddp = DDP(model)


@tp.compile(fullgraph=True)
def whole(x, y):
    loss = F.cross_entropy(ddp(x), y)
    loss.backward()
    return loss


try:
    whole(tp.tensor(X[0]), tp.tensor(Y[0]))
except GraphCaptureError as exc:
    assert "gradient hooks" in str(exc), str(exc)
else:
    raise AssertionError("fullgraph=True compiled a backward that skips DDP's all-reduce")

# every rank must build the same model
try:
    DDP(tp.nn.Linear(4, 4 + (r == n - 1)))
except RuntimeError as exc:
    assert "the ranks' models differ" in str(exc), str(exc)
else:
    raise AssertionError("different models were accepted")

dist.barrier()
print("ddp ok")
sys.stdout.flush()
dist.destroy_process_group()
