"""Launched by tests/test_distributed.py: gradients of ALBERT's shared layer under FSDP2 and DeepSpeed ZeRO-3, and
training under FSDP2.

    torchrun --standalone --nproc_per_node 2 tests/distributed/shared_layer_grads.py \\
        --checkpoint <folder> --batch <batch.pt> --output_dir <folder> [--engines fsdp2,zero3,fsdp2_train]

The checkpoint's one layer group is applied num_hidden_layers times, so its parameters are gathered once per
application and their gradient is the sum over all applications. Each rank takes its half of the global batch; the
MLM and SOP losses are normalized by the global counts of masked tokens and sequences and scaled by the world size, as Trainer does, so the
averaged gradient is that of one process on the whole batch. Rank 0 writes the full gradients to
`<engine>_grads.pt`; the test compares them with a single-process reference.

`fsdp2_train` takes SGD steps on the sharded model, one per global batch of `--global_batch_size` rows of the
batch file, then gathers the full state dict and saves it with save_pretrained (rank 0) to `<output_dir>/fsdp2_model`,
a checkpoint from_pretrained must load whole.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import torch
import torch.distributed as dist

REPO_ROOT = Path(__file__).resolve().parents[2]
CONFIGS = REPO_ROOT / "examples" / "accelerate_configs"


def local_half(batch: dict[str, torch.Tensor], rank: int, world_size: int) -> dict[str, torch.Tensor]:
    rows = batch["input_ids"].shape[0] // world_size
    return {key: value[rank * rows : (rank + 1) * rows] for key, value in batch.items()}


def scaled_loss(model, batch: dict[str, torch.Tensor], world_size: int) -> torch.Tensor:
    rank = dist.get_rank()
    # Global counts, as Trainer gathers them: masked tokens for the MLM loss, sequences for the SOP loss.
    num_items_in_batch = (batch["labels"] != -100).sum()
    num_sequences_in_batch = batch["input_ids"].shape[0]
    outputs = model(
        **local_half(batch, rank, world_size),
        num_items_in_batch=num_items_in_batch,
        num_sequences_in_batch=num_sequences_in_batch,
    )
    return outputs.loss * world_size


def fsdp2_transformer_classes() -> list[str]:
    """The classes examples/accelerate_configs/fsdp2.yaml wraps in their own FSDP unit."""
    import yaml

    config = yaml.safe_load((CONFIGS / "fsdp2.yaml").read_text())["fsdp_config"]
    return [name.strip() for name in config["fsdp_transformer_layer_cls_to_wrap"].split(",")]


def fsdp2_gradients(checkpoint: str, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """One backward on the sharded model; the full gradients."""
    model = sharded_model(checkpoint)
    scaled_loss(model, batch, dist.get_world_size()).backward()
    return {name: p.grad.full_tensor() for name, p in model.named_parameters()}


def zero3_gradients(checkpoint: str, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """from_pretrained under zero.Init (every tensor partitioned: persistence threshold 0), one engine backward."""
    import deepspeed
    from deepspeed.utils import safe_get_full_grad
    from transformers.integrations import HfDeepSpeedConfig

    from albert_hf.distributed import check_extension_build_locks
    from albert_hf.modeling import AlbertForPreTraining

    check_extension_build_locks()  # a killed build's lock says so, instead of a wait without end
    deepspeed.init_distributed(dist_backend="gloo")
    config = json.loads((CONFIGS / "ds_zero3.json").read_text())
    world_size = dist.get_world_size()
    micro_batch = batch["input_ids"].shape[0] // world_size
    config.update(
        train_micro_batch_size_per_gpu=micro_batch,
        gradient_accumulation_steps=1,
        train_batch_size=micro_batch * world_size,
        gradient_clipping=0.0,
        zero_allow_untested_optimizer=True,
    )
    config["bf16"] = config["fp16"] = {"enabled": False}
    zero = config["zero_optimization"]
    zero.update(stage3_param_persistence_threshold=0, reduce_bucket_size=10**6, stage3_prefetch_bucket_size=10**6)

    keep_alive = HfDeepSpeedConfig(config)  # makes from_pretrained build the model inside zero.Init  # noqa: F841
    model = AlbertForPreTraining.from_pretrained(checkpoint)
    assert all(p.ds_numel > p.numel() for p in model.parameters()), "ZeRO-3 left a parameter whole"
    optimizer = torch.optim.SGD(model.parameters(), lr=0.0)
    engine, *_ = deepspeed.initialize(model=model, optimizer=optimizer, config=config)
    engine.backward(scaled_loss(engine, batch, world_size))
    # safe_get_full_grad gathers the partitioned gradient: a collective, so every rank calls it for every parameter.
    return {name: safe_get_full_grad(p).clone() for name, p in engine.module.named_parameters()}


def sharded_model(checkpoint: str):
    """The checkpoint's model under FSDP2, wrapped as accelerate's FSDP2 preparation does."""
    from torch.distributed.fsdp import fully_shard

    from albert_hf.modeling import AlbertForPreTraining

    model = AlbertForPreTraining.from_pretrained(checkpoint)
    wrapped = fsdp2_transformer_classes()
    for module in reversed(list(model.modules())):
        if type(module).__name__ in wrapped:
            fully_shard(module)
    fully_shard(model)
    assert all(type(p).__name__ == "DTensor" for p in model.parameters()), "FSDP2 left a parameter unsharded"
    return model


def fsdp2_train(
    checkpoint: str, batches: dict[str, torch.Tensor], global_batch_size: int, learning_rate: float, output_dir: str
) -> None:
    """SGD steps under FSDP2 (optimizer on the sharded parameters), then a full, consolidated save."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    model = sharded_model(checkpoint)
    model.train()
    optimizer = torch.optim.SGD(model.parameters(), lr=learning_rate)
    num_rows = batches["input_ids"].shape[0]
    for start in range(0, num_rows - global_batch_size + 1, global_batch_size):
        batch = {key: value[start : start + global_batch_size] for key, value in batches.items()}
        scaled_loss(model, batch, dist.get_world_size()).backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    # A collective: every rank takes part; rank 0 gets the full tensors on the CPU.
    state = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
    if dist.get_rank() == 0:
        from albert_hf.modeling import AlbertForPreTraining

        whole = AlbertForPreTraining(model.config)
        whole.load_state_dict(state)
        whole.save_pretrained(Path(output_dir, "fsdp2_model"))


