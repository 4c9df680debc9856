"""LAMB, the optimizer ALBERT was pretrained with, as in the official `lamb_optimizer.py` (google-research/albert).

LAMB ("Layer-wise Adaptive Moments for Batch training", You et al., 2020) is Adam with decoupled weight decay whose
update is rescaled, tensor by tensor, by the trust ratio ||w|| / ||update||. That keeps the step of every weight
matrix proportional to its norm, which is what lets ALBERT train with batch 4096 and a learning rate of 0.00176.

Two details of the official implementation that differ from most PyTorch ports, kept here on purpose:
  * no bias correction of the moments (m and v start at zero and are used as they are);
  * weight decay is added to the Adam direction *before* the trust ratio is computed, and LayerNorm and bias
    parameters get neither weight decay nor the trust ratio (`exclude_from_weight_decay=["LayerNorm", "layer_norm",
    "bias"]`, and `exclude_from_layer_adaptation` defaults to the same list).

The trust ratio is a property of a whole tensor, so it must not depend on how an engine splits the tensors over
processes. `Lamb` computes it from per-tensor sums of squares of the slices this process holds, summed over the
processes that hold the other slices:
  * plain tensors (one process, DDP): every tensor is whole, nothing is exchanged;
  * FSDP2 `DTensor`s: each process holds a shard of every tensor; the sums go over the mesh dimensions it is
    sharded on;
  * DeepSpeed ZeRO, which replaces each parameter group's tensors by one flat fp32 partition: the engine's layout of
    that partition (which slice of which tensor lies where) is given with [`Lamb.register_partition`];
    `albert_hf.training.lamb_deepspeed.register_zero_partitions` reads it from DeepSpeed, and
    [`AlbertPretrainingTrainer`] calls it when training starts. A tensor that is neither one the optimizer was
    built with, nor a DTensor, nor a registered partition is refused rather than treated as one tensor.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch import nn

try:
    from torch.distributed.tensor import DTensor
except ImportError:  # a torch build without torch.distributed: no parameter is a DTensor
    DTensor = ()

# The official ALBERT exclusion list (optimization.py): these parameters are neither decayed nor adapted.
OFFICIAL_NO_DECAY_PATTERNS = ("LayerNorm", "layer_norm", "bias")


@dataclass(frozen=True)
class Segment:
    """Elements `[start, start + length)` of a flat partition are a slice of the partition's tensor number `tensor`."""

    tensor: int
    start: int
    length: int


@dataclass(frozen=True)
class PartitionLayout:
    """How a flat partition that an engine hands to LAMB in place of whole tensors is made of slices of them.

    Every process of `process_group` holds a partition of the same `num_tensors` tensors (numbered alike on all of
    them) and calls `step` on it at the same time; the sums of squares of the `segments` it holds are summed over
    the group to give each whole tensor's norms (no group: this process holds every slice). Elements in no segment
    (padding) are no tensor's.
    """

    segments: tuple[Segment, ...]
    num_tensors: int
    process_group: object | None = None


@dataclass
class _Holding:
    """What one tensor of a parameter group holds on this process: slices (weights, update) of `num_tensors` whole
    tensors, and the process groups over which the slices' sums of squares add up to the whole tensors' (none when
    every slice is a whole tensor)."""

    num_tensors: int
    slices: list[tuple[int, torch.Tensor, torch.Tensor]]
    groups: tuple

    def sums_of_squares(self, like: torch.Tensor) -> torch.Tensor:
        """(num_tensors, 2): the sums of w^2 and update^2 over the slices held here, in at least fp32."""
        dtype = torch.promote_types(like.dtype, torch.float32)
        sums = torch.zeros(self.num_tensors, 2, dtype=dtype, device=like.device)
        for index, weights, update in self.slices:
            sums[index, 0] += weights.square().sum(dtype=dtype)
            sums[index, 1] += update.square().sum(dtype=dtype)
        return sums


