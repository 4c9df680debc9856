"""LAMB inside DeepSpeed ZeRO: read from DeepSpeed how the flat fp32 partitions it hands the optimizer are made of
whole tensors, and register that layout with [`Lamb`].

ZeRO (stages 1 to 3, with or without optimizer offload) does not give the client optimizer the model's tensors: it
replaces each parameter group's tensors by one flat fp32 partition per process (stage 3: one per sub-group), a
concatenation of slices of the group's tensors cut at arbitrary points. An optimizer that takes a norm per tensor it
is given would take it over a whole partition: another optimizer for every world size. `register_zero_partitions`
tells `Lamb` which elements of each partition belong to which tensor, so that it sums each tensor's squares over the
processes instead.

DeepSpeed has no public API for that layout, so this module reads these attributes of its ZeRO optimizers (checked
against deepspeed 0.19.8, all in `_zero_attribute`, which names the missing one if a release renames it):
  * stages 1 and 2 (`DeepSpeedZeroOptimizer`): `bit16_groups` (each group's model parameters, in flattening order),
    `single_partition_of_fp32_groups` (each group's flat fp32 partition), `dp_process_group`, and each parameter's
    `_hp_mapping` (DeepSpeed's `tensor_fragment`, also behind `deepspeed.utils.safe_get_full_fp32_param`): its
    `hp_fragment` is a view of the partition, whose offset is read from the data pointers;
  * stage 3 (`DeepSpeedZeroOptimizer_Stage3`): `fp16_groups` and `fp32_partitioned_groups_flat` (per sub-group),
    `grad_position` and `get_param_id` (where a parameter's slice lies in its sub-group's partition: what
    `deepspeed.utils.safe_get_local_fp32_param` reads), `dp_process_group`, and the parameters' `ds_numel`.
Every registration checks, with one collective, that the slices of all processes cover every tensor exactly once,
so a change of layout fails at start-up instead of training a different optimizer.
"""

from __future__ import annotations

from collections.abc import Iterator

import torch
import torch.distributed as dist

from .lamb import Lamb, PartitionLayout, Segment

TESTED_WITH = "deepspeed 0.19.8"
# The private attributes read below, per ZeRO optimizer class (tests check that DeepSpeed still assigns them).
STAGE_1_AND_2_ATTRIBUTES = ("bit16_groups", "single_partition_of_fp32_groups", "dp_process_group")
STAGE_3_ATTRIBUTES = ("fp16_groups", "fp32_partitioned_groups_flat", "grad_position", "dp_process_group")


def register_zero_partitions(optimizer) -> int:
    """Register with the `Lamb` inside `optimizer` (a DeepSpeed engine, its ZeRO optimizer, or accelerate's wrapper
    of it) the layout of every flat partition ZeRO gives it. Call it on every process, after `deepspeed.initialize`
    and before the first step. Returns the number of partitions registered: 0 when no ZeRO optimizer wraps a
    `Lamb` (plain DeepSpeed without ZeRO, or another optimizer)."""
    zero, lamb = _zero_and_lamb(optimizer)
    if zero is None or lamb is None:
        return 0
    from deepspeed.runtime.zero.stage3 import DeepSpeedZeroOptimizer_Stage3
    from deepspeed.runtime.zero.stage_1_and_2 import DeepSpeedZeroOptimizer

    if isinstance(zero, DeepSpeedZeroOptimizer_Stage3):
        layouts = list(_stage3_layouts(zero))
    elif isinstance(zero, DeepSpeedZeroOptimizer):
        layouts = list(_stage1_and_2_layouts(zero))
    elif not lamb.holds_foreign_tensors():
        return 0  # DeepSpeed without ZeRO in fp32: LAMB steps the model's own tensors
    else:
        raise RuntimeError(
            f"Lamb under DeepSpeed: {type(zero).__name__} flattens the parameters in a way albert_hf does not read; "
            "LAMB runs exactly under ZeRO stages 1-3 (with or without offload), DDP and FSDP2."
        )
    for flat, layout, numels in layouts:
        _check_coverage(layout, numels)
        lamb.register_partition(flat, layout)
    return len(layouts)


def _zero_and_lamb(optimizer) -> tuple[object | None, Lamb | None]:
    """Follow `.optimizer` from an engine or wrapper down to `Lamb`; the object holding it is the ZeRO optimizer."""
    holder, current = None, optimizer
    for _ in range(5):
        if isinstance(current, Lamb):
            return holder, current
        holder, current = current, getattr(current, "optimizer", None)
        if current is None:
            break
    return None, None


