"""int64 on iree-vulkan at the sizes where IREE vectorizes. IREE's portable SPIR-V baseline has
no 64-bit integers and emulates them on 32-bit words; that emulation fails to compile a
vectorized int64 dispatch (nanoGPT's cross_entropy at 4x32 tokens, int64 elementwise ops at
512x64). On a device reporting ``shaderInt64`` (lavapipe does) iree-vulkan compiles for the
baseline with 64-bit integer arithmetic added (``vulkan_target="baseline-int64"``), so int64
keeps its full range: values above 2**31 and wrap-around on overflow match eager exactly."""

from __future__ import annotations

import numpy as np
import pytest

import tensorplay as tp
import tensorplay.nn.functional as F
from tensorplay.compiler.backends import probe
from tensorplay.compiler.backends.iree import get_iree_backend
from tensorplay.compiler.backends.targets import TARGETS, VULKAN_BASELINE_INT64, vulkan_device_flags
from tensorplay.examples.models import GPTConfig, build_gpt

pytest.importorskip("iree.runtime")


def _vulkan_with_int64():
    caps = tp.compiler.get_backend_capabilities("iree-vulkan")
    if not caps.available:
        pytest.skip(f"iree-vulkan unavailable here: {caps.reason}")
    if not caps.extra.get("shader_int64"):
        pytest.skip("the Vulkan device reports no shaderInt64: int64 is emulated by IREE there")


@pytest.fixture
def probed_vulkan(monkeypatch):
    """The Vulkan probe's result, as a dict a test may change."""
    caps = probe.capabilities("iree-vulkan")
    extra = dict(caps.extra or {})
    monkeypatch.setitem(probe._probed, "iree-vulkan", type(caps)(**{**caps.__dict__, "extra": extra}))
    return extra


def test_vulkan_flags_follow_the_devices_int64_support(probed_vulkan):
    be = get_iree_backend("iree-vulkan")
    probed_vulkan["vulkan_target"] = VULKAN_BASELINE_INT64
    flags = be.flags()
    (device,) = [f for f in flags if f.startswith("--iree-hal-target-device=")]
    assert "compute = fp32|int32|int64" in device and 'arch = "vp_android_baseline_2022"' in device
    # the legacy backend flag would override the device target: it is not given
    assert not any(f.startswith("--iree-hal-target-backends") for f in flags)
    probed_vulkan["vulkan_target"] = None
    assert be.flags()[0] == "--iree-hal-target-backends=vulkan-spirv"
    assert not any(f.startswith("--iree-hal-target-device") for f in be.flags())
    # a target the options name wins over the probe
    probed_vulkan["vulkan_target"] = VULKAN_BASELINE_INT64
    assert be.flags({"vulkan_target": "rdna3"})[:1] == ["--iree-hal-target-backends=vulkan-spirv"]
    assert "--iree-vulkan-target=rdna3" in be.flags({"vulkan_target": "rdna3"})
    assert vulkan_device_flags(None) == vulkan_device_flags("baseline") == ["--iree-hal-target-backends=vulkan-spirv"]
    # export's vmfb must run on devices without shaderInt64: IREE's baseline, whatever this device has
    assert be.flags(TARGETS["iree-vulkan"].export_options())[:1] == ["--iree-hal-target-backends=vulkan-spirv"]


@pytest.mark.iree
def test_int64_at_vectorized_sizes_compiles_for_the_int64_baseline_without_a_device():
    """The case IREE's emulation fails on compiles for ``baseline-int64`` on any machine."""
    from tensorplay.compiler.backends.base import BackendCompileError
    from tensorplay.dialects.tp.graph import Graph

    def graph():
        from tensorplay.dialects.tp.types import TensorType

        g = Graph("i64")
        a = g.add_input(TensorType((512, 64), tp.int64))
        b = g.add_input(TensorType((512, 64), tp.int64))
        g.set_outputs([g.add1("tp.add", [g.add1("tp.mul", [a, b], {}), a], {})])
        return g

    be = get_iree_backend("iree-vulkan")
    assert be.compile_to_vmfb(graph(), {"vulkan_target": VULKAN_BASELINE_INT64})
    with pytest.raises(BackendCompileError, match="failed to legalize"):
        be.compile_to_vmfb(graph(), {"vulkan_target": "vp_android_baseline_2022", "opt_level": "O0"})


def _nanogpt(loss):
    tp.manual_seed(0)
    model = build_gpt(tp, GPTConfig(block_size=32, vocab_size=97, n_layer=2, n_head=4, n_embd=64)).eval()
    rng = np.random.default_rng(0)
    idx = tp.tensor(rng.integers(0, 97, (4, 32)), dtype=tp.int64)
    targets = tp.tensor(rng.integers(0, 97, (4, 32)), dtype=tp.int64) if loss else None
    if loss:
        targets[0, :5] = -1  # ignored positions, as nanoGPT masks them
    return model, idx, targets


@pytest.mark.vulkan
def test_nanogpt_at_realistic_size_matches_eager_on_vulkan():
    # with targets the model returns its logits and the loss: the forward and the
    # cross_entropy(..., ignore_index=-1) that failed to compile, in one program
    _vulkan_with_int64()
    model, idx, targets = _nanogpt(True)
    with tp.no_grad():
        want = model(idx, targets)
        got = tp.compiler.compile(model, backend="iree-vulkan", fullgraph=True)(idx, targets)
    for g, w in zip(got, want):
        if w is not None:
            np.testing.assert_allclose(g.cpu().numpy(), w.numpy(), rtol=1e-4, atol=1e-5)


BIG = 2**40 + 12345


