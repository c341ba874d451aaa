"""Train a small nanoGPT-style model on characters, eagerly, with tensorplay alone.

    python -m tensorplay.examples.train_gpt [--steps 300] [--checkpoint gpt.tpckpt] [--resume]
    python -m tensorplay.distributed.run --nproc-per-node 2 -m tensorplay.examples.train_gpt --ddp

The corpus is generated (a seeded grammar of short sentences, so nothing is downloaded and a
model of this size can learn it); each step prints its loss, the end prints a sampled
continuation, and the model and optimizer are saved with ``tp.save`` (resume with
``--resume``). docs/training.md walks through it.

With ``--ddp`` every rank builds the same model, wraps it in ``DistributedDataParallel`` and
trains on its contiguous part of each global batch of ``--batch`` rows: with W ranks, the first
``batch % W`` ranks take ``batch // W + 1`` rows and the others ``batch // W`` (the sizes of
``tensor_split``). Each rank's mean loss is scaled by ``rows * W / batch`` (its summed loss
times ``W / batch``, per token), so the gradient DDP averages over the ranks is the gradient of
the whole batch's mean loss and the run follows the single-process one on the same batches.
Only rank 0 prints (each printed loss is the ranks' scaled losses averaged with ``all_reduce``,
the whole batch's mean), samples and saves the checkpoint (``model.module``'s state).
"""

from __future__ import annotations

import argparse
import io
import math
import sys
import time
from typing import Any

import numpy as np

import tensorplay as tp
from tensorplay.examples.models import GPTConfig, build_gpt

__all__ = ["corpus", "main", "train"]

_SUBJECTS = ["the cat", "a dog", "the old man", "my sister", "the robot", "a small bird", "the teacher"]
_VERBS = ["sees", "likes", "finds", "paints", "follows", "hears", "builds"]
_OBJECTS = ["the moon", "a red ball", "the river", "an apple", "the garden", "a quiet song", "the door"]
_ENDS = [".", " today.", " again.", " at night.", " in the rain."]


def corpus(n_sentences: int = 2000, seed: int = 0) -> str:
    """The training text: ``n_sentences`` sentences drawn from a small grammar."""
    rng = np.random.default_rng(seed)
    pick = lambda words: words[int(rng.integers(len(words)))]  # noqa: E731
    return " ".join(f"{pick(_SUBJECTS)} {pick(_VERBS)} {pick(_OBJECTS)}{pick(_ENDS)}" for _ in range(n_sentences))


class _Data:
    def __init__(self, text: str, block: int, seed: int):
        self.chars = sorted(set(text))
        self.index = {c: i for i, c in enumerate(self.chars)}
        self.ids = np.array([self.index[c] for c in text], dtype=np.int64)
        self.block = block
        self.seed = seed

    def batch(self, size: int, step: int, rows: slice = slice(None)) -> tuple[Any, Any]:
        """Rows ``rows`` of the global batch of ``size`` sequences of ``step``."""
        # drawn from the step number, so a resumed run sees the batches a straight run does
        starts = np.random.default_rng((self.seed, step)).integers(0, len(self.ids) - self.block - 1, size)[rows]
        x = np.stack([self.ids[s:s + self.block] for s in starts])
        y = np.stack([self.ids[s + 1:s + 1 + self.block] for s in starts])
        return tp.tensor(x), tp.tensor(y)

    def decode(self, ids: list[int]) -> str:
        return "".join(self.chars[i] for i in ids)


def _sample(model: Any, data: _Data, prompt: str, n: int, seed: int) -> str:
    rng = np.random.default_rng(seed)
    ids = [data.index[c] for c in prompt]
    with tp.no_grad():
        for _ in range(n):
            ctx = tp.tensor(np.array([ids[-data.block:]], dtype=np.int64))
            logits = model(ctx)
            logits = logits[0] if isinstance(logits, tuple) else logits
            probs = tp.nn.functional.softmax(logits[0, -1] / 0.8, dim=-1).detach().numpy().astype(np.float64)
            ids.append(int(rng.choice(len(probs), p=probs / probs.sum())))
    return data.decode(ids)


def _rank_rows(batch: int, world: int, rank: int) -> slice:
    """The contiguous rows of a global batch of ``batch`` that rank ``rank`` of ``world`` trains
    on: the first ``batch % world`` ranks take one row more (``tensor_split``'s sizes)."""
    if batch < world:
        raise ValueError(f"--batch {batch} is smaller than the {world} ranks: every rank needs at least one row")
    small, extra = divmod(batch, world)
    start = rank * small + min(rank, extra)
    return slice(start, start + small + (rank < extra))


