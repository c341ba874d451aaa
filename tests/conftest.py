import numpy as np
import pytest

import tensorplay as tp


@pytest.fixture(autouse=True)
def _seed():
    tp.manual_seed(0)
    yield


@pytest.fixture
def rng():
    return np.random.default_rng(0)