def _ops(a, b, idx, table, logits, targets):
    return (
        a + b, a * b, a - 3 * b,
        tp.floor_divide(a, b), tp.remainder(a, b),
        a > b, a == b, a <= BIG,
        a.sum(), a.sum(1), a.cumsum(1), a.argmax(1), b.argmin(0),
        a[idx], a[:, idx[:64] % 64],
        F.embedding(idx % 97, table),
        F.cross_entropy(logits, targets, ignore_index=-1),
    )


@pytest.mark.vulkan
def test_int64_ops_at_vectorized_sizes_keep_int64_semantics_on_vulkan():
    _vulkan_with_int64()
    rng = np.random.default_rng(0)
    a = rng.integers(-2**45, 2**45, (512, 64))
    a[0, :4] = [2**62, -2**62, 2**63 - 1, -2**63]  # products and sums that wrap around as int64
    b = rng.integers(-2**33, 2**33, (512, 64))
    b[b == 0] = 7
    b[0, :4] = [4, 3, 2, -1]
    idx = rng.integers(0, 512, (700,))
    targets = rng.integers(0, 97, (512,))
    targets[::5] = -1
    args = (tp.tensor(a), tp.tensor(b), tp.tensor(idx), tp.tensor(rng.standard_normal((97, 16)).astype(np.float32)),
            tp.tensor(rng.standard_normal((512, 97)).astype(np.float32)), tp.tensor(targets))
    assert all(t.dtype is tp.int64 for t in (args[0], args[1], args[2], args[5]))
    with np.errstate(over="ignore"):
        want = _ops(*args)
    got = tp.compiler.compile(_ops, backend="iree-vulkan", fullgraph=True)(*args)
    for i, (g, w) in enumerate(zip(got, want)):
        g, w = g.cpu().numpy(), w.numpy()
        assert g.dtype == w.dtype, (i, g.dtype, w.dtype)
        if w.dtype.kind == "f":
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5, err_msg=f"result {i}")
        else:
            np.testing.assert_array_equal(g, w, err_msg=f"result {i}")


def test_the_probe_reads_the_narrow_features_and_picks_the_target_that_has_them(monkeypatch):
    from tensorplay.compiler.backends.targets import VULKAN_BASELINE_NARROW

    caps = tp.compiler.get_backend_capabilities("iree-vulkan")
    if not caps.available:
        pytest.skip(f"iree-vulkan unavailable here: {caps.reason}")
    features = caps.extra["vulkan_features"]
    assert set(features) == set(probe.VULKAN_FEATURES)
    want = (VULKAN_BASELINE_NARROW if all(features.values())
            else VULKAN_BASELINE_INT64 if features["shaderInt64"] else None)
    assert caps.extra["vulkan_target"] == want
    (device,) = [f for f in vulkan_device_flags(VULKAN_BASELINE_NARROW) if f.startswith("--iree-hal-target-device=")]
    assert "storage = b32|b16|b8" in device and "cap:StorageBuffer8BitAccess" in device
    # a device lacking one feature keeps the int64 target
    for missing in probe.VULKAN_FEATURES[1:]:
        monkeypatch.setattr(probe, "_vulkan_features", lambda m=missing: {f: f != m for f in probe.VULKAN_FEATURES})
        monkeypatch.setattr(probe, "_probed", {})
        assert probe.capabilities("iree-vulkan").extra["vulkan_target"] == VULKAN_BASELINE_INT64
    monkeypatch.undo()
    probe._probed.pop("iree-vulkan", None)


def _narrow_intermediates(x):
    # each passes an 8-, 16-bit or bool tensor from one dispatch to another
    return (x.to(tp.bfloat16).float() * 1, (x > 0).sum(), (x > -10).all(1), x.to(tp.int8).sum(),
            x.to(tp.int16).sum(1), x.to(tp.bfloat16).float().sum(), (~x.to(tp.uint8)).sum(1),
            (x.to(tp.bfloat16) @ x.t().to(tp.bfloat16)).float())


@pytest.mark.vulkan
def test_narrow_tensors_between_dispatches_at_vectorized_sizes_match_eager_on_vulkan():
    # On IREE's baseline (32-bit storage) the vectorized code wrote such tensors past the end
    # of their buffers from about 1,024 elements: half of a bfloat16 cast came back 0,
    # x.to(int8).sum() of 8x128 gave -181 for 71, all() gave False
    caps = tp.compiler.get_backend_capabilities("iree-vulkan")
    if not caps.available:
        pytest.skip(f"iree-vulkan unavailable here: {caps.reason}")
    if not all(caps.extra["vulkan_features"].values()):
        pytest.skip(f"the Vulkan device lacks 8- or 16-bit storage or integers: {caps.extra['vulkan_features']} "
                    "(docs/limitations.md)")
    x = tp.tensor(np.random.default_rng(0).uniform(-3, 3, (8, 128)).astype(np.float32))
    tp.compiler.reset()
    try:
        got = tp.compile(_narrow_intermediates, backend="iree-vulkan", fullgraph=True)(x)
        for i, (g, w) in enumerate(zip(got, _narrow_intermediates(x))):
            assert g.dtype == w.dtype and g.shape == w.shape, i
            if w.dtype is tp.float32:
                # the bfloat16 matmul: float32 accumulation in another order; at most 4 bfloat16 ulps of its largest
                np.testing.assert_allclose(g.cpu().numpy(), w.numpy(), rtol=0,
                                           atol=4 * 2 ** -8 * float(w.abs().max()), err_msg=f"result {i}")
            else:
                np.testing.assert_array_equal(g.cpu().numpy(), w.numpy(), err_msg=f"result {i}")
    finally:
        tp.compiler.reset()
