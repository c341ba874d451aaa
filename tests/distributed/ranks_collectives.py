"""Every collective and dtype on the ranks of a job, against numpy (run by tests/test_distributed.py
through ``python -m tensorplay.distributed.run``; each rank prints ``collectives ok``)."""

import numpy as np

import tensorplay as tp
import tensorplay.distributed as dist
from tensorplay.distributed import ReduceOp

dist.init_process_group(timeout=60)
r, n = dist.get_rank(), dist.get_world_size()
assert dist.is_initialized() and dist.get_backend() == "mpi"
assert 0 <= dist.get_local_rank() < n

DTYPES = [tp.float32, tp.float64, tp.float16, tp.bfloat16, tp.int8, tp.uint8, tp.int16, tp.int32, tp.int64,
          tp.bool]


def rank_values(rank, dtype, shape=(2, 3)):
    """What rank ``rank`` contributes: small values every dtype holds exactly."""
    base = (np.arange(int(np.prod(shape))).reshape(shape) % 3 + rank + 1)
    if dtype is tp.bool:
        return (base + rank) % 2 == 0
    return base.astype(np.float64 if dtype.is_floating_point else np.int64)


def host(t):
    return np.asarray(t.to(tp.float64).numpy() if t.dtype is not tp.bool else t.numpy())


def expect(t, want, what):
    got = host(t)
    want = np.asarray(want, dtype=got.dtype)
    assert got.shape == want.shape, (what, got.shape, want.shape)
    # every value is an exact small integer in each dtype; AVG's division is exact in float
    # (world sizes 2 and 3 give .5 and thirds: float16/bfloat16 round thirds, so compare those
    # to the dtype's own rounding of the float64 result)
    assert np.array_equal(got, want), (what, got, want)


everyone = [rank_values(k, tp.float32) for k in range(n)]
for dtype in DTYPES:
    vals = [rank_values(k, dtype) for k in range(n)]
    stack = np.stack(vals)
    ops = {ReduceOp.SUM: stack.sum(0), ReduceOp.MAX: stack.max(0), ReduceOp.MIN: stack.min(0),
           ReduceOp.PRODUCT: stack.prod(0)}
    if dtype is tp.bool:
        ops = {ReduceOp.SUM: stack.any(0), ReduceOp.MAX: stack.any(0), ReduceOp.MIN: stack.all(0),
               ReduceOp.PRODUCT: stack.all(0)}
    if dtype.is_floating_point:
        ops[ReduceOp.AVG] = tp.tensor(stack.mean(0), dtype=dtype).to(tp.float64).numpy()
    for op, want in ops.items():
        t = tp.tensor(vals[r], dtype=dtype)
        dist.all_reduce(t, op=op)
        expect(t, want, f"all_reduce {op} {dtype}")
        t = tp.tensor(vals[r], dtype=dtype)
        dist.reduce(t, dst=n - 1, op=op)
        expect(t, want if r == n - 1 else vals[r], f"reduce {op} {dtype}")
    # data movement: broadcast, all_gather, all_gather_into_tensor, gather, scatter
    t = tp.tensor(vals[r], dtype=dtype)
    dist.broadcast(t, src=n - 1)
    expect(t, vals[n - 1], f"broadcast {dtype}")
    outs = [tp.zeros(2, 3, dtype=dtype) for _ in range(n)]
    dist.all_gather(outs, tp.tensor(vals[r], dtype=dtype))
    for k in range(n):
        expect(outs[k], vals[k], f"all_gather {dtype}")
    out = tp.zeros(2 * n, 3, dtype=dtype)
    dist.all_gather_into_tensor(out, tp.tensor(vals[r], dtype=dtype))
    expect(out, np.concatenate(vals), f"all_gather_into_tensor {dtype}")
    stacked = tp.zeros(n, 2, 3, dtype=dtype)
    dist.all_gather_into_tensor(stacked, tp.tensor(vals[r], dtype=dtype))
    expect(stacked, stack, f"all_gather_into_tensor stacked {dtype}")
    got = [tp.zeros(2, 3, dtype=dtype) for _ in range(n)] if r == 0 else None
    dist.gather(tp.tensor(vals[r], dtype=dtype), got, dst=0)
    if r == 0:
        for k in range(n):
            expect(got[k], vals[k], f"gather {dtype}")
    t = tp.zeros(2, 3, dtype=dtype)
    dist.scatter(t, [tp.tensor(v, dtype=dtype) for v in vals] if r == 1 else None, src=1)
    expect(t, vals[r], f"scatter {dtype}")
    if dtype is not tp.bool:
        big = np.concatenate([rank_values(k + 10 * r, dtype) for k in range(n)])  # rank r's input
        inputs = [np.concatenate([rank_values(k + 10 * q, dtype) for k in range(n)]) for q in range(n)]
        out = tp.zeros(2, 3, dtype=dtype)
        dist.reduce_scatter_tensor(out, tp.tensor(big, dtype=dtype))
        expect(out, sum(inputs)[2 * r:2 * r + 2], f"reduce_scatter_tensor {dtype}")
        out = tp.zeros(2, 3, dtype=dtype)
        dist.reduce_scatter(out, [tp.tensor(b, dtype=dtype) for b in np.split(big, n)], op=ReduceOp.MAX)
        expect(out, np.max(inputs, axis=0)[2 * r:2 * r + 2], f"reduce_scatter {dtype}")

