"""A PyTorch DDP training script as users write it (torchrun style), run unchanged by
tests/test_distributed.py through ``python -m tensorplay.distributed.run -m tensorplay.run``."""

import os

import numpy as np
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

dist.init_process_group(backend="gloo")
rank = int(os.environ["RANK"])
g = np.random.default_rng(0)
ds = TensorDataset(torch.tensor(g.standard_normal((64, 10)), dtype=torch.float32),
                   torch.tensor(g.standard_normal((64, 1)), dtype=torch.float32))
loader = DataLoader(ds, batch_size=8, sampler=DistributedSampler(ds, shuffle=False))
lin = torch.nn.Linear(10, 1)
with torch.no_grad():
    lin.weight.copy_(torch.tensor(np.linspace(-1, 1, 10)[None], dtype=torch.float32))
    lin.bias.fill_(0.1)
model = DDP(lin)
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.5)
for epoch in range(2):
    loader.sampler.set_epoch(epoch)
    for x, y in loader:
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
    t = loss.detach().clone()
    dist.all_reduce(t, op=dist.ReduceOp.AVG)
    if rank == 0:
        print(f"epoch {epoch} loss {t.item():.9g}")
if rank == 0:
    print("weight", " ".join(f"{v:.9g}" for v in model.module.weight.detach().numpy().ravel()))
dist.destroy_process_group()
