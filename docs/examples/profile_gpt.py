"""Profile a small nanoGPT: eager training steps, then compiled forward calls.

    python docs/examples/profile_gpt.py /tmp/gpt-profile.json
    # prints the table; open the trace in Perfetto or chrome://tracing

The compiled functions are called once before profiling (their capture and compile take
seconds and would fill the picture; profile that first call to see them). In the profile,
each call of ``compiled_model`` (one graph) is split into argument conversion, the IREE
call (upload, invoke, download) and result wrapping; ``compiled_predict`` breaks its graph at
``.item()``, so each call reruns its Python and two programs.
"""

import sys

import tensorplay as tp
from tensorplay.examples.models import GPTConfig, build_gpt

path = sys.argv[1] if len(sys.argv) > 1 else "gpt-profile.json"
tp.manual_seed(0)
model = build_gpt(tp, GPTConfig(vocab_size=32, block_size=16, n_layer=1, n_head=2, n_embd=16))
opt = tp.optim.AdamW(model.parameters(), lr=1e-3)
idx = tp.randint(0, 32, (4, 16))
targets = tp.randint(0, 32, (4, 16))


def train_step(idx, targets):
    _, loss = model(idx, targets)
    loss.backward()
    opt.step()
    opt.zero_grad()
    return loss


def predict(idx):
    logits, _ = model(idx)
    if logits.abs().sum().item() > 0:  # Tensor.item(): a graph break
        logits = logits * 2.0
    return logits.softmax(-1)


compiled_model = tp.compile(model)
compiled_predict = tp.compile(predict)
compiled_model(idx)  # capture and compile before profiling
compiled_predict(idx)

with tp.profiler.profile(record_shapes=True) as prof:
    for _ in range(2):
        with tp.profiler.record_function("train_step (eager)"):
            train_step(idx, targets)
    for _ in range(2):
        with tp.profiler.record_function("forward (compiled)"):
            compiled_model(idx)
    for _ in range(2):
        with tp.profiler.record_function("predict (compiled, a graph break)"):
            compiled_predict(idx)

print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=15))
prof.export_chrome_trace(path)
print(f"trace: {path} ({len(prof.events())} events)")
