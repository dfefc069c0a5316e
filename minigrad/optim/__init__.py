"""``mg.optim``: optimizers (SGD, Adam, AdamW, RMSprop, Adadelta, LBFGS) and ``lr_scheduler``, as ``torch.optim``.

    opt = mg.optim.AdamW(model.parameters(), lr=3e-4)
    sched = mg.optim.lr_scheduler.warmup_cosine(opt, warmup_steps=100, total_steps=2000)
    for x, y in loader:
        opt.zero_grad()
        loss_fn(model(x), y).backward()
        opt.step()
        sched.step()
"""
from . import lr_scheduler
from .adadelta import Adadelta, adadelta_update
from .adam import Adam, AdamW, adam_update
from .lbfgs import LBFGS
from .optimizer import Optimizer
from .rmsprop import RMSprop, rmsprop_update
from .sgd import SGD, sgd_update

__all__ = ["Adadelta", "Adam", "AdamW", "LBFGS", "adadelta_update", "Optimizer", "RMSprop", "SGD", "adam_update", "lr_scheduler", "rmsprop_update",
           "sgd_update"]
