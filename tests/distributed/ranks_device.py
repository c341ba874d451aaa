"""Collectives and DDP on device tensors (``sys.argv[1]``: a tensorplay device such as vulkan),
staged through host memory (run by tests/test_distributed.py; each rank prints ``device ok``)."""

import sys

import numpy as np

import tensorplay as tp
import tensorplay.distributed as dist
from tensorplay.nn.parallel import DistributedDataParallel as DDP

device = sys.argv[1]
dist.init_process_group(timeout=120)
r, n = dist.get_rank(), dist.get_world_size()
t = tp.arange(6, dtype=tp.float32, device=device) * (r + 1)
dist.all_reduce(t)
assert t.device.type == device
np.testing.assert_array_equal(t.cpu().numpy(), np.arange(6) * n * (n + 1) / 2)
out = tp.zeros(n, 3, device=device)
dist.all_gather_into_tensor(out, tp.full((3,), float(r), device=device))
np.testing.assert_array_equal(out.cpu().numpy(), np.repeat(np.arange(n), 3).reshape(n, 3))

tp.manual_seed(r)
model = tp.nn.Linear(3, 2)
ref = tp.nn.Linear(3, 2)
ddp = DDP(model.to(device))
ref.load_state_dict({k: v.cpu() for k, v in model.state_dict().items()})
x = tp.tensor(np.arange(3 * n * 2, dtype=np.float32).reshape(2 * n, 3) / 10)
ddp(x[2 * r:2 * r + 2].to(device)).square().mean().backward()
ref(x).square().mean().backward()
assert model.weight.grad.device.type == device
# float32 on the device: the same products summed in another order (measured 0 or 1 ulp)
np.testing.assert_allclose(model.weight.grad.cpu().numpy(), ref.weight.grad.numpy(), rtol=1e-6, atol=1e-7)
np.testing.assert_allclose(model.bias.grad.cpu().numpy(), ref.bias.grad.numpy(), rtol=1e-6, atol=1e-7)
print("device ok")
dist.destroy_process_group()
