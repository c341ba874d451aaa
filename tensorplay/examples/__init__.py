"""Example models written against the PyTorch API, used by the demo, the benchmarks and the
tests. Each builder takes the library module (``tensorplay`` or ``torch``) so the same source
runs on both."""

from .models import GPTConfig, build_attention_classifier, build_cnn, build_gpt

__all__ = ["GPTConfig", "build_gpt", "build_cnn", "build_attention_classifier"]