ENGINES = {"fsdp2": fsdp2_gradients, "zero3": zero3_gradients}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--batch", required=True)
    parser.add_argument("--output_dir", required=True)
    parser.add_argument("--engines", default="fsdp2,zero3", help="comma-separated, run in this order")
    parser.add_argument("--global_batch_size", type=int, default=8, help="fsdp2_train: rows per SGD step")
    parser.add_argument("--learning_rate", type=float, default=0.5, help="fsdp2_train: SGD learning rate")
    cli = parser.parse_args()

    dist.init_process_group("gloo")
    assert dist.get_world_size() == 2, f"expected 2 processes, got {dist.get_world_size()}"
    batch = torch.load(cli.batch)
    # FSDP2 first: once HfDeepSpeedConfig exists, every later from_pretrained would run inside zero.Init.
    for engine in cli.engines.split(","):
        if engine == "fsdp2_train":
            fsdp2_train(cli.checkpoint, batch, cli.global_batch_size, cli.learning_rate, cli.output_dir)
            dist.barrier()
            continue
        gradients = ENGINES[engine](cli.checkpoint, batch)
        if dist.get_rank() == 0:
            torch.save(gradients, Path(cli.output_dir, f"{engine}_grads.pt"))
        dist.barrier()


if __name__ == "__main__":
    main()
    dist.destroy_process_group()  # clean exit (see trainer_parity.py)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
