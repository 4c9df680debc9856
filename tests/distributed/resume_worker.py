"""Launched by tests/test_resume_distributed.py: crash a run in the middle of a save, resume it, compare.

    torchrun --standalone --nproc_per_node 2 tests/distributed/resume_worker.py \\
        --engine zero3 --checkpoint <folder> --workdir <folder>

In one launch (every process start costs seconds of imports), with a `ReliableTrainer` on a tiny classifier:
  1. reference: 6 steps uninterrupted, saving every 2 steps; the final model saved with `save_model`;
  2. crashed: the same run, where every rank raises in the middle of writing checkpoint-4 (model and optimizer
     written, RNG states and trainer state not), as a process dying there would leave it; the test then checks that
     checkpoint-4 has no final name and `latest_checkpoint` is checkpoint-2;
  3. resumed: a new Trainer resumed from `latest_checkpoint`, to step 6; its final model saved with `save_model`.
Each rank writes `<workdir>/rank<i>.json` (world size, what it saw after the crash). Weights are compared by the test.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import torch
from transformers import TrainingArguments

sys.path.insert(0, str(Path(__file__).resolve().parent))
from trainer_parity import deepspeed_config  # noqa: E402

MAX_STEPS, SAVE_STEPS, CRASH_STEP = 6, 2, 4
ENGINES = ("ddp", "zero2", "zero3", "fsdp2")


class SaveCrash(RuntimeError):
    pass


class FixedRows(torch.utils.data.Dataset):
    def __init__(self, size: int = 48, length: int = 8, vocab_size: int = 50):
        generator = torch.Generator().manual_seed(0)
        self.input_ids = torch.randint(5, vocab_size, (size, length), generator=generator)
        self.labels = torch.randint(0, 2, (size,), generator=generator)

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, index: int) -> dict:
        return {"input_ids": self.input_ids[index], "labels": self.labels[index]}


def arguments(engine: str, output_dir: Path) -> TrainingArguments:
    extra = {}
    if engine in ("zero2", "zero3"):
        extra["deepspeed"] = deepspeed_config(engine)
    if engine == "fsdp2":
        # Trainer enables FSDP only on GPU-like devices: relabel the CPU/gloo state as multi-GPU so that it really
        # shards (otherwise the run is silently plain DDP).
        from accelerate import PartialState
        from accelerate.utils import DistributedType

        state = PartialState(cpu=True, backend="gloo")
        state.distributed_type = DistributedType.MULTI_GPU
        extra.update(
            fsdp="full_shard",
            accelerator_config={"use_configured_state": True},
            fsdp_config={
                "fsdp_version": 2,
                "transformer_layer_cls_to_wrap": ["AlbertLayerGroup"],
                "state_dict_type": "FULL_STATE_DICT",
                "reshard_after_forward": True,
            },
        )
    return TrainingArguments(
        output_dir=str(output_dir),
        use_cpu=True,
        max_steps=MAX_STEPS,
        per_device_train_batch_size=2,
        learning_rate=1e-2,
        save_strategy="steps",
        save_steps=SAVE_STEPS,
        logging_steps=1,
        report_to=[],
        disable_tqdm=True,
        seed=0,
        dataloader_drop_last=True,
        ddp_backend="gloo",
        **extra,
    )


def make_trainer(engine: str, checkpoint: str, output_dir: Path, crash: bool):
    from albert_hf.distributed import init_distributed
    from albert_hf.modeling import AlbertForSequenceClassification
    from albert_hf.training.reliability import ReliableTrainer

    args = arguments(engine, output_dir)
    init_distributed(args)
    model = AlbertForSequenceClassification.from_pretrained(checkpoint)  # under ZeRO-3 inside zero.Init

    class Trainer(ReliableTrainer):
        def _save_rng_state(self, output_dir):
            if crash and self.state.global_step == CRASH_STEP:
                raise SaveCrash(f"injected crash while writing {output_dir}")
            super()._save_rng_state(output_dir)

    return Trainer(model=model, args=args, train_dataset=FixedRows())


def main() -> None:
    from albert_hf.training.reliability import latest_checkpoint

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engine", choices=ENGINES, required=True)
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--workdir", required=True)
    cli = parser.parse_args()
    workdir = Path(cli.workdir)

    reference = make_trainer(cli.engine, cli.checkpoint, workdir / "reference", crash=False)
    reference.train()
    reference.save_model()

    crashed_dir = workdir / "crashed"
    crashed = make_trainer(cli.engine, cli.checkpoint, crashed_dir, crash=True)
    try:
        crashed.train()
        crash_error = None
    except SaveCrash as error:
        crash_error = str(error)
    torch.distributed.barrier()
    after_crash = {
        "error": crash_error,
        "latest": latest_checkpoint(crashed_dir),
        "checkpoints": sorted(p.name for p in crashed_dir.glob("checkpoint-*")),
    }
    torch.distributed.barrier()

    resumed = make_trainer(cli.engine, cli.checkpoint, crashed_dir, crash=False)
    resumed.train(resume_from_checkpoint=after_crash["latest"])
    resumed.save_model()

    args = resumed.args
    record = {
        "engine": cli.engine,
        "world_size": args.world_size,
        "torch_world_size": torch.distributed.get_world_size(),
        "fsdp": bool(resumed.is_fsdp_enabled),
        "deepspeed": bool(resumed.is_deepspeed_enabled),
        "after_crash": after_crash,
        "global_step": resumed.state.global_step,
    }
    (workdir / f"rank{args.process_index}.json").write_text(json.dumps(record))


if __name__ == "__main__":
    main()
    # Clean exit (see trainer_parity.py).
    if torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