class Lamb(torch.optim.Optimizer):
    r"""
    LAMB as in ALBERT's official TensorFlow implementation, for PyTorch and the Trainer.

    For each parameter w with gradient g (per parameter group: lr, betas, eps, weight_decay, layer_adaptation):

        m = beta1 * m + (1 - beta1) * g
        v = beta2 * v + (1 - beta2) * g^2
        update = m / (sqrt(v) + eps) + weight_decay * w          # no bias correction
        ratio = ||w|| / ||update|| if layer_adaptation and both norms > 0 else 1
        w = w - lr * ratio * update

    The norms are those of each whole tensor, however an engine shards it (see the module's docstring).

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
        # Tensors given to the optimizer (whole unless DTensors), and flat partitions registered by an engine; both
        # keyed by id and holding the tensor, so that an id cannot be reused by another tensor.
        self._given: dict[int, torch.Tensor] = {}
        self._partitions: dict[int, tuple[torch.Tensor, PartitionLayout]] = {}
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, layer_adaptation=layer_adaptation)
        super().__init__(params, defaults)

    def add_param_group(self, param_group: dict) -> None:
        super().add_param_group(param_group)
        for param in self.param_groups[-1]["params"]:
            self._given[id(param)] = param

    def register_partition(self, flat: torch.Tensor, layout: PartitionLayout) -> None:
        """Declare that `flat`, which an engine puts in a parameter group in place of whole tensors, holds `layout`'s
        slices of them; each trust ratio is then taken over its whole tensor, all processes' slices together."""
        if flat.dim() != 1:
            raise ValueError(f"Lamb.register_partition: a flat partition is 1-D, got shape {tuple(flat.shape)}.")
        for segment in layout.segments:
            if not (0 <= segment.tensor < layout.num_tensors and segment.length > 0):
                raise ValueError(f"Lamb.register_partition: bad segment {segment} of {layout.num_tensors} tensors.")
            if not 0 <= segment.start <= segment.start + segment.length <= flat.numel():
                raise ValueError(f"Lamb.register_partition: {segment} lies outside a partition of {flat.numel()}.")
        self._partitions[id(flat)] = (flat, layout)

    def holds_foreign_tensors(self) -> bool:
        """Whether an engine put into the parameter groups tensors the optimizer was not built with."""
        return any(id(param) not in self._given for group in self.param_groups for param in group["params"])

    @torch.no_grad()
    def step(self, closure: Callable[[], torch.Tensor] | None = None) -> torch.Tensor | None:
        """Apply one LAMB update to every parameter that has a gradient."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()

        for group in self.param_groups:
            params = [param for param in group["params"] if param.grad is not None]
            if not params:
                continue
            beta1, beta2 = group["betas"]
            updates = []
            for param in params:
                if param.grad.is_sparse:
                    raise RuntimeError("Lamb does not support sparse gradients.")
                update = self._adam_direction(param, param.grad, beta1, beta2, group["eps"])
                if group["weight_decay"] != 0.0:
                    update.add_(param, alpha=group["weight_decay"])
                updates.append(update)
            if group["layer_adaptation"]:
                self._scale_by_trust_ratios(params, updates)
            for param, update in zip(params, updates):
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

    def _scale_by_trust_ratios(self, params: list[torch.Tensor], updates: list[torch.Tensor]) -> None:
        """Multiply each whole tensor's update, slice by slice, by ||w|| / ||update|| of the whole tensor."""
        holdings = [self._holding(param, update) for param, update in zip(params, updates)]
        sums = [holding.sums_of_squares(update) for holding, update in zip(holdings, _local(updates))]
        _sum_over_processes(holdings, sums)
        for holding, tensor_sums in zip(holdings, sums):
            ratios = _trust_ratio(tensor_sums[:, 0].sqrt(), tensor_sums[:, 1].sqrt())
            for index, _, update in holding.slices:
                update.mul_(ratios[index])

    def _holding(self, param: torch.Tensor, update: torch.Tensor) -> _Holding:
        """The slices of whole tensors that `param` (a whole tensor, a DTensor or a registered partition) holds."""
        if id(param) in self._partitions:
            flat, layout = self._partitions[id(param)]
            assert flat is param
            slices = [
                (
                    segment.tensor,
                    param.narrow(0, segment.start, segment.length),
                    update.narrow(0, segment.start, segment.length),
                )
                for segment in layout.segments
            ]
            groups = () if layout.process_group is None else (layout.process_group,)
            return _Holding(layout.num_tensors, slices, groups)
        if isinstance(param, DTensor):
            return _Holding(1, [(0, param.to_local(), update.to_local())], _shard_groups(param))
        if id(param) in self._given:
            return _Holding(1, [(0, param, update)], ())
        raise RuntimeError(
            f"Lamb was asked to step a tensor of shape {tuple(param.shape)} it was not built with: an engine replaced "
            "the parameters (DeepSpeed ZeRO puts one flat partition per group). Its trust ratios would be those of "
            "that partition, not of each tensor. Register the engine's layout first "
            "(albert_hf.training.lamb_deepspeed.register_zero_partitions(engine) after deepspeed.initialize; "
            "AlbertPretrainingTrainer does it), or use an engine whose parameters stay tensors (DDP, FSDP2)."
        )


def _local(tensors: list[torch.Tensor]) -> list[torch.Tensor]:
    return [tensor.to_local() if isinstance(tensor, DTensor) else tensor for tensor in tensors]


def _shard_groups(tensor: DTensor) -> tuple:
    """The process groups of the mesh dimensions `tensor` is sharded on (its slices add up over them)."""
    groups = []
    for dim, placement in enumerate(tensor.placements):
        if placement.is_shard():
            groups.append(tensor.device_mesh.get_group(dim))
        elif not placement.is_replicate():
            raise RuntimeError(f"Lamb: a parameter placed as {placement} has no norm per process.")
    return tuple(groups)


def _sum_over_processes(holdings: list[_Holding], sums: list[torch.Tensor]) -> None:
    """All-reduce (sum) in place the sums of the holdings that hold slices, one collective per set of groups."""
    by_groups: dict[tuple, list[int]] = {}
    for position, holding in enumerate(holdings):
        if holding.groups:
            by_groups.setdefault(tuple(id(group) for group in holding.groups), []).append(position)
    for positions in by_groups.values():
        groups = holdings[positions[0]].groups
        stacked = torch.cat([sums[position] for position in positions])
        reduced = stacked.to(_reduction_device(groups, stacked.device))
        for group in groups:
            dist.all_reduce(reduced, group=group)
        for position, part in zip(positions, reduced.split([sums[p].shape[0] for p in positions])):
            sums[position].copy_(part)


def _reduction_device(groups: tuple, device: torch.device) -> torch.device:
    """`device`, unless the tensors live on the CPU (optimizer offload) and a group cannot reduce there (NCCL)."""
    if device.type != "cpu" or all("gloo" in dist.get_backend(group) for group in groups):
        return device
    return torch.device(torch.accelerator.current_accelerator().type, torch.accelerator.current_device_index())


def _trust_ratio(weight_norm: torch.Tensor, update_norm: torch.Tensor) -> torch.Tensor:
    """||w|| / ||update||, or 1 where either norm is zero (a zero-initialised tensor must still move)."""
    ratio = weight_norm / update_norm
    one = torch.ones_like(ratio)
    # Tensor ops, not `.item()`: no host-device sync per parameter on accelerators.
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
