import os
import tempfile

import numpy as np
import pytest

# Compiled artifacts of a test run go to a cache of that run, not the user's
# (~/.cache/tensorplay): tests see a cold cache, and a run leaves nothing behind. A test
# session shares it, so two tests compiling the same graph compile it once. Set
# TENSORPLAY_CACHE_DIR to keep artifacts across runs.
if "TENSORPLAY_CACHE_DIR" not in os.environ:
    _cache = tempfile.TemporaryDirectory(prefix="tensorplay-test-cache-")
    os.environ["TENSORPLAY_CACHE_DIR"] = _cache.name

import tensorplay as tp  # noqa: E402


@pytest.fixture(autouse=True)
def _seed():
    tp.manual_seed(0)
    yield


@pytest.fixture
def rng():
    return np.random.default_rng(0)
