"""Launched by tests/test_distributed.py: train a tiny AlbertForPreTraining (MLM) with Trainer under one engine.

    torchrun --standalone --nproc_per_node 2 tests/distributed/trainer_parity.py \\
        --engine zero3 --checkpoint <folder> --data <batches.pt> --output_dir <folder>

Plain SGD without clipping, constant learning rate, dropout 0: the final weights must equal those of one process
trained on the same global batches, and a wrong gradient scale (e.g. the loss not normalized by the global number
of masked tokens) shows at once. Each rank writes `rank<i>.json` (world size, the rows it trained on per step,
whether ZeRO-3 had partitioned the weights after from_pretrained); Trainer saves the final (consolidated) weights.
`run_training(..., engine="single")` is the single-process reference, called by the test in its own process.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import torch
from transformers import Trainer, TrainingArguments, default_data_collator

REPO_ROOT = Path(__file__).resolve().parents[2]
DEEPSPEED_CONFIGS = {
    "zero2": REPO_ROOT / "examples" / "accelerate_configs" / "ds_zero2.json",
    "zero3": REPO_ROOT / "examples" / "accelerate_configs" / "ds_zero3.json",
}
ENGINES = ("single", "ddp", "zero2", "zero3")
LEARNING_RATE = 0.5


def deepspeed_config(engine: str) -> dict | None:
    """The shipped DeepSpeed JSON; for ZeRO-3 with persistence threshold 0 so that every tiny tensor is partitioned
    (the default keeps tensors under 10 * hidden_size whole, i.e. all of a test model)."""
    if engine not in DEEPSPEED_CONFIGS:
        return None
    config = json.loads(DEEPSPEED_CONFIGS[engine].read_text())
    if engine == "zero3":
        config["zero_optimization"]["stage3_param_persistence_threshold"] = 0
    return config


class RecordingTrainer(Trainer):
    """Trainer that remembers the (unpadded) rows of input_ids each training step received on this process."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.rows_per_step: list[list[list[int]]] = []

    def training_step(self, model, inputs, num_items_in_batch=None):
        rows = [ids[mask.bool()].tolist() for ids, mask in zip(inputs["input_ids"], inputs["attention_mask"])]
        self.rows_per_step.append(rows)
        return super().training_step(model, inputs, num_items_in_batch)


def run_training(engine: str, checkpoint: str, data: str, output_dir: str, per_device_batch_size: int) -> dict:
    """Train with `engine`; returns this process's record (also written to output_dir/rank<i>.json)."""
    from albert_hf.distributed import init_distributed
    from albert_hf.modeling import AlbertForPreTraining

    batches = torch.load(data)  # dict of (N, T) tensors, N = global batch size x steps
    # MLM only: Trainer counts `labels` for num_items_in_batch but passes no global sequence count, so the SOP loss
    # would be a per-process mean that Trainer then multiplies by the world size (the pretraining job's own Trainer
    # must pass num_sequences_in_batch; its test covers that).
    batches.pop("sentence_order_label", None)
    num_rows = batches["input_ids"].shape[0]
    args = TrainingArguments(
        output_dir=output_dir,
        use_cpu=True,
        per_device_train_batch_size=per_device_batch_size,
        max_steps=num_rows // (per_device_batch_size * int(os.environ.get("WORLD_SIZE", "1"))),
        optim="sgd",
        learning_rate=LEARNING_RATE,
        lr_scheduler_type="constant",
        max_grad_norm=0.0,  # no clipping: it would hide a wrong gradient scale
        weight_decay=0.0,
        seed=0,
        report_to=[],
        save_strategy="no",
        logging_strategy="no",
        disable_tqdm=True,
        dataloader_drop_last=True,
        deepspeed=deepspeed_config(engine),
    )
    init_distributed(args)

    model = AlbertForPreTraining.from_pretrained(checkpoint)  # under ZeRO-3 this runs inside zero.Init
    partitioned = all(getattr(p, "ds_numel", 0) > p.numel() for p in model.parameters())
    dataset = [{key: value[i] for key, value in batches.items()} for i in range(num_rows)]
    trainer = RecordingTrainer(model=model, args=args, train_dataset=dataset, data_collator=default_data_collator)
    trainer.train()
    trainer.save_model(output_dir)  # ZeRO-3: gathers the 16-bit weights into one safetensors file

    record = {
        "engine": engine,
        "world_size": args.world_size,
        "torch_world_size": torch.distributed.get_world_size() if torch.distributed.is_initialized() else 1,
        "process_index": args.process_index,
        "partitioned_after_from_pretrained": partitioned,
        "rows_per_step": trainer.rows_per_step,
    }
    Path(output_dir, f"rank{args.process_index}.json").write_text(json.dumps(record))
    return record


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engine", choices=ENGINES, required=True)
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--data", required=True)
    parser.add_argument("--output_dir", required=True)
    parser.add_argument("--per_device_batch_size", type=int, default=4)
    parser.add_argument("--expected_world_size", type=int, default=2)
    cli = parser.parse_args()
    record = run_training(cli.engine, cli.checkpoint, cli.data, cli.output_dir, cli.per_device_batch_size)
    # Both the launcher's group and Trainer must see every process (the silent independent-jobs trap).
    assert record["world_size"] == record["torch_world_size"] == cli.expected_world_size, record


if __name__ == "__main__":
    main()
    # Clean exit: without it a rank sometimes aborts at interpreter shutdown ("terminate called without an active
    # exception") and torchrun fails the job.
    if torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