def train(steps: int = 300, batch: int = 16, lr: float = 3e-3, checkpoint: str | None = None,
          resume: bool = False, seed: int = 0, log: Any = sys.stdout, sample_chars: int = 80,
          stop_at: int | None = None, compile: bool | str = False, ddp: bool = False) -> dict:
    """Train a schedule of ``steps`` steps (ending early after ``stop_at``) and return
    {"losses", "sample", "step", "times"} (``times``: each step's seconds); prints a line every
    10 steps to ``log``. ``compile="model"`` (or True) runs the model's forward and backward as
    compiled programs (``tp.compile(model)``); ``compile="step"`` compiles the whole step
    (forward, backward, clipping, AdamW) into one. ``ddp=True`` trains data-parallel over the
    ranks of the default process group (initialized here when it is not yet): see the module's
    docstring for how the batch is split; only rank 0 writes to ``log``, samples and saves."""
    world, rank, rows = 1, 0, slice(None)
    if ddp:
        from tensorplay import distributed as dist
        from tensorplay.nn.parallel import DistributedDataParallel

        if not dist.is_initialized():
            dist.init_process_group()
        world, rank = dist.get_world_size(), dist.get_rank()
        rows = _rank_rows(batch, world, rank)
        if rank != 0:
            log = io.StringIO()
    # this rank's mean loss times its share of the batch's rows, times the ranks DDP averages over
    scale = (rows.stop - rows.start) * world / batch if ddp else 1.0
    text = corpus(seed=seed)
    data = _Data(text, block=32, seed=seed + 1)
    config = GPTConfig(block_size=32, vocab_size=len(data.chars), n_layer=2, n_head=4, n_embd=64, dropout=0.0)
    tp.manual_seed(seed)
    net = build_gpt(tp, config)
    opt = tp.optim.AdamW(net.parameters(), lr=lr, betas=(0.9, 0.95), weight_decay=0.01)
    warmup = max(1, steps // 10)
    sched = tp.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / warmup) * 0.5 * (1 + math.cos(math.pi * min(s, steps) / steps)) * 0.9 + 0.1)
    start = 0
    if resume and checkpoint:
        state = tp.load(checkpoint)
        net.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        sched.load_state_dict(state["scheduler"])
        start = int(state["step"])
        print(f"resumed from {checkpoint} at step {start}", file=log)
    model = net
    forward = tp.compile(net) if compile is True or compile == "model" else net
    if ddp:
        # compiled first, then wrapped (as nanoGPT does), so the compiled forward and backward
        # stay whole and the gradient hooks run between them and the optimizer. DDP copies rank
        # 0's parameters to every rank; the model's buffers are constant causal masks, so there
        # is nothing to broadcast before each forward
        model = forward = DistributedDataParallel(forward, broadcast_buffers=False)
    print(f"corpus {len(text)} chars, vocabulary {len(data.chars)}; model "
          f"{sum(p.numel() for p in net.parameters())} parameters; {steps - start} steps"
          f"{f'; {world} ranks, {rows.stop - rows.start} of {batch} rows each step on rank 0' if ddp else ''}",
          file=log)
    losses: list[float] = []
    pending: list[float] = []  # this rank's losses since the last line printed
    times: list[float] = []
    t0 = time.perf_counter()
    model.train()
    end = steps if stop_at is None else min(stop_at, steps)

    def train_step(x: Any, y: Any) -> Any:
        _, loss = forward(x, y)
        if scale != 1.0:
            loss = loss * scale
        opt.zero_grad()
        loss.backward()
        tp.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
        opt.step()
        return loss

    # "step": forward, backward, clipping and the AdamW update as one compiled program
    run_step = tp.compile(train_step) if compile == "step" else train_step
    for step in range(start, end):
        t_step = time.perf_counter()
        x, y = data.batch(batch, step, rows)
        loss = run_step(x, y)
        sched.step()
        pending.append(loss.item())
        if step == start or (step + 1) % 10 == 0 or step + 1 == end:
            if ddp:  # the whole batch's mean losses: one all-reduce per printed line
                mean = tp.tensor(np.array(pending, dtype=np.float64))
                dist.all_reduce(mean, op=dist.ReduceOp.AVG)
                pending = mean.numpy().tolist()
            losses += pending
            pending = []
            rate = (step + 1 - start) / (time.perf_counter() - t0)
            print(f"step {step + 1:4d}/{steps}  loss {losses[-1]:.4f}  lr {opt.param_groups[0]['lr']:.2e}  "
                  f"{rate:.1f} steps/s", file=log)
        times.append(time.perf_counter() - t_step)
    model.eval()
    sample = _sample(net, data, "the ", sample_chars, seed) if rank == 0 else ""
    print(f"sample: {sample!r}", file=log)
    if checkpoint:
        if rank == 0:
            tp.save({"model": net.state_dict(), "optimizer": opt.state_dict(), "scheduler": sched.state_dict(),
                     "step": end}, checkpoint)  # (format: docs/training.md#checkpoints)
            print(f"saved {checkpoint}", file=log)
        if ddp:  # no rank goes on (or ends) before the checkpoint is written
            dist.barrier()
    return {"losses": losses, "sample": sample, "step": end, "times": times}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--checkpoint", default=None, help="where to save the model and optimizer (tp.save)")
    parser.add_argument("--resume", action="store_true", help="continue from --checkpoint")
    parser.add_argument("--stop-at", type=int, default=None, help="stop (and save) after this step")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--compile", nargs="?", const="model", default=False, choices=["model", "step"],
                        help="compile the model's forward and backward (model, the default), or the whole "
                             "training step as one program (step)")
    parser.add_argument("--ddp", action="store_true",
                        help="data-parallel over the ranks started by python -m tensorplay.distributed.run: "
                             "each rank trains on its part of every --batch rows (DistributedDataParallel)")
    parser.add_argument("--sample-chars", type=int, default=80, help="characters sampled at the end")
    args = parser.parse_args(argv)
    result = train(args.steps, args.batch, args.lr, args.checkpoint, args.resume, args.seed, stop_at=args.stop_at,
                   compile=args.compile, ddp=args.ddp, sample_chars=args.sample_chars)
    first, last = result["losses"][:10], result["losses"][-10:]
    if args.ddp:
        from tensorplay import distributed as dist

        rank0 = dist.get_rank() == 0
    else:
        rank0 = True
    if first and last and rank0:
        print(f"loss {np.mean(first):.3f} (first 10 steps) -> {np.mean(last):.3f} (last 10)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
