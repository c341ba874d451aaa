"""``tp.optim``: optimizers and learning-rate schedules with PyTorch's names, options, update
rules and ``state_dict`` layout (docs/training.md)."""

from . import lr_scheduler
from ._adaptive import ASGD, Adadelta, Adagrad, Adamax, NAdam, RAdam, Rprop
from ._algorithms import SGD, Adam, AdamW, RMSprop
from ._lbfgs import LBFGS
from .optimizer import Optimizer

__all__ = ["ASGD", "LBFGS", "SGD", "Adadelta", "Adagrad", "Adam", "AdamW", "Adamax", "NAdam", "Optimizer", "RAdam",
           "RMSprop", "Rprop", "lr_scheduler"]
