"""The divergence guard under every engine: DDP, DeepSpeed ZeRO-2/3 and FSDP2, 2 processes on CPU (gloo).

One `torchrun` per engine runs tests/distributed/guard_worker.py: AlbertPretrainingTrainer (AdamW, a decaying
learning rate, snapshot every step) whose loss is NaN on process 0 only at step 4, then, in the same processes, the
same run on the data without the two global batches the guard skips (steps 3 and 4). The guarded run must roll back
on both processes together (the loss is averaged over them before it is judged: process 1's own loss was finite),
continue to the last step, and end with weights equal to the reference's bit for bit: the weights and the AdamW moments
(the NaN step made both NaN on every process), the scheduler and the step counter all went back to the state after
step 2. Under ZeRO-3 some tensors stay whole on every process (persistence threshold 100) and the others are
partitioned, so both of ZeRO-3's restore paths are exercised.
"""

from __future__ import annotations

import json
import math
from types import SimpleNamespace

import pytest
import torch
from helpers.distributed import (
    WORKERS,
    engine_arguments,
    max_difference,
    run_torchrun,
    save_random_pretraining_batches,
    tiny_config,
)
from helpers.optional import engines
from trainer_parity import deepspeed_config

import albert_hf.training.divergence as divergence
from albert_hf.errors import UserError
from albert_hf.modeling import AlbertForPreTraining
from albert_hf.pretraining.trainer import AlbertPretrainingTrainer, PretrainingArguments, pretraining_callbacks
from albert_hf.training.callbacks import attach_reliability
from albert_hf.training.divergence import divergence_guard_of, unsupported_engine

GLOBAL_BATCH, STEPS, SEQ_LEN, BAD_STEP = 8, 6, 12, 4


def engine_flags(engine: str, folder) -> list[str]:
    if engine != "zero3":
        return engine_arguments(engine, folder)
    config = deepspeed_config(engine)
    config["zero_optimization"]["stage3_param_persistence_threshold"] = 100  # biases and norms whole, matrices split
    path = folder / "ds_zero3.json"
    path.write_text(json.dumps(config))
    return ["--deepspeed", str(path)]


@pytest.mark.distributed
@pytest.mark.parametrize("engine", engines("ddp", "zero2", "zero3", "fsdp2"))
def test_nan_on_one_process_rolls_back_and_ends_as_the_run_without_those_batches(engine, tmp_path):
    torch.manual_seed(0)
    checkpoint = tmp_path / "checkpoint"
    AlbertForPreTraining(tiny_config()).save_pretrained(checkpoint)  # dropout on: the RNG states are restored too
    batches = save_random_pretraining_batches(tmp_path / "batches.pt", GLOBAL_BATCH * (STEPS + 2), SEQ_LEN, seed=1)
    output = tmp_path / "output"
    output.mkdir()
    env = {"FSDP_ON_CPU": "1"} if engine == "fsdp2" else {}
    result = run_torchrun(
        WORKERS / "guard_worker.py",
        str(checkpoint),
        str(batches),
        str(output),
        "--",
        *engine_flags(engine, tmp_path),
        env=env,
    )
    assert result.returncode == 0, f"{result.stdout[-3000:]}\n{result.stderr[-6000:]}"
    records = [json.loads((output / f"rank{rank}.json").read_text()) for rank in (0, 1)]
    for record in records:
        poisoned, skipped = record["poisoned"], record["skipped"]
        assert poisoned["world_size"] == poisoned["torch_world_size"] == 2
        # Both processes rolled back once, from the NaN step to the snapshot before the step it judged.
        assert [(e["divergence_rollback_from_step"], e["divergence_rollback_to_step"]) for e in poisoned["events"]] == [
            (BAD_STEP, BAD_STEP - 2)
        ], engine
        assert poisoned["events"][0]["divergence_skipped_batches"] == 2  # steps 3 and 4, 1 micro-batch each
        assert skipped["events"] == []
        assert poisoned["global_step"] == skipped["global_step"] == STEPS
        if engine == "zero3":
            assert record["poisoned"]["zero3_persistent"] > 0 and record["poisoned"]["zero3_partitioned"] > 0
    guarded, reference = torch.load(output / "poisoned.pt"), torch.load(output / "skipped.pt")
    initial = AlbertForPreTraining.from_pretrained(checkpoint).state_dict()
    assert all(math.isfinite(value.float().abs().max().item()) for value in guarded.values())
    assert max_difference(reference, {key: initial[key] for key in reference}) > 1e-3  # training moved the weights
    difference = max_difference(guarded, reference)
    assert difference == 0, f"{engine}: the guarded run ends {difference} away from the run without those batches"


# ---- engines the guard does not cover: refused at start, never silently unguarded --------------------------------


def engine_of(deepspeed_stage: int | None = None, fsdp_version: int | None = None) -> SimpleNamespace:
    """What `unsupported_engine` reads of a Trainer: its flags and accelerate's plugins."""
    state = SimpleNamespace(
        deepspeed_plugin=SimpleNamespace(zero_stage=deepspeed_stage),
        fsdp_plugin=SimpleNamespace(fsdp_version=fsdp_version),
    )
    return SimpleNamespace(
        is_deepspeed_enabled=deepspeed_stage is not None,
        is_fsdp_enabled=fsdp_version is not None,
        accelerator=SimpleNamespace(state=state),
    )


@pytest.mark.parametrize(
    "engine, problem",
    [
        (engine_of(deepspeed_stage=0), "DeepSpeed without ZeRO (zero_optimization.stage 0) is not supported"),
        (engine_of(fsdp_version=1), "FSDP1 is not supported: use FSDP2"),
        (engine_of(deepspeed_stage=1), None),
        (engine_of(deepspeed_stage=3), None),
        (engine_of(fsdp_version=2), None),
        (engine_of(), None),
    ],
)
def test_engines_without_a_guard_are_named(engine, problem):
    found = unsupported_engine(engine)
    assert (found is None) if problem is None else found.startswith(problem)


def test_the_pretraining_trainer_refuses_the_guard_on_such_an_engine(monkeypatch, tmp_path):
    monkeypatch.setattr(divergence, "unsupported_engine", lambda trainer: "FSDP1 is not supported")
    arguments = PretrainingArguments(output_dir=str(tmp_path), use_cpu=True, report_to=[])
    with pytest.raises(UserError, match=r"^--divergence_guard: FSDP1 is not supported; or turn the guard off with"):
        trainer = AlbertPretrainingTrainer(model=AlbertForPreTraining(tiny_config()), args=arguments)
        attach_reliability(trainer, callbacks=pretraining_callbacks(trainer))
    guard_off = PretrainingArguments(output_dir=str(tmp_path), use_cpu=True, report_to=[], divergence_guard=False)
    trainer = AlbertPretrainingTrainer(model=AlbertForPreTraining(tiny_config()), args=guard_off)
    attach_reliability(trainer, callbacks=pretraining_callbacks(trainer))
    assert divergence_guard_of(trainer) is None
