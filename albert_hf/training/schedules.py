"""The learning-rate schedule of the original ALBERT pretraining: linear warmup, then polynomial decay to zero.

It differs from transformers' `get_polynomial_decay_schedule_with_warmup` in one way, kept for fidelity: the decay
is `(1 - step / num_training_steps) ** power` measured from step 0, not from the end of warmup (TensorFlow's
`polynomial_decay(global_step)` with the warmup laid over it, as in ALBERT's `optimization.py`). So at the end of
warmup the rate is `lr * (1 - num_warmup_steps / num_training_steps)`, not `lr`.
"""

from __future__ import annotations

from functools import partial

import torch
from torch.optim.lr_scheduler import LambdaLR


def _get_albert_polynomial_decay_schedule_lr_lambda(
    step: int, *, num_warmup_steps: int, num_training_steps: int, power: float
) -> float:
    if step < num_warmup_steps:
        return step / num_warmup_steps
    remaining = 1.0 - min(step, num_training_steps) / num_training_steps
    return remaining**power


def get_albert_polynomial_decay_schedule(
    optimizer: torch.optim.Optimizer,
    num_warmup_steps: int,
    num_training_steps: int,
    power: float = 1.0,
    last_epoch: int = -1,
) -> LambdaLR:
    """Linear warmup from 0 over `num_warmup_steps`, else `lr * (1 - step / num_training_steps) ** power`.

    ALBERT used power 1.0 (linear decay), 3,125 warmup steps and 125,000 training steps. The factor reaches 0 at
    `num_training_steps` and stays there.
    """
    if num_training_steps <= 0:
        raise ValueError(f"num_training_steps must be positive, got {num_training_steps}.")
    if not 0 <= num_warmup_steps <= num_training_steps:
        raise ValueError(
            f"num_warmup_steps must be in [0, num_training_steps={num_training_steps}], got {num_warmup_steps}."
        )
    if power <= 0:
        raise ValueError(f"power must be positive, got {power}.")
    # A partial of a module-level function (not a lambda) so that the scheduler can be pickled; named as transformers
    # names its schedules' functions, so the model card names this one from the scheduler (hub.schedule_description).
    lr_lambda = partial(
        _get_albert_polynomial_decay_schedule_lr_lambda,
        num_warmup_steps=num_warmup_steps,
        num_training_steps=num_training_steps,
        power=power,
    )
    return LambdaLR(optimizer, lr_lambda, last_epoch)
