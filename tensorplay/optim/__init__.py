"""``tp.optim``: optimizers and learning-rate schedules with PyTorch's names, options, update
rules and ``state_dict`` layout (docs/training.md)."""

from . import lr_scheduler
from ._algorithms import SGD, Adam, AdamW, RMSprop
from .optimizer import Optimizer

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "RMSprop", "lr_scheduler"]
