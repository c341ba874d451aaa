"""Trace a small nanoGPT through every stage of tp.compile and build the HTML report.

    python docs/examples/trace_gpt.py /tmp/gpt-trace
    # then open /tmp/gpt-trace/report.html

The step breaks the graph (``.item()`` on a traced value), is called at two batch sizes (a
recompile), and the model is trained one step (a forward and a backward graph).
"""

import sys

import tensorplay as tp
from tensorplay.examples.models import GPTConfig, build_gpt
from tensorplay.tools.report import build_report

folder = sys.argv[1] if len(sys.argv) > 1 else "gpt-trace"
tp.manual_seed(0)
model = build_gpt(tp, GPTConfig(vocab_size=32, block_size=16, n_layer=1, n_head=2, n_embd=16))


def step(idx):
    logits, _ = model(idx)
    if logits.abs().sum().item() > 0:  # Tensor.item(): a graph break
        logits = logits * 2.0
    return logits.softmax(-1)


compiled_step = tp.compile(step, options={"trace_dir": folder})
for batch in (2, 2, 3):  # the third call has a new batch size: a recompile
    compiled_step(tp.randint(0, 32, (batch, 8)))

compiled_model = tp.compile(model, options={"trace_dir": folder})
logits, _ = compiled_model(tp.randint(0, 32, (2, 8)))
logits.sum().backward()  # compiles the backward graph

tp.compiler.reset()  # (writes how many calls each entry served)
print(build_report(folder))