# all_to_all_single: equal blocks, then uneven splits (rank r sends j+1 rows to rank j, each row
# holding (sender, receiver, k)); all_to_all with tensors of different sizes
for dtype in (tp.float32, tp.int64, tp.bfloat16):
    inp = tp.tensor(np.array([[r * 10 + j] * 2 for j in range(n) for _ in range(2)]), dtype=dtype)
    out = tp.zeros(2 * n, 2, dtype=dtype)
    dist.all_to_all_single(out, inp)
    expect(out, np.array([[j * 10 + r] * 2 for j in range(n) for _ in range(2)]), f"all_to_all_single {dtype}")
rows = [[r, j, k] for j in range(n) for k in range(j + 1)]
out = tp.zeros(n * (r + 1), 3, dtype=tp.int64)
dist.all_to_all_single(out, tp.tensor(rows), output_split_sizes=[r + 1] * n, input_split_sizes=list(range(1, n + 1)))
expect(out, [[j, r, k] for j in range(n) for k in range(r + 1)], "all_to_all_single with split sizes")
outs = [tp.zeros(r + 1, dtype=tp.float64) for _ in range(n)]
dist.all_to_all(outs, [tp.full((j + 1,), float(10 * r + j), dtype=tp.float64) for j in range(n)])
for j in range(n):
    expect(outs[j], np.full(r + 1, 10 * j + r), "all_to_all")

# in place through views: the base sees a column reduced, a non-contiguous view is staged
base = tp.zeros(4, 3)
col = base[:, 1]
col.fill_(float(r + 1))
v0 = base._version
dist.all_reduce(col)
expect(base[:, 1], np.full(4, n * (n + 1) / 2), "all_reduce of a column view")
assert base._version > v0, "the in-place collective moves the version counter"
flat = tp.zeros(6)
alias = flat.view(2, 3)
dist.broadcast(alias if r == 0 else alias, src=0)
row = tp.arange(6, dtype=tp.float32).view(2, 3)[1]  # contiguous view: reduced in the base's memory
dist.all_reduce(row)
expect(row, np.array([3, 4, 5]) * n, "all_reduce of a contiguous row view")

# async handles: several in flight, waited out of order
works, tensors = [], []
for k in range(4):
    t = tp.full((1000,), float(r + k))
    tensors.append(t)
    works.append(dist.all_reduce(t, async_op=True))
for k in reversed(range(4)):
    assert works[k].wait() is True
    assert works[k].is_completed()
    expect(tensors[k], np.full(1000, sum(q + k for q in range(n))), "async all_reduce")
w = dist.barrier(async_op=True)
w.wait()

# point-to-point around a ring, blocking and async, and recv from any source
nxt, prv = (r + 1) % n, (r - 1) % n
got = tp.zeros(5, dtype=tp.int64)
if r % 2 == 0:
    dist.send(tp.arange(5) + r, dst=nxt)
    sender = dist.recv(got, src=prv)
else:
    sender = dist.recv(got, src=prv)
    dist.send(tp.arange(5) + r, dst=nxt)
assert sender == prv
expect(got, np.arange(5) + prv, "send/recv")
req = dist.irecv(got)
dist.isend(tp.arange(5) * 10 + r, dst=nxt).wait()
req.wait()
assert req.result() == prv
expect(got, np.arange(5) * 10 + prv, "isend/irecv")

# groups: the first two ranks; the others are not members and the calls do nothing for them
g = dist.new_group([0, 1])
t = tp.tensor([float(r + 1)])
result = dist.all_reduce(t, group=g)
if r < 2:
    expect(t, [3.0], "all_reduce in a group")
    assert dist.get_rank(g) == r and dist.get_world_size(g) == 2
    dist.broadcast(t, src=1, group=g)
else:
    assert result is None and dist.get_rank(g) == -1
    expect(t, [float(r + 1)], "non-member keeps its tensor")

# objects
objs = [None] * n
dist.all_gather_object(objs, {"rank": r, "name": f"r{r}"})
assert [o["rank"] for o in objs] == list(range(n))
lst = [r, "x"] if r == 0 else [None, None]
dist.broadcast_object_list(lst, src=0)
assert lst == [0, "x"]

# mismatched calls are an error on every rank, not a hang
try:
    dist.all_reduce(tp.zeros(3 + r))
except ValueError as exc:
    assert "the ranks' calls differ" in str(exc) and "all_reduce(3 x float32" in str(exc), str(exc)
else:
    raise AssertionError("mismatched sizes were not detected")
try:
    if r == 0:
        dist.broadcast(tp.zeros(2), src=0)
    else:
        dist.all_reduce(tp.zeros(2))
except ValueError as exc:
    assert "broadcast" in str(exc) and "all_reduce" in str(exc), str(exc)
else:
    raise AssertionError("different collectives were not detected")
try:
    dist.all_reduce(tp.zeros(2, dtype=tp.int32), op=ReduceOp.AVG)
except TypeError as exc:
    assert "ReduceOp.AVG needs a floating-point" in str(exc)
else:
    raise AssertionError("AVG of integers was accepted")

dist.barrier()
print("collectives ok")
dist.destroy_process_group()
assert not dist.is_initialized()
