"""Train a small nanoGPT-style model on characters, eagerly, with tensorplay alone.

    python -m tensorplay.examples.train_gpt [--steps 300] [--checkpoint gpt.tpckpt] [--resume]

The corpus is generated (a seeded grammar of short sentences, so nothing is downloaded and a
model of this size can learn it); each step prints its loss, the end prints a sampled
continuation, and the model and optimizer are saved with ``tp.save`` (resume with
``--resume``). docs/training.md walks through it.
"""

from __future__ import annotations

import argparse
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

    def batch(self, size: int, step: int) -> tuple[Any, Any]:
        # drawn from the step number, so a resumed run sees the batches a straight run does
        starts = np.random.default_rng((self.seed, step)).integers(0, len(self.ids) - self.block - 1, size)
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


def train(steps: int = 300, batch: int = 16, lr: float = 3e-3, checkpoint: str | None = None,
          resume: bool = False, seed: int = 0, log: Any = sys.stdout, sample_chars: int = 80,
          stop_at: int | None = None, compile: bool | str = False) -> dict:
    """Train a schedule of ``steps`` steps (ending early after ``stop_at``) and return
    {"losses", "sample", "step"}; prints a line every 10 steps to ``log``. ``compile="model"``
    (or True) runs the model's forward and backward as compiled programs (``tp.compile(model)``);
    ``compile="step"`` compiles the whole step (forward, backward, clipping, AdamW) into one."""
    text = corpus(seed=seed)
    data = _Data(text, block=32, seed=seed + 1)
    config = GPTConfig(block_size=32, vocab_size=len(data.chars), n_layer=2, n_head=4, n_embd=64, dropout=0.0)
    tp.manual_seed(seed)
    model = build_gpt(tp, config)
    opt = tp.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.95), weight_decay=0.01)
    warmup = max(1, steps // 10)
    sched = tp.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / warmup) * 0.5 * (1 + math.cos(math.pi * min(s, steps) / steps)) * 0.9 + 0.1)
    start = 0
    if resume and checkpoint:
        state = tp.load(checkpoint)
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        sched.load_state_dict(state["scheduler"])
        start = int(state["step"])
        print(f"resumed from {checkpoint} at step {start}", file=log)
    print(f"corpus {len(text)} chars, vocabulary {len(data.chars)}; model "
          f"{sum(p.numel() for p in model.parameters())} parameters; {steps - start} steps", file=log)
    losses = []
    t0 = time.perf_counter()
    model.train()
    end = steps if stop_at is None else min(stop_at, steps)
    forward = tp.compile(model) if compile is True or compile == "model" else model

    def train_step(x: Any, y: Any) -> Any:
        _, loss = forward(x, y)
        opt.zero_grad()
        loss.backward()
        tp.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return loss

    # "step": forward, backward, clipping and the AdamW update as one compiled program
    run_step = tp.compile(train_step) if compile == "step" else train_step
    for step in range(start, end):
        x, y = data.batch(batch, step)
        loss = run_step(x, y)
        sched.step()
        losses.append(loss.item())
        if step == start or (step + 1) % 10 == 0 or step + 1 == end:
            rate = (step + 1 - start) / (time.perf_counter() - t0)
            print(f"step {step + 1:4d}/{steps}  loss {losses[-1]:.4f}  lr {opt.param_groups[0]['lr']:.2e}  "
                  f"{rate:.1f} steps/s", file=log)
    model.eval()
    sample = _sample(model, data, "the ", sample_chars, seed)
    print(f"sample: {sample!r}", file=log)
    if checkpoint:
        tp.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "scheduler": sched.state_dict(),
                 "step": end}, checkpoint)  # (format: docs/training.md#checkpoints)
        print(f"saved {checkpoint}", file=log)
    return {"losses": losses, "sample": sample, "step": end}


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
    args = parser.parse_args(argv)
    result = train(args.steps, args.batch, args.lr, args.checkpoint, args.resume, args.seed, stop_at=args.stop_at,
                   compile=args.compile)
    first, last = result["losses"][:10], result["losses"][-10:]
    if first and last:
        print(f"loss {np.mean(first):.3f} (first 10 steps) -> {np.mean(last):.3f} (last 10)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
