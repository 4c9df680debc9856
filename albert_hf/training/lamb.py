"""LAMB, the optimizer ALBERT was pretrained with, as in the official `lamb_optimizer.py` (google-research/albert).

LAMB ("Layer-wise Adaptive Moments for Batch training", You et al., 2020) is Adam with decoupled weight decay whose
update is rescaled, tensor by tensor, by the trust ratio ||w|| / ||update||. That keeps the step of every weight
matrix proportional to its norm, which is what lets ALBERT train with batch 4096 and a learning rate of 0.00176.

Two details of the official implementation that differ from most PyTorch ports, kept here on purpose:
  * no bias correction of the moments (m and v start at zero and are used as they are);
  * weight decay is added to the Adam direction *before* the trust ratio is computed, and LayerNorm and bias
    parameters get neither weight decay nor the trust ratio (`exclude_from_weight_decay=["LayerNorm", "layer_norm",
    "bias"]`, and `exclude_from_layer_adaptation` defaults to the same list).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

import torch
from torch import nn

# The official ALBERT exclusion list (optimization.py): these parameters are neither decayed nor adapted.
OFFICIAL_NO_DECAY_PATTERNS = ("LayerNorm", "layer_norm", "bias")


class Lamb(torch.optim.Optimizer):
    r"""
    LAMB as in ALBERT's official TensorFlow implementation, for PyTorch and the Trainer.

    For each parameter w with gradient g (per parameter group: lr, betas, eps, weight_decay, layer_adaptation):

        m = beta1 * m + (1 - beta1) * g
        v = beta2 * v + (1 - beta2) * g^2
        update = m / (sqrt(v) + eps) + weight_decay * w          # no bias correction
        ratio = ||w|| / ||update|| if layer_adaptation and both norms > 0 else 1
        w = w - lr * ratio * update

    Args:
        params: parameters or parameter groups; use [`lamb_parameter_groups`] for ALBERT's decay/adaptation groups.
        lr: learning rate (ALBERT: 0.00176 at batch 4096).
        betas: decay rates of the first and second moments.
        eps: added to sqrt(v) (1e-6 in ALBERT, not Adam's 1e-8).
        weight_decay: decoupled weight decay added to the update (0.01 in ALBERT).
        layer_adaptation: whether to rescale by the trust ratio (set per group; off for LayerNorm and biases).
    """

    def __init__(
        self,
        params: Iterable[torch.Tensor] | Iterable[dict],
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-6,
        weight_decay: float = 0.01,
        layer_adaptation: bool = True,
    ):
        if lr < 0.0:
            raise ValueError(f"Lamb: learning rate must be >= 0, got {lr}.")
        if not (0.0 <= betas[0] < 1.0 and 0.0 <= betas[1] < 1.0):
            raise ValueError(f"Lamb: betas must be in [0, 1), got {betas}.")
        if eps <= 0.0:
            raise ValueError(f"Lamb: eps must be > 0, got {eps}.")
        if weight_decay < 0.0:
            raise ValueError(f"Lamb: weight_decay must be >= 0, got {weight_decay}.")
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, layer_adaptation=layer_adaptation)
        super().__init__(params, defaults)

    @torch.no_grad()
    def step(self, closure: Callable[[], torch.Tensor] | None = None) -> torch.Tensor | None:
        """Apply one LAMB update to every parameter that has a gradient."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()

        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            for param in group["params"]:
                if param.grad is None:
                    continue
                if param.grad.is_sparse:
                    raise RuntimeError("Lamb does not support sparse gradients.")
                update = self._adam_direction(param, param.grad, beta1, beta2, group["eps"])
                if group["weight_decay"] != 0.0:
                    update.add_(param, alpha=group["weight_decay"])
                if group["layer_adaptation"]:
                    update.mul_(_trust_ratio(param, update))
                param.add_(update, alpha=-group["lr"])
        return loss

    def _adam_direction(
        self, param: torch.Tensor, grad: torch.Tensor, beta1: float, beta2: float, eps: float
    ) -> torch.Tensor:
        """Update the moments of `param` in place and return m / (sqrt(v) + eps), without bias correction."""
        state = self.state[param]
        if not state:
            state["step"] = torch.zeros((), dtype=torch.float32)
            state["exp_avg"] = torch.zeros_like(param, memory_format=torch.preserve_format)
            state["exp_avg_sq"] = torch.zeros_like(param, memory_format=torch.preserve_format)
        # `step` is bookkeeping only (the official optimizer has no bias correction that would need it).
        state["step"] += 1
        exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
        exp_avg.mul_(beta1).add_(grad, alpha=1.0 - beta1)
        exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1.0 - beta2)
        return exp_avg / (exp_avg_sq.sqrt() + eps)


def _trust_ratio(param: torch.Tensor, update: torch.Tensor) -> torch.Tensor:
    """||w|| / ||update||, or 1 where either norm is zero (a zero-initialised tensor must still move)."""
    weight_norm = torch.linalg.vector_norm(param)
    update_norm = torch.linalg.vector_norm(update)
    ratio = weight_norm / update_norm
    one = torch.ones_like(ratio)
    # A tensor op, not `.item()`: no host-device sync per parameter on accelerators.
    return torch.where((weight_norm > 0) & (update_norm > 0), ratio, one)


def is_excluded_from_decay(name: str, module: nn.Module) -> bool:
    """Whether a parameter gets no weight decay and no trust ratio: LayerNorm weights and all biases, as in ALBERT.

    The official rule matches parameter names ("LayerNorm", "layer_norm", "bias"); modules that are `nn.LayerNorm`
    under any other name are excluded too, so the rule also holds for models that name their norms differently.
    """
    if isinstance(module, nn.LayerNorm):
        return True
    return any(re.search(pattern, name) for pattern in OFFICIAL_NO_DECAY_PATTERNS)


def lamb_parameter_groups(model: nn.Module, weight_decay: float = 0.01) -> list[dict]:
    """ALBERT's two parameter groups: weights (decayed, adapted) and LayerNorm/bias (neither).

    Tied parameters (the MLM decoder shares the embedding matrix) appear once.
    """
    decayed, excluded, seen = [], [], set()
    for module_name, module in model.named_modules():
        for param_name, param in module.named_parameters(recurse=False):
            if not param.requires_grad or id(param) in seen:
                continue
            seen.add(id(param))
            full_name = f"{module_name}.{param_name}" if module_name else param_name
            (excluded if is_excluded_from_decay(full_name, module) else decayed).append(param)
    return [
        {"params": decayed, "weight_decay": weight_decay, "layer_adaptation": True},
        {"params": excluded, "weight_decay": 0.0, "layer_adaptation": False},
    ]
