"""Launched by tests/test_distributed.py: ALBERT's LAMB under each engine, the same training run every time.

    torchrun --standalone --nproc_per_node 2 tests/distributed/lamb_engines.py \\
        --checkpoint <folder> --batches <batches.pt> --output_dir <folder> --engines ddp,zero1,zero2,...

A tiny AlbertForPreTraining (one shared layer group applied several times, MLM decoder tied to the word embeddings)
takes STEPS optimizer steps of `Lamb(lamb_parameter_groups(model))` with ALBERT's warmup and linear decay, each on a
global batch of GLOBAL_BATCH rows: 2 processes x ACCUMULATION micro-batches of MICRO_BATCH rows. Losses are
normalized by the global counts of the step (masked tokens, sequences), as Trainer does, so the gradient is that of
one process on the global batch and `reference_training` (plain torch, one process) is the run every engine must
reproduce. Engines: ddp (torch DDP, `no_sync` while accumulating), zero0 (DeepSpeed without ZeRO, fp32),
zero1/zero2/zero3 (`deepspeed.initialize` with LAMB as the client optimizer; zero3 loads the model inside zero.Init with persistence threshold 0 and small
sub-groups, so ZeRO calls LAMB once per sub-group; zero3_persistent with the threshold Trainer's "auto" sets, which
keeps the small tensors whole between steps), zero2_offload/zero3_offload (optimizer states, and for zero3 the
parameters, in CPU memory), fsdp2 (`fully_shard` as fsdp2.yaml wraps). Rank 0 writes each engine's final
parameters to `<engine>.pt`; every rank writes `<engine>.rank<i>.json` with the bytes of LAMB's states it held and
the number of ZeRO partitions registered with it.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from pathlib import Path

import torch
import torch.distributed as dist

from albert_hf.modeling import AlbertForPreTraining
from albert_hf.training.lamb import Lamb, lamb_parameter_groups
from albert_hf.training.schedules import get_albert_polynomial_decay_schedule

REPO_ROOT = Path(__file__).resolve().parents[2]
CONFIGS = REPO_ROOT / "examples" / "accelerate_configs"
STEPS, ACCUMULATION, MICRO_BATCH, WORLD_SIZE = 4, 2, 2, 2
GLOBAL_BATCH = WORLD_SIZE * ACCUMULATION * MICRO_BATCH
LEARNING_RATE, WARMUP_STEPS, TRAINING_STEPS = 1e-2, 1, 5  # the decay reaches 0 after the run, not during it
PERSISTENCE_THRESHOLD = 10 * 32  # Trainer's "auto": 10 x hidden_size of the tests' tiny model
ENGINES = ("ddp", "zero0", "zero1", "zero2", "zero2_offload", "fsdp2", "zero3", "zero3_persistent", "zero3_offload")


def lamb_and_schedule(model: torch.nn.Module) -> tuple[Lamb, torch.optim.lr_scheduler.LRScheduler]:
    optimizer = Lamb(lamb_parameter_groups(model, weight_decay=0.01), lr=LEARNING_RATE)
    schedule = get_albert_polynomial_decay_schedule(optimizer, WARMUP_STEPS, TRAINING_STEPS)
    return optimizer, schedule


def step_rows(batches: dict[str, torch.Tensor], step: int) -> dict[str, torch.Tensor]:
    return {key: value[step * GLOBAL_BATCH : (step + 1) * GLOBAL_BATCH] for key, value in batches.items()}


def micro_batch(batch: dict[str, torch.Tensor], rank: int, micro: int) -> dict[str, torch.Tensor]:
    start = (rank * ACCUMULATION + micro) * MICRO_BATCH
    return {key: value[start : start + MICRO_BATCH] for key, value in batch.items()}


def global_counts(batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor | int]:
    return {"num_items_in_batch": (batch["labels"] != -100).sum(), "num_sequences_in_batch": GLOBAL_BATCH}


def final_parameters(module: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {name: parameter.detach().float().cpu().clone() for name, parameter in module.named_parameters()}


def reference_training(checkpoint: str, batches: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """One process, plain torch, one forward per step on the whole global batch."""
    model = AlbertForPreTraining.from_pretrained(checkpoint)
    model.train()  # the checkpoint has no dropout
    optimizer, schedule = lamb_and_schedule(model)
    for step in range(STEPS):
        batch = step_rows(batches, step)
        model(**batch, **global_counts(batch)).loss.backward()
        optimizer.step()
        schedule.step()
        optimizer.zero_grad(set_to_none=True)
    return final_parameters(model)


def state_bytes(optimizer: Lamb) -> int:
    """Bytes of the moment tensors LAMB holds on this process (local shards for DTensors)."""
    total = 0
    for state in optimizer.state.values():
        for key in ("exp_avg", "exp_avg_sq"):
            tensor = state[key]
            tensor = tensor.to_local() if hasattr(tensor, "to_local") else tensor
            total += tensor.numel() * tensor.element_size()
    return total


# ---- the engines ----------------------------------------------------------------------------------------------------


def train_ddp(checkpoint: str, batches: dict[str, torch.Tensor]):
    from torch.nn.parallel import DistributedDataParallel

    model = AlbertForPreTraining.from_pretrained(checkpoint)
    model.train()
    wrapped = DistributedDataParallel(model)
    optimizer, schedule = lamb_and_schedule(model)
    for step in range(STEPS):
        batch = step_rows(batches, step)
        for micro in range(ACCUMULATION):
            synchronize = micro == ACCUMULATION - 1
            with contextlib.nullcontext() if synchronize else wrapped.no_sync():
                loss = wrapped(**micro_batch(batch, dist.get_rank(), micro), **global_counts(batch)).loss
                (loss * WORLD_SIZE).backward()  # DDP averages over processes
        optimizer.step()
        schedule.step()
        optimizer.zero_grad(set_to_none=True)
    return final_parameters(model), state_bytes(optimizer), 0


def train_fsdp2(checkpoint: str, batches: dict[str, torch.Tensor]):
    from shared_layer_grads import sharded_model
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    model = sharded_model(checkpoint)
    model.train()
    optimizer, schedule = lamb_and_schedule(model)
    for step in range(STEPS):
        batch = step_rows(batches, step)
        for micro in range(ACCUMULATION):
            loss = model(**micro_batch(batch, dist.get_rank(), micro), **global_counts(batch)).loss
            (loss * WORLD_SIZE).backward()  # FSDP2 averages over processes
        optimizer.step()
        schedule.step()
        optimizer.zero_grad(set_to_none=True)
    names = {name for name, _ in model.named_parameters()}
    full = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
    weights = {name: tensor.float().clone() for name, tensor in full.items() if name in names}
    return weights, state_bytes(optimizer), 0


def deepspeed_config(engine: str) -> dict:
    """The shipped DeepSpeed JSON of the stage, its "auto" values filled for this run, fp32."""
    stage = int(engine[4])
    name = {0: "ds_zero2.json", 1: "ds_zero2.json", 2: "ds_zero2.json", 3: "ds_zero3.json"}[stage]
    if engine == "zero3_offload":
        name = "ds_zero3_offload.json"
    config = json.loads((CONFIGS / name).read_text())
    config.pop("optimizer", None)
    config.update(
        train_micro_batch_size_per_gpu=MICRO_BATCH,
        gradient_accumulation_steps=ACCUMULATION,
        train_batch_size=GLOBAL_BATCH,
        gradient_clipping=0.0,
        zero_allow_untested_optimizer=True,  # what Trainer sets for a client optimizer
        zero_force_ds_cpu_optimizer=False,  # offload: keep LAMB instead of requiring DeepSpeedCPUAdam
    )
    config["bf16"] = config["fp16"] = {"enabled": False}
    zero = config["zero_optimization"]
    zero.update(stage=stage, reduce_bucket_size=10**6)
    if stage == 3:
        # Threshold 0 partitions every tensor; Trainer's "auto" (10 x hidden size) keeps the small ones whole for the
        # forward pass (their optimizer states are partitioned all the same).
        threshold = PERSISTENCE_THRESHOLD if engine == "zero3_persistent" else 0
        zero.update(stage3_param_persistence_threshold=threshold, stage3_prefetch_bucket_size=10**6)
        if engine == "zero3":
            zero["sub_group_size"] = 4000  # several sub-groups per parameter group: LAMB is stepped on each
    if engine == "zero2_offload":
        zero["offload_optimizer"] = {"device": "cpu"}
    return config


def train_deepspeed(engine_name: str, checkpoint: str, batches: dict[str, torch.Tensor]):
    import deepspeed
    from transformers.integrations import HfDeepSpeedConfig
    from transformers.integrations.deepspeed import unset_hf_deepspeed_config

    from albert_hf.training.lamb_deepspeed import register_zero_partitions

    config = deepspeed_config(engine_name)
    keep_alive = HfDeepSpeedConfig(config)  # under ZeRO-3 from_pretrained builds the model inside zero.Init
    model = AlbertForPreTraining.from_pretrained(checkpoint)
    if engine_name in ("zero3", "zero3_offload"):
        assert all(p.ds_numel > p.numel() for p in model.parameters()), "ZeRO-3 left a parameter whole"
    model.train()
    optimizer, schedule = lamb_and_schedule(model)
    engine, *_ = deepspeed.initialize(model=model, optimizer=optimizer, config=config)
    stage = config["zero_optimization"]["stage"]
    zero = engine.optimizer if stage == 0 else engine.optimizer.optimizer  # stage 0 in fp32: no wrapper
    assert zero is optimizer, "DeepSpeed replaced the client optimizer"
    partitions = register_zero_partitions(engine)
    assert (partitions > 0) == (stage > 0)
    if engine_name == "zero3_persistent":  # marked by the engine
        persistent = [p.ds_persist for p in engine.module.parameters()]
        assert any(persistent) and not all(persistent), "expected the small tensors persistent, the others not"
    for step in range(STEPS):
        batch = step_rows(batches, step)
        for micro in range(ACCUMULATION):
            loss = engine(**micro_batch(batch, dist.get_rank(), micro), **global_counts(batch)).loss
            # DeepSpeed divides by the accumulation steps and averages over processes.
            engine.backward(loss * WORLD_SIZE * ACCUMULATION)
            engine.step()
        schedule.step()
    parameters = list(engine.module.parameters())
    with deepspeed.zero.GatheredParameters(parameters) if hasattr(parameters[0], "ds_id") else contextlib.nullcontext():
        weights = final_parameters(engine.module)
    held = state_bytes(optimizer)
    engine.destroy()
    del keep_alive
    unset_hf_deepspeed_config()
    return weights, held, partitions


TRAIN = {"ddp": train_ddp, "fsdp2": train_fsdp2}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--batches", required=True)
    parser.add_argument("--output_dir", required=True)
    parser.add_argument("--engines", default=",".join(ENGINES), help="comma-separated, run in this order")
    cli = parser.parse_args()

    dist.init_process_group("gloo")
    assert dist.get_world_size() == WORLD_SIZE, f"expected {WORLD_SIZE} processes, got {dist.get_world_size()}"
    if any(engine.startswith("zero") for engine in cli.engines.split(",")):
        import deepspeed

        from albert_hf.distributed import check_extension_build_locks

        check_extension_build_locks()  # a killed build's lock says so, instead of a wait without end
        deepspeed.init_distributed(dist_backend="gloo")
    batches = torch.load(cli.batches)
    rank = dist.get_rank()
    for engine in cli.engines.split(","):
        train = TRAIN.get(engine) or (lambda *args, engine=engine: train_deepspeed(engine, *args))
        weights, held, partitions = train(cli.checkpoint, batches)
        if rank == 0:
            torch.save(weights, Path(cli.output_dir, f"{engine}.pt"))
        record = {"engine": engine, "rank": rank, "lamb_state_bytes": held, "zero_partitions": partitions}
        Path(cli.output_dir, f"{engine}.rank{rank}.json").write_text(json.dumps(record))
        dist.barrier()


if __name__ == "__main__":
    main()
    dist.destroy_process_group()  # clean exit (see trainer_parity.py)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
