"""``tp.distributions``: probability distributions with PyTorch's ``torch.distributions`` API.

Parameters are tensorplay tensors, and ``log_prob``, ``entropy``, ``mean``, ``variance``,
``kl_divergence`` and ``rsample`` are compositions of tensorplay ops, so they differentiate and
compile (``tp.compile``) like any other code. Samples come from tensorplay's generator
(``tp.manual_seed``): the same seed gives the same samples run after run, but not the numbers
PyTorch draws for that seed.

>>> import tensorplay as tp
>>> from tensorplay.distributions import Categorical
>>> d = Categorical(logits=tp.tensor([0.0, 1.0, 2.0]))
>>> d.log_prob(tp.tensor(2))
tensor(-0.4076)
"""

from . import constraints
from .continuous import Exponential, Gumbel, LogNormal, Normal, Uniform
from .discrete import Bernoulli, Categorical, OneHotCategorical
from .distribution import Distribution
from .independent import Independent
from .kl import kl_divergence, register_kl

__all__ = ["Bernoulli", "Categorical", "Distribution", "Exponential", "Gumbel", "Independent", "LogNormal",
           "Normal", "OneHotCategorical", "Uniform", "constraints", "kl_divergence", "register_kl"]
