"""A small PyTorch training script: an MLP trained on fixed data with SGD or Adam and a StepLR
schedule, printing one loss per step. tests/test_run.py runs it with PyTorch (``python``) and
with ``python -m tensorplay.run`` and compares the losses."""

import argparse
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim.lr_scheduler
from torch import optim


class MLP(nn.Module):
    def __init__(self, n_in, n_hidden, n_out):
        super().__init__()
        self.fc1 = nn.Linear(n_in, n_hidden)
        self.fc2 = nn.Linear(n_hidden, n_hidden)
        self.head = nn.Linear(n_hidden, n_out)

    def forward(self, x):
        x = F.relu(self.fc1(x))
        x = torch.tanh(self.fc2(x))
        return self.head(x)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--optim", choices=("sgd", "adam"), default="sgd")
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--loader", action="store_true", help="batches from torch.utils.data.DataLoader")
    args = parser.parse_args()
    print("argv", sys.argv[1:])

    torch.manual_seed(0)
    torch.backends.cudnn.benchmark = True
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    print("device", device.type)

    rng = np.random.default_rng(0)
    x = torch.tensor(rng.standard_normal((32, 8)), dtype=torch.float32)
    y = torch.tensor(rng.integers(0, 3, 32))
    model = MLP(8, 16, 3)
    with torch.no_grad():  # the same weights in every run
        for p in model.parameters():
            p.copy_(torch.tensor(rng.standard_normal(tuple(p.shape)) * 0.4, dtype=torch.float32))
    model = model.to(device)
    criterion = nn.CrossEntropyLoss()
    if args.optim == "sgd":
        opt = optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    else:
        opt = optim.Adam(model.parameters(), lr=0.01)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    if args.loader:
        from torch.utils.data import DataLoader, TensorDataset

        batches = list(DataLoader(TensorDataset(x, y), batch_size=16, shuffle=False))
    else:
        batches = [(x[:16], y[:16]), (x[16:], y[16:])]

    model.train()
    for step in range(args.steps):
        xb, yb = batches[step % len(batches)]
        xb, yb = xb.to(device), yb.to(device)
        opt.zero_grad()
        loss = criterion(model(xb), yb)
        loss.backward()
        opt.step()
        sched.step()
        print(f"step {step} loss {loss.item():.9g} lr {sched.get_last_lr()[0]:.6g}")

    model.eval()
    with torch.no_grad():
        accuracy = (model(x).argmax(dim=1) == y).float().mean().item()
    print(f"accuracy {accuracy:.6g}")


if __name__ == "__main__":
    main()