def _zero_attribute(zero, name: str):
    """`zero.<name>`, a DeepSpeed private attribute; a clear error if this DeepSpeed release has none."""
    try:
        return getattr(zero, name)
    except AttributeError:
        raise RuntimeError(
            f"Lamb under DeepSpeed: {type(zero).__name__} has no `{name}`, which albert_hf reads to take LAMB's trust "
            f"ratios per tensor (tested with {TESTED_WITH}). Use DDP or FSDP2, or the tested DeepSpeed release."
        ) from None


def _stage1_and_2_layouts(zero) -> Iterator[tuple[torch.Tensor, PartitionLayout, list[int]]]:
    """One partition per parameter group; a tensor's slice on this process is its `_hp_mapping.hp_fragment`."""
    group = _zero_attribute(zero, "dp_process_group")
    flats = _zero_attribute(zero, "single_partition_of_fp32_groups")
    for params, flat in zip(_zero_attribute(zero, "bit16_groups"), flats, strict=True):
        segments = []
        for index, param in enumerate(params):
            fragment = _zero_attribute(param, "_hp_mapping")  # None where this process holds none of the tensor
            if fragment is not None:
                view = fragment.hp_fragment
                segments.append(Segment(index, _offset_in(flat, view), view.numel()))
        yield flat, PartitionLayout(tuple(segments), len(params), group), [param.numel() for param in params]


def _stage3_layouts(zero) -> Iterator[tuple[torch.Tensor, PartitionLayout, list[int]]]:
    """One partition per sub-group, the concatenation of each tensor's equal slice; the last process's slice of a
    tensor ends in padding (DeepSpeed leaves it uninitialised), which belongs to no segment."""
    group = _zero_attribute(zero, "dp_process_group")
    rank = dist.get_rank(group)
    positions, param_id = _zero_attribute(zero, "grad_position"), _zero_attribute(zero, "get_param_id")
    flats = _zero_attribute(zero, "fp32_partitioned_groups_flat")
    for sub_group, (params, flat) in enumerate(zip(_zero_attribute(zero, "fp16_groups"), flats, strict=True)):
        segments = []
        for index, param in enumerate(params):
            position_group, start, slice_size = positions[param_id(param)]
            if position_group != sub_group:
                raise RuntimeError(
                    f"Lamb under DeepSpeed: a parameter of sub-group {sub_group} lies in {position_group}."
                )
            length = min(slice_size, max(0, param.ds_numel - rank * slice_size))
            if length:
                segments.append(Segment(index, int(start), int(length)))
        yield flat, PartitionLayout(tuple(segments), len(params), group), [param.ds_numel for param in params]


def _offset_in(flat: torch.Tensor, view: torch.Tensor) -> int:
    """Where the view `view` starts in `flat`, in elements; an error unless it lies inside it."""
    offset, remainder = divmod(view.data_ptr() - flat.data_ptr(), flat.element_size())
    inside = view.untyped_storage().data_ptr() == flat.untyped_storage().data_ptr() and view.is_contiguous()
    if not inside or remainder or not 0 <= offset <= offset + view.numel() <= flat.numel():
        raise RuntimeError(
            f"Lamb under DeepSpeed: a parameter's fp32 fragment is not a slice of its group's flat partition (tested "
            f"with {TESTED_WITH}); its trust ratio cannot be taken per tensor."
        )
    return offset


def _check_coverage(layout: PartitionLayout, numels: list[int]) -> None:
    """All processes' segments together hold every tensor's `numel` elements, no more, no fewer (one collective)."""
    from deepspeed.accelerator import get_accelerator

    held = torch.zeros(layout.num_tensors, dtype=torch.float64)
    for segment in layout.segments:
        held[segment.tensor] += segment.length
    held = held.to(get_accelerator().current_device_name())  # NCCL reduces on the GPU only
    dist.all_reduce(held, group=layout.process_group)
    held, expected = held.cpu(), torch.tensor(numels, dtype=torch.float64)
    if not torch.equal(held, expected):
        wrong = (held != expected).nonzero().flatten().tolist()
        raise RuntimeError(
            f"Lamb under DeepSpeed: the partitions read from DeepSpeed do not hold tensors {wrong} exactly once "
            f"({held[wrong].tolist()} elements instead of {expected[wrong].tolist()}; tested with {TESTED_WITH})."
        )
